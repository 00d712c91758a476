"""gdn_prefill_qk4_v8_d128_k_last: the prefill of a batch of variable-length sequences, as a
flashinfer-bench Definition, and everything the harness needs to know about it (PREFILL).

Shapes (T = total_seq_len, N = num_seqs): q, k [T, 4, 128] bf16; v [T, 8, 128] bf16; state
[N, 8, 128, 128] f32 (K-last, optional); A_log, dt_bias [8] f32; a, b [T, 8] bf16;
cu_seqlens [N + 1] int64; scale f32 scalar. Outputs: output [T, 8, 128] bf16 and new_state
[N, 8, 128, 128] f32. The axes, constraints, input order and dtypes are the official
definition's; the reference is the text of gdn_bench/definitions/prefill/reference.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gdn_bench.algos import Algo, baseline_config
from gdn_bench.definitions.spec import DefinitionSpec, Harness, tensor
from gdn_bench.paths import EMBEDDED_PATH
from gdn_bench.roles import BASELINE, REFERENCE
from gdn_bench.shapes import HEAD_SIZE, NUM_Q_HEADS, NUM_V_HEADS

if TYPE_CHECKING:  # flashinfer-bench is imported where it is used (gdn_bench.definitions.spec says why)
    from flashinfer_bench import Definition, TraceSet, Workload

NAME = "gdn_prefill_qk4_v8_d128_k_last"
REFERENCE_PATH = Path(__file__).with_name("reference.py")
# CPU pass on a trace set given with --dataset: at most this many workloads of at most this
# many tokens, in file order (the embedded subset fits whole).
CPU_MAX_TOKENS, CPU_MAX_WORKLOADS = 128, 6


def build_definition() -> Definition:
    """The prefill definition, with this project's reference."""
    from flashinfer_bench import AxisConst, AxisVar, Definition

    per_token = ["total_seq_len", "num_v_heads"]
    state = ["num_seqs", "num_v_heads", "head_size", "head_size"]
    return Definition(
        name=NAME,
        op_type="gdn",
        description=(
            "Gated Delta Net prefill, Qwen3-Next linear attention at TP=4 (4 q/k heads, 8 v heads, "
            "head size 128): variable-length sequences packed along tokens (cu_seqlens), state in "
            "K-last layout [N, HV, V, K]."
        ),
        tags=["stage:prefill", "model:qwen3-next", "layout:k-last"],
        axes={
            "total_seq_len": AxisVar(description="Tokens of all sequences together."),
            "num_seqs": AxisVar(description="Sequences in the batch."),
            "num_q_heads": AxisConst(value=NUM_Q_HEADS, description="Query heads (16 / TP 4)."),
            "num_k_heads": AxisConst(value=NUM_Q_HEADS, description="Key heads (16 / TP 4)."),
            "num_v_heads": AxisConst(value=NUM_V_HEADS, description="Value heads (32 / TP 4)."),
            "head_size": AxisConst(value=HEAD_SIZE),
            "len_cu_seqlens": AxisVar(description="Length of cu_seqlens: num_seqs + 1."),
        },
        constraints=["len_cu_seqlens == num_seqs + 1", "total_seq_len == cu_seqlens[-1].item()"],
        inputs={
            "q": tensor(["total_seq_len", "num_q_heads", "head_size"], "bfloat16", "Query."),
            "k": tensor(["total_seq_len", "num_k_heads", "head_size"], "bfloat16", "Key."),
            "v": tensor(["total_seq_len", "num_v_heads", "head_size"], "bfloat16", "Value."),
            "state": tensor(state, "float32", "Initial state per sequence [N, HV, V, K] (optional: None = 0)."),
            "A_log": tensor(["num_v_heads"], "float32", "Log decay rate per v-head."),
            "a": tensor(per_token, "bfloat16", "Decay input, through softplus(a + dt_bias)."),
            "dt_bias": tensor(["num_v_heads"], "float32", "Decay bias per v-head."),
            "b": tensor(per_token, "bfloat16", "Update gate logit: beta = sigmoid(b)."),
            "cu_seqlens": tensor(["len_cu_seqlens"], "int64", "Sequence n is tokens cu_seqlens[n]:cu_seqlens[n+1]."),
            "scale": tensor(None, "float32", "Output scale; 0 or None means 1/sqrt(head_size)."),
        },
        outputs={
            "output": tensor(["total_seq_len", "num_v_heads", "head_size"], "bfloat16",
                            "scale * (S_t @ q_t) for every token."),
            "new_state": tensor(state, "float32", "Final state per sequence, K-last; zero for an empty sequence."),
        },
        reference=REFERENCE_PATH.read_text(encoding="utf-8"),
    )


def token_bucket(axes: dict) -> int:
    """Report group: total_seq_len rounded up to a power of two."""
    return 1 << (max(axes["total_seq_len"], 1) - 1).bit_length()


def cpu_subset(workloads: list[Workload]) -> list[Workload]:
    """The first CPU_MAX_WORKLOADS workloads of at most CPU_MAX_TOKENS tokens."""
    return [w for w in workloads if w.axes["total_seq_len"] <= CPU_MAX_TOKENS][:CPU_MAX_WORKLOADS]


def workload_kind(w: Workload) -> str:
    """How a workload's inputs are made: unit-norm keys from its blob (mix) or random ones."""
    stored = w.inputs["k"].type == "safetensors"
    return "random, unit-norm keys" if stored else "random"


def default_dataset(gpu: bool) -> Path:
    """The generated mix on a GPU (written into the cache folder on first use), the embedded
    trace set and its CPU subset on a CPU (gdn_bench.definitions.prefill.mix)."""
    from gdn_bench.definitions.prefill.mix import contest_mix_root

    return contest_mix_root(build_definition()) if gpu else EMBEDDED_PATH


def planned_workloads() -> list[Workload]:
    """The generated mix's workloads, without writing it."""
    from gdn_bench.definitions.prefill.mix import contest_mix_workloads

    return contest_mix_workloads(build_definition())


def write_embedded(trace_set: TraceSet, name: str, seed: int) -> None:
    """Prefill's part of the embedded trace set: its CPU subset."""
    from gdn_bench.definitions.prefill.mix import write_embedded_subset

    write_embedded_subset(trace_set, name, seed)


def _config(name: str):
    return baseline_config(name, NAME)


SUBMISSION = "triton-chunked"
LIBRARY = "fla-chunk"  # flash-linear-attention's kernel, what a user would otherwise call
TOKEN_LOOP = "fla-loop"  # flash-linear-attention's token loop, what a user would call for short sequences
ALGOS = (
    Algo(SUBMISSION, "the submission: chunked Triton prefill (solution/triton/prefill.py)", NAME, None,
         "solution/triton"),
    Algo(REFERENCE, "PyTorch loop over sequences and tokens", NAME, _config(REFERENCE),
         "baselines/prefill/pt_reference", launches=lambda axes: 24 * axes["total_seq_len"]),
    Algo(BASELINE, "FlashInfer chunk_gated_delta_rule, gates in torch (contest baseline)", NAME,
         _config(BASELINE), "baselines/prefill/fi_baseline", needs_gpu=True,
         min_compute_capability=(9, 0), requires=("flashinfer",)),
    Algo(LIBRARY, "flash-linear-attention chunk_gated_delta_rule, gates fused", NAME, _config(LIBRARY),
         "baselines/prefill/fla_chunk", needs_gpu=True, requires=("fla",), extra="baselines"),
    Algo(TOKEN_LOOP, "flash-linear-attention fused_recurrent_gated_delta_rule (token loop), gates fused", NAME,
         _config(TOKEN_LOOP), "baselines/prefill/fla_loop", needs_gpu=True, requires=("fla",), extra="baselines"),
)

PREFILL = DefinitionSpec(
    name=NAME,
    short="prefill",
    summary="prefill of num_seqs variable-length sequences (total_seq_len tokens)",
    build_definition=build_definition,
    reference_path=REFERENCE_PATH,
    algos=ALGOS,
    submission=SUBMISSION,
    size_axis="total_seq_len",
    size_flag="--seq-lens",
    group_of=token_bucket,
    group_label="T≤",
    group_title="total_seq_len (rounded up to a power of two)",
    harness=Harness(warmup=1, iterations=5, trials=3),  # the contest's flags for prefill
    default_dataset=default_dataset,
    planned_workloads=planned_workloads,
    cpu_subset=cpu_subset,
    cpu_subset_note=f"its workloads of at most {CPU_MAX_TOKENS} tokens (up to {CPU_MAX_WORKLOADS}, the first)",
    workload_label=lambda axes: f"T={axes['total_seq_len']} N={axes['num_seqs']}",
    workload_kind=workload_kind,
    write_embedded=write_embedded,
    floor_shape=None,  # a group mixes batches of different N and T: no single memory floor
    job_groups=8,
)

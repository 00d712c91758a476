"""gdn_mtp_qk4_v8_d128_k_last: T tokens per sequence from a state pool (speculative-decoding
verification), as a flashinfer-bench Definition, and everything the harness needs to know about
it (MTP).

The declaration is the official one, word for word (official.json: the definition as
flashinfer-bench's trace set held it before the trace set left that repository, commit
6569a4d6^): q, k [B, T, 4, 128] bf16; v [B, T, 8, 128] bf16; initial_state [pool_size, 8, 128,
128] f32 (K-last); initial_state_indices [B] int32; A_log, dt_bias [8] f32; a, b [B, T, 8] bf16;
scale f32 scalar; intermediate_states_buffer [pool_size, T, 8, 128, 128] f32, an input the call
writes (the state after every token at the row's slot). Outputs: output [B, T, 8, 128] bf16 and
final_state [pool_size, 8, 128, 128] f32, a copy of the pool (the reference does not update
it). Its reference is replaced by the kit's, the same math vectorized over rows and heads
(gdn_bench/definitions/mtp/reference.py), as decode's and prefill's are. The buffer's
`"optional": true` is not a field flashinfer-bench 0.1.2 knows, so it is dropped on loading
(its description still says the buffer is optional).

The harness compares outputs only, as flashinfer-bench does: what a solution writes into
intermediate_states_buffer is checked by the tests (tests/test_mtp_kernel.py), not by run_local.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gdn_bench.algos import Algo, baseline_config
from gdn_bench.definitions.spec import DefinitionSpec, Harness
from gdn_bench.paths import EMBEDDED_PATH
from gdn_bench.roles import BASELINE, REFERENCE
from gdn_bench.shapes import NUM_V_HEADS

if TYPE_CHECKING:  # flashinfer-bench is imported where it is used (gdn_bench.definitions.spec says why)
    from flashinfer_bench import Definition, TraceSet, Workload

NAME = "gdn_mtp_qk4_v8_d128_k_last"
REFERENCE_PATH = Path(__file__).with_name("reference.py")
OFFICIAL_PATH = Path(__file__).with_name("official.json")
# CPU pass on a trace set given with --dataset: at most this many workloads of at most this
# many tokens (batch_size * seq_len) and pool slots, in file order (the embedded subset fits whole).
CPU_MAX_TOKENS, CPU_MAX_POOL, CPU_MAX_WORKLOADS = 16, 16, 4


def official_definition() -> Definition:
    """The official declaration, its own reference included (a Python loop over rows, tokens and heads)."""
    from flashinfer_bench import Definition
    from flashinfer_bench.data import load_json_file

    return load_json_file(Definition, OFFICIAL_PATH)


def build_definition() -> Definition:
    """The official declaration with this project's reference."""
    return official_definition().model_copy(update={"reference": REFERENCE_PATH.read_text(encoding="utf-8")})


def _config(name: str, **kwargs):
    return baseline_config(name, NAME, **kwargs)


SUBMISSION = "triton-mtp"
NO_COPY = "triton-no-copy"  # the same kernel, value-returning: final_state is the pool itself, no copy
LIBRARY = "fla-loop"
ALGOS = (
    Algo(SUBMISSION, "the submission: fused recurrent Triton kernel, T tokens per program (solution/triton/mtp.py)",
         NAME, None, "solution/triton"),
    Algo(NO_COPY, "the submission's kernel, value-returning: the pool itself as final_state, no copy", NAME,
         _config(NO_COPY, language="triton", entry="mtp.py::run"), "solution/triton"),
    Algo(REFERENCE, "PyTorch loop over rows, tokens and heads (the official reference's loop)", NAME,
         _config(REFERENCE), "baselines/mtp/pt_reference",
         launches=lambda axes: 22 * NUM_V_HEADS * axes["batch_size"] * axes["seq_len"]),  # counted on CPU
    Algo(BASELINE, "FlashInfer gated_delta_rule_mtp, pool not updated, the pool itself as final_state", NAME,
         _config(BASELINE), "baselines/mtp/fi_baseline", needs_gpu=True, min_compute_capability=(9, 0),
         requires=("flashinfer",)),
    Algo(LIBRARY, "flash-linear-attention fused_recurrent_gated_delta_rule on gathered states (writes no "
         "intermediate states)", NAME, _config(LIBRARY), "baselines/mtp/fla_loop", needs_gpu=True,
         requires=("fla",), extra="baselines"),
)


def cpu_subset(workloads: list[Workload]) -> list[Workload]:
    """The first CPU_MAX_WORKLOADS workloads of at most CPU_MAX_TOKENS tokens and CPU_MAX_POOL slots."""
    return [w for w in workloads if w.axes["batch_size"] * w.axes["seq_len"] <= CPU_MAX_TOKENS
            and w.axes["pool_size"] <= CPU_MAX_POOL][:CPU_MAX_WORKLOADS]


def workload_kind(w: Workload) -> str:
    """How a workload's inputs are made: unit-norm keys from its blob (mix) or random ones."""
    return "random, unit-norm keys" if w.inputs["k"].type == "safetensors" else "random"


def default_dataset(gpu: bool) -> Path:
    """The generated serving mix on a GPU (written into the cache folder on first use), the
    embedded trace set and its CPU subset on a CPU (gdn_bench.definitions.mtp.mix)."""
    from gdn_bench.definitions.mtp.mix import serving_mix_root

    return serving_mix_root(build_definition()) if gpu else EMBEDDED_PATH


def planned_workloads() -> list[Workload]:
    """The generated serving mix's workloads, without writing it."""
    from gdn_bench.definitions.mtp.mix import serving_mix_workloads

    return serving_mix_workloads(build_definition())


def write_embedded(trace_set: TraceSet, name: str, seed: int) -> None:
    """MTP's part of the embedded trace set: its CPU subset."""
    from gdn_bench.definitions.mtp.mix import write_embedded_subset

    write_embedded_subset(trace_set, name, seed)


MTP = DefinitionSpec(
    name=NAME,
    short="mtp",
    summary="T draft tokens per sequence from a state pool (batch_size sequences, speculative-decoding verify)",
    build_definition=build_definition,
    reference_path=REFERENCE_PATH,
    algos=ALGOS,
    submission=SUBMISSION,
    size_axis="batch_size",
    size_flag="--batch-sizes",
    group_of=lambda axes: axes["batch_size"],
    group_label="B",
    group_title="batch size",
    harness=Harness(warmup=10, iterations=50, trials=3),  # flashinfer-bench's defaults, as decode's
    default_dataset=default_dataset,
    planned_workloads=planned_workloads,
    cpu_subset=cpu_subset,
    cpu_subset_note=(f"its workloads of at most {CPU_MAX_TOKENS} tokens and {CPU_MAX_POOL} pool slots (up to "
                     f"{CPU_MAX_WORKLOADS}, the first)"),
    workload_label=lambda axes: f"B={axes['batch_size']} T={axes['seq_len']} P={axes['pool_size']}",
    workload_kind=workload_kind,
    write_embedded=write_embedded,
    floor_shape=None,  # a group mixes draft lengths and pool sizes: no single memory floor
    job_groups=7,  # as many as the mix has batch sizes
    reference_launches=lambda axes: 44 + 10 * axes["seq_len"],  # a loop over tokens, counted on CPU
)

"""gdn_decode_qk4_v8_d128_k_last: one decode step, as a flashinfer-bench Definition, and
everything the harness needs to know about it (DECODE).

Shapes: q, k [B, 1, 4, 128] bf16; v [B, 1, 8, 128] bf16; state [B, 8, 128, 128] f32 (K-last,
optional); A_log, dt_bias [8] f32; a, b [B, 1, 8] bf16; scale f32 scalar. Outputs: output
[B, 1, 8, 128] bf16 and new_state [B, 8, 128, 128] f32. The reference is the text of
gdn_bench/definitions/decode/reference.py.
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

NAME = "gdn_decode_qk4_v8_d128_k_last"
REFERENCE_PATH = Path(__file__).with_name("reference.py")
# CPU pass default: the first random workload of B=1 and B=4, and the first model-like one.
CPU_DEFAULT_BATCHES = (1, 4)


def build_definition() -> Definition:
    """The decode definition, with this project's reference."""
    from flashinfer_bench import AxisConst, AxisVar, Definition

    qk = ["batch_size", "seq_len", "num_q_heads", "head_size"]
    per_v_head = ["batch_size", "seq_len", "num_v_heads"]
    state = ["batch_size", "num_v_heads", "head_size", "head_size"]
    return Definition(
        name=NAME,
        op_type="gdn",
        description=(
            "Gated Delta Net decode step, Qwen3-Next linear attention at TP=4 (4 q/k heads, "
            "8 v heads, head size 128), state in K-last layout [B, HV, V, K]."
        ),
        tags=["stage:decode", "model:qwen3-next", "layout:k-last"],
        axes={
            "batch_size": AxisVar(description="Sequences decoded together."),
            "seq_len": AxisConst(value=1, description="One token per decode step."),
            "num_q_heads": AxisConst(value=NUM_Q_HEADS, description="Query heads (16 / TP 4)."),
            "num_k_heads": AxisConst(value=NUM_Q_HEADS, description="Key heads (16 / TP 4)."),
            "num_v_heads": AxisConst(value=NUM_V_HEADS, description="Value heads (32 / TP 4)."),
            "head_size": AxisConst(value=HEAD_SIZE),
        },
        constraints=["num_v_heads % num_q_heads == 0", "num_k_heads == num_q_heads"],
        inputs={
            "q": tensor(qk, "bfloat16", "Query."),
            "k": tensor(["batch_size", "seq_len", "num_k_heads", "head_size"], "bfloat16", "Key."),
            "v": tensor(per_v_head + ["head_size"], "bfloat16", "Value."),
            "state": tensor(state, "float32", "Recurrent state [B, HV, V, K] (optional: None = 0)."),
            "A_log": tensor(["num_v_heads"], "float32", "Log decay rate per v-head."),
            "a": tensor(per_v_head, "bfloat16", "Decay input, through softplus(a + dt_bias)."),
            "dt_bias": tensor(["num_v_heads"], "float32", "Decay bias per v-head."),
            "b": tensor(per_v_head, "bfloat16", "Update gate logit: beta = sigmoid(b)."),
            "scale": tensor(None, "float32", "Output scale; 0 or None means 1/sqrt(head_size)."),
        },
        outputs={
            "output": tensor(per_v_head + ["head_size"], "bfloat16", "scale * (new_state @ q)."),
            "new_state": tensor(state, "float32", "Updated state, K-last like state."),
        },
        reference=REFERENCE_PATH.read_text(encoding="utf-8"),
    )


def state_shape(batch: int) -> tuple[int, ...]:
    """The shape of the float32 state at batch size `batch`: its copy is the memory floor."""
    definition = build_definition()
    return tuple(dict(zip(definition.inputs, definition.get_input_shapes({"batch_size": batch})))["state"])


def _has_blob(w: Workload) -> bool:
    return any(spec.type == "safetensors" for spec in w.inputs.values())


def workload_kind(w: Workload) -> str:
    """"model-like" for a workload whose tensors come from a blob (mix.MODEL_LIKE), else "random"."""
    return "model-like" if _has_blob(w) else "random"


def cpu_subset(workloads: list[Workload]) -> list[Workload]:
    """The first random workload of each CPU_DEFAULT_BATCHES size and the first model-like one."""
    firsts = {}
    for w in workloads:
        firsts.setdefault("blob" if _has_blob(w) else w.axes["batch_size"], w)
    return [firsts[k] for k in (*CPU_DEFAULT_BATCHES, "blob") if k in firsts]


def write_embedded(trace_set: TraceSet, name: str, seed: int) -> None:
    """Decode's part of the embedded trace set (gdn_bench.definitions.decode.mix)."""
    from gdn_bench.definitions.decode.mix import write_decode_workloads

    write_decode_workloads(trace_set, name, seed)


def embedded_workloads() -> list[Workload]:
    """The workloads of the embedded trace set."""
    from flashinfer_bench import TraceSet

    return [t.workload for t in TraceSet.from_path(str(EMBEDDED_PATH)).workloads[NAME]]


def _config(name: str, **kwargs):
    return baseline_config(name, NAME, **kwargs)


SUBMISSION = "fla-recurrent"
LIBRARY = "fla-lib"  # flash-linear-attention's kernel, what a user would otherwise call
ALGOS = (
    Algo(SUBMISSION, "the submission: fused recurrent Triton kernel", NAME, None, "solution/triton"),
    Algo(REFERENCE, "PyTorch loop over batch and head", NAME, _config(REFERENCE),
         "baselines/decode/pt_reference", launches=lambda axes: 22 * NUM_V_HEADS * axes["batch_size"]),
    Algo("pt-compiled", "torch.compile of the vectorized reference", NAME, _config("pt-compiled"),
         "baselines/decode/pt_compiled", time_last=True),
    Algo(BASELINE, "FlashInfer gated_delta_rule_decode_pretranspose (contest baseline)", NAME,
         _config(BASELINE), "baselines/decode/fi_baseline", needs_gpu=True, requires=("flashinfer",)),
    Algo(LIBRARY, "flash-linear-attention fused_recurrent_gated_delta_rule", NAME, _config(LIBRARY),
         "baselines/decode/fla_lib", needs_gpu=True, requires=("fla",), extra="baselines"),
    Algo("fla-tma", "Triton variant: TMA tensor descriptors, pipelined loop over V-tiles", NAME,
         _config("fla-tma", language="triton", entry="kernel_tma.py::kernel", dps=True), "solution/triton",
         needs_gpu=True, min_compute_capability=(9, 0)),
    Algo("cuda-v1", "CUDA (TVM-FFI): one warp per block, lanes hold float4 columns of 8 rows", NAME,
         _config("cuda-v1", language="cuda", entry="kernel.cu::gdn_decode_v1", dps=True), "solution/cuda",
         needs_gpu=True, requires=("tvm_ffi",)),
    Algo("cuda-v4", "CUDA (TVM-FFI): 8 warps per block, one V-row per warp", NAME,
         _config("cuda-v4", language="cuda", entry="kernel.cu::gdn_decode_v4", dps=True), "solution/cuda",
         needs_gpu=True, requires=("tvm_ffi",)),
)

DECODE = DefinitionSpec(
    name=NAME,
    short="decode",
    summary="one decode step per sequence (batch_size sequences)",
    build_definition=build_definition,
    reference_path=REFERENCE_PATH,
    algos=ALGOS,
    submission=SUBMISSION,
    size_axis="batch_size",
    size_flag="--batch-sizes",
    group_of=lambda axes: axes["batch_size"],
    group_label="B",
    group_title="batch size",
    # flashinfer-bench's defaults, the contest's for decode: 0.1.2's BenchmarkConfig and main's
    # ResolvedEvalConfig (main's BenchmarkConfig leaves them None, to inherit).
    harness=Harness(warmup=10, iterations=50, trials=3),
    default_dataset=lambda gpu: EMBEDDED_PATH,
    planned_workloads=embedded_workloads,
    cpu_subset=cpu_subset,
    cpu_subset_note="the first random workload of B = 1 and of B = 4, and the first model-like one",
    workload_label=lambda axes: f"B={axes['batch_size']}",
    workload_kind=workload_kind,
    write_embedded=write_embedded,
    floor_shape=state_shape,
    job_groups=7,  # as many as the contest mix has batch sizes
    reference_launches=lambda axes: 23,  # vectorized over rows and heads, counted on CPU
)

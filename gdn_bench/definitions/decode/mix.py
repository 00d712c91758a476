"""The decode part of the embedded trace set: workloads mirroring the contest's decode mix,
random ones plus a few model-like ones stored as safetensors blobs."""

import math
import uuid

import torch
from flashinfer_bench import Definition, RandomInput, SafetensorsInput, Trace, TraceSet, Workload
from flashinfer_bench.data import ScalarInput

from gdn_bench.definitions.decode.reference import gdn_decode
from gdn_bench.shapes import DEFAULT_SCALE, HEAD_SIZE, NUM_Q_HEADS, NUM_V_HEADS
from gdn_bench.signature import tensor_inputs

# Contest decode batch mix: batch size -> number of random workloads (54 in all).
CONTEST_BATCH_MIX = {1: 10, 4: 8, 8: 7, 16: 7, 32: 7, 48: 7, 64: 8}
# Model-like workloads from safetensors blobs: (batch size, whether the state is stored).
# Stored states cost 512 KiB per batch row, so only small batches carry one.
MODEL_LIKE = ((1, True), (2, True), (8, False))
# Steps of the recurrence run from a zero state to give a stored state realistic statistics.
WARMUP_STEPS = 32


def _uuid(name: str, kind: str, batch: int, index: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"gdn-bench/{name}/{kind}/{batch}/{index}"))


def _axes(batch: int) -> dict:
    return {"batch_size": batch}


def _scale() -> ScalarInput:
    return ScalarInput(value=DEFAULT_SCALE)


def random_workloads(definition: Definition) -> list[Workload]:
    """The contest mix: every tensor random (flashinfer-bench draws randn), scale 1/sqrt(128)."""
    return [
        Workload(
            axes=_axes(batch),
            inputs={**{n: RandomInput() for n in tensor_inputs(definition)}, "scale": _scale()},
            uuid=_uuid(definition.name, "random", batch, i),
        )
        for batch, count in CONTEST_BATCH_MIX.items()
        for i in range(count)
    ]


def model_like_inputs(batch: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Inputs shaped like Qwen3-Next's: L2-normalized q and k, A = exp(A_log) in [1, 16],
    dt = softplus(a + dt_bias) around 1e-3..1e-1, and a state produced by WARMUP_STEPS
    steps of the recurrence from zero. The gates (logarithms, exponentials) and the steps run
    in float64, each result rounded to float32 once: in float32 they round differently with
    the CPU's vector instructions (AVX2, AVX-512: the steps' sums) and from one build or
    machine to another (torch's float32 log and exp are not correctly rounded), in float64
    far below float32's last bit, so the stored tensors come out the same on any of them."""

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    def unit(x):
        return x / x.norm(dim=-1, keepdim=True)

    def uniform():  # float32 draws, in float64
        return torch.rand(NUM_V_HEADS, generator=gen).double()

    A_log = torch.log(1.0 + 15.0 * uniform()).float()
    dt = torch.exp(math.log(1e-3) + (math.log(1e-1) - math.log(1e-3)) * uniform())
    dt_bias = (dt + torch.log(-torch.expm1(-dt))).float()  # inverse softplus

    def step_inputs():
        return dict(
            q=unit(randn(batch, 1, NUM_Q_HEADS, HEAD_SIZE)).bfloat16(),
            k=unit(randn(batch, 1, NUM_Q_HEADS, HEAD_SIZE)).bfloat16(),
            v=randn(batch, 1, NUM_V_HEADS, HEAD_SIZE).bfloat16(),
            a=(0.5 * randn(batch, 1, NUM_V_HEADS)).bfloat16(),
            b=randn(batch, 1, NUM_V_HEADS).bfloat16(),
        )

    state = None
    for _ in range(WARMUP_STEPS):
        x = step_inputs()
        _, state = gdn_decode(x["q"], x["k"], x["v"], state, A_log, x["a"], dt_bias, x["b"], None, torch.float64)
    return {**step_inputs(), "state": state.float().contiguous(), "A_log": A_log, "dt_bias": dt_bias}


def write_decode_workloads(trace_set: TraceSet, name: str, seed: int) -> None:
    """Add the workloads of decode definition `name` (and their blobs) to `trace_set`,
    deterministically from `seed`."""
    workloads = random_workloads(trace_set.definitions[name])
    gen = torch.Generator().manual_seed(seed)
    for index, (batch, store_state) in enumerate(MODEL_LIKE):
        tensors = model_like_inputs(batch, gen)
        if not store_state:
            del tensors["state"]
        wl_uuid = _uuid(name, "model-like", batch, index)
        path = trace_set.add_workload_blob_tensor(name, wl_uuid, tensors)
        inputs = {key: SafetensorsInput(path=path, tensor_key=key) for key in tensors}
        inputs.setdefault("state", RandomInput())
        workloads.append(Workload(axes=_axes(batch), inputs={**inputs, "scale": _scale()}, uuid=wl_uuid))
    trace_set.add_workload_traces([Trace(definition=name, workload=w) for w in workloads])

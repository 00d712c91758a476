"""The embedded trace set: the decode definition plus workloads mirroring the contest mix.

Layout (flashinfer-bench's): definitions/gdn/<def>.json, workloads/gdn/<def>.jsonl and
blob/workloads/gdn/<def>/*.safetensors, under gdn_bench/data. `write_trace_set` rebuilds
it deterministically from SEED; `load_trace_set` opens any trace set without creating it.
"""

import math
import shutil
import uuid
from pathlib import Path

import torch
from flashinfer_bench import RandomInput, SafetensorsInput, Trace, TraceSet, Workload
from flashinfer_bench.data import ScalarInput, save_json_file

from gdn_bench.definition import DEFINITION_NAME, HEAD_SIZE, NUM_Q_HEADS, NUM_V_HEADS, build_definition
from gdn_bench.reference import gdn_decode

EMBEDDED_PATH = Path(__file__).resolve().parent / "data"
SEED = 20260301

# Contest decode batch mix: batch size -> number of random workloads (54 in all).
CONTEST_BATCH_MIX = {1: 10, 4: 8, 8: 7, 16: 7, 32: 7, 48: 7, 64: 8}
# Model-like workloads from safetensors blobs: (batch size, whether the state is stored).
# Stored states cost 512 KiB per batch row, so only small batches carry one.
MODEL_LIKE = ((1, True), (2, True), (8, False))
# Steps of the recurrence run from a zero state to give a stored state realistic statistics.
WARMUP_STEPS = 32


def _uuid(kind: str, batch: int, index: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"gdn-bench/{DEFINITION_NAME}/{kind}/{batch}/{index}"))


def _axes(batch: int) -> dict:
    return {"batch_size": batch}


def _scale() -> ScalarInput:
    return ScalarInput(value=1.0 / math.sqrt(HEAD_SIZE))


def random_workloads() -> list[Workload]:
    """The contest mix: every tensor random (flashinfer-bench draws randn), scale 1/sqrt(128)."""
    names = ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b")
    return [
        Workload(
            axes=_axes(batch),
            inputs={**{n: RandomInput() for n in names}, "scale": _scale()},
            uuid=_uuid("random", batch, i),
        )
        for batch, count in CONTEST_BATCH_MIX.items()
        for i in range(count)
    ]


def model_like_inputs(batch: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Inputs shaped like Qwen3-Next's: L2-normalized q and k, A = exp(A_log) in [1, 16],
    dt = softplus(a + dt_bias) around 1e-3..1e-1, and a state produced by WARMUP_STEPS
    steps of the recurrence from zero."""

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    def unit(x):
        return x / x.norm(dim=-1, keepdim=True)

    A_log = torch.log(1.0 + 15.0 * torch.rand(NUM_V_HEADS, generator=gen))
    dt = torch.exp(math.log(1e-3) + (math.log(1e-1) - math.log(1e-3)) * torch.rand(NUM_V_HEADS, generator=gen))
    dt_bias = dt + torch.log(-torch.expm1(-dt))  # inverse softplus

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
        _, state = gdn_decode(x["q"], x["k"], x["v"], state, A_log, x["a"], dt_bias, x["b"], None, torch.float32)
    return {**step_inputs(), "state": state.contiguous(), "A_log": A_log, "dt_bias": dt_bias}


def write_trace_set(root: Path = EMBEDDED_PATH, seed: int = SEED) -> TraceSet:
    """(Re)write the whole trace set under `root`, deterministically from `seed`."""
    root = Path(root)
    for sub in ("definitions", "workloads", "blob"):
        shutil.rmtree(root / sub, ignore_errors=True)
    definition = build_definition()
    trace_set = TraceSet(root=root, definitions={definition.name: definition})
    save_json_file(definition, root / "definitions" / definition.op_type / f"{definition.name}.json")

    workloads = random_workloads()
    gen = torch.Generator().manual_seed(seed)
    for index, (batch, store_state) in enumerate(MODEL_LIKE):
        tensors = model_like_inputs(batch, gen)
        if not store_state:
            del tensors["state"]
        wl_uuid = _uuid("model-like", batch, index)
        path = trace_set.add_workload_blob_tensor(definition.name, wl_uuid, tensors)
        inputs = {name: SafetensorsInput(path=path, tensor_key=name) for name in tensors}
        inputs.setdefault("state", RandomInput())
        workloads.append(Workload(axes=_axes(batch), inputs={**inputs, "scale": _scale()}, uuid=wl_uuid))
    trace_set.add_workload_traces([Trace(definition=definition.name, workload=w) for w in workloads])
    return trace_set


def load_trace_set(path: Path | str | None = None, definition: str = DEFINITION_NAME) -> TraceSet:
    """Open the trace set at `path` (default: the embedded one) and check it has `definition`.

    Unlike TraceSet.from_path, a missing folder is an error, never silently created.
    """
    root = Path(path) if path is not None else EMBEDDED_PATH
    if not root.is_dir():
        raise FileNotFoundError(f"dataset path {root} does not exist or is not a folder")
    trace_set = TraceSet.from_path(str(root))
    if definition not in trace_set.definitions:
        known = ", ".join(sorted(trace_set.definitions)) or "none"
        raise ValueError(f"dataset {root} has no definition {definition!r} (it has: {known})")
    if not trace_set.workloads.get(definition):
        raise ValueError(f"dataset {root} has no workloads for {definition!r}")
    return trace_set

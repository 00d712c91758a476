"""Correctness of a packed solution against the definition's reference, through
flashinfer-bench's own pieces (builder registry, input generation, error statistics).

Unlike flashinfer-bench's Benchmark, this runs on CPU too (Triton's interpreter), so it is
the check used by the tests and by run_local when no GPU is present. Outputs are poisoned
with NaN before each call, so an element the solution never writes fails the check.
"""

from dataclasses import dataclass
from pathlib import Path

import torch
from flashinfer_bench import BenchmarkConfig, Definition, Solution, Workload
from flashinfer_bench.bench.evaluators.utils import allocate_outputs, normalize_result
from flashinfer_bench.bench.utils import compute_error_stats, gen_inputs, load_safetensors
from flashinfer_bench.compile import BuilderRegistry


@dataclass
class CheckResult:
    """Outcome for one (solution, workload): status is PASSED, INCORRECT_NUMERICAL,
    RUNTIME_ERROR or COMPILE_ERROR (flashinfer-bench's names)."""

    workload: str
    batch_size: int
    status: str
    max_abs_error: float = float("nan")
    max_rel_error: float = float("nan")
    message: str = ""


def workload_inputs(definition: Definition, workload: Workload, root: Path | None, device: str) -> list:
    """The inputs flashinfer-bench would feed for this workload (random or from blobs)."""
    blobs = load_safetensors(definition, workload, root) if any(
        spec.type == "safetensors" for spec in workload.inputs.values()
    ) else {}
    return gen_inputs(definition, workload, device=device, safe_tensors=blobs)


def check_solution(
    definition: Definition,
    solution: Solution,
    workloads: list[Workload],
    root: Path | None,
    device: str,
    atol: float = 1e-2,
    rtol: float = 1e-2,
    progress=None,
) -> list[CheckResult]:
    """Run `solution` on each workload and compare every output with the reference.

    `progress`, if given, is called once per finished workload.
    """
    registry = BuilderRegistry.get_instance()
    cfg = BenchmarkConfig(atol=atol, rtol=rtol)
    try:
        runnable = registry.build(definition, solution)
        reference = registry.build_reference(definition)
    except Exception as e:  # noqa: BLE001 - any build failure is this solution's COMPILE_ERROR
        return [CheckResult(w.uuid, w.axes["batch_size"], "COMPILE_ERROR", message=str(e)) for w in workloads]
    results = []
    for workload in workloads:
        results.append(_check_one(definition, runnable, reference, workload, root, device, cfg))
        if progress is not None:
            progress()
    return results


def _check_one(definition, runnable, reference, workload, root, device, cfg) -> CheckResult:
    batch = workload.axes["batch_size"]
    inputs = workload_inputs(definition, workload, root, device)
    with torch.no_grad():
        expected = normalize_result(definition, reference(*inputs), device)
        try:
            if runnable.metadata.destination_passing_style:
                outputs = [t.fill_(float("nan")) for t in allocate_outputs(definition, inputs, device)]
                runnable(*inputs, *outputs)
            else:
                outputs = normalize_result(definition, runnable(*inputs), device)
            if device.startswith("cuda"):
                torch.cuda.synchronize(device)
        except Exception as e:  # noqa: BLE001 - reported as the workload's RUNTIME_ERROR
            return CheckResult(workload.uuid, batch, "RUNTIME_ERROR", message=f"{type(e).__name__}: {e}")
    max_abs = max_rel = 0.0
    status = "PASSED"
    for name, got, want in zip(definition.outputs, outputs, expected):
        if got.shape != want.shape or got.dtype != want.dtype:
            return CheckResult(workload.uuid, batch, "INCORRECT_SHAPE", message=f"{name}: {got.shape} {got.dtype}")
        if not torch.isfinite(got).all():
            return CheckResult(workload.uuid, batch, "INCORRECT_NUMERICAL", float("nan"), float("nan"),
                               f"{name} has non-finite or unwritten elements")
        abs_err, rel_err, exceeds, _ = compute_error_stats(got, want, cfg)
        max_abs, max_rel = max(max_abs, abs_err), max(max_rel, rel_err)
        if exceeds:
            status = "INCORRECT_NUMERICAL"
    return CheckResult(workload.uuid, batch, status, max_abs, max_rel)

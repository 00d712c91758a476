"""Correctness of packed solutions against the definition's reference, through
flashinfer-bench's own pieces (builder registry, input generation, error statistics), plus
the worst margin (`worst_margin`): how close the worst element came to failing.

Unlike flashinfer-bench's Benchmark, this runs on CPU too (Triton's interpreter), so it is
the check used by the tests and by run_local when no GPU is present; on a GPU, run_local
runs it too, for the margins. Outputs are poisoned with NaN before each call, so an element
the solution never writes fails the check.
"""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from flashinfer_bench import BenchmarkConfig, Definition, Solution, Workload
from flashinfer_bench.bench.evaluators.utils import allocate_outputs, normalize_result
from flashinfer_bench.bench.utils import compute_error_stats, gen_inputs, load_safetensors
from flashinfer_bench.compile import BuilderRegistry

ATOL = RTOL = 1e-2  # the evaluator's tolerances
# The workload itself could not run (its inputs or the definition's reference failed on it):
# every solution gets this status on it, and the run goes on with the next workload.
WORKLOAD_ERROR = "WORKLOAD_ERROR"


@dataclass
class CheckResult:
    """Outcome for one (solution, workload): status is PASSED, INCORRECT_NUMERICAL,
    INCORRECT_SHAPE, RUNTIME_ERROR or COMPILE_ERROR (flashinfer-bench's names), or
    WORKLOAD_ERROR. `margins` holds worst_margin per output."""

    workload: str
    axes: dict[str, int]
    status: str
    max_abs_error: float = float("nan")
    max_rel_error: float = float("nan")
    margins: dict[str, float] = field(default_factory=dict)
    message: str = ""


def worst_margin(got: torch.Tensor, want: torch.Tensor, atol: float = ATOL, rtol: float = RTOL) -> float:
    """max over elements of |got - want| / max(atol, rtol·|want|), in float64.

    An element fails the evaluator's check when its error exceeds both atol and rtol·|want|,
    that is when this ratio exceeds 1: the check passes iff the worst margin is <= 1, and a
    worst margin of 0.5 means every element is within half its allowance. A non-finite
    element gives inf; an empty output gives 0.
    """
    if got.numel() == 0:
        return 0.0
    want = want.to(torch.float64)
    err = (got.to(torch.float64) - want).abs()
    ratio = err / torch.clamp(rtol * want.abs(), min=atol)
    return float(torch.where(torch.isfinite(ratio), ratio, torch.inf).max())


class SolutionCall:
    """One built solution bound to one workload's inputs, called as the evaluator calls it: a
    destination-passing solution gets outputs allocated here, once, after the inputs; a
    value-returning one returns its outputs.

    Calling the object makes one bare call (what timing measures). `outputs()` makes one
    call and returns the outputs in the definition's order; a destination-passing solution's
    are filled with NaN first, so an element it never writes shows."""

    def __init__(self, definition: Definition, runnable, inputs: list, device: str):
        self.definition, self.device, self.runnable = definition, device, runnable
        self.dps = runnable.metadata.destination_passing_style
        self.destinations = allocate_outputs(definition, inputs, device) if self.dps else []
        self.arguments = (*inputs, *self.destinations)

    def __call__(self):
        return self.runnable(*self.arguments)

    def outputs(self) -> list[torch.Tensor]:
        if not self.dps:
            return normalize_result(self.definition, self(), self.device)
        for t in self.destinations:
            t.fill_(float("nan"))
        self()
        return self.destinations


def workload_seed(seed: int, uuid: str) -> int:
    """The seed of one workload's random inputs, from the run's seed and the workload's uuid
    alone: a workload draws the same inputs whichever others run with it."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{uuid}".encode()).digest()[:8], "big") >> 1


def workload_inputs(definition: Definition, workload: Workload, root: Path | None, device: str, seed: int) -> list:
    """The inputs flashinfer-bench would feed for this workload: blobs as stored, `random`
    ones drawn as it draws them (torch's default generator) but seeded with
    workload_seed(seed, uuid), which leaves the caller's generator state untouched."""
    blobs = load_safetensors(definition, workload, root) if any(
        spec.type == "safetensors" for spec in workload.inputs.values()
    ) else {}
    devices = [torch.device(device).index or 0] if device.startswith("cuda") else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(workload_seed(seed, workload.uuid))
        return gen_inputs(definition, workload, device=device, safe_tensors=blobs)


def check_solutions(
    definition: Definition,
    solutions: dict[str, Solution],
    workloads: list[Workload],
    root: Path | None,
    device: str,
    seed: int,
    progress: Callable[[str, CheckResult], None] | None = None,
) -> dict[str, list[CheckResult]]:
    """Run every solution on each workload and compare every output with the reference at
    the evaluator's tolerances. Each workload's inputs are drawn once (workload_inputs, from
    `seed`) and its reference run once; every solution gets its own copy of the inputs (some
    update the state in place).

    A workload whose inputs cannot be made or whose reference fails (a blob that cannot be
    read, say) gives every solution WORKLOAD_ERROR on it, with the reason, and the next
    workload goes on. Returns {solution key: one CheckResult per workload}; `progress`, if
    given, is called with (solution key, CheckResult) as each (solution, workload) finishes,
    so a caller keeps what finished when the run is stopped half-way.
    """
    registry = BuilderRegistry.get_instance()
    cfg = BenchmarkConfig(atol=ATOL, rtol=RTOL)
    reference = registry.build_reference(definition)
    results: dict[str, list[CheckResult]] = {key: [] for key in solutions}

    def finished(key: str, result: CheckResult) -> None:
        results[key].append(result)
        if progress is not None:
            progress(key, result)

    runnables = {}
    for key, solution in solutions.items():
        try:
            runnables[key] = registry.build(definition, solution)
        except Exception as e:  # noqa: BLE001 - any build failure is this solution's COMPILE_ERROR
            for w in workloads:
                finished(key, CheckResult(w.uuid, dict(w.axes), "COMPILE_ERROR", message=str(e)))
    for workload in workloads:
        try:
            inputs = workload_inputs(definition, workload, root, device, seed)
        except Exception as e:  # noqa: BLE001 - any failure here is the workload's, not a solution's
            _workload_failed(workload, f"its inputs: {type(e).__name__}: {e}", runnables, finished)
            continue
        try:
            with torch.no_grad():
                expected = normalize_result(definition, reference(*_copies(inputs)), device)
        except Exception as e:  # noqa: BLE001
            _workload_failed(workload, f"the definition's reference: {type(e).__name__}: {e}", runnables, finished)
            continue
        for key, runnable in runnables.items():
            finished(key, _check_one(definition, runnable, _copies(inputs), expected, workload, device, cfg))
    return results


def _workload_failed(workload: Workload, reason: str, runnables: dict, finished) -> None:
    """WORKLOAD_ERROR for every solution on `workload`, with `reason`."""
    for key in runnables:
        finished(key, CheckResult(workload.uuid, dict(workload.axes), WORKLOAD_ERROR,
                                  message=f"workload {workload.uuid} could not run: {reason}"))


def _copies(inputs: list) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _check_one(definition, runnable, inputs, expected, workload, device, cfg) -> CheckResult:
    axes = dict(workload.axes)
    with torch.no_grad():
        try:
            outputs = SolutionCall(definition, runnable, inputs, device).outputs()
            if device.startswith("cuda"):
                torch.cuda.synchronize(device)
        except Exception as e:  # noqa: BLE001 - reported as the workload's RUNTIME_ERROR
            return CheckResult(workload.uuid, axes, "RUNTIME_ERROR", message=f"{type(e).__name__}: {e}")
    result = CheckResult(workload.uuid, axes, "PASSED", 0.0, 0.0)
    for name, got, want in zip(definition.outputs, outputs, expected):
        if got.shape != want.shape or got.dtype != want.dtype:
            return CheckResult(workload.uuid, axes, "INCORRECT_SHAPE", message=f"{name}: {got.shape} {got.dtype}")
        result.margins[name] = worst_margin(got, want, cfg.atol, cfg.rtol)
        if not torch.isfinite(got).all():
            result.status, result.message = "INCORRECT_NUMERICAL", f"{name} has non-finite or unwritten elements"
            result.max_abs_error = result.max_rel_error = float("nan")
            continue
        abs_err, rel_err, exceeds, _ = compute_error_stats(got, want, cfg)
        result.max_abs_error = max(result.max_abs_error, abs_err)
        result.max_rel_error = max(result.max_rel_error, rel_err)
        if exceeds:
            result.status = "INCORRECT_NUMERICAL"
            result.message = "; ".join(filter(None, [result.message, f"{name}: worst margin "
                                                     f"{result.margins[name]:.3g} > 1 (max abs error {abs_err:.3g})"]))
    return result

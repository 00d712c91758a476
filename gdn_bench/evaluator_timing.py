"""The definition's reference timed by the contest evaluator's own timer, not an imitation.

flashinfer-bench main's evaluator (bench/evaluators/default.py) times the reference and the
solution alike: on each of `trials` input sets, time_runnable(fn, args, warmup, iterations,
device) (bench/timing.py); a latency is the mean over trials. time_runnable is the median of
FlashInfer's bench_gpu_time_with_cupti(fn, dry_run_iters=warmup, repeat_iters=iterations,
input_args=args, cold_l2_cache=True, use_cuda_graph=False) (flashinfer/testing/utils.py):

- fn is called once, then 5 times to estimate its length (unused when the counts are given),
  then `warmup` times, none of them recorded;
- then `iterations` times, each after zeroing a buffer twice the L2's size and a synchronize,
  under CUPTI activity tracing: kernel, memcpy and memset records, and a record of every
  runtime-API and driver-API call, which CUPTI hands over in 8 MB buffers to a Python callback
  that copies each record into a Python tuple;
- a call's time is from the first start to the last end of the GPU records whose launch
  happened between the call's two CPU timestamps.

That span holds the host's time between launches, so a host-bound call, such as prefill's
reference (a Python loop over token positions: tens of thousands of small launches), is timed
with whatever the tracing costs the host per launch. The kit's own CUPTI timer
(gdn_bench.timing, torch.profiler) timed prefill's reference up to 3.2 times shorter than
flashinfer-bench main's CLI did (issue 27; docs/perf.md has the measurements). So the
reference is timed by the evaluator's function itself. `reference_timer` finds it, best first:

1. TIME_RUNNABLE: flashinfer_bench.bench.timing.time_runnable, where that module times with
   FlashInfer's bench_gpu_time_with_cupti (flashinfer-bench main). 0.1.2's time_runnable
   times with CUDA events around a synchronizing loop (their issue #195) and is never used.
2. FLASHINFER_CUPTI: FlashInfer's bench_gpu_time_with_cupti, called with the arguments
   time_runnable passes (FlashInfer 0.7.2 has it; flashinfer-bench 0.1.2 is installed).
3. KIT_PROFILER: the kit's own timer (gdn_bench.timing.bounded_kernel_time_us), when neither
   imports, or when FlashInfer's timer could not use CUPTI. It needs cupti-python >= 13
   importable (which needs libcupti on the loader's path); without it FlashInfer falls back
   to CUDA events with only a warning. The kit checks first, as FlashInfer does, and never
   takes that fallback. The kit's timer gives shorter reference times than the evaluator's,
   so a lower score; the report says so, and why.

Each measured time records which of them ran (ReferenceTimer.describe).
"""

import importlib.metadata
import statistics
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from gdn_bench.timing import SLOW_CALL_SECONDS, TimingError, bounded_kernel_time_us

TIME_RUNNABLE = "flashinfer-bench time_runnable"
FLASHINFER_CUPTI = "FlashInfer bench_gpu_time_with_cupti"
KIT_PROFILER = "the kit's torch.profiler timer"
# What FlashInfer's warning says when it times with CUDA events instead of CUPTI.
FALLBACK_WARNING = "Falling back to CUDA events"

# time_ms(fn, args, warmup, iterations, device): the median time of one call, in ms (time_runnable's signature).
TimeMs = Callable[[Callable, list, int, int, str], float]


def cupti_problem() -> str | None:
    """Why FlashInfer's CUPTI timer would fall back to CUDA events in this process, None when it
    would not: FlashInfer's own test, cupti-python's module imports and its version is >= 13."""
    try:
        from cupti import cupti  # noqa: F401  (FlashInfer's import; it loads libcupti)
        found = importlib.metadata.version("cupti-python")
    except Exception as e:  # as FlashInfer: any failure to import or to find the version
        return f"cupti-python does not import ({type(e).__name__}: {e})"
    if int(found.split(".")[0]) < 13:
        return f"cupti-python {found} is older than 13"
    return None


def _flashinfer_cupti_ms(fn: Callable, args: list, warmup: int, iterations: int, device: str) -> float:
    """FlashInfer's bench_gpu_time_with_cupti with the arguments flashinfer-bench main's
    time_runnable passes, on `device`: the median of its per-call times, in ms."""
    from flashinfer.testing import bench_gpu_time_with_cupti

    with torch.cuda.device(device):
        return statistics.median(bench_gpu_time_with_cupti(
            fn=fn, dry_run_iters=warmup, repeat_iters=iterations, input_args=tuple(args), cold_l2_cache=True,
            use_cuda_graph=False))


def evaluator_function() -> tuple[str, TimeMs] | None:
    """(name, time_ms) of the evaluator's timer, the first of TIME_RUNNABLE and FLASHINFER_CUPTI
    that imports (module docstring); None when neither does."""
    try:
        from flashinfer_bench.bench import timing
    except ImportError:
        timing = None
    if timing is not None and hasattr(timing, "bench_gpu_time_with_cupti"):
        return TIME_RUNNABLE, timing.time_runnable
    try:
        from flashinfer.testing import bench_gpu_time_with_cupti  # noqa: F401
    except ImportError:
        return None
    return FLASHINFER_CUPTI, _flashinfer_cupti_ms


def _versions() -> dict[str, str | None]:
    """The versions that decide the timer: flashinfer-bench's (the installed distribution's, as
    pip says it, where that is the module imported; else the module's own, a copy of its main
    branch on PYTHONPATH), FlashInfer's, cupti-python's."""
    def installed(name):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    try:
        import flashinfer_bench
        bench = f"{_bench_version(flashinfer_bench)} ({flashinfer_bench.__file__})"
    except ImportError:
        bench = None
    return {"torch": torch.__version__, "flashinfer-bench": bench, "flashinfer-python": installed("flashinfer-python"),
            "cupti-python": installed("cupti-python")}


def _bench_version(module) -> str:
    """flashinfer-bench's version: its distribution's where `module` is the installed one (the
    wheel's __version__ says 0.0.0.dev0), else the module's __version__."""
    try:
        dist = importlib.metadata.distribution("flashinfer-bench")
    except importlib.metadata.PackageNotFoundError:
        return module.__version__
    here = Path(dist.locate_file("flashinfer_bench/__init__.py")).resolve()
    return dist.version if here == Path(module.__file__).resolve() else module.__version__


def evaluator_time_us(time_ms: TimeMs, fn: Callable, args, warmup: int, iterations: int, trials: int,
                      device: str | None = None) -> tuple[float, int]:
    """The evaluator's latency of fn(*args), in µs, and the number of trials it is the mean of:
    the mean over `trials` of time_ms(fn, args, warmup, iterations, device) (build_baseline's
    mean_latency_ms), except that a call whose first trial gives SLOW_CALL_SECONDS or more is
    timed in that one trial (each trial costs 6 + warmup + iterations calls: prefill's
    reference over the contest mix would take over 20 minutes in three). The evaluator draws new
    random inputs for each trial; here every trial gets `args` (a call's time does not depend on
    the values), so its trials differ by chance alone and one is the same measurement.
    TimingError when FlashInfer timed with CUDA events after all (its warning) or could not
    group its records into calls (its ValueError); its other warnings pass on."""
    device = device or f"cuda:{torch.cuda.current_device()}"
    times: list[float] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            while len(times) < trials and not (times and times[0] >= SLOW_CALL_SECONDS * 1e3):
                times.append(time_ms(fn, list(args), warmup, iterations, device))
        except ValueError as e:
            raise TimingError(f"FlashInfer's CUPTI timer: {e}") from None
    for w in caught:
        if FALLBACK_WARNING in str(w.message):
            raise TimingError(f"FlashInfer's timer fell back to CUDA events: {w.message}")
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return statistics.fmean(times) * 1e3, len(times)


@dataclass(frozen=True)
class ReferenceTimer:
    """How this process times the reference: `name` (TIME_RUNNABLE, FLASHINFER_CUPTI or
    KIT_PROFILER), the versions that decide it, and for the kit's own timer why (`fallback`)."""

    name: str
    versions: dict[str, str | None] = field(default_factory=dict)
    fallback: str = ""
    time_ms: TimeMs | None = field(default=None, repr=False, compare=False)

    @property
    def is_evaluators(self) -> bool:
        return self.time_ms is not None

    def method(self, warmup: int, iterations: int, trials: int) -> str:
        """What a cached time depends on besides the GPU, the definition and the workload: the
        evaluator's timer with its counts (either function: the same measurement), or the kit's."""
        if self.is_evaluators:
            return f"evaluator CUPTI span, warmup {warmup}, iterations {iterations}, trials {trials}"
        return "kit torch.profiler span, bounded"

    def describe(self, warmup: int, iterations: int, trials: int) -> str:
        """This timer in words, with its counts, for a time's record and the report."""
        if self.is_evaluators:
            return (f"{self.name}, the contest evaluator's timer (CUPTI; flashinfer-python "
                    f"{self.versions.get('flashinfer-python')}, cupti-python {self.versions.get('cupti-python')}): "
                    f"the mean of {trials} trials' medians of {iterations} calls after {warmup} warm-up, one trial "
                    f"where a call takes {SLOW_CALL_SECONDS * 1e3:g} ms or more")
        return (f"{KIT_PROFILER}, NOT the evaluator's ({self.fallback}): it times prefill's reference up to "
                "3.2 times shorter than the evaluator does, so the score is lower than the contest's")

    def time_us(self, call, warmup: int, iterations: int, trials: int) -> tuple[float, int]:
        """(µs, how many calls were timed) of `call` (a gdn_bench.checking.SolutionCall): by the
        evaluator's timer (evaluator_time_us on its runnable and arguments: iterations per trial
        run), or the kit's (bounded_kernel_time_us: the median of that many calls)."""
        if not self.is_evaluators:
            return bounded_kernel_time_us(call)
        us, trials = evaluator_time_us(self.time_ms, call.runnable, call.arguments, warmup, iterations, trials)
        return us, trials * iterations


def reference_timer() -> ReferenceTimer:
    """The timer the reference is timed by in this process (module docstring: the evaluator's
    function where it imports and can use CUPTI, else the kit's, with the reason)."""
    versions = _versions()
    found = evaluator_function()
    if found is None:
        return ReferenceTimer(KIT_PROFILER, versions, "neither flashinfer-bench main's time_runnable nor "
                                                      "FlashInfer's bench_gpu_time_with_cupti imports")
    problem = cupti_problem()
    if problem:
        return ReferenceTimer(KIT_PROFILER, versions, f"{problem}, so {found[0]} would time with CUDA events; "
                                                      "install cupti-python >= 13 with libcupti on the loader's path")
    return ReferenceTimer(found[0], versions, time_ms=found[1])

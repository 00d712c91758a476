"""Which timer times the definition's reference (gdn_bench.evaluator_timing), on CPU with the
GPU timers stood in: flashinfer-bench main's time_runnable where it times with CUPTI, else
FlashInfer's bench_gpu_time_with_cupti called as time_runnable calls it, else (no CUPTI for
them) the kit's own timer with the reason, never FlashInfer's CUDA-event fallback; and the
evaluator's latency, the mean over trials of time_runnable's medians."""

import contextlib
import sys
import types
import warnings

import pytest
import torch

from gdn_bench import evaluator_timing
from gdn_bench.evaluator_timing import (FLASHINFER_CUPTI, KIT_PROFILER, TIME_RUNNABLE, ReferenceTimer, cupti_problem,
                                        evaluator_time_us, reference_timer)
from gdn_bench.timing import SLOW_CALL_SECONDS, TimingError


@pytest.fixture
def cupti(monkeypatch):
    """A stand-in cupti-python of the version set by calling the fixture's result."""
    monkeypatch.setitem(sys.modules, "cupti", types.SimpleNamespace(cupti=object()))

    def installed(version):
        real = evaluator_timing.importlib.metadata.version
        monkeypatch.setattr(evaluator_timing.importlib.metadata, "version",
                            lambda name: version if name == "cupti-python" else real(name))
    return installed


def test_without_cupti_python_the_kit_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)  # import cupti raises ImportError
    assert cupti_problem().startswith("cupti-python does not import (ModuleNotFoundError")


def test_cupti_python_must_be_13_or_newer_as_flashinfer_asks(cupti):
    cupti("12.9.0")
    assert cupti_problem() == "cupti-python 12.9.0 is older than 13"
    cupti("13.0.1")
    assert cupti_problem() is None


def _main_timing(monkeypatch):
    """flashinfer-bench main's bench/timing.py as far as the choice goes: it imports FlashInfer's
    CUPTI timer. Returns its time_runnable."""
    module = types.ModuleType("flashinfer_bench.bench.timing")
    module.bench_gpu_time_with_cupti = object()
    module.time_runnable = lambda fn, args, warmup, iters, device: 1.0
    monkeypatch.setitem(sys.modules, "flashinfer_bench.bench.timing", module)
    monkeypatch.setattr(sys.modules["flashinfer_bench.bench"], "timing", module, raising=False)
    return module.time_runnable


def test_main_time_runnable_comes_first(monkeypatch, cupti):
    cupti("13.0.1")
    time_runnable = _main_timing(monkeypatch)
    timer = reference_timer()
    assert (timer.name, timer.is_evaluators, timer.fallback, timer.time_ms) == (TIME_RUNNABLE, True, "", time_runnable)


def test_the_installed_0_1_2_time_runnable_is_never_used(cupti):
    """flashinfer-bench 0.1.2 (installed here) has a time_runnable of CUDA events around a
    synchronizing loop: FlashInfer's CUPTI timer is called directly instead."""
    from flashinfer_bench.bench import timing

    if hasattr(timing, "bench_gpu_time_with_cupti"):
        pytest.skip("flashinfer-bench main is installed, not 0.1.2")
    cupti("13.0.1")
    timer = reference_timer()
    assert (timer.name, timer.is_evaluators) == (FLASHINFER_CUPTI, True)


def test_without_cupti_the_kit_times_with_its_own_and_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)
    _main_timing(monkeypatch)
    timer = reference_timer()
    assert (timer.name, timer.is_evaluators) == (KIT_PROFILER, False)
    assert timer.fallback.startswith("cupti-python does not import")
    assert "so flashinfer-bench time_runnable would time with CUDA events" in timer.fallback
    assert timer.describe(1, 5, 3).startswith(f"{KIT_PROFILER}, NOT the evaluator's (cupti-python does not import")


def test_with_neither_function_the_kit_times_with_its_own(monkeypatch):
    monkeypatch.setitem(sys.modules, "flashinfer_bench.bench.timing", None)
    monkeypatch.setattr(sys.modules["flashinfer_bench.bench"], "timing", None, raising=False)
    monkeypatch.setitem(sys.modules, "flashinfer.testing", None)
    timer = reference_timer()
    assert (timer.name, timer.is_evaluators) == (KIT_PROFILER, False)
    assert timer.fallback == "neither flashinfer-bench main's time_runnable nor FlashInfer's " \
                             "bench_gpu_time_with_cupti imports"


def _recording_cupti_timer(monkeypatch, times=(3.0, 1.0, 2.0)):
    """A stand-in bench_gpu_time_with_cupti returning `times` (ms per call); .calls holds the
    keyword arguments of each call."""
    import flashinfer.testing

    def bench(**kwargs):
        bench.calls.append(kwargs)
        return list(times)
    bench.calls = []
    monkeypatch.setattr(flashinfer.testing, "bench_gpu_time_with_cupti", bench)
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    return bench


def test_flashinfers_timer_gets_what_time_runnable_passes(monkeypatch):
    bench = _recording_cupti_timer(monkeypatch)
    fn = object()
    assert evaluator_timing._flashinfer_cupti_ms(fn, [1, "x"], 1, 5, "cuda:0") == 2.0  # the median
    assert bench.calls == [{"fn": fn, "dry_run_iters": 1, "repeat_iters": 5, "input_args": (1, "x"),
                            "cold_l2_cache": True, "use_cuda_graph": False}]


def test_main_time_runnable_calls_flashinfer_as_the_kit_does(monkeypatch):
    """Where flashinfer-bench main is installed (a copy of it first on PYTHONPATH), its
    time_runnable and the kit's direct call give FlashInfer's timer the same arguments."""
    from flashinfer_bench.bench import timing

    if not hasattr(timing, "bench_gpu_time_with_cupti"):
        pytest.skip("flashinfer-bench main is not installed (0.1.2's time_runnable uses CUDA events)")
    bench = _recording_cupti_timer(monkeypatch)
    monkeypatch.setattr(timing, "bench_gpu_time_with_cupti", bench)
    fn = object()
    assert timing.time_runnable(fn, [1, "x"], 1, 5, "cuda:0") == evaluator_timing._flashinfer_cupti_ms(
        fn, [1, "x"], 1, 5, "cuda:0")
    assert bench.calls[0] == bench.calls[1]


def test_the_evaluators_latency_is_the_mean_of_the_trials_medians():
    trials = iter([2.0, 4.0, 9.0])
    seen = []

    def time_ms(fn, args, warmup, iterations, device):
        seen.append((fn, args, warmup, iterations, device))
        return next(trials)

    assert evaluator_time_us(time_ms, "ref", ("a", "b"), 1, 5, 3, "cuda:0") == (pytest.approx(5000.0), 3)
    assert seen == [("ref", ["a", "b"], 1, 5, "cuda:0")] * 3


def test_a_slow_call_is_timed_in_one_trial():
    """A first trial of SLOW_CALL_SECONDS or more is the time: the trials differ by chance alone."""
    trials = iter([SLOW_CALL_SECONDS * 1e3, 1.0, 1.0])
    assert evaluator_time_us(lambda *a: next(trials), "ref", (), 1, 5, 3, "cuda:0") == (SLOW_CALL_SECONDS * 1e6, 1)
    trials = iter([SLOW_CALL_SECONDS * 1e3 * 0.99, 50.0, 50.0])
    assert evaluator_time_us(lambda *a: next(trials), "ref", (), 1, 5, 3, "cuda:0")[1] == 3


def test_a_cuda_event_fallback_or_an_unsplit_profile_is_a_timing_error():
    def falls_back(fn, args, warmup, iterations, device):
        warnings.warn("CUPTI is not installed. Falling back to CUDA events for benchmarking.", UserWarning)
        return 1.0

    with pytest.raises(TimingError, match="FlashInfer's timer fell back to CUDA events: CUPTI is not installed"):
        evaluator_time_us(falls_back, "ref", (), 1, 5, 3, "cuda:0")

    def unsplit(fn, args, warmup, iterations, device):
        raise ValueError("No kernel activities recorded for iteration 0")

    with pytest.raises(TimingError, match="FlashInfer's CUPTI timer: No kernel activities recorded for iteration 0"):
        evaluator_time_us(unsplit, "ref", (), 1, 5, 3, "cuda:0")


def test_other_warnings_pass_on():
    def warns(fn, args, warmup, iterations, device):
        warnings.warn("something else", DeprecationWarning)
        return 1.0

    with pytest.warns(DeprecationWarning, match="something else"):
        assert evaluator_time_us(warns, "ref", (), 1, 5, 1, "cuda:0") == (1000.0, 1)


class _Call:
    runnable, arguments = "ref", ("a",)


def test_a_timer_times_a_call_and_counts_its_calls(monkeypatch):
    timer = ReferenceTimer(TIME_RUNNABLE, time_ms=lambda fn, args, warmup, iterations, device: 0.5)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert timer.time_us(_Call(), 1, 5, 3) == (500.0, 15)
    monkeypatch.setattr(evaluator_timing, "bounded_kernel_time_us", lambda call: (123.0, 3))
    assert ReferenceTimer(KIT_PROFILER, fallback="no CUPTI").time_us(_Call(), 1, 5, 3) == (123.0, 3)


def test_what_a_cached_time_depends_on():
    """Both evaluator functions are one measurement; its counts and the kit's timer are others."""
    runnable, direct = ReferenceTimer(TIME_RUNNABLE, time_ms=len), ReferenceTimer(FLASHINFER_CUPTI, time_ms=len)
    kit = ReferenceTimer(KIT_PROFILER, fallback="no CUPTI")
    assert runnable.method(1, 5, 3) == direct.method(1, 5, 3)
    assert len({runnable.method(1, 5, 3), runnable.method(1, 5, 1), runnable.method(10, 50, 3),
                kit.method(1, 5, 3)}) == 4
    assert kit.method(1, 5, 3) == kit.method(10, 50, 3)  # the kit's bounded timer takes no counts

"""GPU timing tiers.

kernel: the official evaluator's method (flashinfer-bench HEAD's bench_gpu_time_with_cupti):
    before every call a 256 MB buffer is zeroed, flushing L2; CUPTI (through torch.profiler)
    records every kernel, and one call's time is from its first kernel's start to its last
    kernel's end. The median over calls is reported, in microseconds.
Before profiling, the same flush-and-call loop runs for BUSY_SECONDS so the GPU's clocks are
up whatever ran before.
kernel sum: from the same profile, the sum of one call's kernel durations (median over calls):
    the GPU work alone, without the gaps between kernels.
graph: one replay of the call captured in a CUDA graph, timed with CUDA events (warm L2,
    median): what a serving engine that replays graphs pays, host gaps gone.
floor: the same measurement of `new.copy_(old)` for a state: the bytes any correct kernel moves.
host: wall time of `synchronize; fn(); synchronize`, the cost a sync-in-loop harness (and a
    serving loop without CUDA graphs) pays per call, launch overhead included.
"""

import functools
import statistics
import time
from collections.abc import Callable, Sequence

import torch

L2_FLUSH_BYTES = 256 << 20
# Aim for this much profiled GPU time per measurement, within [MIN, max] calls.
TARGET_SECONDS = 0.2
MIN_CALLS = 5
BUSY_SECONDS = 0.025


class TimingError(RuntimeError):
    """The profile could not be split into one group of kernels per call."""


def group_calls(kernels: Sequence[tuple[str, float, float]], flush_names: frozenset[str]) -> list[list[tuple[float, float]]]:
    """Per call, its kernels' (start, end), from (name, start, end) kernel records.

    Records are taken in start order; each flush kernel opens a new call. Kernels before the
    first flush are ignored (warm-up). A call with no kernel is an error: the timed function
    launched nothing, and zero would be a lie.
    """
    calls: list[list[tuple[float, float]]] = []
    for name, start, end in sorted(kernels, key=lambda r: r[1]):
        if name in flush_names:
            calls.append([])
        elif calls:
            calls[-1].append((start, end))
    if any(not c for c in calls):
        raise TimingError("a timed call launched no kernel between two L2 flushes")
    return calls


def call_span(call: Sequence[tuple[float, float]]) -> float:
    """A call's duration: from its first kernel's start to its last kernel's end."""
    return max(e for _, e in call) - min(s for s, _ in call)


def group_call_times(kernels: Sequence[tuple[str, float, float]], flush_names: frozenset[str]) -> list[float]:
    """Per-call durations (group_calls, call_span)."""
    return [call_span(c) for c in group_calls(kernels, flush_names)]


def _device_kernels(prof) -> list[tuple[str, float, float]]:
    return [
        (e.name, e.time_range.start, e.time_range.end)
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
    ]


def _profile(body: Callable[[], None]) -> list[tuple[str, float, float]]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        body()
        torch.cuda.synchronize()
    return _device_kernels(prof)


def _busy(flush: Callable[[], None], fn: Callable[[], None]) -> None:
    """Keep the GPU busy with the timed loop's own work for BUSY_SECONDS first, so its clocks
    have ramped up from idle whatever ran before: short, latency-bound kernels are timed
    several percent slower on a GPU that was idle (or only synchronizing) just before."""
    deadline = time.perf_counter() + BUSY_SECONDS
    while time.perf_counter() < deadline:
        flush()
        fn()
    torch.cuda.synchronize()


def _calls_for(fn: Callable[[], None], max_calls: int) -> int:
    """How many calls fit TARGET_SECONDS, from one synchronized call's wall time."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once = max(time.perf_counter() - start, 1e-6)
    return max(MIN_CALLS, min(max_calls, int(TARGET_SECONDS / once)))


@functools.cache
def _flush() -> tuple[Callable[[], None], frozenset[str]]:
    """The L2 flush (zeroing a 256 MB buffer) and the names of the kernels it launches."""
    buffer = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    return buffer.zero_, frozenset(name for name, _, _ in _profile(buffer.zero_))


def _profiled_calls(fn: Callable[[], None], max_calls: int, warmup: int) -> list[list[tuple[float, float]]]:
    """Each profiled call's kernels (start, end), every call after an L2 flush."""
    flush, flush_names = _flush()
    for _ in range(warmup):
        fn()
    _busy(flush, fn)
    count = _calls_for(fn, max_calls)

    def body():
        for _ in range(count):
            flush()
            fn()

    calls = group_calls(_profile(body), flush_names)
    if len(calls) != count:
        raise TimingError(f"profile split into {len(calls)} calls, expected {count}")
    return calls


def kernel_time_us(fn: Callable[[], None], max_calls: int = 100, warmup: int = 3) -> float:
    """Median CUPTI time of one call of `fn` with a cold L2 (see module docstring), in µs."""
    return kernel_times_us(fn, max_calls, warmup)[0]


def kernel_times_us(fn: Callable[[], None], max_calls: int = 100, warmup: int = 3) -> tuple[float, float]:
    """(span, kernel sum) of one call of `fn` with a cold L2, medians over calls, in µs: the
    span from its first kernel's start to its last kernel's end, and the sum of its kernels'
    durations (see module docstring)."""
    calls = _profiled_calls(fn, max_calls, warmup)
    spans = [call_span(c) for c in calls]
    sums = [sum(e - s for s, e in c) for c in calls]
    return statistics.median(spans), statistics.median(sums)


def graph_replay_us(fn: Callable[[], None], replays: int = 30, warmup: int = 3) -> float:
    """Median time of one replay of `fn` captured in a CUDA graph, by CUDA events (warm L2), in
    µs. Raises RuntimeError (torch's) when `fn` cannot be captured (a host synchronization)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as capture requires
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(warmup):
        graph.replay()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def copy_floor_us(shape: tuple[int, ...], max_calls: int = 100) -> float:
    """kernel_time_us of new.copy_(old) for float32 tensors of `shape` (a state, say)."""
    old = torch.randn(*shape, device="cuda")
    new = torch.empty_like(old)
    return kernel_time_us(lambda: new.copy_(old), max_calls)


def host_time_us(fn: Callable[[], None], calls: int = 200, warmup: int = 10) -> float:
    """Median wall time of `synchronize; fn(); synchronize`, in µs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)

"""GPU timing tiers.

kernel: before every call a 256 MB buffer is zeroed, flushing L2; CUPTI (through
    torch.profiler) records every kernel, and one call's time is from its first kernel's start
    to its last kernel's end. The median over calls is reported, in microseconds. That is the
    span the contest's evaluator times (FlashInfer's bench_gpu_time_with_cupti, which also
    synchronizes before each call and traces every runtime and driver call for a Python
    callback); for a host-bound call with many launches, such as a definition's reference,
    the two differ, and the reference is timed by the evaluator's own function
    (gdn_bench.evaluator_timing).
Before profiling, the same flush-and-call loop runs for BUSY_SECONDS so the GPU's clocks are
up whatever ran before.
kernel sum: from the same profile, the sum of one call's kernel durations (median over calls):
    the GPU work alone, without the gaps between kernels.
graph: one replay of the call captured in a CUDA graph, its CUPTI span (warm L2, median): what
    a serving engine that replays graphs pays on the GPU, host gaps and the graph's launch
    gone (until 2026-11-27 this tier timed a lone replay with CUDA events, which counted the
    host's launch of the graph: ~10-15 µs more on an H200, docs/perf.md).
floor: the same measurement of `new.copy_(old)` for a state: the bytes any correct kernel moves.
host: wall time of `synchronize; fn(); synchronize`, the cost a sync-in-loop harness (and a
    serving loop without CUDA graphs) pays per call, launch overhead included.
A call that takes SLOW_CALL_SECONDS or more (a Python loop over tokens, such as the prefill
definition's reference: about a second at 8192 tokens) is timed by bounded_kernel_time_us the
same way with fewer calls, and says how many (the reference's timer where the evaluator's
cannot run); a Python loop already called in the process, by one profiled call
(single_call_time_us).
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
# bounded_kernel_time_us: a call this slow is profiled as many times as fit TARGET_SECONDS, at
# least MIN_SLOW_CALLS (the median of 3 drops one outlier), after one warm-up call only.
SLOW_CALL_SECONDS = 0.01
MIN_SLOW_CALLS = 3


class TimingError(RuntimeError):
    """The profile could not be split into one group of kernels per call."""


def split_calls(kernels: Sequence[Sequence], flush_names: frozenset[str]) -> list[list]:
    """Kernel records (name, start, end, ...) grouped into calls, each in start order.

    Records are taken in start order; each flush kernel opens a new call and is left out.
    Kernels before the first flush are ignored (warm-up). A call with no kernel is an error:
    the timed function launched nothing, and zero would be a lie.
    """
    calls: list[list] = []
    for record in sorted(kernels, key=lambda r: r[1]):
        if record[0] in flush_names:
            calls.append([])
        elif calls:
            calls[-1].append(record)
    if any(not c for c in calls):
        raise TimingError("a timed call launched no kernel between two L2 flushes")
    return calls


def call_span(call: Sequence[Sequence]) -> float:
    """One call's duration: from its first kernel's start to its last kernel's end."""
    return max(r[2] for r in call) - min(r[1] for r in call)


def group_call_times(kernels: Sequence[tuple[str, float, float]], flush_names: frozenset[str]) -> list[float]:
    """Per-call durations (call_span) from (name, start, end) kernel records (split_calls)."""
    return [call_span(c) for c in split_calls(kernels, flush_names)]


def _device_kernels(prof, device=torch.autograd.DeviceType.CUDA) -> list[tuple[str, float, float]]:
    """(name, start µs, end µs) of every event the profile recorded on `device` (kernels, for
    CUDA), times from the trace's start: the records prof.events() holds, read straight from
    the profiler's results. prof.events() builds a Python object per event first (150 µs each
    on a CPU profile of prefill's reference, against 10 here), minutes for the ~10^5 kernels
    of a few calls of a Python loop over tokens."""
    results = prof.profiler.kineto_results
    origin = results.trace_start_ns()
    return [(e.name(), (e.start_ns() - origin) / 1e3, (e.end_ns() - origin) / 1e3)
            for e in results.events() if e.device_type() == device and not _hidden(e)]


def _hidden(event) -> bool:
    """Whether torch's own parsing leaves the event out (a profiler-internal one)."""
    return getattr(event, "is_hidden_event", lambda: False)()


def _profile(body: Callable[[], None]) -> torch.profiler.profile:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        body()
        torch.cuda.synchronize()
    return prof


def _busy(flush: Callable[[], None], fn: Callable[[], None]) -> None:
    """Keep the GPU busy with the timed loop's own work for BUSY_SECONDS first, so its clocks
    have ramped up from idle whatever ran before: short, latency-bound kernels are timed
    several percent slower on a GPU that was idle (or only synchronizing) just before."""
    deadline = time.perf_counter() + BUSY_SECONDS
    while time.perf_counter() < deadline:
        flush()
        fn()
    torch.cuda.synchronize()


def _wall_seconds(fn: Callable[[], None]) -> float:
    """The wall time of one synchronized call, in seconds."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return max(time.perf_counter() - start, 1e-6)


def _calls_for(fn: Callable[[], None], max_calls: int) -> int:
    """How many calls fit TARGET_SECONDS, from one synchronized call's wall time."""
    return max(MIN_CALLS, min(max_calls, int(TARGET_SECONDS / _wall_seconds(fn))))


@functools.cache
def _flush() -> tuple[Callable[[], None], frozenset[str]]:
    """The L2 flush (zeroing a 256 MB buffer) and the names of the kernels it launches."""
    buffer = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    return buffer.zero_, frozenset(name for name, _, _ in _device_kernels(_profile(buffer.zero_)))


def profile_cold_calls(fn: Callable[[], None], calls: int | None = None, max_calls: int = 100,
                       warmup: int = 3, busy: bool = True) -> tuple[torch.profiler.profile, frozenset[str], int]:
    """torch.profiler (CUDA activity) over `calls` calls of `fn`, each after an L2 flush, once
    `warmup` calls and (unless `busy` is False) the busy loop have run (see module docstring).
    `calls` None: as many as fit TARGET_SECONDS, within [MIN_CALLS, max_calls]. Returns the
    finished profiler, the flush kernels' names (they open each call: split_calls) and the
    number of calls."""
    flush, flush_names = _flush()
    for _ in range(warmup):
        fn()
    if busy:
        _busy(flush, fn)
    calls = calls or _calls_for(fn, max_calls)

    def body():
        for _ in range(calls):
            flush()
            fn()

    return _profile(body), flush_names, calls


def _cold_calls(fn: Callable[[], None], max_calls: int, warmup: int, calls: int | None = None,
                busy: bool = True) -> list[list]:
    """Each profiled call's kernel records (profile_cold_calls, split_calls)."""
    prof, flush_names, count = profile_cold_calls(fn, calls, max_calls, warmup, busy)
    calls = split_calls(_device_kernels(prof), flush_names)
    if len(calls) != count:
        raise TimingError(f"profile split into {len(calls)} calls, expected {count}")
    return calls


def kernel_time_us(fn: Callable[[], None], max_calls: int = 100, warmup: int = 3) -> float:
    """Median CUPTI time of one call of `fn` with a cold L2 (see module docstring), in µs."""
    return statistics.median(call_span(c) for c in _cold_calls(fn, max_calls, warmup))


def slow_calls(once: float, max_calls: int = 100) -> int | None:
    """How many calls bounded_kernel_time_us profiles when one takes `once` seconds: None (as
    many as kernel_time_us does) under SLOW_CALL_SECONDS; else as many as fit TARGET_SECONDS,
    within [MIN_SLOW_CALLS, max_calls]."""
    if once < SLOW_CALL_SECONDS:
        return None
    return max(MIN_SLOW_CALLS, min(max_calls, int(TARGET_SECONDS / once)))


def bounded_kernel_time_us(fn: Callable[[], None], max_calls: int = 100) -> tuple[float, int]:
    """kernel_time_us for a call that may take seconds: (median µs, how many calls it is the
    median of). One warm-up call, then one timed by the wall clock decides (slow_calls): a
    fast call is timed as kernel_time_us times it; a slow one is profiled slow_calls times with
    no more warm-up and no busy loop (its own length, not the clocks, decides its time). A
    one-second call thus costs 2 + MIN_SLOW_CALLS calls, not kernel_time_us's 10."""
    fn()
    count = slow_calls(_wall_seconds(fn), max_calls)
    if count is None:
        calls = _cold_calls(fn, max_calls, warmup=1)
    else:
        calls = _cold_calls(fn, max_calls, warmup=0, calls=count, busy=False)
    return statistics.median(call_span(c) for c in calls), len(calls)


def single_call_time_us(fn: Callable[[], None]) -> float:
    """The span of one profiled call of `fn` with a cold L2, no warm-up and no busy loop, in µs:
    for a Python loop of small launches that already ran in this process, whose time is its
    host's launches (thousands of them, so one call varies little) and whose profiled call
    costs several plain ones (gdn_bench.run_estimate)."""
    return call_span(_cold_calls(fn, 1, warmup=0, calls=1, busy=False)[0])


def kernel_times_us(fn: Callable[[], None], max_calls: int = 100, warmup: int = 3) -> tuple[float, float]:
    """(span, kernel sum) of one call of `fn` with a cold L2, medians over calls, in µs (see
    module docstring)."""
    calls = _cold_calls(fn, max_calls, warmup)
    return (statistics.median(call_span(c) for c in calls),
            statistics.median(sum(end - start for _, start, end in c) for c in calls))


def capture_graph(fn: Callable[[], object], warmup: int = 3) -> Callable[[], None]:
    """fn captured once into a CUDA graph (after warm-up on a side stream, as capture needs);
    returns its replay. Raises (torch's error) when fn cannot be captured, e.g. on a host
    synchronization inside it."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def graph_replay_us(fn: Callable[[], object], replays: int = 30, warmup: int = 3) -> float:
    """Median time of one replay of `fn` captured in a CUDA graph (capture_graph), in µs: the
    CUPTI span of the replay's GPU work, from its first kernel's start to its last one's end
    (warm L2: nothing is flushed). This is what an engine that replays graphs pays on the
    GPU; the host's launch of the graph, which such an engine overlaps with the GPU's work
    before it, is left out (CUDA events around a lone replay count it: ~10-15 µs on an H200,
    the whole of a short call's number). Replays are separated by a synchronization, so the
    kernels of each replay are split by count."""
    replay = capture_graph(fn, warmup)
    for _ in range(warmup):
        replay()
    torch.cuda.synchronize()
    per_replay = len(_device_kernels(_profile(replay)))

    def replays_apart() -> None:
        for _ in range(replays):
            replay()
            torch.cuda.synchronize()

    kernels = sorted(_device_kernels(_profile(replays_apart)), key=lambda r: r[1])
    if per_replay == 0 or len(kernels) != per_replay * replays:
        raise TimingError(f"a graph replay launched {per_replay} kernels once and {len(kernels)} in {replays} replays")
    return statistics.median(call_span(kernels[i:i + per_replay]) for i in range(0, len(kernels), per_replay))


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

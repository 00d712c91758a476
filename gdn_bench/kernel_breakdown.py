"""The breakdown mode of scripts/profile_call.py: every kernel of one call, in launch order, with its
launch configuration and median time, and what the call costs as a whole, eagerly and as a
CUDA-graph replay (GPU).

Method: gdn_bench.timing.profile_cold_calls runs the call `repeats` times, each after a
256 MB L2 flush, under torch.profiler (CUPTI). Its Kineto trace gives every GPU activity's
name, start and end and, for kernels, the grid, block, registers per thread and shared
memory per block that CUPTI reports. The flushes split the trace into calls
(gdn_bench.timing.split_calls); calls whose kernel sequence differs from the most common one
are left out and counted. Per kernel: the median duration over the calls kept. Per call:
the span from its first kernel's start to its last kernel's end, median (what
kernel_time_us reports), and the sum of the kernels' medians; span − sum is the time between
kernels (launch gaps, waits). Then the call is captured once into a CUDA graph and its replay
timed the same way: a replay span below the eager span is launch overhead the graph removes.
"""

import json
import statistics
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch

from gdn_bench.timing import call_span, capture_graph, profile_cold_calls, split_calls

# Kineto trace categories of GPU activities (lower-cased: older versions capitalize them).
GPU_CATEGORIES = ("kernel", "gpu_memset", "gpu_memcpy")
NAME_WIDTH = 56  # longer kernel names are cut in the table (the JSON keeps them whole)


class Activity(NamedTuple):
    """One GPU activity of a trace: times in µs; launch facts None where not reported. Its
    first three fields are gdn_bench.timing's kernel record (name, start, end)."""

    name: str
    start: float
    end: float
    grid: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None
    registers: int | None = None
    shared_bytes: int | None = None


@dataclass(frozen=True)
class KernelRow:
    """One kernel position of the call: its launch facts and median duration (µs)."""

    index: int
    name: str
    grid: tuple[int, ...] | None
    block: tuple[int, ...] | None
    registers: int | None
    shared_bytes: int | None
    median_us: float


@dataclass(frozen=True)
class Breakdown:
    """The call's kernels and times (µs). `calls` calls were kept, `dropped` left out for a
    different kernel sequence. `graph_span_us` is None when the call could not be captured
    into a CUDA graph; `graph_note` then says why."""

    kernels: list[KernelRow]
    span_us: float
    calls: int
    dropped: int
    graph_span_us: float | None = None
    graph_note: str = ""

    @property
    def kernel_sum_us(self) -> float:
        return sum(k.median_us for k in self.kernels)


def _triple(value) -> tuple[int, ...] | None:
    return tuple(int(v) for v in value) if isinstance(value, list) else None


def _integer(value) -> int | None:
    return int(value) if isinstance(value, int | float) else None


def trace_activities(trace: dict) -> list[Activity]:
    """The GPU activities of a Chrome-trace dict (torch.profiler's export_chrome_trace):
    complete events ("ph": "X") of a GPU category; launch facts from their args where present."""
    activities = []
    for event in trace.get("traceEvents", []):
        if event.get("ph") != "X" or str(event.get("cat", "")).lower() not in GPU_CATEGORIES:
            continue
        args = event.get("args", {})
        start = float(event["ts"])
        activities.append(Activity(
            event["name"], start, start + float(event.get("dur", 0.0)), _triple(args.get("grid")),
            _triple(args.get("block")), _integer(args.get("registers per thread")),
            _integer(args.get("shared memory")),
        ))
    return activities


def _profiled_calls(fn: Callable[[], object], repeats: int) -> list[list[Activity]]:
    """`repeats` cold-L2 calls of fn under torch.profiler, split into calls."""
    prof, flush_names, _ = profile_cold_calls(fn, calls=repeats)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    return split_calls(trace_activities(trace), flush_names)


def summarize(calls: Sequence[Sequence[Activity]]) -> tuple[list[KernelRow], float, int, int]:
    """(kernel rows, median span µs, calls kept, calls dropped) of calls split from a trace:
    only the calls launching the most common kernel sequence count (see module docstring)."""
    sequences = Counter(tuple(a.name for a in call) for call in calls)
    common = sequences.most_common(1)[0][0]
    kept = [call for call in calls if tuple(a.name for a in call) == common]
    rows = []
    for index, first in enumerate(kept[0]):
        rows.append(KernelRow(index + 1, first.name, first.grid, first.block, first.registers, first.shared_bytes,
                              statistics.median(call[index].end - call[index].start for call in kept)))
    return rows, statistics.median(call_span(call) for call in kept), len(kept), len(calls) - len(kept)


def measure(fn: Callable[[], object], repeats: int) -> Breakdown:
    """The breakdown of one call (see module docstring); the graph is captured last, so that a
    call that cannot be captured leaves the eager numbers intact."""
    rows, span, kept, dropped = summarize(_profiled_calls(fn, repeats))
    try:
        replay = capture_graph(fn)
    except Exception as e:  # noqa: BLE001 - any capture failure is reported, not fatal
        return Breakdown(rows, span, kept, dropped, None, f"not capturable ({type(e).__name__}: {e})".splitlines()[0])
    _, graph_span, _, _ = summarize(_profiled_calls(replay, repeats))
    return Breakdown(rows, span, kept, dropped, graph_span)


def _dims(value: tuple[int, ...] | None) -> str:
    return "-" if value is None else "×".join(map(str, value))


def _short(name: str) -> str:
    return name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH - 1] + "…"


def format_breakdown(b: Breakdown) -> str:
    """The table (one line per kernel) and the call's totals."""
    head = ("#", "kernel", "grid", "block", "regs", "smem B", "median µs")
    cells = [(str(k.index), _short(k.name), _dims(k.grid), _dims(k.block),
              "-" if k.registers is None else str(k.registers),
              "-" if k.shared_bytes is None else str(k.shared_bytes), f"{k.median_us:.2f}") for k in b.kernels]
    widths = [max(len(row[i]) for row in [head, *cells]) for i in range(len(head))]

    def line(row):
        return "  ".join(c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))

    gap = b.span_us - b.kernel_sum_us
    graph = (f"{b.graph_span_us:.2f} µs (eager span − graph span = {b.span_us - b.graph_span_us:.2f} µs)"
             if b.graph_span_us is not None else b.graph_note)
    dropped = f"; {b.dropped} more left out for another kernel sequence" if b.dropped else ""
    return "\n".join([
        line(head), *map(line, cells), "",
        f"sum of kernel medians   {b.kernel_sum_us:.2f} µs",
        f"call span (CUPTI)       {b.span_us:.2f} µs (first start to last end, median of {b.calls} calls{dropped}; "
        f"span − sum = {gap:.2f} µs between kernels)",
        f"CUDA-graph replay span  {graph}",
    ])

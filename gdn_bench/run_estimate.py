"""How long a GPU run of run_local will take, said before it starts, and which algorithm costs it.

A kernel's call takes microseconds; an algorithm that is a Python loop of small launches
(Algo.launches: the pt-references) takes its launches times the host's cost of one launch,
LAUNCH_SECONDS, measured on an H200: mtp's pt-reference took 3.93 ms a call for 372 launches
(B=1 T=2) and 244 ms for about 22,500 (B=64 T=2) in flashinfer-bench's Benchmark
(docs/data/serving/h200/run_local_mtp_report.txt), about 10.7 µs a launch either way. The
launch counts per call are counted on CPU (tests/test_run_estimate.py).

Such an algorithm goes through the Benchmark with LOOP_HARNESS's counts, unless the run gives
--warmup / --iterations / --trials (the contest's 10 / 50 / 3 made mtp's pt-reference 183
calls a workload: 19 minutes on the generated mix, of a run that took 15 or more), and its
kernel time is the kit's bounded timer's (gdn_bench.timing.bounded_kernel_time_us): at least
3 profiled calls after 2. So its calls per workload are `loop_calls`. The estimate counts these
loops only: compiling each kernel for each new shape (Triton; FlashInfer's CuTe DSL for
fi-baseline) on a fresh machine comes on top and is not estimated.
"""

from __future__ import annotations

from gdn_bench.definitions.spec import Harness

LAUNCH_SECONDS = 10.7e-6
LOOP_HARNESS = Harness(warmup=1, iterations=5, trials=1)
# Outside the Benchmark, per workload: one call in the margins tier, and the kernel tier's
# bounded timer: one call, one timed by the wall clock, then MIN_SLOW_CALLS (3) profiled.
OTHER_CALLS = 1 + 2 + 3


def loop_harness(given: dict) -> dict:
    """The Benchmark's warm-up / iterations / trials for a loop algorithm: those the run gives
    (None where it gives none), else LOOP_HARNESS's."""
    return {name: getattr(LOOP_HARNESS, name) if given[name] is None else given[name]
            for name in ("warmup", "iterations", "trials")}


def loop_calls(harness: dict) -> int:
    """A loop algorithm's calls per workload: flashinfer-bench 0.1.2's Benchmark (one per trial
    for correctness, then warm-up and iterations per trial) and OTHER_CALLS."""
    return harness["trials"] * (1 + harness["warmup"] + harness["iterations"]) + OTHER_CALLS


def loop_seconds(algos, workloads, harness: dict) -> dict[str, float]:
    """{name: seconds} of each loop algorithm in `algos` over `workloads` (their axes), with
    the Benchmark's counts `harness` (loop_harness's)."""
    calls = loop_calls(harness)
    return {a.name: calls * LAUNCH_SECONDS * sum(a.launches(dict(w.axes)) for w in workloads)
            for a in algos if a.launches is not None}


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def estimate_line(algos, workloads, harness: dict) -> str:
    """One line for the run's start: what the loop algorithms will take and which costs most,
    or that none runs."""
    seconds = loop_seconds(algos, workloads, harness)
    counts = f"{harness['warmup']}/{harness['iterations']}/{harness['trials']}"
    if not seconds:
        return (f"estimate: no Python-loop algorithm selected; the time is each kernel's compilation per shape "
                f"and the timing tiers, over {len(workloads)} workloads")
    parts = ", ".join(f"{name} {_duration(s)}" for name, s in sorted(seconds.items(), key=lambda x: -x[1]))
    return (f"estimate: about {_duration(sum(seconds.values()))} in Python-loop algorithms ({parts}: "
            f"{loop_calls(harness)} calls a workload, harness warm-up/iterations/trials {counts}, "
            f"{LAUNCH_SECONDS * 1e6:.1f} µs a launch as on an H200), plus each kernel's compilation per shape")

"""How long a GPU run of run_local will take, said before it starts, tier by tier.

What costs time on a GPU, besides compiling each kernel for each new shape (Triton; FlashInfer's
CuTe DSL for fi-baseline: not estimated), is host time:

- flashinfer-bench's Benchmark: about BENCH_CASE_SECONDS per (algorithm, workload) of its own
  (worker processes, building, checking), and the calls themselves;
- a Python-loop algorithm (Algo.launches: the pt-references), whose call takes its launches
  times LAUNCH_SECONDS: its Benchmark pass at LOOP_HARNESS's counts, one call in the margins
  tier, and in the kernel tier one call profiled (gdn_bench.timing.single_call_time_us), which
  costs PROFILED_CALL_FACTOR plain ones;
- the definition reference on every workload whose time is not cached
  (gdn_bench.reference_times): the contest evaluator's timer makes 6 + warm-up + iterations
  calls a trial, one trial only where a call takes SLOW_CALL_SECONDS or more
  (gdn_bench.evaluator_timing), and each of its `iterations` traced calls costs about
  TRACED_CALL_SECONDS besides its launches (DefinitionSpec.reference_launches, counted on CPU).

Calibrated on an H200 (flashinfer-python 0.7.2, cupti-python 13) on mtp's generated mix
(28 workloads, 583,792 pt-reference launches a pass):
- LAUNCH_SECONDS: mtp's pt-reference took 3.93 ms a call for 372 launches (B=1 T=2) and 244 ms
  for about 22,500 (B=64 T=2) in the Benchmark (docs/data/serving/h200/run_local_mtp_report.txt):
  about 10.7 µs a launch either way;
- BENCH_CASE_SECONDS: its Benchmark pass at 1/5/1 took 53 s, of which its 7 calls a workload
  explain 44 s: the other 9 s over 28 workloads;
- PROFILED_CALL_FACTOR: its kernel time by the bounded timer (2 plain calls, then at least 3,
  or 0.2 s' worth, profiled) took 111 s, where plain calls would have taken 12.6 + 19.8 s;
- TRACED_CALL_SECONDS: the definition reference (the kit's, vectorized over rows and heads: 44 +
  10 T launches a call, about 1 ms) took 10 to 12 s a workload at 10/50/3 whatever its T, in
  198 calls of which 150 traced: the launches explain 0.2 s of it, the rest is the evaluator
  timer's (CUPTI tracing every runtime and driver call, records copied in Python).
"""

from __future__ import annotations

from dataclasses import dataclass

from gdn_bench.definitions.spec import Harness
from gdn_bench.timing import SLOW_CALL_SECONDS

LAUNCH_SECONDS = 10.7e-6
BENCH_CASE_SECONDS = 0.33
PROFILED_CALL_FACTOR = 5
TRACED_CALL_SECONDS = 0.072
# The evaluator's timer (FlashInfer's bench_gpu_time_with_cupti): one call, 5 to estimate its
# length, then the warm-up and the iterations, per trial.
TIMER_EXTRA_CALLS = 6
# A loop algorithm's Benchmark counts unless the run gives them: its correctness call (one a
# trial) warms it up, and a loop of thousands of launches varies little from call to call.
LOOP_HARNESS = Harness(warmup=0, iterations=3, trials=1)


@dataclass(frozen=True)
class Tier:
    """One thing the run will spend time on: its name, seconds, and what they are, in words."""

    name: str
    seconds: float
    detail: str


def loop_harness(given: dict) -> dict:
    """The Benchmark's warm-up / iterations / trials for a loop algorithm: those the run gives
    (None where it gives none), else LOOP_HARNESS's."""
    return {name: getattr(LOOP_HARNESS, name) if given[name] is None else given[name]
            for name in ("warmup", "iterations", "trials")}


def slashed(harness: dict) -> str:
    """Warm-up / iterations / trials as the bars and the estimate write them, e.g. 10/50/3."""
    return f"{harness['warmup']}/{harness['iterations']}/{harness['trials']}"


def benchmark_calls(harness: dict) -> int:
    """Calls per workload of an algorithm in flashinfer-bench 0.1.2's Benchmark: one per trial
    for correctness, then the warm-up and the iterations."""
    return harness["trials"] * (1 + harness["warmup"] + harness["iterations"])


def loop_tier(algo, workloads, loop: dict) -> Tier:
    """A Python-loop algorithm over `workloads`: its Benchmark pass at `loop`'s counts, one call
    in the margins tier and one profiled call in the kernel tier."""
    call_seconds = LAUNCH_SECONDS * sum(algo.launches(dict(w.axes)) for w in workloads)
    calls = benchmark_calls(loop) + 1 + PROFILED_CALL_FACTOR
    seconds = calls * call_seconds + BENCH_CASE_SECONDS * len(workloads)
    return Tier(algo.name, seconds, f"{benchmark_calls(loop)} calls a workload in the Benchmark at {slashed(loop)}, "
                                    "1 checked, 1 profiled")


def reference_calls(launches: int, harness: dict) -> tuple[int, int]:
    """(calls, traced calls) of the evaluator's timer on one workload of the definition reference
    that makes `launches` launches a call: one trial where a call takes SLOW_CALL_SECONDS or more."""
    trials = 1 if launches * LAUNCH_SECONDS >= SLOW_CALL_SECONDS else harness["trials"]
    return trials * (TIMER_EXTRA_CALLS + harness["warmup"] + harness["iterations"]), trials * harness["iterations"]


def reference_tier(spec, uncached, harness: dict) -> Tier:
    """The definition reference measured on the `uncached` workloads at `harness`'s counts."""
    seconds, calls = 0.0, set()
    for w in uncached:
        launches = spec.reference_launches(dict(w.axes)) if spec.reference_launches else 0
        total, traced = reference_calls(launches, harness)
        seconds += total * launches * LAUNCH_SECONDS + traced * TRACED_CALL_SECONDS
        calls.add(total)
    each = "/".join(map(str, sorted(calls)))
    unknown = "" if spec.reference_launches else "; its launches, which the axes do not give, left out"
    return Tier("definition reference", seconds, f"{len(uncached)} uncached workloads, {each} calls each at "
                                                 f"{slashed(harness)}, evaluator's timer{unknown}")


def tiers(spec, algos, workloads, harness: dict, loop: dict, uncached) -> list[Tier]:
    """What a GPU run of `algos` over `workloads` will spend time on, costliest first: the
    definition reference on `uncached` workloads, each loop algorithm, and the kernels'
    Benchmark pass at `harness`'s counts."""
    found = [reference_tier(spec, uncached, harness)] if uncached else []
    found += [loop_tier(a, workloads, loop) for a in algos if a.launches is not None]
    kernels = [a for a in algos if a.launches is None]
    if kernels:
        found.append(Tier("Benchmark of the kernels", BENCH_CASE_SECONDS * len(kernels) * len(workloads),
                          f"{len(kernels)} algorithms x {len(workloads)} workloads at {slashed(harness)}"))
    return sorted(found, key=lambda t: -t.seconds)


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def estimate_line(found: list[Tier]) -> str:
    """One line for the run's start: the total and each tier's part (`tiers`)."""
    parts = "; ".join(f"{t.name} {duration(t.seconds)} ({t.detail})" for t in found)
    return (f"estimate: about {duration(sum(t.seconds for t in found))}: {parts}; plus compiling each kernel "
            f"per shape (as on an H200: gdn_bench/run_estimate.py)")

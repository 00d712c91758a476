"""run_local's contest speedups against flashinfer-bench's own CLI on the same workloads
(scripts/compare_fib_cli.py).

From a run_local results.json written on a GPU (with reference times), `pick_workloads`
takes a few workloads where the submission passed, spread over the reference's times (for
prefill, from about a millisecond to seconds: the long ones carry the contest score);
`write_cli_trace_set` writes a trace set folder for flashinfer-bench's CLI: the run's
definition as its trace set holds it (same reference text), those workloads, a link to the
trace set's blobs, and the submission packed as pack_solution packs it. `cli_command` is the
`flashinfer-bench run` command line, with the run's warm-up / iterations / trials; it times
the reference (BenchmarkConfig.profile_baseline is True by default) and appends one trace per
workload under traces/, each with performance.reference_latency_ms, latency_ms and
speedup_factor (= reference / solution). `compare` puts both side by side, and `agreement`
counts the reference times within TOLERANCE of each other (issue 27's criterion).

What to expect: run_local times the reference with the evaluator's own function
(gdn_bench.evaluator_timing), so against flashinfer-bench main's CLI (the contest's
evaluator: CUPTI, cold L2, the mean over trials of medians) the reference times agree within
the noise, and so should the submission's, which run_local times with the kit's CUPTI span
(the same span; on our prefill submission the two agreed within 9 %, issue 27).
flashinfer-bench 0.1.2's CLI times with CUDA events around each call after a synchronize (the
mean over iterations, then over trials): the host's launch time is inside each call's time,
so a submission of a few µs reads slower there and its speedup lower (their issue #195).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gdn_bench.definitions import DefinitionSpec
from gdn_bench.packing import write_solution
from gdn_bench.results import Results, speedups

if TYPE_CHECKING:  # flashinfer-bench is imported where it is used: compare_fib_cli checks its arguments first
    from flashinfer_bench import Definition, Solution, Trace, TraceSet

DEFAULT_COUNT = 5
# Issue 27's criterion: the CLI's reference time within this fraction of run_local's.
TOLERANCE = 0.10


def pick_workloads(results: Results, count: int = DEFAULT_COUNT) -> list[str]:
    """Up to `count` workloads (uuids) where the submission passed and it and the reference
    were timed, evenly spread over them in the order of the reference's time (the fastest and
    the slowest included; ties in size order)."""
    scored = speedups(results, results.meta["submission"], results.reference_us)
    reference_us = results.reference_us
    rows = sorted((r for r in results.rows if r.algo == results.meta["submission"] and r.workload in scored),
                  key=lambda r: (reference_us[r.workload], r.order()))
    if count <= 1 or len(rows) <= count:
        return [r.workload for r in rows[:count]]
    return list(dict.fromkeys(rows[round(i * (len(rows) - 1) / (count - 1))].workload for i in range(count)))


def write_cli_trace_set(root: Path, trace_set: TraceSet, definition: str, uuids: list[str],
                        solution: Solution, declared: Definition | None = None) -> TraceSet:
    """A trace set at `root` (a new folder) for flashinfer-bench's CLI: `definition` as
    `trace_set` holds it (or `declared`, another declaration of it: the official one, say), its
    workloads `uuids`, the blobs linked (blob/ -> the trace set's), and `solution` under
    solutions/. Returns it as flashinfer-bench loads it."""
    from flashinfer_bench import TraceSet

    from gdn_bench.trace_cache import new_trace_set

    root.mkdir(parents=True)
    chosen = new_trace_set(root, declared or trace_set.definitions[definition])
    by_uuid = {t.workload.uuid: t for t in trace_set.workloads[definition]}
    chosen.add_workload_traces([by_uuid[u] for u in uuids])
    if (Path(trace_set.root) / "blob").is_dir():
        (root / "blob").symlink_to((Path(trace_set.root) / "blob").resolve(), target_is_directory=True)
    write_solution(solution, root / "solutions" / f"{solution.name}.json")
    return TraceSet.from_path(str(root))


def cli_command(executable: str, root: Path, definition: str, solution: str, harness: dict,
                isolated: bool, profile_reference: bool = True) -> list[str]:
    """`flashinfer-bench run` on the trace set at `root`, one definition and one solution, with
    run_local's warm-up / iterations / trials (`harness`), saving its traces under root/traces;
    without `profile_reference`, the reference only makes the expected outputs
    (--no-profile-baseline, flashinfer-bench main's flag): no speedup, every status all the same."""
    command = [executable, "run", "--local", str(root), "--definitions", definition, "--solutions", solution,
               "--warmup-runs", str(harness["warmup"]), "--iterations", str(harness["iterations"]),
               "--num-trials", str(harness["trials"]), "--save-results"]
    return (command + (["--use-isolated-runner"] if isolated else [])
            + ([] if profile_reference else ["--no-profile-baseline"]))


def _ratio(theirs: float | None, ours: float | None) -> float | None:
    return theirs / ours if theirs and ours else None


def compare(results: Results, traces: list[Trace], solution: str, spec: DefinitionSpec) -> list[dict]:
    """One entry per workload that the CLI evaluated `solution` on: its label, run_local's
    reference and kernel µs and speedup, the CLI's status, reference and solution µs and
    speedup_factor, and the CLI's over run_local's: reference time, solution time and speedup
    (None where either is missing)."""
    submission = results.meta["submission"]
    ours = {r.workload: r for r in results.rows if r.algo == submission}
    scored = speedups(results, submission, results.reference_us)
    entries = []
    for trace in traces:
        if trace.solution != solution:
            continue
        uuid, evaluation = trace.workload.uuid, trace.evaluation
        performance = evaluation.performance
        row = ours.get(uuid)
        mine = {"reference_us": results.reference_us.get(uuid), "kernel_us": row.kernel_us if row else None,
                "speedup": scored.get(uuid)}
        theirs = {"status": evaluation.status.value,
                  "reference_us": performance.reference_latency_ms * 1e3 if performance else None,
                  "latency_us": performance.latency_ms * 1e3 if performance else None,
                  "speedup": performance.speedup_factor if performance else None}
        entries.append({
            "workload": uuid, "label": spec.workload_label(dict(trace.workload.axes)),
            "run_local": mine, "flashinfer_bench": theirs,
            "cli_over_run_local": _ratio(theirs["speedup"], mine["speedup"]),
            "reference_cli_over_run_local": _ratio(theirs["reference_us"], mine["reference_us"]),
            "ours_cli_over_run_local": _ratio(theirs["latency_us"], mine["kernel_us"]),
        })
    return entries


def agreement(entries: list[dict], tolerance: float = TOLERANCE) -> dict:
    """How well the reference times agree: of the entries with both (compared), how many have
    CLI / run_local within 1 ± tolerance (within), and the ratio farthest from 1 (worst; None
    with none compared)."""
    ratios = [e["reference_cli_over_run_local"] for e in entries if e.get("reference_cli_over_run_local")]
    return {"tolerance": tolerance, "compared": len(ratios),
            "within": sum(abs(r - 1) <= tolerance for r in ratios),
            "worst": max(ratios, key=lambda r: abs(r - 1), default=None)}


def format_agreement(summary: dict) -> str:
    """agreement's result in one line."""
    worst = "" if summary["worst"] is None else f" (farthest: {summary['worst']:.3f})"
    return (f"reference time, CLI / run_local: {summary['within']} of {summary['compared']} workloads within "
            f"{summary['tolerance']:.0%}{worst}")


def _fmt(value, spec: str) -> str:
    return "-" if value is None else f"{value:{spec}}"


def format_comparison(entries: list[dict]) -> str:
    """The comparison as a table: per workload, each side's reference µs, solution µs and
    speedup, then the CLI's over run_local's reference time, solution time and speedup."""
    header = (f"{'workload':<16} {'run_local: ref µs':>17} {'ours µs':>9} {'speedup':>9}   "
              f"{'CLI: ref µs':>12} {'ours µs':>9} {'speedup':>9} {'status':>8}   "
              f"{'CLI/run_local: ref':>18} {'ours':>6} {'speedup':>7}")
    lines = [header, "-" * len(header)]
    for e in entries:
        ours, theirs = e["run_local"], e["flashinfer_bench"]
        lines.append(f"{e['label']:<16} {_fmt(ours['reference_us'], '.1f'):>17} {_fmt(ours['kernel_us'], '.2f'):>9} "
                     f"{_fmt(ours['speedup'], '.1f'):>9}   {_fmt(theirs['reference_us'], '.1f'):>12} "
                     f"{_fmt(theirs['latency_us'], '.2f'):>9} {_fmt(theirs['speedup'], '.1f'):>9} "
                     f"{theirs['status'][:8]:>8}   {_fmt(e.get('reference_cli_over_run_local'), '.3f'):>18} "
                     f"{_fmt(e.get('ours_cli_over_run_local'), '.3f'):>6} {_fmt(e['cli_over_run_local'], '.3f'):>7}")
    return "\n".join(lines)

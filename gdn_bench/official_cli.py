"""flashinfer-bench main's own CLI (`flashinfer-bench run`, the contest's evaluator) on a
definition's whole generated trace set with the submission (scripts/official_cli.py): which
declaration it runs, how long its reference takes, and what its traces say.

The trace set folder and the command are gdn_bench.fib_compare's (write_cli_trace_set,
cli_command). For mtp the declaration is the official one, its own reference included (a
Python loop over rows, tokens and heads: about OFFICIAL_MTP_LAUNCHES_PER_STEP launches per
(row, token, v-head), counted on CPU), so the submission is checked against the official
math; prefill has no official text in the kit, so its declaration is the kit's (the official
axes and inputs, the kit's reference). By default the CLI runs with --no-profile-baseline: the
reference makes the expected outputs (one call per trial) and is not timed, so every status
is the CLI's but there is no speedup; timed, it costs `reference_calls` calls per workload.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from gdn_bench.run_estimate import LAUNCH_SECONDS, TIMER_EXTRA_CALLS

if TYPE_CHECKING:
    from flashinfer_bench import Definition, Trace

OFFICIAL_MTP_LAUNCHES_PER_STEP = 18  # official.json's loop, per (row, token, v-head) (tests/test_official_cli.py)
NUM_V_HEADS = 8


def declared_definition(short: str, official: bool) -> Definition | None:
    """The declaration the CLI runs for definition `short`: mtp's official one (with its own
    reference) when `official`, else None (the trace set's, with the kit's reference)."""
    if not official:
        return None
    if short != "mtp":
        raise ValueError(f"--reference official: the kit holds the official text of mtp only, not {short}'s")
    from gdn_bench.definitions.mtp.definition import official_definition

    return official_definition()


def reference_calls(harness: dict, profiled: bool) -> int:
    """How many times the CLI calls the reference per workload: once per trial for the expected
    outputs, and when `profiled`, time_runnable's calls on every trial's inputs."""
    per_trial = 1 + (TIMER_EXTRA_CALLS + harness["warmup"] + harness["iterations"] if profiled else 0)
    return harness["trials"] * per_trial


def official_mtp_pass_seconds(workloads: list) -> float:
    """The official mtp reference's host time for one call of every workload (its launches at
    LAUNCH_SECONDS each): the CLI's reference costs this times reference_calls."""
    steps = sum(w.axes["batch_size"] * w.axes["seq_len"] for w in workloads)
    return steps * NUM_V_HEADS * OFFICIAL_MTP_LAUNCHES_PER_STEP * LAUNCH_SECONDS


def summarize(traces: list[Trace], solution: str, labels: dict[str, str]) -> dict:
    """The CLI's verdict on `solution`: per workload (uuid -> label in `labels`, every workload
    of the run) its status, errors and times (None where the CLI wrote no trace), and the count
    of each status."""
    found = {t.workload.uuid: t.evaluation for t in traces if t.solution == solution and t.evaluation}
    rows = []
    for uuid, label in labels.items():
        ev = found.get(uuid)
        perf, corr = (ev.performance, ev.correctness) if ev else (None, None)
        rows.append({"workload": uuid, "label": label, "status": ev.status.value if ev else "NO_TRACE",
                     "max_abs_error": corr.max_absolute_error if corr else None,
                     "max_rel_error": corr.max_relative_error if corr else None,
                     "latency_us": perf.latency_ms * 1e3 if perf else None,
                     "reference_us": perf.reference_latency_ms * 1e3 if perf and perf.reference_latency_ms else None})
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return {"solution": solution, "counts": counts, "passed": counts.get("PASSED", 0), "total": len(rows),
            "workloads": rows}


def _fmt(value, spec: str) -> str:
    return "-" if value is None else f"{value:{spec}}"


def format_summary(summary: dict) -> str:
    """summarize's result as a table, then one line of counts."""
    header = f"{'workload':<22} {'status':<20} {'max abs':>9} {'max rel':>9} {'ours µs':>9} {'ref µs':>11}"
    lines = [header, "-" * len(header)]
    for r in summary["workloads"]:
        lines.append(f"{r['label']:<22} {r['status']:<20} {_fmt(r['max_abs_error'], '.2e'):>9} "
                     f"{_fmt(r['max_rel_error'], '.2e'):>9} {_fmt(r['latency_us'], '.2f'):>9} "
                     f"{_fmt(r['reference_us'], '.1f'):>11}")
    counts = ", ".join(f"{n} {status}" for status, n in sorted(summary["counts"].items()))
    lines.append(f"{summary['solution']}: {summary['passed']} of {summary['total']} workloads PASSED ({counts})")
    return "\n".join(lines)


def write_summary(out: Path, summary: dict, context: dict) -> list[Path]:
    """cli.json (the summary with `context`: the command, versions, times) and summary.txt
    (context lines, then the table) under `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    data, text = out / "cli.json", out / "summary.txt"
    data.write_text(json.dumps({**context, **summary}, indent=2), encoding="utf-8")
    lines = [f"{key}: {' '.join(value) if isinstance(value, list) else value}" for key, value in context.items()]
    text.write_text("\n".join(lines + [format_summary(summary)]) + "\n", encoding="utf-8")
    return [data, text]


def fib_commit() -> str | None:
    """flashinfer-bench's commit, from a file COMMIT beside its package folder (where a copy of
    main's package was made with `git rev-parse HEAD > COMMIT`), else None."""
    import flashinfer_bench

    path = Path(flashinfer_bench.__file__).resolve().parent.parent / "COMMIT"
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None

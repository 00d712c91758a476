"""Render a Results and its Summary (gdn_bench.results.summarize derives every number shown):
the console table, grouped as the definition says (by batch size for decode, by
total_seq_len rounded up to a power of two for prefill), with the submission's contest score
and FI ratio under it, results.json, and a PNG plot of kernel time against that group per
algorithm, with the memory floor where there is one."""

import json
import textwrap
from pathlib import Path

from gdn_bench.definitions import DefinitionSpec, resolve
from gdn_bench.plots import kernel_time_plot, margin_plot
from gdn_bench.results import Results, Summary

HARNESS_NOTE = (
    "harness  = flashinfer-bench's Benchmark latency; 0.1.2's synchronizes inside its timing loop, so it includes "
    "host launch cost (their issue #195).\n"
    "kernel   = CUPTI GPU time per call (the kit's torch.profiler timer), cold L2 (256 MB flush), first kernel start "
    "to last kernel end, median.\n"
    "ref      = the definition's own reference (its `reference` code), timed as the header says: the contest's "
    "speedup is its time / ours.\n"
    "speedup  = mean over the group's workloads of ref / kernel, the contest's per-workload speedup; share = the "
    "group's part of the\n"
    "           algorithm's contest score. vs pt-ref, vs FI = pt-reference's, fi-baseline's median kernel time / "
    "this one's."
)
# What a score matches when the evaluator's own timer timed every reference time.
SCORE_MATCHES = (
    "score:      as flashinfer-bench main's evaluator (the contest's) computes it: the reference timed by its own "
    "timer, ours by the kit's CUPTI span (kernel), which agreed with that timer on our submission (docs/perf.md). "
    "Not flashinfer-bench 0.1.2's CLI, which times with CUDA events around a synchronizing loop (their issue #195)."
)
FLOOR_NOTE = "floor    = the same measurement of new_state.copy_(state): the bytes any kernel must move."
INDENT = " " * 12  # continuation lines of the header
MESSAGE_CHARS = 160  # a failure's message under the table is cut to this
CPU_BANNER = (
    "NO CUDA GPU: correctness only. Triton's interpreter ran the kernels on the CPU, and the kit's\n"
    "own checker (gdn_bench/checking.py) compared every output with the definition's reference\n"
    "(flashinfer-bench's Benchmark needs a GPU). Nothing was timed: timing needs a GPU (CUPTI)."
)


def _fmt(value, spec=".2f", suffix=""):
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _spec(results: Results) -> DefinitionSpec:
    return resolve(results.meta.get("definition", "decode"))


def _workloads_lines(meta: dict, summary: Summary) -> list[str]:
    """How many workloads ran and how they were chosen; then which, by size and kind."""
    count = sum(w["count"] for w in summary.workloads)
    kinds = {w["kind"] for w in summary.workloads}
    items = [f"{w['label']}{'' if len(kinds) == 1 else ' ' + w['kind']} ×{w['count']}" for w in summary.workloads]
    shown = ", ".join(items) + (f" (all {kinds.pop()})" if len(kinds) == 1 else "")
    return [f"workloads:  {count} of the trace set's {meta.get('available')}, {meta.get('selection')}:",
            *textwrap.wrap(shown, width=100, initial_indent=INDENT, subsequent_indent=INDENT)]


def header(results: Results, summary: Summary) -> list[str]:
    """What ran, on what, how it was checked: the lines above the table."""
    meta, spec = results.meta, _spec(results)
    cpu = meta.get("mode") == "cpu-correctness"
    atol, rtol = meta["check"]["atol"], meta["check"]["rtol"]
    seed = meta.get("seed")
    lines = ["=" * 96, CPU_BANNER, "=" * 96] if cpu else [f"GPU: {meta.get('gpu')}"]
    if meta.get("partial"):
        lines.insert(0, f"PARTIAL RESULTS: {meta['partial']}; the others are missing below.")
    package = f"; harness: gdn_bench from {meta['package']}" if meta.get("package") else ""
    inputs = f"random tensors drawn from seed {seed} (replay: --seed {seed}), stored ones from the trace set"
    if not cpu:
        inputs += "; flashinfer-bench's Benchmark (status, max abs, harness µs) draws its own, unseeded"
    lines += [
        f"definition: {spec.name}   date: {meta.get('date')}",
        f"project:    {meta.get('root')} (config.toml, solution/, baselines/){package}",
        f"trace set:  {meta.get('dataset')}",
        *_workloads_lines(meta, summary),
        f"inputs:     {inputs}",
        f"check:      atol = {atol:g}, rtol = {rtol:g}: an element fails only when |err| > atol AND "
        "|err| > rtol·|ref|,",
        f"{INDENT}so a large relative error on a near-zero element passes.",
        "margin:     worst over elements and outputs of |err| / max(atol, rtol·|ref|), what decides: "
        "the check passes when it is <= 1.",
    ]
    if cpu:
        lines += [f"{INDENT}The interpreter truncates float32 to bfloat16 (a GPU rounds to nearest), so bf16 "
                  "outputs carry up to", f"{INDENT}2^-7 relative error on CPU: margins near 0.78 are that rounding."]
    else:
        lines += _reference_lines(meta, summary)
        lines.append(HARNESS_NOTE + ("\n" + FLOOR_NOTE if spec.floor_shape is not None else ""))
        lines += _loop_lines(meta)
    return lines


def _loop_lines(meta: dict) -> list[str]:
    """How the Python-loop algorithms were timed, when any ran (gdn_bench.run_estimate)."""
    loop, harness = meta.get("loop_harness"), meta.get("harness")
    if not loop:
        return []
    return [f"loops    = Python-loop algorithms (pt-reference) ran through the Benchmark with warm-up/iterations/"
            f"trials {loop['warmup']}/{loop['iterations']}/{loop['trials']}",
            f"{INDENT}(the others: {harness['warmup']}/{harness['iterations']}/{harness['trials']}); their kernel µs "
            "is one profiled call's (gdn_bench.timing.single_call_time_us)."]


def _reference_lines(meta: dict, summary: Summary) -> list[str]:
    """Where the definition reference's times came from (cached, measured now, failed, or not
    measured: --reference skip with none cached) and the cache they live in; which timer
    measured them; and so which evaluator the score matches."""
    counts, mode = summary.reference, meta.get("reference", {}).get("mode")
    missing = counts.get("workloads", 0) - sum(counts.get(s, 0) for s in ("cached", "measured", "failed"))
    parts = [f"{counts[s]} {s}" + (" now" if s == "measured" else "") for s in ("cached", "measured", "failed")
             if counts.get(s)]
    if missing:
        parts.append(f"{missing} not measured" + (" (--reference skip)" if mode == "skip" else ""))
    file = meta.get("reference", {}).get("file")
    texts = [f"reference:  the definition's own: of {counts.get('workloads', 0)} workloads, {', '.join(parts)}"
             + (f"; cache: {file}" if file else "")]
    timers = counts.get("timers") or {}
    texts += [f"{INDENT}timed by {timer}" + (f" ({n} of them)" if len(timers) > 1 else "")
              for timer, n in timers.items()]
    timed = sum(timers.values())
    if timed and counts.get("evaluators") == timed:
        texts.append(SCORE_MATCHES)
    elif timed:
        texts.append(f"score:      NOT the contest's: {timed - counts.get('evaluators', 0)} of the {timed} reference "
                     "times are not the evaluator's timer's (above)")
    return [line for text in texts
            for line in textwrap.wrap(text, width=100, subsequent_indent=INDENT, break_on_hyphens=False)]


def shortened(message: str, limit: int = MESSAGE_CHARS) -> str:
    """A message on one line: its only line, or for a longer text (a log, a traceback) its last
    non-empty line, which names the error; cut to `limit` characters."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    text = lines[-1] if lines else "(no message)"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _problem_lines(summary: Summary) -> list[str]:
    """Under the table: why each failed case failed (full messages in results.json)."""
    if not summary.problems:
        return []
    out = ["", "why (full messages in results.json):"]
    for p in summary.problems:
        where = p["workloads"][0] if len(p["workloads"]) == 1 else f"{len(p['workloads'])} workloads"
        out.append(f"  {p['algo']} {p['status']} on {where}: {shortened(p['message'])}")
    return out


def format_table(results: Results, summary: Summary) -> str:
    """The console report: header, table, skipped algorithms, summary line."""
    spec = _spec(results)
    cpu = results.meta.get("mode") == "cpu-correctness"
    floors = spec.floor_shape is not None
    statuses = [f"{line.passed}/{line.total} ok" if not line.failures else
                f"{line.passed}/{line.total}: {','.join(line.failures)}" for line in summary.lines]
    width = max([len("status"), *map(len, statuses)])
    columns = f"{spec.group_label:>5} {'algorithm':<14} {'status':<{width}} {'max abs':>9} {'margin':>8}"
    if not cpu:
        columns += f" {'harness µs':>11} {'kernel µs':>10}"
        columns += f" {'floor µs':>9} {'×floor':>7}" if floors else ""
        columns += f" {'ref µs':>10} {'speedup':>9} {'share':>6} {'vs pt-ref':>9} {'vs FI':>7}"
    out = [*header(results, summary), "", columns, "-" * len(columns)]
    last_group = None
    for line, status in zip(summary.lines, statuses):
        if last_group is not None and line.group != last_group:
            out.append("")
        last_group = line.group
        text = (f"{line.group:>5} {line.algo:<14} {status:<{width}} "
                f"{_fmt(line.max_abs_error, '.2e'):>9} {_fmt(line.worst_margin, '.3f'):>8}")
        if not cpu:
            text += f" {_fmt(line.harness_us, '.1f'):>11} {_fmt(line.kernel_us):>10}"
            if floors:
                text += f" {_fmt(results.floors_us.get(line.group)):>9} {_fmt(line.x_floor, '.2f', '×'):>7}"
            text += (f" {_fmt(line.reference_us, '.1f'):>10} {_fmt(line.speedup, '.1f', '×'):>9}"
                     f" {_fmt(line.score_share, '.1%'):>6}"
                     f" {_fmt(line.vs_reference, '.1f', '×'):>9} {_fmt(line.vs_fi_baseline, '.2f', '×'):>7}")
        out.append(text)
    out += _problem_lines(summary)
    for algo, reason in results.skipped.items():
        out.append(f"skipped {algo}: {reason}")
    line = f"passed {summary.passed}/{summary.total} (algorithm, workload) cases"
    if results.meta.get("partial"):
        line += " (PARTIAL: interrupted)"
    out.append(line)
    if not cpu:
        out += score_lines(results.meta.get("submission"), summary)
    return "\n".join(out)


def score_lines(algo: str, summary: Summary) -> list[str]:
    """The two scores of `algo` (the submission), in words, if it ran: the contest score (or
    why there is none) and the FI ratio (if fi-baseline ran)."""
    ours = summary.algos.get(algo)
    if ours is None:
        return []
    score = ours["contest_score"]
    if score is not None:
        over = f"{ours['scored']}" + ("" if ours["scored"] == ours["total"] else f" of its {ours['total']}")
        lines = [f"contest score of {algo}: {score:.2f} (mean over {over} workloads of the definition reference's "
                 "time / ours)"]
    elif summary.reference.get("cached") or summary.reference.get("measured"):
        lines = [f"contest score of {algo}: none (no workload where it passed and both were timed)"]
    elif summary.reference.get("failed"):
        lines = [f"contest score of {algo}: not measured (the reference's timing failed: results.json says why)"]
    else:
        lines = [f"contest score of {algo}: not measured (no reference times: --reference skip, and none cached)"]
    if ours["fi_ratio"] is not None:
        lines.append(f"FI ratio of {algo}: {ours['fi_ratio']:.3f} (mean over {ours['fi_compared']} workloads of "
                     "fi-baseline's kernel time / ours; a peer ratio, not the contest's score)")
    return lines


def write_json(results: Results, summary: Summary, path: Path) -> None:
    data = {**results.to_json(), "summary": summary.to_json()}
    path.write_text(json.dumps(data, indent=2, allow_nan=False), encoding="utf-8")


def plot_kernel_times(results: Results, summary: Summary, path: Path) -> bool:
    """Kernel time (median per report group) per algorithm, with the copy floor; False (and no
    file) when nothing was timed."""
    spec = _spec(results)
    series = {algo: [(line.group, line.kernel_us) for line in summary.lines if line.algo == algo and line.kernel_us]
              for algo in dict.fromkeys(line.algo for line in summary.lines)}
    if not any(series.values()):
        return False
    kernel_time_plot(series, path, spec.group_title, f"{spec.name} on {results.meta.get('gpu')}",
                     floor=list(results.floors_us.items()))
    return True


def plot_margins(results: Results, path: Path) -> bool:
    """The worst margin of every checked (algorithm, workload), workloads labelled by size (and
    kind, where they differ; several alike get #2, #3...); False (and no file) when nothing
    was checked."""
    spec = _spec(results)
    labels, taken = {}, {}
    mixed = len({r.kind for r in results.rows}) > 1
    for r in sorted(results.rows, key=lambda r: r.order()):
        if r.workload not in labels:
            base = spec.workload_label(r.axes) + (f" {r.kind}" if mixed else "")
            taken[base] = taken.get(base, 0) + 1
            labels[r.workload] = base if taken[base] == 1 else f"{base} #{taken[base]}"
    series = {}
    for r in sorted(results.rows, key=lambda r: r.order()):
        if r.worst_margin is not None:
            series.setdefault(r.algo, []).append((labels[r.workload], r.worst_margin))
    if not series:
        return False
    where = results.meta.get("gpu") or "CPU (Triton interpreter)"
    margin_plot(series, path, f"worst margin per workload: {spec.short} on {where}, seed {results.meta.get('seed')}")
    return True


def write_report(results: Results, summary: Summary, out_dir: Path) -> dict[str, Path]:
    """results.json and report.txt under out_dir, with margins.png when anything was checked
    and kernel_time.png when anything was timed; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "results.json", "table": out_dir / "report.txt"}
    write_json(results, summary, paths["json"])
    if plot_margins(results, out_dir / "margins.png"):
        paths["margins"] = out_dir / "margins.png"
    if plot_kernel_times(results, summary, out_dir / "kernel_time.png"):
        paths["plot"] = out_dir / "kernel_time.png"
    paths["table"].write_text(format_table(results, summary) + "\n", encoding="utf-8")
    return paths

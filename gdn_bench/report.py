"""Render a Results and its Summary (gdn_bench.results.summarize derives every number shown):
the console table, grouped as the definition says (by batch size for decode, by
total_seq_len rounded up to a power of two for prefill), results.json, and a PNG plot of
kernel time against that group per algorithm, with the memory floor where there is one."""

import json
from pathlib import Path

from gdn_bench.definitions import DefinitionSpec, resolve
from gdn_bench.plots import kernel_time_plot
from gdn_bench.results import Results, Summary

HARNESS_NOTE = (
    "harness = flashinfer-bench 0.1.2's latency: it synchronizes inside its timing loop, so it "
    "includes host launch cost (flashinfer-bench issue #195).\n"
    "kernel  = CUPTI GPU time per call, cold L2 (256 MB flush), first kernel start to last kernel "
    "end, median: the official evaluator's method."
)
FLOOR_NOTE = "floor   = the same measurement of new_state.copy_(state): the bytes any kernel must move."
MARGIN_NOTE = ("margin  = worst over elements and outputs of |err| / max(atol, rtol·|ref|), atol = rtol = 1e-2: "
               "an element fails only above 1.")


def _fmt(value, spec=".2f", suffix=""):
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _spec(results: Results) -> DefinitionSpec:
    return resolve(results.meta.get("definition", "decode"))


def _root_line(meta: dict) -> str:
    line = f"project: {meta.get('root')} (config.toml, solution/, baselines/)"
    return line + (f"; harness: gdn_bench from {meta['package']}" if meta.get("package") else "")


def format_table(results: Results, summary: Summary) -> str:
    """The console report: banner, table, skipped algorithms, summary line."""
    spec = _spec(results)
    out = []
    cpu = results.meta.get("mode") == "cpu-correctness"
    floors = spec.floor_us is not None
    if cpu:
        out.append("=" * 78)
        out.append(f"NO CUDA GPU: correctness only (Triton interpreter on CPU), on a small subset ({spec.short}).")
        out.append("Timing was skipped: the tiers below need a GPU (CUPTI).")
        out.append("=" * 78)
    else:
        out.append(f"GPU: {results.meta.get('gpu')}   date: {results.meta.get('date')}   definition: {spec.name}")
        out.append(HARNESS_NOTE + ("\n" + FLOOR_NOTE if floors else ""))
    out.append(_root_line(results.meta))
    out.append(MARGIN_NOTE)
    header = f"{spec.group_label:>5} {'algorithm':<14} {'status':<12} {'max abs':>9} {'max rel':>9} {'margin':>8}"
    if not cpu:
        header += f" {'harness µs':>11} {'kernel µs':>10}"
        header += f" {'floor µs':>9} {'×floor':>7}" if floors else ""
        header += f" {'vs ref':>8} {'vs FI':>7}"
    out.append(header)
    out.append("-" * len(header))
    last_group = None
    for line in summary.lines:
        if last_group is not None and line.group != last_group:
            out.append("")
        last_group = line.group
        status = f"{line.passed}/{line.total} ok" if not line.failures else ",".join(line.failures)
        text = (f"{line.group:>5} {line.algo:<14} {status:<12} "
                f"{_fmt(line.max_abs_error, '.2e'):>9} {_fmt(line.max_rel_error, '.2e'):>9}"
                f" {_fmt(line.worst_margin, '.3f'):>8}")
        if not cpu:
            text += f" {_fmt(line.harness_us, '.1f'):>11} {_fmt(line.kernel_us):>10}"
            if floors:
                text += f" {_fmt(results.floors_us.get(line.group)):>9} {_fmt(line.x_floor, '.2f', '×'):>7}"
            text += f" {_fmt(line.vs_reference, '.1f', '×'):>8} {_fmt(line.vs_fi_baseline, '.2f', '×'):>7}"
        out.append(text)
    for algo, reason in results.skipped.items():
        out.append(f"skipped {algo}: {reason}")
    line = f"passed {summary.passed}/{summary.total} (algorithm, workload) cases"
    if summary.score is not None:
        line += (f"; contest-style score of {results.meta.get('submission')} "
                 f"(mean fi-baseline/ours kernel time): {summary.score:.3f}")
    out.append(line)
    return "\n".join(out)


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


def write_report(results: Results, summary: Summary, out_dir: Path) -> dict[str, Path]:
    """results.json, report.txt and, when something was timed, kernel_time.png under out_dir;
    returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "results.json", "table": out_dir / "report.txt"}
    write_json(results, summary, paths["json"])
    if plot_kernel_times(results, summary, out_dir / "kernel_time.png"):
        paths["plot"] = out_dir / "kernel_time.png"
    paths["table"].write_text(format_table(results, summary) + "\n", encoding="utf-8")
    return paths

"""Render a Results: the console table (grouped as the definition says: by batch size for
decode, by total_seq_len rounded up to a power of two for prefill), results.json and a PNG
plot of kernel time against that group per algorithm, with the memory floor where there is one."""

import json
import statistics
from pathlib import Path

from gdn_bench.definitions import DefinitionSpec, resolve
from gdn_bench.results import Results, Row, contest_score, summary
from gdn_bench.roles import BASELINE, REFERENCE

HARNESS_NOTE = (
    "harness = flashinfer-bench 0.1.2's latency: it synchronizes inside its timing loop, so it "
    "includes host launch cost (flashinfer-bench issue #195).\n"
    "kernel  = CUPTI GPU time per call, cold L2 (256 MB flush), first kernel start to last kernel "
    "end, median: the official evaluator's method."
)
FLOOR_NOTE = "floor   = the same measurement of new_state.copy_(state): the bytes any kernel must move."
MARGIN_NOTE = ("margin  = worst over elements and outputs of |err| / max(atol, rtol·|ref|), atol = rtol = 1e-2: "
               "an element fails only above 1.")


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _fmt(value, spec=".2f", suffix=""):
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _spec(results: Results) -> DefinitionSpec:
    return resolve(results.meta.get("definition", "decode"))


def aggregate(results: Results) -> list[dict]:
    """One line per (report group, algorithm): pass count, worst errors and margin, median times."""
    group_of = _spec(results).group_of
    by_group: dict[tuple[int, str], list[Row]] = {}
    for r in sorted(results.rows, key=lambda r: group_of(r.axes)):
        by_group.setdefault((group_of(r.axes), r.algo), []).append(r)
    medians = {key: _median(r.kernel_us for r in rows if r.status == "PASSED") for key, rows in by_group.items()}
    lines = []
    for (group, algo), rows in by_group.items():
        kernel = medians[(group, algo)]
        floor = results.floors_us.get(group)

        def ratio(other):
            base = medians.get((group, other))
            return base / kernel if base and kernel else None

        lines.append({
            "group": group, "algo": algo, "passed": sum(r.status == "PASSED" for r in rows), "total": len(rows),
            "failures": sorted({r.status for r in rows if r.status != "PASSED"}),
            "max_abs_error": max((r.max_abs_error for r in rows if r.max_abs_error is not None), default=None),
            "max_rel_error": max((r.max_rel_error for r in rows if r.max_rel_error is not None), default=None),
            "worst_margin": max((r.worst_margin for r in rows if r.worst_margin is not None), default=None),
            "harness_us": _median(r.harness_us for r in rows if r.status == "PASSED"),
            "kernel_us": kernel,
            "x_floor": kernel / floor if kernel and floor else None,
            "vs_reference": ratio(REFERENCE) if algo != REFERENCE else None,
            "vs_fi_baseline": ratio(BASELINE) if algo != BASELINE else None,
        })
    return lines


def _root_line(meta: dict) -> str:
    line = f"project: {meta.get('root')} (config.toml, solution/, baselines/)"
    return line + (f"; harness: gdn_bench from {meta['package']}" if meta.get("package") else "")


def format_table(results: Results) -> str:
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
    for line in aggregate(results):
        if last_group is not None and line["group"] != last_group:
            out.append("")
        last_group = line["group"]
        status = f"{line['passed']}/{line['total']} ok" if not line["failures"] else ",".join(line["failures"])
        text = (f"{line['group']:>5} {line['algo']:<14} {status:<12} "
                f"{_fmt(line['max_abs_error'], '.2e'):>9} {_fmt(line['max_rel_error'], '.2e'):>9}"
                f" {_fmt(line['worst_margin'], '.3f'):>8}")
        if not cpu:
            text += f" {_fmt(line['harness_us'], '.1f'):>11} {_fmt(line['kernel_us']):>10}"
            if floors:
                text += (f" {_fmt(results.floors_us.get(line['group'])):>9}"
                         f" {_fmt(line['x_floor'], '.2f', '×'):>7}")
            text += f" {_fmt(line['vs_reference'], '.1f', '×'):>8} {_fmt(line['vs_fi_baseline'], '.2f', '×'):>7}"
        out.append(text)
    for algo, reason in results.skipped.items():
        out.append(f"skipped {algo}: {reason}")
    s = summary(results)
    line = f"passed {s['passed']}/{s['total']} (algorithm, workload) cases"
    score = contest_score(results)
    if score is not None:
        line += (f"; contest-style score of {results.meta.get('submission')} "
                 f"(mean fi-baseline/ours kernel time): {score:.3f}")
    out.append(line)
    return "\n".join(out)


def write_json(results: Results, path: Path) -> None:
    path.write_text(json.dumps(results.to_json(), indent=2, allow_nan=False), encoding="utf-8")


def plot(results: Results, path: Path) -> None:
    """Kernel time (median per report group) per algorithm, log-log, with the copy floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec = _spec(results)
    fig, ax = plt.subplots(figsize=(8, 5))
    lines = aggregate(results)
    for algo in dict.fromkeys(line["algo"] for line in lines):
        points = [(line["group"], line["kernel_us"]) for line in lines if line["algo"] == algo and line["kernel_us"]]
        if points:
            ax.plot(*zip(*points), marker="o", label=algo)
    if results.floors_us:
        ax.plot(*zip(*sorted(results.floors_us.items())), "k--", label="copy floor")
    if not ax.lines:
        ax.text(0.5, 0.5, "no timing (correctness-only run)", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.legend()
    ax.set_xlabel(spec.group_title)
    ax.set_ylabel("kernel time, µs (CUPTI, cold L2, median)")
    ax.set_title(f"{spec.name} on {results.meta.get('gpu') or 'CPU'}")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(results: Results, out_dir: Path) -> dict[str, Path]:
    """results.json, kernel_time.png and report.txt under out_dir; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "results.json", "plot": out_dir / "kernel_time.png", "table": out_dir / "report.txt"}
    write_json(results, paths["json"])
    plot(results, paths["plot"])
    paths["table"].write_text(format_table(results) + "\n", encoding="utf-8")
    return paths

"""Render a Results: the console table (grouped by batch size), results.json and a PNG plot
of kernel time against batch size per algorithm, with the copy floor."""

import json
import statistics
from pathlib import Path

from gdn_bench.results import BASELINE, REFERENCE, Results, contest_score, summary

HARNESS_NOTE = (
    "harness = flashinfer-bench 0.1.2's latency: it synchronizes inside its timing loop, so it "
    "includes host launch cost (flashinfer-bench issue #195).\n"
    "kernel  = CUPTI GPU time per call, cold L2 (256 MB flush), first kernel start to last kernel "
    "end, median: the official evaluator's method.\n"
    "floor   = the same measurement of new_state.copy_(state): the bytes any kernel must move."
)


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _fmt(value, spec=".2f", suffix=""):
    return "-" if value is None else f"{value:{spec}}{suffix}"


def aggregate(results: Results) -> list[dict]:
    """One line per (batch size, algorithm): pass count, worst errors, median times."""
    lines = []
    batches = sorted({r.batch_size for r in results.rows})
    algos = list(dict.fromkeys(r.algo for r in results.rows))
    medians = {
        (b, a): _median(r.kernel_us for r in results.rows if r.batch_size == b and r.algo == a and r.status == "PASSED")
        for b in batches for a in algos
    }
    for b in batches:
        floor = results.floors_us.get(b)
        for a in algos:
            rows = [r for r in results.rows if r.batch_size == b and r.algo == a]
            if not rows:
                continue
            kernel = medians[(b, a)]
            statuses = sorted({r.status for r in rows if r.status != "PASSED"})
            passed = sum(r.status == "PASSED" for r in rows)

            def ratio(other):
                base = medians.get((b, other))
                return base / kernel if base and kernel else None

            lines.append({
                "batch_size": b, "algo": a, "passed": passed, "total": len(rows),
                "failures": statuses,
                "max_abs_error": max((r.max_abs_error for r in rows if r.max_abs_error is not None), default=None),
                "max_rel_error": max((r.max_rel_error for r in rows if r.max_rel_error is not None), default=None),
                "harness_us": _median(r.harness_us for r in rows if r.status == "PASSED"),
                "kernel_us": kernel,
                "x_floor": kernel / floor if kernel and floor else None,
                "vs_reference": ratio(REFERENCE) if a != REFERENCE else None,
                "vs_fi_baseline": ratio(BASELINE) if a != BASELINE else None,
            })
    return lines


def format_table(results: Results) -> str:
    """The console report: banner, table, skipped algorithms, summary line."""
    out = []
    cpu = results.meta.get("mode") == "cpu-correctness"
    if cpu:
        out.append("=" * 78)
        out.append("NO CUDA GPU: correctness only (Triton interpreter on CPU), on a small subset.")
        out.append("Timing was skipped: the tiers below need a GPU (CUPTI).")
        out.append("=" * 78)
    else:
        out.append(f"GPU: {results.meta.get('gpu')}   date: {results.meta.get('date')}")
        out.append(HARNESS_NOTE)
    header = f"{'B':>4} {'algorithm':<14} {'status':<12} {'max abs':>9} {'max rel':>9}"
    if not cpu:
        header += f" {'harness µs':>11} {'kernel µs':>10} {'floor µs':>9} {'×floor':>7} {'vs ref':>8} {'vs FI':>7}"
    out.append(header)
    out.append("-" * len(header))
    last_batch = None
    for line in aggregate(results):
        if last_batch is not None and line["batch_size"] != last_batch:
            out.append("")
        last_batch = line["batch_size"]
        status = f"{line['passed']}/{line['total']} ok" if not line["failures"] else ",".join(line["failures"])
        text = (f"{line['batch_size']:>4} {line['algo']:<14} {status:<12} "
                f"{_fmt(line['max_abs_error'], '.2e'):>9} {_fmt(line['max_rel_error'], '.2e'):>9}")
        if not cpu:
            text += (f" {_fmt(line['harness_us'], '.1f'):>11} {_fmt(line['kernel_us']):>10}"
                     f" {_fmt(results.floors_us.get(line['batch_size'])):>9} {_fmt(line['x_floor'], '.2f', '×'):>7}"
                     f" {_fmt(line['vs_reference'], '.1f', '×'):>8} {_fmt(line['vs_fi_baseline'], '.2f', '×'):>7}")
        out.append(text)
    for algo, reason in results.skipped.items():
        out.append(f"skipped {algo}: {reason}")
    s = summary(results)
    line = f"passed {s['passed']}/{s['total']} (algorithm, workload) cases"
    score = contest_score(results)
    if score is not None:
        line += f"; contest-style score of fla-recurrent (mean fi-baseline/ours kernel time): {score:.3f}"
    out.append(line)
    return "\n".join(out)


def write_json(results: Results, path: Path) -> None:
    path.write_text(json.dumps(results.to_json(), indent=2, allow_nan=False), encoding="utf-8")


def plot(results: Results, path: Path) -> None:
    """Kernel time (median per batch size) per algorithm, log-log, with the copy floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    lines = aggregate(results)
    for algo in dict.fromkeys(line["algo"] for line in lines):
        points = [(line["batch_size"], line["kernel_us"]) for line in lines if line["algo"] == algo and line["kernel_us"]]
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
    ax.set_xlabel("batch size")
    ax.set_ylabel("kernel time, µs (CUPTI, cold L2, median)")
    ax.set_title(f"{results.meta.get('definition', '')} on {results.meta.get('gpu') or 'CPU'}")
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

"""PNG plots from plain series, for run_local's report and bench_kernel alike (matplotlib,
headless): kernel time against size, and the worst margin per workload."""

import math
from pathlib import Path

Points = list[tuple[float, float]]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def kernel_time_plot(series: dict[str, Points], path: Path, xlabel: str, title: str,
                     floor: Points | None = None) -> None:
    """Kernel time (µs) against a size, one line per name in `series`, log-log (base 2 on
    x), with the memory floor as a dashed line where given."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, points in series.items():
        if points:
            ax.plot(*zip(*sorted(points)), marker="o", label=name)
    if floor:
        ax.plot(*zip(*sorted(floor)), "k--", label="copy floor")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.legend()
    ax.set_xlabel(xlabel)
    ax.set_ylabel("kernel time, µs (CUPTI, cold L2, median)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def margin_plot(series: dict[str, list[tuple[str, float]]], path: Path, title: str) -> None:
    """Worst margin per workload, one marker series per name: workloads along x (in the
    order first seen, by label), the margin on y, and the pass line at 1 (an element fails
    only above it). Infinite margins (unwritten or non-finite elements) sit on the top edge
    as crosses."""
    plt = _pyplot()
    labels = list(dict.fromkeys(label for points in series.values() for label, _ in points))
    finite = [m for points in series.values() for _, m in points if math.isfinite(m)]
    top = max([1.25, *(1.1 * m for m in finite)])
    fig, ax = plt.subplots(figsize=(max(7.5, 0.5 * len(labels) + 3), 4.5))
    for offset, (name, points) in enumerate(series.items()):
        xs = [labels.index(label) + 0.1 * (offset - (len(series) - 1) / 2) for label, _ in points]
        ys = [m if math.isfinite(m) else top for _, m in points]
        ax.scatter(xs, ys, label=name, marker="o", zorder=3)
        broken = [(x, y) for x, y, (_, m) in zip(xs, ys, points) if not math.isfinite(m)]
        if broken:
            ax.scatter(*zip(*broken), marker="x", color="red", s=80, zorder=4)
    ax.axhline(1.0, color="red", linestyle="--", label="fails above 1")
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_ylim(0, top)
    ax.set_ylabel("worst margin |err| / max(atol, rtol·|ref|)")
    ax.set_title(title, fontsize=10)
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

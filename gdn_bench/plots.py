"""PNG plots from plain series, for run_local's report and bench_kernel alike (matplotlib,
headless)."""

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

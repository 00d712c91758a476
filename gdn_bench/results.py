"""The result of a run, as plain JSON-able data, and what is derived from it.

    {"meta": {...}, "skipped": {algo: reason}, "floors_us": {group: µs}, "rows": [Row, ...]}

meta names the definition and its submission algorithm ("submission"), and for a run that
Ctrl-C stopped, where it stopped ("partial"). A Row is one (algorithm, workload): the
workload's axes, status and max errors (flashinfer-bench's names and statistics, plus
PACK_ERROR where the algorithm could not even be packed), the worst margin per output (gdn_bench.checking.worst_margin), and the
timing tiers in µs (None where not measured). Partial results (one per Modal container, say)
merge into one. Everything derived from the rows (pass counts, the contest-style score, the
per-group medians and ratios the report shows) is computed here, once, by `summarize`;
gdn_bench.report only renders it.
"""

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from gdn_bench.roles import BASELINE, REFERENCE

if TYPE_CHECKING:  # only for the annotation: this module imports nothing heavy
    from gdn_bench.definitions import DefinitionSpec


@dataclass
class Row:
    algo: str
    workload: str
    axes: dict[str, int]
    status: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    margins: dict[str, float | None] = field(default_factory=dict)  # None: not finite (JSON has no inf)
    harness_us: float | None = None
    kernel_us: float | None = None
    message: str = ""
    kind: str = ""  # how the workload's inputs were made (DefinitionSpec.workload_kind), e.g. "random"

    @property
    def worst_margin(self) -> float | None:
        """The largest margin over outputs (inf where one is not finite); None if unchecked."""
        return max(math.inf if m is None else m for m in self.margins.values()) if self.margins else None

    def order(self) -> tuple:
        """Rows sort by the workload's axes (in the trace set's order), then workload and algorithm."""
        return (*self.axes.values(), self.workload, self.algo)


@dataclass
class Results:
    meta: dict = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    floors_us: dict[int, float] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "meta": self.meta,
            "skipped": self.skipped,
            "floors_us": {str(b): us for b, us in sorted(self.floors_us.items())},
            "rows": [asdict(r) for r in self.rows],
        }

    @classmethod
    def from_json(cls, data: dict) -> "Results":
        return cls(
            meta=data["meta"],
            skipped=data["skipped"],
            floors_us={int(b): us for b, us in data["floors_us"].items()},
            rows=[Row(**r) for r in data["rows"]],
        )


def merge(parts: list[Results]) -> Results:
    """One Results from several runs over disjoint (algorithm, workload) sets.

    meta comes from the first part; an algorithm skipped in one part but run in another is
    not reported as skipped; a repeated (algorithm, workload) pair is an error.
    """
    merged = Results(meta=dict(parts[0].meta) if parts else {})
    seen = set()
    for part in parts:
        for row in part.rows:
            key = (row.algo, row.workload)
            if key in seen:
                raise ValueError(f"{row.algo} on workload {row.workload} appears in two partial results")
            seen.add(key)
            merged.rows.append(row)
        merged.floors_us.update(part.floors_us)
        merged.skipped.update(part.skipped)
    ran = {r.algo for r in merged.rows}
    merged.skipped = {a: why for a, why in merged.skipped.items() if a not in ran}
    merged.rows.sort(key=Row.order)
    return merged


def _kernel_times(results: Results, algo: str) -> dict[str, float]:
    return {r.workload: r.kernel_us for r in results.rows if r.algo == algo and r.status == "PASSED" and r.kernel_us}


def contest_score(results: Results, algo: str | None = None) -> float | None:
    """Mean over workloads of fi-baseline kernel time / `algo`'s kernel time (the contest's
    score), over the workloads where both passed; None if fi-baseline did not run. `algo`
    defaults to the run's submission (meta["submission"])."""
    algo = algo or results.meta.get("submission")
    ours, base = _kernel_times(results, algo), _kernel_times(results, BASELINE)
    common = sorted(set(ours) & set(base))
    return statistics.fmean(base[w] / ours[w] for w in common) if common else None


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _worst(values) -> float | None:
    return max((v for v in values if v is not None), default=None)


@dataclass
class GroupLine:
    """One (report group, algorithm): pass count, worst errors and margin, median times of the
    passed workloads, and the ratios: x_floor = kernel / floor; vs_reference and
    vs_fi_baseline = that algorithm's median kernel time / this one's (None where either is
    missing, and for the algorithm itself)."""

    group: int
    algo: str
    passed: int
    total: int
    failures: list[str]
    max_abs_error: float | None
    max_rel_error: float | None
    worst_margin: float | None
    harness_us: float | None
    kernel_us: float | None
    x_floor: float | None
    vs_reference: float | None
    vs_fi_baseline: float | None


@dataclass
class Summary:
    """What a run's rows add up to, derived once (summarize) for every report."""

    passed: int
    total: int
    algos: dict[str, dict]  # per algorithm: passed, total, score_vs_fi_baseline
    score: float | None  # the submission's contest-style score, if fi-baseline ran
    lines: list[GroupLine]
    workloads: list[dict]  # the workloads checked: label, kind and how many, in report order
    # Every failed (algorithm, workload), and every passed one with a message (a timing that
    # failed), one entry per (algorithm, status, message): the workloads' labels with it.
    problems: list[dict]

    def to_json(self) -> dict:
        """As JSON-able data: a non-finite number (an infinite margin) is None."""
        lines = [{k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in asdict(line).items()}
                 for line in self.lines]
        return {"passed": self.passed, "total": self.total, "algos": self.algos, "score": self.score, "groups": lines,
                "workloads": self.workloads, "problems": self.problems}


def summarize(results: Results, spec: "DefinitionSpec") -> Summary:
    """Pass counts, the contest-style score of every algorithm, one GroupLine per (report
    group, algorithm), and the workloads by label and kind; groups and labels as the
    definition's spec gives them from a workload's axes (group_of, workload_label)."""
    group_of, label_of = spec.group_of, spec.workload_label
    by_group: dict[tuple[int, str], list[Row]] = {}
    for r in sorted(results.rows, key=lambda r: group_of(r.axes)):
        by_group.setdefault((group_of(r.axes), r.algo), []).append(r)
    medians = {key: _median(r.kernel_us for r in rows if r.status == "PASSED") for key, rows in by_group.items()}

    def ratio(group, other, kernel):
        base = medians.get((group, other))
        return base / kernel if base and kernel else None

    lines = []
    for (group, algo), rows in by_group.items():
        kernel, floor = medians[(group, algo)], results.floors_us.get(group)
        lines.append(GroupLine(
            group=group, algo=algo, passed=sum(r.status == "PASSED" for r in rows), total=len(rows),
            failures=sorted({r.status for r in rows if r.status != "PASSED"}),
            max_abs_error=_worst(r.max_abs_error for r in rows), max_rel_error=_worst(r.max_rel_error for r in rows),
            worst_margin=_worst(r.worst_margin for r in rows),
            harness_us=_median(r.harness_us for r in rows if r.status == "PASSED"), kernel_us=kernel,
            x_floor=kernel / floor if kernel and floor else None,
            vs_reference=ratio(group, REFERENCE, kernel) if algo != REFERENCE else None,
            vs_fi_baseline=ratio(group, BASELINE, kernel) if algo != BASELINE else None,
        ))
    algos = {}
    for algo in dict.fromkeys(r.algo for r in results.rows):
        rows = [r for r in results.rows if r.algo == algo]
        algos[algo] = {"passed": sum(r.status == "PASSED" for r in rows), "total": len(rows),
                       "score_vs_fi_baseline": contest_score(results, algo)}
    counts: dict[tuple[str, str], int] = {}
    for r in sorted({r.workload: r for r in results.rows}.values(), key=Row.order):
        counts[(label_of(r.axes), r.kind)] = counts.get((label_of(r.axes), r.kind), 0) + 1
    problems: dict[tuple[str, str, str], list[str]] = {}
    for r in results.rows:
        if r.status != "PASSED" or r.message:
            problems.setdefault((r.algo, r.status, r.message), []).append(label_of(r.axes))
    return Summary(passed=sum(r.status == "PASSED" for r in results.rows), total=len(results.rows), algos=algos,
                   score=contest_score(results), lines=lines,
                   workloads=[{"label": label, "kind": kind, "count": n} for (label, kind), n in counts.items()],
                   problems=[{"algo": algo, "status": status, "message": message, "workloads": labels}
                             for (algo, status, message), labels in problems.items()])

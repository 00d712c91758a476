"""The result of a run, as plain JSON-able data, and what is derived from it.

    {"meta": {...}, "skipped": {algo: reason}, "floors_us": {group: µs}, "rows": [Row, ...],
     "reference": {workload uuid: {"us": µs, "source": "cached" or "measured", ...}}}

meta names the definition and its submission algorithm ("submission"), and for a run that
Ctrl-C stopped, where it stopped ("partial"). A Row is one (algorithm, workload): the
workload's axes, status and max errors (flashinfer-bench's names and statistics, plus
PACK_ERROR where the algorithm could not even be packed, WORKLOAD_ERROR where the workload
itself could not run), the worst margin per output
(gdn_bench.checking.worst_margin), and the timing tiers in µs (None where not measured).
`reference` holds the time of the definition's own reference per workload, timed by the
contest evaluator's own timer (an entry of gdn_bench.reference_times, with where it came from
and which timer measured it: gdn_bench.evaluator_timing).
Partial results (one per Modal container, say) merge into one. Everything derived from them
(pass counts, the two scores, the per-group medians, ratios and score shares the report
shows) is computed here, once, by `summarize`; gdn_bench.report only renders it.

The two scores of an algorithm, each a mean over workloads of a per-workload speedup:
- contest score: the definition reference's time / the algorithm's kernel time, the
  contest's score of a definition (its track's score is the mean of its two definitions');
- FI ratio: fi-baseline's kernel time / the algorithm's, a peer ratio, not the contest's.
"""

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from gdn_bench.roles import BASELINE, REFERENCE

# How a reference time from before issue 27 was measured: its entry does not say.
OLD_TIMER = "the kit's torch.profiler timer, before issue 27 (not the evaluator's)"

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
    reference: dict[str, dict] = field(default_factory=dict)

    @property
    def reference_us(self) -> dict[str, float]:
        """The definition reference's time per workload uuid, where known."""
        return {w: entry["us"] for w, entry in self.reference.items()}

    def to_json(self) -> dict:
        return {
            "meta": self.meta,
            "skipped": self.skipped,
            "floors_us": {str(b): us for b, us in sorted(self.floors_us.items())},
            "rows": [asdict(r) for r in self.rows],
            "reference": self.reference,
        }

    @classmethod
    def from_json(cls, data: dict) -> "Results":
        return cls(
            meta=data["meta"],
            skipped=data["skipped"],
            floors_us={int(b): us for b, us in data["floors_us"].items()},
            rows=[Row(**r) for r in data["rows"]],
            reference=data.get("reference", {}),  # absent from results written before it existed
        )


def merge(parts: list[Results]) -> Results:
    """One Results from several runs over disjoint (algorithm, workload) sets.

    meta comes from the first part; an algorithm skipped in one part but run in another is
    not reported as skipped; a repeated (algorithm, workload) pair is an error. Reference
    times are per workload: parts that hold the same workload's agree (one cache), and any
    one is kept.
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
        merged.reference.update(part.reference)
    ran = {r.algo for r in merged.rows}
    merged.skipped = {a: why for a, why in merged.skipped.items() if a not in ran}
    merged.rows.sort(key=Row.order)
    return merged


def _kernel_times(results: Results, algo: str) -> dict[str, float]:
    return {r.workload: r.kernel_us for r in results.rows if r.algo == algo and r.status == "PASSED" and r.kernel_us}


def speedups(results: Results, algo: str, baseline_us: dict[str, float]) -> dict[str, float]:
    """Per workload: baseline_us[workload] / `algo`'s kernel time, over the workloads where
    `algo` passed and was timed and the baseline has a time."""
    ours = _kernel_times(results, algo)
    return {w: baseline_us[w] / us for w, us in ours.items() if baseline_us.get(w)}


def _mean(values) -> float | None:
    values = list(values)
    return statistics.fmean(values) if values else None


def contest_score(results: Results, algo: str | None = None) -> float | None:
    """The contest's score: the mean over workloads of the definition reference's time /
    `algo`'s kernel time, over the workloads where `algo` passed and both were timed; None
    where there are none. `algo` defaults to the run's submission (meta["submission"])."""
    return _mean(speedups(results, algo or results.meta.get("submission"), results.reference_us).values())


def fi_ratio(results: Results, algo: str | None = None) -> float | None:
    """The FI ratio, a peer ratio and not the contest's score: the mean over workloads of
    fi-baseline's kernel time / `algo`'s, over the workloads where both passed; None if
    fi-baseline did not run. `algo` defaults to the run's submission (meta["submission"])."""
    return _mean(speedups(results, algo or results.meta.get("submission"), _kernel_times(results, BASELINE)).values())


def track_score(scores: dict[str, float | None]) -> float | None:
    """The track's score: the mean of its definitions' contest scores ({definition: score}),
    None unless every one is known."""
    values = list(scores.values())
    return statistics.fmean(values) if values and None not in values else None


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
    missing, and for the algorithm itself). reference_us is the median time of the
    definition's reference over the group's workloads; speedup the mean over the group's
    workloads of reference time / this algorithm's (the contest's per-workload speedup), and
    score_share the group's part of this algorithm's contest score (its speedups' sum over
    the sum of all of them: the shares of an algorithm add up to 1)."""

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
    reference_us: float | None = None
    speedup: float | None = None
    score_share: float | None = None


@dataclass
class Summary:
    """What a run's rows add up to, derived once (summarize) for every report."""

    passed: int
    total: int
    # per algorithm: passed, total, contest_score and fi_ratio, and the workloads each averages
    # over (scored, fi_compared)
    algos: dict[str, dict]
    contest_score: float | None  # the submission's, if the reference was timed
    fi_ratio: float | None  # the submission's, if fi-baseline ran
    lines: list[GroupLine]
    workloads: list[dict]  # the workloads checked: label, kind and how many, in report order
    # Every failed (algorithm, workload), and every passed one with a message (a timing that
    # failed), one entry per (algorithm, status, message): the workloads' labels with it.
    problems: list[dict]
    # The definition reference's times: how many workloads there are, and how many have an
    # entry, by where it came from ("cached", "measured", "failed": see reference_times.collect);
    # "timers": how many times each timer measured (its words, an entry's "timer"), and
    # "evaluators": how many of them the contest evaluator's own timer measured.
    reference: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """As JSON-able data: a non-finite number (an infinite margin) is None."""
        lines = [{k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in asdict(line).items()}
                 for line in self.lines]
        return {"passed": self.passed, "total": self.total, "algos": self.algos, "contest_score": self.contest_score,
                "fi_ratio": self.fi_ratio, "reference": self.reference, "groups": lines, "workloads": self.workloads,
                "problems": self.problems}


def summarize(results: Results, spec: "DefinitionSpec") -> Summary:
    """Pass counts, both scores of every algorithm, one GroupLine per (report group,
    algorithm), and the workloads by label and kind; groups and labels as the definition's
    spec gives them from a workload's axes (group_of, workload_label)."""
    group_of, label_of = spec.group_of, spec.workload_label
    by_group: dict[tuple[int, str], list[Row]] = {}
    for r in sorted(results.rows, key=lambda r: group_of(r.axes)):
        by_group.setdefault((group_of(r.axes), r.algo), []).append(r)
    medians = {key: _median(r.kernel_us for r in rows if r.status == "PASSED") for key, rows in by_group.items()}
    reference_us = results.reference_us
    contest = {algo: speedups(results, algo, reference_us) for algo in dict.fromkeys(r.algo for r in results.rows)}

    def ratio(group, other, kernel):
        base = medians.get((group, other))
        return base / kernel if base and kernel else None

    lines = []
    for (group, algo), rows in by_group.items():
        kernel, floor = medians[(group, algo)], results.floors_us.get(group)
        ours = [contest[algo][r.workload] for r in rows if r.workload in contest[algo]]
        total = sum(contest[algo].values())
        lines.append(GroupLine(
            group=group, algo=algo, passed=sum(r.status == "PASSED" for r in rows), total=len(rows),
            failures=sorted({r.status for r in rows if r.status != "PASSED"}),
            max_abs_error=_worst(r.max_abs_error for r in rows), max_rel_error=_worst(r.max_rel_error for r in rows),
            worst_margin=_worst(r.worst_margin for r in rows),
            harness_us=_median(r.harness_us for r in rows if r.status == "PASSED"), kernel_us=kernel,
            x_floor=kernel / floor if kernel and floor else None,
            vs_reference=ratio(group, REFERENCE, kernel) if algo != REFERENCE else None,
            vs_fi_baseline=ratio(group, BASELINE, kernel) if algo != BASELINE else None,
            reference_us=_median(reference_us.get(r.workload) for r in rows),
            speedup=_mean(ours), score_share=sum(ours) / total if ours else None,
        ))
    algos = {}
    for algo in contest:
        rows = [r for r in results.rows if r.algo == algo]
        versus_fi = speedups(results, algo, _kernel_times(results, BASELINE))
        algos[algo] = {"passed": sum(r.status == "PASSED" for r in rows), "total": len(rows),
                       "contest_score": _mean(contest[algo].values()), "scored": len(contest[algo]),
                       "fi_ratio": _mean(versus_fi.values()), "fi_compared": len(versus_fi)}
    counts: dict[tuple[str, str], int] = {}
    workloads = sorted({r.workload: r for r in results.rows}.values(), key=Row.order)
    for r in workloads:
        counts[(label_of(r.axes), r.kind)] = counts.get((label_of(r.axes), r.kind), 0) + 1
    problems: dict[tuple[str, str, str], list[str]] = {}
    for r in results.rows:
        if r.status != "PASSED" or r.message:
            problems.setdefault((r.algo, r.status, r.message), []).append(label_of(r.axes))
    entries = [results.reference[r.workload] for r in workloads if r.workload in results.reference]
    sources = [e["source"] for e in entries]
    timed = [e for e in entries if e.get("us") is not None]
    timers: dict[str, int] = {}
    for e in timed:
        timers[e.get("timer", OLD_TIMER)] = timers.get(e.get("timer", OLD_TIMER), 0) + 1
    return Summary(passed=sum(r.status == "PASSED" for r in results.rows), total=len(results.rows), algos=algos,
                   contest_score=contest_score(results), fi_ratio=fi_ratio(results), lines=lines,
                   workloads=[{"label": label, "kind": kind, "count": n} for (label, kind), n in counts.items()],
                   problems=[{"algo": algo, "status": status, "message": message, "workloads": labels}
                             for (algo, status, message), labels in problems.items()],
                   reference={"workloads": len(workloads),
                              **{s: sources.count(s) for s in ("cached", "measured", "failed")},
                              "timers": timers, "evaluators": sum(bool(e.get("evaluators")) for e in timed)})

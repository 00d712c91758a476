"""The contest score and the FI ratio (gdn_bench.results) and how the report words them, from
small hand-made results and from a stored H100 run of the prefill mix (docs/data): the score's
arithmetic, each group's share of it, the track score, and what a run without reference times
says."""

import json

import pytest

from gdn_bench.cli import TRACK_FILE, report_track
from gdn_bench.definitions import DEFINITIONS
from gdn_bench.report import format_table
from gdn_bench.results import OLD_TIMER, Results, Row, contest_score, fi_ratio, merge, summarize, track_score
from helpers import ROOT

STORED = ROOT / "docs" / "data" / "prefill" / "h100_rounded" / "run_local_prefill.json"  # written before scores


EVALUATORS = "flashinfer-bench time_runnable, the contest evaluator's timer"
KITS = "the kit's torch.profiler timer, NOT the evaluator's (cupti-python does not import)"


def _ref(us, source="cached", timer=EVALUATORS):
    return {"us": us, "source": source, "key": "k", "timer": timer, "evaluators": timer == EVALUATORS}


def _decode(reference=None):
    """fla-recurrent and fi-baseline on three workloads (w3 failed for ours), with the reference's times."""
    b1, b64 = {"batch_size": 1}, {"batch_size": 64}
    rows = [Row("fi-baseline", "w1", b1, "PASSED", kernel_us=3.0),
            Row("fla-recurrent", "w1", b1, "PASSED", kernel_us=2.0),
            Row("fi-baseline", "w2", b64, "PASSED", kernel_us=20.0),
            Row("fla-recurrent", "w2", b64, "PASSED", kernel_us=20.0),
            Row("fi-baseline", "w3", b64, "PASSED", kernel_us=20.0),
            Row("fla-recurrent", "w3", b64, "INCORRECT_NUMERICAL")]
    meta = {"mode": "gpu", "submission": "fla-recurrent", "definition": DEFINITIONS["decode"].name}
    reference = {"w1": _ref(200.0), "w2": _ref(1000.0), "w3": _ref(1000.0)} if reference is None else reference
    return Results(meta=meta, rows=rows, reference=reference)


def test_fi_ratio_is_the_mean_of_per_workload_ratios():
    rows = _decode().rows
    meta = {"submission": "fla-recurrent"}
    assert fi_ratio(Results(meta=meta, rows=rows)) == pytest.approx((1.5 + 1.0) / 2)
    assert fi_ratio(Results(meta=meta, rows=rows[1:2])) is None


def test_the_contest_score_is_the_mean_of_reference_over_ours():
    results = _decode()
    assert contest_score(results) == pytest.approx((200 / 2 + 1000 / 20) / 2)  # w3 failed: not counted
    assert contest_score(results, "fi-baseline") == pytest.approx((200 / 3 + 1000 / 20 + 1000 / 20) / 3)
    assert fi_ratio(results) == pytest.approx((3 / 2 + 20 / 20) / 2)  # the peer ratio: fi-baseline over ours
    assert contest_score(_decode(reference={})) is None  # no reference times: no score
    partial = _decode(reference={"w2": _ref(1000.0), "w1": {"us": None, "source": "failed", "key": "k"}})
    assert contest_score(partial) == pytest.approx(50.0)  # only where the reference has a time


def test_each_group_has_its_share_of_the_score():
    summary = summarize(_decode(), DEFINITIONS["decode"])
    ours = {line.group: line for line in summary.lines if line.algo == "fla-recurrent"}
    assert (ours[1].speedup, ours[64].speedup) == (100.0, 50.0)
    assert (ours[1].score_share, ours[64].score_share) == pytest.approx((2 / 3, 1 / 3))
    assert (ours[1].reference_us, ours[64].reference_us) == (200.0, 1000.0)
    assert summary.contest_score == pytest.approx(75.0) and summary.fi_ratio == pytest.approx(1.25)
    assert summary.algos["fla-recurrent"] == {"passed": 2, "total": 3, "contest_score": pytest.approx(75.0),
                                              "scored": 2, "fi_ratio": pytest.approx(1.25), "fi_compared": 2}
    assert summary.reference == {"workloads": 3, "cached": 3, "measured": 0, "failed": 0,
                                 "timers": {EVALUATORS: 3}, "evaluators": 3}
    theirs = [line.score_share for line in summary.lines if line.algo == "fi-baseline"]
    assert sum(theirs) == pytest.approx(1.0)


def test_the_track_score_is_the_mean_of_both_definitions_scores():
    assert track_score({"decode": 75.0, "prefill": 1000.0}) == 537.5
    assert track_score({"decode": 75.0, "prefill": None}) is None
    assert track_score({}) is None


def test_reference_times_survive_json_and_merge():
    results = _decode()
    assert Results.from_json(json.loads(json.dumps(results.to_json()))) == results
    old = {k: v for k, v in results.to_json().items() if k != "reference"}  # a results.json from before
    assert Results.from_json(old).reference == {}
    halves = [Results(meta=results.meta, rows=results.rows[:2], reference={"w1": _ref(200.0)}),
              Results(rows=results.rows[2:], reference={"w2": _ref(1000.0), "w3": _ref(1000.0)})]
    assert contest_score(merge(halves)) == contest_score(results)


def _lines(results):
    return format_table(results, summarize(results, DEFINITIONS[results.meta["definition"].split("_")[1]]))


def _flat(text):
    """The text with every run of white space one space: phrases the report wraps, unwrapped."""
    return " ".join(text.split())


def test_the_report_words_both_scores():
    results = _decode()
    results.meta |= {"check": {"atol": 0.01, "rtol": 0.01}, "reference": {"mode": "cached", "file": "/c.json"}}
    text = _lines(results)
    assert "contest score of fla-recurrent: 75.00 (mean over 2 of its 3 workloads of the definition reference's " \
           "time / ours)" in text
    assert "FI ratio of fla-recurrent: 1.250 (mean over 2 workloads of fi-baseline's kernel time / ours; a peer " \
           "ratio, not the contest's score)" in text
    assert f"reference: the definition's own: of 3 workloads, 3 cached; cache: /c.json timed by {EVALUATORS} " \
           "score: as flashinfer-bench main's evaluator (the contest's) computes it" in _flat(text)
    header = next(line for line in text.splitlines() if line.split()[:2] == ["B", "algorithm"])
    assert header.split()[-8:] == ["ref", "µs", "speedup", "share", "vs", "pt-ref", "vs", "FI"]
    row = next(line for line in text.splitlines() if line.lstrip().startswith("1 fla-recurrent"))
    assert "100.0×" in row and "66.7%" in row


def test_the_report_says_which_timer_timed_the_reference_and_what_the_score_matches():
    """Every time by the evaluator's own timer: the score is the evaluator's. Any by another
    (the kit's fallback, or a results.json from before issue 27): the report says how many, and
    that the score is not the contest's."""
    results = _decode(reference={"w1": _ref(200.0, "measured", KITS), "w2": _ref(1000.0, "measured"),
                                 "w3": {"us": 1000.0, "source": "cached", "key": "k"}})
    results.meta |= {"check": {"atol": 0.01, "rtol": 0.01}, "reference": {"mode": "cached", "file": "/c.json"}}
    summary = summarize(results, DEFINITIONS["decode"])
    assert summary.reference["timers"] == {KITS: 1, EVALUATORS: 1, OLD_TIMER: 1}
    assert summary.reference["evaluators"] == 1
    text = _flat(_lines(results))
    assert f"of 3 workloads, 1 cached, 2 measured now; cache: /c.json timed by {KITS} (1 of them) timed by " \
           f"{EVALUATORS} (1 of them) timed by {OLD_TIMER} (1 of them) score: NOT the contest's: 2 of the 3 " \
           "reference times are not the evaluator's timer's (above)" in text
    assert "as flashinfer-bench main's evaluator" not in text


def test_no_reference_times_say_not_measured():
    results = _decode(reference={})
    results.meta |= {"check": {"atol": 0.01, "rtol": 0.01}, "reference": {"mode": "skip", "file": "/c.json"}}
    text = _lines(results)
    assert "contest score of fla-recurrent: not measured (no reference times: --reference skip, and none cached)" \
        in text
    assert "of 3 workloads, 3 not measured (--reference skip); cache: /c.json" in _flat(text)
    assert "FI ratio of fla-recurrent: 1.250" in text  # the peer ratio does not need the reference
    results.meta["mode"] = "cpu-correctness"
    assert "score" not in _lines(results)  # on CPU nothing is timed: no score at all


@pytest.fixture(scope="module")
def stored():
    """A stored H100 run of the generated prefill mix (triton-chunked, fi-baseline, fla-chunk),
    from before the contest score, and the score it reported then (fi-baseline / ours)."""
    data = json.loads(STORED.read_text())
    return Results.from_json(data), data["summary"]["score"]


def test_a_stored_run_keeps_its_number_as_the_fi_ratio(stored):
    results, old_score = stored
    assert fi_ratio(results) == pytest.approx(old_score)
    text = _lines(results)
    assert f"FI ratio of triton-chunked: {old_score:.3f} (mean over 97 workloads" in text
    assert "contest score of triton-chunked: not measured" in text
    assert "the definition's own: of 100 workloads, 100 not measured harness" in _flat(text)  # from before: no cache


def test_on_stored_times_the_long_workloads_carry_the_contest_score(stored):
    """With a reference whose time grows with the tokens, as a loop over tokens does (here 150 µs
    per token), the longest group carries most of the score, unlike the FI ratio's."""
    results, _ = stored
    workloads = {r.workload: r.axes["total_seq_len"] for r in results.rows}
    results.reference = {w: _ref(150.0 * t, "measured") for w, t in workloads.items()}
    ours = {r.workload: r.kernel_us for r in results.rows if r.algo == "triton-chunked"}
    expected = sum(150.0 * workloads[w] / us for w, us in ours.items()) / len(ours)
    summary = summarize(results, DEFINITIONS["prefill"])
    assert summary.contest_score == pytest.approx(expected)
    shares = {line.group: line.score_share for line in summary.lines if line.algo == "triton-chunked"}
    assert sum(shares.values()) == pytest.approx(1.0) and max(shares, key=shares.get) == 8192
    text = format_table(results, summary)
    assert f"contest score of triton-chunked: {expected:.2f} (mean over 100 workloads" in text
    assert "of 100 workloads, 100 measured now" in _flat(text)


def test_the_track_report_writes_both_scores(tmp_path, capsys):
    prefill = Results(meta={"mode": "gpu", "submission": "triton-chunked", "definition": DEFINITIONS["prefill"].name},
                      rows=[Row("triton-chunked", "p1", {"total_seq_len": 6, "num_seqs": 1}, "PASSED", kernel_us=10.0)],
                      reference={"p1": _ref(10000.0)})
    assert report_track([_decode(), prefill], tmp_path) == 0
    track = json.loads((tmp_path / TRACK_FILE).read_text())
    assert track["track_score"] == pytest.approx((75.0 + 1000.0) / 2)
    assert capsys.readouterr().out == "track score: 537.50 (the mean of the decode and prefill contest scores, " \
                                      "75.00, 1000.00)\n"
    prefill.reference = {}
    assert report_track([_decode(), prefill], tmp_path) == 0
    assert json.loads((tmp_path / TRACK_FILE).read_text())["track_score"] is None
    assert capsys.readouterr().out == "track score: not measured (no contest score for prefill)\n"

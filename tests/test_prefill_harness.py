"""The prefill definition in the harness, on CPU: run_local's flags and errors, the CPU
selection, the committed subset through flashinfer-bench's builder and the reference check,
the worst-margin statistic, the report's grouping, and the submission's availability."""

import json

import pytest
import torch
from flashinfer_bench import BenchmarkConfig
from flashinfer_bench.bench.utils import compute_error_stats

from gdn_bench import cli
from gdn_bench.checking import check_solutions, worst_margin
from gdn_bench.dataset import load_trace_set
from gdn_bench.definitions import DEFINITIONS, resolve
from gdn_bench.definitions.prefill.definition import NAME, PREFILL, token_bucket
from gdn_bench.paths import EMBEDDED_PATH
from gdn_bench.runner import RunSettings, harness_settings, select_workloads
from helpers import ROOT, SEED


def _settings(argv):
    [settings] = cli.settings_from_args(cli.build_parser(ROOT).parse_args(argv))
    return settings


def test_definition_by_short_or_full_name(monkeypatch):
    monkeypatch.delenv("ALGO", raising=False)
    for name in ("prefill", NAME):
        s = _settings(["--definition", name])
        assert s.spec is PREFILL and s.algos == ["triton-chunked"]
        assert harness_settings(s) == {"warmup": 1, "iterations": 5, "trials": 3}  # the contest's prefill flags
    assert _settings(["--definition", "prefill", "--seq-lens", "6,8192", "--trials", "2"]).sizes == [6, 8192]
    assert resolve("decode") is DEFINITIONS["decode"]
    with pytest.raises(ValueError, match="unknown definition 'prefil'; valid: decode .*, prefill"):
        resolve("prefil")


def _main(argv, capsys):
    code = cli.main(argv, checkout=ROOT)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("argv, message", [
    (["--definition", "prefil"], "argument --definition: unknown definition 'prefil'"),
    (["--definition", "prefill", "--seq-lens", "0"], "argument --seq-lens: expected positive integers"),
    (["--definition", "prefill", "--seq-lens", "6,x"], "argument --seq-lens: expected comma-separated integers"),
], ids=["unknown-definition", "zero-length", "not-a-number"])
def test_bad_flags_one_message_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        cli.build_parser(ROOT).parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("argv, message", [
    (["--definition", "prefill", "--batch-sizes", "1"],
     "--batch-sizes applies to --definition decode or mtp; prefill selects by --seq-lens"),
    (["--seq-lens", "6"], "--seq-lens applies to --definition prefill; decode selects by --batch-sizes"),
    (["--definition", "prefill", "--algo", "fla-recurrent"],
     "--algo: unknown prefill algorithm fla-recurrent; fla-recurrent is a decode algorithm: add --definition "
     "decode (prefill's: triton-chunked, pt-reference"),
    (["--definition", "prefill", "--seq-lens", "5,6", "--dataset", str(EMBEDDED_PATH)],
     "--seq-lens: no workload has total_seq_len 6; the total_seq_len values are 5, 8, 65, 68, 70"),
], ids=["decode-flag", "prefill-flag", "decode-algorithm", "absent-length"])
def test_run_errors_one_message_exit_2(argv, message, capsys, tmp_path):
    code, _, err = _main([*argv, "--out", str(tmp_path)], capsys)
    assert code == 2 and err.startswith(f"run_local: error: {message}") and err.count("\n") == 1


def test_cpu_selection_is_the_committed_subset():
    workloads = [t.workload for t in load_trace_set(None, NAME).workloads[NAME]]
    assert select_workloads(workloads, RunSettings(algos=[], definition="prefill"), cpu=True) == workloads
    chosen = select_workloads(workloads, RunSettings(algos=[], definition="prefill", sizes=[8, 70]), cpu=True)
    assert [w.axes["total_seq_len"] for w in chosen] == [8, 70]


def test_n_takes_that_many_of_each_token_bucket():
    workloads = PREFILL.planned_workloads()
    chosen = select_workloads(workloads, RunSettings(algos=[], definition="prefill", num_workloads=2), cpu=False)
    buckets = [token_bucket(w.axes) for w in chosen]
    assert buckets == sorted(buckets) and set(buckets) == {token_bucket(w.axes) for w in workloads}
    assert all(buckets.count(b) == min(2, sum(token_bucket(w.axes) == b for w in workloads)) for b in set(buckets))


def test_submission_available_once_its_file_exists():
    algo = PREFILL.algos_by_name["triton-chunked"]
    assert algo.resolved_config().entry_point == "prefill.py::kernel"
    if PREFILL.submission_entry().is_file():
        assert algo.unavailable() is None
    else:
        assert algo.unavailable() == "its entry file solution/triton/prefill.py does not exist yet"


def test_committed_subset_passes_the_reference_check():
    """pt-reference, packed, built by flashinfer-bench's builder, on every committed workload."""
    trace_set = load_trace_set(None, NAME)
    workloads = [t.workload for t in trace_set.workloads[NAME]]
    solution = PREFILL.algos_by_name["pt-reference"].solution()
    results = check_solutions(trace_set.definitions[NAME], {"pt-reference": solution}, workloads, trace_set.root,
                              "cpu", SEED)["pt-reference"]
    assert [r.status for r in results] == ["PASSED"] * len(workloads), results
    assert all(set(r.margins) == {"output", "new_state"} and max(r.margins.values()) < 0.5 for r in results)


def test_run_local_prefill_end_to_end(capsys, tmp_path):
    """Two committed workloads through run_local, pt-reference; rows keyed by the prefill axes."""
    code, out, _ = _main(["--definition", "prefill", "--algo", "pt-reference", "--seq-lens", "5,65",
                          "--dataset", str(EMBEDDED_PATH), "--out", str(tmp_path)], capsys)
    assert code == 0 and "T≤" in out and "passed 2/2" in out
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["meta"]["definition"] == NAME and data["meta"]["submission"] == "triton-chunked"
    assert [r["axes"] for r in data["rows"]] == [{"total_seq_len": 5, "num_seqs": 1, "len_cu_seqlens": 2},
                                                 {"total_seq_len": 65, "num_seqs": 1, "len_cu_seqlens": 2}]


def test_report_groups_by_token_bucket():
    assert [token_bucket({"total_seq_len": t}) for t in (1, 6, 8, 9, 140, 8192)] == [1, 8, 8, 16, 256, 8192]


@pytest.mark.parametrize("got, want, margin", [
    ([1.0, 2.0], [1.0, 2.0], 0.0),
    ([1.005], [1.0], 0.5),       # |err| 0.005 against max(0.01, 0.01)
    ([0.02], [0.0], 2.0),        # near zero the absolute tolerance decides
    ([206.0], [200.0], 3.0),     # large values: the relative one
    ([float("nan")], [1.0], float("inf")),
], ids=["exact", "half", "near-zero", "large", "nan"])
def test_worst_margin(got, want, margin):
    assert worst_margin(torch.tensor(got), torch.tensor(want)) == pytest.approx(margin)


def test_worst_margin_decides_like_flashinfer_bench():
    """margin <= 1 exactly when flashinfer-bench's check passes (away from its 1e-8 epsilon)."""
    gen = torch.Generator().manual_seed(0)
    want = torch.randn(4000, generator=gen) * torch.logspace(-3, 3, 4000)
    cfg = BenchmarkConfig()
    for scale in (1e-4, 5e-3, 2e-2, 1e-1):
        got = want + scale * torch.randn(4000, generator=gen) * (1 + want.abs())
        exceeds = compute_error_stats(got, want, cfg)[2]
        assert exceeds == (worst_margin(got, want) > 1), scale


def test_non_finite_margin_is_reported_and_json_safe(tmp_path):
    """An output with NaN gives an infinite margin: None in results.json, inf in the table."""
    from gdn_bench.report import format_table, write_report
    from gdn_bench.results import Results, Row, summarize

    axes = {"total_seq_len": 6, "num_seqs": 1, "len_cu_seqlens": 2}
    row = Row("triton-chunked", "w1", axes, "INCORRECT_NUMERICAL", margins={"output": None, "new_state": 0.1})
    meta = {"definition": NAME, "mode": "cpu-correctness", "check": {"atol": 0.01, "rtol": 0.01}, "seed": 0}
    results = Results(meta=meta, rows=[row])
    assert row.worst_margin == float("inf")
    summary = summarize(results, PREFILL)
    write_report(results, summary, tmp_path)
    assert json.loads((tmp_path / "results.json").read_text())["rows"][0]["margins"]["output"] is None
    row_line = [line for line in format_table(results, summary).splitlines() if line.startswith("    8 triton")]
    assert row_line[0].split()[-1] == "inf"
    assert (tmp_path / "margins.png").is_file()  # the infinite margin drawn on the top edge


def test_an_empty_cpu_subset_is_an_error_that_says_what_to_do():
    long_only = [w for w in PREFILL.planned_workloads() if w.axes["total_seq_len"] > 128]
    with pytest.raises(ValueError, match=r"the CPU pass takes its workloads of at most 128 tokens \(up to 6, the first\), and this "
                                         r"trace set has none; choose workloads with --seq-lens, -n or --workload-id"):
        select_workloads(long_only, RunSettings(algos=[], definition="prefill"), cpu=True)

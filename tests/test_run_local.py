"""scripts/run_local.py (gdn_bench.cli) on CPU, decode: arguments, every error path, the
correctness-only fallback end to end (one definition and both), results.json and the plot;
plus the pieces it is built from (CUPTI grouping, group medians). Prefill's CLI is in
test_prefill_harness.py; the scores in test_scores.py; the reference times' cache in
test_reference_times.py (and, on a GPU, here)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gdn_bench import cli
from gdn_bench.definitions import DEFINITIONS
from gdn_bench.paths import EMBEDDED_PATH, use_project
from gdn_bench.results import Results, Row, summarize
from gdn_bench.timing import TimingError, group_call_times
from helpers import ROOT


def _settings(argv):
    [settings] = cli.settings_from_args(cli.build_parser(ROOT).parse_args(argv))
    return settings


def test_defaults(monkeypatch):
    monkeypatch.delenv("ALGO", raising=False)
    monkeypatch.delenv("FIB_DATASET_PATH", raising=False)
    s = _settings([])
    assert s.algos == ["fla-recurrent"] and s.dataset is None and s.spec.name == "gdn_decode_qk4_v8_d128_k_last"
    assert (s.warmup, s.iterations, s.trials) == (None, None, None)  # the contest's: flashinfer-bench's defaults
    from flashinfer_bench import BenchmarkConfig

    from gdn_bench.runner import harness_settings

    fib = BenchmarkConfig()
    assert harness_settings(s) == {"warmup": fib.warmup_runs, "iterations": fib.iterations, "trials": fib.num_trials}
    assert harness_settings(s) == {"warmup": 10, "iterations": 50, "trials": 3}
    assert s.out.parent.name == "results"


def test_generic_environment_variables_steer_nothing(monkeypatch, tmp_path):
    """$ALGO and $FIB_DATASET_PATH (names other tools use) are not read: only flags choose."""
    monkeypatch.setenv("ALGO", "fla-recurrent-typo")
    monkeypatch.setenv("FIB_DATASET_PATH", str(tmp_path / "elsewhere"))
    s = _settings(["--definition", "prefill"])
    assert s.algos == ["triton-chunked"] and s.dataset is None


def test_all_and_filters():
    s = _settings(["--algo", "all", "--batch-sizes", "1,64", "-n", "3", "--workload-id", "6e75", "--out", "x"])
    assert "fi-baseline" in s.algos and "fla-recurrent" in s.algos
    assert s.sizes == [1, 64] and s.num_workloads == 3 and s.workload_id == "6e75"


@pytest.mark.parametrize("argv", [["--batch-sizes", "1,x"], ["--batch-sizes", "0"], ["--batch-sizes", "1,,4"],
                                  ["-n", "0"], ["-n", "abc"], ["--iterations", "-1"], ["--definition", "nope"],
                                  ["--seed", "-1"], ["--seed", "x"], ["--reference", "fresh"],
                                  ["--reference-cache", "/proc/nope/x.json"]], ids=" ".join)
def test_bad_numbers_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.build_parser(ROOT).parse_args(argv)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    flag = "-n/--num-workloads" if argv[0] == "-n" else argv[0]
    assert e.value.code == 2 and last.startswith(f"run_local: error: argument {flag}: ")
    assert argv[1] in last and "positive_int" not in last  # the value, and no internal name


def test_a_warmup_of_zero_is_taken():
    from gdn_bench.runner import harness_settings

    assert harness_settings(_settings(["--warmup", "0"])) == {"warmup": 0, "iterations": 50, "trials": 3}
    with pytest.raises(SystemExit):
        _settings(["--warmup", "-1"])


def test_on_a_cpu_the_gpu_only_flags_get_a_note(capsys, tmp_path, monkeypatch):
    """--warmup, --iterations, --trials, --reference and --reference-cache time things: a CPU
    pass takes them and says they change nothing."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "0"))
    code, _, err = _main(["--algo", "pt-reference", "--batch-sizes", "1", "-n", "1", "--iterations", "7",
                          "--warmup", "0", "--reference", "measure", "--out", str(tmp_path)], capsys)
    assert code == 0 and err.splitlines()[0] == (
        "run_local: note: no CUDA GPU, so --warmup, --iterations, --reference measure change nothing: the CPU pass "
        "checks correctness and times nothing")
    code, _, err = _main(["--algo", "pt-reference", "--batch-sizes", "1", "-n", "1", "--out", str(tmp_path)], capsys)
    assert code == 0 and "note" not in err


def test_reference_flags(tmp_path):
    s = _settings([])
    assert (s.reference, s.reference_file) == ("cached", None)  # None: reference_times.default_file()
    s = _settings(["--reference", "skip", "--reference-cache", str(tmp_path / "times.json")])
    assert (s.reference, s.reference_file) == ("skip", tmp_path / "times.json")


def test_definition_both_runs_each_under_its_own_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("ALGO", raising=False)
    runs = cli.settings_from_args(cli.build_parser(ROOT).parse_args(
        ["--definition", "both", "--batch-sizes", "1", "--seq-lens", "6", "--out", str(tmp_path)]))
    assert [(s.definition, s.algos, s.sizes, s.out) for s in runs] == [
        ("decode", ["fla-recurrent"], [1], tmp_path / "decode"),
        ("prefill", ["triton-chunked"], [6], tmp_path / "prefill")]
    with pytest.raises(ValueError, match="^prefill: --algo: unknown prefill algorithm fla-recurrent; fla-recurrent is a decode algorithm"):
        cli.settings_from_args(cli.build_parser(ROOT).parse_args(["--definition", "both", "--algo", "fla-recurrent"]))


def test_submission_names_each_definitions_own(tmp_path):
    runs = cli.settings_from_args(cli.build_parser(ROOT).parse_args(
        ["--definition", "both", "--algo", "submission,fi-baseline", "--out", str(tmp_path)]))
    assert [s.algos for s in runs] == [["fla-recurrent", "fi-baseline"], ["triton-chunked", "fi-baseline"]]
    assert _settings(["--algo", "fla-recurrent, submission"]).algos == ["fla-recurrent"]  # named twice: once


def test_an_unknown_definition_names_both_among_the_valid_ones(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser(ROOT).parse_args(["--definition", "track"])
    assert "unknown definition 'track'; valid: decode (gdn_decode_qk4_v8_d128_k_last), prefill " \
           "(gdn_prefill_qk4_v8_d128_k_last), mtp (gdn_mtp_qk4_v8_d128_k_last), or both" in capsys.readouterr().err


def _main(argv, capsys):
    code = cli.main(argv, checkout=ROOT)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_unknown_algorithm_lists_the_valid_ones(capsys, tmp_path):
    code, _, err = _main(["--algo", "fla-recurent", "--out", str(tmp_path)], capsys)
    assert code == 2 and err.count("\n") == 1 and "--algo: unknown decode algorithm fla-recurent" in err
    assert "fla-recurrent" in err and "all" in err and "prefill" not in err


@pytest.mark.parametrize("definition, name, owner", [("decode", "triton-chunked", "prefill"),
                                                     ("prefill", "fla-recurrent", "decode")])
def test_an_algorithm_of_the_other_definition_says_so(definition, name, owner, capsys, tmp_path):
    code, _, err = _main(["--definition", definition, "--algo", f"pt-reference,{name}", "--out", str(tmp_path)],
                         capsys)
    assert code == 2 and err.count("\n") == 1
    assert f"unknown {definition} algorithm {name}; {name} is a {owner} algorithm: add --definition {owner}" in err


def test_help_lists_the_algorithms_of_each_definition():
    text = cli.build_parser(ROOT).format_help()
    listing = text[text.index("algorithms (--algo), per definition"):]
    for spec in DEFINITIONS.values():
        block = listing[listing.index(f"  {spec.short}:"):]
        first = block.splitlines()[1].split()[0]
        assert first == spec.submission  # the default comes first
        assert all(f"    {a.name} " in block for a in spec.algos)
    assert listing.index("triton-chunked") > listing.index("  prefill:") > listing.index("fla-recurrent")


def test_missing_dataset_is_an_error_and_is_not_created(capsys, tmp_path):
    missing = tmp_path / "no-such-dataset"
    code, _, err = _main(["--dataset", str(missing), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "does not exist" in err
    assert not missing.exists()


def test_dataset_without_the_definition(capsys, tmp_path):
    (tmp_path / "definitions").mkdir()
    code, _, err = _main(["--dataset", str(tmp_path), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "has no definition" in err


@pytest.mark.parametrize("argv, message", [
    (["--workload-id", "zzzz"], "no workload's uuid starts with 'zzzz'"),
    (["--batch-sizes", "1,3"], "--batch-sizes: no workload has batch_size 3; the batch_size values are 1, 2, 4, 8, 16, "
                               "32, 48, 64"),
], ids=["unknown-uuid", "absent-batch-size"])
def test_no_matching_workload_says_what_there_is(argv, message, capsys, tmp_path):
    code, _, err = _main([*argv, "--out", str(tmp_path)], capsys)
    assert code == 2 and err == f"run_local: error: {message}\n"


def test_n_takes_that_many_of_each_batch_size():
    from gdn_bench.runner import select_workloads

    settings = _settings(["--batch-sizes", "1,64", "-n", "4"])
    chosen = select_workloads(settings.spec.planned_workloads(), settings, cpu=True)
    assert [w.axes["batch_size"] for w in chosen] == [1] * 4 + [64] * 4
    everything = settings.spec.planned_workloads()
    assert chosen == [w for w in everything if w.axes["batch_size"] == 1][:4] + \
        [w for w in everything if w.axes["batch_size"] == 64][:4]


def test_only_unavailable_algorithms_ran_nothing(capsys, tmp_path, monkeypatch):
    """Without a GPU (hidden here, so that the test means the same on a GPU machine)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "0"))  # restored after the CPU path sets it
    code, out, _ = _main(["--algo", "fi-baseline", "-n", "1", "--out", str(tmp_path)], capsys)
    assert code == 1 and "skipped fi-baseline: needs " in out  # a CUDA GPU (or flashinfer, where it is missing)
    assert "no kernel_time.png: nothing was timed, and no margins.png: nothing was checked" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.txt", "results.json"]


def test_both_definitions_on_cpu(capsys, tmp_path, monkeypatch):
    """Without a GPU (hidden here): each definition's report in its folder, and no track score."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "0"))  # restored after the CPU path sets it
    code, out, _ = _main(["--definition", "both", "--algo", "pt-reference", "--batch-sizes", "1", "--seq-lens", "5",
                          "-n", "1", "--out", str(tmp_path)], capsys)
    assert code == 0 and out.count("passed 1/1 (algorithm, workload) cases") == 2 and "score" not in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decode", "prefill"]  # no track.json: nothing timed
    for name in ("decode", "prefill"):
        meta = json.loads((tmp_path / name / "results.json").read_text())["meta"]
        assert meta["definition"] == DEFINITIONS[name].name and meta["reference"]["mode"] == "cached"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="times the definition's reference on a GPU")
def test_a_second_gpu_run_reuses_the_reference_times(tmp_path):
    from gdn_bench.runner import RunSettings, run

    settings = RunSettings(algos=["fla-recurrent"], sizes=[1], num_workloads=1, reference_file=tmp_path / "times.json",
                           out=tmp_path / "out")
    first, second = run(settings), run(settings)
    [(workload, measured)] = first.reference.items()
    assert measured["source"] == "measured" and measured["us"] > 0 and (tmp_path / "times.json").is_file()
    assert second.reference[workload]["source"] == "cached" and second.reference[workload]["us"] == measured["us"]
    summary = summarize(second, DEFINITIONS["decode"])
    assert summary.contest_score == pytest.approx(measured["us"] / second.rows[0].kernel_us)


def _dataset_files():
    return sorted((p.relative_to(EMBEDDED_PATH), p.stat().st_mtime_ns) for p in EMBEDDED_PATH.rglob("*") if p.is_file())


def test_cpu_fallback_end_to_end(tmp_path):
    """Two small workloads for the submission and the loop reference, in a fresh process with
    no GPU visible (the fallback sets TRITON_INTERPRET itself), then the files it writes."""
    before = _dataset_files()
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "run_local.py"), "--algo", "fla-recurrent,pt-reference",
         "--batch-sizes", "1", "-n", "2", "--out", str(out)],
        capture_output=True, text=True,
        env={**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "NO CUDA GPU: correctness only" in result.stdout and "passed 4/4" in result.stdout
    for said in ("2 of the trace set's 57, chosen by --batch-sizes 1, -n 2 (the first 2 of each batch size):",
                 "B=1 ×2 (all random)", "random tensors drawn from seed 0 (replay: --seed 0)",
                 "atol = 0.01, rtol = 0.01: an element fails only when |err| > atol AND |err| > rtol·|ref|",
                 f"project:    {ROOT} (config.toml"):
        assert said in result.stdout, said
    assert "max rel" not in result.stdout  # the margin decides, and is shown instead
    data = json.loads((out / "results.json").read_text())
    assert set(data) == {"meta", "skipped", "floors_us", "rows", "reference", "summary"}
    assert data["reference"] == {} and "score" not in result.stdout  # nothing timed on CPU: no score
    assert data["meta"]["mode"] == "cpu-correctness" and data["meta"]["versions"]["torch"]
    assert (data["meta"]["seed"], data["meta"]["check"]) == (0, {"atol": 0.01, "rtol": 0.01})
    assert sorted((r["algo"], r["axes"]["batch_size"]) for r in data["rows"]) == [
        ("fla-recurrent", 1), ("fla-recurrent", 1), ("pt-reference", 1), ("pt-reference", 1)]
    assert len({r["workload"] for r in data["rows"]}) == 2
    for row in data["rows"]:
        assert row["status"] == "PASSED" and row["max_abs_error"] is not None and row["kernel_us"] is None
        assert set(row["margins"]) == {"output", "new_state"} and max(row["margins"].values()) <= 1
    assert data["summary"]["passed"] == data["summary"]["total"] == 4
    assert not (out / "kernel_time.png").exists() and "no kernel_time.png: nothing was timed" in result.stdout
    assert (out / "margins.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # what was checked, plotted
    assert (out / "report.txt").read_text().strip()
    assert _dataset_files() == before, "run_local wrote into the dataset folder"


def test_cupti_grouping_splits_at_flushes():
    flush = frozenset({"flush"})
    events = [("warm", 0, 1), ("flush", 10, 20), ("k1", 21, 23), ("k2", 24, 30),
              ("flush", 40, 50), ("k1", 52, 55), ("flush", 60, 70), ("k2", 72, 73), ("k1", 71, 72)]
    assert group_call_times(events, flush) == [9, 3, 2]


def test_cupti_grouping_rejects_a_call_without_kernels():
    with pytest.raises(TimingError):
        group_call_times([("flush", 0, 1), ("flush", 2, 3), ("k", 4, 5)], frozenset({"flush"}))


def test_summary_derives_group_medians_and_ratios():
    b1, b4 = {"batch_size": 1}, {"batch_size": 4}
    rows = [Row("fla-recurrent", "w1", b1, "PASSED", kernel_us=2.0, harness_us=9.0, margins={"output": 0.5}),
            Row("fla-recurrent", "w2", b1, "PASSED", kernel_us=4.0, harness_us=11.0, margins={"output": 0.25}),
            Row("fi-baseline", "w1", b1, "PASSED", kernel_us=6.0),
            Row("pt-reference", "w1", b1, "PASSED", kernel_us=300.0),
            Row("fla-recurrent", "w3", b4, "INCORRECT_NUMERICAL", margins={"output": 2.0})]
    summary = summarize(Results(meta={"submission": "fla-recurrent"}, floors_us={1: 1.5}, rows=rows),
                        DEFINITIONS["decode"])
    ours = {line.group: line for line in summary.lines if line.algo == "fla-recurrent"}
    assert (ours[1].kernel_us, ours[1].harness_us, ours[1].worst_margin) == (3.0, 10.0, 0.5)
    assert (ours[1].x_floor, ours[1].vs_fi_baseline, ours[1].vs_reference) == (2.0, 2.0, 100.0)
    assert (ours[4].passed, ours[4].total, ours[4].failures, ours[4].kernel_us) == (0, 1, ["INCORRECT_NUMERICAL"], None)
    assert (summary.passed, summary.total, summary.fi_ratio) == (4, 5, 3.0)  # w1 alone ran both: 6 / 2
    assert summary.algos["fla-recurrent"] == {"passed": 2, "total": 3, "contest_score": None, "scored": 0,
                                              "fi_ratio": 3.0, "fi_compared": 1}
    assert summary.contest_score is None  # no reference times


@pytest.fixture
def other_checkout(tmp_path):
    """A copy of this checkout's config.toml, solution/ and baselines/; afterwards this checkout
    is the project again (run_local makes its --root the process's project)."""
    clone = tmp_path / "clone"
    for name in ("solution", "baselines"):
        shutil.copytree(ROOT / name, clone / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "config.toml", clone / "config.toml")
    yield clone
    use_project(ROOT)


def test_root_names_the_checkout_and_the_report_says_so(other_checkout, capsys, tmp_path):
    code, out, _ = _main(["--root", str(other_checkout), "--algo", "pt-reference", "--batch-sizes", "1", "-n", "1",
                          "--out", str(tmp_path / "out")], capsys)
    assert code == 0 and f"project:    {other_checkout} (config.toml" in out
    assert json.loads((tmp_path / "out" / "results.json").read_text())["meta"]["root"] == str(other_checkout)


def test_root_that_is_no_checkout_exit_2(capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        cli.main(["--root", str(tmp_path)], checkout=ROOT)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument --root: " in err and "has no config.toml and no solution" in err


@pytest.mark.parametrize("make", ["file", "file-parent", "proc"])
def test_out_that_cannot_be_a_folder_exit_2_before_any_work(make, capsys, tmp_path, monkeypatch):
    """Table row `run_local.py --out /proc/x`: a folder that cannot be made is found before any
    work (the runner is never reached), whoever runs it (root's permission bits say yes)."""
    if make == "proc" and not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    (tmp_path / "taken").write_text("x")
    out = {"file": tmp_path / "taken", "file-parent": tmp_path / "taken" / "sub", "proc": Path("/proc/x")}[make]
    monkeypatch.setattr("gdn_bench.runner.run", lambda settings: pytest.fail("the run started"))
    with pytest.raises(SystemExit) as e:
        cli.main(["--algo", "pt-reference", "--out", str(out)], checkout=ROOT)
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # one line, naming the flag
    assert e.value.code == 2 and "Traceback" not in err and last.startswith("run_local: error: argument --out: ")
    assert last.endswith({"file": "taken exists and is not a folder", "file-parent": "taken is a file, not a folder",
                          "proc": "cannot create /proc/x: cannot write into /proc (No such file or directory)"}[make])


def test_a_workloads_inputs_depend_on_the_seed_and_its_uuid_only():
    from gdn_bench.checking import workload_inputs
    from gdn_bench.dataset import load_trace_set

    trace_set = load_trace_set()
    spec = DEFINITIONS["decode"]
    definition = trace_set.definitions[spec.name]
    first, second = (t.workload for t in trace_set.workloads[spec.name][:2])

    def q(workload, seed):
        return workload_inputs(definition, workload, trace_set.root, "cpu", seed)[0]

    before = torch.random.get_rng_state()
    drawn = q(first, 7)
    assert torch.equal(torch.random.get_rng_state(), before)  # the caller's generator is left alone
    q(second, 7)
    assert torch.equal(q(first, 7), drawn) and not torch.equal(q(first, 8), drawn)
    assert not torch.equal(q(second, 7), drawn)


def test_a_broken_config_says_why_under_the_table(other_checkout, capsys, tmp_path):
    config = other_checkout / "config.toml"
    config.write_text(config.read_text().replace('entry_point = "kernel.py::kernel"', 'entry_point = "kernel.py"'))
    code, out, _ = _main(["--root", str(other_checkout), "--algo", "fla-recurrent,pt-reference", "--batch-sizes", "1",
                          "-n", "1", "--out", str(tmp_path / "out")], capsys)
    why = "  fla-recurrent PACK_ERROR on B=1: entry_point 'kernel.py' must be 'file::function'"
    assert code == 1 and "why (full messages in results.json):" in out and why in out
    assert "COMPILE_ERROR" not in out  # nothing was compiled
    assert why in (tmp_path / "out" / "report.txt").read_text()


def test_failure_messages_are_one_line_each():
    from gdn_bench.report import _problem_lines, shortened

    log = "Traceback (most recent call last):\n  File \"x.py\", line 1\n\nValueError: q: expected a tensor\n\n"
    assert shortened(log) == "ValueError: q: expected a tensor" and shortened("x" * 500, 10) == "x" * 9 + "…"
    rows = [Row("fla-recurrent", f"w{i}", {"batch_size": 4}, "RUNTIME_ERROR", message=log) for i in range(3)]
    rows.append(Row("fla-recurrent", "w9", {"batch_size": 1}, "INCORRECT_NUMERICAL", message="output: worst margin 2"))
    summary = summarize(Results(meta={"submission": "fla-recurrent"}, rows=rows), DEFINITIONS["decode"])
    assert _problem_lines(summary)[1:] == [
        "why (full messages in results.json):",
        "  fla-recurrent RUNTIME_ERROR on 3 workloads: ValueError: q: expected a tensor",
        "  fla-recurrent INCORRECT_NUMERICAL on B=1: output: worst margin 2"]


def test_ctrl_c_keeps_what_finished(capsys, tmp_path, monkeypatch):
    """Table row "Ctrl-C during a run": the cases that finished are written, marked partial,
    and the exit status is 130 (here the third check is interrupted)."""
    from gdn_bench import checking

    calls = []

    def interrupted_third(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return check_one(*args, **kwargs)

    check_one = checking._check_one
    monkeypatch.setattr(checking, "_check_one", interrupted_third)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "0"))
    code, out, err = _main(["--algo", "pt-reference", "--batch-sizes", "1", "-n", "4", "--out", str(tmp_path)], capsys)
    said = "interrupted by Ctrl-C during checking (CPU): 2 of 4 (algorithm, workload) cases have a row"
    assert code == 130 and err.endswith(f"\nrun_local: {said}; the report holds those (marked partial)\n")
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["meta"]["partial"] == said and len(data["rows"]) == 2
    assert {r["status"] for r in data["rows"]} == {"PASSED"}
    report = (tmp_path / "report.txt").read_text()
    assert report.startswith(f"PARTIAL RESULTS: {said}") and "passed 2/2 (algorithm, workload) cases (PARTIAL" in report


def test_a_workload_that_fails_mid_run_fails_alone(capsys, tmp_path, monkeypatch):
    """A workload whose inputs cannot be made (here the second: a blob gone bad after the
    trace set loaded) fails on its own row, with why; the others run and --out is written."""
    from gdn_bench import checking

    made = []

    def second_fails(definition, workload, *args):
        made.append(workload.uuid)
        if len(made) == 2:
            raise ValueError("'q' expected [1, 1, 4, 128], got [2, 1, 4, 128]")
        return inputs_of(definition, workload, *args)

    inputs_of = checking.workload_inputs
    monkeypatch.setattr(checking, "workload_inputs", second_fails)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "0"))
    code, out, _ = _main(["--algo", "pt-reference", "--batch-sizes", "1", "-n", "3", "--out", str(tmp_path)], capsys)
    rows = {r["workload"]: r for r in json.loads((tmp_path / "results.json").read_text())["rows"]}
    assert code == 1 and [rows[uuid]["status"] for uuid in made] == ["PASSED", "WORKLOAD_ERROR", "PASSED"]
    assert rows[made[1]]["message"] == (
        f"workload {made[1]} could not run: its inputs: ValueError: 'q' expected [1, 1, 4, 128], got [2, 1, 4, 128]")
    assert "passed 2/3" in out and "pt-reference WORKLOAD_ERROR on B=1: workload" in out


def test_a_workload_the_benchmark_fails_on_fails_alone():
    """On a GPU: flashinfer-bench's Benchmark raising on one workload gives that workload's rows
    RUNTIME_ERROR with the reason; the next workload goes on and the Benchmark is closed."""
    from types import SimpleNamespace

    from flashinfer_bench import TraceSet

    from gdn_bench.dataset import load_trace_set
    from gdn_bench.runner import _benchmark

    trace_set = load_trace_set()
    definition = trace_set.definitions[DEFINITIONS["decode"].name]
    workloads = [t.workload for t in trace_set.workloads[definition.name][:2]]
    calls, closed = [], []

    def run_all(dump_traces):
        calls.append(dump_traces)
        if len(calls) == 1:
            raise ValueError("'q' expected [1, 1, 4, 128], got [2, 1, 4, 128]")
        return SimpleNamespace(traces={})

    bench = SimpleNamespace(run_all=run_all, close=lambda: closed.append(True))
    bench_set = TraceSet(root=trace_set.root, definitions={definition.name: definition},
                         workloads={definition.name: []})
    rows = {}
    _benchmark(bench, bench_set, definition, workloads, {"ours": SimpleNamespace(name="ours")}, rows,
               "flashinfer-bench")
    first, second = (rows[("ours", w.uuid)] for w in workloads)
    assert closed and first.status == second.status == "RUNTIME_ERROR"
    assert first.message == ("flashinfer-bench failed on this workload: ValueError: 'q' expected [1, 1, 4, 128], "
                             "got [2, 1, 4, 128]")
    assert second.message == "flashinfer-bench returned no evaluation"


def test_ctrl_c_in_a_real_run_is_one_line_and_130(tmp_path):
    """SIGINT while Triton's interpreter runs: no traceback, status 130, the report written."""
    out = tmp_path / "out"
    env = {**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}, "CUDA_VISIBLE_DEVICES": ""}
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "run_local.py"), "--batch-sizes", "1,64", "-n", "10", "--out",
         str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    seen, deadline = b"", time.monotonic() + 120
    os.set_blocking(process.stderr.fileno(), False)
    while b"checking (CPU)" not in seen and time.monotonic() < deadline and process.poll() is None:
        seen += process.stderr.read() or b""
        time.sleep(0.05)
    time.sleep(0.5)  # inside the first case
    process.send_signal(signal.SIGINT)
    try:
        _, rest = process.communicate(timeout=30)
    finally:
        process.kill()
    err = (seen + rest).decode()
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip()]
    assert process.returncode == 130 and "Traceback" not in err, err
    assert lines[-1].startswith("run_local: interrupted by Ctrl-C during checking (CPU): ")
    assert json.loads((out / "results.json").read_text())["meta"]["partial"].startswith("interrupted by Ctrl-C")


def test_a_corrupt_workload_line_names_its_file_and_line(capsys, tmp_path):
    dataset = tmp_path / "data"
    shutil.copytree(EMBEDDED_PATH, dataset)
    jsonl = next((dataset / "workloads").rglob("gdn_decode*.jsonl"))
    lines = jsonl.read_text().splitlines()
    lines[2] = "{" + lines[2]
    jsonl.write_text("\n".join(lines) + "\n")
    code, _, err = _main(["--dataset", str(dataset), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and err == (f"run_local: error: dataset {dataset}: cannot read {jsonl}, line 3: Invalid JSON: "
                                 "key must be a string at column 2\n")


def test_results_path_is_printed_in_full(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    s = _settings(["--out", "here"])
    assert s.out == tmp_path / "here" and s.out.is_absolute()
    assert _settings([]).out.parent == tmp_path / "results"


def test_an_out_made_a_file_mid_run_keeps_the_report_elsewhere_and_says_where(capsys, tmp_path, monkeypatch):
    """--out replaced by a file while the run ran: the report goes to a new temporary folder,
    named in one line; status 2."""
    import tempfile

    from gdn_bench import runner

    out, temporary = tmp_path / "out", tmp_path / "tmp"
    temporary.mkdir()
    run = runner.run

    def run_then_take_out(settings):
        results = run(settings)
        shutil.rmtree(out, ignore_errors=True)
        out.write_text("taken")
        return results

    monkeypatch.setattr(runner, "run", run_then_take_out)
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "0"))
    code, printed, err = _main(["--algo", "pt-reference", "-n", "1", "--batch-sizes", "1", "--out", str(out)], capsys)
    [kept] = temporary.iterdir()
    assert code == 2 and err.endswith(f"\nrun_local: error: cannot write the report under {out} (File exists); "
                                      f"wrote it under {kept} instead\n")  # after the progress bar
    assert {"results.json", "report.txt"} <= {p.name for p in kept.iterdir()} and f"wrote {kept}" in printed
    assert json.loads((kept / "results.json").read_text())["rows"][0]["status"] == "PASSED"
    assert out.read_text() == "taken"


def test_an_algorithm_lacking_a_gpu_and_packages_names_both(monkeypatch):
    """fla-lib on a CPU without fla: the GPU and the install, not the install alone."""
    from gdn_bench.algos import Algo

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    algo = Algo("x", "", "d", None, "baselines/x", needs_gpu=True, requires=("no_such_module_gdn",), extra="baselines")
    assert algo.unavailable() == 'needs a CUDA GPU and no_such_module_gdn (pip install -e ".[baselines]")'

"""scripts/check_cli_agreement.py and scripts/reference_host_cost.py on CPU (both need a GPU
to measure): the CLI wrapper, the budgeted steps, the summary and its verdict, a stop when the
evaluator's timer is not there, and how the host-cost numbers are read off the calls."""

import importlib.metadata
import json
import subprocess
import sys
import types

import pytest
import torch

from gdn_bench import checking, timing
from gdn_bench.algos import load_module
from gdn_bench.fib_compare import agreement
from helpers import ROOT

check = load_module(ROOT / "scripts" / "check_cli_agreement.py", "check_cli_agreement_script")
host = load_module(ROOT / "scripts" / "reference_host_cost.py", "reference_host_cost_script")


def test_the_wrapper_runs_this_pythons_flashinfer_bench_cli(tmp_path):
    wrapper = check.cli_wrapper(tmp_path / "bin")
    assert wrapper.name == "flashinfer-bench"
    ran = subprocess.run([str(wrapper), "run", "--help"], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and "--warmup-runs" in ran.stdout
    import flashinfer_bench

    assert f"flashinfer-bench CLI from {flashinfer_bench.__file__}" in ran.stderr


def test_a_step_runs_within_the_budget_and_logs_its_output(tmp_path):
    log = tmp_path / "log.txt"
    steps = check.Steps(check.SUMMARY_SECONDS + 60, log, {})
    assert steps.run("hello", [sys.executable, "-c", "print('hi')"]) == 0
    assert steps.run("fails", [sys.executable, "-c", "raise SystemExit(3)"]) == 3
    steps.deadline = 0.0  # the budget spent
    assert steps.run("late", [sys.executable, "-c", "print('never')"]) is None
    text = log.read_text()
    assert "=== hello" in text and "hi\n" in text and "exit status 0" in text
    assert "exit status 3" in text and "=== late" in text and "not started: no time left" in text
    assert "\nnever\n" not in text


def test_a_step_past_the_deadline_is_stopped(tmp_path):
    steps = check.Steps(check.SUMMARY_SECONDS + 3, tmp_path / "log.txt", {})
    assert steps.run("sleeper", [sys.executable, "-c", "print('started', flush=True); import time; time.sleep(30)"]) \
        is None
    text = (tmp_path / "log.txt").read_text()
    assert "started" in text and "the budget ran out" in text


def _comparison(path, ratios):
    """A comparison.json at `path` with a workload per CLI / run_local reference time ratio."""
    entries = [{"workload": f"w{i}", "label": f"T={i}", "reference_cli_over_run_local": r,
                "ours_cli_over_run_local": 1.0, "cli_over_run_local": 1 / r,
                "run_local": {"reference_us": 100.0, "kernel_us": 2.0, "speedup": 50.0},
                "flashinfer_bench": {"status": "PASSED", "reference_us": 100.0 * r, "latency_us": 2.0,
                                     "speedup": 50.0 * r}} for i, r in enumerate(ratios)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"agreement": agreement(entries), "workloads": entries}))


def test_a_definition_passes_with_enough_workloads_all_within_tolerance(tmp_path):
    _comparison(tmp_path / "prefill" / "comparison.json", [1.0, 1.05, 0.95, 1.02])
    lines, passed = check.definition_summary("prefill", tmp_path, {"run_local": 0, "compare": 0}, 4)
    assert passed and lines[-1] == "PASS: 4 of 4 reference times within 10%, 4 needed"
    assert lines[0] == "--- gdn_prefill_qk4_v8_d128_k_last: run_local exit 0, compare_fib_cli exit 0"
    assert not check.definition_summary("prefill", tmp_path, {}, 8)[1]  # too few workloads
    _comparison(tmp_path / "decode" / "comparison.json", [1.0, 1.3])
    lines, passed = check.definition_summary("decode", tmp_path, {}, 2)
    assert not passed and lines[-1].startswith("FAIL: 1 of 2")
    assert check.definition_summary("decode", tmp_path / "none", {}, 2) == (
        ["--- gdn_decode_qk4_v8_d128_k_last: run_local exit None, compare_fib_cli exit None",
         "no comparison: see log.txt"], False)


def test_without_a_gpu_one_line_and_nothing_written(tmp_path, monkeypatch, capsys):
    """Status 2 (a missing tool, as the other GPU scripts), no --out, no work folder."""
    import tempfile

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(check, "check_timer", lambda: pytest.fail("the timer was checked"))
    assert check.main(["--definition", "decode", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == "check_cli_agreement: error: needs a CUDA GPU: the check times on one\n"
    assert list(tmp_path.iterdir()) == []


def test_flashinfer_bench_version_is_pips_where_it_is_the_installed_one():
    import flashinfer_bench

    from gdn_bench.evaluator_timing import _versions

    assert _versions()["flashinfer-bench"] == (f"{importlib.metadata.version('flashinfer-bench')} "
                                              f"({flashinfer_bench.__file__})")


def test_without_the_evaluators_timer_it_stops_before_running_anything(tmp_path, monkeypatch, capsys):
    import tempfile

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(check, "check_timer", lambda: {"ok": False, "why": "no CUPTI", "description": "the kit's",
                                                       "gpu": "CPU", "versions": {}})
    monkeypatch.setattr(check.Steps, "run", lambda *a, **k: pytest.fail("a step ran"))
    assert check.main(["--definition", "prefill", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == ["STOPPED: no CUPTI", "FAIL: issue 27's check (prefill)"]
    assert (tmp_path / "summary.txt").read_text().splitlines()[-1] == out[-1]
    assert json.loads((tmp_path / "check.json").read_text())["why"] == "no CUPTI"
    assert not list(tmp_path.glob("cli-agreement-*"))  # no work folder: nothing ran


def test_host_cost_reads_each_timers_calls(monkeypatch):
    """Untraced calls first, then the kit's profiled ones, then the evaluator's: its last
    `iterations` calls are the traced ones."""
    walls = iter([0.010, 0.010, 0.010,  # untraced
                  0.011, 0.011, 0.011,  # under the kit's timer
                  0.010, 0.010, 0.010, 0.010, 0.010, 0.010, 0.010,  # the evaluator's untraced 1 + 5 + warm-up 1
                  0.020, 0.020, 0.050, 0.020, 0.020])  # its 5 traced calls
    clock = types.SimpleNamespace(now=0.0)

    def perf_counter():
        clock.now += next(walls) if clock.started else 0.0
        clock.started = not clock.started
        return clock.now
    clock.started = False
    monkeypatch.setattr(host.time, "perf_counter", perf_counter)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(checking, "workload_inputs", lambda *a: ["x"])  # host_cost imports these when it runs
    records = [("flush", 0.0, 1.0), *[("k", 1.0 + i, 2.0 + i) for i in range(100)]]

    def profile(fn, calls, warmup, busy):
        for _ in range(calls):
            fn()
        return "prof", frozenset({"flush"}), calls
    monkeypatch.setattr(timing, "profile_cold_calls", profile)
    monkeypatch.setattr(timing, "_device_kernels", lambda prof: records * host.KIT_CALLS)
    monkeypatch.setattr(timing, "split_calls", lambda kernels, names: [records[1:]] * host.KIT_CALLS)

    def time_ms(fn, args, warmup, iterations, device):
        for _ in range(1 + 5 + warmup + iterations):
            fn(*args)
        return 25.0
    timer = types.SimpleNamespace(time_ms=time_ms)
    workload = types.SimpleNamespace(uuid="w", axes={"total_seq_len": 6})
    row = host.host_cost("definition", lambda *a: None, workload, None, timer, 1, 5)
    assert row["launches"] == 100 and row["span_ms"] == {"kit": pytest.approx(0.1), "evaluator": 25.0}
    assert row["host_ms"] == pytest.approx({"untraced": 10.0, "kit": 11.0, "evaluator": 20.0, "evaluator_min": 20.0,
                                            "evaluator_max": 50.0, "evaluator_untraced": 10.0})
    assert row["extra_us_per_launch"] == pytest.approx({"kit": 10.0, "evaluator": 100.0})
    assert "T=6" in host.format_rows([row], lambda axes: f"T={axes['total_seq_len']}")


def test_each_definition_is_run_compared_and_kept(tmp_path, monkeypatch, capsys):
    """The steps' command lines and what lands in --out (the steps stood in: they write what
    run_local and compare_fib_cli would)."""
    monkeypatch.setattr(check, "check_timer", lambda: {"ok": True, "description": "main's", "gpu": "H200",
                                                       "versions": {}, "small_call_us": {"kit": 5.0}, "mixing": "ok"})
    commands = []

    def run(self, name, command, echo=False):
        commands.append(command[1:])
        if name.startswith("run_local"):
            folder = check.Path(command[command.index("--out") + 1])
            folder.mkdir(parents=True)
            for file in ("results.json", "report.txt"):
                (folder / file).write_text("{}")
        elif name.startswith("compare"):
            _comparison(check.Path(command[command.index("--work") + 1]) / "comparison.json", [1.0] * 8)
        return 0
    monkeypatch.setattr(check.Steps, "run", run)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(check.tempfile, "tempdir", str(tmp_path))  # the work folder, kept
    out = tmp_path / "out"
    assert check.main(["--definition", "prefill", "--sizes", "6,262", "--host-cost", "prefill:6", "--out",
                       str(out)]) == 0
    host_cost, run_local, compare = commands
    assert host_cost[0].endswith("reference_host_cost.py") and host_cost[1:] == [
        "--definition", "prefill", "--sizes", "6", "--out", str(out / "host_cost.json")]
    assert run_local[0].endswith("run_local.py") and run_local[1:9] == [
        "--definition", "prefill", "-n", "1", "--seq-lens", "6,262", "--reference", "measure"]
    assert run_local[9:11] == ["--reference-cache", str(out / "reference-times.json")]
    assert compare[0].endswith("compare_fib_cli.py") and compare[2:4] == ["-k", "8"]
    assert compare[compare.index("--cli") + 1].endswith("bin/flashinfer-bench")
    assert sorted(p.name for p in (out / "prefill").iterdir()) == ["comparison.json", "report.txt", "results.json"]
    assert capsys.readouterr().out.splitlines()[-1] == "PASS: issue 27's check (prefill)"

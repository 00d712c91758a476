"""run_local's estimate before a GPU run and its progress bars' labels (gdn_bench.run_estimate,
gdn_bench.runner), and the launch counts they rest on, counted on CPU."""

import importlib.util

import pytest

from gdn_bench.definitions import resolve
from gdn_bench.paths import project_root
from gdn_bench.run_estimate import LOOP_HARNESS, estimate_line, loop_calls, loop_harness, loop_seconds
from gdn_bench.runner import RunSettings, harness_label, harness_passes, kernel_label
from helpers import counted_launches, mtp_inputs

def test_mtp_pt_reference_launches_as_declared():
    path = project_root() / "baselines/mtp/pt_reference/main.py"
    spec = importlib.util.spec_from_file_location("mtp_pt_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    declared = resolve("mtp").algos_by_name["pt-reference"].launches({"batch_size": 2, "seq_len": 3})
    assert counted_launches(module.run, mtp_inputs(2, 3, 5)) == pytest.approx(declared, rel=0.05)


def test_estimate_names_the_loop_and_its_time_on_the_mtp_mix():
    spec = resolve("mtp")
    workloads = spec.planned_workloads()
    harness = loop_harness({"warmup": None, "iterations": None, "trials": None})
    seconds = loop_seconds(spec.algos, workloads, harness)
    assert list(seconds) == ["pt-reference"]
    assert 30 < seconds["pt-reference"] < 180  # minutes at the contest's 10/50/3
    line = estimate_line(spec.algos, workloads, harness)
    assert "pt-reference" in line and "1/5/1" in line
    contest = {"warmup": 10, "iterations": 50, "trials": 3}
    assert loop_seconds(spec.algos, workloads, contest)["pt-reference"] > 10 * 60
    assert "no Python-loop algorithm" in estimate_line([spec.algos_by_name["triton-mtp"]], workloads, harness)


def test_loop_algorithms_get_their_own_pass_and_counts():
    spec = resolve("mtp")
    settings = RunSettings(algos=["triton-mtp", "pt-reference", "fi-baseline"], definition="mtp")
    passes = harness_passes(settings, [spec.algos_by_name[n] for n in settings.algos])
    assert passes == [(["triton-mtp", "fi-baseline"], {"warmup": 10, "iterations": 50, "trials": 3}),
                      (["pt-reference"], {"warmup": 1, "iterations": 5, "trials": 1})]
    given = RunSettings(algos=["pt-reference"], definition="mtp", iterations=7)
    assert harness_passes(given, [spec.algos_by_name["pt-reference"]]) == [
        (["pt-reference"], {"warmup": LOOP_HARNESS.warmup, "iterations": 7, "trials": LOOP_HARNESS.trials})]
    assert loop_calls({"warmup": 1, "iterations": 5, "trials": 1}) == 13


def test_progress_bars_name_the_algorithm():
    assert harness_label(["pt-reference"], {"warmup": 1, "iterations": 5, "trials": 1}, True) == \
        "flashinfer-bench: pt-reference (1/5/1)"
    assert harness_label(["triton-mtp", "fi-baseline"], {"warmup": 10, "iterations": 50, "trials": 3}, False) == \
        "flashinfer-bench: triton-mtp, fi-baseline"
    assert kernel_label("pt-reference") == "kernel time (CUPTI): pt-reference"

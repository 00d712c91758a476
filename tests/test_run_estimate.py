"""run_local's estimate before a GPU run and its progress bars' labels (gdn_bench.run_estimate,
gdn_bench.runner), the launch counts they rest on, counted on CPU, and the calibration: the
estimate of the run measured on an H200 (docs/harness.md, "How long a GPU run takes")."""

import importlib.util

import pytest

from gdn_bench.checking import workload_inputs
from gdn_bench.dataset import load_trace_set
from gdn_bench.definitions import DEFINITIONS, resolve
from gdn_bench.paths import EMBEDDED_PATH, project_root
from gdn_bench.run_estimate import (BENCH_CASE_SECONDS, LAUNCH_SECONDS, LOOP_HARNESS, benchmark_calls, estimate_line,
                                    loop_harness, reference_calls, tiers)
from gdn_bench.runner import RunSettings, harness_label, harness_passes, kernel_label
from helpers import counted_launches, mtp_inputs

CONTEST = {"warmup": 10, "iterations": 50, "trials": 3}


def test_mtp_pt_reference_launches_as_declared():
    path = project_root() / "baselines/mtp/pt_reference/main.py"
    spec = importlib.util.spec_from_file_location("mtp_pt_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    declared = resolve("mtp").algos_by_name["pt-reference"].launches({"batch_size": 2, "seq_len": 3})
    assert counted_launches(module.run, mtp_inputs(2, 3, 5)) == pytest.approx(declared, rel=0.05)


@pytest.mark.parametrize("short", [s for s, spec in DEFINITIONS.items() if spec.reference_launches])
def test_definition_reference_launches_as_declared(short):
    """The launches a call of the definition's own reference makes, on the embedded workloads."""
    spec = DEFINITIONS[short]
    trace_set = load_trace_set(EMBEDDED_PATH, spec.name)
    definition = trace_set.definitions[spec.name]
    namespace = {}
    exec(definition.reference, namespace)
    for trace in trace_set.workloads[spec.name][:3]:
        w = trace.workload
        counted = counted_launches(namespace["run"], workload_inputs(definition, w, trace_set.root, "cpu", 0))
        assert counted == pytest.approx(spec.reference_launches(dict(w.axes)), rel=0.1), dict(w.axes)


def _mtp_mix():
    spec = resolve("mtp")
    return spec, spec.planned_workloads()


def test_the_calibration_gives_back_the_measured_tiers():
    """On mtp's mix: the pt-reference Benchmark pass at 1/5/1 took 53 s and the definition
    reference 10 to 12 s a workload at 10/50/3 (H200)."""
    spec, workloads = _mtp_mix()
    launches = sum(spec.algos_by_name["pt-reference"].launches(dict(w.axes)) for w in workloads)
    old_pass = benchmark_calls({"warmup": 1, "iterations": 5, "trials": 1}) * launches * LAUNCH_SECONDS
    assert old_pass + BENCH_CASE_SECONDS * len(workloads) == pytest.approx(53, rel=0.05)
    reference = next(t for t in tiers(spec, [], workloads, CONTEST, CONTEST, workloads)
                     if t.name == "definition reference")
    assert reference.seconds / len(workloads) == pytest.approx(11, rel=0.1)
    assert reference_calls(64, CONTEST) == (198, 150)
    assert reference_calls(2000, CONTEST) == (66, 50)  # a call of 10 ms or more: one trial


def test_the_estimate_of_the_measured_run_names_every_tier():
    """`--definition mtp --algo all` on a fresh machine: every reference time uncached."""
    spec, workloads = _mtp_mix()
    loop = loop_harness({"warmup": None, "iterations": None, "trials": None})
    found = tiers(spec, spec.algos, workloads, CONTEST, loop, workloads)
    seconds = {t.name: t.seconds for t in found}
    assert [t.name for t in found] == ["definition reference", "pt-reference", "Benchmark of the kernels"]
    assert 4 * 60 < seconds["definition reference"] < 6 * 60
    assert 60 < seconds["pt-reference"] < 120  # was about 3.5 min: 53 s, 29 s of margins, 1 min 51 s of kernel time
    assert 6 * 60 < sum(seconds.values()) < 8 * 60
    line = estimate_line(found)
    assert line.startswith("estimate: about ") and "left out" not in line
    for words in ("definition reference 5.", "28 uncached workloads, 198 calls each at 10/50/3", "pt-reference",
                  "at 0/3/1", "4 algorithms x 28 workloads"):
        assert words in line
    cached = tiers(spec, spec.algos, workloads, CONTEST, loop, [])
    assert "definition reference" not in estimate_line(cached) and sum(t.seconds for t in cached) < 3 * 60
    kernels = tiers(spec, [spec.algos_by_name["triton-mtp"]], workloads, CONTEST, loop, [])
    assert [t.name for t in kernels] == ["Benchmark of the kernels"]


def test_loop_algorithms_get_their_own_pass_and_counts():
    spec = resolve("mtp")
    settings = RunSettings(algos=["triton-mtp", "pt-reference", "fi-baseline"], definition="mtp")
    passes = harness_passes(settings, [spec.algos_by_name[n] for n in settings.algos])
    assert passes == [(["triton-mtp", "fi-baseline"], CONTEST),
                      (["pt-reference"], {"warmup": 0, "iterations": 3, "trials": 1})]
    given = RunSettings(algos=["pt-reference"], definition="mtp", iterations=7)
    assert harness_passes(given, [spec.algos_by_name["pt-reference"]]) == [
        (["pt-reference"], {"warmup": LOOP_HARNESS.warmup, "iterations": 7, "trials": LOOP_HARNESS.trials})]
    assert benchmark_calls({"warmup": 0, "iterations": 3, "trials": 1}) == 4


def test_progress_bars_name_the_algorithm():
    assert harness_label(["pt-reference"], {"warmup": 0, "iterations": 3, "trials": 1}, True) == \
        "flashinfer-bench: pt-reference (0/3/1)"
    assert harness_label(["triton-mtp", "fi-baseline"], CONTEST, False) == \
        "flashinfer-bench: triton-mtp, fi-baseline"
    assert kernel_label("pt-reference") == "kernel time (CUPTI): pt-reference"

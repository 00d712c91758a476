"""scripts/compare_fib_cli.py and gdn_bench.fib_compare on CPU (flashinfer-bench's CLI itself
needs a GPU): which workloads it takes, the trace set it writes for the CLI (loadable, blobs
reachable, the submission packed), the command line, the side-by-side table from traces as
the CLI saves them, and the script's dry run and errors."""

import json

import pytest
from flashinfer_bench import Trace
from flashinfer_bench.data import Correctness, Environment, Evaluation, EvaluationStatus, Performance

from gdn_bench.algos import load_module
from gdn_bench.checking import workload_inputs
from gdn_bench.dataset import load_trace_set
from gdn_bench.definitions import DEFINITIONS
from gdn_bench.fib_compare import (agreement, cli_command, compare, format_agreement, format_comparison,
                                   pick_workloads, write_cli_trace_set)
from gdn_bench.paths import EMBEDDED_PATH
from gdn_bench.results import Results, Row
from helpers import ROOT

compare_fib_cli = load_module(ROOT / "scripts" / "compare_fib_cli.py", "compare_fib_cli_script")
SPEC = DEFINITIONS["decode"]


@pytest.fixture(scope="module")
def run():
    """A GPU run of the decode submission as results.json would hold it (times made up: the
    reference 100 µs per batch row, ours 2 + B/4 µs), on the embedded trace set."""
    workloads = [t.workload for t in load_trace_set().workloads[SPEC.name]]
    rows = sorted((Row(SPEC.submission, w.uuid, dict(w.axes), "PASSED", kernel_us=2 + w.axes["batch_size"] / 4)
                   for w in workloads), key=Row.order)
    rows[0].status, rows[0].kernel_us = "INCORRECT_NUMERICAL", None
    reference = {w.uuid: {"us": 100.0 * w.axes["batch_size"], "source": "measured", "key": "k"} for w in workloads}
    meta = {"mode": "gpu", "gpu": "NVIDIA H200", "definition": SPEC.name, "submission": SPEC.submission,
            "dataset": str(EMBEDDED_PATH), "harness": {"warmup": 10, "iterations": 50, "trials": 3}}
    return Results(meta=meta, rows=rows, reference=reference)


def test_the_workloads_taken_spread_over_the_reference_times(run):
    picked = pick_workloads(run, 3)
    sizes = {r.workload: r.axes["batch_size"] for r in run.rows}
    assert len(picked) == 3 and [sizes[w] for w in picked] == sorted(sizes[w] for w in picked)
    assert sizes[picked[0]] == 1 and sizes[picked[-1]] == 64  # here the reference's time grows with the batch
    slowest = next(r.workload for r in run.rows if r.status == "PASSED" and sizes[r.workload] == 1)
    reordered = Results(meta=run.meta, rows=run.rows, reference={**run.reference, slowest: {"us": 1e6}})
    assert pick_workloads(reordered, 3)[-1] == slowest  # made the slowest of all, at batch size 1
    assert run.rows[0].workload not in pick_workloads(run, 100)  # failed: no speedup to compare
    assert len(pick_workloads(run, 100)) == len(run.rows) - 1 and len(pick_workloads(run, 1)) == 1


def test_the_trace_set_written_for_the_cli(run, tmp_path):
    source = load_trace_set()
    blobbed = next(t.workload.uuid for t in source.workloads[SPEC.name]
                   if any(i.type == "safetensors" for i in t.workload.inputs.values()))
    uuids = [run.rows[1].workload, blobbed]
    solution = SPEC.algos_by_name[SPEC.submission].solution()
    written = write_cli_trace_set(tmp_path / "cli", source, SPEC.name, uuids, solution)
    assert list(written.definitions) == [SPEC.name]
    assert written.definitions[SPEC.name].reference == source.definitions[SPEC.name].reference
    assert [t.workload.uuid for t in written.workloads[SPEC.name]] == uuids
    assert [s.name for s in written.solutions[SPEC.name]] == [solution.name]
    workload = written.workloads[SPEC.name][1].workload
    assert workload_inputs(written.definitions[SPEC.name], workload, written.root, "cpu", 0)  # blobs reachable
    with pytest.raises(FileExistsError):
        write_cli_trace_set(tmp_path / "cli", source, SPEC.name, uuids, solution)


def test_decode_runs_with_flashinfer_benchs_default_counts():
    """Decode's contest counts, which the CLI gets as flags, are flashinfer-bench's defaults as
    numbers: main's BenchmarkConfig leaves them None (to inherit ResolvedEvalConfig's)."""
    from flashinfer_bench import BenchmarkConfig

    config = BenchmarkConfig()
    defaults = (config.warmup_runs, config.iterations, config.num_trials)
    if None in defaults:  # flashinfer-bench main
        from flashinfer_bench.bench.config import ResolvedEvalConfig

        resolved = ResolvedEvalConfig()
        defaults = (resolved.warmup_runs, resolved.iterations, resolved.num_trials)
    assert (SPEC.harness.warmup, SPEC.harness.iterations, SPEC.harness.trials) == defaults


def test_the_cli_command(tmp_path):
    harness = {"warmup": 1, "iterations": 5, "trials": 3}
    command = cli_command("flashinfer-bench", tmp_path, "gdn_x", "sol", harness, isolated=True)
    assert command == ["flashinfer-bench", "run", "--local", str(tmp_path), "--definitions", "gdn_x", "--solutions",
                       "sol", "--warmup-runs", "1", "--iterations", "5", "--num-trials", "3", "--save-results",
                       "--use-isolated-runner"]
    assert "--use-isolated-runner" not in cli_command("fib", tmp_path, "gdn_x", "sol", harness, isolated=False)


def _trace(workload, solution, status, latency_ms=None, reference_ms=None):
    passed = status == EvaluationStatus.PASSED
    performance = Performance(latency_ms=latency_ms, reference_latency_ms=reference_ms,
                              speedup_factor=reference_ms / latency_ms) if passed else None
    evaluation = Evaluation(status=status, environment=Environment(hardware="NVIDIA H200"), timestamp="now",
                            correctness=Correctness() if passed else None, performance=performance)
    return Trace(definition=SPEC.name, workload=workload, solution=solution, evaluation=evaluation)


def test_both_speedups_side_by_side(run):
    by_uuid = {t.workload.uuid: t.workload for t in load_trace_set().workloads[SPEC.name]}
    one, two = run.rows[1], run.rows[-1]  # B = 1 (2.25 µs, reference 100 µs) and B = 64 (18 µs, 6400 µs)
    traces = [_trace(by_uuid[one.workload], "sol", EvaluationStatus.PASSED, latency_ms=0.009, reference_ms=0.1),
              _trace(by_uuid[two.workload], "sol", EvaluationStatus.RUNTIME_ERROR),
              _trace(by_uuid[one.workload], "other", EvaluationStatus.PASSED, latency_ms=1.0, reference_ms=1.0)]
    first, second = compare(run, traces, "sol", SPEC)
    assert first["label"] == "B=1" and first["run_local"] == {"reference_us": 100.0, "kernel_us": 2.25,
                                                             "speedup": pytest.approx(100 / 2.25)}
    assert first["flashinfer_bench"] == {"status": "PASSED", "reference_us": pytest.approx(100.0),
                                         "latency_us": pytest.approx(9.0), "speedup": pytest.approx(100 / 9)}
    assert first["cli_over_run_local"] == pytest.approx(2.25 / 9)  # the same reference: ours timed 4x longer
    assert (first["reference_cli_over_run_local"], first["ours_cli_over_run_local"]) == \
        (pytest.approx(1.0), pytest.approx(9 / 2.25))
    assert second["flashinfer_bench"]["speedup"] is None and second["cli_over_run_local"] is None
    assert second["reference_cli_over_run_local"] is None and second["ours_cli_over_run_local"] is None
    table = format_comparison([first, second]).splitlines()
    assert "CLI/run_local: ref" in table[0] and table[2].split() == [
        "B=1", "100.0", "2.25", "44.4", "100.0", "9.00", "11.1", "PASSED", "1.000", "4.000", "0.250"]
    assert table[3].split()[-4:] == ["RUNTIME_", "-", "-", "-"]


def test_how_many_reference_times_agree():
    entries = [{"reference_cli_over_run_local": r} for r in (1.0, 1.09, 0.91, 1.2, 0.85, None)]
    summary = agreement(entries)
    assert summary == {"tolerance": 0.10, "compared": 5, "within": 3, "worst": 1.2}
    assert format_agreement(summary) == "reference time, CLI / run_local: 3 of 5 workloads within 10% (farthest: 1.200)"
    assert agreement([])["worst"] is None and "farthest" not in format_agreement(agreement([]))


def _write(run, path):
    path.write_text(json.dumps(run.to_json()))
    return path


def test_dry_run_writes_the_trace_set_and_prints_the_command(run, tmp_path, capsys):
    results = _write(run, tmp_path / "results.json")
    assert compare_fib_cli.main([str(results), "-k", "2", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"trace set for the CLI: {tmp_path / 'fib_cli'} (2 workloads of {SPEC.name}, solution " \
                     f"{SPEC.algos_by_name[SPEC.submission].solution().name})"
    assert out[1].split()[1:4] == ["run", "--local", str(tmp_path / "fib_cli")] and "--use-isolated-runner" in out[1]
    assert (tmp_path / "fib_cli" / "solutions").is_dir()
    assert compare_fib_cli.main([str(results), "--dry-run", "--cli", "/opt/fib-main", "--work",
                                 str(tmp_path / "other")]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["/opt/fib-main", "run"]  # the executable named


@pytest.mark.parametrize("change, says", [
    ("cpu", "is a CPU run's (a correctness pass: nothing timed); this compares timings: give the results.json of a "
            "run_local run on a GPU"),
    ("no-reference", "has no reference times (a GPU run with --reference skip); run run_local on the GPU without it"),
    ("work", "exists; name a new folder"),
    ("none-passed", "the submission passed no workload with both times")])
def test_what_it_cannot_compare_is_one_line_exit_2(run, change, says, tmp_path, capsys):
    broken = Results.from_json(json.loads(json.dumps(run.to_json())))  # a copy
    if change == "cpu":
        broken.meta["mode"] = "cpu-correctness"
        (tmp_path / "fib_cli").mkdir()  # the CPU run's is what it says, not the folder
    elif change == "no-reference":
        broken.reference.clear()
    elif change == "work":
        (tmp_path / "fib_cli").mkdir()
    else:
        for row in broken.rows:
            row.status = "RUNTIME_ERROR"
    with pytest.raises(SystemExit) as e:
        compare_fib_cli.main([str(_write(broken, tmp_path / "results.json")), "--dry-run"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 2 and err.startswith("compare_fib_cli: error: argument ") and says in err

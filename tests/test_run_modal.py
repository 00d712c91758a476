"""scripts/run_modal.py offline: the app builds without contacting Modal, the job body runs
in-process (.local()) as run_local's runner does, jobs cover the selection exactly and merge
back into one report, and missing credentials stop the run with one clear message.
Tests of gdn_bench alone (split, merge) run without modal; the others skip without it."""

import importlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from gdn_bench.definitions import DEFINITIONS
from gdn_bench.device import prepare_triton
from gdn_bench.results import Results, Row, merge, summarize
from gdn_bench.runner import RunSettings, run, select_workloads, split
from helpers import ROOT

SCRIPTS = ROOT / "scripts"
# Small on CPU (Triton's interpreter): one workload at B = 1 (the whole CPU pass is test_run_local's).
SMALL = RunSettings(algos=["fla-recurrent", "pt-reference"], sizes=[1], num_workloads=1)


@pytest.fixture(scope="module")
def run_modal():
    pytest.importorskip("modal", minversion="1.5", reason='modal is not installed: pip install -e ".[modal]"')
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    return importlib.import_module("run_modal")


@pytest.fixture(scope="module")
def direct():
    """What run_local's runner gives for SMALL, in this process."""
    return run(SMALL).to_json()


def _cases(results: dict) -> list[tuple]:
    return [(r["algo"], r["workload"], r["axes"], r["status"]) for r in results["rows"]]


def _row(algo, workload, batch=1, status="PASSED"):
    return Row(algo, workload, {"batch_size": batch}, status, kernel_us=1.0)


# --- gdn_bench: jobs and merging (no modal needed) ---------------------------------------------


@pytest.mark.parametrize("groups", [1, 3, 7, 60])
@pytest.mark.parametrize("definition", DEFINITIONS)
def test_split_covers_the_selection_once_in_size_order(definition, groups):
    spec = DEFINITIONS[definition]
    workloads = spec.planned_workloads()
    settings = RunSettings(algos=[spec.submission, "pt-reference"], definition=definition)
    selection = select_workloads(workloads, settings, cpu=False)
    jobs = split(settings, groups)
    assert [(j.algos, j.shard) for j in jobs] == [([a], (i, groups)) for a in settings.algos for i in range(groups)]
    assert [j.reference for j in jobs] == ["cached"] * groups + [None] * groups  # one job per workload times it
    slices = [select_workloads(workloads, j, cpu=False) for j in jobs[:groups]]
    assert sorted(w.uuid for s in slices for w in s) == sorted(w.uuid for w in selection)
    sizes = [[w.axes[spec.size_axis] for w in s] for s in slices if s]
    assert all(a[-1] <= b[0] for a, b in zip(sizes, sizes[1:])), "slices must be neighbouring batch sizes"
    assert max(map(len, slices)) - min(map(len, slices)) <= 1


def test_merge_disjoint_parts():
    a = Results(meta={"gpu": "B200"}, floors_us={1: 2.0}, rows=[_row("x", "w2", 4), _row("x", "w1")])
    b = Results(meta={"gpu": "other"}, floors_us={4: 3.0}, rows=[_row("y", "w1", status="INCORRECT_NUMERICAL")])
    merged = merge([a, b])
    assert merged.meta == {"gpu": "B200"}
    assert merged.floors_us == {1: 2.0, 4: 3.0}
    assert [(r.algo, r.workload) for r in merged.rows] == [("x", "w1"), ("y", "w1"), ("x", "w2")]
    assert summarize(merged, DEFINITIONS["decode"]).passed == 2


def test_merge_keeps_every_parts_reference_times():
    a = Results(rows=[_row("x", "w1")], reference={"w1": {"us": 7.0, "source": "cached", "key": "k1"}})
    b = Results(rows=[_row("x", "w2")], reference={"w2": {"us": 9.0, "source": "measured", "key": "k2"}})
    assert merge([a, b]).reference == {**a.reference, **b.reference}


def test_merge_skipped_only_where_it_ran_nowhere():
    ran = Results(rows=[_row("fla-lib", "w1")])
    skipped_here = Results(skipped={"fla-lib": "needs fla", "fi-baseline": "needs a CUDA GPU"})
    merged = merge([skipped_here, ran])
    assert merged.skipped == {"fi-baseline": "needs a CUDA GPU"}


def test_merge_rejects_a_case_reported_twice():
    with pytest.raises(ValueError, match="x on workload w1 appears in two partial results"):
        merge([Results(rows=[_row("x", "w1")]), Results(rows=[_row("x", "w1", 4)])])


def test_prepare_triton_sets_the_interpreter_only_without_gpu(monkeypatch):
    import torch

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert prepare_triton() == torch.cuda.is_available()
    assert (os.environ.get("TRITON_INTERPRET") == "1") != torch.cuda.is_available()


# --- scripts/run_modal.py ----------------------------------------------------------------------


def test_app_image_and_function_build_offline(run_modal):
    import modal

    assert isinstance(run_modal.app, modal.App) and run_modal.app.name == "gdn-contest-kit"
    assert isinstance(run_modal.image, modal.Image)
    assert isinstance(run_modal.run_job, modal.Function)
    assert run_modal.DEFAULT_GPU == "B200" and run_modal.EVAL_IMAGE == "flashinfer/flashinfer-ci-cu132:latest"
    assert isinstance(run_modal.configured_job("H100", 3, "contest-data"), modal.Function)
    assert isinstance(run_modal.modal_main, modal.app.LocalEntrypoint)


def test_image_holds_all_that_the_runner_reads(run_modal):
    """Every algorithm's sources and config.toml lie in what the image adds under REMOTE_ROOT."""
    assert run_modal.PROJECT_ROOT == ROOT
    tops = {"gdn_bench"} | {Path(a.source_dir).parts[0] for spec in DEFINITIONS.values() for a in spec.algos}
    assert tops <= set(run_modal.REMOTE_DIRS)
    assert all((ROOT / name).is_dir() for name in run_modal.REMOTE_DIRS)


def test_plan_from_run_local_flags(run_modal):
    jobs, args = run_modal.plan(["--algo", "fla-recurrent,pt-reference", "--batch-sizes", "1,64",
                                 "--gpu", "H100", "--max-containers", "3", "--out", "somewhere"])
    assert len(jobs) == 2 * DEFINITIONS["decode"].job_groups
    assert {j.dataset for j in jobs} == {None} and {tuple(j.sizes) for j in jobs} == {(1, 64)}
    assert (args.gpu, args.max_containers, args.out) == ("H100", 3, Path("somewhere").absolute())
    assert len(run_modal.plan(["--algo", "fla-recurrent", "-n", "1", "--batch-sizes", "1,4"])[0]) == 2
    jobs, args = run_modal.plan(["--algo", "fla-recurrent", "--volume", "contest", "--volume-path", "/mlsys26-contest"])
    assert {j.dataset for j in jobs} == {Path("/dataset/mlsys26-contest")} and args.volume == "contest"
    assert args.out.parent == Path("results").absolute()


def test_plan_prefill_counts_the_generated_mix_without_writing_it(run_modal, tmp_path, monkeypatch):
    monkeypatch.setenv("GDN_BENCH_CACHE", str(tmp_path))
    jobs, _ = run_modal.plan(["--definition", "prefill", "--algo", "pt-reference,fla-chunk", "--seq-lens", "8192"])
    assert len(jobs) == 2 * DEFINITIONS["prefill"].job_groups and {j.definition for j in jobs} == {"prefill"}
    assert len(run_modal.plan(["--definition", "gdn_prefill_qk4_v8_d128_k_last", "-n", "1", "--seq-lens", "6"])[0]) == 1
    assert not any(tmp_path.iterdir())


def test_plan_gives_the_cached_reference_times_to_the_jobs_that_time_it(run_modal, tmp_path):
    from gdn_bench.reference_times import ReferenceTimes

    cache = tmp_path / "times.json"
    ReferenceTimes.load(cache).add("k", {"us": 5.0})
    jobs, args = run_modal.plan(["--algo", "fla-recurrent,pt-reference", "--reference-cache", str(cache)])
    groups = DEFINITIONS["decode"].job_groups
    assert [j.reference_known for j in jobs] == [{"k": {"us": 5.0}}] * groups + [None] * groups
    assert args.reference_cache == cache


def test_plan_both_definitions(run_modal, tmp_path, monkeypatch):
    monkeypatch.setenv("GDN_BENCH_CACHE", str(tmp_path))
    jobs, args = run_modal.plan(["--definition", "both", "-n", "1", "--batch-sizes", "1", "--seq-lens", "6",
                                 "--out", str(tmp_path / "out")])
    assert [(j.definition, j.algos, j.out) for j in jobs] == [
        ("decode", ["fla-recurrent"], tmp_path / "out" / "decode"),
        ("prefill", ["triton-chunked"], tmp_path / "out" / "prefill")]
    assert args.reference_cache == tmp_path / "reference-times.json"


@pytest.mark.parametrize("argv", [["--algo", "nope"], ["--workload-id", "zzz"], ["--volume-path", "x"],
                                  ["--dataset", "somewhere"], ["-n", "0"], ["--definition", "nope"],
                                  ["--definition", "prefill", "--seq-lens", "5,7777"],
                                  ["--definition", "prefill", "--batch-sizes", "1"], ["--gpu", "Z999"]], ids=" ".join)
def test_plan_rejects_bad_flags(run_modal, argv, capsys):
    with pytest.raises(SystemExit) as e:
        run_modal.plan(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("run_modal: error:") and err.count("\n") == 1


def test_plan_rejects_a_broken_reference_file(run_modal, tmp_path, capsys):
    (tmp_path / "times.json").write_text("[]")
    with pytest.raises(SystemExit) as e:
        run_modal.plan(["--reference-cache", str(tmp_path / "times.json")])
    assert e.value.code == 2 and f"reference times file {tmp_path / 'times.json'}: expected" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore:The run_job function is executing locally")
def test_job_body_in_process_matches_the_runner(run_modal, direct):
    local = run_modal.run_job.local(SMALL)
    assert local.keys() == direct.keys()
    assert local["meta"].keys() == direct["meta"].keys() and local["meta"]["mode"] == direct["meta"]["mode"]
    assert _cases(local) == _cases(direct) and local["skipped"] == direct["skipped"]
    ours, theirs = (summarize(Results.from_json(r), DEFINITIONS["decode"]) for r in (local, direct))
    assert ours == theirs  # the same seed: the same inputs, so the same errors and margins


@pytest.mark.filterwarnings("ignore:The run_job function is executing locally")
@pytest.mark.filterwarnings("ignore:The prepare_dataset function is executing locally")
def test_launch_writes_the_report_run_local_writes(run_modal, monkeypatch, tmp_path):
    """A command line's jobs, run in-process instead of on Modal, merge into run_local's report."""
    from gdn_bench import cli

    flags = ["--algo", "fla-recurrent,pt-reference", "--batch-sizes", "1,2", "-n", "1"]  # a random and a blob workload
    in_process = SimpleNamespace(map=lambda jobs: [run_modal.run_job.local(job) for job in jobs])
    monkeypatch.setattr(run_modal, "configured_job", lambda *options: in_process)
    monkeypatch.setattr(run_modal, "prepare_dataset", SimpleNamespace(remote=run_modal.prepare_dataset.local))
    assert run_modal.launch(*run_modal.plan([*flags, "--out", str(tmp_path / "modal")])) == 0
    assert cli.main([*flags, "--out", str(tmp_path / "local")], checkout=ROOT) == 0
    ours, theirs = (json.loads((tmp_path / name / "results.json").read_text()) for name in ("modal", "local"))
    assert _cases(ours) == _cases(theirs) and ours["summary"] == theirs["summary"]
    assert (tmp_path / "modal" / "margins.png").is_file()
    if theirs["meta"]["mode"] == "cpu-correctness":  # on a GPU the tables hold this run's timings
        # The same seed draws the same inputs: only the date (to the second) may differ.
        table = [re.sub(r"date: \S+", "date: #", (tmp_path / name / "report.txt").read_text())
                 for name in ("modal", "local")]
        assert table[0] == table[1]


@pytest.mark.filterwarnings("ignore:The run_job function is executing locally")
@pytest.mark.filterwarnings("ignore:The prepare_dataset function is executing locally")
def test_launch_keeps_what_the_jobs_measured_in_the_local_file(run_modal, monkeypatch, tmp_path):
    """The jobs that time the reference return what they measured (stood in for here: CPU jobs
    time nothing); launch writes it into the local file, beside what it held."""
    from gdn_bench.reference_times import ReferenceTimes

    def job_measuring(job):
        part = run_modal.run_job.local(job)
        if job.reference:
            part["reference"] = {row["workload"]: {"us": 123.0, "gpu": "B200", "key": f"new-{row['workload']}",
                                                   "source": "measured"} for row in part["rows"]}
        return part

    cache = tmp_path / "times.json"
    ReferenceTimes.load(cache).add("old", {"us": 5.0})
    monkeypatch.setattr(run_modal, "configured_job", lambda *options: SimpleNamespace(map=lambda jobs: [
        job_measuring(job) for job in jobs]))
    monkeypatch.setattr(run_modal, "prepare_dataset", SimpleNamespace(remote=run_modal.prepare_dataset.local))
    flags = ["--algo", "pt-reference", "--batch-sizes", "1", "-n", "1", "--reference-cache", str(cache)]
    assert run_modal.launch(*run_modal.plan([*flags, "--out", str(tmp_path / "out")])) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    [workload] = {row["workload"] for row in results["rows"]}
    assert ReferenceTimes.load(cache).entries == {"old": {"us": 5.0}, f"new-{workload}": {"us": 123.0, "gpu": "B200"}}
    assert results["meta"]["reference"] == {"mode": "cached", "file": str(cache)}


def test_has_credentials_from_environment(run_modal, monkeypatch):
    monkeypatch.setenv("MODAL_TOKEN_ID", "ak-test")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "as-test")
    assert run_modal.has_credentials()


def _offline_env(tmp_path, **modal_settings) -> dict:
    """This environment without Modal's settings or ~/.modal.toml, plus `modal_settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODAL_")}
    env.update(HOME=str(tmp_path), PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    return {**env, **modal_settings}


def _fake_credentials(tmp_path, server: str) -> dict:
    return _offline_env(tmp_path, MODAL_TOKEN_ID="ak-test", MODAL_TOKEN_SECRET="as-test", MODAL_SERVER_URL=server)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when this returns: connections are refused


@pytest.mark.parametrize("command", [["scripts/run_modal.py"], ["-m", "modal", "run", "scripts/run_modal.py"]],
                         ids=["python", "modal-run"])
def test_no_credentials_one_clear_message(run_modal, command, tmp_path):
    result = subprocess.run([sys.executable, *command, "--algo", "fla-recurrent", "-n", "1"],
                            cwd=ROOT, env=_offline_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip() == run_modal.NO_CREDENTIALS
    assert "modal setup" in result.stderr and "MODAL_TOKEN_ID" in result.stderr


@pytest.mark.parametrize("command", [["scripts/run_modal.py"], ["-m", "modal", "run", "scripts/run_modal.py"]],
                         ids=["python", "modal-run"])
def test_flags_are_checked_before_the_credentials(run_modal, command, tmp_path):
    """Issue 35 item 6: a bad --gpu is named, not the missing credentials."""
    result = subprocess.run([sys.executable, *command, "--gpu", "Z999"], cwd=ROOT, env=_offline_env(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr == (
        f"run_modal: error: argument --gpu: expected one of Modal's GPU types ({', '.join(run_modal.MODAL_GPUS)}), "
        "got 'Z999'\n")


def test_gpu_types_in_any_case(run_modal):
    assert run_modal.gpu_type("h100!") == "H100!" and run_modal.build_parser().parse_args([]).gpu == "B200"


def test_unreachable_server_one_line_within_seconds(run_modal, tmp_path):
    """Table row "run_modal.py with credentials but an unreachable server": refused connections
    (Modal's client alone retries them for about a minute) end after CONNECT_TIMEOUT_S, in one line."""
    server = f"http://127.0.0.1:{_closed_port()}"
    start = time.monotonic()
    result = subprocess.run([sys.executable, "scripts/run_modal.py", "--algo", "fla-recurrent", "-n", "1"], cwd=ROOT,
                            env=_fake_credentials(tmp_path, server), capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - start
    assert result.returncode == 2 and result.stdout == "" and elapsed < run_modal.CONNECT_TIMEOUT_S + 30
    assert result.stderr == (f"run_modal: error: no answer from Modal's server {server} (from $MODAL_SERVER_URL) "
                             f"within {run_modal.CONNECT_TIMEOUT_S:g} s; check the network connection (and "
                             "MODAL_SERVER_URL, if set), then try again\n")


def test_a_server_that_never_answers_is_bounded_too(run_modal, tmp_path):
    """A server that accepts the connection and then says nothing: the same line, after the
    timeout given (1 s here)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        server = f"http://127.0.0.1:{silent.getsockname()[1]}"
        code = f"import sys; sys.path.insert(0, {str(SCRIPTS)!r}); import run_modal; run_modal.require_server(1)"
        start = time.monotonic()
        result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_fake_credentials(tmp_path, server),
                                capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and time.monotonic() - start < 60
    assert result.stderr.startswith(f"run_modal: error: no answer from Modal's server {server} (from "
                                    "$MODAL_SERVER_URL) within 1 s;") and result.stderr.count("\n") == 1


def test_modal_run_help_shows_the_flags_without_credentials(run_modal, tmp_path):
    """Table row `modal run scripts/run_modal.py --help`: this script's flags and algorithms."""
    result = subprocess.run([sys.executable, "-m", "modal", "run", "scripts/run_modal.py", "--help"], cwd=ROOT,
                            env=_offline_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert result.stdout == run_modal.build_parser().format_help()
    assert "--max-containers" in result.stdout and "triton-chunked" in result.stdout


def test_main_checks_the_server_before_the_app_starts(run_modal, monkeypatch, capsys):
    monkeypatch.setattr(run_modal, "require_credentials", lambda: None)
    monkeypatch.setattr(run_modal, "require_server", lambda: (_ for _ in ()).throw(SystemExit(2)))
    monkeypatch.setattr(run_modal.app, "run", lambda: pytest.fail("the app started"))
    with pytest.raises(SystemExit) as e:
        run_modal.main(["--algo", "fla-recurrent", "-n", "1"])
    assert e.value.code == 2


@pytest.mark.filterwarnings("ignore:The run_job function is executing locally")
def test_ctrl_c_keeps_the_jobs_that_finished(run_modal, monkeypatch, tmp_path, capsys):
    """One job finishes (in-process), then Ctrl-C: its rows are written, marked partial; 130."""
    def first_then_ctrl_c(jobs):
        yield run_modal.run_job.local(jobs[0])
        raise KeyboardInterrupt

    monkeypatch.setattr(run_modal, "configured_job", lambda *options: SimpleNamespace(map=first_then_ctrl_c))
    todo, args = run_modal.plan(["--algo", "pt-reference", "--batch-sizes", "1", "-n", "2", "--volume", "v",
                                 "--out", str(tmp_path)])
    assert len(todo) == 2
    todo = [replace(job, dataset=None) for job in todo]  # the embedded trace set, not the Volume's
    assert run_modal.launch(todo, args) == 130
    said = "interrupted by Ctrl-C: 1 of 2 jobs finished"
    assert capsys.readouterr().err.endswith(f"run_modal: {said}; the report holds those (marked partial)\n")
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["meta"]["partial"] == said and len(data["rows"]) == 1

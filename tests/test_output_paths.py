"""Every script's output paths are checked before any work (gdn_bench.arguments): a folder
that cannot be made, a file where a folder is needed, a trailing slash meaning a folder."""

import argparse
import importlib.util
from pathlib import Path

import pytest

from gdn_bench import cli
from gdn_bench.algos import load_module
from gdn_bench.arguments import output_file, output_folder
from helpers import ROOT

SCRIPTS = ROOT / "scripts"
NOT_CREATABLE = Path("/proc/gdn-kit-test")  # /proc takes no new entries, whoever asks (root included)
# (script, its output flag): all of them
OUTPUTS = [("run_local", "--out"), ("run_modal", "--out"), ("bench_kernel", "--out"), ("bench_prefill", "--out"),
           ("tune_launch", "--out"), ("make_dataset", "--out"), ("pack_solution", "-o"), ("bench_serving", "--out"),
           ("host_ab", "--out")]


def _main(script: str):
    if script == "run_local":
        return lambda argv: cli.main(argv, checkout=ROOT)
    if script == "run_modal":
        if importlib.util.find_spec("modal") is None:
            pytest.skip('modal is not installed: pip install -e ".[modal]"')
        return load_module(SCRIPTS / "run_modal.py", "run_modal_output_paths").plan
    return load_module(SCRIPTS / f"{script}.py", f"{script}_output_paths").main


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc here")
@pytest.mark.parametrize("script, flag", OUTPUTS, ids=[s for s, _ in OUTPUTS])
def test_an_output_that_cannot_be_created_is_refused_before_any_work(script, flag, capsys):
    with pytest.raises(SystemExit) as e:
        _main(script)([flag, str(NOT_CREATABLE)])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 2 and f"error: argument {flag}" in last
    assert last.endswith("cannot write into /proc (No such file or directory)")


def test_output_folder_is_absolute_and_tried(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert output_folder("a/b") == tmp_path / "a" / "b" and not (tmp_path / "a").exists()
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing behind
    (tmp_path / "file").write_text("x")
    with pytest.raises(argparse.ArgumentTypeError, match="exists and is not a folder"):
        output_folder("file/")


def test_output_file_takes_a_folder_by_its_slash(tmp_path):
    to_file = output_file("solution.json")
    assert to_file(f"{tmp_path}/new/") == tmp_path / "new" / "solution.json"
    assert to_file(tmp_path) == tmp_path / "solution.json"  # an existing folder
    assert to_file(tmp_path / "s.json") == tmp_path / "s.json"
    (tmp_path / "taken").write_text("x")
    with pytest.raises(argparse.ArgumentTypeError, match="taken is a file, not a folder"):
        to_file(f"{tmp_path}/taken/")


def test_a_cache_folder_that_cannot_be_written_names_where_it_came_from(monkeypatch):
    """The generated prefill trace set's folder (GPU runs) is checked before anything is generated."""
    from gdn_bench.trace_cache import materialized

    monkeypatch.setenv("GDN_BENCH_CACHE", str(NOT_CREATABLE))
    with pytest.raises(ValueError, match=r"^cannot write the generated trace set mix into the cache folder "
                                         rf"{NOT_CREATABLE} \(\$GDN_BENCH_CACHE\): No such file or directory$"):
        materialized("mix", {"version": 1}, lambda root: pytest.fail("generated"))

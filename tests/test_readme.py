"""Facts the README and its pages state that code can check: CI runs the README's CPU install
line literally, the harness page's CPU examples (docs/harness.md) match the embedded trace set,
and the Modal page's run_modal flag list (docs/modal.md) is complete."""

import importlib.util
import os
import re
import subprocess

import pytest
import torch

from gdn_bench import cli
from gdn_bench.dataset import load_trace_set
from gdn_bench.definitions import DEFINITIONS
from gdn_bench.runner import RunSettings, selection_note
from helpers import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
HARNESS = (ROOT / "docs" / "harness.md").read_text(encoding="utf-8")  # run_local's page, linked from the README
MODAL = (ROOT / "docs" / "modal.md").read_text(encoding="utf-8")
PREFILL = DEFINITIONS["prefill"]


def _ci_block(name: str) -> str:
    """The README's ci:NAME block as .ci/run extracts it (its own readme_block function)."""
    script = (ROOT / ".ci" / "run").read_text()
    function = script[script.index("readme_block() {"):script.index("\n}\n") + 3]
    return subprocess.run(["bash", "-c", f"{function}\nreadme_block {name}"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()


def test_ci_runs_the_readmes_cpu_torch_line():
    assert _ci_block("torch") == "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    script = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^for block in (.*); do$", script, re.M).group(1).split() == ["torch", "main", "tests"]
    assert not re.search(r"pip install.*torch", script)  # torch comes from the README's line alone


def test_ci_makes_the_readmes_virtual_environment_first():
    """The Quick start's first step, before anything is installed, is what .ci/run runs (in its
    own shell, so that the installs after it go into that environment)."""
    assert _ci_block("venv") == "python3 -m venv .venv && . .venv/bin/activate"
    assert README.index("<!-- ci:venv -->") < README.index("<!-- ci:torch -->") < README.index("<!-- ci:main -->")
    script = (ROOT / ".ci" / "run").read_text()
    assert script.index('eval "$venv"') < script.index("pip install") < script.index("for block in")
    assert "-m venv" not in script  # the environment comes from the README's line alone


def test_the_cpu_prefill_sizes_the_readme_names_are_the_embedded_ones():
    sizes = sorted(t.workload.axes["total_seq_len"] for t in load_trace_set(None, PREFILL.name).workloads[PREFILL.name])
    assert "total_seq_len 5, 8, 65, 68,\n70)" in HARNESS and "T = 5, 8, 65, 68, 70" in HARNESS
    assert sizes == [5, 8, 65, 68, 70]
    note = selection_note(RunSettings(algos=[], definition="prefill"), cpu=True)
    assert note == "the default CPU subset: its workloads of at most 128 tokens (up to 6, the first)"


def test_the_gpu_prefill_example_exits_2_on_a_cpu_as_the_readme_says(capsys, monkeypatch, tmp_path):
    example = "--definition prefill --algo pt-reference,fi-baseline --seq-lens 6,8192"
    assert f"python scripts/run_local.py {example}   # GPU" in HARNESS
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "0"))
    assert cli.main([*example.split(), "--out", str(tmp_path)], checkout=ROOT) == 2
    assert capsys.readouterr().err == ("run_local: error: --seq-lens: no workload has total_seq_len 6, 8192; the "
                                       "total_seq_len values are 5, 8, 65, 68, 70\n")


@pytest.mark.skipif(importlib.util.find_spec("modal") is None, reason="modal is not installed")
def test_the_readme_lists_every_run_modal_flag():
    from gdn_bench.algos import load_module

    parser = load_module(ROOT / "scripts" / "run_modal.py", "run_modal_readme").build_parser()
    listed = MODAL[MODAL.index("Flags: `run_local.py`'s"):MODAL.index("## Cost")]
    missing = [action.option_strings for action in parser._actions if action.dest != "help"
               and not any(f"`{o}`" in listed or f"`{o} " in listed for o in action.option_strings)]
    assert len(parser._actions) > 10 and not missing

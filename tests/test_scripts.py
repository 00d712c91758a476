"""Every command line checks its arguments before it imports torch or flashinfer-bench (about
1.3 s): a script run with torch made unimportable still prints its help, and still refuses a
bad flag with status 2 and one line, the kit's 'SCRIPT: error: message' (argparse's own errors
included: no usage block)."""

import importlib.util
import subprocess
import sys

import pytest

from helpers import ROOT

# Runs a script (argv[1]) with its arguments (argv[2:]) where importing torch or
# flashinfer-bench raises.
WITHOUT_TORCH = """
import runpy, sys

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("torch", "flashinfer_bench"):
            raise ImportError(f"{name} imported before the arguments were checked")

sys.meta_path.insert(0, Refuse())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
# (tune_launch checks --table last, against the tables of the tuning modules, which import torch.)
SCRIPTS = sorted(p.stem for p in (ROOT / "scripts").glob("*.py"))


def _without_torch(script: str, *argv: str) -> subprocess.CompletedProcess:
    if script == "run_modal" and importlib.util.find_spec("modal") is None:
        pytest.skip("modal is not installed")
    return subprocess.run([sys.executable, "-c", WITHOUT_TORCH, str(ROOT / "scripts" / f"{script}.py"), *argv],
                          capture_output=True, text=True, cwd=ROOT)


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_and_a_bad_flag_need_no_torch(script):
    shown = _without_torch(script, "--help")
    assert shown.returncode == 0 and "usage:" in shown.stdout, shown.stderr
    refused = _without_torch(script, "--no-such-flag")  # or a required argument missing: argparse's line either way
    assert refused.returncode == 2 and refused.stderr.startswith(f"{script}: error: "), refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr


@pytest.mark.parametrize("script, argv, said", [
    ("run_local", ["--algo", "nope"], "run_local: error: --algo: unknown decode algorithm nope"),
    ("run_local", ["--definition", "both", "--algo", "fla-recurrent"],
     "run_local: error: prefill: --algo: unknown prefill algorithm fla-recurrent"),
    ("run_local", ["--seq-lens", "6"], "run_local: error: --seq-lens applies to --definition prefill"),
    ("profile_call", ["--definition", "prefill", "--config", "CHUNK=48"],
     "argument --config: CHUNK (tokens per block): expected a power of two from 16 to 128, got 48"),
    ("bench_prefill", ["--config", "CHUNK=100000"],
     "argument --config: CHUNK (tokens per block): expected a power of two from 16 to 128, got 100000"),
    ("run_local", ["--algo", ""], "run_local: error: --algo: unknown decode algorithm ''"),
    ("profile_call", ["--algo", ""], "argument --algo: decode has no algorithm ''"),
    ("profile_call", ["--definition", "prefill", "-B", "4"], "argument --batch-size: applies to --definition decode"),
    ("profile_call", ["--definition", "prefill", "-T", "4", "-N", "8"], "argument --num-seqs: 8 sequences need"),
    ("profile_call", ["--definition", "prefill", "--config", "CHUNK=64,CHUNK=32"],
     "argument --config: CHUNK given twice in 'CHUNK=64,CHUNK=32'"),
    ("profile_call", ["--definition", "prefill", "--config", "CHUNK=64", "--config", "CHUNK=32"],
     "argument --config: CHUNK given twice"),
    ("bench_prefill", ["--config", "CHUNK=64,CHUNK=32"], "argument --config: CHUNK given twice"),
    ("bench_prefill", ["--lengths", "0,0"], "argument --lengths: expected lengths >= 0 with at least one token"),
], ids=["unknown-algorithm", "both", "other-definitions-flag", "config", "bench-config", "empty-algo",
        "profile-empty-algo", "profile-other-definitions-flag", "profile-num-seqs", "config-twice",
        "config-twice-repeated", "bench-config-twice", "bench-no-token"])
def test_argument_errors_past_the_parser_need_no_torch(script, argv, said, tmp_path):
    refused = _without_torch(script, *argv, "--out", str(tmp_path))
    assert refused.returncode == 2 and refused.stderr.startswith(f"{script}: error: ") and said in refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr

"""Test set-up: Triton's interpreter on CPU tensors (CI has no GPU), a fresh seed per run, and
this checkout as the project (gdn_bench.paths.use_project).

GDN_TEST_DEVICE=cuda runs the same tests on a GPU (compiled kernels, no interpreter).
Under pytest-xdist (one worker per core) each worker computes on one thread: a second
intra-op thread per worker only contends for the same cores.
GDN_TEST_SEED=N replays a run; the seed in use is printed in the header. Test modules take
DEVICE, SEED and the shared helpers from tests/helpers.py (or the `device` fixture).
"""

import os
import secrets

if os.environ.get("GDN_TEST_DEVICE", "cpu") == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"  # must precede the first import of triton
# Set in the environment so that pytest-xdist workers (started later) share it.
os.environ.setdefault("GDN_TEST_SEED", str(secrets.randbits(31)))
if "PYTEST_XDIST_WORKER" in os.environ:  # before torch and numpy start their thread pools
    os.environ["OMP_NUM_THREADS"] = "1"

import pytest  # noqa: E402

from gdn_bench.paths import use_project  # noqa: E402
from helpers import DEVICE, ROOT, SEED  # noqa: E402

use_project(ROOT)  # this checkout, whichever one gdn_bench was installed from


def pytest_report_header(config):
    return f"gdn tests: device={DEVICE} seed={SEED} (GDN_TEST_SEED={SEED} replays this run)"


@pytest.fixture
def device():
    return DEVICE


@pytest.fixture(autouse=True)
def _fib_cache(tmp_path_factory, monkeypatch):
    """Keep flashinfer-bench's build cache out of the user's home."""
    monkeypatch.setenv("FIB_CACHE_PATH", str(tmp_path_factory.getbasetemp() / "fib-cache"))

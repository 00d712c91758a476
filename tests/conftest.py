"""Test set-up: Triton's interpreter on CPU tensors (CI has no GPU; its products through BLAS,
gdn_bench.interpreter), a fresh seed per run, and this checkout as the project
(gdn_bench.paths.use_project).

GDN_TEST_DEVICE=cuda runs the same tests on a GPU (compiled kernels, no interpreter).
GDN_TEST_SEED=N replays a run; the seed in use is printed in the header. Test modules take
DEVICE, SEED and the shared helpers from tests/helpers.py (or the `device` fixture).
"""

import os
import secrets

if os.environ.get("GDN_TEST_DEVICE", "cpu") == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"  # must precede the first import of triton
# One thread per test worker for torch's CPU ops (OpenMP): pytest-xdist runs a worker per core,
# and two workers' threads spinning on 2 cores made a 64-token float64 reference take 3 s
# instead of 16 ms (measured on the CI machine's kind). Set before torch is imported.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Set in the environment so that pytest-xdist workers (started later) share it.
os.environ.setdefault("GDN_TEST_SEED", str(secrets.randbits(31)))

import pytest  # noqa: E402

from gdn_bench.paths import use_project  # noqa: E402
from helpers import DEVICE, ROOT, SEED  # noqa: E402

use_project(ROOT)  # this checkout, whichever one gdn_bench was installed from
if DEVICE == "cpu":
    from gdn_bench.interpreter import use_blas_products  # noqa: E402

    use_blas_products()


def pytest_report_header(config):
    return f"gdn tests: device={DEVICE} seed={SEED} (GDN_TEST_SEED={SEED} replays this run)"


@pytest.fixture
def device():
    return DEVICE


@pytest.fixture(autouse=True)
def _fib_cache(tmp_path_factory, monkeypatch):
    """Keep flashinfer-bench's build cache out of the user's home."""
    monkeypatch.setenv("FIB_CACHE_PATH", str(tmp_path_factory.getbasetemp() / "fib-cache"))

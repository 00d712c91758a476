"""The submission kernel against the float64 reference, on fresh random inputs.

211 random calls per run (at batch sizes 1, 2, 3, 4, 7, 16, 33, 64 and 128; each batch row
mixes the gate regimes; state present or None; four kinds of scale), each with its own seed
from the run's. On CPU these calls run with kernel.py's interpreter table (two 64-row tiles
per head, 16 times fewer programs than a GPU's table at small batch), and the batches from 33
up (LARGE_GRID), which only make the grid larger, a GPU concern, are skipped: 204 calls run
there. Every row of every GPU architecture's table is checked on its own
(test_every_launch_configuration); on a GPU every call uses its architecture's.
"""

import importlib
import itertools

import pytest
import torch

from gdn_bench.algos import load_solution_file
from helpers import DEVICE, KERNEL_PATH, SCALE_KINDS, SEED, call_and_check

sub = load_solution_file(KERNEL_PATH, "gdn_submission")
shared = importlib.import_module("gdn_submission.shared")  # the shared.py that sub imports

SCALES = SCALE_KINDS[:4]  # none, zero, float, tensor (helpers.make_scale)
# 211 calls: small batches carry most cases (each row mixes the four gate regimes), larger
# ones cover large grids.
CASES = (
    [(batch, state, scale) for batch, state, scale in itertools.product((1, 2, 3), (True, False), SCALES)] * 7
    + [(batch, state, scale) for batch, state, scale in itertools.product((4, 7), (True, False), SCALES)] * 2
    + [(batch, True, scale) for batch, scale in itertools.product((16, 33), SCALES)]
    + [(64, True, "float"), (64, False, "none"), (128, True, "tensor")]
)
assert len(CASES) == 211 and {b for b, _, _ in CASES} == {1, 2, 3, 4, 7, 16, 33, 64, 128}  # as the docstring says
LARGE_GRID = 33  # from this batch up, the cases run on a GPU only
assert sum(batch < LARGE_GRID for batch, _, _ in CASES) == 204  # as the docstring says


def _case_id(case: int) -> str:
    batch, with_state, scale = CASES[case]
    return f"{case}-B{batch}-{'state' if with_state else 'no-state'}-scale-{scale}"


@pytest.mark.parametrize("case", range(len(CASES)), ids=_case_id)
def test_matches_float64_reference(case, device):
    batch, with_state, scale_kind = CASES[case]
    if DEVICE == "cpu" and batch >= LARGE_GRID:
        pytest.skip(f"B={batch}: a larger grid of the same programs, a GPU concern")
    call_and_check(sub.kernel, batch, with_state, scale_kind, SEED + case, device, "decode")


GPU_LAUNCHES = sorted({row._replace(max_batch=None) for arch, rows in sub.LAUNCH_TABLES.items()
                      if arch != "interpreter" for row in rows})


@pytest.mark.parametrize("launch", GPU_LAUNCHES, ids=lambda launch: f"BV{launch.block_v}-w{launch.warps}")
def test_every_launch_configuration(launch, device, monkeypatch):
    """Each (BV, warps) of a GPU architecture's launch table, forced onto a small batch."""
    monkeypatch.setitem(sub.LAUNCH_TABLES, sub.arch_key(torch.device(device)), (launch,))
    call_and_check(sub.kernel, 2, True, None, SEED + 1000 + launch.block_v, device,
                   f"BV={launch.block_v} warps={launch.warps}")


def test_in_place_state_update(device):
    """new_state may be the state tensor itself (each program reads its tile before writing)."""
    call_and_check(sub.kernel, 3, True, None, SEED + 2000, device, "in place", in_place=True)


def test_softplus_accurate_everywhere(device):
    """The in-kernel softplus within 1e-5 relative of float64 softplus from -80 to 100. GPU
    exp/log are hardware approximations (a few ulp); below -87 exp underflows to float32
    subnormals for any implementation."""
    import triton
    import triton.language as tl

    @triton.jit
    def softplus_kernel(x_ptr, y_ptr, N: tl.constexpr):
        offs = tl.arange(0, N)
        tl.store(y_ptr + offs, shared.softplus(tl.load(x_ptr + offs)))

    x = torch.linspace(-80.0, 100.0, 4096, device=device)
    y = torch.empty_like(x)
    softplus_kernel[(1,)](x, y, N=4096)
    want = torch.nn.functional.softplus(x.double())
    rel = ((y.double() - want).abs() / want).max().item()
    assert rel < 1e-5, rel

"""fla-tma (solution/triton/kernel_tma.py): the float64 reference and the sm_90+ requirement
(its argument checks are test_validation's, its imports test_self_contained's).

Triton's interpreter emulates tensor descriptors, so on CPU (TRITON_INTERPRET=1) the TMA
kernel itself runs, on small batches; GDN_TEST_DEVICE=cuda compiles it (sm_90+ GPU) and
covers batches up to 512.
"""

import pytest
import torch

from gdn_bench.algos import load_solution_file
from helpers import DEVICE, SEED, TMA_PATH, call_and_check, draw_inputs, poisoned_outputs

tma = load_solution_file(TMA_PATH, "gdn_fla_tma")

BATCHES = (1, 3, 16, 64, 128, 512) if DEVICE == "cuda" else (1, 3, 16)
SCALES = (None, 0.0, 0.0625)
needs_tma = pytest.mark.skipif(
    DEVICE == "cuda" and torch.cuda.get_device_capability() < (9, 0), reason="fla-tma needs an sm_90+ GPU"
)


@needs_tma
@pytest.mark.parametrize("with_state", (True, False), ids=("state", "no-state"))
@pytest.mark.parametrize("batch", BATCHES, ids=lambda b: f"B{b}")
def test_matches_float64_reference(batch, with_state, device):
    scale = SCALES[(batch + with_state) % len(SCALES)]
    call_and_check(tma.kernel, batch, with_state, scale, SEED + 10 * batch + with_state, device, "fla-tma")


@needs_tma
def test_in_place_state_update(device):
    """new_state may be the state tensor itself (each tile is read before it is written)."""
    call_and_check(tma.kernel, 3, True, None, SEED + 7, device, "fla-tma in place", in_place=True)


def test_refuses_cpu_without_interpreter(monkeypatch):
    monkeypatch.setattr(tma, "INTERPRETED", False)
    inputs = draw_inputs(1, torch.Generator().manual_seed(0), "cpu")
    output, new_state = poisoned_outputs(1, "cpu")
    with pytest.raises(RuntimeError, match=r"^fla-tma needs TMA \(sm_90\+\); the tensors are on cpu"):
        tma.kernel(**inputs, scale=None, output=output, new_state=new_state)


def test_refuses_pre_hopper_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 6))
    with pytest.raises(RuntimeError, match=r"^fla-tma needs TMA \(sm_90\+\); this GPU is sm_86$"):
        tma._require_tma(torch.device("cuda", 0))

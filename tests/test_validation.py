"""Bad inputs to the Triton kernels (the submission and fla-tma) raise one ValueError
naming the argument."""

import re
from fractions import Fraction

import numpy as np
import pytest
import torch

from gdn_bench.algos import load_module
from gdn_bench.shapes import DEFAULT_SCALE
from helpers import KERNEL_PATH, ROOT, TENSOR_ARGS, kernel_args, non_contiguous, wrong_dtype, wrong_shape

sub = load_module(KERNEL_PATH, "gdn_submission_validation")
tma = load_module(ROOT / "solution" / "triton_tma" / "kernel.py", "gdn_fla_tma_validation")


def _on_meta(t):
    return torch.empty(t.shape, dtype=t.dtype, device="meta")


@pytest.mark.parametrize("module", [sub, tma], ids=["fla-recurrent", "fla-tma"])
@pytest.mark.parametrize("name", TENSOR_ARGS)
@pytest.mark.parametrize(
    "corrupt, expected",
    [(wrong_shape, "shape"), (wrong_dtype, "dtype"), (_on_meta, "device"), (non_contiguous, "contiguous")],
    ids=["shape", "dtype", "device", "contiguous"],
)
def test_bad_tensor_is_named(module, name, corrupt, expected, device):
    if name == "q" and expected == "device":
        pytest.skip("q's device is the reference device for the others")
    args = kernel_args(device)
    args[name] = corrupt(args[name])
    with pytest.raises(ValueError, match=rf"^{name}: expected.*{expected}"):
        module.kernel(**args)


@pytest.mark.parametrize("name", TENSOR_ARGS)
def test_non_tensor_is_named(name, device):
    args = kernel_args(device)
    args[name] = [1.0, 2.0]
    with pytest.raises(ValueError, match=rf"^{name}: expected"):
        sub.kernel(**args)


@pytest.mark.parametrize("module", [sub, tma], ids=["fla-recurrent", "fla-tma"])
@pytest.mark.parametrize("q, got", [(lambda q: q[0], "shape [1, 4, 128]"), (lambda q: q.tolist(), "list"),
                                    (lambda q: None, "NoneType")], ids=["rank-3", "list", "none"])
def test_q_of_another_rank_or_kind_says_what_it_got(module, q, got, device):
    args = kernel_args(device)
    args["q"] = q(args["q"])
    with pytest.raises(ValueError, match=rf"^q: expected a \[B, 1, 4, 128\] tensor, got {re.escape(got)}$"):
        module.kernel(**args)


@pytest.mark.parametrize("module", [sub, tma], ids=["fla-recurrent", "fla-tma"])
@pytest.mark.parametrize("scale", [float("nan"), float("inf"), "0.1", torch.ones(2), True, False,
                                   torch.tensor(True), torch.tensor(2)],
                         ids=["nan", "inf", "str", "two-element", "True", "False", "bool-tensor", "int-tensor"])
def test_bad_scale_is_named(module, scale, device):
    args = dict(kernel_args(device), scale=scale)
    with pytest.raises(ValueError, match=r"^scale: expected"):
        module.kernel(**args)


@pytest.mark.parametrize("module", [sub, tma], ids=["fla-recurrent", "fla-tma"])
@pytest.mark.parametrize("scale", [np.float32(0.15), np.float64(0.15), Fraction(3, 20), 1, np.int64(0),
                                   torch.tensor(0.15)],
                         ids=["numpy-float32", "numpy-float64", "fraction", "int", "numpy-int-zero", "tensor"])
def test_any_real_scale_is_that_number(module, scale):
    """A real number of any type is the same Python float (0 still means 1/sqrt(128))."""
    assert module._scale_value(scale) == (float(scale) or DEFAULT_SCALE)


def test_a_numpy_scale_runs_like_a_float(device):
    outputs = []
    for value in (np.float32(0.15), float(np.float32(0.15))):
        args = kernel_args(device, batch=1)
        sub.kernel(**dict(args, scale=value))
        outputs.append(args["output"])
    assert torch.equal(outputs[0], outputs[1])


def test_batch_mismatch_is_named(device):
    args = kernel_args(device)
    args["v"] = kernel_args(device, batch=3)["v"]
    with pytest.raises(ValueError, match=r"^v: expected shape \[2, 1, 8, 128\]"):
        sub.kernel(**args)


def test_none_is_accepted_only_for_state(device):
    args = dict(kernel_args(device), state=None)
    for name in TENSOR_ARGS:
        if name != "state":
            bad = dict(args, **{name: None})
            with pytest.raises(ValueError, match=rf"^{name}: expected a .*[Tt]ensor"):
                sub.kernel(**bad)

"""Bad arguments to every Triton submission module (decode: the submission and fla-tma;
prefill: the submission) raise one ValueError naming the argument: one suite, parametrized
over the modules (SUBMISSIONS)."""

import re
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
import torch

from gdn_bench.algos import load_solution_file
from gdn_bench.shapes import DEFAULT_SCALE
from helpers import (KERNEL_PATH, PREFILL_TENSOR_ARGS, TENSOR_ARGS, TMA_PATH, kernel_args,
                     non_contiguous, prefill_kernel_args, wrong_dtype, wrong_shape)


@dataclass(frozen=True)
class Submission:
    """A submission module and what its checks take: valid arguments by name (a function of
    the device), the tensor arguments in order, q's layout in words and q of another rank,
    and the (argument, corruption) pairs that cannot be named because that argument sets the
    device or the sizes the others are checked against."""

    module: object
    args: object
    tensors: tuple
    q_layout: str
    other_rank: object
    unnamed: frozenset


_DECODE = dict(args=kernel_args, tensors=TENSOR_ARGS, q_layout="[B, 1, 4, 128]", other_rank=lambda q: q[0],
               unnamed=frozenset({("q", "device")}))
SUBMISSIONS = {
    "fla-recurrent": Submission(load_solution_file(KERNEL_PATH, "gdn_submission_validation"), **_DECODE),
    "fla-tma": Submission(load_solution_file(TMA_PATH, "gdn_fla_tma_validation"), **_DECODE),
    "triton-chunked": Submission(
        load_solution_file(KERNEL_PATH.parent / "prefill.py", "gdn_prefill_validation"), prefill_kernel_args,
        PREFILL_TENSOR_ARGS, "[T, 4, 128]",
        lambda q: q[None], frozenset((n, c) for n in ("q", "cu_seqlens") for c in ("device", "shape"))),
}
sub, prefill = SUBMISSIONS["fla-recurrent"].module, SUBMISSIONS["triton-chunked"].module
shared = load_solution_file(KERNEL_PATH.parent / "shared.py", "gdn_shared_validation")
CORRUPTIONS = {
    "shape": wrong_shape,
    "dtype": wrong_dtype,
    "device": lambda t: torch.empty(t.shape, dtype=t.dtype, device="meta"),
    "contiguous": non_contiguous,
}


def _tensor_cases():
    return [pytest.param(s, name, id=f"{s}-{name}") for s in SUBMISSIONS for name in SUBMISSIONS[s].tensors]


@pytest.mark.parametrize("submission, name", _tensor_cases())
@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_bad_tensor_is_named(submission, name, corruption, device):
    s = SUBMISSIONS[submission]
    if (name, corruption) in s.unnamed:
        pytest.skip(f"{name} defines the device or the sizes the others are checked against")
    args = s.args(device)
    args[name] = CORRUPTIONS[corruption](args[name])
    with pytest.raises(ValueError, match=rf"^{name}: expected.*{corruption}"):
        s.module.kernel(**args)


@pytest.mark.parametrize("submission, name", _tensor_cases())
def test_non_tensor_is_named_with_its_type(submission, name, device):
    s = SUBMISSIONS[submission]
    with pytest.raises(ValueError, match=rf"^{name}: expected .*got list"):
        s.module.kernel(**dict(s.args(device), **{name: [1.0, 2.0]}))


@pytest.mark.parametrize("submission", SUBMISSIONS)
def test_none_is_accepted_only_for_state(submission, device):
    s = SUBMISSIONS[submission]
    s.module.kernel(**dict(s.args(device), state=None))
    for name in s.tensors:
        if name != "state":
            with pytest.raises(ValueError, match=rf"^{name}: expected a .*[Tt]ensor"):
                s.module.kernel(**dict(s.args(device), state=None, **{name: None}))


@pytest.mark.parametrize("submission", SUBMISSIONS)
@pytest.mark.parametrize("kind", ["other-rank", "list", "none"])
def test_q_of_another_rank_or_kind_says_what_it_got(submission, kind, device):
    s = SUBMISSIONS[submission]
    args = s.args(device)
    args["q"] = {"other-rank": s.other_rank, "list": lambda q: q.tolist(), "none": lambda q: None}[kind](args["q"])
    got = {"other-rank": lambda: f"shape {list(args['q'].shape)}", "list": lambda: "list", "none": lambda: "NoneType"}
    with pytest.raises(ValueError, match=rf"^q: expected a {re.escape(s.q_layout)} tensor, got {re.escape(got[kind]())}$"):
        s.module.kernel(**args)


BAD_SCALES = {
    "nan": (lambda d: float("nan"), "a finite real number"),
    "inf": (lambda d: float("inf"), "a finite real number"),
    "str": (lambda d: "0.1", "a finite real number"),
    "list": (lambda d: [0.1], "a finite real number"),
    "True": (lambda d: True, "a finite real number"),
    "False": (lambda d: False, "a finite real number"),
    "two-element": (lambda d: torch.ones(2, device=d), "a one-element float tensor"),
    "bool-tensor": (lambda d: torch.tensor(True, device=d), "a one-element float tensor"),
    "int-tensor": (lambda d: torch.tensor(2, device=d), "a one-element float tensor"),
}


@pytest.mark.parametrize("submission", SUBMISSIONS)
@pytest.mark.parametrize("scale", BAD_SCALES)
def test_bad_scale_is_named(submission, scale, device):
    s = SUBMISSIONS[submission]
    make, expected = BAD_SCALES[scale]
    with pytest.raises(ValueError, match=rf"^scale: expected {expected}"):
        s.module.kernel(**dict(s.args(device), scale=make(device)))


@pytest.mark.parametrize("scale", [np.float32(0.15), np.float64(0.15), Fraction(3, 20), 1, np.int64(0),
                                   torch.tensor(0.15)],
                         ids=["numpy-float32", "numpy-float64", "fraction", "int", "numpy-int-zero", "tensor"])
def test_any_real_scale_is_that_number(scale):
    """A real number of any type is the same Python float (0 still means 1/sqrt(128)): the
    scale rule of every submission file (shared.py)."""
    assert shared.scale_value(scale) == (float(scale) or DEFAULT_SCALE)


def test_a_numpy_scale_runs_like_a_float(device):
    outputs = []
    for value in (np.float32(0.15), float(np.float32(0.15))):
        args = kernel_args(device, batch=1)
        sub.kernel(**dict(args, scale=value))
        outputs.append(args["output"])
    assert torch.equal(outputs[0], outputs[1])


def test_decode_batch_mismatch_is_named(device):
    args = kernel_args(device)
    args["v"] = kernel_args(device, batch=3)["v"]
    with pytest.raises(ValueError, match=r"^v: expected shape \[2, 1, 8, 128\]"):
        sub.kernel(**args)


def test_prefill_cu_seqlens_length_must_match_the_states(device):
    args = prefill_kernel_args(device)
    args["cu_seqlens"] = args["cu_seqlens"][:-1]
    with pytest.raises(ValueError, match=r"^state: expected shape \[2, 8, 128, 128\], got \[3, 8, 128, 128\]"):
        prefill.kernel(**args)
    with pytest.raises(ValueError, match=r"^cu_seqlens: expected a 1-D tensor \[N \+ 1\], got shape \[0\]"):
        prefill.kernel(**dict(prefill_kernel_args(device), cu_seqlens=torch.zeros(0, dtype=torch.int64, device=device)))

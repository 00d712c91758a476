"""solution/triton/tensor_guards.py: the guards that confirm a call's arguments after an earlier
call's passed the Python checks. Whatever a guard confirms, the Python checks pass; what it
does not confirm, they decide: so for the arguments of decode, prefill and their pooled forms,
fresh valid tensors give their own pointers (answered by the guard), and each argument made
wrong in each way gives what the Python checks alone give. Guards are not made from what they
cannot answer for (a subclass, a state of None, a tensor passed twice), a pool's guard does not
confirm it beside tensors on another device, guards stop being made for an expectation after
MAX_BUILDS, and a torch whose guards misbehave leaves the Python checks alone."""

import importlib

import pytest
import torch

from gdn_bench.algos import load_solution_file
from gdn_bench.definitions.prefill.definition import PREFILL
from helpers import SEED

sub = load_solution_file(PREFILL.submission_entry(), "gdn_tensor_guards_test")
shared = importlib.import_module("gdn_tensor_guards_test.shared")
guards_module = importlib.import_module("gdn_tensor_guards_test.tensor_guards")
decode = importlib.import_module("gdn_tensor_guards_test.kernel")
CASES = [(sub._ARG_NAMES, (6,), 1), (sub._ARG_NAMES, (300,), 3), (decode.ARG_NAMES, (4, 1), 4),
         (sub._POOLED_CHECKS, (40,), 2), (decode.POOLED_NAMES, (3, 1), 3)]
pytestmark = pytest.mark.skipif(not guards_module.available(), reason="this torch has no TensorGuards")


class _Sub(torch.Tensor):
    """A Tensor subclass: the Python checks pass it; no guard is made from it."""


@pytest.fixture(autouse=True)
def fresh_guards():
    """Each test starts and ends with no guard kept."""
    _forget()
    yield
    _forget()


def _forget():
    shared._PLAIN_GUARDS.clear()
    for guards in shared._SLOT_GUARDS.values():
        guards.clear()


def _valid(names, tokens, rows, seed=SEED):
    """Fresh random tensors fitting expected_specs(names, tokens, rows), with the expectations."""
    expected = shared.expected_specs(names, tokens, rows)
    gen = torch.Generator().manual_seed(seed)
    tensors = [torch.randn(shape, generator=gen).to(dtype) if dtype.is_floating_point
               else torch.arange(shape.numel(), dtype=dtype).reshape(shape) for shape, dtype in expected]
    return tensors, expected


def _python(names, tensors, expected, device):
    """What the Python checks alone answer (shared.fitting_pointers' contract): the pointers, or None."""
    try:
        shared.expect_all(names, tensors, expected, device)
    except ValueError:
        return None
    return [None if t is None else t.data_ptr() for t in tensors]


def _wrongs(t):
    """`t` made wrong each way the checks name, and made different in ways they accept, labelled."""
    shape = list(t.shape)
    yield "dtype", t.to(torch.float64)
    yield "shape", torch.zeros([shape[0] + 1, *shape[1:]], dtype=t.dtype)
    yield "rank", t.unsqueeze(0)
    if t.shape[-1] > 1:
        yield "layout", torch.zeros([*shape[:-1], 2 * shape[-1]], dtype=t.dtype)[..., ::2]
    yield "device", torch.empty(shape, dtype=t.dtype, device="meta")
    yield "not a tensor", 7
    yield "None", None
    yield "subclass", t.clone().as_subclass(_Sub)
    yield "offset view", torch.cat([t.flatten(), t.flatten()])[t.numel():].view(t.shape)
    if t.is_floating_point():
        yield "requires grad", t.clone().requires_grad_()


@pytest.mark.parametrize("names, tokens, rows", CASES)
def test_a_guard_confirms_fresh_tensors_and_leaves_every_other_answer_to_python(names, tokens, rows):
    first, expected = _valid(names, tokens, rows)
    device = first[0].device
    assert shared.fitting_pointers(names, first, expected, device) == _python(names, first, expected, device)
    tensors, _ = _valid(names, tokens, rows, seed=SEED + 1)  # other memory, the same layout
    assert shared._PLAIN_GUARDS.confirmed(expected, tensors) is not None  # the guard answers
    assert shared.fitting_pointers(names, tensors, expected, device) == [t.data_ptr() for t in tensors]
    for index, t in enumerate(tensors):
        for label, changed_one in _wrongs(t):
            changed = tuple(changed_one if i == index else x for i, x in enumerate(tensors))
            assert (shared.fitting_pointers(names, changed, expected, device)
                    == _python(names, changed, expected, device)), (names[index], label)
            assert shared.fitting_pointers(names, tensors, expected, device) == [x.data_ptr() for x in tensors]


def test_no_guard_is_made_from_a_subclass_a_missing_state_or_a_tensor_passed_twice():
    names = sub._ARG_NAMES
    tensors, expected = _valid(names, (6,), 1)
    device = tensors[0].device
    state = names.index("state")
    for made in ([t.as_subclass(_Sub) if i == 0 else t for i, t in enumerate(tensors)],
                 [None if i == state else t for i, t in enumerate(tensors)],
                 [tensors[state] if name == "new_state" else t for name, t in zip(names, tensors)]):
        assert shared.fitting_pointers(names, made, expected, device) == _python(names, made, expected, device)
        assert shared._PLAIN_GUARDS.confirmed(expected, tensors) is None


@pytest.mark.parametrize("in_place", ["none", "same", "given"])
def test_a_pooled_guard_gives_the_pointers_and_pool_size_of_the_python_pass(in_place):
    names = decode.POOLED_NAMES
    rows = 3
    for seed, pool_size in ((SEED, 8), (SEED + 1, 8), (SEED + 2, 5)):  # learn; the guard answers; another P
        tensors, expected = _valid(names, (rows, 1), rows, seed)
        pool = torch.randn(pool_size, 8, 128, 128)
        read = torch.tensor([4, 0, 2], dtype=torch.int32)
        write = {"none": None, "same": read, "given": torch.tensor([1, 3, 2], dtype=torch.int32)}[in_place]
        answered = shared._SLOT_GUARDS[in_place != "given"].confirmed(expected, (pool, read, *(
            () if in_place != "given" else (write,))))
        assert (answered is not None) == (seed == SEED + 1)
        pointers, size, writes = shared.pooled_pointers(names, tensors, expected, pool, read, write, rows,
                                                        tensors[0].device)
        given = [t.data_ptr() for t in tensors]
        assert pointers == [*given[:3], pool.data_ptr(), *given[3:], pool.data_ptr(), read.data_ptr(),
                            (read if write is None else write).data_ptr()]
        assert size == pool_size and writes is (read if write is None else write)
        wrong_write = torch.tensor([1, 3, 2], dtype=torch.int64)  # not read_indices' dtype
        assert shared.pooled_pointers(names, tensors, expected, pool, read, wrong_write, rows,
                                      tensors[0].device) is None


def test_a_slot_guard_does_not_confirm_a_pool_on_another_device_than_q():
    names = decode.POOLED_NAMES
    tensors, expected = _valid(names, (3, 1), 3)
    pool, read = torch.randn(8, 8, 128, 128), torch.tensor([4, 0, 2], dtype=torch.int32)
    assert shared.pooled_pointers(names, tensors, expected, pool, read, None, 3, tensors[0].device) is not None
    elsewhere = [t.to("meta") for t in tensors]  # q and the rest on another device; the pool and indices not
    assert shared.pooled_pointers(names, elsewhere, expected, pool, read, None, 3, torch.device("meta")) is None
    assert shared.pooled_pointers(names, elsewhere, expected, pool.to("meta"), read.to("meta"), None, 3,
                                  torch.device("meta")) is not None


def test_guards_stop_being_made_for_an_expectation_after_max_builds():
    names = decode.ARG_NAMES
    tensors, expected = _valid(names, (1, 1), 1)
    device = tensors[0].device
    q = names.index("q")
    for build in range(guards_module.MAX_BUILDS + 3):
        # q [1, 1, 4, 128] with a stride of its own on a size-1 axis: contiguous, a guard of its own
        odd = torch.empty_strided((1, 1, 4, 128), (7 + build, 3 + build, 128, 1), dtype=torch.bfloat16)
        odd.copy_(tensors[q])
        called = [odd if i == q else t for i, t in enumerate(tensors)]
        assert shared.fitting_pointers(names, called, expected, device) == [t.data_ptr() for t in called]
    entry = shared._PLAIN_GUARDS._kept[id(expected)]
    assert entry[2] == guards_module.MAX_BUILDS
    assert shared._PLAIN_GUARDS.confirmed(expected, tensors) is None  # the last guard made was for another stride


def test_inference_tensors_get_a_guard_of_their_own():
    names = decode.ARG_NAMES
    with torch.inference_mode():
        first, expected = _valid(names, (2, 1), 2)
        device = first[0].device
        shared.fitting_pointers(names, first, expected, device)
        tensors, _ = _valid(names, (2, 1), 2, seed=SEED + 1)
        assert shared._PLAIN_GUARDS.confirmed(expected, tensors) is not None
    plain, _ = _valid(names, (2, 1), 2, seed=SEED + 2)
    assert shared._PLAIN_GUARDS.confirmed(expected, plain) is None  # not inference tensors: Python decides
    assert shared.fitting_pointers(names, plain, expected, device) == [t.data_ptr() for t in plain]


def test_a_torch_whose_guards_misbehave_leaves_the_python_checks_alone(monkeypatch):
    class Unfit:
        """A TensorGuards that confirms nothing, not even the tensors it was made from."""

        def __init__(self, *tensors, **sizes):
            pass

        def check(self, *tensors):
            return False

    monkeypatch.setattr(guards_module, "TensorGuards", Unfit)
    names = sub._ARG_NAMES
    tensors, expected = _valid(names, (6,), 1)
    device = tensors[0].device
    for _ in range(2):
        assert shared.fitting_pointers(names, tensors, expected, device) == [t.data_ptr() for t in tensors]
    assert not guards_module.available()
    assert shared._PLAIN_GUARDS.confirmed(expected, tensors) is None
    tensors[2] = tensors[2].to(torch.float64)
    assert shared.fitting_pointers(names, tensors, expected, device) is None

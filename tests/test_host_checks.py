"""solution/triton/host_checks.py: the compiled argument checks a serving engine opts into.
Built here (a C++ compiler and ninja; skipped, saying so, where the machine has no compiler),
they must confirm exactly the arguments the Python checks pass, and decide nothing else: for
the arguments of decode, prefill and their pooled forms, valid ones give the same pointers,
and each argument made wrong in each way (dtype, shape, rank, layout, device, not a tensor,
None) gives "not decided", so that what passes, what raises and the message are the Python
checks'. A prefill call writes the same with and without them."""

import importlib
import shutil

import pytest
import torch

from gdn_bench.algos import load_solution_file
from gdn_bench.definitions.prefill.definition import PREFILL
from helpers import DEVICE, SEED, draw_inputs

sub = load_solution_file(PREFILL.submission_entry(), "gdn_host_checks_test")
shared = importlib.import_module("gdn_host_checks_test.shared")  # the package's own, which sub calls
host_checks = importlib.import_module("gdn_host_checks_test.host_checks")
decode = importlib.import_module("gdn_host_checks_test.kernel")
PREFILL_NAMES, POOLED_PREFILL_NAMES = sub._ARG_NAMES, sub._POOLED_CHECKS
DECODE_NAMES, POOLED_DECODE_NAMES = decode.ARG_NAMES, decode.POOLED_NAMES


class _Sub(torch.Tensor):
    """A Tensor subclass: the compiled pass leaves it to the Python checks."""


@pytest.fixture(scope="module")
def compiled():
    """The compiled pass (host_checks.enable()), disabled again after the module's tests."""
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.skip("no C++ compiler on this machine: the compiled checks cannot be built")
    host_checks.enable()
    assert host_checks.enabled()
    fitting = shared.compiled_checks()
    host_checks.disable()
    assert not host_checks.enabled()
    yield fitting
    host_checks.disable()


def _valid(names, tokens, rows):
    """Fresh random tensors fitting expected_specs(names, tokens, rows), with (names, expected)."""
    expected = shared.expected_specs(names, tokens, rows)
    gen = torch.Generator().manual_seed(SEED)
    tensors = [torch.randn(shape, generator=gen).to(dtype) if dtype.is_floating_point
               else torch.arange(shape.numel(), dtype=dtype).reshape(shape) for shape, dtype in expected]
    return tensors, expected


def _wrongs(t):
    """`t` made wrong each way expect() names, with a label."""
    shape = list(t.shape)
    longer = [shape[0] + 1, *shape[1:]]
    yield "dtype", t.to(torch.float64)
    yield "shape", torch.zeros(longer, dtype=t.dtype)
    yield "rank", t.unsqueeze(0)
    if t.shape[-1] > 1 and t.numel():  # an empty tensor is contiguous whatever its strides
        yield "layout", torch.zeros([*shape[:-1], 2 * shape[-1]], dtype=t.dtype)[..., ::2]
    yield "device", torch.empty(shape, dtype=t.dtype, device="meta")
    yield "not a tensor", 7
    yield "None", None


CASES = [(PREFILL_NAMES, (6,), 1), (PREFILL_NAMES, (300,), 3), (PREFILL_NAMES, (0,), 0), (DECODE_NAMES, (4, 1), 4),
         (POOLED_PREFILL_NAMES, (40,), 2), (POOLED_DECODE_NAMES, (3, 1), 3)]


@pytest.mark.parametrize("names, tokens, rows", CASES)
def test_the_compiled_pass_confirms_what_python_passes_and_nothing_else(compiled, names, tokens, rows):
    tensors, expected = _valid(names, tokens, rows)
    device = tensors[0].device
    pointers = [t.data_ptr() for t in tensors]
    assert compiled(names, tuple(tensors), expected, device) == pointers
    assert compiled(names, list(tensors), expected, device) == pointers
    if "state" in names:
        state = names.index("state")
        no_state = tuple(None if i == state else t for i, t in enumerate(tensors))
        assert compiled(names, no_state, expected, device) == pointers[:state] + [None] + pointers[state + 1:]
    for index, t in enumerate(tensors):
        for label, wrong in _wrongs(t):
            changed = tuple(wrong if i == index else x for i, x in enumerate(tensors))
            python = shared.fitting_pointers(names, changed, expected, device)
            if label == "None" and names[index] == "state":
                assert compiled(names, changed, expected, device) == python, label
                continue
            assert python is None, (names[index], label)
            assert compiled(names, changed, expected, device) is None, (names[index], label)
    # what the compiled pass leaves to Python: a subclass (which Python passes), other sequences
    subclassed = tuple(t.as_subclass(_Sub) if i == 0 else t for i, t in enumerate(tensors))
    assert compiled(names, subclassed, expected, device) is None
    assert shared.fitting_pointers(names, subclassed, expected, device) == pointers
    assert compiled(names, tuple(tensors[:-1]), expected, device) is None
    assert compiled(names, tuple(tensors), expected, torch.device("meta")) is None
    assert compiled(names, tuple(tensors), "not specs", device) is None


def test_an_enabled_pass_answers_first_and_python_decides_the_rest(compiled):
    tensors, expected = _valid(PREFILL_NAMES, (6,), 1)
    asked = []
    shared.use_compiled_checks(lambda *args: asked.append(args) or None)
    try:
        assert shared.fitting_pointers(PREFILL_NAMES, tensors, expected, tensors[0].device) == [
            t.data_ptr() for t in tensors]
    finally:
        shared.use_compiled_checks(None)
    assert len(asked) == 1


@pytest.mark.parametrize("bad", ["v", "state", "cu_seqlens"])
def test_prefill_writes_and_raises_the_same_with_them(compiled, bad):
    inputs = draw_inputs([5, 9], torch.Generator().manual_seed(SEED + 31), DEVICE)
    args = [inputs[name] for name in PREFILL_NAMES[:9]]
    written, messages = [], []
    for enable in (False, True):
        host_checks.enable() if enable else host_checks.disable()
        try:
            output = torch.full_like(inputs["v"], float("nan"))
            new_state = torch.full_like(inputs["state"], float("nan"))
            sub.kernel(*args, None, output, new_state)
            written.append((output, new_state))
            wrong = [a.to(torch.float64) if name == bad else a for name, a in zip(PREFILL_NAMES, args)]
            with pytest.raises(ValueError) as raised:
                sub.kernel(*wrong, None, output, new_state)
            messages.append(str(raised.value))
        finally:
            host_checks.disable()
    assert torch.equal(written[0][0], written[1][0]) and torch.equal(written[0][1], written[1][1])
    assert not written[1][0].isnan().any() and not written[1][1].isnan().any()
    assert messages[0] == messages[1] and messages[0].startswith(f"{bad}: expected")


def test_enable_says_what_is_missing_and_the_python_checks_stay(monkeypatch):
    from torch.utils import cpp_extension

    load_solution_file(PREFILL.submission_entry(), "gdn_host_checks_unbuilt")  # a host_checks that built nothing
    checks = importlib.import_module("gdn_host_checks_unbuilt.host_checks")

    def no_ninja():
        raise RuntimeError("Ninja is required to load C++ extensions")

    monkeypatch.setattr(cpp_extension, "verify_ninja_availability", no_ninja)
    with pytest.raises(RuntimeError, match=r"could not be built \(Ninja is required .*\).*The Python checks stay"):
        checks.enable()
    assert not checks.enabled()

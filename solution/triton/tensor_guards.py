"""The argument checks' fast confirmation, by torch's own compiled tensor guards (the checks
torch.compile runs before it reuses a compiled graph), so that the default host path of a call
does not pay the Python checks on every call.

The one-pass checks (shared.fitting_pointers, shared.pooled_pointers) ask of each argument that
it be a torch.Tensor of the expected shape and dtype on q's device, contiguous (and, in a
pooled call, the pool and the indices the same of theirs). In Python that is 6-8 µs for eleven
tensors, most of it in torch's attribute getters (docs/perf.md item 35). Here, once a call's
tensors have passed the Python checks, a guard is made from them: torch's TensorGuards, which
checks in C++ that tensors have exactly these tensors' type, dtype, device, sizes, strides and
dispatch keys (requires_grad, inference tensors). Later calls with the same expectations ask it
first (1.4 µs for eleven tensors on the CI's CPU). What it confirms passes the Python checks
too (the same shape, dtype and device, and the strides of a contiguous tensor of that shape);
what it does not confirm goes to the Python checks, which decide and name a failing argument,
and a guard is made anew from tensors that pass them (at most MAX_BUILDS times per
expectation: a caller whose tensors differ call by call in what only the guard sees, such as
the stride of a size-1 axis, stays with the Python checks). So what passes, what raises and
the message are the Python checks' whether a guard answers or not.

TensorGuards is a private class of torch (torch._C._dynamo.guards): where it is missing, does
not take these arguments or fails its self-check (a guard must confirm the tensors it was made
from), the Python checks are used alone. Guards are made from plain torch.Tensor arguments only
(a subclass is checked in Python every call), never from a call with a missing argument (a
state of None) or with one tensor passed twice (new_state as state: torch's guards refuse
aliases), and each is kept with its expectations object (shared.expected_specs' cached
tuple), so that a key's id cannot be reused while it is kept.
"""

try:
    from torch._C._dynamo.guards import TensorGuards
except Exception:  # noqa: BLE001 - a torch without it (or without dynamo): the Python checks alone
    TensorGuards = None

import torch

MAX_BUILDS = 8  # guards made per expectation before its calls stay with the Python checks
_KEPT = 64  # expectations kept per Guards; more forget them all


class Guards:
    """Guards of argument lists by their expectations (a cached object: shared.expected_specs'),
    each with a value the caller keeps with it (a pool's size)."""

    def __init__(self):
        # id(expected) -> [expected, (the guard's check, its value) or None, guards made]; the pair
        # is replaced whole, so that a call in another thread never reads one guard's value with
        # another's check
        self._kept = {}

    def confirmed(self, expected, tensors):
        """The value kept with the guard of `expected` where it confirms `tensors` (each exactly
        like the tensors it was made from but for its memory), else None."""
        entry = self._kept.get(id(expected))
        if entry is None or entry[0] is not expected or TensorGuards is None:
            return None
        guard = entry[1]
        if guard is None:
            return None
        try:
            return guard[1] if guard[0](*tensors) else None
        except TypeError:  # another number of arguments than the guard's
            return None

    def learn(self, expected, tensors, value):
        """Make the guard of `expected` from `tensors`, which passed the Python checks, with
        `value` kept beside it (not for a subclass or None among them, nor past MAX_BUILDS)."""
        global TensorGuards
        if (TensorGuards is None or not all(type(t) is torch.Tensor for t in tensors)
                or len(set(map(id, tensors))) < len(tensors)):  # torch's guards refuse a tensor passed twice
            return
        entry = self._kept.get(id(expected))
        if entry is None or entry[0] is not expected:
            if len(self._kept) >= _KEPT:
                self._kept.clear()
            entry = self._kept[id(expected)] = [expected, None, 0]
        if entry[2] >= MAX_BUILDS:
            return
        entry[2] += 1
        try:
            guard = TensorGuards(*tensors, dynamic_dims_sizes=[list(t.shape) for t in tensors],
                                 dynamic_dims_strides=[list(t.stride()) for t in tensors])
            works = guard.check(*tensors) is True
        except Exception:  # noqa: BLE001 - this torch's guards take other arguments
            works = False
        if not works:  # this torch's guards are not what this module was written for: never again
            TensorGuards = None
            self._kept.clear()
            return
        entry[1] = (guard.check, value)

    def clear(self):
        """Forget every guard (tests)."""
        self._kept.clear()


def available():
    """Whether torch's tensor guards are in use (not missing, nor found unfit)."""
    return TensorGuards is not None

"""The sm_100 plan checked on the GPU that runs it: each compiled configuration of the chunked
path, on its first call, against the token walk; a configuration that fails moves the device
down a ladder of plans, the last of which has no tensor-core product at all.

Why (docs/sm100.md): Triton's tcgen05 path (4 or more warps on sm_100 / sm_103) has computed
`tl.dot` recurrences wrongly or nondeterministically in several releases (triton #9871, #10590,
#10821, PR #10993). The sm100 plan (4 warps, one stage) lies outside every failing set reported,
but no report says that it was tested on a Triton without the fix of #9871, and no B200 was at
hand to test it. So on a GPU whose plan is in GUARDED, the first call of each configuration
(GuardKey: the compiled kernels of its launches, and whether its grids are large enough for
the reported races) is computed three times into scratch outputs: twice by the plan (the two
must agree bit for bit) and once by the token walk (prefill_walk: the recurrence token by
token in float32, no tl.dot), with which the plan's outputs and final states must agree
within GUARD_MARGIN of the contest's tolerance. A configuration that passes is not checked
again; one that fails moves the device one rung down LADDER (a warning says so), and the
call is planned and checked again there. Then the call runs as planned, into its own outputs.
A call the plan walks is not checked: the walk is the reference.

The check reads the call's own inputs, waits on the device once and costs three runs of the
call, once per configuration and process (the contest's evaluator warms every workload up
before it times it). It is skipped, and the configuration left unchecked, while a CUDA graph
is being captured (no waiting there) and where the walk's outputs hold NaN or infinities (a
malformed cu_seqlens or such inputs: nothing to compare). pooled_prefill's configurations are
checked the same way, each run over a pool of its own holding the slots the call reads (the
caller's pool is not touched). A kernel that faults (an illegal address) ends the process
before any check can see it: the guard catches wrong and nondeterministic results only.

Measured on an H200 with the sm100 plan forced (docs/perf.md item 29): a check costs 1.4-3.3
ms once per configuration (then 0.28 us of host time a call); the span summary at 16 columns,
4 warps and one stage, which Triton 3.6 computes wrongly there (infinities, nondeterministic),
was caught and the call's outputs came from the sm100_mma rung, right.
"""

import warnings
from typing import NamedTuple

import torch
import triton

from .shared import recording

# The plans whose configurations are checked on first use, and the rung below each: the sm100
# plan (tcgen05, 4 warps) -> the same kernels at 2 warps (mma.sync, no tcgen05; 2.2x slower on
# the long calls, docs/sm100.md section 6) -> the token walk for every call (no product).
LADDER = {"sm100": "sm100_mma", "sm100_mma": "sm100_walk"}
GUARDED = tuple(LADDER)
# The plan's outputs and final states against the walk's: an element fails where its error
# exceeds GUARD_MARGIN times both the contest's absolute and relative tolerances (1e-2). Both
# paths are within ~0.55 of the tolerance of a float64 reference on the kit's stress inputs
# (docs/perf.md item 28); the reported miscompiles are off by 50 to 10^5.
GUARD_MARGIN = 2.0
TOLERANCE = 1e-2
LARGE_GRID = 128  # programs from which a launch counts as large (the races of #9871 needed ~160)

_RUNGS = {}  # (device index, plan) -> the rung that device runs instead
_PASSED = set()  # GuardKeys checked and passed
# The calls' plans (prefill.CallPlan) known to have passed, by (id, device index) -> the plan
# itself (which keeps its id from being reused): a call's check in ~0.1 us instead of making its
# GuardKey (~5 us). At most _KEPT_PASSED; more forget them all (the GuardKeys stay).
_PASSED_PLANS = {}
_KEPT_PASSED = 1024


class GuardKey(NamedTuple):
    """What a check vouches for: the device, and each launch's kernel, constexprs, warps and
    options; and whether any grid has LARGE_GRID programs or more."""
    device: int
    launches: tuple
    large: bool


def rung(arch, device_index):
    """The plan device `device_index` runs where `arch` (shared.arch_key) is planned: `arch`,
    or the rung a failed check moved it to."""
    return _RUNGS.get((device_index, arch), arch)


def guard_key(steps, device_index):
    """The GuardKey of a call's launches (prefill.Step)."""
    largest = max((grid[0] * grid[1] * grid[2] for grid in (step.grid for step in steps)), default=0)
    launches = tuple((step.launcher.fn.__name__, step.constexprs, step.warps, step.options) for step in steps)
    return GuardKey(device_index, launches, largest >= LARGE_GRID)


def unchecked(arch, call, device):
    """The GuardKey of `call` (a prefill.CallPlan planned for `arch` on `device`) where it is to
    be checked first, else None: `arch` is not GUARDED, the call walks its tokens (the walk is
    the reference), its configuration passed before, or launches are being recorded (nothing
    runs: shared.recording_launches)."""
    index = device.index
    if (arch not in GUARDED or call.plan.walk is not None or _PASSED_PLANS.get((id(call), index)) is call
            or recording()):
        return None
    key = guard_key(call.steps, index)
    if key in _PASSED:
        _remember(call, index)
        return None
    return key


def _remember(call, device_index):
    """Keep `call` among the plans known to have passed (_PASSED_PLANS)."""
    if len(_PASSED_PLANS) >= _KEPT_PASSED:
        _PASSED_PLANS.clear()
    _PASSED_PLANS[(id(call), device_index)] = call


def verdict(first, second, walked):
    """The check of one configuration from its outputs: `first` and `second`, the plan's
    (output, new_state) of two runs of one call, `walked` the token walk's. True: the runs agree
    bit for bit and with the walk (worst_margin at most GUARD_MARGIN); False: they do not; None:
    the walk's hold NaN or infinities (nothing to compare)."""
    finite = [torch.isfinite(tensor).all() for tensor in walked]
    same = [(a.view(_BITS[a.dtype]) == b.view(_BITS[b.dtype])).all() for a, b in zip(first, second)]
    close = [_worst(a, w) <= GUARD_MARGIN for a, w in zip(first, walked)]
    flags = torch.stack(finite + same + close).tolist()  # the check's one wait on the device
    if not all(flags[:len(finite)]):
        return None
    return all(flags[len(finite):])


_BITS = {torch.bfloat16: torch.int16, torch.float32: torch.int32}


def worst_margin(got, want):
    """The largest error of `got` in units of the contest's tolerance: per element, the error
    over max(TOLERANCE, TOLERANCE * |want|) (an element fails the contest's check where its error
    exceeds both); NaN and infinities count as failing without bound."""
    return float(_worst(got, want))


def _worst(got, want):
    """worst_margin as a 0-dim tensor on got's device (0 for no elements): read without waiting."""
    got, want = got.double(), want.double()
    margin = torch.nan_to_num((got - want).abs() / (TOLERANCE * want.abs()).clamp(min=TOLERANCE), nan=float("inf"))
    return margin.max() if margin.numel() else margin.new_zeros(())


def record(call, key, arch, passed):
    """Keep what a check of `call` (GuardKey `key`) under `arch` found: a pass, or the device moved
    one rung down LADDER (with a warning). Returns the plan to run next on the device."""
    if passed:
        _PASSED.add(key)
        _remember(call, key.device)
        return arch
    lower = LADDER[arch]
    _RUNGS[(key.device, arch)] = lower
    for planned, now in _RUNGS.items():  # whatever plan was moved to `arch` on this device
        if planned[0] == key.device and now == arch:
            _RUNGS[planned] = lower
    warnings.warn(f"gdn prefill: the {arch} plan's kernels disagree with the token walk on this GPU (Triton "
                  f"{triton.__version__}): this process runs the {lower} plan on it from now on", RuntimeWarning,
                  stacklevel=3)
    return lower

"""What the Triton submission files share: head sizes, the in-kernel gates (softplus, gates) and
delta-rule step, the launch-table row, the argument checks (one shape table for every
definition's arguments, expected_specs; the rank check, expect_rank), the pooled calls' index
rule (pool_slots), the scale rule, the fast launch path and the recording of launches (for
tools: nothing launches).

The evaluator packs every top-level file of solution/triton/ into each submission and imports
the entry file as a module of that package (flashinfer-bench's Python builder: 0.1.2 and
main alike), so the entry files import this one relatively (`from .shared import ...`).
Only torch, triton and the standard library are imported: the evaluator has nothing else.
Lines above the @triton.jit helpers keep their count: their line numbers are in the kernels' report.
"""

import functools
import math
import numbers
import os
import weakref
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from .direct_launch import argument_layout, launch_arguments, ways_to_launch

NUM_Q_HEADS = 4
NUM_V_HEADS = 8
HEAD_SIZE = 128

# Whether Triton interprets kernels on the CPU (read when the kernels are decorated).
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"


# Launch tables are data keyed by architecture (arch_key): "sm90" (Hopper, and any GPU below
# compute capability 10), "sm100" (Blackwell: B200 sm_100, B300 sm_103), "interpreter" (CPU).
ARCHITECTURES = ("sm90", "sm100", "interpreter")
_PLANNING_FOR = []  # capabilities pushed by planning_for (a stack: the last one is in force)


def arch_key(device):
    """The architecture whose launch tables `device` runs: "interpreter" for a CPU device (unless
    planning_for says otherwise), else "sm100" for compute capability 10 or more and "sm90"
    below. The one place a submission asks which GPU it plans for."""
    if _PLANNING_FOR:
        return capability_arch(_PLANNING_FOR[-1])
    if device.type != "cuda":
        return "interpreter"
    return _cuda_arch(device.index)


@functools.lru_cache(maxsize=None)
def _cuda_arch(index):
    """arch_key of CUDA device `index`, asked of the driver once (decode's launch path asks per call)."""
    return capability_arch(torch.cuda.get_device_capability(index))


def capability_arch(capability):
    """arch_key of a compute capability (major, minor); None: "interpreter"."""
    if capability is None:
        return "interpreter"
    return "sm100" if capability[0] >= 10 else "sm90"


# The L2 a GPU planned for (planning_for) is taken to have: the H100's 50 MB, so that the
# architecture report compiles the launches such a GPU makes (mtp's streamed stores).
PLANNED_L2_BYTES = 50 * 2**20


def l2_bytes(device):
    """The size in bytes of `device`'s L2: PLANNED_L2_BYTES while planning_for is in force, 0 for a
    CPU device, else the driver's answer (asked once per device)."""
    if _PLANNING_FOR:
        return PLANNED_L2_BYTES
    if device.type != "cuda":
        return 0
    return _cuda_l2_bytes(device.index)


@functools.lru_cache(maxsize=None)
def _cuda_l2_bytes(index):
    """l2_bytes of CUDA device `index`, asked of the driver once."""
    return torch.cuda.get_device_properties(index).L2_cache_size


class planning_for:
    """Context manager: inside it, arch_key answers for `capability` (major, minor) whatever the
    device, so that a tool without that GPU (the architecture report) can ask the submissions
    which launches they would make there."""

    def __init__(self, capability):
        self.capability = tuple(capability)

    def __enter__(self):
        _PLANNING_FOR.append(self.capability)
        return self

    def __exit__(self, *exc):
        _PLANNING_FOR.pop()


class LaunchRow(NamedTuple):
    """One row of a launch table by batch size (kernel.py's and mtp.py's LAUNCH_TABLES): batch
    sizes up to max_batch (None: any larger one, the last row) run with block_v state rows per
    program and `warps` warps per program."""
    max_batch: int | None
    block_v: int
    warps: int


def launch_row(batch, launch_table):
    """The row of a launch table by batch size (rows with max_batch: LaunchRow, mtp's) for this one."""
    for row in launch_table:
        if row.max_batch is None or batch <= row.max_batch:
            return row
    raise AssertionError("a launch table must end with an unbounded row (max_batch=None)")


@triton.jit
def softplus(x):
    """softplus(x) = max(x, 0) + log1p(exp(-|x|)), exact for large |x| (no overflow)."""
    y = tl.exp(-tl.abs(x))
    u = 1.0 + y
    # log1p(y) with no log1p primitive: log(u) plus the first-order correction for the
    # rounding of u = 1 + y, log((1 + y) / u) ~ y - (u - 1) (dividing that by u in [1, 2]
    # changes it by less than one ulp of the result). Accurate for all y in (0, 1],
    # including y so small that u rounds to 1 (then it returns y).
    log1p_y = tl.log(u) - ((u - 1.0) - y)
    return tl.maximum(x, 0.0) + log1p_y


@triton.jit
def gates(A_log, a, dt_bias, b):
    """A token's gates from its float32 inputs (scalars or blocks alike): (log g, beta) with

        log g = -exp(A_log) * softplus(a + dt_bias)     the log of the decay gate g in (0, 1]
        beta  = sigmoid(b) = 1 / (1 + exp(-b))          the update gate

    A step of the recurrence takes g = exp(log g) (step_gates); a chunk sums the logs over its
    tokens."""
    return -tl.exp(A_log) * softplus(a + dt_bias), 1.0 / (1.0 + tl.exp(-b))


@triton.jit
def step_gates(A_log, dt_bias, a_ptr, b_ptr, index):
    """(g, beta) of one token and value head for a step of the recurrence: gates() of A_log and
    dt_bias (float32, the head's, which the caller loads) and of a and b at `index` (bfloat16,
    widened to float32), with g = exp(log g)."""
    log_g, beta = gates(A_log, tl.load(a_ptr + index).to(tl.float32), dt_bias, tl.load(b_ptr + index).to(tl.float32))
    return tl.exp(log_g), beta


@triton.jit
def delta_rule_step(s, q, k, v, g, beta, scale, qk):
    """One token on a [BV, D] tile of a state S, given qk = k . q (a caller that walks the
    tiles of one token, or a block of tokens, has it at hand): returns (out, S') with
    S' = g * S + outer(delta, k), delta = beta * (v - g * (S @ k)) and
    out = scale * (S' @ q) = scale * (g * (S @ q) + qk * delta), from one pass over S."""
    s_k = tl.sum(s * k[None, :], axis=1)
    s_q = tl.sum(s * q[None, :], axis=1)
    delta = beta * (v - g * s_k)
    out = scale * (g * s_q + qk * delta)
    return out, g * s + delta[:, None] * k[None, :]


@triton.jit
def pool_slots(read_index_ptr, write_index_ptr, row, pool_size):
    """Where row `row` of a pooled call reads and writes its state, from its read index r and
    write index w (pool of P slots): (read slot, write slot, live, writes, fill).

    live: 0 <= r < P and w < P, the row runs from slot r (r out of range: 0, for a masked
    load). writes: live and w >= 0, its final state goes to slot w (else that slot is 0, for
    a masked store). fill: what a row that is not live gets as output, 0 for a padding row
    (r < 0) and NaN for an index past the pool (which cannot be raised without waiting on the
    device)."""
    read = tl.load(read_index_ptr + row).to(tl.int64)
    write = tl.load(write_index_ptr + row).to(tl.int64)
    live = (read >= 0) & (read < pool_size) & (write < pool_size)
    writes = live & (write >= 0)
    fill = tl.where(read < 0, 0.0, float("nan"))
    return tl.where(live, read, 0), tl.where(writes, write, 0), live, writes, fill


Tensor = torch.Tensor  # one global lookup in the checks' loop


@functools.lru_cache(maxsize=256)
def expected_specs(names, tokens, sequences):
    """(shape, dtype) of each argument named in `names` (a tuple, in its order), for a call whose
    tokens fill the leading axes `tokens` ((B, 1) for decode, (B, T) for MTP, (T,) for
    prefill) and whose states are those of `sequences` rows or sequences:

        q, k [*tokens, 4, 128], v, output [*tokens, 8, 128], a, b [*tokens, 8]   bfloat16
        A_log, dt_bias [8]; state, new_state [sequences, 8, 128, 128]              float32
        cu_seqlens [sequences + 1]                                                 int64
    """
    bf16, f32 = torch.bfloat16, torch.float32
    per_q, per_v, heads = (*tokens, NUM_Q_HEADS, HEAD_SIZE), (*tokens, NUM_V_HEADS, HEAD_SIZE), (*tokens, NUM_V_HEADS)
    state, params = (sequences, NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE), (NUM_V_HEADS,)
    specs = dict(q=(per_q, bf16), k=(per_q, bf16), v=(per_v, bf16), output=(per_v, bf16), a=(heads, bf16),
                 b=(heads, bf16), A_log=(params, f32), dt_bias=(params, f32), state=(state, f32),
                 new_state=(state, f32), cu_seqlens=((sequences + 1,), torch.int64))
    return tuple((torch.Size(specs[name][0]), specs[name][1]) for name in names)


def expect_rank(name, t, dims):
    """t.shape if `t` is a tensor of len(dims) axes; else ValueError naming `name` and the
    layout `dims` (the axes' sizes or names, as ("B", 1, 4, 128) for [B, 1, 4, 128])."""
    if not isinstance(t, torch.Tensor) or t.dim() != len(dims):
        got = f"shape {list(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
        raise ValueError(f"{name}: expected a [{', '.join(map(str, dims))}] tensor, got {got}")
    return t.shape


def expect(name, t, shape, dtype, device):
    """Raise ValueError naming `name` unless `t` is a contiguous tensor of this shape, dtype
    and device."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.shape != shape:
        raise ValueError(f"{name}: expected shape {list(shape)}, got {list(t.shape)}")
    if t.dtype != dtype:
        raise ValueError(f"{name}: expected dtype {dtype}, got {t.dtype}")
    if t.device != device:
        raise ValueError(f"{name}: expected device {device} (that of q), got {t.device}")
    if not t.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous tensor")


def expect_all(names, tensors, expected, device):
    """expect for every argument, named by `names`, against its (shape, dtype) in `expected`;
    state may be None."""
    for name, t, (shape, dtype) in zip(names, tensors, expected):
        if not (t is None and name == "state"):
            expect(name, t, shape, dtype, device)


_compiled_fitting = None  # host_checks' compiled pass, where enabled (use_compiled_checks)


def use_compiled_checks(fitting):
    """Have fitting_pointers ask `fitting` first (host_checks.enable; None: Python alone)."""
    global _compiled_fitting
    _compiled_fitting = fitting


def compiled_checks():
    """The compiled pass fitting_pointers asks first, or None."""
    return _compiled_fitting


# Imported here, below the @triton.jit helpers: their line numbers are part of the compiled kernels'
# keys (the architecture report's, docs/data/arch), which an import above them would move.
from .tensor_guards import Guards  # noqa: E402

_PLAIN_GUARDS = Guards()  # fitting_pointers' guards (tensor_guards), by `expected`
# pooled_pointers' guards of the pool and the indices, by `expected`: in place (no write_indices) or not
_SLOT_GUARDS = {True: Guards(), False: Guards()}
_data_ptr = torch.Tensor.data_ptr  # guards are made from plain tensors only


def fitting_pointers(names, tensors, expected, device):
    """The data pointers of `tensors` in order (None for a state of None) if each passes
    expect's checks against its (shape, dtype) in `expected`, else None: one cheap pass that
    raises nothing (a caller that needs the message runs expect_all, or its own checks). Where
    host_checks is enabled its compiled pass answers first, else a guard made from an earlier
    call's tensors that passed (tensor_guards); where neither confirms, this pass decides."""
    if _compiled_fitting is not None:
        pointers = _compiled_fitting(names, tensors, expected, device)
        if pointers is not None:
            return pointers
    elif _PLAIN_GUARDS.confirmed(expected, tensors) is not None:
        return list(map(_data_ptr, tensors))
    pointers = []
    for t, (shape, dtype) in zip(tensors, expected):
        if isinstance(t, Tensor) and t.shape == shape and t.dtype is dtype and t.device == device and t.is_contiguous():
            pointers.append(t.data_ptr())
        elif t is None and names[len(pointers)] == "state":
            pointers.append(None)
        else:
            return None
    if _compiled_fitting is None:
        _PLAIN_GUARDS.learn(expected, tensors, True)
    return pointers


def checked_pointers(names, tensors, expected, device):
    """fitting_pointers, or ValueError naming the first argument that fails expect's checks
    (only a failing call runs expect_all, for the message)."""
    pointers = fitting_pointers(names, tensors, expected, device)
    if pointers is None:
        expect_all(names, tensors, expected, device)
        raise AssertionError("fitting_pointers and expect_all disagree")
    return pointers


POOL_ROW = torch.Size((NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE))  # a pool slot's shape
INDEX_DTYPES = (torch.int32, torch.int64)  # what pool indices may be


def pooled_pointers(names, tensors, expected, pool, read_indices, write_indices, rows, device):
    """A pooled call's checks in one cheap pass: (the data pointers in the kernels' order: those
    of `tensors` (fitting_pointers' against `expected`: q, k, v, then the rest) with the pool's
    after q, k, v (the state read) and after the rest (the new state), then read_indices' and
    write_indices'; the pool size P; write_indices, read_indices where it is None) where every
    argument passes them (the pool a contiguous [P, 8, 128, 128] float32 tensor on `device`, the
    indices contiguous [rows] int32 or int64 tensors of one dtype on it), else None:
    pooled_checks then names the first argument that fails. The pool and the indices are
    confirmed by a guard made from an earlier call's that passed (tensor_guards; kept with
    their device, which the guard does not compare with q's), else checked here."""
    pointers = fitting_pointers(names, tensors, expected, device)
    if pointers is None:
        return None
    in_place = write_indices is None or write_indices is read_indices
    slots = (pool, read_indices) if in_place else (pool, read_indices, write_indices)
    guards = _SLOT_GUARDS[in_place]
    known = guards.confirmed(expected, slots)
    if known is not None and known[1] == device:
        pool_size = known[0]
    elif (isinstance(pool, Tensor) and pool.dim() == 4 and pool.shape[1:] == POOL_ROW
          and pool.dtype is torch.float32 and pool.device == device and pool.is_contiguous()
          and isinstance(read_indices, Tensor) and read_indices.shape == (rows,)
          and read_indices.dtype in INDEX_DTYPES and read_indices.device == device and read_indices.is_contiguous()
          and (in_place or (isinstance(write_indices, Tensor) and write_indices.shape == read_indices.shape
                            and write_indices.dtype is read_indices.dtype and write_indices.device == device
                            and write_indices.is_contiguous()))):
        pool_size = pool.shape[0]
        guards.learn(expected, slots, (pool_size, device))
    else:
        return None
    pool_ptr, read_ptr = pool.data_ptr(), read_indices.data_ptr()
    pointers[3:3] = (pool_ptr,)  # after q, k, v: the state read
    pointers += (pool_ptr, read_ptr, read_ptr if in_place else write_indices.data_ptr())
    return pointers, pool_size, slots[-1]


def pooled_checks(names, tensors, expected, pool, read_indices, write_indices, rows, device):
    """pooled_pointers' checks one argument at a time, in the order of a pooled call's signature
    (q, k, v: the first three of `names`; state_pool; read_indices; the rest of `names`;
    write_indices): ValueError naming the first that fails."""
    expect_all(names[:3], tensors[:3], expected[:3], device)
    expect_pool("state_pool", pool, device)
    expect_indices("read_indices", read_indices, rows, device)
    expect_all(names[3:], tensors[3:], expected[3:], device)
    expect_write_indices(write_indices, read_indices)


def expect_pool(name, pool, device):
    """The pool size P of `pool` if it is a contiguous [P, 8, 128, 128] float32 tensor on `device`
    (K-last states, as serving engines keep them); else ValueError naming it."""
    pool_size = expect_rank(name, pool, ("pool_size", NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE))[0]
    expect(name, pool, torch.Size((pool_size, *POOL_ROW)), torch.float32, device)
    return pool_size


def expect_indices(name, indices, batch, device):
    """The dtype of `indices` if it is a contiguous [batch] int32 or int64 tensor on `device`;
    else ValueError naming it."""
    dtype = getattr(indices, "dtype", None)
    if isinstance(indices, torch.Tensor) and dtype not in INDEX_DTYPES:
        raise ValueError(f"{name}: expected dtype torch.int32 or torch.int64, got {dtype}")
    expect(name, indices, torch.Size((batch,)), dtype, device)
    return dtype


def expect_write_indices(write_indices, read_indices):
    """write_indices, or read_indices where it is None (an update in place), once it is a
    contiguous tensor of read_indices' shape, dtype and device; else ValueError naming it."""
    if write_indices is None:
        return read_indices
    expect("write_indices", write_indices, read_indices.shape, read_indices.dtype, read_indices.device)
    return write_indices


def scale_value(scale):
    """scale as a Python float: 0 or None mean 1/sqrt(D); a one-element float tensor is read;
    any other real number (numpy's too) is taken as it is, but not a bool. A nonzero finite
    Python float, what the evaluator passes, returns at the first test."""
    if scale.__class__ is float and scale != 0.0 and math.isfinite(scale):
        return scale
    if scale is None:
        return 1.0 / math.sqrt(HEAD_SIZE)
    if isinstance(scale, torch.Tensor):
        if scale.numel() != 1 or not scale.is_floating_point():
            raise ValueError(f"scale: expected a one-element float tensor, got {scale.dtype} of shape {list(scale.shape)}")
        scale = scale.item()
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale):
        raise ValueError(f"scale: expected a finite real number, 0 or None, got {scale!r}")
    value = float(scale)
    return value if value != 0.0 else 1.0 / math.sqrt(HEAD_SIZE)


# --- Launching --------------------------------------------------------------------------
# Triton's per-call path (argument binding, specialization key, cache lookup, a driver query
# per pointer) costs more host time than a small kernel takes on the GPU. After the first
# launch of a configuration, later ones can call the compiled kernel's launcher directly
# with raw pointers (docs/perf.md, decode item 4 and "Notes moved from the code"), and below
# the Python wrapper of Triton's launcher where it has nothing to do (direct_launch).
_RUNTIME_KNOBS = getattr(getattr(triton, "knobs", None), "runtime", None)


def hooks_installed():
    """Whether a launch hook is set: profilers need Triton's full launch path (a hook is
    assumed on Triton versions without `knobs`)."""
    if _RUNTIME_KNOBS is None:
        return True
    enter, leave = _RUNTIME_KNOBS.launch_enter_hook, _RUNTIME_KNOBS.launch_exit_hook
    return bool(getattr(enter, "calls", enter) or getattr(leave, "calls", leave))


def all_aligned(pointers, more=0):
    """Whether every data pointer among `pointers` (None where a tensor is absent), and `more`,
    is a multiple of 16 bytes, as a compiled kernel's launch by the direct path assumes
    (Launcher)."""
    return not math.gcd(*filter(None, pointers), more) & 15  # 16 divides every one iff it divides their gcd


def lowered(args):
    """(args with every tensor as its data pointer, whether every such pointer is 16-byte
    aligned): what Launcher.prepare launches with."""
    raw = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]
    pointers = [r for r, a in zip(raw, args) if isinstance(a, torch.Tensor)]
    return raw, all_aligned(pointers)


def given(args):
    """Launch arguments as a sequence: `args` itself, or what it returns where it is a function
    (Launcher.prepare)."""
    return args() if callable(args) else args


class Launcher:
    """Launches one @triton.jit kernel whose constexpr parameters come last.

    `launch` launches at once. `prepare` does all the work of a launch but the launch itself
    and returns a function of no arguments that makes it, so that a call of several launches
    can prepare them all first and then make them back to back (the host time between two
    kernels is then only the launch); `prepare_by_name` takes the arguments by parameter
    name, and `order` puts arguments given by name in the kernel's order (once, for a caller
    that keeps the order). Arguments are positional, constexprs last, in the kernel's order. The first
    launch of a configuration goes through Triton (which compiles it); later ones call the
    compiled kernel's C launcher directly with raw pointers (direct_launch: below Triton's
    per-call argument binding and its launcher's Python wrapper, descriptors encoded once),
    or the wrapper where that is what the kernel needs. That is valid while the arguments
    specialize as on the first launch: integer arguments marked do_not_specialize (or
    constant per configuration), every pointer 16-byte aligned (as the compiled kernel
    assumes), and no launch hook installed. A probe with an empty grid checks once that the
    launcher takes these arguments (Triton versions differ); if no way does, Triton's path
    stays for that configuration.
    """

    def __init__(self, fn):
        self.fn = fn
        self.configs = {}  # (constexprs, warps, options) -> its number (config)
        self._last_config = (None, None, None, None)  # the last one config numbered, with its number
        # (device index, config number, specialization) -> its DirectEntry, or None where no way
        # takes the arguments; an entry, once made, is never replaced in its dict
        self.compiled = {}
        _LAUNCHERS.add(self)

    @property
    def compiled(self):
        """The compiled kernels kept for the direct path (see __init__)."""
        return self._compiled

    @compiled.setter
    def compiled(self, entries):
        """Replace them (a tool that stubs launches puts its own back): every layout that
        direct_layouts gave is then stale (launch_generation)."""
        self._compiled = entries
        _forget_layouts()

    def prepare(self, grid, args, constexprs, num_warps, device_index, lowered_args=None, specialization=(),
                options=()):
        """The launch of fn[grid](*args, **dict(constexprs), num_warps=num_warps, **dict(options))
        on device `device_index` (grid: three sizes), as a function of no arguments. `constexprs`:
        (name, value) pairs in parameter order (hashable: a caller may keep them); `options`:
        compile options as (name, value) pairs (maxnreg), part of the cache key.
        `lowered_args`: what lowered(args) gives, where the caller has it at hand; then `args`
        may be a function of no arguments that gives them, called only where the launch goes
        through Triton (a caller that computes raw pointers need not make those tensors).
        `specialization`: whatever else makes Triton compile the kernel anew (the dtype of a
        tensor whose dtype varies), part of the cache key with the constexprs and the warps."""
        run, run_args = self._launch_call(grid, args, constexprs, num_warps, device_index, lowered_args, specialization,
                                          options)
        return lambda: run(*run_args)

    def order(self, args, constexprs):
        """(the values of `args` in parameter order, `constexprs` as (name, value) pairs in
        parameter order) for arguments given by parameter name: `args` the runtime ones,
        `constexprs` the constexpr ones (dicts: together, every parameter of the kernel once;
        TypeError otherwise)."""
        names = [name for name in self.fn.arg_names if name not in constexprs]
        if sorted(names) != sorted(args) or len(names) + len(constexprs) != len(self.fn.arg_names):
            raise TypeError(f"{self.fn.__name__}: arguments {sorted(args)} and {sorted(constexprs)} do not match "
                            f"its parameters {self.fn.arg_names}")
        return tuple(args[name] for name in names), tuple((name, constexprs[name]) for name in self.fn.arg_names
                                                          if name in constexprs)

    def prepare_by_name(self, grid, args, constexprs, num_warps, device_index):
        """prepare(...) with the arguments given by parameter name (see order); the tensors'
        dtypes are its specialization."""
        ordered, pairs = self.order(args, constexprs)
        dtypes = tuple(a.dtype for a in ordered if isinstance(a, torch.Tensor))
        return self.prepare(grid, ordered, pairs, num_warps, device_index, specialization=dtypes)

    def launch(self, grid, args, constexprs, num_warps, device_index, lowered_args=None, specialization=(),
               options=()):
        """prepare(...)() with nothing made in between, for a call of one launch (no function
        is built: this is the whole host path of a small call)."""
        run, run_args = self._launch_call(grid, args, constexprs, num_warps, device_index, lowered_args, specialization,
                                          options)
        run(*run_args)

    def config(self, constexprs, num_warps, options=()):
        """The number of the configuration (constexprs, num_warps, options) (prepare's), the same
        for equal ones: the compiled kernels' key holds it, cheap to hash where the tuple it stands
        for is not (a caller that launches one configuration often keeps it: prefill's Steps)."""
        last = self._last_config  # a call of one configuration again (decode's plan keeps its tuples)
        if last[0] is constexprs and last[1] == num_warps and last[2] is options:
            return last[3]
        number = self.configs.setdefault((constexprs, num_warps, options), len(self.configs))
        self._last_config = (constexprs, num_warps, options, number)
        return number

    def direct_layout(self, grid, config, device_index, specialization=()):
        """(function, layout, stream getter) for launches of configuration `config` (its number:
        config) on `grid` by the direct path: function(*layout(stream_getter(device_index), raw))
        makes prepare's launch with the raw arguments `raw` (lowered's: tensors as addresses,
        every pointer 16-byte aligned, no launch hook installed: the caller's to know); None
        where the configuration has no direct path (not launched yet, or no way takes its
        arguments)."""
        entry = self._compiled.get((device_index, config, specialization))
        return entry and (entry.way.run, _layout(entry, grid), entry.stream_of)

    def _launch_call(self, grid, args, constexprs, num_warps, device_index, lowered_args, specialization, options):
        """(function, its arguments) that make prepare's launch: the compiled kernel's launcher
        and raw arguments where the direct path is valid, else _through_triton and its."""
        raw, aligned = lowered_args or lowered(given(args))
        config = self.config(constexprs, num_warps, options)
        direct = aligned and not hooks_installed() and _direct(self, grid, raw, config, device_index, specialization)
        if direct:
            return direct
        key = (device_index, config, specialization)
        return self._through_triton, (grid, args, constexprs, num_warps, options, key, raw, aligned)

    def _through_triton(self, grid, args, constexprs, num_warps, options, key, raw, aligned):
        """Launch through Triton; after the first launch of a configuration, keep its compiled
        kernel for the direct path if its launcher takes these arguments."""
        compiled = self.fn[grid](*given(args), **dict(constexprs), num_warps=num_warps, **dict(options))
        if key not in self.compiled and aligned and not INTERPRETED:
            values, kept = tuple(value for _, value in constexprs), {}
            probed = _probed_way(compiled, key[0], (*raw, *values), kept)
            self.compiled[key] = probed and DirectEntry(*probed, values, kept, {})


class LaunchRecord(NamedTuple):
    """A launch as recording_launches records it: the @triton.jit function, the grid (three
    sizes), its runtime arguments as given (tensors, numbers, None; in parameter order), its
    constexprs as (name, value) pairs in parameter order, the warps and the compile options
    as (name, value) pairs."""
    fn: object
    grid: tuple
    args: tuple
    constexprs: tuple
    num_warps: int
    options: tuple = ()


_LAUNCHERS = weakref.WeakSet()  # every Launcher of this module's package, for recording_launches
_RECORDS = []  # the lists recording_launches records into (a stack: the last one is in force)


class _RecordingLauncher(Launcher):
    """What a Launcher is while recording_launches is in force: its launches are recorded, not
    made (the class of every Launcher is swapped, so that a normal launch checks nothing)."""

    def prepare(self, grid, args, constexprs, num_warps, device_index, lowered_args=None, specialization=(),
                options=()):
        """A function of no arguments that records the launch (see Launcher.prepare)."""
        record = LaunchRecord(self.fn, tuple(grid), tuple(given(args)), constexprs, num_warps, options)
        return lambda: _RECORDS[-1].append(record)

    def launch(self, grid, args, constexprs, num_warps, device_index, lowered_args=None, specialization=(),
               options=()):
        """Record the launch (see Launcher.launch)."""
        self.prepare(grid, args, constexprs, num_warps, device_index, options=options)()

    def direct_layout(self, grid, config, device_index, specialization=()):
        """None: a launch is recorded by prepare, never made directly (see Launcher.direct_layout)."""
        return None


def recording():
    """Whether recording_launches is in force (launches are recorded, nothing runs)."""
    return bool(_RECORDS)


class recording_launches:
    """Context manager: inside it, every launch of a Launcher of this package is recorded into
    the list it returns (LaunchRecord, in launch order) and nothing is launched or compiled,
    whatever the tensors' device, so that a tool (the architecture report, the tuner) can ask an
    entry point which launches a call makes; with planning_for, on a GPU it does not have."""

    def __enter__(self):
        self.launches = []
        _RECORDS.append(self.launches)
        for launcher in _LAUNCHERS:
            launcher.__class__ = _RecordingLauncher
        _forget_layouts()
        return self.launches

    def __exit__(self, *exc):
        _RECORDS.pop()
        if not _RECORDS:
            for launcher in _LAUNCHERS:
                launcher.__class__ = Launcher


class DirectEntry(NamedTuple):
    """A compiled kernel kept for the direct path (Launcher.compiled): the LaunchWay that the probe
    took, the stream getter, the constexprs' values, the descriptors' encodings kept
    (direct_launch.launch_arguments' `kept`) and its argument layouts by grid (_layout)."""
    way: object
    stream_of: object
    constants: tuple
    kept: dict
    layouts: dict


def _direct(launcher, grid, raw, config, device_index, specialization):
    """(function, its arguments) that make `launcher`'s launch of `raw` by the direct path (under
    Launcher.direct_layout's conditions), or None: what its own launches call (_launch_call)."""
    entry = launcher._compiled.get((device_index, config, specialization))
    if not entry:
        return None
    way, stream_of, _, _, layouts = entry
    layout = layouts.get(grid) or _layout(entry, grid)
    return way.run, layout(stream_of(device_index), raw)


def _layout(entry, grid):
    """DirectEntry `entry`'s argument layout for `grid` (direct_launch.argument_layout), made once
    (_KEPT_LAYOUTS grids at most; more forget them all)."""
    layout = entry.layouts.get(grid)
    if layout is None:
        if len(entry.layouts) >= _KEPT_LAYOUTS:
            entry.layouts.clear()
        layout = entry.layouts[grid] = argument_layout(grid, entry.way, entry.constants, entry.kept)
    return layout


_KEPT_LAYOUTS = 256  # argument layouts kept per compiled kernel (one per grid)


_GENERATION = 0  # bumped where kept launch layouts go stale (launch_generation)


def launch_generation():
    """A number that changes whenever layouts from direct_layouts may have gone stale: a
    Launcher's compiled kernels replaced (a tool that stubs launches puts its own back), or
    launches recorded (recording_launches). A caller keeps what direct_layouts gave it with
    this number, and asks again when it differs (a kept compiled kernel is never replaced in
    its dict, so nothing else makes them stale)."""
    return _GENERATION


def direct_layouts(launches, device_index, specialization=()):
    """(stream getter, ((function, layout), ...)) for `launches`, a sequence of (Launcher, grid,
    config), each made by function(*layout(stream, raw)) as Launcher.direct_layout says (the same
    conditions), or None where one has no direct path or their stream getters differ (a stub's
    among real ones: gdn_bench.launch_stubs). For a caller that keeps them (launch_generation),
    so that a call of several launches asks no cache per launch."""
    made = [launcher.direct_layout(grid, config, device_index, specialization) for launcher, grid, config in launches]
    if not all(made) or len({stream_of for _, _, stream_of in made}) > 1:
        return None
    return made[0][2], tuple((run, layout) for run, layout, _ in made)


def _forget_layouts():
    """Make every layout direct_layouts gave stale (launch_generation)."""
    global _GENERATION
    _GENERATION += 1


def _probed_way(compiled, device_index, args, kept):
    """(the first of direct_launch.ways_to_launch(compiled) that takes `args`, the stream getter
    to launch it with), else None; `args`: every argument of the kernel in order, constexprs
    included, tensors as raw pointers.

    Triton versions differ in their launchers' arguments. The probe launches an empty grid (the
    launcher parses every argument, then skips a grid of size 0), so nothing runs twice; where
    no way takes them, Triton's full path is kept for good."""
    stream_of = triton.runtime.driver.active.get_current_stream
    for way in ways_to_launch(compiled):
        try:
            way.run(*launch_arguments((0, 0, 0), stream_of(device_index), way, args, kept))
        except (TypeError, AttributeError, SystemError, ValueError):
            continue
        return way, stream_of
    return None

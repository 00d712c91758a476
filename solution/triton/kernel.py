"""Gated Delta Net decode step, fused recurrent Triton kernel (K-last state).

Definition ``gdn_decode_qk4_v8_d128_k_last`` (Qwen3-Next linear attention, TP=4).
For every batch row b and value head h (query/key head hq = h // 2), with D = 128:

    g      = exp(-exp(A_log[h]) * softplus(a[b,h] + dt_bias[h]))       decay gate
    beta   = sigmoid(b[b,h])                                           update gate
    S      = state[b,h]                                (D_v x D_k, K contiguous: "K-last")
    delta  = beta * (v[b,h] - g * (S @ k[b,hq]))                       (D_v,)
    S'     = g * S + outer(delta, k[b,hq])                             new_state[b,h]
    out    = scale * (S' @ q[b,hq]) = scale * (g * (S @ q) + (k . q) * delta)

The last identity lets one pass over S produce both reductions (S @ k and S @ q)
independently, so the output needs no second sweep over the updated state.

One program handles a BV-row tile of one (b, h) state matrix: it reads the tile once,
writes it once, and computes both gates itself. ``state=None`` means S = 0 (nothing is
read). ``scale`` of 0 or None means 1/sqrt(D).

Only torch, triton and the standard library are imported: the official evaluator has
nothing else.
"""

import functools
import math
import numbers
import operator
import os
from typing import NamedTuple

import torch
import triton
import triton.language as tl

NUM_Q_HEADS = 4
NUM_V_HEADS = 8
HEAD_SIZE = 128


class LaunchRow(NamedTuple):
    """One row of LAUNCH_TABLE: batch sizes up to max_batch (None: any larger one, the last
    row) run with block_v state rows per program and `warps` warps per program."""
    max_batch: int | None
    block_v: int
    warps: int


# Launch configuration per batch size, rows in increasing max_batch. Rewritten by
# scripts/tune_launch.py --write from a sweep on a GPU.
LAUNCH_TABLE = (
    LaunchRow(max_batch=16, block_v=4, warps=1),
    LaunchRow(max_batch=None, block_v=16, warps=1),
)


@triton.jit
def _softplus(x):
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
def _delta_rule_step(s, q, k, v, g, beta, scale):
    """One token on a [BV, D] tile of a state S: returns (out, S') with
    S' = g * S + outer(delta, k), delta = beta * (v - g * (S @ k)) and
    out = scale * (S' @ q) = scale * (g * (S @ q) + (k . q) * delta), from one pass over S."""
    s_k = tl.sum(s * k[None, :], axis=1)
    s_q = tl.sum(s * q[None, :], axis=1)
    delta = beta * (v - g * s_k)
    out = scale * (g * s_q + tl.sum(q * k, axis=0) * delta)
    return out, g * s + delta[:, None] * k[None, :]


@triton.jit(do_not_specialize=["pool_size"])
def _gdn_decode_kernel(
    q_ptr, k_ptr, v_ptr, state_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr,
    out_ptr, new_state_ptr, read_index_ptr, write_index_ptr, scale, pool_size,
    HAS_STATE: tl.constexpr, POOLED: tl.constexpr, HQ: tl.constexpr, HV: tl.constexpr,
    D: tl.constexpr, BV: tl.constexpr,
):
    tile = tl.program_id(0)          # which BV-row tile of the V dimension
    bh = tl.program_id(1)            # b * HV + h
    batch = bh // HV
    head = bh % HV
    qk_row = batch * HQ + head // (HV // HQ)

    offs_k = tl.arange(0, D)
    offs_v = tile * BV + tl.arange(0, BV)

    q = tl.load(q_ptr + qk_row * D + offs_k).to(tl.float32)
    k = tl.load(k_ptr + qk_row * D + offs_k).to(tl.float32)
    v = tl.load(v_ptr + bh * D + offs_v).to(tl.float32)

    x = tl.load(a_ptr + bh).to(tl.float32) + tl.load(dt_bias_ptr + head)
    g = tl.exp(-tl.exp(tl.load(A_log_ptr + head)) * _softplus(x))
    beta = 1.0 / (1.0 + tl.exp(-tl.load(b_ptr + bh).to(tl.float32)))

    if POOLED:  # state_ptr and new_state_ptr are the pool [pool_size, HV, D, D]: see pooled_decode
        read = tl.load(read_index_ptr + batch).to(tl.int64)
        write = tl.load(write_index_ptr + batch).to(tl.int64)
        padding = read < 0
        reads = (read >= 0) & (read < pool_size) & (write < pool_size)  # a slot past the pool: NaN out
        writes = reads & (write >= 0)
        tile_offs = offs_v[:, None] * D + offs_k[None, :]
        # Whole-tile masks, as comparisons of the row offsets (Triton's interpreter cannot broadcast
        # a scalar mask), constant along K so that loads and stores stay vectorized.
        read_mask = offs_v[:, None] < tl.where(reads, D, 0)
        write_mask = offs_v[:, None] < tl.where(writes, D, 0)
        s = tl.load(state_ptr + (tl.where(reads, read, 0) * HV + head) * (D * D) + tile_offs, mask=read_mask,
                    other=0.0)
        out, s_new = _delta_rule_step(s, q, k, v, g, beta, scale)
        tl.store(new_state_ptr + (tl.where(writes, write, 0) * HV + head) * (D * D) + tile_offs, s_new,
                 mask=write_mask)
        out = tl.where(reads, out, tl.where(padding, 0.0, float("nan")))
    else:
        s_offs = bh.to(tl.int64) * (D * D) + offs_v[:, None] * D + offs_k[None, :]
        if HAS_STATE:
            s = tl.load(state_ptr + s_offs)
            out, s_new = _delta_rule_step(s, q, k, v, g, beta, scale)
        else:
            delta = beta * v
            out = scale * tl.sum(q * k, axis=0) * delta
            s_new = delta[:, None] * k[None, :]
        tl.store(new_state_ptr + s_offs, s_new)
    tl.store(out_ptr + bh * D + offs_v, out.to(out_ptr.dtype.element_ty))


# --- Host side: checks, configuration, launch --------------------------------------------
# At small batch the GPU work takes a few microseconds (docs/perf.md), so host time per call
# matters (a harness that synchronizes every call, or a serving loop without CUDA graphs,
# pays it). The checks are one cheap pass over the tensors that also collects their
# pointers; only a failing call pays for the detailed messages. Launches after the first of
# a configuration skip Triton's per-call binding (see _launch).

_ARG_NAMES = ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "output", "new_state")
_STATE = _ARG_NAMES.index("state")


def _launch_config(batch, launch_table):
    """(BV, num_warps) for this batch size from a launch table like LAUNCH_TABLE."""
    for row in launch_table:
        if row.max_batch is None or batch <= row.max_batch:
            return row.block_v, row.warps
    raise AssertionError("LAUNCH_TABLE must end with an unbounded row (max_batch=None)")


def _expected(batch):
    """(shape, dtype) of each argument in _ARG_NAMES order at batch size `batch`."""
    bf16, f32 = torch.bfloat16, torch.float32
    qk, heads = (batch, 1, NUM_Q_HEADS, HEAD_SIZE), (batch, 1, NUM_V_HEADS)
    state = (batch, NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE)
    specs = ((qk, bf16), (qk, bf16), (heads + (HEAD_SIZE,), bf16), (state, f32), ((NUM_V_HEADS,), f32),
             (heads, bf16), ((NUM_V_HEADS,), f32), (heads, bf16), (heads + (HEAD_SIZE,), bf16), (state, f32))
    return tuple((torch.Size(shape), dtype) for shape, dtype in specs)


@functools.lru_cache(maxsize=256)
def _plan(batch, has_state, launch_table):
    """Everything a call at this batch size needs besides the tensors: the expected
    (shape, dtype) per argument in _ARG_NAMES order, the grid, the constexpr arguments and
    the warps. `launch_table` is part of the cache key so that a new LAUNCH_TABLE applies."""
    block_v, num_warps = _launch_config(batch, launch_table)
    grid = (HEAD_SIZE // block_v, batch * NUM_V_HEADS)
    constexprs = (has_state, False, NUM_Q_HEADS, NUM_V_HEADS, HEAD_SIZE, block_v)
    return _expected(batch), grid, constexprs, num_warps


def _pointers(tensors, expected, device):
    """The tensors' data pointers if each has its expected shape and dtype, q's device and a
    contiguous layout (state may be None: its slot then holds new_state's pointer); else None."""
    ptrs = []
    try:
        for t, (shape, dtype) in zip(tensors, expected):
            if t is None and len(ptrs) == _STATE:
                ptrs.append(None)
            elif t.shape == shape and t.dtype is dtype and t.device == device and t.is_contiguous():
                ptrs.append(t.data_ptr())
            else:
                return None
    except AttributeError:  # not a tensor
        return None
    if ptrs[_STATE] is None:
        ptrs[_STATE] = ptrs[-1]
    return ptrs


def _expect(name, t, shape, dtype, device):
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


def _expect_all(tensors, expected, device):
    """_expect for every argument, in _ARG_NAMES order, against its (shape, dtype) in
    `expected`; state may be None."""
    for name, t, (shape, dtype) in zip(_ARG_NAMES, tensors, expected):
        if not (t is None and name == "state"):
            _expect(name, t, shape, dtype, device)


def _scale_value(scale):
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


def kernel(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):
    """DPS entry point: writes `output` [B,1,8,128] bf16 and `new_state` [B,8,128,128] f32.

    Launches exactly one kernel. Raises ValueError naming the first bad argument.
    """
    if not isinstance(q, torch.Tensor) or q.dim() != 4:
        got = f"shape {list(q.shape)}" if isinstance(q, torch.Tensor) else type(q).__name__
        raise ValueError(f"q: expected a [B, 1, {NUM_Q_HEADS}, {HEAD_SIZE}] tensor, got {got}")
    batch, device = q.shape[0], q.device
    tensors = (q, k, v, state, A_log, a, dt_bias, b, output, new_state)
    expected, grid, constexprs, num_warps = _plan(batch, state is not None, LAUNCH_TABLE)
    ptrs = _pointers(tensors, expected, device)
    if ptrs is None:
        _expect_all(tensors, expected, device)
        raise AssertionError("_pointers and _expect_all disagree")
    scale = _scale_value(scale)
    if batch == 0:
        return
    if state is None:  # the kernel reads nothing through this pointer when HAS_STATE is false
        tensors = tensors[:_STATE] + (new_state,) + tensors[_STATE + 1:]
    aligned = not functools.reduce(operator.or_, ptrs) & 15
    _launch(grid, (*tensors, None, None, scale, None), (*ptrs, None, None, scale, None), aligned, constexprs,
            num_warps, (device.index, constexprs, num_warps))


def _expect_pool(name, pool, device):
    """The pool size P of `pool` if it is a contiguous [P, 8, 128, 128] float32 tensor on `device`
    (K-last states, as serving engines keep them); else ValueError naming it."""
    if not isinstance(pool, torch.Tensor) or pool.dim() != 4:
        got = f"shape {list(pool.shape)}" if isinstance(pool, torch.Tensor) else type(pool).__name__
        raise ValueError(f"{name}: expected a [pool_size, {NUM_V_HEADS}, {HEAD_SIZE}, {HEAD_SIZE}] tensor, got {got}")
    _expect(name, pool, torch.Size((pool.shape[0], NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE)), torch.float32, device)
    return pool.shape[0]


def _expect_indices(name, indices, batch, device):
    """The dtype of `indices` if it is a contiguous [batch] int32 or int64 tensor on `device`;
    else ValueError naming it."""
    dtype = getattr(indices, "dtype", None)
    if isinstance(indices, torch.Tensor) and dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{name}: expected dtype torch.int32 or torch.int64, got {dtype}")
    _expect(name, indices, torch.Size((batch,)), dtype, device)
    return dtype


def pooled_decode(q, k, v, state_pool, read_indices, A_log, a, dt_bias, b, scale, output, write_indices=None):
    """One decode step over a state pool, as a serving engine calls it: batch row i starts from
    S = state_pool[read_indices[i]] and its new state goes to state_pool[write_indices[i]]
    (write_indices None: read_indices, an update in place). Writes `output` [B,1,8,128] bf16;
    the other arguments are kernel()'s, the pool [P,8,128,128] f32 and the indices [B] int32 or
    int64 (both the same dtype).

    Index conventions: a negative read index marks a padding row: its output is zeroed and no
    slot is read or written. A negative write index alone keeps the row's output and writes no
    state. An index >= P cannot be raised without waiting on the device: that row's output is
    NaN and no slot is touched. A slot is written only by the program that read the same tile
    first, so rows may update in place; but rows must not share a write slot, nor write a slot
    another row reads (the order of rows is not defined).

    The same kernel as kernel() (POOLED adds the index loads and masks). Launches exactly one
    kernel, never synchronizes with the device and allocates nothing, so a CUDA graph can
    capture it (with scale a number: a tensor scale is read on the host). Raises ValueError
    naming the first bad argument.
    """
    if not isinstance(q, torch.Tensor) or q.dim() != 4:
        got = f"shape {list(q.shape)}" if isinstance(q, torch.Tensor) else type(q).__name__
        raise ValueError(f"q: expected a [B, 1, {NUM_Q_HEADS}, {HEAD_SIZE}] tensor, got {got}")
    batch, device = q.shape[0], q.device
    expected = _expected(batch)
    for name, t, index in (("q", q, 0), ("k", k, 1), ("v", v, 2)):
        _expect(name, t, *expected[index], device)
    pool_size = _expect_pool("state_pool", state_pool, device)
    index_dtype = _expect_indices("read_indices", read_indices, batch, device)
    for name, t, index in (("A_log", A_log, 4), ("a", a, 5), ("dt_bias", dt_bias, 6), ("b", b, 7),
                           ("output", output, 8)):
        _expect(name, t, *expected[index], device)
    if write_indices is None:
        write_indices = read_indices
    _expect("write_indices", write_indices, torch.Size((batch,)), index_dtype, device)
    scale = _scale_value(scale)
    if batch == 0:
        return
    block_v, num_warps = _launch_config(batch, LAUNCH_TABLE)
    grid = (HEAD_SIZE // block_v, batch * NUM_V_HEADS)
    constexprs = (True, True, NUM_Q_HEADS, NUM_V_HEADS, HEAD_SIZE, block_v)
    tensors = (q, k, v, state_pool, A_log, a, dt_bias, b, output, state_pool, read_indices, write_indices)
    ptrs = tuple(t.data_ptr() for t in tensors)
    aligned = not functools.reduce(operator.or_, ptrs) & 15
    _launch(grid, (*tensors, scale, pool_size), (*ptrs, scale, pool_size), aligned, constexprs, num_warps,
            (device.index, constexprs, num_warps, index_dtype))


# Launching. Triton's per-call path (argument binding, specialization key, cache lookup, a
# driver query per pointer) costs more host time than the kernel takes on the GPU at small
# batch. After the first launch of a configuration, later ones call the compiled kernel's
# launcher directly with raw pointers. That is valid while the arguments specialize the same
# way: every pointer 16-byte aligned (as the compiled kernel assumes; tensors were checked
# to be on q's device above) and no launch hook installed (profilers need the full path).
_INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"
_RUNTIME_KNOBS = getattr(getattr(triton, "knobs", None), "runtime", None)
_compiled = {}  # _launch's key -> (CompiledKernel, stream getter) or False


def _hooks_installed():
    """Whether a launch hook is set: profilers need Triton's full launch path (a hook is
    assumed on Triton versions without `knobs`)."""
    if _RUNTIME_KNOBS is None:
        return True
    enter, leave = _RUNTIME_KNOBS.launch_enter_hook, _RUNTIME_KNOBS.launch_exit_hook
    return bool(getattr(enter, "calls", enter) or getattr(leave, "calls", leave))


def _launch(grid, args, raw, aligned, constexprs, num_warps, key):
    """Launch _gdn_decode_kernel on `args` (its arguments before the constexprs; None for the
    index pointers and pool size of the dense path); `raw` is the same with every tensor as its
    data pointer, `aligned` whether those are all 16-byte aligned, `key` (device index first)
    what the compiled kernel is cached under: whatever changes its specialization."""
    entry = _compiled.get(key)
    if entry and aligned and not _hooks_installed():
        compiled, stream_of = entry
        compiled.run(grid[0], grid[1], 1, stream_of(key[0]), compiled.function, compiled.packed_metadata,
                     None, None, None, *raw, *constexprs)
        return
    has_state, pooled, hq, hv, d, bv = constexprs
    compiled = _gdn_decode_kernel[grid](
        *args, HAS_STATE=has_state, POOLED=pooled, HQ=hq, HV=hv, D=d, BV=bv, num_warps=num_warps,
    )
    if entry is None and aligned and not _INTERPRETED:
        _compiled[key] = _direct_launcher(compiled, key[0], (*raw, *constexprs))


def _direct_launcher(compiled, device_index, args):
    """(compiled kernel, stream getter) if its launcher takes `args` (every argument of the
    kernel in order, constexprs included, tensors as raw pointers), else False.

    Triton versions differ in the launcher's arguments. The probe launches an empty grid (the
    launcher parses every argument, then skips a grid of size 0), so nothing runs twice; on
    a mismatch the full path is kept for good."""
    stream_of = triton.runtime.driver.active.get_current_stream
    try:
        compiled.run(0, 0, 0, stream_of(device_index), compiled.function, compiled.packed_metadata,
                     None, None, None, *args)
    except (TypeError, AttributeError, SystemError):
        return False
    return compiled, stream_of

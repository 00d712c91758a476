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

Only torch, triton, the standard library and the sibling module shared.py (packed with this
file) are imported: the official evaluator has nothing else.
Lines above the kernel keep their count: its line numbers are in the kernels' report.
"""

import functools

import triton
import triton.language as tl

from .shared import (HEAD_SIZE, NUM_Q_HEADS, NUM_V_HEADS, Launcher, LaunchRow, all_aligned, arch_key,
                     checked_pointers, delta_rule_step, expect_rank, expected_specs, launch_row, pool_slots,
                     pooled_checks, pooled_pointers, scale_value, step_gates)

# Launch configuration per architecture (shared.arch_key) and batch size, rows in increasing
# max_batch. scripts/tune_launch.py --write rewrites the rows of the GPU's architecture from a
# sweep on it; sm100 has sm90's rows until a sweep on a B200 (docs/data/arch: they compile
# there without spills). Triton's interpreter costs about 5 ms per program whatever its tile:
# there, two 64-row tiles per head (a configuration the tuner also tries).
LAUNCH_TABLES = {
    "sm90": (
        LaunchRow(max_batch=16, block_v=4, warps=1),
        LaunchRow(max_batch=None, block_v=16, warps=1),
    ),
    "sm100": (
        LaunchRow(max_batch=16, block_v=4, warps=1),
        LaunchRow(max_batch=None, block_v=16, warps=1),
    ),
    "interpreter": (
        LaunchRow(max_batch=None, block_v=64, warps=1),
    ),
}


@triton.jit(do_not_specialize=["pool_size"])
def _gdn_decode_kernel(
    q_ptr, k_ptr, v_ptr, state_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr,
    out_ptr, new_state_ptr, read_index_ptr, write_index_ptr, scale, pool_size,
    HAS_STATE: tl.constexpr, POOLED: tl.constexpr, HQ: tl.constexpr, HV: tl.constexpr,
    D: tl.constexpr, BV: tl.constexpr, IN_PLACE: tl.constexpr,
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
    qk = tl.sum(q * k, axis=0)

    g, beta = step_gates(tl.load(A_log_ptr + head), tl.load(dt_bias_ptr + head), a_ptr, b_ptr, bh)

    if POOLED:  # state_ptr and new_state_ptr are the pool [pool_size, HV, D, D]: see pooled_decode
        if IN_PLACE:  # the write indices are the read ones: one index load, and the tile goes back where it was
            write_index_ptr = read_index_ptr
        read, write, reads, writes, fill = pool_slots(read_index_ptr, write_index_ptr, batch, pool_size)
        tile_offs = offs_v[:, None] * D + offs_k[None, :]
        # Whole-tile masks, as comparisons of the row offsets (Triton's interpreter cannot broadcast
        # a scalar mask), constant along K so that loads and stores stay vectorized.
        read_mask = offs_v[:, None] < tl.where(reads, D, 0)
        write_mask = offs_v[:, None] < tl.where(writes, D, 0)
        s = tl.load(state_ptr + (read * HV + head) * (D * D) + tile_offs, mask=read_mask, other=0.0)
        out, s_new = delta_rule_step(s, q, k, v, g, beta, scale, qk)
        tl.store(new_state_ptr + (write * HV + head) * (D * D) + tile_offs, s_new, mask=write_mask)
        out = tl.where(reads, out, fill)
    else:
        s_offs = bh.to(tl.int64) * (D * D) + offs_v[:, None] * D + offs_k[None, :]
        if HAS_STATE:
            s = tl.load(state_ptr + s_offs)
            out, s_new = delta_rule_step(s, q, k, v, g, beta, scale, qk)
        else:
            delta = beta * v
            out = scale * qk * delta
            s_new = delta[:, None] * k[None, :]
        tl.store(new_state_ptr + s_offs, s_new)
    tl.store(out_ptr + bh * D + offs_v, out.to(out_ptr.dtype.element_ty))


# --- Host side: checks, configuration, launch --------------------------------------------
# At small batch the GPU work takes a few microseconds (docs/perf.md), so host time per call
# matters (a harness that synchronizes every call, or a serving loop without CUDA graphs,
# pays it). The checks are one cheap pass over the tensors that also collects their
# pointers; only a failing call pays for the detailed messages. Launches after the first of
# a configuration skip Triton's per-call binding (shared.Launcher).

ARG_NAMES = ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "output", "new_state")
Q_DIMS = ("B", 1, NUM_Q_HEADS, HEAD_SIZE)  # q's layout, for expect_rank
_STATE = ARG_NAMES.index("state")
POOLED_NAMES = ("q", "k", "v", "A_log", "a", "dt_bias", "b", "output")  # pooled_decode's, as kernel()'s
_launcher = Launcher(_gdn_decode_kernel)
# pooled_decode in place takes the kernel's IN_PLACE variant (one index load a row) for tiles of
# at least this many rows: on an H200 it read 0.3-0.5 µs faster at B = 32-64 (16-row tiles), but
# with 4-row tiles 0.06 µs slower at B = 1 and 0.05-0.12 µs slower by graph at B = 4-16
# (docs/perf.md item 37).
IN_PLACE_MIN_BLOCK_V = 16


def expected_arguments(batch):
    """(shape, dtype) of each argument in ARG_NAMES order at batch size `batch`."""
    return expected_specs(ARG_NAMES, (batch, 1), batch)


def _constexprs(has_state, pooled, block_v, in_place):
    """The kernel's constexpr arguments as (name, value) pairs (in_place: pooled, with the read
    indices as the write ones)."""
    return (("HAS_STATE", has_state), ("POOLED", pooled), ("HQ", NUM_Q_HEADS), ("HV", NUM_V_HEADS), ("D", HEAD_SIZE),
            ("BV", block_v), ("IN_PLACE", in_place))


@functools.lru_cache(maxsize=256)
def _plan(batch, has_state, launch_table):
    """Everything a call at this batch size needs besides the tensors: the expected
    (shape, dtype) per argument in ARG_NAMES order, the grid, the constexpr arguments as
    (name, value) pairs and the warps. `launch_table` (the architecture's LAUNCH_TABLES row) is
    part of the cache key so that a new table applies."""
    row = launch_row(batch, launch_table)
    block_v, num_warps = row.block_v, row.warps
    grid = (HEAD_SIZE // block_v, batch * NUM_V_HEADS, 1)
    return expected_arguments(batch), grid, _constexprs(has_state, False, block_v, False), num_warps


def kernel(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):
    """DPS entry point: writes `output` [B,1,8,128] bf16 and `new_state` [B,8,128,128] f32.

    Launches exactly one kernel. Raises ValueError naming the first bad argument.
    """
    batch, device = expect_rank("q", q, Q_DIMS)[0], q.device
    tensors = (q, k, v, state, A_log, a, dt_bias, b, output, new_state)
    expected, grid, constexprs, num_warps = _plan(batch, state is not None, LAUNCH_TABLES[arch_key(device)])
    ptrs = checked_pointers(ARG_NAMES, tensors, expected, device)
    scale = scale_value(scale)
    if batch == 0:
        return
    if state is None:  # the kernel reads nothing through this pointer when HAS_STATE is false
        tensors = tensors[:_STATE] + (new_state,) + tensors[_STATE + 1:]
        ptrs[_STATE] = ptrs[-1]
    aligned = all_aligned(ptrs)
    _launcher.launch(grid, (*tensors, None, None, scale, None), constexprs, num_warps, device.index,
                     ((*ptrs, None, None, scale, None), aligned))


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

    The same kernel as kernel() (POOLED adds the index loads and masks; IN_PLACE, chosen when
    the write indices are the read ones and the tiles large, loads one index a row). Launches
    exactly one kernel, never synchronizes with the device and allocates nothing, so a CUDA
    graph can capture it (with scale a number: a tensor scale is read on the host). Raises
    ValueError naming the first bad argument.
    """
    batch, device = expect_rank("q", q, Q_DIMS)[0], q.device
    tensors = (q, k, v, A_log, a, dt_bias, b, output)
    expected = expected_specs(POOLED_NAMES, (batch, 1), batch)
    checked = pooled_pointers(POOLED_NAMES, tensors, expected, state_pool, read_indices, write_indices, batch, device)
    if checked is None:  # the first bad argument, in the order of the signature
        pooled_checks(POOLED_NAMES, tensors, expected, state_pool, read_indices, write_indices, batch, device)
        raise AssertionError("pooled_pointers and pooled_checks disagree")
    ptrs, pool_size, write_indices = checked
    scale = scale_value(scale)
    if batch == 0:
        return
    row = launch_row(batch, LAUNCH_TABLES[arch_key(device)])
    block_v, num_warps = row.block_v, row.warps
    grid = (HEAD_SIZE // block_v, batch * NUM_V_HEADS, 1)
    args = (q, k, v, state_pool, A_log, a, dt_bias, b, output, state_pool, read_indices, write_indices, scale,
            pool_size)
    aligned = all_aligned(ptrs)
    constexprs = _constexprs(True, True, block_v, write_indices is read_indices and block_v >= IN_PLACE_MIN_BLOCK_V)
    _launcher.launch(grid, args, constexprs, num_warps, device.index,
                     ((*ptrs, scale, pool_size), aligned), specialization=(read_indices.dtype,))

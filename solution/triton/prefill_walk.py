"""Short prefill calls: the recurrence token by token, as decode does it, in one launch (no
scratch, no chunks), for calls where the chunked path's per-block work would dominate."""

import triton
import triton.language as tl

from .prefill_common import (cu_seqlens_load, cu_seqlens_ok, even_part, mark_rows, output_scale, sequence_bounds,
                             state_offsets)
from .shared import gates, pool_slots


@triton.jit
def _token_tile(q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, start, limit, head, offs_k, cols,
                HQ: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, CT: tl.constexpr):
    """The CT tokens start <= t < start + CT, as tiles: q and k [CT, D] (bf16), v's columns
    `cols` [CT, BV] (bf16), a and b [CT] (float32), of value head `head`; zeros where t >= limit."""
    rows = start + tl.arange(0, CT)
    here = rows < limit
    qk = (rows[:, None] * HQ + head // (HV // HQ)) * D + offs_k[None, :]
    q = tl.load(q_ptr + qk, mask=here[:, None], other=0.0)
    k = tl.load(k_ptr + qk, mask=here[:, None], other=0.0)
    v = tl.load(v_ptr + (rows[:, None] * HV + head) * D + cols[None, :], mask=here[:, None], other=0.0)
    a = tl.load(a_ptr + rows * HV + head, mask=here, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + rows * HV + head, mask=here, other=0.0).to(tl.float32)
    return q, k, v, a, b


@triton.jit
def _row(tile, j, CT: tl.constexpr):
    """Row j of a [CT, W] tile, as float32."""
    return tl.sum(tl.where(tl.arange(0, CT)[:, None] == j, tile.to(tl.float32), 0.0), axis=0)


@triton.jit
def _element(vector, j, CT: tl.constexpr):
    """Element j of a [CT] vector."""
    return tl.sum(tl.where(tl.arange(0, CT) == j, vector, 0.0), axis=0)


@triton.jit(do_not_specialize=["T", "N", "pool_size"])
def token_walk_kernel(
    q_ptr, k_ptr, v_ptr, state_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr, cu_ptr, out_ptr, new_state_ptr,
    read_index_ptr, write_index_ptr, scale, scale_ptr, T, N, pool_size,
    HAS_STATE: tl.constexpr, SCALE_FROM_PTR: tl.constexpr, POOLED: tl.constexpr, HQ: tl.constexpr,
    HV: tl.constexpr, D: tl.constexpr, BV: tl.constexpr, BN: tl.constexpr, CT: tl.constexpr,
):
    """One (BV rows of S, sequence and value head): the recurrence token by token, as decode
    does it, with the S rows in float32 registers (S = state, K last):

        g = exp(-exp(A_log) softplus(a_t + dt_bias)),  beta = sigmoid(b_t)
        delta = beta (v_t - g S k_t),  out_t = scale (g S q_t + (k_t . q_t) delta)
        S = g S + outer(delta, k_t)

    The tokens' inputs are loaded CT at a time (the next tile while this one is walked), so
    that a load's latency is paid once per tile, and the steps of a tile are unrolled, so that
    each token's gates and rows are ready before the state gets to it: what is left per token
    is its dependent chain. The first tile's loads go out before the bounds are known, at the
    token where an even split of T would put the sequence (even_part), and are made again
    only if the sequence starts elsewhere. A malformed cu_seqlens: NaN in new_state, in the
    rows the program wrote and in those of its even part (mark_rows). POOLED (pooled_prefill):
    state_ptr and new_state_ptr are the pool, the tile is read from the sequence's read slot
    and written to its write slot (pool_slots; an empty sequence copies it unchanged), and a
    sequence that is not live writes its fill as outputs."""
    v_tile = tl.program_id(0)
    seq = tl.program_id(1) // HV
    head = tl.program_id(1) % HV
    offs_k = tl.arange(0, D)
    cols = v_tile * BV + tl.arange(0, BV)
    guess, guess_end = even_part(seq, N, T)
    q, k, v, a, b = _token_tile(q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, guess, T, head, offs_k, cols, HQ, HV, D, CT)
    bos, eos = sequence_bounds(cu_ptr, seq, T, False)
    lower, upper, cu_first, cu_last = cu_seqlens_load(cu_ptr, N, BN)
    read_offs = state_offsets(seq, head, cols[:, None], offs_k[None, :], HV, D)
    write_offs = read_offs
    write_mask = None
    if POOLED:
        read, write, live, writes, fill = pool_slots(read_index_ptr, write_index_ptr, seq, pool_size)
        read_offs = state_offsets(read, head, cols[:, None], offs_k[None, :], HV, D)
        write_offs = state_offsets(write, head, cols[:, None], offs_k[None, :], HV, D)
        # Whole-tile masks as comparisons of the row offsets (the interpreter cannot broadcast a scalar mask).
        write_mask = cols[:, None] < tl.where(writes, D, 0)
        s = tl.load(state_ptr + read_offs, mask=cols[:, None] < tl.where(live, D, 0), other=0.0)
    elif HAS_STATE:
        s = tl.load(state_ptr + read_offs)
    else:
        s = tl.zeros([BV, D], dtype=tl.float32)
    A_log = tl.load(A_log_ptr + head)
    dt_bias = tl.load(dt_bias_ptr + head)
    scale = output_scale(scale, scale_ptr, SCALE_FROM_PTR, D)
    if bos != guess:
        q, k, v, a, b = _token_tile(q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, bos, eos, head, offs_k, cols, HQ, HV, D, CT)
    for start in range(bos, eos, CT):
        q_c, k_c, v_c, a_c, b_c = q, k, v, a, b
        q, k, v, a, b = _token_tile(q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, start + CT, eos, head, offs_k, cols,
                                    HQ, HV, D, CT)
        log_g, beta = gates(A_log, a_c, dt_bias, b_c)
        g = tl.exp(log_g)
        qk = tl.sum(q_c.to(tl.float32) * k_c.to(tl.float32), axis=1)
        for j in tl.static_range(CT):
            if start + j < eos:
                k_t = _row(k_c, j, CT)
                q_t = _row(q_c, j, CT)
                g_t = _element(g, j, CT)
                delta = _element(beta, j, CT) * (_row(v_c, j, CT) - g_t * tl.sum(s * k_t[None, :], axis=1))
                o = scale * (g_t * tl.sum(s * q_t[None, :], axis=1) + _element(qk, j, CT) * delta)
                if POOLED:
                    o = tl.where(live, o, fill)
                tl.store(out_ptr + ((start + j) * HV + head) * D + cols, o.to(out_ptr.dtype.element_ty))
                s = g_t * s + delta[:, None] * k_t[None, :]
    ok = cu_seqlens_ok(lower, upper, cu_first, cu_last, cu_ptr, N, T, BN)
    if not POOLED:
        s = tl.where(eos > bos, s, 0.0)  # an empty sequence ends at zero
    tl.store(new_state_ptr + write_offs, tl.where(ok, s, float("nan")), mask=write_mask)
    if not ok:
        mark_rows(out_ptr, bos, eos, head, cols, HV, D)
        mark_rows(out_ptr, guess, guess_end, head, cols, HV, D)

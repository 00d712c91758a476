"""Stage 2 of the chunked prefill path with spans: each span's affine map of the state (the
span summary) and the states entering the spans, in order (the fix-up).

A block maps the state affinely (prefill_carry): H_L = P_c H0 + N_c with P_c = e^G_end I -
K^T (e^(G_end - G) * Tb (e^G * K)) (K x K) and N_c = K^T (e^(G_end - G) * Tb V), so a run of
blocks does too. For each span but a sequence's last, P_j and N_j come from carrying the
identity and zero through its blocks, all spans in parallel (the summary); then the states
entering the spans follow one after another, H_{j+1} = P_j H_j + N_j, the first from the
sequence's own state (the fix-up), one product per span. The span pass (prefill_pass) then
computes every span's outputs in parallel from its entering state.
"""

import triton
import triton.language as tl

from .prefill_carry import carry_blocks, load_start_state
from .prefill_common import state_offsets
from .prefill_order import walk_piece
from .prefill_spans import sequence_span
from .shared import pool_slots


@triton.jit(do_not_specialize=["T", "J", "S", "pool_size"])
def span_summary_kernel(
    state_ptr, cu_ptr, k16_ptr, v_ptr, tb_ptr, gate_ptr, flag_ptr, order_ptr, span_n_ptr, span_p_ptr, enter_ptr,
    read_index_ptr, write_index_ptr, T, J, S, pool_size,
    SINGLE: tl.constexpr, ORDERED: tl.constexpr, HAS_STATE: tl.constexpr, POOLED: tl.constexpr, HQ: tl.constexpr,
    HV: tl.constexpr, D: tl.constexpr, C: tl.constexpr, BV: tl.constexpr, STAGES: tl.constexpr,
):
    """One (sequence, span but its last, value head, BV of the 2D columns [V | K]): the span's
    affine map of the state, H_end = P H_start + N, in slot (sequence J + span): N [D, D] in
    float32 to span_n, P [D, D] in float16 (only an operand of products) to span_p. N from the
    zero state and P from the identity, both by carry_blocks; span 0 starts from the
    sequence's state instead, so its N is already the state entering span 1 (and its P is not
    needed). POOLED (pooled_prefill): that state is the sequence's read slot of the pool
    state_ptr (a sequence that is not live is skipped), and span 0 also copies it to enter
    slot (sequence J), where the pass's span 0 reads it: the pass's last span may rewrite the
    slot in the meantime."""
    NV: tl.constexpr = D // BV
    tile, head, seq, span, bos, eos, first, count, spans = walk_piece(
        tl.program_id(0), J - 1, order_ptr, cu_ptr, T, S, J, SINGLE, ORDERED, 2 * NV, HV, C)  # prefill_order
    is_v = tile < NV
    if POOLED:
        read, _, live, _, _ = pool_slots(read_index_ptr, write_index_ptr, seq, pool_size)
    else:  # a constant: the condition below compiles as if it were not there
        read = seq
        live: tl.constexpr = True
    if (span < spans - 1) & (is_v | (span > 0)) & live:
        offs_d = tl.arange(0, D)
        cols = (tile % NV) * BV + tl.arange(0, BV)
        use_v = cols < is_v.to(tl.int32) * D  # all of them for N's columns, none for P's
        if span == 0:
            h = load_start_state(state_ptr, state_offsets(read, head, cols[None, :], offs_d[:, None], HV, D),
                                 bos, eos, flag_ptr, HAS_STATE, POOLED, D, BV)
            if POOLED:
                tl.store(enter_ptr + state_offsets(seq * J, head, cols[None, :], offs_d[:, None], HV, D), h)
        else:
            h = tl.where((offs_d[:, None] == cols[None, :]) & (tile >= NV), 1.0, 0.0)
        h = carry_blocks(h, k16_ptr, k16_ptr, v_ptr, v_ptr, tb_ptr, tb_ptr, gate_ptr, first, count, bos, eos, head,
                         cols, use_v, False, HQ, HV, D, C, STAGES, False)
        slot = ((seq * J + span) * HV + head).to(tl.int64) * (D * D) + offs_d[:, None] * D + cols[None, :]
        if is_v:
            tl.store(span_n_ptr + slot, h)
        else:
            tl.store(span_p_ptr + slot, h.to(tl.float16))


@triton.jit(do_not_specialize=["T", "J", "S"])
def span_fixup_kernel(
    cu_ptr, span_n_ptr, span_p_ptr, enter_ptr, T, J, S,
    SINGLE: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, C: tl.constexpr, BV: tl.constexpr,
    STAGES: tl.constexpr,
):
    """One (sequence, value head, BV columns of V): the state entering each span of the
    sequence from the spans' maps, in order: H_1 = N_0, H_{j+1} = P_j H_j + N_j; H_j goes to enter slot (sequence J + j). The only
    sequential part over a long sequence: one [D, D] x [D, BV] product per span."""
    v_tile = tl.program_id(0)
    head = tl.program_id(1)
    seq = tl.program_id(2)
    bos, eos, first, count, spans = sequence_span(cu_ptr, seq, 0, T, S, J, SINGLE, C)
    offs_d = tl.arange(0, D)
    cols = v_tile * BV + tl.arange(0, BV)
    if spans > 1:
        base = (seq * J * HV + head).to(tl.int64)
        h = tl.load(span_n_ptr + base * (D * D) + offs_d[:, None] * D + cols[None, :])
        tl.store(enter_ptr + (base + HV) * (D * D) + cols[None, :] * D + offs_d[:, None], h)
        for span in tl.range(1, spans - 1, num_stages=STAGES):
            slot = (base + span * HV) * (D * D)
            p = tl.load(span_p_ptr + slot + offs_d[:, None] * D + offs_d[None, :])
            n = tl.load(span_n_ptr + slot + offs_d[:, None] * D + cols[None, :])
            h = tl.dot(p, h.to(tl.float16)) + n
            tl.store(enter_ptr + slot + HV * (D * D) + cols[None, :] * D + offs_d[:, None], h)

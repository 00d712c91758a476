"""Stage 3 of the chunked prefill path: the span pass, each (sequence, span)'s outputs and the
final states. Without spans (J = 1) it is the fused path: one program per (sequence, value
head, BV columns of V) walks its whole sequence's blocks with the state in registers, every
operand made on chip from q, k, v and the prep's Tb, M and gates (prefill_carry)."""

import triton
import triton.language as tl

from .prefill_carry import carry_blocks, load_start_state
from .prefill_common import fill_rows, state_offsets
from .prefill_order import walk_piece
from .shared import pool_slots


@triton.jit(do_not_specialize=["T", "J", "S", "pool_size"])
def span_pass_kernel(
    state_ptr, cu_ptr, q16_ptr, k16_ptr, v_ptr, tb_ptr, m_ptr, gate_ptr, flag_ptr, order_ptr, enter_ptr, out_ptr,
    new_state_ptr, read_index_ptr, write_index_ptr, T, J, S, pool_size, SINGLE: tl.constexpr, ORDERED: tl.constexpr,
    HAS_STATE: tl.constexpr, POOLED: tl.constexpr, HQ: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, C: tl.constexpr,
    BV: tl.constexpr, STAGES: tl.constexpr, PREFETCH: tl.constexpr,
):
    """One (sequence, span, value head, BV columns of V): the span's outputs by carry_blocks,
    from the sequence's state (span 0) or the state the fix-up found entering the span; the
    last span writes new_state (an empty sequence's span 0: zero). With J = 1 every sequence
    is one span and this is the whole state pass. A malformed cu_seqlens: the prep's flag
    makes every state NaN (load_start_state), so every output and new_state this writes is
    NaN. POOLED (pooled_prefill): state_ptr and new_state_ptr are the pool; a sequence starts
    from its read slot (span 0 of several: from the summary's copy of it) and its last span
    writes its write slot; a sequence that is not live (pool_slots) writes its rows' fill."""
    v_tile, head, seq, span, bos, eos, first, count, spans = walk_piece(
        tl.program_id(0), J, order_ptr, cu_ptr, T, S, J, SINGLE, ORDERED, D // BV, HV, C)  # prefill_order
    if span < tl.maximum(spans, 1):
        offs_d = tl.arange(0, D)
        cols = v_tile * BV + tl.arange(0, BV)
        read = seq
        write = seq
        from_state = span == 0
        if POOLED:
            read, write, live, writes, fill = pool_slots(read_index_ptr, write_index_ptr, seq, pool_size)
            from_state = from_state & (spans <= 1)
        else:  # constants: the branches below compile as if they were not there
            live: tl.constexpr = True
            writes: tl.constexpr = True
        read_offs = state_offsets(read, head, cols[None, :], offs_d[:, None], HV, D)
        write_offs = state_offsets(write, head, cols[None, :], offs_d[:, None], HV, D)
        if live:
            if from_state:
                h = load_start_state(state_ptr, read_offs, bos, eos, flag_ptr, HAS_STATE, POOLED, D, BV)
            else:
                slot = ((seq * J + span) * HV + head).to(tl.int64) * (D * D)
                h = tl.load(enter_ptr + slot + cols[None, :] * D + offs_d[:, None])
            h = carry_blocks(h, q16_ptr, k16_ptr, v_ptr, out_ptr, tb_ptr, m_ptr, gate_ptr, first, count, bos, eos, head,
                             cols, cols < D, True, HQ, HV, D, C, STAGES, PREFETCH)
            if (span >= spans - 1) & writes:
                tl.store(new_state_ptr + write_offs, h)
        else:
            fill_rows(out_ptr, tl.maximum(bos, first * C), tl.minimum(eos, (first + count) * C), head, cols,
                      fill + tl.load(flag_ptr), HV, D)

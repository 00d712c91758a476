"""Stages 2 and 3 of the chunked prefill path on Hopper, in Gluon: the span summary and the span
pass (without spans, the fused pass). One program per (sequence, span, value head, BV columns)
walks its span's blocks with its rows of the state in registers, as prefill_maps and
prefill_pass do, but each block's tiles (the prep's
float16 k, q, Tb and M, and v) come by TMA into a ring of STAGES shared-memory buffers, the next
block's issued before this block's products and its gates loaded a block ahead, so that the loads
overlap the chain; and every product takes its computed operand from registers (wgmma's A), the
loaded tile as B, so nothing computed is staged through shared memory.

With S the state's rows `cols` ([BV, D], K last: S = H^T of prefill_carry) and a block's K, Q
[C, D], V [C, BV], Tb, M [C, C] and gate rows (prefill_prep), the block step is prefill_carry's,
transposed:

    X^T     = V^T - (S K^T) * e^G            (column i of the product times e^(G_i))
    Delta^T = X^T Tb^T                       (columns of other sequences' rows: 0)
    O^T     = (S Q^T) * (scale e^G) + Delta^T M^T
    S       = e^G_end S + (Delta^T * e^(G_end - G)) K

(the summary: without O, and with V = 0 for the rows of the transition P, prefill_maps).

Rows of a block that belong to other sequences need no mask: Tb and M do not mix sequences, so
their X columns reach only their own Delta columns, which reach the state only through their
e^(G_end - G), set to 0, and the outputs only of their own rows, which are not stored. The output block goes through the stage's v buffer (its v already read)
to full-width stores. Triton's `experimental.gluon` (Hopper's wgmma, TMA and mbarriers) compiles
this for sm_90 only; prefill.py takes it where HOPPER_PASS_TABLE names a launch (docs/perf.md
items 26-27 have its measurements).
"""

import functools
from typing import NamedTuple

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from .prefill_common import fill_rows
from .prefill_order import walk_piece
from .prefill_prep import GATE_ROWS
from .shared import pool_slots

# TMA's tile load, as this Triton names it (async_copy_global_to_shared before 3.9).
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
# A barrier of the program's warps, as this Triton names it (thread_barrier in 3.6).
warps_barrier = getattr(gl, "barrier", None) or gl.thread_barrier


class Address(NamedTuple):
    """A tensor as a TMA descriptor reads it, when it is made and each time a launch encodes it:
    its first element's device address and its dtype, and nothing of its memory (a descriptor
    made over an Address may be kept without keeping the memory alive)."""
    address: int
    dtype: object

    def data_ptr(self):
        return self.address


def tile_descriptors(bases, v, total, blocks, block_v, hq, hv, d, c):
    """The TMA descriptors of the pass's tiles, for `blocks` blocks: over the prep's k16 with q16
    right after it, as [2 blocks HQ C, D] in [C, D] tiles (q's rows from blocks HQ C on); over
    Tb with M right after it, as [2 blocks HV C, C] in [C, C] tiles (M's from blocks HV C on);
    over v [T, HV, D] as [T, HV D] in [C, BV] tiles (rows past T read as zero). `bases`: the
    scratch tensors by name (views, or their Addresses), v the tensor or its Address. Three
    descriptors, not five: Triton's launcher encodes each on every launch (docs/serving.md).
    The shared-memory layouts are made once per shape."""
    row_tile, square, v_tile = _tile_layouts(block_v, d, c)
    return (TensorDescriptor(bases["k16"], [2 * blocks * hq * c, d], [d, 1], [c, d], row_tile),
            TensorDescriptor(bases["tb"], [2 * blocks * hv * c, c], [c, 1], [c, c], square),
            TensorDescriptor(v, [total, hv * d], [hv * d, 1], [c, block_v], v_tile))


@gluon.constexpr_function
def _mma_layout(warps, n):
    """wgmma's accumulator layout for [rows, n] products over `warps` warps (16 rows each)."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[warps, 1], instr_shape=[16, n, 16])


@functools.lru_cache(maxsize=8)
def _tile_layouts(block_v, d, c):
    """The tiles' shared-memory layouts (NVMMA swizzles for TMA and wgmma): [C, D] and [C, C]
    float16, [C, BV] bfloat16 (Gluon takes ~10 us to make each)."""
    return (gl.NVMMASharedLayout.get_default_for([c, d], gl.float16),
            gl.NVMMASharedLayout.get_default_for([c, c], gl.float16),
            gl.NVMMASharedLayout.get_default_for([c, block_v], gl.bfloat16))


@gluon.jit(do_not_specialize=["T", "J", "S", "pool_size"])
def hopper_pass_kernel(kq_desc, tbm_desc, v_desc, gate_ptr, cu_ptr, order_ptr, flag_ptr, enter_ptr,
                        state_ptr, out_ptr, new_state_ptr, read_index_ptr, write_index_ptr, T, J, S, pool_size,
                        SINGLE: gl.constexpr, ORDERED: gl.constexpr, HAS_STATE: gl.constexpr, POOLED: gl.constexpr,
                        HQ: gl.constexpr, HV: gl.constexpr, D: gl.constexpr, C: gl.constexpr, BV: gl.constexpr,
                        STAGES: gl.constexpr):
    """One (sequence, span, value head, BV columns of V), as prefill_pass.span_pass_kernel's
    programs: the span's outputs by the module's block step, from the sequence's state (span 0;
    zero without one, or for an empty sequence) or the state the fix-up found entering the span;
    the last span writes new_state. With J = 1 every sequence is one span (the fused path). 4 or
    8 warps (at most BV / 16: wgmma's warps take 16 rows each). The prep's flag (NaN for a
    malformed cu_seqlens) is added to the sequence's state, so every output and new_state
    written is NaN then (see prefill_carry). POOLED (pooled_prefill): state_ptr and
    new_state_ptr are the pool, read and written at the sequence's slots (shared.pool_slots;
    span 0 of several reads the summary's copy of its slot); a sequence that is not live writes
    its rows' fill."""
    v_tile, head, seq, span, bos, eos, first, count, spans = walk_piece(
        gl.program_id(0), J, order_ptr, cu_ptr, T, S, J, SINGLE, ORDERED, D // BV, HV, C)  # prefill_order
    if span < gl.maximum(spans, 1):
        read = seq
        write = seq
        from_state = span == 0
        if POOLED:
            read, write, live, writes, fill = pool_slots(read_index_ptr, write_index_ptr, seq, pool_size)
            from_state = from_state & (spans <= 1)
        else:  # constants (as span_pass_kernel's: from a shared helper they are not, and Gluon
            live: gl.constexpr = True  # 3.6 then fails to lower the kernel)
            writes: gl.constexpr = True
        if live:
            acc_d: gl.constexpr = _mma_layout(gl.num_warps(), D)
            cols = v_tile * BV + gl.arange(0, BV, layout=gl.SliceLayout(1, acc_d))
            rows_d = cols[:, None] * D + gl.arange(0, D, layout=gl.SliceLayout(0, acc_d))[None, :]
            if from_state:
                s = _start_state(state_ptr, read, head, rows_d, bos, eos, flag_ptr, HAS_STATE, POOLED, HV, D, BV)
            else:
                s = gl.load(enter_ptr + ((seq * J + span) * HV + head).to(gl.int64) * (D * D) + rows_d)
            s = _carry(s, kq_desc, tbm_desc, v_desc, gate_ptr, out_ptr, head, v_tile, bos, eos, first, count,
                       (T + C - 1) // C, True, True, HQ, HV, D, C, BV, STAGES)
            if (span >= spans - 1) & writes:
                gl.store(new_state_ptr + (write * HV + head).to(gl.int64) * (D * D) + rows_d, s)
        else:
            fill_cols = v_tile * BV + gl.arange(0, BV, layout=gl.BlockedLayout([1], [32], [gl.num_warps()], [0]))
            fill_rows(out_ptr, gl.maximum(bos, first * C), gl.minimum(eos, (first + count) * C), head, fill_cols,
                      fill + gl.load(flag_ptr), HV, D)


@gluon.jit(do_not_specialize=["T", "J", "S", "pool_size"])
def hopper_summary_kernel(kq_desc, tbm_desc, v_desc, gate_ptr, cu_ptr, order_ptr, flag_ptr, state_ptr, span_n_ptr,
                          span_p_ptr, enter_ptr, read_index_ptr, write_index_ptr, T, J, S, pool_size,
                          SINGLE: gl.constexpr, ORDERED: gl.constexpr, HAS_STATE: gl.constexpr,
                          POOLED: gl.constexpr, HQ: gl.constexpr, HV: gl.constexpr, D: gl.constexpr,
                          C: gl.constexpr, BV: gl.constexpr, STAGES: gl.constexpr):
    """One (sequence, span but its last, value head, BV of the 2D rows [N | P]), as
    prefill_maps.span_summary_kernel's programs: the span's affine map H_end = P H_start + N by
    the module's block step without outputs, N's rows from the zero state (span 0: from the
    sequence's state, so N is the state entering span 1 and P is not needed) and P's from the
    identity with V = 0; N to span_n (float32), P to span_p (float16), as [D, D] slots of H =
    S^T (sequence J + span). POOLED: the state is the sequence's read slot (a sequence that is
    not live is skipped), and span 0 copies it to enter slot (sequence J) for the pass."""
    NV: gl.constexpr = D // BV
    tile, head, seq, span, bos, eos, first, count, spans = walk_piece(
        gl.program_id(0), J - 1, order_ptr, cu_ptr, T, S, J, SINGLE, ORDERED, 2 * NV, HV, C)  # prefill_order
    is_v = tile < NV
    if POOLED:
        read, _, live, _, _ = pool_slots(read_index_ptr, write_index_ptr, seq, pool_size)
    else:  # a constant: the condition below compiles as if it were not there
        read = seq
        live: gl.constexpr = True
    if (span < spans - 1) & (is_v | (span > 0)) & live:
        v_tile = tile % NV
        acc_d: gl.constexpr = _mma_layout(gl.num_warps(), D)
        cols = v_tile * BV + gl.arange(0, BV, layout=gl.SliceLayout(1, acc_d))
        offs_d = gl.arange(0, D, layout=gl.SliceLayout(0, acc_d))
        if span == 0:
            rows_d = cols[:, None] * D + offs_d[None, :]
            s = _start_state(state_ptr, read, head, rows_d, bos, eos, flag_ptr, HAS_STATE, POOLED, HV, D, BV)
            if POOLED:
                gl.store(enter_ptr + (seq * J * HV + head).to(gl.int64) * (D * D) + rows_d, s)
        else:
            s = gl.where((cols[:, None] == offs_d[None, :]) & (tile >= NV), 1.0, 0.0)
        s = _carry(s, kq_desc, tbm_desc, v_desc, gate_ptr, None, head, v_tile, bos, eos, first, count, 0, is_v,
                   False, HQ, HV, D, C, BV, STAGES)
        slot = ((seq * J + span) * HV + head).to(gl.int64) * (D * D) + offs_d[None, :] * D + cols[:, None]
        if is_v:
            gl.store(span_n_ptr + slot, s)
        else:
            gl.store(span_p_ptr + slot, s.to(gl.float16))


@gluon.jit
def _start_state(state_ptr, read, head, rows_d, bos, eos, flag_ptr, HAS_STATE: gl.constexpr, POOLED: gl.constexpr,
                 HV: gl.constexpr, D: gl.constexpr, BV: gl.constexpr):
    """A sequence's rows of the state (elements `rows_d` of slot `read`), as
    prefill_carry.load_start_state gives its columns: zero without a state; not POOLED, zero for
    an empty sequence; plus the prep's flag."""
    if HAS_STATE:
        s = gl.load(state_ptr + (read * HV + head).to(gl.int64) * (D * D) + rows_d)
    else:
        s = gl.zeros([BV, D], gl.float32, rows_d.type.layout)
    if not POOLED:  # an empty sequence ends at zero (pooled: its slot is kept)
        s = gl.where(eos > bos, s, 0.0)
    return s + gl.load(flag_ptr)


@gluon.jit
def _carry(s, kq_desc, tbm_desc, v_desc, gate_ptr, out_ptr, head, v_tile, bos, eos, first, count, blocks, use_v,
           OUTPUT: gl.constexpr, HQ: gl.constexpr, HV: gl.constexpr, D: gl.constexpr, C: gl.constexpr,
           BV: gl.constexpr, STAGES: gl.constexpr):
    """The rows s [BV, D] (columns v_tile of V; float32, _mma_layout) carried through `count`
    blocks from block `first` for the sequence's tokens bos <= t < eos, by the module's block
    step, V where use_v (else 0); OUTPUT: O stored to out_ptr (the pass), else no q, M or output
    (the summary). The tiles come through tile_descriptors' three descriptors, for the call's
    `blocks` blocks (where q's and M's rows begin; OUTPUT only). Returns the rows after the
    last block."""
    bos = bos.to(gl.int32)  # TMA's coordinates are 32-bit
    eos = eos.to(gl.int32)
    first = first.to(gl.int32)
    count = count.to(gl.int32)
    WARPS: gl.constexpr = gl.num_warps()
    # wgmma's accumulators: [BV, C] (the block's products) and [BV, D] (the state), and its
    # register operand A of each.
    acc_c: gl.constexpr = _mma_layout(WARPS, C)
    acc_d: gl.constexpr = _mma_layout(WARPS, D)
    a_c: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_c, k_width=2)
    a_d: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_d, k_width=2)
    row_l: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])  # a block's gate row, compact
    out_l: gl.constexpr = gl.BlockedLayout([1, 8], [32 // (BV // 8), BV // 8], [WARPS, 1], [1, 0])

    k_s = gl.allocate_shared_memory(gl.float16, [STAGES, C, D], kq_desc.layout)
    tb_s = gl.allocate_shared_memory(gl.float16, [STAGES, C, C], tbm_desc.layout)
    v_s = gl.allocate_shared_memory(gl.bfloat16, [STAGES, C, BV], v_desc.layout)
    if OUTPUT:
        q_s = gl.allocate_shared_memory(gl.float16, [STAGES, C, D], kq_desc.layout)
        m_s = gl.allocate_shared_memory(gl.float16, [STAGES, C, C], tbm_desc.layout)
        tile_bytes: gl.constexpr = (2 * kq_desc.block_type.nbytes + 2 * tbm_desc.block_type.nbytes
                                    + v_desc.block_type.nbytes)
    else:
        q_s = k_s
        m_s = tb_s
        tile_bytes: gl.constexpr = kq_desc.block_type.nbytes + tbm_desc.block_type.nbytes + v_desc.block_type.nbytes
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for z in gl.static_range(STAGES):
        mbarrier.init(ready.index(z), count=1)
    kq_row = head // (HV // HQ) * C
    hv_row = head * C
    q_row = (blocks * (HQ * C) + kq_row).to(gl.int32)  # q16's and M's tiles follow k16's and Tb's
    m_row = (blocks * (HV * C) + hv_row).to(gl.int32)
    tile_rows = (kq_row, q_row, hv_row, m_row)
    v_col = head * D + v_tile * BV
    for z in gl.static_range(STAGES - 1):  # the first blocks' tiles
        _load_tiles(kq_desc, tbm_desc, v_desc, k_s, q_s, tb_s, m_s, v_s, ready, z, first + z, z < count, tile_rows,
                    v_col, tile_bytes, OUTPUT, HQ, HV, C)

    # The gate rows of the first block (an empty sequence at T may have no block to read).
    i_g = gl.arange(0, C, layout=row_l)
    some = (i_g >= 0) & (count > 0)
    gates = gate_ptr + (first * HV + head) * (GATE_ROWS * C)
    n_g = gl.load(gates + i_g, mask=some, other=0.0)
    n_q = gl.load(gates + C + i_g, mask=some, other=0.0)
    n_rest = gl.load(gates + 2 * C + i_g, mask=some, other=0.0)
    n_end = gl.load(gates + 3 * C + (gl.maximum(bos, first * C) - first * C), mask=count > 0, other=0.0)

    zero_c = gl.zeros([BV, C], gl.float32, acc_c)
    o_i = gl.arange(0, C, layout=gl.SliceLayout(1, out_l))
    o_cols = v_tile * BV + gl.arange(0, BV, layout=gl.SliceLayout(0, out_l))
    for it in range(count):
        warps_barrier()  # every warp is done with the stage the next loads overwrite
        _load_tiles(kq_desc, tbm_desc, v_desc, k_s, q_s, tb_s, m_s, v_s, ready, (it + STAGES - 1) % STAGES,
                    first + it + STAGES - 1, it + STAGES - 1 < count, tile_rows, v_col, tile_bytes, OUTPUT, HQ, HV, C)
        stage = it % STAGES
        block = first + it
        start = block * C
        e_g = gl.convert_layout(n_g, gl.SliceLayout(0, acc_c))
        if OUTPUT:
            e_q = gl.convert_layout(n_q, gl.SliceLayout(0, acc_c))
        # e^(G_end - G) of the block's rows of this sequence, 0 for the others': their Delta
        # columns then reach neither the state nor (M does not mix sequences) these outputs.
        mine = (start + i_g >= bos) & (start + i_g < eos)
        e_rest = gl.convert_layout(gl.where(mine, n_rest, 0.0), gl.SliceLayout(0, acc_c))
        e_end = n_end
        gates = gate_ptr + (gl.minimum(block + 1, first + count - 1) * HV + head) * (GATE_ROWS * C)
        n_g = gl.load(gates + i_g)
        if OUTPUT:
            n_q = gl.load(gates + C + i_g)
        n_rest = gl.load(gates + 2 * C + i_g)
        n_end = gl.load(gates + 3 * C)  # the next block starts inside the sequence

        mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
        k_b = k_s.index(stage)
        s16 = gl.convert_layout(s.to(gl.float16), a_c)
        sk = warpgroup_mma(s16, k_b.permute((1, 0)), zero_c, use_acc=False, is_async=True)
        if OUTPUT:
            sq = warpgroup_mma(s16, q_s.index(stage).permute((1, 0)), zero_c, use_acc=False, is_async=True)
            v = v_s.index(stage).permute((1, 0)).load(acc_c).to(gl.float32)
            sk = warpgroup_mma_wait(num_outstanding=1, deps=(sk,))
        else:
            v = gl.where(use_v, v_s.index(stage).permute((1, 0)).load(acc_c).to(gl.float32), 0.0)
            sk = warpgroup_mma_wait(num_outstanding=0, deps=(sk,))
        x16 = gl.convert_layout((v - e_g[None, :] * sk).to(gl.float16), a_c)
        delta = warpgroup_mma(x16, tb_s.index(stage).permute((1, 0)), zero_c, use_acc=False, is_async=True)
        if OUTPUT:
            delta, sq = warpgroup_mma_wait(num_outstanding=0, deps=(delta, sq))
        else:
            delta = warpgroup_mma_wait(num_outstanding=0, deps=(delta,))
        dr16 = gl.convert_layout((e_rest[None, :] * delta).to(gl.float16), a_d)
        if OUTPUT:
            d16 = gl.convert_layout(delta.to(gl.float16), a_c)
            o = warpgroup_mma(d16, m_s.index(stage).permute((1, 0)), e_q[None, :] * sq, is_async=True)
            s = warpgroup_mma(dr16, k_b, s * e_end, is_async=True)
            o, s = warpgroup_mma_wait(num_outstanding=0, deps=(o, s))

            warps_barrier()  # every warp has read this stage's v: its buffer takes O
            o_b = v_s.index(stage)
            o_b.permute((1, 0)).store(o.to(gl.bfloat16))
            warps_barrier()
            rows = start + o_i
            o_mine = (rows >= bos) & (rows < eos)
            gl.store(out_ptr + (rows[:, None] * HV + head).to(gl.int64) * D + o_cols[None, :], o_b.load(out_l),
                     mask=o_mine[:, None] & (o_cols[None, :] >= 0))
        else:
            s = warpgroup_mma(dr16, k_b, s * e_end, is_async=True)
            s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
    for z in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(z))
    return s


@gluon.jit
def _load_tiles(kq_desc, tbm_desc, v_desc, k_s, q_s, tb_s, m_s, v_s, ready, stage, block, go, tile_rows, v_col,
                tile_bytes: gl.constexpr, OUTPUT: gl.constexpr, HQ: gl.constexpr, HV: gl.constexpr, C: gl.constexpr):
    """Block `block`'s k, Tb and v tiles (OUTPUT: and q and M) into ring slot `stage` by TMA,
    counted on its barrier (nothing where `go` is false); `tile_rows`: the first rows of block
    0's k, q, Tb and M tiles in the descriptors (_carry)."""
    k_row, q_row, tb_row, m_row = tile_rows
    bar = ready.index(stage)
    mbarrier.expect(bar, tile_bytes, pred=go)
    tma_load(kq_desc, [block * (HQ * C) + k_row, 0], bar, k_s.index(stage), pred=go)
    if OUTPUT:
        tma_load(kq_desc, [block * (HQ * C) + q_row, 0], bar, q_s.index(stage), pred=go)
    tma_load(tbm_desc, [block * (HV * C) + tb_row, 0], bar, tb_s.index(stage), pred=go)
    if OUTPUT:
        tma_load(tbm_desc, [block * (HV * C) + m_row, 0], bar, m_s.index(stage), pred=go)
    tma_load(v_desc, [block * C, v_col], bar, v_s.index(stage), pred=go)

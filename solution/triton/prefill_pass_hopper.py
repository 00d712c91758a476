"""Stage 3 of the chunked prefill path on Hopper, for calls without spans: the fused pass in
Gluon. One program per (sequence, value head, BV columns of V) walks its sequence's blocks with
its rows of the state in registers, as prefill_pass does, but each block's tiles (the prep's
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

Rows of a block that belong to other sequences need no mask on the loads: Tb and M do not mix
sequences, so their X columns reach only their own Delta columns, which are zeroed; their
outputs are not stored. The output block goes through the stage's v buffer (its v already read)
to full-width stores. Triton's `experimental.gluon` (Hopper's wgmma, TMA and mbarriers) compiles
this for sm_90 only; prefill.py takes it where HOPPER_PASS_TABLE names a launch (docs/perf.md
item 26 has its measurements).
"""

import functools

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from .prefill_prep import GATE_ROWS

# TMA's tile load, as this Triton names it (async_copy_global_to_shared before 3.9).
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
# A barrier of the program's warps, as this Triton names it (thread_barrier in 3.6).
warps_barrier = getattr(gl, "barrier", None) or gl.thread_barrier


TILE_SCRATCH = ("k16", "q16", "tb", "m")  # the prep's scratch tensors the pass reads by TMA


def tile_descriptors(views, v, total, block_v, hq, hv, d, c):
    """The TMA descriptors of the pass's tiles over a call's scratch `views` (TILE_SCRATCH's
    tensors by name, as prefill._scratch_views gives them) and v [T, HV, D]: k16 and q16 as
    [blocks HQ C, D] in [C, D] tiles, Tb and M as [blocks HV C, C] in [C, C] tiles, v as
    [T, HV D] in [C, BV] tiles (rows past T read as zero). Made on the host for every call, before
    its first launch (the shared-memory layouts once per shape)."""
    blocks = views["k16"].numel() // (hq * c * d)
    row_tile, square, v_tile = _tile_layouts(block_v, d, c)
    return (TensorDescriptor(views["k16"], [blocks * hq * c, d], [d, 1], [c, d], row_tile),
            TensorDescriptor(views["q16"], [blocks * hq * c, d], [d, 1], [c, d], row_tile),
            TensorDescriptor(views["tb"], [blocks * hv * c, c], [c, 1], [c, c], square),
            TensorDescriptor(views["m"], [blocks * hv * c, c], [c, 1], [c, c], square),
            TensorDescriptor(v, [total, hv * d], [hv * d, 1], [c, block_v], v_tile))


@functools.lru_cache(maxsize=8)
def _tile_layouts(block_v, d, c):
    """The tiles' shared-memory layouts (NVMMA swizzles for TMA and wgmma): [C, D] and [C, C]
    float16, [C, BV] bfloat16 (Gluon takes ~10 us to make each)."""
    return (gl.NVMMASharedLayout.get_default_for([c, d], gl.float16),
            gl.NVMMASharedLayout.get_default_for([c, c], gl.float16),
            gl.NVMMASharedLayout.get_default_for([c, block_v], gl.bfloat16))


@gluon.jit(do_not_specialize=["T"])
def hopper_pass_kernel(k_desc, q_desc, tb_desc, m_desc, v_desc, gate_ptr, cu_ptr, order_ptr, flag_ptr, state_ptr,
                        out_ptr, new_state_ptr, T,
                        SINGLE: gl.constexpr, ORDERED: gl.constexpr, HAS_STATE: gl.constexpr, HQ: gl.constexpr,
                        HV: gl.constexpr, D: gl.constexpr, C: gl.constexpr, BV: gl.constexpr, STAGES: gl.constexpr):
    """One (sequence, value head, BV columns of V): its outputs and new_state from its state
    (zero without one, or for an empty sequence) by the module's block step, with 4 or 8 warps
    (at most BV / 16: wgmma's warps take 16 rows each). The prep's flag (NaN for a malformed
    cu_seqlens) is added to the state, so every output and new_state written is NaN then (see
    prefill_carry)."""
    WARPS: gl.constexpr = gl.num_warps()
    NV: gl.constexpr = D // BV
    pid = gl.program_id(0)
    v_tile = pid % NV
    head = (pid // NV) % HV
    piece = pid // (NV * HV)
    if ORDERED:
        seq = gl.load(order_ptr + piece)
    else:
        seq = piece
    if SINGLE:
        bos = T * 0
        eos = T
    else:  # prefill_common.sequence_bounds, clamped the same way
        bos = gl.minimum(gl.maximum(gl.load(cu_ptr + seq), 0), T).to(gl.int32)
        eos = gl.minimum(gl.maximum(gl.load(cu_ptr + seq + 1), bos), T).to(gl.int32)
    first = bos // C
    count = gl.where(eos > bos, (eos + C - 1) // C - first, 0)

    # wgmma's accumulators: [BV, C] (the block's products) and [BV, D] (the state), and its
    # register operand A of each.
    acc_c: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, C, 16])
    acc_d: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, D, 16])
    a_c: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_c, k_width=2)
    a_d: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_d, k_width=2)
    row_l: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])  # a block's gate row, compact
    out_l: gl.constexpr = gl.BlockedLayout([1, 8], [32 // (BV // 8), BV // 8], [WARPS, 1], [1, 0])

    k_s = gl.allocate_shared_memory(gl.float16, [STAGES, C, D], k_desc.layout)
    q_s = gl.allocate_shared_memory(gl.float16, [STAGES, C, D], q_desc.layout)
    tb_s = gl.allocate_shared_memory(gl.float16, [STAGES, C, C], tb_desc.layout)
    m_s = gl.allocate_shared_memory(gl.float16, [STAGES, C, C], m_desc.layout)
    v_s = gl.allocate_shared_memory(gl.bfloat16, [STAGES, C, BV], v_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for z in gl.static_range(STAGES):
        mbarrier.init(ready.index(z), count=1)
    tile_bytes: gl.constexpr = (2 * k_desc.block_type.nbytes + 2 * tb_desc.block_type.nbytes
                                + v_desc.block_type.nbytes)
    kq_row = head // (HV // HQ) * C
    hv_row = head * C
    v_col = head * D + v_tile * BV
    for z in gl.static_range(STAGES - 1):  # the first blocks' tiles
        _load_tiles(k_desc, q_desc, tb_desc, m_desc, v_desc, k_s, q_s, tb_s, m_s, v_s, ready, z, first + z,
                    z < count, kq_row, hv_row, v_col, tile_bytes, HQ, HV, C)

    cols = v_tile * BV + gl.arange(0, BV, layout=gl.SliceLayout(1, acc_d))
    offs_d = gl.arange(0, D, layout=gl.SliceLayout(0, acc_d))
    s_offs = ((seq * HV + head) * D + cols[:, None]).to(gl.int64) * D + offs_d[None, :]
    if HAS_STATE:
        s = gl.load(state_ptr + s_offs)
    else:
        s = gl.zeros([BV, D], gl.float32, acc_d)
    s = gl.where(eos > bos, s, 0.0) + gl.load(flag_ptr)

    # The gate rows of the first block (an empty sequence at T may have no block to read).
    i_g = gl.arange(0, C, layout=row_l)
    some = (i_g >= 0) & (count > 0)
    gates = gate_ptr + (first * HV + head) * (GATE_ROWS * C)
    n_g = gl.load(gates + i_g, mask=some, other=0.0)
    n_q = gl.load(gates + C + i_g, mask=some, other=0.0)
    n_rest = gl.load(gates + 2 * C + i_g, mask=some, other=0.0)
    n_end = gl.load(gates + 3 * C + (bos - first * C), mask=count > 0, other=0.0)

    i_c = gl.arange(0, C, layout=gl.SliceLayout(0, acc_c))
    zero_c = gl.zeros([BV, C], gl.float32, acc_c)
    o_i = gl.arange(0, C, layout=gl.SliceLayout(1, out_l))
    o_cols = v_tile * BV + gl.arange(0, BV, layout=gl.SliceLayout(0, out_l))
    for it in range(count):
        warps_barrier()  # every warp is done with the stage the next loads overwrite
        _load_tiles(k_desc, q_desc, tb_desc, m_desc, v_desc, k_s, q_s, tb_s, m_s, v_s, ready,
                    (it + STAGES - 1) % STAGES, first + it + STAGES - 1, it + STAGES - 1 < count, kq_row, hv_row,
                    v_col, tile_bytes, HQ, HV, C)
        stage = it % STAGES
        block = first + it
        start = block * C
        mine = (start + i_c >= bos) & (start + i_c < eos)
        e_g = gl.convert_layout(n_g, gl.SliceLayout(0, acc_c))
        e_q = gl.convert_layout(n_q, gl.SliceLayout(0, acc_c))
        e_rest = gl.convert_layout(n_rest, gl.SliceLayout(0, acc_c))
        e_end = n_end
        gates = gate_ptr + (gl.minimum(block + 1, first + count - 1) * HV + head) * (GATE_ROWS * C)
        n_g = gl.load(gates + i_g)
        n_q = gl.load(gates + C + i_g)
        n_rest = gl.load(gates + 2 * C + i_g)
        n_end = gl.load(gates + 3 * C)  # the next block starts inside the sequence

        mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
        k_b = k_s.index(stage)
        s16 = gl.convert_layout(s.to(gl.float16), a_c)
        sk = warpgroup_mma(s16, k_b.permute((1, 0)), zero_c, use_acc=False, is_async=True)
        sq = warpgroup_mma(s16, q_s.index(stage).permute((1, 0)), zero_c, use_acc=False, is_async=True)
        v = v_s.index(stage).permute((1, 0)).load(acc_c).to(gl.float32)
        sk = warpgroup_mma_wait(num_outstanding=1, deps=(sk,))
        x16 = gl.convert_layout((v - e_g[None, :] * sk).to(gl.float16), a_c)
        delta = warpgroup_mma(x16, tb_s.index(stage).permute((1, 0)), zero_c, use_acc=False, is_async=True)
        delta, sq = warpgroup_mma_wait(num_outstanding=0, deps=(delta, sq))
        delta = gl.where(mine[None, :], delta, 0.0)
        d16 = gl.convert_layout(delta.to(gl.float16), a_c)
        dr16 = gl.convert_layout((e_rest[None, :] * delta).to(gl.float16), a_d)
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
    gl.store(new_state_ptr + s_offs, s)
    for z in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(z))


@gluon.jit
def _load_tiles(k_desc, q_desc, tb_desc, m_desc, v_desc, k_s, q_s, tb_s, m_s, v_s, ready, stage, block, go, kq_row,
                hv_row, v_col, tile_bytes: gl.constexpr, HQ: gl.constexpr, HV: gl.constexpr, C: gl.constexpr):
    """Block `block`'s k, q, Tb, M and v tiles into ring slot `stage` by TMA, counted on its
    barrier (nothing where `go` is false)."""
    bar = ready.index(stage)
    mbarrier.expect(bar, tile_bytes, pred=go)
    tma_load(k_desc, [block * (HQ * C) + kq_row, 0], bar, k_s.index(stage), pred=go)
    tma_load(q_desc, [block * (HQ * C) + kq_row, 0], bar, q_s.index(stage), pred=go)
    tma_load(tb_desc, [block * (HV * C) + hv_row, 0], bar, tb_s.index(stage), pred=go)
    tma_load(m_desc, [block * (HV * C) + hv_row, 0], bar, m_s.index(stage), pred=go)
    tma_load(v_desc, [block * C, v_col], bar, v_s.index(stage), pred=go)


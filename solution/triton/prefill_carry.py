"""Stage 2 of the chunked prefill path, its step: the state carried through blocks, with every
operand made on chip from v and the prep's float16 k and q, Tb, M and gates (prefill_prep).

Write H = S^T ([K, V]) and H0 the state before a segment. The segment's corrections and
outputs, with X the values less what the state already predicts,

    X     = V - e^G * (K H0)                rows i: v_i - e^(G_i) H0^T k_i
    Delta = Tb X                            (= U - W H0 with U = Tb V, W = Tb (e^G * K))
    O     = (scale e^G) * (Q H0) + M Delta
    H     = e^G_end H0 + K^T (e^(G_end - G) * Delta)

(x * Y: row i of Y times x_i). This is exact algebra: Delta_i = beta_i (v_i - H_{i-1}^T
e^(g_i) k_i), unrolled. The row factors are applied to [C, BV] products in float32, so the
float16 operands are k and q as they are (the prep's float16 copies of the bfloat16 inputs),
H, X, Delta and the prep's Tb and M. All log-decays are differences G_i - G_j <= 0
taken before exp, so long or strong decays underflow to 0, never to NaN.

The products are five per block; the sequential chain per block is K H -> Tb X -> K^T Delta.
Written as separate products, the sums `a + tl.dot(...)` are still folded into the product's
accumulator by Triton (CombineOps), so on sm_100, where Triton's tcgen05 path has computed
such loop-carried accumulators wrongly with 2-3 stages, the guard is one stage (docs/sm100.md).
"""

import triton
import triton.language as tl

from .prefill_prep import GATE_ROWS


@triton.jit
def prefetch_lines(base, count: tl.constexpr, stride: tl.constexpr, mask):
    """Asks the L2 for the `count` lines at base + n * stride (n < count; stride: a line, 128
    bytes, in base's elements) where `mask` holds: `prefetch.global.L2`, a hint that takes no
    register, waits for nothing and cannot fault. Compiled kernels only (Triton's interpreter
    runs no inline assembly)."""
    tl.inline_asm_elementwise("{ .reg .pred p; setp.ne.s32 p, $2, 0; @p prefetch.global.L2 [$1]; mov.u32 $0, 0; }",
                              "=r,l,r", [base + tl.arange(0, count) * stride, mask.to(tl.int32)],
                              dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def prefetch_block(q16_ptr, k16_ptr, v_ptr, tb_ptr, m_ptr, gate_ptr, block, eos, head, col, ahead, use_v,
                   OUTPUT: tl.constexpr, HQ: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, C: tl.constexpr):
    """Asks the L2 for the operands carry_blocks loads for `block` (where `ahead`): its float16
    k (and q and M with OUTPUT) and Tb tiles, gates and the rows of v before eos from column
    `col` (one line a row: BV * 2 <= 128 bytes), where use_v. Issued a block ahead, their DRAM
    latency is paid while the block before is computed (one-stage loops do not pipeline loads)."""
    block_hv = block * HV + head
    qk = (block * HQ + head // (HV // HQ)) * (C * D)
    prefetch_lines(k16_ptr + qk, C * D // 64, 64, ahead)
    prefetch_lines(tb_ptr + block_hv * (C * C), C * C // 64, 64, ahead)
    prefetch_lines(gate_ptr + block_hv * (GATE_ROWS * C), GATE_ROWS * C // 32, 32, ahead)
    rows = block * C + tl.arange(0, C)
    prefetch_lines(v_ptr + (block * C * HV + head) * D + col, C, HV * D, ahead & use_v & (rows < eos))
    if OUTPUT:
        prefetch_lines(q16_ptr + qk, C * D // 64, 64, ahead)
        prefetch_lines(m_ptr + block_hv * (C * C), C * C // 64, 64, ahead)


@triton.jit
def carry_blocks(h, q16_ptr, k16_ptr, v_ptr, out_ptr, tb_ptr, m_ptr, gate_ptr, first, count, bos, eos, head, cols,
                 use_v, OUTPUT: tl.constexpr, HQ: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, C: tl.constexpr,
                 STAGES: tl.constexpr, PREFETCH: tl.constexpr):
    """h [D, BV] (columns `cols` of H = S^T, float32) carried through `count` blocks from block
    `first` for the tokens bos <= t < eos of one value head, as the module says; v's columns
    where use_v [BV], else 0 (other segments' rows of q, k and v are masked to zero, which keeps
    them out: Tb and M do not mix segments); q16_ptr and k16_ptr are the prep's float16
    copies. OUTPUT: O stored to out_ptr's columns `cols`. PREFETCH: each step first asks the L2
    for the next block's operands (prefetch_block).
    With use_v false and h = I's columns this carries the blocks' transition H -> e^G_end H -
    K^T (e^(G_end - G) * Tb (e^G * K H)) instead."""
    i = tl.arange(0, C)
    offs_d = tl.arange(0, D)
    for blk in tl.range(0, count, num_stages=STAGES):
        block = first + blk
        start = block * C
        if PREFETCH:
            prefetch_block(q16_ptr, k16_ptr, v_ptr, tb_ptr, m_ptr, gate_ptr, block + 1, eos, head, tl.min(cols, 0),
                           blk + 1 < count, tl.max(use_v.to(tl.int32), 0) > 0, OUTPUT, HQ, HV, D, C)
        rows = start + i
        mine = (rows >= bos) & (rows < eos)
        block_hv = block * HV + head
        qk_offs = (block * HQ + head // (HV // HQ)) * (C * D) + i[:, None] * D + offs_d[None, :]
        k = tl.load(k16_ptr + qk_offs, mask=mine[:, None], other=0.0)
        v = tl.load(v_ptr + (rows[:, None] * HV + head) * D + cols[None, :], mask=mine[:, None] & use_v[None, :],
                    other=0.0).to(tl.float32)
        tb = tl.load(tb_ptr + block_hv * (C * C) + i[:, None] * C + i[None, :])
        gates = gate_ptr + block_hv * (GATE_ROWS * C)
        e_g = tl.load(gates + i)
        e_rest = tl.load(gates + 2 * C + i)
        e_end = tl.load(gates + 3 * C + (tl.maximum(bos, start) - start))
        h16 = h.to(tl.float16)
        x = v - e_g[:, None] * tl.dot(k, h16)
        delta = tl.where(mine[:, None], tl.dot(tb, x.to(tl.float16)), 0.0)
        if OUTPUT:
            q = tl.load(q16_ptr + qk_offs, mask=mine[:, None], other=0.0)
            m = tl.load(m_ptr + block_hv * (C * C) + i[:, None] * C + i[None, :])
            e_q = tl.load(gates + C + i)
            o = e_q[:, None] * tl.dot(q, h16) + tl.dot(m, delta.to(tl.float16))
            tl.store(out_ptr + (rows[:, None] * HV + head) * D + cols[None, :], o.to(out_ptr.dtype.element_ty),
                     mask=mine[:, None])
        h = h * e_end + tl.dot(tl.trans(k), (e_rest[:, None] * delta).to(tl.float16))
    return h


@triton.jit
def load_start_state(state_ptr, s_offs, bos, eos, flag_ptr, HAS_STATE: tl.constexpr, POOLED: tl.constexpr,
                      D: tl.constexpr, BV: tl.constexpr):
    """A sequence's initial H columns: its state (transposed view), or zero without one or
    for an empty sequence (which must end at zero); plus the prep's flag (0, or NaN for a
    malformed cu_seqlens: then every state and output made from it is NaN). POOLED: s_offs
    point into a pool slot, which an empty sequence keeps (its final state is its initial one)."""
    if HAS_STATE:
        h = tl.load(state_ptr + s_offs)
    else:
        h = tl.zeros([D, BV], dtype=tl.float32)
    if not POOLED:
        h = tl.where(eos > bos, h, 0.0)
    return h + tl.load(flag_ptr)

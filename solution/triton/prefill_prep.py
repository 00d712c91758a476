"""Stage 1 of the chunked prefill path: each block's inverse and gates, all blocks in parallel.

Tokens are cut into blocks of C tokens at fixed positions (block j holds tokens jC .. jC+C-1);
the part of one sequence inside a block is a *segment*, and segments are independent. Inside a
segment, with G_i the cumulative log-decay from its first token to token i (inclusive), G_end
the segment's total and beta_i = sigmoid(b_i):

    A[i,j] = beta_i exp(G_i - G_j) (k_i . k_j)        j < i, same segment (strictly lower)
    Tb     = (I + A)^-1 diag(beta)
    M[i,j] = scale exp(G_i - G_j) (q_i . k_j)         j <= i, same segment

The prep writes these (Tb and M as float16 [C, C] tiles), the gates (e^G, scale e^G,
e^(G_end - G) and e^G_end as float32 [C] rows) and, once per key head, the block's k and q
as float16 copies [C, D]: the walks make every other operand on chip from them and v
(prefill_carry), and a float16 tile feeds their products straight from memory, where a
bfloat16 input would first be converted in registers (measured on an H200, docs/perf.md
item 20: 9-13 % faster on the long and many-sequence calls). bfloat16 values are exact in
float16 within its range (|x| < 65504, normal above 6.1e-5: far beyond unit-norm keys and
N(0, 1) queries; smaller magnitudes keep float16's absolute precision). The products k.k
and q.k take the bfloat16 inputs as they are (exact products, float32 sums); the inverse's
products take float16 operands (see unit_lower_inverse).
"""

import triton
import triton.language as tl

from .prefill_common import cu_seqlens_load, cu_seqlens_ok, mark_rows, output_scale
from .prefill_order import write_longest_first
from .shared import gates

# Rows of a block's gates: e^G, scale e^G, e^(G_end - G), e^G_end (a constexpr the kernels read).
GATE_ROWS = tl.constexpr(4)


@triton.jit
def _narrow_edges(ends, start, first, last, C: tl.constexpr):
    """first and last [C] (rows of each row's segment in the block of C tokens from `start`)
    narrowed by the cu_seqlens entries `ends` [BN] (-1 for none)."""
    i = tl.arange(0, C)
    rel = tl.minimum(tl.maximum(ends - start, -1), C).to(tl.int32)  # outside the block: -1 or C
    first = tl.maximum(first, tl.max(tl.where(rel[None, :] <= i[:, None], rel[None, :], 0), axis=1))
    last = tl.minimum(last, tl.min(tl.where(rel[None, :] > i[:, None], rel[None, :], C), axis=1) - 1)
    return first, last


@triton.jit
def _segment_edges(ends, cu_ptr, N, start, C: tl.constexpr, BN: tl.constexpr):
    """For each row i of the block of C tokens from `start`: (s_i, e_i), the first and last
    rows of its segment inside the block, s_i <= i <= e_i, from the entries of cu_seqlens
    [N + 1] at or before the row and after it. `ends`: cu_seqlens[1 .. min(N, BN)] (zero past
    N), as cu_seqlens_load loaded them at the kernel's start; only a call of more than BN
    sequences loads the entries past them here (cu_seqlens[0] lies at or before every block).
    Any cu_seqlens gives rows of the block."""
    offs = tl.arange(0, BN)
    first = tl.zeros([C], dtype=tl.int32)
    last = first + C - 1
    first, last = _narrow_edges(tl.where(offs < N, ends, -1), start, first, last, C)
    for more in range(BN + 1, N + 1, BN):
        first, last = _narrow_edges(tl.load(cu_ptr + more + offs, mask=more + offs <= N, other=-1), start, first,
                                    last, C)
    return first, last


@triton.jit
def block_loads(q_ptr, k_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr, start, head, T, WIDEN_BF16: tl.constexpr,
                HQ: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, C: tl.constexpr):
    """The inputs of the block of C tokens from `start` for one value head, loaded together
    (with a cold L2 each load costs about a microsecond, so they must be in flight at once):
    k and q [C, D] (bf16, or float32 when WIDEN_BF16: Triton's interpreter computes bf16
    tl.dot wrongly; the products are exact either way; zero past T), log g and beta [C] (zero
    and sigmoid(0) past T)."""
    rows = start + tl.arange(0, C)
    valid = rows < T
    qk_offs = (rows[:, None] * HQ + head // (HV // HQ)) * D + tl.arange(0, D)[None, :]
    k = tl.load(k_ptr + qk_offs, mask=valid[:, None], other=0.0)
    q = tl.load(q_ptr + qk_offs, mask=valid[:, None], other=0.0)
    a = tl.load(a_ptr + rows * HV + head, mask=valid, other=0.0)
    b = tl.load(b_ptr + rows * HV + head, mask=valid, other=0.0)
    log_g, beta = gates(tl.load(A_log_ptr + head), a.to(tl.float32), tl.load(dt_bias_ptr + head), b.to(tl.float32))
    if WIDEN_BF16:
        k = k.to(tl.float32)
        q = q.to(tl.float32)
    return k, q, tl.where(valid, log_g, 0.0), beta


@triton.jit
def block_sums(log_g, ends, cu_ptr, N, start, SINGLE: tl.constexpr, C: tl.constexpr, BN: tl.constexpr):
    """The block's sums of its log g [C] (zero past T), as (P, first, G, G_end): P the
    block's running sum of g (float64), first [C] the first row s_i of each row's segment
    (_segment_edges from `ends` and cu_seqlens; SINGLE, the block is one segment: 0), G (g
    summed over the row's segment up to the row) and G_end (over the whole segment). With e_i
    the last row of row i's segment, G_i = P_i - P_(s_i - 1) and G_end_i = P_(e_i) -
    P_(s_i - 1); pair_decay takes P and first.
    The sums run in float64: G grows to C times the largest |g|, and a float32 G would put an
    error of |G| * 2^-24 into every exponent, where only |G_i - G_j| * 2^-24 is due. One path
    for every block of a call, without a branch on whether a boundary cuts it: a branch merges
    both paths' registers (250 against 172 on sm_90a, Triton 3.9; docs/perf.md item 24)."""
    g = log_g.to(tl.float64)
    P = tl.cumsum(g, 0)
    if SINGLE:
        first = tl.zeros([C], dtype=tl.int32)
        G_end = tl.zeros_like(P) + tl.sum(g, 0)
        G = P
    else:
        first, last = _segment_edges(ends, cu_ptr, N, start, C, BN)
        before = tl.gather(P - g, first, 0)
        G_end = tl.gather(P, last, 0) - before
        G = P - before
    return P, first, G, G_end


@triton.jit
def pair_decay(P, first, C: tl.constexpr):
    """decay [C, C]: exp(G_i - G_j) = exp(P_i - P_j) for the pairs (i, j) of one segment with
    j <= i (first[i] <= j <= i), else 0 (P, first: block_sums). The prep makes it twice, for M
    and for A, rather than hold a [C, C] tile across the products between them (registers:
    docs/perf.md item 28)."""
    i = tl.arange(0, C)
    causal = (i[None, :] <= i[:, None]) & (i[None, :] >= first[:, None])
    return tl.exp(tl.where(causal, (P[:, None] - P[None, :]).to(tl.float32), float("-inf")))


@triton.jit
def unit_lower_inverse(A, C: tl.constexpr, LOG_C: tl.constexpr):
    """(I + A)^-1 for A [C, C] float32 strictly lower triangular (C = 2^LOG_C), as float16, by
    doubling the diagonal blocks whose inverse is known. A block-lower-triangular matrix
    inverts as

        [[X, 0], [L, Y]]^-1 = [[X^-1, 0], [-Y^-1 L X^-1, Y^-1]],

    so with T_b the inverse of I + A cut to its diagonal blocks of b rows, and A_b the entries
    of A inside the diagonal blocks of 2b rows but outside those of b rows (rows i, j that
    agree above bit log2 b and differ at it):  T_2b = T_b - T_b (A_b T_b).  T_1 = I, so
    T_2 = I - A_1, then two products per level up to b = C/2. The operands are entries of A
    and of the inverse itself (of order 1 for the gates' A: no powers of A, whose entries
    grow), so they go in as float16 with float32 sums. T_b (A_b T_b) is nonzero only where
    T_b is zero (rows and columns in different blocks of b rows), so T's entries, once set,
    never change: T is kept as float16 throughout, the operand the products took anyway (the
    stored Tb = T diag(beta) is rounded once more: 2^-11 of an entry at most). Each level's
    mask is made from the row and column indices, and A is kept as float16, so that no [C, C]
    index tile or float32 tile stays live across the levels (the prep's registers:
    docs/perf.md items 24 and 28)."""
    i = tl.arange(0, C)
    row = i[:, None]
    col = i[None, :]
    A16 = A.to(tl.float16)
    inverse = (tl.where(row == col, 1.0, 0.0) - tl.where((row ^ col) == 1, A16, 0.0)).to(tl.float16)
    for bit in tl.static_range(1, LOG_C):
        level = ((row >> (bit + 1)) == (col >> (bit + 1))) & (((row >> bit) & 1) != ((col >> bit) & 1))
        part = tl.where(level, A16, 0.0)
        inverse -= tl.dot(inverse, tl.dot(part, inverse).to(tl.float16)).to(tl.float16)
    return inverse


@triton.jit(do_not_specialize=["T", "N"])
def chunk_prep_kernel(
    q_ptr, k_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr, cu_ptr, tb_ptr, m_ptr, gate_ptr, k16_ptr, q16_ptr, flag_ptr,
    order_ptr, out_ptr, scale, scale_ptr, T, N,
    SINGLE: tl.constexpr, ORDERED: tl.constexpr, SCALE_FROM_PTR: tl.constexpr, WIDEN_BF16: tl.constexpr,
    IDX: tl.constexpr, HQ: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, C: tl.constexpr, LOG_C: tl.constexpr,
    BN: tl.constexpr,
):
    """One block of C tokens for one value head (grid: blocks, HV): writes Tb and M [C, C] as
    float16 tiles of block-major scratch, the block's gates [GATE_ROWS, C] in float32: e^G,
    scale e^G, e^(G_end - G) and e^G_end (G_end: G at the last token of each row's segment),
    and, from the first value head of each key head, k and q as float16 [C, D] tiles of
    block-major scratch [blocks, HQ, C, D] (zero past T). SINGLE: one sequence (no search
    for segments; block_sums). WIDEN_BF16: take the bf16 products in float32 (Triton's interpreter
    computes bf16 tl.dot wrongly); they are exact either way. Also checks
    cu_seqlens (cu_seqlens_ok): program (0, 0) writes the flag every starting state adds, 0 or,
    for a malformed one, NaN; and then every program writes NaN into its block's output rows
    (those no sequence would write); the check is made before the inverse, so that the
    entries it reads are not held through it. ORDERED: the programs of value head 0 write the order in
    which the walks take the sequences (prefill_order: longest first), a tile of sequences
    each, after their block's work."""
    block = tl.program_id(0)
    head = tl.program_id(1)
    lower, upper, cu_first, cu_last = cu_seqlens_load(cu_ptr, N, BN)
    start = block.to(IDX) * C
    k, q, log_g, beta = block_loads(q_ptr, k_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr, start, head, T, WIDEN_BF16,
                                    HQ, HV, D, C)
    i = tl.arange(0, C)
    scale = output_scale(scale, scale_ptr, SCALE_FROM_PTR, D)
    block_hv = block.to(IDX) * HV + head
    square = block_hv * (C * C) + i[:, None] * C + i[None, :]
    if head % (HV // HQ) == 0:
        copy = (block.to(IDX) * HQ + head // (HV // HQ)) * (C * D) + i[:, None] * D + tl.arange(0, D)[None, :]
        tl.store(k16_ptr + copy, k.to(tl.float16))
        tl.store(q16_ptr + copy, q.to(tl.float16))
    P, first, G, G_end = block_sums(log_g, upper, cu_ptr, N, start, SINGLE, C, BN)
    qk = tl.dot(q, tl.trans(k))  # q . k first, so that q is no longer live when k . k comes
    tl.store(m_ptr + square, (scale * pair_decay(P, first, C) * qk).to(tl.float16))
    e_g = tl.exp(G.to(tl.float32))
    gates = gate_ptr + block_hv * (GATE_ROWS * C) + i
    tl.store(gates, e_g)
    tl.store(gates + C, scale * e_g)
    tl.store(gates + 2 * C, tl.exp((G_end - G).to(tl.float32)))
    tl.store(gates + 3 * C, tl.exp(G_end.to(tl.float32)))
    kk = tl.dot(k, tl.trans(k))
    A = tl.where(i[None, :] < i[:, None], beta[:, None] * pair_decay(P, first, C) * kk, 0.0)
    ok = cu_seqlens_ok(lower, upper, cu_first, cu_last, cu_ptr, N, T, BN)
    tl.store(tb_ptr + square, (unit_lower_inverse(A, C, LOG_C) * beta[None, :]).to(tl.float16))
    if ORDERED:
        if head == 0:
            write_longest_first(cu_ptr, order_ptr, block, tl.num_programs(0), N, T, C)
    if (block == 0) & (head == 0):
        tl.store(flag_ptr, tl.where(ok, 0.0, float("nan")))
    if not ok:
        mark_rows(out_ptr, block.to(tl.int64) * C, tl.minimum(block.to(tl.int64) * C + C, T), head,
                  tl.arange(0, D), HV, D)

"""Gated Delta Net prefill, chunked Triton kernels (K-last state, variable-length sequences).

Definition ``gdn_prefill_qk4_v8_d128_k_last`` (Qwen3-Next linear attention, TP=4). Tokens
t of sequence n are ``cu_seqlens[n] <= t < cu_seqlens[n+1]``. For every sequence and value
head h (query/key head h // 2), with D = 128 and the state S[v, k] ("K-last"):

    g_t    = -exp(A_log[h]) * softplus(a[t,h] + dt_bias[h])      log of the decay gate
    beta_t = sigmoid(b[t,h])
    S      = exp(g_t) * S
    S      = S + outer(beta_t * (v_t - S @ k_t), k_t)
    out_t  = scale * (S @ q_t)                                   (scale 0/None: 1/sqrt(D))

starting from state[n] (zero when state is None); new_state[n] is the final S, and zero
for an empty sequence.

Chunked form. Write H = S^T ([K, V]). Tokens are cut into blocks of C tokens at fixed
positions (block j holds tokens jC .. jC+C-1); the part of one sequence inside one block
is a *segment*, and segments are independent. Inside a segment, with G_i the cumulative
log-decay from the segment's first token to token i (inclusive) and H0 the state before it:

    A[i,j]  = beta_i exp(G_i - G_j) (k_i . k_j)          j < i   (strictly lower)
    T       = (I + A)^-1
    W       = T (beta exp(G) * K),    U = T (beta * V)  rows i; K, V have rows k_i, v_i
    Delta   = U - W H0                                    rows: the per-token corrections
    O       = scale (exp(G) * Q) H0 + M Delta,   M[i,j] = scale exp(G_i - G_j) (q_i . k_j), j <= i
    H_last  = exp(G_L) H0 + (exp(G_L - G) * K)^T Delta    L: the segment's last token

This is exact algebra (Delta_i = beta_i (v_i - H_{i-1}^T exp(g_i) k_i), unrolled). With
Q~ = scale exp(G) * Q and K~ = exp(G_L - G) * K, the sequential part is three matrix
products per segment: Delta = U - W H0, O = Q~ H0 + M Delta, H_L = exp(G_L) H0 + K~^T Delta.
All log-decays are differences G_i - G_j <= 0 taken before exp, so long or strong decays
underflow to 0, never to NaN.

Kernels (C = 32):
1. `_chunk_prep_kernel`, one program per (block, value head), all in parallel: gates,
   G (segmented scans), A, T, and the operands W, U, Q~, K~^T, M of the state pass, written
   as contiguous float32 tiles of a block-major scratch buffer.
2. `_state_pass_kernel`, one program per (sequence, value head, BV columns of V): walks
   its sequence's segments in order; the state stays in float32 registers, products in tf32
   (operands rounded to nearest first, see _tf32).
   It also computes the output, or, for long sequences where that lengthens the sequential
   walk, stores each segment's H0 (slot block + sequence: unique, since a later sequence
   never starts in an earlier block) and Delta for
3. `_output_kernel`, one program per (block, value head, V columns), in parallel.
A call of at most C tokens in a few sequences skips the scratch: `_single_block_kernel` does
all of it in one launch, one program per (value head, V columns, sequence).

T = (I + A)^-1 without an unstable series: the 16x16 diagonal blocks A_d of A are nilpotent,
so T_d = (I + A_d)^-1 = (I - A_d)(I + A_d^2)(I + A_d^4)(I + A_d^8), in exact float32; then
with N = T_d A_off (A_off the strictly block-lower part, N^(C/16) = 0),
(I + A)^-1 X = (I + N)^-1 T_d X, applied by Horner.

No host synchronization inside a call: sequence bounds are read on the device, grids come
from shapes, and lengths are runtime arguments (no recompilation per T or N).
Deterministic: no atomics, a fixed order for every sum. Only torch, triton and the
standard library are imported: the evaluator has nothing else.
"""

import math
import numbers
import os

import torch
import triton
import triton.language as tl

NUM_Q_HEADS = 4
NUM_V_HEADS = 8
HEAD_SIZE = 128
SUB = 16  # rows per diagonal block of the triangular solve


_INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"
# Round tf32 operands on a GPU; Triton's interpreter computes tf32 products in float32.
_ROUND_TF32 = tl.constexpr(not _INTERPRETED)


@triton.jit
def _tf32(x):
    """x rounded to the nearest tf32 value (10 mantissa bits, ties away from zero). The
    tensor cores read a float32 operand of a tf32 product by dropping its low 13 bits, a
    truncation biased toward zero whose error adds up over the 128-term sums and from chunk
    to chunk (under the tests' stress regimes it pushed the output past the contest's
    tolerance); on a rounded operand that truncation is exact. The identity in the
    interpreter, whose tf32 products are float32."""
    if _ROUND_TF32:
        return ((x.to(tl.int32, bitcast=True) + 0x1000) & -0x2000).to(tl.float32, bitcast=True)
    return x


@triton.jit
def _softplus(x):
    """softplus(x) = max(x, 0) + log1p(exp(-|x|)), exact for large |x| (no overflow)."""
    y = tl.exp(-tl.abs(x))
    u = 1.0 + y
    # log1p(y) = log(u) corrected for the rounding of u = 1 + y (exact when u rounds to 1).
    return tl.maximum(x, 0.0) + (tl.log(u) - ((u - 1.0) - y))


@triton.jit
def _scale(scale, scale_ptr, SCALE_FROM_PTR: tl.constexpr, D: tl.constexpr):
    """The output scale: `scale`, or the value at scale_ptr; 0 means 1/sqrt(D)."""
    if SCALE_FROM_PTR:
        s = tl.load(scale_ptr).to(tl.float32)
        return tl.where(s == 0.0, 1.0 / tl.sqrt(float(D)), s)
    else:
        return scale


@triton.jit
def _segment_sum(a_value, a_seg, b_value, b_seg):
    """Combine for a segmented sum scan: values add up while the segment stays the same
    (segments are runs of equal ids, so this is associative)."""
    return b_value + tl.where(a_seg == b_seg, a_value, 0.0), b_seg


@triton.jit
def _segment_of(cu_ptr, N, rows, BN: tl.constexpr):
    """For each token index in `rows`: the number of sequence ends cu_seqlens[1..N] at or
    before it, i.e. the index of its sequence. Equal values mean the same sequence. The first
    BN ends are loaded before any loop, so that their load overlaps the caller's."""
    offs = 1 + tl.arange(0, BN)
    ends = tl.load(cu_ptr + offs, mask=offs <= N, other=2**62)
    seg = tl.sum((ends[None, :] <= rows[:, None]).to(tl.int32), axis=1)
    for start in range(BN, N, BN):
        ends = tl.load(cu_ptr + start + offs, mask=start + offs <= N, other=2**62)
        seg += tl.sum((ends[None, :] <= rows[:, None]).to(tl.int32), axis=1)
    return seg


@triton.jit
def _block_setup(
    q_ptr, k_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr, cu_ptr, start, head, T, N,
    SINGLE: tl.constexpr, WIDEN_BF16: tl.constexpr, IDX: tl.constexpr, HQ: tl.constexpr, HV: tl.constexpr,
    D: tl.constexpr, C: tl.constexpr, BN: tl.constexpr,
):
    """Loads and gates of the block of C tokens from `start` for one value head.

    Returns rows (token indices), valid (rows < T), seg (sequence of each row), k and q
    [C, D] (bf16, or float32 when WIDEN_BF16), beta, G (float64: g summed over the row's
    segment up to the row), G_end (float64: over the whole segment) and decay [C, C]:
    exp(G_i - G_j) for the pairs (i, j) of one segment with j <= i, else 0. The sums run in
    float64: G grows to C times the largest |g|, and a float32 G would put an error of
    |G| * 2^-24 into every exponent, where only |G_i - G_j| * 2^-24 is due."""
    # Every global load first: with a cold L2 each costs about a microsecond, so they must
    # be in flight together rather than one after another.
    i = tl.arange(0, C)
    offs_d = tl.arange(0, D)
    rows = start + i
    valid = rows < T
    qk_offs = (rows[:, None] * HQ + head // (HV // HQ)) * D + offs_d[None, :]
    k = tl.load(k_ptr + qk_offs, mask=valid[:, None], other=0.0)
    q = tl.load(q_ptr + qk_offs, mask=valid[:, None], other=0.0)
    a = tl.load(a_ptr + rows * HV + head, mask=valid, other=0.0)
    b = tl.load(b_ptr + rows * HV + head, mask=valid, other=0.0)
    A_log = tl.load(A_log_ptr + head)
    dt_bias = tl.load(dt_bias_ptr + head)
    if SINGLE:
        seg = tl.zeros([C], dtype=tl.int32)
    else:
        seg = _segment_of(cu_ptr, N, rows, BN)
    if WIDEN_BF16:
        k = k.to(tl.float32)
        q = q.to(tl.float32)

    g = tl.where(valid, -tl.exp(A_log) * _softplus(a.to(tl.float32) + dt_bias), 0.0).to(tl.float64)
    beta = 1.0 / (1.0 + tl.exp(-b.to(tl.float32)))
    G, _ = tl.associative_scan((g, seg), 0, _segment_sum)
    after, _ = tl.associative_scan((g, seg), 0, _segment_sum, reverse=True)
    causal = (seg[:, None] == seg[None, :]) & (i[None, :] <= i[:, None])
    decay = tl.exp(tl.where(causal, (G[:, None] - G[None, :]).to(tl.float32), float("-inf")))
    return rows, valid, seg, k, q, beta, G, G + after - g, decay


@triton.jit
def _inverse_parts(k, beta, G, seg, decay, NB: tl.constexpr, BT: tl.constexpr, C: tl.constexpr,
                   D: tl.constexpr):
    """(T_d, N) for (I + A)^-1, A[i, j] = beta_i decay[i, j] (k_i . k_j) for j < i.

    T_d [NB, BT, BT]: the inverses of the BT x BT diagonal blocks of I + A, each
    (I - A_d)(I + A_d^2)(I + A_d^4)(I + A_d^8) as A_d^16 = 0, in exact float32.
    N [C, C] = T_d A_off, A_off the strictly block-lower part of A: (I + A)^-1 =
    (I + N)^-1 T_d with N^NB = 0 (see _solve). Both come rounded to tf32 (see _tf32): they
    are only ever operands of tf32 products."""
    tl.static_assert(BT == 16)
    i = tl.arange(0, C)
    r = tl.arange(0, BT)
    A_off = tl.where((i[:, None] // BT) > (i[None, :] // BT), beta[:, None] * decay * tl.dot(k, tl.trans(k)), 0.0)
    k_blocks = tl.reshape(k, (NB, BT, D))
    G_blocks = tl.reshape(G, (NB, BT))
    seg_blocks = tl.reshape(seg, (NB, BT))
    lower = (r[None, None, :] < r[None, :, None]) & (seg_blocks[:, :, None] == seg_blocks[:, None, :])
    A_d = tl.exp(tl.where(lower, (G_blocks[:, :, None] - G_blocks[:, None, :]).to(tl.float32), float("-inf")))
    A_d = tl.reshape(beta, (NB, BT))[:, :, None] * A_d * tl.dot(k_blocks, tl.permute(k_blocks, (0, 2, 1)))
    power = A_d
    T_d = tl.where(r[None, :, None] == r[None, None, :], 1.0, 0.0) - power
    for _ in tl.static_range(3):
        power = tl.dot(power, power, input_precision="ieee")
        T_d += tl.dot(T_d, power, input_precision="ieee")
    N_off = tl.reshape(tl.dot(T_d, tl.reshape(A_off, (NB, BT, C)), input_precision="ieee"), (C, C))
    return _tf32(T_d), _tf32(N_off)


@triton.jit
def _solve(T_d, N_off, x, NB: tl.constexpr, BT: tl.constexpr, C: tl.constexpr, W: tl.constexpr):
    """(I + A)^-1 x for x [C, W] float32: y = T_d x, then Horner over the powers of N,
    sum_m (-N)^m y = y - N (y - N (y - ...))."""
    y = tl.reshape(tl.dot(T_d, tl.reshape(_tf32(x), (NB, BT, W)), input_precision="tf32"), (C, W))
    z = y
    for _ in tl.static_range(NB - 1):
        z = y - tl.dot(N_off, _tf32(z), input_precision="tf32")
    return z


@triton.jit(do_not_specialize=["T", "N"])
def _chunk_prep_kernel(
    q_ptr, k_ptr, v_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr, cu_ptr,
    w_ptr, kt_ptr, qt_ptr, u_ptr, m_ptr, ge_ptr, scale, scale_ptr, T, N,
    SINGLE: tl.constexpr, SCALE_FROM_PTR: tl.constexpr, WIDEN_BF16: tl.constexpr, IDX: tl.constexpr,
    HQ: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, C: tl.constexpr, BT: tl.constexpr, BN: tl.constexpr,
):
    """One block of C tokens for one value head. Writes, as contiguous tiles of block-major
    scratch, the state pass's matrix operands: W, U, Q~ = scale exp(G) * Q [C, D], K~^T =
    (exp(G_end - G) * K)^T [D, C] and M [C, C] (all but U rounded to tf32: they are only
    operands of tf32 products), plus G_end (G at the last token of each token's segment).
    Rows past T come out zero. SINGLE: one sequence (no search).
    WIDEN_BF16: take the bf16 products in float32 (Triton's interpreter computes bf16 tl.dot
    wrongly); the products are exact either way."""
    block = tl.program_id(0)
    head = tl.program_id(1)
    NB: tl.constexpr = C // BT
    i = tl.arange(0, C)
    offs_d = tl.arange(0, D)
    v_rows = block.to(IDX) * C + i
    v = tl.load(v_ptr + (v_rows[:, None] * HV + head) * D + offs_d[None, :], mask=v_rows[:, None] < T, other=0.0)
    rows, valid, seg, k, q, beta, G64, G_end64, decay = _block_setup(
        q_ptr, k_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr, cu_ptr, block.to(IDX) * C, head, T, N,
        SINGLE, WIDEN_BF16, IDX, HQ, HV, D, C, BN)
    scale = _scale(scale, scale_ptr, SCALE_FROM_PTR, D)
    G = G64.to(tl.float32)
    block_hv = block.to(IDX) * HV + head
    tile = block_hv * (C * D)
    row_major = i[:, None] * D + offs_d[None, :]

    # M and Q~ first, so q is dead before the solve.
    tl.store(m_ptr + block_hv * (C * C) + i[:, None] * C + i[None, :], _tf32((scale * decay) * tl.dot(q, tl.trans(k))))
    tl.store(qt_ptr + tile + row_major, _tf32(q.to(tl.float32) * (scale * tl.exp(G))[:, None]))
    T_d, N_off = _inverse_parts(k, beta, G64, seg, decay, NB, BT, C, D)
    k = k.to(tl.float32)
    tl.store(w_ptr + tile + row_major, _tf32(_solve(T_d, N_off, (beta * tl.exp(G))[:, None] * k, NB, BT, C, D)))
    tl.store(kt_ptr + tile + offs_d[:, None] * C + i[None, :],
             _tf32(tl.trans(k * tl.exp((G_end64 - G64).to(tl.float32))[:, None])))
    tl.store(u_ptr + tile + row_major, _solve(T_d, N_off, beta[:, None] * v.to(tl.float32), NB, BT, C, D))
    tl.store(ge_ptr + block_hv * C + i, G_end64.to(tl.float32))


@triton.jit(do_not_specialize=["T", "N"])
def _single_block_kernel(
    q_ptr, k_ptr, v_ptr, state_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr, cu_ptr, out_ptr, new_state_ptr,
    scale, scale_ptr, T, N,
    SINGLE: tl.constexpr, HAS_STATE: tl.constexpr, SCALE_FROM_PTR: tl.constexpr, WIDEN_BF16: tl.constexpr,
    HQ: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, C: tl.constexpr, BT: tl.constexpr, BN: tl.constexpr,
    BV: tl.constexpr,
):
    """A whole call whose T <= C tokens fit one block, in one launch: one program per (value
    head, BV columns of V, sequence) does the whole block's setup itself (its segments are
    independent), then for its own sequence's rows Delta = U - W H0, O = Q~ H0 + M Delta and
    H = exp(G_end) H0 + K~^T Delta (H = S^T). SINGLE: one sequence (cu_seqlens not read)."""
    head = tl.program_id(0)
    v_tile = tl.program_id(1)
    seq = tl.program_id(2)
    NB: tl.constexpr = C // BT
    i = tl.arange(0, C)
    offs_d = tl.arange(0, D)
    offs_v = v_tile * BV + tl.arange(0, BV)
    v = tl.load(v_ptr + (i[:, None] * HV + head) * D + offs_v[None, :], mask=i[:, None] < T, other=0.0)
    s_offs = ((seq * HV + head) * D + offs_v[None, :]) * D + offs_d[:, None]
    if SINGLE:
        length = T
    else:
        length = tl.load(cu_ptr + seq + 1) - tl.load(cu_ptr + seq)
    if HAS_STATE:
        h0 = tl.where(length > 0, tl.load(state_ptr + s_offs), 0.0)  # an empty sequence ends at zero
    else:
        h0 = tl.zeros([D, BV], dtype=tl.float32)
    rows, valid, seg, k, q, beta, G64, G_end64, decay = _block_setup(
        q_ptr, k_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr, cu_ptr, 0, head, T, N,
        SINGLE, WIDEN_BF16, tl.int32, HQ, HV, D, C, BN)
    mine = valid & (seg == seq)
    scale = _scale(scale, scale_ptr, SCALE_FROM_PTR, D)
    G = G64.to(tl.float32)
    m = _tf32((scale * decay) * tl.dot(q, tl.trans(k)))
    qt = _tf32(q.to(tl.float32) * (scale * tl.exp(G))[:, None])
    T_d, N_off = _inverse_parts(k, beta, G64, seg, decay, NB, BT, C, D)
    k = k.to(tl.float32)
    w = _tf32(_solve(T_d, N_off, (beta * tl.exp(G))[:, None] * k, NB, BT, C, D))
    u = _solve(T_d, N_off, beta[:, None] * v.to(tl.float32), NB, BT, C, BV)
    kt = _tf32(tl.trans(k * tl.exp((G_end64 - G64).to(tl.float32))[:, None]))

    h0_tf32 = _tf32(h0)
    delta = _tf32(tl.where(mine[:, None], u - tl.dot(w, h0_tf32, input_precision="tf32"), 0.0))
    o = tl.dot(m, delta, tl.dot(qt, h0_tf32, input_precision="tf32"), input_precision="tf32")
    tl.store(out_ptr + (i[:, None] * HV + head) * D + offs_v[None, :], o.to(out_ptr.dtype.element_ty),
             mask=mine[:, None])
    g_end = tl.max(tl.where(mine, G_end64.to(tl.float32), float("-inf")), axis=0)
    tl.store(new_state_ptr + s_offs, h0 * tl.exp(g_end) + tl.dot(kt, delta, input_precision="tf32"))


@triton.jit
def _state_pass_kernel(
    state_ptr, cu_ptr, w_ptr, kt_ptr, qt_ptr, u_ptr, m_ptr, ge_ptr, out_ptr, new_state_ptr, hs_ptr, delta_ptr, T,
    SINGLE: tl.constexpr, HAS_STATE: tl.constexpr, OUTPUT: tl.constexpr, IDX: tl.constexpr, HV: tl.constexpr,
    D: tl.constexpr, C: tl.constexpr, BV: tl.constexpr, STAGES: tl.constexpr,
):
    """One (sequence, value head, BV columns of V): the sequence's segments in order, with
    H = S^T [D, BV]:  Delta = U - W H;  O = Q~ H + M Delta;  H = exp(G_end) H + K~^T Delta.
    OUTPUT: computes O here; else stores H (per segment: slot = block + sequence) and Delta,
    both rounded to tf32, for `_output_kernel`. SINGLE: one sequence, tokens 0..T-1
    (cu_seqlens not read)."""
    pid = tl.program_id(0)
    NV: tl.constexpr = D // BV
    v_tile = pid % NV
    head = (pid // NV) % HV
    seq = pid // (NV * HV)
    i = tl.arange(0, C)
    offs_d = tl.arange(0, D)
    offs_v = v_tile * BV + tl.arange(0, BV)
    s_offs = ((seq * HV + head) * D + offs_v[None, :]).to(IDX) * D + offs_d[:, None]
    if HAS_STATE:
        h = tl.load(state_ptr + s_offs)
    else:
        h = tl.zeros([D, BV], dtype=tl.float32)
    if SINGLE:
        bos = 0
        eos = T
    else:
        bos = tl.load(cu_ptr + seq).to(IDX)
        eos = tl.load(cu_ptr + seq + 1).to(IDX)
    h = tl.where(eos > bos, h, 0.0)  # an empty sequence ends at zero

    first = bos // C
    num_blocks = tl.where(eos > bos, (eos - 1) // C - first + 1, 0)
    for blk in tl.range(0, num_blocks, num_stages=STAGES):
        start = (first + blk) * C
        rows = start + i
        mine = (rows >= bos) & (rows < eos)
        block_hv = (first + blk) * HV + head
        tile = block_hv * (C * D)
        w = tl.load(w_ptr + tile + i[:, None] * D + offs_d[None, :])
        kt = tl.load(kt_ptr + tile + offs_d[:, None] * C + i[None, :])
        u = tl.load(u_ptr + tile + i[:, None] * D + offs_v[None, :])
        g_end = tl.load(ge_ptr + block_hv * C + (tl.maximum(bos, start) - start))
        h_tf32 = _tf32(h)
        delta = _tf32(tl.where(mine[:, None], u - tl.dot(w, h_tf32, input_precision="tf32"), 0.0))
        if OUTPUT:
            qt = tl.load(qt_ptr + tile + i[:, None] * D + offs_d[None, :])
            m = tl.load(m_ptr + block_hv * (C * C) + i[:, None] * C + i[None, :])
            o = tl.dot(qt, h_tf32, input_precision="tf32")
            o = tl.dot(m, delta, o, input_precision="tf32")
            tl.store(out_ptr + (rows[:, None] * HV + head) * D + offs_v[None, :], o.to(out_ptr.dtype.element_ty),
                     mask=mine[:, None])
        else:
            slot = ((first + blk + seq) * HV + head).to(IDX) * (D * D)
            tl.store(hs_ptr + slot + offs_v[None, :] * D + offs_d[:, None], h_tf32)
            tl.store(delta_ptr + tile + i[:, None] * D + offs_v[None, :], delta, mask=mine[:, None])
        h = h * tl.exp(g_end) + tl.dot(kt, delta, input_precision="tf32")
    tl.store(new_state_ptr + s_offs, h)


@triton.jit(do_not_specialize=["T", "N"])
def _output_kernel(
    cu_ptr, qt_ptr, m_ptr, hs_ptr, delta_ptr, out_ptr, T, N,
    SINGLE: tl.constexpr, IDX: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, C: tl.constexpr,
    BV: tl.constexpr, BN: tl.constexpr,
):
    """One (block, value head, BV columns of V): O = Q~ H_seg + M Delta for every segment of
    the block, H_seg being the state its sequence entered the block with (slot block + seq).
    Every operand comes from the scratch already rounded to tf32."""
    block = tl.program_id(0)
    head = tl.program_id(1)
    v_tile = tl.program_id(2)
    i = tl.arange(0, C)
    offs_d = tl.arange(0, D)
    offs_v = v_tile * BV + tl.arange(0, BV)
    rows = block.to(IDX) * C + i
    valid = rows < T
    block_hv = block.to(IDX) * HV + head
    tile = block_hv * (C * D)
    qt = tl.load(qt_ptr + tile + i[:, None] * D + offs_d[None, :])
    m = tl.load(m_ptr + block_hv * (C * C) + i[:, None] * C + i[None, :])
    delta = tl.load(delta_ptr + tile + i[:, None] * D + offs_v[None, :], mask=valid[:, None], other=0.0)
    o = tl.dot(m, delta, input_precision="tf32")
    if SINGLE:
        hs = tl.load(hs_ptr + ((block * HV + head).to(IDX) * D + offs_v[None, :]) * D + offs_d[:, None])
        o = tl.dot(qt, hs, o, input_precision="tf32")
    else:
        seg = _segment_of(cu_ptr, N, rows, BN)
        lo = tl.min(tl.where(valid, seg, N), axis=0)
        hi = tl.max(tl.where(valid, seg, -1), axis=0)
        for n in range(lo, hi + 1):
            rows_n = valid & (seg == n)
            if tl.sum(rows_n.to(tl.int32), axis=0) > 0:  # empty sequences have no slot written
                slot = ((block + n) * HV + head).to(IDX) * (D * D)
                hs = tl.load(hs_ptr + slot + offs_v[None, :] * D + offs_d[:, None])
                o = tl.dot(tl.where(rows_n[:, None], qt, 0.0), hs, o, input_precision="tf32")
    tl.store(out_ptr + (rows[:, None] * HV + head) * D + offs_v[None, :], o.to(out_ptr.dtype.element_ty),
             mask=valid[:, None])


# --- Host side: checks, scale, scratch, launches ---------------------------------------------
# The evaluator times a call from its first GPU activity to its last, so host work before
# the first launch is free while host gaps between launches count. Everything is checked and
# prepared before the first launch, the launches' own arguments included (_Launcher.prepare);
# then they go out back to back through the compiled kernels' launchers, which take a few
# microseconds instead of Triton's full path (on a slow host, 20-30 µs per launch before).

_ARG_NAMES = ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens", "output", "new_state")
_SEQ_BLOCK = 64  # sequence ends compared per step when locating a token's sequence
CHUNK = 32  # tokens per block (C)
_PREP_WARPS = 4
_OUTPUT_WARPS = 4
# A call of T <= CHUNK tokens in at most this many sequences runs as one kernel
# (`_single_block_kernel`; 0 turns it off): for one sequence 10 µs against 15 µs for the
# chunked kernels on an H200.
SINGLE_BLOCK_MAX_SEQS = 4
_SINGLE_BLOCK_WARPS = 4
# State pass by number of sequences N: (largest N it applies to, BV columns of V per program,
# warps, software-pipelining stages, smallest T from which the output gets a kernel of its
# own, that kernel's BV). Chosen from GPU measurements (docs/perf.md).
LAUNCH_TABLE = (
    (1, 16, 4, 3, 4096, 64),
    (16, 16, 4, 2, 1 << 62, 64),
    (1 << 62, 32, 4, 2, 1 << 62, 64),
)


def _state_warps(warps, device):
    """Warps for a kernel that carries the state: Triton 3.6 on sm_100 computes tl.dot
    recurrences nondeterministically with 4 or more warps (triton issue #9871), so there
    such kernels run with 2."""
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 10:
        return min(warps, 2)
    return warps


def _launch_config(total, num_seqs, device):
    """(BV, warps, stages, output BV or 0) of the state pass for T tokens in N sequences. With
    2 warps (sm_100) BV is at most 16: a 32-column tile spills registers there (compiled for
    sm_100 with Triton 3.6; not run: no B200 was available)."""
    for max_seqs, block_v, warps, stages, split_from, out_block_v in LAUNCH_TABLE:
        if num_seqs <= max_seqs:
            break
    state_warps = _state_warps(warps, device)
    if state_warps < warps:
        block_v = min(block_v, 16)
    return block_v, state_warps, stages, out_block_v if total >= split_from else 0


def _single_block_config(num_seqs, device):
    """(BV, warps) of the one-kernel path: BV 16 for one sequence, 32 for several (fewer
    programs, each repeating the block's setup), 16 where the state kernels run with fewer
    warps (sm_100, see _state_warps)."""
    warps = _state_warps(_SINGLE_BLOCK_WARPS, device)
    return (16 if num_seqs == 1 or warps < _SINGLE_BLOCK_WARPS else 32), warps


def _expected(total, num_seqs):
    """(shape, dtype) of each argument in _ARG_NAMES order for T tokens and N sequences."""
    bf16, f32 = torch.bfloat16, torch.float32
    qk, per_v = (total, NUM_Q_HEADS, HEAD_SIZE), (total, NUM_V_HEADS, HEAD_SIZE)
    state = (num_seqs, NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE)
    gates, params = (total, NUM_V_HEADS), (NUM_V_HEADS,)
    return ((qk, bf16), (qk, bf16), (per_v, bf16), (state, f32), (params, f32), (gates, bf16), (params, f32),
            (gates, bf16), ((num_seqs + 1,), torch.int64), (per_v, bf16), (state, f32))


def _check(tensors):
    """(T, N, device) from q and cu_seqlens; ValueError naming the first bad argument."""
    q, cu_seqlens = tensors[0], tensors[_ARG_NAMES.index("cu_seqlens")]
    if not isinstance(q, torch.Tensor) or q.dim() != 3:
        got = f"shape {list(q.shape)}" if isinstance(q, torch.Tensor) else type(q).__name__
        raise ValueError(f"q: expected a [T, {NUM_Q_HEADS}, {HEAD_SIZE}] tensor, got {got}")
    if not isinstance(cu_seqlens, torch.Tensor) or cu_seqlens.dim() != 1 or cu_seqlens.numel() == 0:
        got = f"shape {list(cu_seqlens.shape)}" if isinstance(cu_seqlens, torch.Tensor) else type(cu_seqlens).__name__
        raise ValueError(f"cu_seqlens: expected a 1-D tensor [N + 1], got {got}")
    total, num_seqs, device = q.shape[0], cu_seqlens.shape[0] - 1, q.device
    for name, t, (shape, dtype) in zip(_ARG_NAMES, tensors, _expected(total, num_seqs)):
        if t is None and name == "state":
            continue
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
    return total, num_seqs, device


def _resolve_scale(scale, device):
    """(value, tensor): a Python float (0 or None -> 1/sqrt(D)) and None, or, for a
    one-element tensor on the kernels' device, (0.0, that tensor), read in-kernel so that the
    call never waits on the device. A tensor elsewhere (the CPU) is read here."""
    if isinstance(scale, torch.Tensor):
        if scale.numel() != 1 or not scale.is_floating_point():
            raise ValueError(f"scale: expected a one-element float tensor, got {scale.dtype} of shape {list(scale.shape)}")
        if scale.device == device and device.type != "cpu":
            return 0.0, scale
        scale = scale.item()
    if scale is None:
        scale = 0.0
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise ValueError(f"scale: expected a finite real number, 0 or None, got {scale!r}")
    value = float(scale)
    if not math.isfinite(value):
        raise ValueError(f"scale: expected a finite real number, 0 or None, got {scale!r}")
    return (value if value != 0.0 else 1.0 / math.sqrt(HEAD_SIZE)), None


_RUNTIME_KNOBS = getattr(getattr(triton, "knobs", None), "runtime", None)


def _hooks_installed():
    """Whether a launch hook is set (profilers need Triton's full launch path)."""
    if _RUNTIME_KNOBS is None:
        return True
    enter, leave = _RUNTIME_KNOBS.launch_enter_hook, _RUNTIME_KNOBS.launch_exit_hook
    return bool(getattr(enter, "calls", enter) or getattr(leave, "calls", leave))


class _Launcher:
    """Launches one @triton.jit kernel whose constexpr parameters come last.

    `prepare` does all the work of a launch but the launch itself and returns a function of
    no arguments that makes it, so that a call prepares every launch first and then makes them
    back to back: the host time between two kernels is only the launch. The first launch of a
    configuration goes through Triton (which compiles it); later ones call the compiled
    kernel's launcher directly with raw pointers, skipping Triton's per-call argument binding.
    That is valid while the arguments specialize as on the first launch: the integer
    arguments are marked do_not_specialize, every pointer is 16-byte aligned, and no launch
    hook is installed. A probe with an empty grid checks once that the launcher takes these
    arguments (Triton versions differ); if not, Triton's path stays.
    """

    def __init__(self, fn):
        self.fn = fn
        self.compiled = {}  # (device index, constexprs, warps) -> (CompiledKernel, stream getter) or False

    def prepare(self, grid, args, constexprs, num_warps, device):
        raw = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]
        aligned = all(a % 16 == 0 for a, t in zip(raw, args) if isinstance(t, torch.Tensor))
        key = (device.index, tuple(constexprs.items()), num_warps)
        entry = self.compiled.get(key)
        if entry and aligned and not _hooks_installed():
            compiled, stream_of = entry
            run, head = compiled.run, (*grid, stream_of(device.index), compiled.function, compiled.packed_metadata)
            values = (*raw, *constexprs.values())
            return lambda: run(*head, None, None, None, *values)

        def through_triton():
            compiled = self.fn[grid](*args, **constexprs, num_warps=num_warps)
            if entry is None and aligned and not _INTERPRETED:
                self.compiled[key] = self._probe(compiled, device.index, raw, constexprs)
        return through_triton

    @staticmethod
    def _probe(compiled, device_index, raw, constexprs):
        stream_of = triton.runtime.driver.active.get_current_stream
        try:
            compiled.run(0, 0, 0, stream_of(device_index), compiled.function, compiled.packed_metadata,
                         None, None, None, *raw, *constexprs.values())
        except (TypeError, AttributeError, SystemError):
            return False
        return compiled, stream_of


_launch_prep = _Launcher(_chunk_prep_kernel)
_launch_state_pass = _Launcher(_state_pass_kernel)
_launch_output = _Launcher(_output_kernel)
_launch_single = _Launcher(_single_block_kernel)


def kernel(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, output, new_state):
    """DPS entry point: writes `output` [T,8,128] bf16 and `new_state` [N,8,128,128] f32.

    At most three kernel launches, no host synchronization. cu_seqlens must be nondecreasing
    from 0 to T (its values are read on the device only, so they are not checked here).
    Raises ValueError naming the first bad argument.
    """
    tensors = (q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, output, new_state)
    total, num_seqs, device = _check(tensors)
    scale_value, scale_tensor = _resolve_scale(scale, device)
    if num_seqs == 0:
        return
    single = num_seqs == 1
    scale_ptr = A_log if scale_tensor is None else scale_tensor  # unused unless read in-kernel
    if total <= CHUNK and num_seqs <= SINGLE_BLOCK_MAX_SEQS:
        block_v, warps = _single_block_config(num_seqs, device)
        _launch_single.prepare(
            (NUM_V_HEADS, HEAD_SIZE // block_v, num_seqs),
            (q, k, v, state if state is not None else new_state, A_log, a, dt_bias, b, cu_seqlens, output, new_state,
             scale_value, scale_ptr, total, num_seqs),
            dict(SINGLE=single, HAS_STATE=state is not None, SCALE_FROM_PTR=scale_tensor is not None,
                 WIDEN_BF16=_INTERPRETED, HQ=NUM_Q_HEADS, HV=NUM_V_HEADS, D=HEAD_SIZE, C=CHUNK, BT=SUB, BN=_SEQ_BLOCK,
                 BV=block_v),
            warps, device)()
        return
    block_v, warps, stages, out_block_v = _launch_config(total, num_seqs, device)
    hv, d, chunk = NUM_V_HEADS, HEAD_SIZE, CHUNK
    blocks = triton.cdiv(total, chunk)
    # Block-major scratch: W, K~^T, Q~, U (and Delta) [blocks, HV, C*D]; M [blocks, HV, C*C];
    # G_end [blocks, HV, C]; with a separate output kernel, H [blocks + N, HV, D*D].
    tile = blocks * hv * chunk * d
    sizes = [tile] * 4 + [blocks * hv * chunk * chunk, blocks * hv * chunk]
    if out_block_v:
        sizes += [tile, (blocks + num_seqs) * hv * d * d]
    scratch = torch.split(torch.empty(sum(sizes), dtype=torch.float32, device=device), sizes)
    w, kt, qt, u, m, g_end = scratch[:6]
    delta, h_start = scratch[6:] if out_block_v else (w, w)  # unused without the output kernel
    # Element offsets in int32 when every one fits (the usual case), else in int64.
    largest = max(blocks * hv * chunk * d, total * NUM_Q_HEADS * d, (blocks + num_seqs) * hv * d * d)
    idx = tl.int32 if largest < 2**31 else tl.int64
    prep_args = (q, k, v, A_log, a, dt_bias, b, cu_seqlens, w, kt, qt, u, m, g_end, scale_value, scale_ptr,
                 total, num_seqs)
    prep_constexprs = dict(SINGLE=single, SCALE_FROM_PTR=scale_tensor is not None, IDX=idx, HQ=NUM_Q_HEADS, HV=hv, D=d,
                           C=chunk, BT=SUB, BN=_SEQ_BLOCK, WIDEN_BF16=_INTERPRETED)
    pass_args = (state if state is not None else new_state, cu_seqlens, w, kt, qt, u, m, g_end, output, new_state,
                 h_start, delta, total)
    pass_constexprs = dict(SINGLE=single, HAS_STATE=state is not None, OUTPUT=not out_block_v, IDX=idx, HV=hv, D=d,
                           C=chunk, BV=block_v, STAGES=stages)
    launches = []  # every launch prepared before the first goes out
    if total > 0:
        launches.append(_launch_prep.prepare((blocks, hv, 1), prep_args, prep_constexprs, _PREP_WARPS, device))
    launches.append(_launch_state_pass.prepare((num_seqs * hv * (d // block_v), 1, 1), pass_args, pass_constexprs,
                                               warps, device))
    if out_block_v and total > 0:
        launches.append(_launch_output.prepare(
            (blocks, hv, d // out_block_v), (cu_seqlens, qt, m, h_start, delta, output, total, num_seqs),
            dict(SINGLE=single, IDX=idx, HV=hv, D=d, C=chunk, BV=out_block_v, BN=_SEQ_BLOCK), _OUTPUT_WARPS, device))
    for launch in launches:
        launch()

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

Chunked form. Write H = S^T ([K, V]). Tokens are cut into blocks of C = 64 tokens at fixed
positions (block j holds tokens jC .. jC+C-1); the part of one sequence inside one block
is a *segment*, and segments are independent. Inside a segment, with G_i the cumulative
log-decay from the segment's first token to token i (inclusive) and H0 the state before it:

    A[i,j]  = beta_i exp(G_i - G_j) (k_i . k_j)          j < i   (strictly lower)
    Tb      = (I + A)^-1 diag(beta)
    W       = Tb (exp(G) * K),    U = Tb V               rows i; K, V have rows k_i, v_i
    Delta   = U - W H0                                    rows: the per-token corrections
    O       = Q~ H0 + M Delta,   Q~ = scale exp(G) * Q,   M[i,j] = scale exp(G_i - G_j) (q_i . k_j), j <= i
    H_last  = exp(G_L) H0 + K~^T Delta,   K~ = exp(G_L - G) * K     L: the segment's last token

This is exact algebra (Delta_i = beta_i (v_i - H_{i-1}^T exp(g_i) k_i), unrolled), so the
sequential part is three matrix products per block: Delta = U - W H, O = Q~ H + M Delta,
H = exp(G_L) H + K~^T Delta. All log-decays are differences G_i - G_j <= 0 taken before exp,
so long or strong decays underflow to 0, never to NaN.

Spans. A block maps the state affinely, H_L = P_c H0 + N_c with P_c = exp(G_L) I - K~^T W
(K x K) and N_c = K~^T U, so a run of blocks does too: the sequence's blocks, from the one
holding its first token, are cut into at most J spans of S_n blocks each, S_n = max(S,
ceil(blocks_n / J)) (S and J are the plan's, from the call's blocks: a sequence takes more
spans as it grows, up to J, then longer ones), and for each span but the last P_j and N_j
come from carrying the identity and zero through its blocks, in parallel for every
span. Then the states entering the spans follow one after another, H_{j+1} = P_j H_j + N_j
(the first from the sequence's own state), one product per span; and every span's outputs
are computed in parallel from its entering state.

Precision. Every product on the tensor cores takes float16 operands and accumulates in
float32; the state H stays in float32 registers and is rounded to float16 only as an operand.
float16 has tf32's 10-bit mantissa (bfloat16 operands fail the contest's check under weak
decay, docs/perf.md) at bfloat16's rate; the operands here are bounded by the inputs'
sizes (unit-norm keys give |W|, |Tb|, |K~|, |M| of order 1), far inside float16's range.
The products k.k and q.k take the bfloat16 inputs as they are (exact products). The
triangular inverse doubles the diagonal blocks whose inverse is known, T_2b = T_b - T_b A_b T_b
(_unit_lower_inverse): its products take only entries of A and of the inverse itself, of
order 1, so float16 operands suffice (the powers of A, which grow to ~10^3 for repeated keys,
never appear; its error is that of the 3xTF32 doubling with float16 Horner steps it replaced,
docs/perf.md prefill item 19).

Kernels of the chunked path:
1. `_chunk_prep_kernel`, one program per (block, value head), all in parallel: gates, G
   (segmented scans), A, Tb, and the operands W, Q~, K~^T, M (float16) and exp(G_L) (float32),
   written as contiguous tiles of a block-major scratch buffer.
2. `_span_summary_kernel`, with spans only, one program per (sequence, span, value head,
   BV of the 2D columns of [N | P]): each span's map.
3. `_span_fixup_kernel`, with spans only, one program per (sequence, value head, BV columns
   of V): the states entering the spans, in order.
4. `_span_pass_kernel`, one program per (sequence, span, value head, BV columns of V): the
   span's outputs and, for the last span, new_state. Without spans it carries the whole
   sequence.
Kernels 2 and 4 carry the state through blocks with `_carry_blocks`.

Short calls (at most WALK_MAX_TOKENS tokens, or short sequences on average) skip all of
that: `_token_walk_kernel` runs the recurrence token by token, as decode does, one program
per (BV rows of the state, sequence, value head), in one launch. `_plan` chooses the path
and every launch configuration, from T and N only.

No host synchronization inside a call: sequence bounds are read on the device, grids come
from shapes, and lengths are runtime arguments (no recompilation per T or N).
Deterministic: no atomics, a fixed order for every sum. Only torch, triton and the
standard library are imported: the evaluator has nothing else.
"""

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from .shared import (HEAD_SIZE, INTERPRETED, NUM_Q_HEADS, NUM_V_HEADS, Launcher, arch_key, expect, expect_all,
                     expect_indices, expect_pool, expect_write_indices, pool_slots, scale_value, softplus)

# --- Tuning surface: every setting and launch table, chosen in _plan ----------------------
# Measured on H100 and H200 (docs/perf.md, prefill items 17-18; the span settings on an H100
# alone, item 19).

CHUNK = 64  # tokens per block (C): every product has 64 rows, which Hopper runs as wgmma
PREP_WARPS = 4  # 8 on sm_100 (_prep_warps)
# Short calls walk the tokens (_token_walk_kernel, one launch, no scratch): calls of at most
# WALK_MAX_TOKENS tokens, and calls whose sequences hold at most WALK_MAX_MEAN_LENGTH tokens on
# average (where the chunked path's per-sequence work dominates).
WALK_MAX_TOKENS = 64
WALK_MAX_MEAN_LENGTH = 4
# Spans. When the sequences are long on average (at least SPAN_MIN_TOKENS tokens each), the
# call's blocks are cut into about SPAN_MAX spans in all, of at least SPAN_MIN_BLOCKS blocks;
# at most SPAN_PIECES (sequence, span) pieces (none below 2 per sequence).
SPAN_MIN_TOKENS = 2048
SPAN_MIN_BLOCKS = 4
SPAN_MAX = 16
SPAN_PIECES = 32


class Launch(NamedTuple):
    """How a kernel that carries the state through blocks runs: BV columns of the state per
    program, warps, software-pipelining stages of its block loop."""
    block_v: int
    warps: int
    stages: int


class PiecesRow(NamedTuple):
    """A row of a table keyed by a call's (sequence, span) pieces (PASS_TABLE, SUMMARY_TABLE,
    FIXUP_TABLE): calls of up to max_pieces pieces (None: any number, the last row) run that
    table's kernel with `launch`."""
    max_pieces: int | None
    launch: Launch


# Few pieces: latency-bound, narrow tiles (more programs) and the next block's operands
# prefetched (stages 2); many: throughput-bound, wide tiles (each program loads a block's
# operands once for BV columns) and one stage, so that two programs fit a multiprocessor's
# shared memory.
PASS_TABLE = (
    PiecesRow(max_pieces=2, launch=Launch(block_v=16, warps=4, stages=2)),
    PiecesRow(max_pieces=8, launch=Launch(block_v=32, warps=4, stages=1)),
    PiecesRow(max_pieces=None, launch=Launch(block_v=64, warps=4, stages=1)),
)
# The span summary and the fix-up run only with spans (2 to SPAN_PIECES pieces).
SUMMARY_TABLE = (
    PiecesRow(max_pieces=None, launch=Launch(block_v=64, warps=4, stages=2)),
)
FIXUP_TABLE = (
    PiecesRow(max_pieces=None, launch=Launch(block_v=16, warps=4, stages=3)),
)


class WalkLaunch(NamedTuple):
    """How the token walk runs: BV rows of the state per program, warps, tokens per tile."""
    block_v: int
    warps: int
    tile: int


class WalkRow(NamedTuple):
    """A row of WALK_TABLE: calls whose mean sequence length (rounded up) is at most
    max_mean_length and whose (sequence, value head) pairs number at most max_pairs (None:
    no bound) walk with `launch`; the first row that fits."""
    max_mean_length: int | None
    max_pairs: int | None
    launch: WalkLaunch


# One-token sequences: no tiles, and decode's tiles at large batch; longer ones: tiles of
# tokens, narrow state tiles for one sequence (more programs, a shorter chain per token).
WALK_TABLE = (
    WalkRow(max_mean_length=1, max_pairs=32, launch=WalkLaunch(block_v=2, warps=1, tile=1)),
    WalkRow(max_mean_length=1, max_pairs=None, launch=WalkLaunch(block_v=16, warps=1, tile=1)),
    WalkRow(max_mean_length=None, max_pairs=8, launch=WalkLaunch(block_v=2, warps=1, tile=8)),
    WalkRow(max_mean_length=None, max_pairs=None, launch=WalkLaunch(block_v=4, warps=1, tile=4)),
)

# Triton's interpreter (TRITON_INTERPRET=1, CPU) costs a few milliseconds per program whatever
# its tile, so there every kernel runs with the whole state's width per program.
INTERPRETER_WIDE = INTERPRETED
INTERPRETER_LAUNCH = Launch(block_v=HEAD_SIZE, warps=4, stages=1)
INTERPRETER_WALK = WalkLaunch(block_v=HEAD_SIZE, warps=1, tile=4)


# --- Device helpers shared by both paths ----------------------------------------------------

@triton.jit
def _scale(scale, scale_ptr, SCALE_FROM_PTR: tl.constexpr, D: tl.constexpr):
    """The output scale: `scale`, or the value at scale_ptr; 0 means 1/sqrt(D)."""
    if SCALE_FROM_PTR:
        s = tl.load(scale_ptr).to(tl.float32)
        return tl.where(s == 0.0, 1.0 / tl.sqrt(float(D)), s)
    else:
        return scale


@triton.jit
def _bounds(cu_ptr, seq, T, SINGLE: tl.constexpr):
    """(bos, eos): sequence seq holds the tokens bos <= t < eos, its cu_seqlens entries clamped
    so that 0 <= bos <= eos <= T whatever they hold: no kernel reads or writes outside its
    tensors. For a well-formed cu_seqlens (_cu_seqlens_ok) the clamp changes nothing. SINGLE
    (one sequence): 0 and T, with no load to wait for (well formed, cu_seqlens is [0, T])."""
    if SINGLE:
        bos = (T * 0).to(tl.int64)
        eos = bos + T
    else:
        bos = tl.minimum(tl.maximum(tl.load(cu_ptr + seq), 0), T)
        eos = tl.minimum(tl.maximum(tl.load(cu_ptr + seq + 1), bos), T)
    return bos, eos


@triton.jit
def _cu_seqlens_load(cu_ptr, N, BN: tl.constexpr):
    """The loads _cu_seqlens_ok reads (its first BN steps, cu[0] and cu[N]), issued where this is
    called (a kernel's start) and waited for only where that is called (its end)."""
    offs = tl.arange(0, BN)
    return (tl.load(cu_ptr + offs, mask=offs < N, other=0), tl.load(cu_ptr + offs + 1, mask=offs < N, other=0),
            tl.load(cu_ptr), tl.load(cu_ptr + N))


@triton.jit
def _cu_seqlens_ok(lower, upper, first, last, cu_ptr, N, T, BN: tl.constexpr):
    """Whether cu_seqlens [N + 1] is well formed: cu[0] = 0, cu[N] = T, nondecreasing; from
    _cu_seqlens_load's values, and the steps past the first BN. Every kernel that writes
    outputs asks, and if not, writes NaN everywhere it could have written (see kernel())."""
    lowest = tl.min(upper - lower, axis=0)
    offs = tl.arange(0, BN)
    for start in range(BN, N, BN):
        inside = start + offs < N
        steps = (tl.load(cu_ptr + start + offs + 1, mask=inside, other=0)
                 - tl.load(cu_ptr + start + offs, mask=inside, other=0))
        lowest = tl.minimum(lowest, tl.min(steps, axis=0))
    return (first == 0) & (last == T) & (lowest >= 0)


@triton.jit
def _mark_rows(out_ptr, lo, hi, head, cols, HV: tl.constexpr, D: tl.constexpr):
    """NaN into the output rows lo <= t < hi, value head `head`, columns `cols`: how the
    kernels mark the rows no sequence of a malformed cu_seqlens would write (see kernel()).
    The token walk marks the rows it wrote (after writing them, so its NaN comes last) and,
    as program p of P by grid position, the p-th of P even parts of the T tokens
    (_even_part); the prep marks its block's rows before the walks write any."""
    _fill_rows(out_ptr, lo, hi, head, cols, float("nan"), HV, D)


@triton.jit
def _fill_rows(out_ptr, lo, hi, head, cols, value, HV: tl.constexpr, D: tl.constexpr):
    """`value` into the output rows lo <= t < hi, value head `head`, columns `cols`."""
    fill = tl.where(cols >= 0, value, 0.0).to(out_ptr.dtype.element_ty)
    for t in range(lo, hi):
        tl.store(out_ptr + (t * HV + head) * D + cols, fill)


@triton.jit
def _state_offsets(row, head, v_offs, k_offs, HV: tl.constexpr, D: tl.constexpr):
    """Element offsets of state[row, head][v_offs, k_offs] in a [rows, HV, D, D] tensor of K-last
    states (v_offs and k_offs broadcast against each other), in int64."""
    return ((row * HV + head) * D + v_offs).to(tl.int64) * D + k_offs


@triton.jit
def _even_part(p, P, T):
    """(lo, hi): the p-th of P parts of 0..T-1, the first T % P one token longer."""
    size = T // P
    longer = T % P
    lo = (p * size + tl.minimum(p, longer)).to(tl.int64)
    return lo, lo + size + (p < longer)


# --- Chunked path, stage 1: the blocks' operands (_chunk_prep_kernel) -------------------------

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
    SINGLE: tl.constexpr, WIDEN_BF16: tl.constexpr, HQ: tl.constexpr, HV: tl.constexpr, D: tl.constexpr,
    C: tl.constexpr, BN: tl.constexpr,
):
    """Loads and gates of the block of C tokens from `start` for one value head.

    Returns valid (rows < T), seg (sequence of each row), k and q [C, D] (bf16, or float32
    when WIDEN_BF16), beta, G (float64: g summed over the row's segment up to the row), G_end
    (float64: over the whole segment) and decay [C, C]: exp(G_i - G_j) for the pairs (i, j)
    of one segment with j <= i, else 0. The sums run in float64: G grows to C times the
    largest |g|, and a float32 G would put an error of |G| * 2^-24 into every exponent, where
    only |G_i - G_j| * 2^-24 is due."""
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

    g = tl.where(valid, -tl.exp(A_log) * softplus(a.to(tl.float32) + dt_bias), 0.0).to(tl.float64)
    beta = 1.0 / (1.0 + tl.exp(-b.to(tl.float32)))
    G, _ = tl.associative_scan((g, seg), 0, _segment_sum)
    after, _ = tl.associative_scan((g, seg), 0, _segment_sum, reverse=True)
    causal = (seg[:, None] == seg[None, :]) & (i[None, :] <= i[:, None])
    decay = tl.exp(tl.where(causal, (G[:, None] - G[None, :]).to(tl.float32), float("-inf")))
    return valid, seg, k, q, beta, G, G + after - g, decay


@triton.jit
def _unit_lower_inverse(A, C: tl.constexpr, LOG_C: tl.constexpr):
    """(I + A)^-1 for A [C, C] float32 strictly lower triangular (C = 2^LOG_C), by doubling
    the diagonal blocks whose inverse is known. A block-lower-triangular matrix inverts as

        [[X, 0], [L, Y]]^-1 = [[X^-1, 0], [-Y^-1 L X^-1, Y^-1]],

    so with T_b the inverse of I + A cut to its diagonal blocks of b rows, and A_b the entries
    of A inside the diagonal blocks of 2b rows but outside those of b rows (rows i, j whose
    highest differing bit is bit log2 b):  T_2b = T_b - T_b (A_b T_b).  T_1 = I, so
    T_2 = I - A_1, then two products per level up to b = C/2. The operands are entries of A
    and of the inverse itself (of order 1 for the gates' A: no powers of A, whose entries
    grow), so they go in as float16 with float32 sums; T's entries, once set, never change."""
    i = tl.arange(0, C)
    apart = i[:, None] ^ i[None, :]  # its highest set bit: the level at which rows i and j meet
    inverse = tl.where(apart == 0, 1.0, 0.0) - tl.where(apart == 1, A, 0.0)
    for bit in tl.static_range(1, LOG_C):
        part = tl.where((apart >> bit) == 1, A, 0.0).to(tl.float16)
        inverse16 = inverse.to(tl.float16)
        inverse -= tl.dot(inverse16, tl.dot(part, inverse16).to(tl.float16))
    return inverse


@triton.jit(do_not_specialize=["T", "N"])
def _chunk_prep_kernel(
    q_ptr, k_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr, cu_ptr, tb_ptr, m_ptr, w_ptr, kt_ptr, qt_ptr, ge_ptr,
    flag_ptr, out_ptr, scale, scale_ptr, T, N,
    SINGLE: tl.constexpr, SCALE_FROM_PTR: tl.constexpr, WIDEN_BF16: tl.constexpr, IDX: tl.constexpr,
    HQ: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, C: tl.constexpr, LOG_C: tl.constexpr, BN: tl.constexpr,
):
    """One block of C tokens for one value head: every operand of _carry_blocks but U, which
    it makes from v (Tb v). Writes, as contiguous float16 tiles of block-major scratch,
    Tb = (I + A)^-1 diag(beta) and M [C, C], W = Tb (e^G k) and Q~ = scale e^G q [C, D],
    K~^T = (e^(G_end - G) k)^T [D, C]; and e^G_end in float32 (G_end: G at the last token of
    each row's segment). SINGLE: one sequence (no search). WIDEN_BF16: take the bf16 products
    in float32 (Triton's interpreter computes bf16 tl.dot wrongly); they are exact either
    way. Also checks cu_seqlens (_cu_seqlens_ok): program (0, 0) writes the flag every
    starting state adds, 0 or, for a malformed one, NaN; and then every program writes NaN
    into its block's output rows (those no sequence would write)."""
    block = tl.program_id(0)
    head = tl.program_id(1)
    lower, upper, cu_first, cu_last = _cu_seqlens_load(cu_ptr, N, BN)
    i = tl.arange(0, C)
    offs_d = tl.arange(0, D)
    valid, seg, k, q, beta, G64, G_end64, decay = _block_setup(
        q_ptr, k_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr, cu_ptr, block.to(IDX) * C, head, T, N,
        SINGLE, WIDEN_BF16, HQ, HV, D, C, BN)
    scale = _scale(scale, scale_ptr, SCALE_FROM_PTR, D)
    block_hv = block.to(IDX) * HV + head
    square = block_hv * (C * C) + i[:, None] * C + i[None, :]
    tile = block_hv * (C * D)
    # The operands that need no inverse first, so that q is dead before it.
    G = G64.to(tl.float32)
    k32 = k.to(tl.float32)
    kk = tl.dot(k, tl.trans(k))
    qk = tl.dot(q, tl.trans(k))
    tl.store(m_ptr + square, ((scale * decay) * qk).to(tl.float16))
    tl.store(qt_ptr + tile + i[:, None] * D + offs_d[None, :],
             (q.to(tl.float32) * (scale * tl.exp(G))[:, None]).to(tl.float16))
    tl.store(kt_ptr + tile + offs_d[:, None] * C + i[None, :],
             tl.trans(k32 * tl.exp((G_end64 - G64).to(tl.float32))[:, None]).to(tl.float16))
    tl.store(ge_ptr + block_hv * C + i, tl.exp(G_end64.to(tl.float32)))
    A = tl.where(i[None, :] < i[:, None], beta[:, None] * decay * kk, 0.0)
    tb = (_unit_lower_inverse(A, C, LOG_C) * beta[None, :]).to(tl.float16)
    tl.store(tb_ptr + square, tb)
    w = tl.dot(tb, (k32 * tl.exp(G)[:, None]).to(tl.float16))
    tl.store(w_ptr + tile + i[:, None] * D + offs_d[None, :], w.to(tl.float16))
    ok = _cu_seqlens_ok(lower, upper, cu_first, cu_last, cu_ptr, N, T, BN)
    if (block == 0) & (head == 0):
        tl.store(flag_ptr, tl.where(ok, 0.0, float("nan")))
    if not ok:
        _mark_rows(out_ptr, block.to(tl.int64) * C, tl.minimum(block.to(tl.int64) * C + C, T), head, offs_d, HV, D)


# --- Chunked path, stage 2: carrying the state through blocks (spans and the pass) ----------

@triton.jit
def _carry_blocks(h, v_ptr, out_ptr, tb_ptr, m_ptr, w_ptr, kt_ptr, qt_ptr, ge_ptr, first, count, bos, eos, head,
                  cols, use_v, OUTPUT: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, C: tl.constexpr,
                  STAGES: tl.constexpr):
    """h [D, BV] (columns `cols` of H = S^T, float32) carried through `count` blocks from block
    `first` for the tokens bos <= t < eos of one value head. Per block, from the prep's
    operands and the input's v rows (other segments' rows masked to zero, which keeps them
    out: Tb, M and the prep's rows do not mix segments):
        U = Tb v (v's columns where use_v [BV], else 0),  Delta = U - W H,
        O = Q~ H + M Delta  (OUTPUT: stored to out_ptr's columns `cols`),
        H = e^G_end H + K~^T Delta.
    With use_v false and h = I's columns this carries the block's transition H -> e^G_end H -
    K~^T W H instead. Every product takes float16 operands (H and Delta rounded) and sums in
    float32; H itself stays float32."""
    i = tl.arange(0, C)
    offs_d = tl.arange(0, D)
    tb_rows = C * tl.max(use_v.to(tl.int32), axis=0)  # with no v column U = 0: Tb is not read
    for blk in tl.range(0, count, num_stages=STAGES):
        block = first + blk
        start = block * C
        rows = start + i
        mine = (rows >= bos) & (rows < eos)
        block_hv = block * HV + head
        tile = block_hv * (C * D)
        v = tl.load(v_ptr + (rows[:, None] * HV + head) * D + cols[None, :], mask=mine[:, None] & use_v[None, :],
                    other=0.0).to(tl.float16)
        tb = tl.load(tb_ptr + block_hv * (C * C) + i[:, None] * C + i[None, :], mask=i[:, None] < tb_rows, other=0.0)
        w = tl.load(w_ptr + tile + i[:, None] * D + offs_d[None, :])
        kt = tl.load(kt_ptr + tile + offs_d[:, None] * C + i[None, :])
        g_end = tl.load(ge_ptr + block_hv * C + (tl.maximum(bos, start) - start))
        h16 = h.to(tl.float16)
        delta = tl.dot(tb, v) - tl.dot(w, h16)
        delta = tl.where(mine[:, None], delta, 0.0).to(tl.float16)
        if OUTPUT:
            qt = tl.load(qt_ptr + tile + i[:, None] * D + offs_d[None, :])
            m = tl.load(m_ptr + block_hv * (C * C) + i[:, None] * C + i[None, :])
            o = tl.dot(qt, h16)
            o = tl.dot(m, delta, o)
            tl.store(out_ptr + (rows[:, None] * HV + head) * D + cols[None, :], o.to(out_ptr.dtype.element_ty),
                     mask=mine[:, None])
        h = h * g_end + tl.dot(kt, delta)
    return h


@triton.jit
def _sequence_span(cu_ptr, seq, span, T, S, J, SINGLE: tl.constexpr, C: tl.constexpr):
    """(bos, eos, first block, blocks in the span, spans of the sequence) for span `span` of
    sequence `seq` (_bounds): a sequence's blocks, from the one holding its first token, are
    cut into spans of max(S, ceil(blocks / J)) blocks, so at most J of them; an empty
    sequence has no span (its span 0 holds no block)."""
    bos, eos = _bounds(cu_ptr, seq, T, SINGLE)
    first = bos // C
    blocks = tl.where(eos > bos, (eos - 1) // C - first + 1, 0)
    length = tl.maximum(S, (blocks + J - 1) // J)
    spans = (blocks + length - 1) // length
    count = tl.maximum(tl.minimum(blocks - span * length, length), 0)
    return bos, eos, first + span * length, count, spans


@triton.jit
def _load_start_state(state_ptr, s_offs, bos, eos, flag_ptr, HAS_STATE: tl.constexpr, POOLED: tl.constexpr,
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


@triton.jit(do_not_specialize=["T", "J", "S", "pool_size"])
def _span_summary_kernel(
    state_ptr, cu_ptr, v_ptr, tb_ptr, w_ptr, kt_ptr, ge_ptr, flag_ptr, span_n_ptr, span_p_ptr, enter_ptr,
    read_index_ptr, write_index_ptr, T, J, S, pool_size,
    SINGLE: tl.constexpr, HAS_STATE: tl.constexpr, POOLED: tl.constexpr, HV: tl.constexpr, D: tl.constexpr,
    C: tl.constexpr, BV: tl.constexpr, STAGES: tl.constexpr,
):
    """One (sequence, span but its last, value head, BV of the 2D columns [V | K]): the span's
    affine map of the state, H_end = P H_start + N, in slot (sequence J + span): N [D, D] in
    float32 to span_n, P [D, D] in float16 (only an operand of products) to span_p. N from the
    zero state and P from the identity, both by _carry_blocks; span 0 starts from the
    sequence's state instead, so its N is already the state entering span 1 (and its P is not
    needed). POOLED (pooled_prefill): that state is the sequence's read slot of the pool
    state_ptr (a sequence that is not live is skipped), and span 0 also copies it to enter
    slot (sequence J), where the pass's span 0 reads it: the pass's last span may rewrite the
    slot in the meantime."""
    pid = tl.program_id(0)
    NV: tl.constexpr = D // BV
    tile = pid % (2 * NV)
    head = (pid // (2 * NV)) % HV
    piece = pid // (2 * NV * HV)
    seq = piece // (J - 1)
    span = piece % (J - 1)
    bos, eos, first, count, spans = _sequence_span(cu_ptr, seq, span, T, S, J, SINGLE, C)
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
            h = _load_start_state(state_ptr, _state_offsets(read, head, cols[None, :], offs_d[:, None], HV, D),
                                  bos, eos, flag_ptr, HAS_STATE, POOLED, D, BV)
            if POOLED:
                tl.store(enter_ptr + _state_offsets(seq * J, head, cols[None, :], offs_d[:, None], HV, D), h)
        else:
            h = tl.where((offs_d[:, None] == cols[None, :]) & (tile >= NV), 1.0, 0.0)
        h = _carry_blocks(h, v_ptr, v_ptr, tb_ptr, tb_ptr, w_ptr, kt_ptr, kt_ptr, ge_ptr, first, count, bos, eos,
                          head, cols, use_v, False, HV, D, C, STAGES)
        slot = ((seq * J + span) * HV + head).to(tl.int64) * (D * D) + offs_d[:, None] * D + cols[None, :]
        if is_v:
            tl.store(span_n_ptr + slot, h)
        else:
            tl.store(span_p_ptr + slot, h.to(tl.float16))


@triton.jit(do_not_specialize=["T", "J", "S"])
def _span_fixup_kernel(
    cu_ptr, span_n_ptr, span_p_ptr, enter_ptr, T, J, S,
    SINGLE: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, C: tl.constexpr, BV: tl.constexpr,
    STAGES: tl.constexpr,
):
    """One (sequence, value head, BV columns of V): the state entering each span of the
    sequence from the spans' maps, in order: H_1 = N_0, H_{j+1} = P_j H_j + N_j; H_j goes to
    enter slot (sequence J + j). The only sequential part over a long sequence: one
    [D, D] x [D, BV] product per span."""
    v_tile = tl.program_id(0)
    head = tl.program_id(1)
    seq = tl.program_id(2)
    bos, eos, first, count, spans = _sequence_span(cu_ptr, seq, 0, T, S, J, SINGLE, C)
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
            h = tl.dot(p, h.to(tl.float16), n)
            tl.store(enter_ptr + slot + HV * (D * D) + cols[None, :] * D + offs_d[:, None], h)


@triton.jit(do_not_specialize=["T", "J", "S", "pool_size"])
def _span_pass_kernel(
    state_ptr, cu_ptr, v_ptr, tb_ptr, m_ptr, w_ptr, kt_ptr, qt_ptr, ge_ptr, flag_ptr, enter_ptr, out_ptr, new_state_ptr,
    read_index_ptr, write_index_ptr, T, J, S, pool_size, SINGLE: tl.constexpr, HAS_STATE: tl.constexpr,
    POOLED: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, C: tl.constexpr, BV: tl.constexpr, STAGES: tl.constexpr,
):
    """One (sequence, span, value head, BV columns of V): the span's outputs by _carry_blocks,
    from the sequence's state (span 0) or the state the fix-up found entering the span; the
    last span writes new_state (an empty sequence's span 0: zero). With J = 1 every sequence
    is one span and this is the whole state pass. A malformed cu_seqlens: the prep's flag
    makes every state NaN (_load_start_state), so every output and new_state this writes is
    NaN. POOLED (pooled_prefill): state_ptr and new_state_ptr are the pool; a sequence starts
    from its read slot (span 0 of several: from the summary's copy of it) and its last span
    writes its write slot; a sequence that is not live (pool_slots) writes its rows' fill."""
    pid = tl.program_id(0)
    NV: tl.constexpr = D // BV
    v_tile = pid % NV
    head = (pid // NV) % HV
    piece = pid // (NV * HV)
    seq = piece // J
    span = piece % J
    bos, eos, first, count, spans = _sequence_span(cu_ptr, seq, span, T, S, J, SINGLE, C)
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
        read_offs = _state_offsets(read, head, cols[None, :], offs_d[:, None], HV, D)
        write_offs = _state_offsets(write, head, cols[None, :], offs_d[:, None], HV, D)
        if live:
            if from_state:
                h = _load_start_state(state_ptr, read_offs, bos, eos, flag_ptr, HAS_STATE, POOLED, D, BV)
            else:
                slot = ((seq * J + span) * HV + head).to(tl.int64) * (D * D)
                h = tl.load(enter_ptr + slot + cols[None, :] * D + offs_d[:, None])
            h = _carry_blocks(h, v_ptr, out_ptr, tb_ptr, m_ptr, w_ptr, kt_ptr, qt_ptr, ge_ptr, first, count, bos,
                              eos, head, cols, cols < D, True, HV, D, C, STAGES)
            if (span >= spans - 1) & writes:
                tl.store(new_state_ptr + write_offs, h)
        else:
            _fill_rows(out_ptr, tl.maximum(bos, first * C), tl.minimum(eos, (first + count) * C), head, cols,
                       fill + tl.load(flag_ptr), HV, D)


# --- Token walk: short calls, the recurrence token by token -----------------------------------

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
def _token_walk_kernel(
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
    token where an even split of T would put the sequence (_even_part), and are made again
    only if the sequence starts elsewhere. A malformed cu_seqlens: NaN in new_state, in the
    rows the program wrote and in those of its even part (_mark_rows). POOLED (pooled_prefill):
    state_ptr and new_state_ptr are the pool, the tile is read from the sequence's read slot
    and written to its write slot (pool_slots; an empty sequence copies it unchanged), and a
    sequence that is not live writes its fill as outputs."""
    v_tile = tl.program_id(0)
    seq = tl.program_id(1) // HV
    head = tl.program_id(1) % HV
    offs_k = tl.arange(0, D)
    cols = v_tile * BV + tl.arange(0, BV)
    guess, guess_end = _even_part(seq, N, T)
    q, k, v, a, b = _token_tile(q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, guess, T, head, offs_k, cols, HQ, HV, D, CT)
    bos, eos = _bounds(cu_ptr, seq, T, False)
    lower, upper, cu_first, cu_last = _cu_seqlens_load(cu_ptr, N, BN)
    read_offs = _state_offsets(seq, head, cols[:, None], offs_k[None, :], HV, D)
    write_offs = read_offs
    write_mask = None
    if POOLED:
        read, write, live, writes, fill = pool_slots(read_index_ptr, write_index_ptr, seq, pool_size)
        read_offs = _state_offsets(read, head, cols[:, None], offs_k[None, :], HV, D)
        write_offs = _state_offsets(write, head, cols[:, None], offs_k[None, :], HV, D)
        # Whole-tile masks as comparisons of the row offsets (the interpreter cannot broadcast a scalar mask).
        write_mask = cols[:, None] < tl.where(writes, D, 0)
        s = tl.load(state_ptr + read_offs, mask=cols[:, None] < tl.where(live, D, 0), other=0.0)
    elif HAS_STATE:
        s = tl.load(state_ptr + read_offs)
    else:
        s = tl.zeros([BV, D], dtype=tl.float32)
    rate = -tl.exp(tl.load(A_log_ptr + head))
    dt_bias = tl.load(dt_bias_ptr + head)
    scale = _scale(scale, scale_ptr, SCALE_FROM_PTR, D)
    if bos != guess:
        q, k, v, a, b = _token_tile(q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, bos, eos, head, offs_k, cols, HQ, HV, D, CT)
    for start in range(bos, eos, CT):
        q_c, k_c, v_c, a_c, b_c = q, k, v, a, b
        q, k, v, a, b = _token_tile(q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, start + CT, eos, head, offs_k, cols,
                                    HQ, HV, D, CT)
        g = tl.exp(rate * softplus(a_c + dt_bias))
        beta = 1.0 / (1.0 + tl.exp(-b_c))
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
    ok = _cu_seqlens_ok(lower, upper, cu_first, cu_last, cu_ptr, N, T, BN)
    if not POOLED:
        s = tl.where(eos > bos, s, 0.0)  # an empty sequence ends at zero
    tl.store(new_state_ptr + write_offs, tl.where(ok, s, float("nan")), mask=write_mask)
    if not ok:
        _mark_rows(out_ptr, bos, eos, head, cols, HV, D)
        _mark_rows(out_ptr, guess, guess_end, head, cols, HV, D)


# --- Host side: checks, scale, the plan, scratch, launches -------------------------------------
# The evaluator times a call from its first GPU activity to its last, so host work before
# the first launch is free while host gaps between launches count. Everything is checked and
# prepared before the first launch, the launches' own arguments included (Launcher.prepare_by_name);
# then they go out back to back through the compiled kernels' launchers, which take a few
# microseconds instead of Triton's full path (docs/perf.md, "Notes moved from the code").

_ARG_NAMES = ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens", "output", "new_state")
_SEQ_BLOCK = 64  # sequence ends compared per step when locating a token's sequence


class Plan(NamedTuple):
    """How a call of T tokens in N sequences runs (_plan). walk: the token walk's launch, or
    None for the chunked path; then spans of at least span_blocks blocks, at most `spans` per
    sequence (1: no spans), and the launches of the span pass, the summary and the fix-up."""
    walk: WalkLaunch | None
    span_blocks: int
    spans: int
    pass_launch: Launch
    summary: Launch
    fixup: Launch


def _plan(total, num_seqs, device):
    """The Plan for T tokens in N sequences on `device`: the path and every launch, from the
    shapes only (the tables and settings at the top of this file)."""
    wide = INTERPRETER_WIDE and device.type == "cpu"
    if _walks(total, num_seqs):
        return Plan(INTERPRETER_WALK if wide else _walk_launch(total, num_seqs), 1, 1, *(INTERPRETER_LAUNCH,) * 3)
    span_blocks, spans = _span_plan(total, num_seqs)
    if wide:
        return Plan(None, span_blocks, spans, *(INTERPRETER_LAUNCH,) * 3)
    pieces = num_seqs * spans
    return Plan(None, span_blocks, spans, *(_on_device(_launch_for(table, pieces), device)
                                            for table in (PASS_TABLE, SUMMARY_TABLE, FIXUP_TABLE)))


def _walks(total, num_seqs):
    """Whether a call of T tokens in N sequences walks its tokens (see WALK_MAX_TOKENS)."""
    return total <= WALK_MAX_TOKENS or total <= WALK_MAX_MEAN_LENGTH * num_seqs


def _walk_launch(total, num_seqs):
    """The token walk's WalkLaunch for T tokens in N sequences (WALK_TABLE)."""
    mean, pairs = triton.cdiv(total, num_seqs), num_seqs * NUM_V_HEADS
    return next(launch for longest, most, launch in WALK_TABLE if _within(mean, longest) and _within(pairs, most))


def _span_plan(total, num_seqs):
    """(S, J): blocks per span at least and spans per sequence at most, for T tokens in N
    sequences (J = 1: no spans; then S covers any sequence). The call's blocks are cut into
    about SPAN_MAX spans in all, of at least SPAN_MIN_BLOCKS blocks (S); J is what a sequence
    of all T tokens would take, within SPAN_PIECES // N, and a sequence longer than J spans of
    S blocks takes longer ones (_sequence_span). See SPAN_MIN_TOKENS."""
    blocks = triton.cdiv(total, CHUNK)
    if SPAN_MAX < 2:
        return max(blocks, 1), 1
    span = max(SPAN_MIN_BLOCKS, triton.cdiv(blocks, SPAN_MAX))
    spans = min(SPAN_PIECES // num_seqs, triton.cdiv(blocks, span))
    if spans < 2 or total < SPAN_MIN_TOKENS * num_seqs:
        return max(blocks, 1), 1
    return span, spans


def _launch_for(table, pieces):
    """The Launch of `table` (rows of PiecesRow) for a call of `pieces` (sequence, span) pieces."""
    return next(launch for most, launch in table if _within(pieces, most))


def _within(value, bound):
    """value <= bound, a bound of None meaning none."""
    return bound is None or value <= bound


def _on_device(launch, device):
    """`launch` as it runs on `device`: Triton 3.6 on sm_100 computes tl.dot recurrences
    nondeterministically with 4 or more warps (triton issue #9871), so there the kernels that
    carry the state run with 2 warps, at most 16 columns and one stage (with 2 warps a wider
    tile or a second stage spills registers; compiled offline for sm_100)."""
    if _blackwell(device) and launch.warps > 2:
        return Launch(block_v=min(launch.block_v, 16), warps=2, stages=1)
    return launch


def _prep_warps(device):
    """The prep's warps on `device`: PREP_WARPS, or 8 on sm_100, where 4 spill registers."""
    return 8 if _blackwell(device) else PREP_WARPS


def _blackwell(device):
    """Whether `device` runs sm100's launches (shared.arch_key: compute capability 10 or more)."""
    return arch_key(device) == "sm100"


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
    total, num_seqs, device = _sizes(tensors[0], tensors[_ARG_NAMES.index("cu_seqlens")])
    expect_all(_ARG_NAMES, tensors, _expected(total, num_seqs), device)
    return total, num_seqs, device


def _sizes(q, cu_seqlens):
    """(T, N, device) from q [T, 4, 128] and cu_seqlens [N + 1]; ValueError naming the first of
    them that is not a tensor of that rank."""
    if not isinstance(q, torch.Tensor) or q.dim() != 3:
        got = f"shape {list(q.shape)}" if isinstance(q, torch.Tensor) else type(q).__name__
        raise ValueError(f"q: expected a [T, {NUM_Q_HEADS}, {HEAD_SIZE}] tensor, got {got}")
    if not isinstance(cu_seqlens, torch.Tensor) or cu_seqlens.dim() != 1 or cu_seqlens.numel() == 0:
        got = f"shape {list(cu_seqlens.shape)}" if isinstance(cu_seqlens, torch.Tensor) else type(cu_seqlens).__name__
        raise ValueError(f"cu_seqlens: expected a 1-D tensor [N + 1], got {got}")
    return q.shape[0], cu_seqlens.shape[0] - 1, q.device


def _resolve_scale(scale, device):
    """(value, tensor): scale_value's float and None, or, for a one-element float tensor on
    the kernels' device, (0.0, that tensor), read in-kernel so that the call never waits on
    the device. A tensor elsewhere (the CPU) is read here."""
    if (isinstance(scale, torch.Tensor) and scale.device == device and device.type != "cpu"
            and scale.numel() == 1 and scale.is_floating_point()):
        return 0.0, scale
    return scale_value(scale), None


_launch_prep = Launcher(_chunk_prep_kernel)
_launch_summary = Launcher(_span_summary_kernel)
_launch_fixup = Launcher(_span_fixup_kernel)
_launch_pass = Launcher(_span_pass_kernel)
_launch_walk = Launcher(_token_walk_kernel)


def check_cu_seqlens(cu_seqlens, total_seq_len):
    """Raise ValueError naming the first bad entry of cu_seqlens unless it starts at 0, never
    decreases and ends at total_seq_len (T). Reads the values on the host: a synchronization
    when they are on a GPU, so kernel() does not call it (see there)."""
    if not isinstance(cu_seqlens, torch.Tensor) or cu_seqlens.dim() != 1 or cu_seqlens.numel() == 0:
        raise ValueError("cu_seqlens: expected a 1-D tensor [N + 1]")
    ends = cu_seqlens.tolist()
    if ends[0] != 0:
        raise ValueError(f"cu_seqlens[0]: expected 0, got {ends[0]}")
    for n in range(1, len(ends)):
        if ends[n] < ends[n - 1]:
            raise ValueError(f"cu_seqlens[{n}]: expected at least cu_seqlens[{n - 1}] = {ends[n - 1]} "
                             f"(nondecreasing), got {ends[n]}")
    if ends[-1] != total_seq_len:
        raise ValueError(f"cu_seqlens[{len(ends) - 1}]: expected total_seq_len = {total_seq_len}, got {ends[-1]}")


def _scratch(blocks, num_seqs, spans, device):
    """The chunked path's scratch, by name: the prep's float16 tiles Tb and M [blocks, HV, C, C],
    W, K~^T and Q~ [blocks, HV, C D]; its float32 e^G_end [blocks, HV, C] and cu_seqlens flag
    (4 elements: every slot stays 16-byte aligned); with spans, each (sequence, span)'s map N
    (float32) and P (float16) [N J, HV, D, D] and its entering state [N J, HV, D, D] (float32).
    One float16 and one float32 allocation."""
    hv, c, d = NUM_V_HEADS, CHUNK, HEAD_SIZE
    maps = num_seqs * spans * hv * d * d if spans > 1 else 0
    half = dict(tb=blocks * hv * c * c, m=blocks * hv * c * c, w=blocks * hv * c * d, kt=blocks * hv * c * d,
                qt=blocks * hv * c * d, span_p=maps)
    single = dict(ge=blocks * hv * c, flag=4, span_n=maps, enter=maps)
    buffers = {}
    for dtype, sizes in ((torch.float16, half), (torch.float32, single)):
        parts = torch.split(torch.empty(sum(sizes.values()), dtype=dtype, device=device), list(sizes.values()))
        buffers.update(zip(sizes, parts))
    return buffers


# kernel()'s index arguments of the kernels: none (they then compile without POOLED's code).
_NOT_POOLED = dict(read_index_ptr=None, write_index_ptr=None, pool_size=None)


def kernel(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, output, new_state):
    """DPS entry point: writes `output` [T,8,128] bf16 and `new_state` [N,8,128,128] f32.

    One to four kernel launches, no host synchronization. Raises ValueError naming the first
    bad argument. cu_seqlens must be nondecreasing from 0 to T; its values are read on the
    device only (reading them here would stall the call), so a malformed one raises nothing:
    the kernels see it and write NaN into every element of output and new_state, reading and
    writing nothing outside the tensors. (Which sequences the caller meant cannot be told
    then: a decrease makes sequences overlap, ends that do not add up to T leave rows to no
    sequence.) Callers that can afford a synchronization check first: check_cu_seqlens.
    new_state may be state itself (in place); with spans the state is then copied first (one
    more launch), since the last span's writes and the first span's reads share a launch.
    """
    tensors = (q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, output, new_state)
    total, num_seqs, device = _check(tensors)
    scale_float, scale_tensor = _resolve_scale(scale, device)
    if num_seqs > 0:
        _launch_call(tensors, total, num_seqs, device, scale_float, scale_tensor, _NOT_POOLED)


def pooled_prefill(q, k, v, state_pool, read_indices, A_log, a, dt_bias, b, cu_seqlens, scale, output,
                   write_indices=None):
    """Prefill over a state pool, as a serving engine calls it: sequence n starts from
    S = state_pool[read_indices[n]] and its final state goes to state_pool[write_indices[n]]
    (write_indices None: read_indices, an update in place). Writes `output` [T,8,128] bf16.
    The arguments are kernel()'s with `state` replaced by the pool [P,8,128,128] f32 and
    read_indices [N] (int32 or int64), and `new_state` by write_indices [N] (read_indices'
    dtype): the names and conventions of pooled_decode (kernel.py).

    Index conventions (shared.pool_slots): a negative read index marks a padding sequence: its
    outputs are zeroed and no slot is read or written. A negative write index alone keeps the
    sequence's outputs and writes no state. An index >= P cannot be raised without waiting on
    the device: that sequence's outputs are NaN and no slot is touched. An empty sequence's
    final state is its initial one (copied to its write slot; kernel() zeroes it, as the
    contest's definition does). Sequences must not share a write slot, nor write a slot
    another sequence reads (the order of sequences is not defined); in place is safe.

    The same kernels and plan as kernel() (their POOLED variant adds the index loads, the
    slot offsets and the padding fill; a sequence of several spans reads its slot once, in
    the summary, which copies it to scratch). No host synchronization, so a CUDA graph can
    capture it (with a number or a device tensor as scale): the token walk allocates nothing,
    the chunked path its scratch, from torch's allocator. A malformed cu_seqlens gives NaN as
    in kernel(), in the outputs and in every slot written. Raises ValueError naming the first
    bad argument.
    """
    total, num_seqs, device = _sizes(q, cu_seqlens)
    expected = dict(zip(_ARG_NAMES, _expected(total, num_seqs)))
    for name, t in (("q", q), ("k", k), ("v", v)):
        expect(name, t, *expected[name], device)
    pool_size = expect_pool("state_pool", state_pool, device)
    expect_indices("read_indices", read_indices, num_seqs, device)
    for name, t in (("A_log", A_log), ("a", a), ("dt_bias", dt_bias), ("b", b), ("cu_seqlens", cu_seqlens),
                    ("output", output)):
        expect(name, t, *expected[name], device)
    write_indices = expect_write_indices(write_indices, read_indices)
    scale_float, scale_tensor = _resolve_scale(scale, device)
    if num_seqs > 0:
        _launch_call((q, k, v, state_pool, A_log, a, dt_bias, b, cu_seqlens, output, state_pool), total, num_seqs,
                     device, scale_float, scale_tensor,
                     dict(read_index_ptr=read_indices, write_index_ptr=write_indices, pool_size=pool_size))


def _launch_call(tensors, total, num_seqs, device, scale_float, scale_tensor, pool):
    """The launches of a checked call of N > 0 sequences: `tensors` in _ARG_NAMES order
    (pooled_prefill's: the pool as state and new_state), `pool` the kernels' index arguments
    (read_index_ptr, write_index_ptr, pool_size; all None for kernel(), which then runs the
    kernels compiled without POOLED's code)."""
    q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, output, new_state = tensors
    pooled = pool["pool_size"] is not None
    plan = _plan(total, num_seqs, device)
    inputs = dict(q_ptr=q, k_ptr=k, A_log_ptr=A_log, a_ptr=a, dt_bias_ptr=dt_bias, b_ptr=b, cu_ptr=cu_seqlens)
    state_in = state if state is not None else new_state  # unused without a state
    if (plan.spans > 1 and not pooled and state is not None
            and state.untyped_storage().data_ptr() == new_state.untyped_storage().data_ptr()):
        state_in = state.clone()  # in place: the last span writes what span 0 reads, in one launch
    scale_args = dict(scale=scale_float, scale_ptr=A_log if scale_tensor is None else scale_tensor)
    heads = dict(HV=NUM_V_HEADS, D=HEAD_SIZE)
    if plan.walk is not None:
        _launch_walk.prepare_by_name(
            (HEAD_SIZE // plan.walk.block_v, num_seqs * NUM_V_HEADS, 1),
            dict(inputs, v_ptr=v, state_ptr=state_in, out_ptr=output, new_state_ptr=new_state, **pool, **scale_args,
                 T=total, N=num_seqs),
            dict(HAS_STATE=state is not None, SCALE_FROM_PTR=scale_tensor is not None, POOLED=pooled, HQ=NUM_Q_HEADS,
                 **heads, BV=plan.walk.block_v, BN=_SEQ_BLOCK, CT=plan.walk.tile),
            plan.walk.warps, device.index)()
        return
    blocks = max(triton.cdiv(total, CHUNK), 1)  # at least one prep program: it writes the flag
    s = _scratch(blocks, num_seqs, plan.spans, device)
    operands = dict(tb_ptr=s["tb"], w_ptr=s["w"], kt_ptr=s["kt"], ge_ptr=s["ge"], flag_ptr=s["flag"])
    # The prep's element offsets in int32 when every one fits (the usual case), else in int64.
    idx = tl.int32 if max(blocks * NUM_V_HEADS * CHUNK * HEAD_SIZE, total * NUM_V_HEADS * HEAD_SIZE) < 2**31 else tl.int64
    lengths = dict(T=total, J=plan.spans, S=plan.span_blocks)
    carry = dict(SINGLE=num_seqs == 1, HAS_STATE=state is not None, POOLED=pooled, **heads, C=CHUNK)
    launches = [_launch_prep.prepare_by_name(  # every launch prepared before the first goes out
        (blocks, NUM_V_HEADS, 1),
        dict(inputs, **operands, m_ptr=s["m"], qt_ptr=s["qt"], out_ptr=output, **scale_args, T=total, N=num_seqs),
        dict(SINGLE=num_seqs == 1, SCALE_FROM_PTR=scale_tensor is not None, WIDEN_BF16=INTERPRETED, IDX=idx,
             HQ=NUM_Q_HEADS, **heads, C=CHUNK, LOG_C=CHUNK.bit_length() - 1, BN=_SEQ_BLOCK),
        _prep_warps(device), device.index)]
    if plan.spans > 1:
        summary, fixup = plan.summary, plan.fixup
        launches.append(_launch_summary.prepare_by_name(
            (num_seqs * (plan.spans - 1) * NUM_V_HEADS * 2 * (HEAD_SIZE // summary.block_v), 1, 1),
            dict(operands, state_ptr=state_in, cu_ptr=cu_seqlens, v_ptr=v, span_n_ptr=s["span_n"],
                 span_p_ptr=s["span_p"], enter_ptr=s["enter"] if pooled else None, **pool, **lengths),
            dict(carry, BV=summary.block_v, STAGES=summary.stages), summary.warps, device.index))
        launches.append(_launch_fixup.prepare_by_name(
            (HEAD_SIZE // fixup.block_v, NUM_V_HEADS, num_seqs),
            dict(cu_ptr=cu_seqlens, span_n_ptr=s["span_n"], span_p_ptr=s["span_p"], enter_ptr=s["enter"], **lengths),
            dict(SINGLE=num_seqs == 1, **heads, C=CHUNK, BV=fixup.block_v, STAGES=fixup.stages), fixup.warps,
            device.index))
    walk_pass = plan.pass_launch
    launches.append(_launch_pass.prepare_by_name(
        (num_seqs * plan.spans * NUM_V_HEADS * (HEAD_SIZE // walk_pass.block_v), 1, 1),
        dict(operands, state_ptr=state_in, cu_ptr=cu_seqlens, v_ptr=v, m_ptr=s["m"], qt_ptr=s["qt"],
             enter_ptr=s["enter"], out_ptr=output, new_state_ptr=new_state, **pool, **lengths),
        dict(carry, BV=walk_pass.block_v, STAGES=walk_pass.stages), walk_pass.warps, device.index))
    for launch in launches:
        launch()

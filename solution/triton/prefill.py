"""Gated Delta Net prefill in Triton (K-last state, variable-length sequences): the entry
points, the plan of a call and its launches. The kernels are in one module per stage.

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

Two paths, chosen in _plan from T and N only:
- Short calls (at most WALK_MAX_TOKENS tokens, or short sequences on average): the token walk
  (prefill_walk), the recurrence token by token as decode does it, one launch.
- The chunked path: blocks of C = 64 tokens, the state carried block by block with three
  products in sequence per block (prefill_carry has the algebra).
  1. prefill_prep: every block's Tb = (I + A)^-1 diag(beta), M, gates and float16 copies of
     k and q, all in parallel, and (for the calls the ORDER_* settings pick) the order in
     which the walks take the sequences (longest first, prefill_order);
  2. with spans (long sequences, prefill_spans has the rule), prefill_maps: each span's affine
     map of the state (summary), then the states entering the spans in order (fix-up);
  3. prefill_pass: one program per (sequence, span, value head, BV columns of V) carries the
     state through its blocks and writes the outputs, every other operand made on chip from
     those and v; without spans that is the fused path, the whole sequence per program. The
     rule for spans (sequences of SPAN_MIN_TOKENS or more on average) is v2's, kept: the fused
     path takes every call of the contest's many-sequence shapes (tests/test_prefill_stages.py).
     On Hopper the summary and the pass of calls of several (sequence, span) pieces and blocks
     are prefill_pass_hopper's instead (Gluon: TMA a block ahead, the state as wgmma's register
     operand; HOPPER_PASS_*, HOPPER_SUMMARY).

Precision. Every product on the tensor cores takes float16 operands and accumulates in
float32; the state stays in float32 registers and is rounded to float16 only as an operand.
float16 has tf32's 10-bit mantissa (bfloat16 operands fail the contest's check under weak
decay, docs/perf.md) at bfloat16's rate; the operands are bounded by the inputs' sizes.

Launches come from per-architecture tables (_table: "sm90" for Hopper, "sm100" for Blackwell,
shared.arch_key), so a change of GPU changes data, not code. On sm_100 every kernel runs one
stage: Triton's tcgen05 path has computed tl.dot recurrences wrongly with 2-3 stages, and one
stage is outside every failure reported (docs/sm100.md); and each configuration is checked
against the token walk on its first call there (prefill_guard), which moves the GPU to a safer
plan if it fails.

No host synchronization inside a call: sequence bounds are read on the device, grids come
from shapes, and lengths are runtime arguments (no recompilation per T or N).
Deterministic: no atomics, a fixed order for every sum. Only torch, triton and the
standard library are imported: the evaluator has nothing else.
"""

import functools
import operator
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from .prefill_guard import record, rung, unchecked, verdict
from .prefill_maps import span_fixup_kernel, span_summary_kernel
from .prefill_pass import span_pass_kernel
from .prefill_pass_hopper import Address, hopper_pass_kernel, hopper_summary_kernel, tile_descriptors
from .prefill_prep import GATE_ROWS, chunk_prep_kernel
from .prefill_spans import SpanSettings, span_plan
from .prefill_walk import token_walk_kernel
from .shared import (HEAD_SIZE, INTERPRETED, NUM_Q_HEADS, NUM_V_HEADS, POOL_ROW, Launcher, all_aligned, arch_key,
                     checked_pointers, direct_layouts, expect_rank, expected_specs, hooks_installed, launch_generation,
                     pooled_checks, pooled_pointers, scale_value)

# --- Tuning surface: every setting and launch table, chosen in _plan ----------------------
# Measured on H100 and H200 (docs/perf.md, prefill items 17-20).

CHUNK = 64  # tokens per block (C): every product has 64 rows, which Hopper runs as wgmma
# Short calls walk the tokens (prefill_walk, one launch, no scratch): calls of at most
# WALK_MAX_TOKENS tokens, and calls whose sequences hold at most WALK_MAX_MEAN_LENGTH tokens on
# average (where the chunked path's per-sequence work dominates).
WALK_MAX_TOKENS = 64
WALK_MAX_MEAN_LENGTH = 4
# Spans (prefill_spans). When the sequences are long on average (at least SPAN_MIN_TOKENS
# tokens each), the call's blocks are cut into about SPAN_MAX spans in all, of at least
# SPAN_MIN_BLOCKS blocks; at most SPAN_PIECES (sequence, span) pieces (none below 2 per sequence).
SPAN_MIN_TOKENS = 2048
SPAN_MIN_BLOCKS = 4
SPAN_MAX = 16
SPAN_PIECES = 32
# The walks take the sequences longest first (prefill_order) in calls of several sequences
# whose prep runs several waves of programs (at least ORDER_MIN_BLOCKS blocks) and whose span
# pass has at least ORDER_MIN_PROGRAMS programs (more than two per multiprocessor on 132-148
# of them, so that some start only as others end). Elsewhere the order cannot shorten the
# pass, and the program of the prep that writes it ends the prep later (measured on an H200,
# docs/perf.md item 23).
ORDER_MIN_BLOCKS = 64
ORDER_MIN_PROGRAMS = 288


class Launch(NamedTuple):
    """How a kernel that carries the state through blocks runs: BV columns of the state per
    program, warps, software-pipelining stages of its block loop; for the span pass, whether
    each block step first asks the L2 for the next block's operands (prefill_carry.prefetch_block;
    never in Triton's interpreter)."""
    block_v: int
    warps: int
    stages: int
    prefetch: bool = False


class PiecesRow(NamedTuple):
    """A row of a table keyed by a call's (sequence, span) pieces (PASS_TABLE, SUMMARY_TABLE,
    FIXUP_TABLE, HOPPER_PASS_TABLE): calls of up to max_pieces pieces (None: any number, the
    last row) run that table's kernel with `launch`."""
    max_pieces: int | None
    launch: Launch


class PrepRow(NamedTuple):
    """A row of PREP_TABLE: calls of up to max_blocks blocks (None: any number, the last row)
    run the prep with `warps` warps, its registers capped at `maxnreg` per thread (None: as
    the compiler allocates them)."""
    max_blocks: int | None
    warps: int
    maxnreg: int | None = None


# Every launch table is a dict by architecture, read through _table: "sm90" (Hopper); "sm100"
# (Blackwell); "interpreter" (Triton's interpreter on
# the CPU costs a few milliseconds per program whatever its tile: there every kernel runs with
# the state's whole width per program). A tuner rewrites one architecture's rows.
#
# sm_90. The pass: few pieces: latency-bound, narrow tiles (more programs) and the next block's
# operands prefetched (stages 2), and the one after asked of the L2 (prefetch: 31.6 -> 27.2 us at
# 1 x 1024 on an H200, docs/perf.md item 29); more: wide tiles (each program loads a block's
# operands once for 64 columns) and one stage (there the L2 prefetch was a wash: with the sm100
# plan forced onto an H200, -1 to -2 % on 16 x 512, the kit's N = 22 and the long rows, +1 to
# +2.5 % on 57 / 8192, 1 x 1024 and 1 x 4096). Measured on an H200 (docs/perf.md item 20): 32
# columns with one stage (the former middle row) and 16 with one stage compute wrongly under
# Triton 3.6 (an illegal address; worst margins of 100 and more), the interpreter right; not used.
#
# sm_90, the prep: from 33 blocks (more programs than two per multiprocessor) 4 warps capped at
# 168 registers, three programs per multiprocessor instead of two. On an H200 (docs/perf.md item
# 25) the prep 35.7 -> 31.4 us at 1 x 8192, 40.4 -> 38.2 at 16 x 512, 42.9 -> 37.4 at 57 / 8192
# (the call 3-5 % faster). Since item 28 the prep needs at most 168 registers uncapped under
# Triton 3.7.1 and 3.9 (Triton 3.6: up to 238 with 64 cu_seqlens entries), so the cap spills
# nothing; capped at 128 (four programs per multiprocessor) it was 0.6-2.4 us faster on an H200
# but spills 36-164 bytes: not taken. Up to 32 blocks every program has a slot anyway: uncapped.
#
# sm_100 (docs/sm100.md). Triton's tcgen05 path (4 or more warps) computed tl.dot recurrences
# wrongly or nondeterministically on sm_100/sm_103 (triton #9871, #10590, #10821, PR #10993),
# every failing set with 2 or 3 stages; PR #10993 names one stage unaffected. So every kernel
# runs one stage on sm_100, at 4 warps with Hopper's widths: forced onto an H200 within 8 % of
# the Hopper plan on the long rows (docs/perf.md item 20). The 2-warp plan (mma.sync, no
# tcgen05) that landed before costs 2.2x on the long rows with these kernels and spills more;
# the prep at 8 warps costs 22-35 % on those rows (item 20), and at 4 warps it spills nothing
# on sm_100a since item 22. Since item 28 it takes 155-168 registers there uncapped (Triton 3.6,
# 3.7.1, 3.9; 202-250 before): three programs per multiprocessor instead of two, no cap needed.
# No B200 has run it, so it is checked where it runs (prefill_guard): a configuration whose
# outputs disagree with the token walk's on its first call moves the GPU to "sm100_mma" (the
# same kernels at 2 warps: mma.sync, no tcgen05; 2.2x slower on the long calls), and from there
# to "sm100_walk" (no chunked tables: every call walks its tokens, no tensor-core product).
PREP_TABLE = {
    "sm90": (
        PrepRow(max_blocks=32, warps=4),
        PrepRow(max_blocks=None, warps=4, maxnreg=168),
    ),
    "sm100": (
        PrepRow(max_blocks=None, warps=4),
    ),
    "sm100_mma": (
        PrepRow(max_blocks=None, warps=2),
    ),
    "interpreter": (
        PrepRow(max_blocks=None, warps=4),
    ),
}
PASS_TABLE = {
    "sm90": (
        PiecesRow(max_pieces=2, launch=Launch(block_v=16, warps=4, stages=2, prefetch=True)),
        PiecesRow(max_pieces=None, launch=Launch(block_v=64, warps=4, stages=1)),
    ),
    "sm100": (
        PiecesRow(max_pieces=None, launch=Launch(block_v=64, warps=4, stages=1)),
    ),
    "sm100_mma": (
        PiecesRow(max_pieces=None, launch=Launch(block_v=16, warps=2, stages=1)),
    ),
    "interpreter": (
        PiecesRow(max_pieces=None, launch=Launch(block_v=128, warps=4, stages=1)),
    ),
}
# The span summary and the fix-up run only with spans (2 to SPAN_PIECES pieces).
SUMMARY_TABLE = {
    "sm90": (
        PiecesRow(max_pieces=None, launch=Launch(block_v=64, warps=4, stages=2)),
    ),
    "sm100": (
        PiecesRow(max_pieces=None, launch=Launch(block_v=64, warps=4, stages=1)),
    ),
    "sm100_mma": (
        PiecesRow(max_pieces=None, launch=Launch(block_v=16, warps=2, stages=1)),
    ),
    "interpreter": (
        PiecesRow(max_pieces=None, launch=Launch(block_v=128, warps=4, stages=1)),
    ),
}
# On Hopper: the state pass in Gluon (prefill_pass_hopper: TMA loads a block ahead, wgmma with the
# state as the register operand) instead of PASS_TABLE's launch, for calls of at least
# HOPPER_PASS_MIN_PIECES (sequence, span) pieces and HOPPER_PASS_MIN_BLOCKS blocks, pooled or not
# (rows as PASS_TABLE's; no row: the span pass); with spans its summary too (HOPPER_SUMMARY).
# 64 columns and 4 warps (one warpgroup: wgmma's 64 rows) with two stages of 56 KB keep two
# programs per multiprocessor. On an H200 (docs/perf.md items 26-27), graph us: 16 x 512 86.9 ->
# 66.9, 57 / 8192 116.4 -> 90.3, 40 x 70 59.1 -> 47.5 (item 26); with spans, the pass and the
# summary: 1 x 8192 136.0 -> 103.0, 1 x 16384 234.7 -> 166.9, 1 x 4096 86.5 -> 70.2, [1, 8191]
# 145.8 -> 111.3 (item 27); 128 columns (8 warps, one program per multiprocessor) and three
# stages were slower, as was the summary capped at 168 registers (three programs per
# multiprocessor, 272 bytes spilled). Each launch encodes its TMA descriptors on the host
# (~5-10 us): where only a short prep runs before the pass it shows in the span, so short calls
# of one or two sequences without spans keep the span pass (4 x 75: span 21.4 -> 33.5, 4 x 256:
# 29.2 -> 30.4, though less GPU work; 1 x 1024 slower by span).
HOPPER_PASS_MIN_PIECES = 3
HOPPER_PASS_MIN_BLOCKS = 33
HOPPER_PASS_TABLE = {  # Hopper only: Gluon's wgmma (no entry: the span pass)
    "sm90": (
        PiecesRow(max_pieces=None, launch=Launch(block_v=64, warps=4, stages=2)),
    ),
}
# With spans, where the Hopper pass runs, the span summary runs in Gluon too, with its launch
# (prefill_pass_hopper.hopper_summary_kernel), instead of SUMMARY_TABLE's: 42.6 -> 30.0 us at
# 1 x 8192 on an H200 (docs/perf.md item 27).
HOPPER_SUMMARY = True
FIXUP_TABLE = {
    "sm90": (
        PiecesRow(max_pieces=None, launch=Launch(block_v=16, warps=4, stages=3)),
    ),
    "sm100": (
        PiecesRow(max_pieces=None, launch=Launch(block_v=16, warps=4, stages=1)),
    ),
    "sm100_mma": (
        PiecesRow(max_pieces=None, launch=Launch(block_v=16, warps=2, stages=1)),
    ),
    "interpreter": (
        PiecesRow(max_pieces=None, launch=Launch(block_v=128, warps=4, stages=1)),
    ),
}
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
# tokens, narrow state tiles for one sequence (more programs, a shorter chain per token). The
# walk has no tensor-core product: sm_100 runs sm_90's rows until a B200 sweep writes its own.
WALK_TABLE = {
    "sm90": (
        WalkRow(max_mean_length=1, max_pairs=32, launch=WalkLaunch(block_v=2, warps=1, tile=1)),
        WalkRow(max_mean_length=1, max_pairs=None, launch=WalkLaunch(block_v=16, warps=1, tile=1)),
        WalkRow(max_mean_length=None, max_pairs=8, launch=WalkLaunch(block_v=2, warps=1, tile=8)),
        WalkRow(max_mean_length=None, max_pairs=None, launch=WalkLaunch(block_v=4, warps=1, tile=4)),
    ),
    "sm100": (
        WalkRow(max_mean_length=1, max_pairs=32, launch=WalkLaunch(block_v=2, warps=1, tile=1)),
        WalkRow(max_mean_length=1, max_pairs=None, launch=WalkLaunch(block_v=16, warps=1, tile=1)),
        WalkRow(max_mean_length=None, max_pairs=8, launch=WalkLaunch(block_v=2, warps=1, tile=8)),
        WalkRow(max_mean_length=None, max_pairs=None, launch=WalkLaunch(block_v=4, warps=1, tile=4)),
    ),
    "interpreter": (
        WalkRow(max_mean_length=None, max_pairs=None, launch=WalkLaunch(block_v=128, warps=1, tile=4)),
    ),
}
# The sm100 ladder's lower rungs (prefill_guard) walk with sm100's rows; "sm100_walk" has no
# other table, so every call walks there.
_WALKS_AS = {"sm100_mma": "sm100", "sm100_walk": "sm100"}


def _table(name, arch):
    """The rows of launch table `name` (PASS_TABLE, ...) for architecture `arch` (shared.arch_key),
    as the module holds them now (a tuner may have replaced them); none where the table has no
    entry for `arch` (HOPPER_PASS_TABLE off Hopper); WALK_TABLE's of _WALKS_AS for the sm100
    ladder's rungs. The one place a table is read for a plan (_settings reads them too, for the
    cache of plans)."""
    if name == "WALK_TABLE":
        arch = _WALKS_AS.get(arch, arch)
    return globals()[name].get(arch, ())


# --- Host side: checks, scale, the plan, scratch, launches -------------------------------------
# The evaluator times a call from its first GPU activity to its last, so host work before
# the first launch is free while host gaps between launches count. Everything is checked and
# prepared before the first launch, the launches' own arguments included (Launcher.prepare_by_name);
# then they go out back to back through the compiled kernels' launchers, which take a few
# microseconds instead of Triton's full path (docs/perf.md, "Notes moved from the code").

_ARG_NAMES = ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens", "output", "new_state")
_V, _STATE, _A_LOG = (_ARG_NAMES.index(name) for name in ("v", "state", "A_log"))
_READ = len(_ARG_NAMES)
_POOLED_CHECKS = ("q", "k", "v", "A_log", "a", "dt_bias", "b", "cu_seqlens", "output")  # pooled_prefill's, as kernel()'s
# A call's values, in the order its launches take them from (Step.take): _ARG_NAMES, these,
# the CallPlan's constants, then its scratch tensors.
_EXTRAS = ("read_indices", "write_indices", "scale_ptr", "pool_size", "scale")
_CONSTANTS = ("T", "N", "J", "S", "none")
# The chunked path's scratch (_scratch_layout), in this order: M right after Tb and q16 right after
# k16, as the Hopper pass's descriptors take them (one over each pair).
_SCRATCH = ("tb", "m", "k16", "q16", "gates", "flag", "order", "span_n", "span_p", "enter")
# The Hopper pass's TMA descriptors of its tiles (prefill_pass_hopper.tile_descriptors): k16 and q16,
# Tb and M, v.
_DESCRIPTORS = ("kq_desc", "tbm_desc", "v_desc")
_NO_DESCRIPTORS = (None,) * len(_DESCRIPTORS)  # a call without the Hopper pass
_VALUES = _ARG_NAMES + _EXTRAS + _CONSTANTS + _SCRATCH + _DESCRIPTORS
_SEQ_BLOCK = 64  # sequence ends compared per step when locating a token's sequence
_KEPT_PLANS = 256  # CallPlans kept (_call_plan); more forget them all
_KEPT_DESCRIPTORS = 64  # calls' TMA descriptors kept (_descriptors); more forget them all


def _blocks(total):
    """The chunked path's blocks for T tokens: T / C rounded up, and at least one (the prep's
    one program then writes the cu_seqlens flag); the scratch and the Hopper pass's descriptors
    are sized by it."""
    return max(triton.cdiv(total, CHUNK), 1)


def _prep_seq_block(num_seqs):
    """The cu_seqlens entries the prep compares per step with each block's rows (its BN): the
    call's sequences rounded up to a power of two, from 16 to _SEQ_BLOCK (three compiled
    variants at most). Each block compares its rows with BN entries ([C, BN]), so a call of few
    sequences compares few: on an H200 the prep 38.1 -> 32.1 us at 16 x 512, 37.4 -> 32.8 at the
    kit's N = 22 (docs/perf.md item 27)."""
    return min(_SEQ_BLOCK, max(16, triton.next_power_of_2(num_seqs)))


class Plan(NamedTuple):
    """How a call of T tokens in N sequences runs (_plan). walk: the token walk's launch, or
    None for the chunked path; then the prep's PrepRow, spans of at least span_blocks blocks, at
    most `spans` per sequence (1: no spans), and the launches of the span pass, the summary and
    the fix-up (None where the call walks); whether the walks take the sequences longest first;
    the Hopper pass's launch where it replaces the span pass (HOPPER_PASS_TABLE), else None, and
    whether the summary runs in Gluon with it (HOPPER_SUMMARY)."""
    walk: WalkLaunch | None
    prep: PrepRow | None
    span_blocks: int
    spans: int
    pass_launch: Launch | None
    summary: Launch | None
    fixup: Launch | None
    ordered: bool
    hopper_pass: Launch | None = None
    hopper_summary: bool = False


def _plan(total, num_seqs, arch, tma_ready=True):
    """The Plan for T tokens in N sequences on architecture `arch` (shared.arch_key): the path
    and every launch, from the shapes (the tables and settings at the top of this file) and
    `tma_ready`, whether v's address is a multiple of 16 bytes as TMA needs (no Hopper pass
    otherwise: a view of v at an odd offset is a legal argument), the same for kernel() and
    pooled_prefill(). The one place a path or a launch is chosen."""
    if _walks(total, num_seqs) or not _table("PREP_TABLE", arch):
        return Plan(_walk_launch(total, num_seqs, _table("WALK_TABLE", arch)), None, 1, 1, None, None, None, False)
    span_blocks, spans = _span_plan(total, num_seqs)
    pieces = num_seqs * spans
    blocks = _blocks(total)
    prep = next(row for row in _table("PREP_TABLE", arch) if _within(blocks, row.max_blocks))
    pass_launch, summary, fixup = (_launch_for(_table(name, arch), pieces)
                                   for name in ("PASS_TABLE", "SUMMARY_TABLE", "FIXUP_TABLE"))
    pass_programs = pieces * NUM_V_HEADS * (HEAD_SIZE // pass_launch.block_v)
    ordered = num_seqs > 1 and blocks >= ORDER_MIN_BLOCKS and pass_programs >= ORDER_MIN_PROGRAMS
    hopper_rows = _table("HOPPER_PASS_TABLE", arch)
    hopper = (_launch_for(hopper_rows, pieces) if tma_ready and hopper_rows and pieces >= HOPPER_PASS_MIN_PIECES
              and blocks >= HOPPER_PASS_MIN_BLOCKS else None)
    return Plan(None, prep, span_blocks, spans, pass_launch, summary, fixup, ordered, hopper,
                hopper is not None and spans > 1 and HOPPER_SUMMARY)


def _walks(total, num_seqs):
    """Whether a call of T tokens in N sequences walks its tokens (see WALK_MAX_TOKENS)."""
    return total <= WALK_MAX_TOKENS or total <= WALK_MAX_MEAN_LENGTH * num_seqs


def _walk_launch(total, num_seqs, table):
    """The token walk's WalkLaunch for T tokens in N sequences (a WALK_TABLE)."""
    mean, pairs = triton.cdiv(total, num_seqs), num_seqs * NUM_V_HEADS
    return next(launch for longest, most, launch in table if _within(mean, longest) and _within(pairs, most))


def _span_plan(total, num_seqs):
    """(S, J) for T tokens in N sequences: prefill_spans.span_plan with this file's settings."""
    return span_plan(total, num_seqs, CHUNK, SpanSettings(SPAN_MIN_TOKENS, SPAN_MIN_BLOCKS, SPAN_MAX, SPAN_PIECES))


def _launch_for(table, pieces):
    """The Launch of `table` (rows of PiecesRow) for a call of `pieces` (sequence, span) pieces."""
    return next(launch for most, launch in table if _within(pieces, most))


def _within(value, bound):
    """value <= bound, a bound of None meaning none."""
    return bound is None or value <= bound


def _settings(arch):
    """Everything _plan and _new_call_plan read from this module for architecture `arch`, as it
    holds it now (a tuner or a test may have replaced any of it): a kept CallPlan is used while
    these are what it was planned with (_call_plan). Read directly, each table as _table reads
    it but without the call: this runs on every call."""
    return (CHUNK, WALK_MAX_TOKENS, WALK_MAX_MEAN_LENGTH, SPAN_MIN_TOKENS, SPAN_MIN_BLOCKS, SPAN_MAX, SPAN_PIECES,
            ORDER_MIN_BLOCKS, ORDER_MIN_PROGRAMS, HOPPER_PASS_MIN_PIECES, HOPPER_PASS_MIN_BLOCKS, HOPPER_SUMMARY,
            WALK_TABLE.get(_WALKS_AS.get(arch, arch), ()), PREP_TABLE.get(arch, ()), PASS_TABLE.get(arch, ()),
            SUMMARY_TABLE.get(arch, ()), FIXUP_TABLE.get(arch, ()), HOPPER_PASS_TABLE.get(arch, ()))


def _sizes(q, cu_seqlens):
    """(T, N, device) from q [T, 4, 128] and cu_seqlens [N + 1]; ValueError naming the first of
    them that is not a tensor of that rank. Plain tensors of those ranks are read at once (0.3 µs
    less a call than the checks below on the CI's CPU)."""
    if q.__class__ is torch.Tensor and cu_seqlens.__class__ is torch.Tensor and q.dim() == 3 and cu_seqlens.dim() == 1:
        ends = cu_seqlens.shape[0]
        if ends:
            return q.shape[0], ends - 1, q.device
    total = expect_rank("q", q, ("T", NUM_Q_HEADS, HEAD_SIZE))[0]
    if not isinstance(cu_seqlens, torch.Tensor) or cu_seqlens.dim() != 1 or cu_seqlens.numel() == 0:
        got = f"shape {list(cu_seqlens.shape)}" if isinstance(cu_seqlens, torch.Tensor) else type(cu_seqlens).__name__
        raise ValueError(f"cu_seqlens: expected a 1-D tensor [N + 1], got {got}")
    return total, cu_seqlens.shape[0] - 1, q.device


def _resolve_scale(scale, device):
    """(value, tensor): scale_value's float and None, or, for a one-element float tensor on
    the kernels' device, (0.0, that tensor), read in-kernel so that the call never waits on
    the device. A tensor elsewhere (the CPU) is read here."""
    if (isinstance(scale, torch.Tensor) and scale.device == device and device.type != "cpu"
            and scale.numel() == 1 and scale.is_floating_point()):
        return 0.0, scale
    return scale_value(scale), None


_launch_prep = Launcher(chunk_prep_kernel)
_launch_summary = Launcher(span_summary_kernel)
_launch_fixup = Launcher(span_fixup_kernel)
_launch_hopper_pass = Launcher(hopper_pass_kernel)
_launch_hopper_summary = Launcher(hopper_summary_kernel)
_launch_pass = Launcher(span_pass_kernel)
_launch_walk = Launcher(token_walk_kernel)


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


class Slot(NamedTuple):
    """A scratch tensor's place in the call's scratch buffer (bytes): its name, dtype, byte
    offset (a multiple of 16) and elements."""
    name: str
    dtype: torch.dtype
    offset: int
    size: int


def _scratch_layout(blocks, num_seqs, spans):
    """(Slots, bytes in all) of the chunked path's scratch: the prep's float16 tiles Tb and M
    [blocks, HV, C, C] and copies of k and q [blocks, HQ, C, D]; its float32 gates [blocks, HV,
    GATE_ROWS, C] and cu_seqlens flag, and the order of the sequences (int32 [N],
    prefill_order); with spans, each (sequence, span)'s map N (float32) and
    P (float16) [N J, HV, D, D] and its entering state [N J, HV, D, D] (float32)."""
    hv, c, d = NUM_V_HEADS, CHUNK, HEAD_SIZE
    maps = num_seqs * spans * hv * d * d if spans > 1 else 0
    f16, f32 = torch.float16, torch.float32
    sizes = ((f16, blocks * hv * c * c), (f16, blocks * hv * c * c), (f16, blocks * NUM_Q_HEADS * c * d),
             (f16, blocks * NUM_Q_HEADS * c * d), (f32, blocks * hv * GATE_ROWS.value * c), (f32, 1),
             (torch.int32, num_seqs), (f32, maps), (f16, maps), (f32, maps))
    slots, offset = [], 0
    for name, (dtype, size) in zip(_SCRATCH, sizes):
        slots.append(Slot(name, dtype, offset, size))
        offset += -(-size * dtype.itemsize // 16) * 16
    return tuple(slots), offset


def _scratch_views(buffer, slots):
    """The scratch tensors by name: views of `buffer` (bytes) at `slots` (_scratch_layout)."""
    return {slot.name: buffer[slot.offset:slot.offset + slot.size * slot.dtype.itemsize].view(slot.dtype)
            for slot in slots}


class Step(NamedTuple):
    """One launch of a call, all but its arguments' values: the Launcher, the grid, where each
    runtime argument comes from (names of the call's values, _launch_call), in parameter order,
    `take`, which picks them from the call's values in the CallPlan's order, the constexprs as
    (name, value) pairs in parameter order, the warps, the compile options as (name, value)
    pairs (Launcher.prepare) and the Launcher's number for those three (Launcher.config)."""
    launcher: Launcher
    grid: tuple
    sources: tuple
    take: operator.itemgetter
    constexprs: tuple
    warps: int
    options: tuple
    config: int


class CallPlan(NamedTuple):
    """Everything a call needs besides its tensors (_call_plan): the Plan, the Steps in launch
    order, the scratch (Slots and bytes in all; none for the token walk), the values that
    follow from the shapes (_CONSTANTS: T, N, J, S; None for an argument passed as None), the
    Steps' (Launcher, grid, config), as shared.direct_layouts takes them, and what it gave for
    them, by (device index, specialization) (_direct_launches)."""
    plan: Plan
    steps: tuple
    slots: tuple
    scratch_bytes: int
    constants: tuple
    launches: tuple
    direct: dict


def _call_plan_of(plan, steps, slots, scratch_bytes, constants):
    """The CallPlan of these parts, its launches read from the Steps."""
    steps = tuple(steps)
    return CallPlan(plan, steps, slots, scratch_bytes, constants,
                    tuple((step.launcher, step.grid, step.config) for step in steps), {})


def _step(launcher, grid, sources, constexprs, warps, options=()):
    """A Step of `launcher` from its runtime arguments' sources (names in _VALUES) and its
    constexprs by parameter name (TypeError where they do not match the kernel's parameters).
    Every kernel has several runtime arguments, so `take` gives a tuple."""
    ordered, pairs = launcher.order(sources, constexprs)
    return Step(launcher, grid, ordered, operator.itemgetter(*map(_VALUES.index, ordered)), pairs, warps, options,
                launcher.config(pairs, warps, options))


_CALL_PLANS = {}  # _call_plan's key -> (_settings then, CallPlan)


def _call_plan(total, num_seqs, arch, has_state, pooled, scale_from_ptr, tma_ready=True):
    """The CallPlan of a call of T tokens in N > 0 sequences on `arch`, with or without a
    state, pooled or not, its scale a float or read from a tensor, v's address fit for TMA or
    not (_plan): planned once, and kept while the module's settings (_settings) are those it
    was planned with (a comparison, not a hash: the tables' rows stay the same objects)."""
    key = (total, num_seqs, arch, has_state, pooled, scale_from_ptr, tma_ready)
    settings = _settings(arch)
    kept = _CALL_PLANS.get(key)
    if kept is not None and kept[0] == settings:
        return kept[1]
    if len(_CALL_PLANS) >= _KEPT_PLANS:
        _CALL_PLANS.clear()
    call = _new_call_plan(*key)
    _CALL_PLANS[key] = settings, call
    return call


def _new_call_plan(total, num_seqs, arch, has_state, pooled, scale_from_ptr, tma_ready=True):
    """_call_plan's CallPlan, planned."""
    plan = _plan(total, num_seqs, arch, tma_ready)
    constants = (total, num_seqs, plan.spans, plan.span_blocks, None)
    inputs = dict(q_ptr="q", k_ptr="k", A_log_ptr="A_log", a_ptr="a", dt_bias_ptr="dt_bias", b_ptr="b",
                  cu_ptr="cu_seqlens")
    pool = dict(read_index_ptr="read_indices", write_index_ptr="write_indices", pool_size="pool_size")
    scale = dict(scale="scale", scale_ptr="scale_ptr", T="T", N="N")
    heads = dict(HV=NUM_V_HEADS, D=HEAD_SIZE)
    if plan.walk is not None:
        walk = plan.walk
        return _call_plan_of(plan, (_step(
            _launch_walk, (HEAD_SIZE // walk.block_v, num_seqs * NUM_V_HEADS, 1),
            dict(inputs, v_ptr="v", state_ptr="state", out_ptr="output", new_state_ptr="new_state", **pool, **scale),
            dict(HAS_STATE=has_state, SCALE_FROM_PTR=scale_from_ptr, POOLED=pooled, HQ=NUM_Q_HEADS, **heads,
                 BV=walk.block_v, BN=_SEQ_BLOCK, CT=walk.tile),
            walk.warps),), (), 0, constants)
    blocks = _blocks(total)
    slots, scratch_bytes = _scratch_layout(blocks, num_seqs, plan.spans)
    operands = dict(k16_ptr="k16", v_ptr="v", tb_ptr="tb", gate_ptr="gates", flag_ptr="flag", order_ptr="order")
    carried = dict(operands, state_ptr="state", cu_ptr="cu_seqlens", **pool, T="T", J="J", S="S")
    # The prep's element offsets in int32 when every one fits (the usual case), else in int64.
    largest = max(blocks * NUM_V_HEADS * CHUNK * HEAD_SIZE, total * NUM_V_HEADS * HEAD_SIZE)
    idx = tl.int32 if largest < 2**31 else tl.int64
    carry = dict(SINGLE=num_seqs == 1, ORDERED=plan.ordered, HAS_STATE=has_state, POOLED=pooled, HQ=NUM_Q_HEADS,
                 **heads, C=CHUNK)
    steps = [_step(
        _launch_prep, (blocks, NUM_V_HEADS, 1),
        dict(inputs, tb_ptr="tb", m_ptr="m", gate_ptr="gates", k16_ptr="k16", q16_ptr="q16", flag_ptr="flag",
             order_ptr="order", out_ptr="output", **scale),
        dict(SINGLE=num_seqs == 1, ORDERED=plan.ordered, SCALE_FROM_PTR=scale_from_ptr, WIDEN_BF16=INTERPRETED, IDX=idx,
             HQ=NUM_Q_HEADS,
             **heads, C=CHUNK, LOG_C=CHUNK.bit_length() - 1, BN=_prep_seq_block(num_seqs)),
        plan.prep.warps, () if plan.prep.maxnreg is None else (("maxnreg", plan.prep.maxnreg),))]
    # The Gluon kernels' operands: TMA descriptors of the prep's tiles and of v (_descriptors).
    tiles = dict(kq_desc="kq_desc", tbm_desc="tbm_desc", v_desc="v_desc", gate_ptr="gates", cu_ptr="cu_seqlens",
                 order_ptr="order", flag_ptr="flag", state_ptr="state", **pool, T="T", J="J", S="S")
    if plan.spans > 1:
        maps = dict(span_n_ptr="span_n", span_p_ptr="span_p", enter_ptr="enter" if pooled else "none")
        if plan.hopper_summary:
            summary, launcher, sources = plan.hopper_pass, _launch_hopper_summary, dict(tiles, **maps)
        else:
            summary, launcher, sources = plan.summary, _launch_summary, dict(carried, **maps)
        steps.append(_step(
            launcher, (num_seqs * (plan.spans - 1) * NUM_V_HEADS * 2 * (HEAD_SIZE // summary.block_v), 1, 1),
            sources, dict(carry, BV=summary.block_v, STAGES=summary.stages), summary.warps))
        fixup = plan.fixup
        steps.append(_step(
            _launch_fixup, (HEAD_SIZE // fixup.block_v, NUM_V_HEADS, num_seqs),
            dict(cu_ptr="cu_seqlens", span_n_ptr="span_n", span_p_ptr="span_p", enter_ptr="enter", T="T", J="J",
                 S="S"),
            dict(SINGLE=num_seqs == 1, **heads, C=CHUNK, BV=fixup.block_v, STAGES=fixup.stages), fixup.warps))
    hopper = plan.hopper_pass
    if hopper is not None:
        steps.append(_step(
            _launch_hopper_pass, (num_seqs * plan.spans * NUM_V_HEADS * (HEAD_SIZE // hopper.block_v), 1, 1),
            dict(tiles, enter_ptr="enter", out_ptr="output", new_state_ptr="new_state"),
            dict(carry, BV=hopper.block_v, STAGES=hopper.stages), hopper.warps))
    else:
        span_pass = plan.pass_launch
        steps.append(_step(
            _launch_pass, (num_seqs * plan.spans * NUM_V_HEADS * (HEAD_SIZE // span_pass.block_v), 1, 1),
            dict(carried, q16_ptr="q16", m_ptr="m", enter_ptr="enter", out_ptr="output", new_state_ptr="new_state"),
            dict(carry, BV=span_pass.block_v, STAGES=span_pass.stages, PREFETCH=span_pass.prefetch and not INTERPRETED),
            span_pass.warps))
    return _call_plan_of(plan, steps, slots, scratch_bytes, constants)


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
    total, num_seqs, device = _sizes(q, cu_seqlens)
    pointers = checked_pointers(_ARG_NAMES, tensors, expected_specs(_ARG_NAMES, (total,), num_seqs), device)
    scale_float, scale_tensor = _resolve_scale(scale, device)
    if num_seqs == 0:
        return
    arch, has_state = rung(arch_key(device), device.index), state is not None
    tma_ready = not pointers[_V] & 15
    call = _call_plan(total, num_seqs, arch, has_state, False, scale_tensor is not None, tma_ready)
    if state is None:  # the kernels read nothing through this pointer without a state
        state, pointers[_STATE] = new_state, pointers[-1]
    elif call.plan.spans > 1 and state.untyped_storage().data_ptr() == new_state.untyped_storage().data_ptr():
        state = state.clone()  # in place: the last span writes what span 0 reads, in one launch
        pointers[_STATE] = state.data_ptr()
    pointers += (None, None)  # no indices
    if state is not tensors[_STATE]:
        tensors = (*tensors[:_STATE], state, *tensors[_STATE + 1:])
    extras = (None, None, None, scale_float)
    key = unchecked(arch, call, device)
    if key is not None:  # prefill_guard: the configuration's first call
        replan = functools.partial(_call_plan, total, num_seqs, has_state=has_state, pooled=False,
                                   scale_from_ptr=scale_tensor is not None, tma_ready=tma_ready)
        call = _checked(call, key, arch, replan, functools.partial(_aside, tensors, pointers, extras, scale_tensor,
                                                                   device), device)
    _launch_call(call, tensors, pointers, extras, scale_tensor, device)


def _aside(tensors, pointers, extras, scale_tensor, device, plan):
    """kernel()'s call (its checked `tensors`, `pointers`, `extras`) by `plan` into NaN-filled
    outputs of its own: (output, new_state)."""
    output, new_state = (torch.full_like(tensor, float("nan")) for tensor in tensors[-2:])
    _launch_call(plan, (*tensors[:-2], output, new_state),
                 [*pointers[:_READ - 2], output.data_ptr(), new_state.data_ptr(), *pointers[_READ:]], extras,
                 scale_tensor, device)
    return output, new_state


def _checked(call, key, arch, replan, aside, device):
    """The CallPlan a call runs: `call` (planned for `arch`; prefill_guard.unchecked gave its
    GuardKey `key`: it is to be checked), once its configuration passed prefill_guard's check,
    else the plan of the rung the check moved the device to, checked there in turn.
    replan(arch) plans the call for another architecture; aside(plan) runs the call by `plan`
    where it changes nothing of the caller's and returns what it wrote (outputs and final
    states). A check runs it twice by the plan and once by the token walk ("sm100_walk") and
    waits for them, so none is made while a CUDA graph is captured (the next call checks)."""
    while key is not None and not (device.type == "cuda" and torch.cuda.is_current_stream_capturing()):
        passed = verdict(aside(call), aside(call), aside(replan("sm100_walk")))
        if passed is None:
            break
        lower = record(call, key, arch, passed)
        if lower == arch:
            break
        arch, call = lower, replan(lower)
        key = unchecked(arch, call, device)
    return call


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
    tensors = (q, k, v, A_log, a, dt_bias, b, cu_seqlens, output)
    expected = expected_specs(_POOLED_CHECKS, (total,), num_seqs)
    checked = pooled_pointers(_POOLED_CHECKS, tensors, expected, state_pool, read_indices, write_indices, num_seqs,
                              device)
    if checked is None:  # the first bad argument, in the order of the signature
        pooled_checks(_POOLED_CHECKS, tensors, expected, state_pool, read_indices, write_indices, num_seqs, device)
        raise AssertionError("pooled_pointers and pooled_checks disagree")
    pointers, pool_size, write_indices = checked
    scale_float, scale_tensor = _resolve_scale(scale, device)
    if num_seqs == 0:
        return
    arch = rung(arch_key(device), device.index)
    tma_ready = not pointers[_V] & 15
    call = _call_plan(total, num_seqs, arch, True, True, scale_tensor is not None, tma_ready)
    q, k, v, A_log, a, dt_bias, b, cu_seqlens, output = tensors
    key = unchecked(arch, call, device)
    if key is not None:  # prefill_guard: the configuration's first call
        replan = functools.partial(_call_plan, total, num_seqs, has_state=True, pooled=True,
                                   scale_from_ptr=scale_tensor is not None, tma_ready=tma_ready)
        call = _checked(call, key, arch, replan, functools.partial(
            _pooled_aside, tensors, state_pool, read_indices, write_indices, pool_size, expected, scale_float,
            scale_tensor, device), device)
    _launch_call(call, (q, k, v, state_pool, A_log, a, dt_bias, b, cu_seqlens, output, state_pool), pointers,
                 (read_indices, write_indices, pool_size, scale_float), scale_tensor, device)


def _pooled_aside(tensors, pool, read_indices, write_indices, pool_size, expected, scale_float, scale_tensor,
                  device, plan):
    """pooled_prefill's call (its checked `tensors`: _POOLED_CHECKS') by `plan` over a pool of its
    own, slot n holding sequence n's read slot (padding and out-of-range indices kept so), into a
    NaN-filled output: (output, that pool). The caller's pool and output are not touched."""
    num_seqs = read_indices.shape[0]
    slots = torch.arange(num_seqs, device=device, dtype=read_indices.dtype)
    reads = torch.where(read_indices < 0, -1, torch.where(read_indices < pool_size, slots, num_seqs))
    writes = torch.where(write_indices < 0, -1, torch.where(write_indices < pool_size, slots, num_seqs))
    mine = (pool[read_indices.clamp(0, pool_size - 1)] if pool_size
            else pool.new_zeros((num_seqs, *POOL_ROW)))  # no slot: every index out of range
    output = torch.full_like(tensors[-1], float("nan"))
    pointers, _, _ = pooled_pointers(_POOLED_CHECKS, (*tensors[:-1], output), expected, mine, reads, writes, num_seqs,
                                     device)
    q, k, v, A_log, a, dt_bias, b, cu_seqlens, _ = tensors
    _launch_call(plan, (q, k, v, mine, A_log, a, dt_bias, b, cu_seqlens, output, mine), pointers,
                 (reads, writes, num_seqs, scale_float), scale_tensor, device)
    return output, mine


def _launch_call(call, tensors, pointers, extras, scale_tensor, device):
    """The launches of a checked call (CallPlan `call`), prepared all before the first goes
    out. `tensors`: _ARG_NAMES' (state the one the kernels read); `pointers`: their data
    pointers, then the indices' (None for kernel()); `extras`: read_indices, write_indices,
    pool_size (None for kernel()) and the scale's float. The launches take raw pointers: every
    one by the direct path (_direct_launches) where each has one, the usual case once a call's
    configurations have run, its scratch a block of CUDA's caching allocator with no tensor
    made (_scratch_block); else each prepared (Launcher.prepare), the scratch one allocation of
    bytes and its tensors made only for a launch through Triton. What may change the compiled
    kernel besides the constexprs is the dtypes of the indices and of the scale's tensor (every
    other dtype is checked)."""
    read_indices, write_indices, pool_size, scale_float = extras
    scale_ptr = tensors[_A_LOG] if scale_tensor is None else scale_tensor
    scale_address = scale_ptr.data_ptr()
    aligned = all_aligned(pointers, scale_address)
    head = (*pointers, scale_address, pool_size, scale_float, *call.constants)
    specialization = (getattr(read_indices, "dtype", None), scale_ptr.dtype)
    if aligned and not hooks_installed():  # every launch by the direct path, where each has one
        direct = _direct_launches(call, device.index, specialization)
        if direct is not None:
            stream_of, launches = direct
            if not call.slots:
                _launch_directly(launches, stream_of(device.index), head)
                return
            with _scratch_block(call.scratch_bytes, device) as base:
                _launch_directly(launches, stream_of(device.index), _call_values(call, head, base, tensors[2]))
            return
    buffer, base = None, 0
    if call.slots:
        buffer = torch.empty(call.scratch_bytes, dtype=torch.uint8, device=device)
        base = buffer.data_ptr()
    values = _call_values(call, head, base, tensors[2])
    objects = (*tensors, read_indices, write_indices, scale_ptr, pool_size, scale_float, *call.constants)
    launches = [step.launcher.prepare(step.grid, functools.partial(_tensor_arguments, objects, buffer, call,
                                                                   step.sources),
                                      step.constexprs, step.warps, device.index,
                                      (step.take(values), aligned and not base & 15), specialization, step.options)
                for step in call.steps]
    for launch in launches:
        launch()


def _direct_launches(call, device_index, specialization):
    """(stream getter, ((function, layout, take), ...)) that make CallPlan `call`'s launches by
    the direct path on device `device_index`, each function(*layout(stream, take(values))) for
    the call's values (_call_values), or None where one has none yet (shared.direct_layouts);
    kept in the CallPlan while shared.launch_generation stays."""
    key, generation = (device_index, specialization), launch_generation()
    kept = call.direct.get(key)
    if kept is not None and kept[0] == generation:
        return kept[1]
    layouts = direct_layouts(call.launches, device_index, specialization)
    if layouts is None:
        return None
    stream_of, runs = layouts
    direct = stream_of, tuple((run, layout, step.take) for (run, layout), step in zip(runs, call.steps))
    call.direct[key] = generation, direct
    return direct


def _launch_directly(launches, stream, values):
    """Make `launches` (_direct_launches') on `stream` with the call's `values`, each one's
    arguments laid out before the first goes out (one launch, the token walk's, at once)."""
    if len(launches) == 1:
        run, layout, take = launches[0]
        run(*layout(stream, take(values)))
        return
    arguments = [layout(stream, take(values)) for _, layout, take in launches]
    for (run, _, _), launch_arguments in zip(launches, arguments):
        run(*launch_arguments)


def _call_values(call, head, base, v):
    """A call's values in _VALUES' order, as its Steps take them: `head` (up to the scratch), then
    the addresses of CallPlan `call`'s scratch slots from `base` and its TMA descriptors over them
    and v (_descriptors). A call without scratch (the token walk) takes nothing past `head`."""
    if not call.slots:
        return head
    return (*head, *[base + slot.offset for slot in call.slots], *_descriptors(call, base, v))


class _scratch_block:
    """Context manager: the address of `nbytes` (> 0) of scratch on `device`, held until
    leaving. On the current CUDA device, a block of CUDA's caching allocator on its current
    stream, with no tensor made (torch.empty costs the host ~5 µs a call, this ~2: docs/perf.md
    item 34): it is taken and given back as a tensor's memory would be, so a later allocation
    on that stream reuses it only after the launches queued here, and under CUDA-graph capture
    it comes from the graph's pool. Elsewhere (another device, the CPU), a tensor's."""

    def __init__(self, nbytes, device):
        self.raw, self.buffer = 0, None
        if device.type == "cuda" and _RAW_ALLOC is not None and _current_cuda_device() == device.index:
            self.raw = _RAW_ALLOC(nbytes, _current_raw_stream(device.index))
        else:
            self.buffer = torch.empty(nbytes, dtype=torch.uint8, device=device)

    def __enter__(self):
        return self.raw or self.buffer.data_ptr()

    def __exit__(self, *exc):
        if self.raw:
            _RAW_DELETE(self.raw)
        self.buffer = None


_RAW_ALLOC = getattr(torch._C, "_cuda_cudaCachingAllocator_raw_alloc", None)
_RAW_DELETE = getattr(torch._C, "_cuda_cudaCachingAllocator_raw_delete", None)
_current_cuda_device = getattr(torch._C, "_cuda_getDevice", None)
_current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
if None in (_RAW_DELETE, _current_cuda_device, _current_raw_stream):
    _RAW_ALLOC = None


def _tensor_arguments(objects, buffer, call, sources):
    """A Step's arguments as tensors, for a launch through Triton: `objects` (_VALUES' up to
    the scratch), the scratch's views of `buffer` (CallPlan `call`'s slots) and the TMA
    descriptors over those views and v (_DESCRIPTORS'), in the order of `sources`."""
    values = dict(zip(_VALUES, objects))
    if buffer is not None:
        values.update(_scratch_views(buffer, call.slots))
    values.update(zip(_DESCRIPTORS, _tile_descriptors(call, values, values["v"])))
    return [values[source] for source in sources]


_DESCRIPTOR_CACHE = {}  # (scratch address, v's address, T, BV) -> _descriptors' values


def _descriptors(call, base, v):
    """_DESCRIPTORS' values for a direct launch of CallPlan `call` whose scratch starts at
    address `base`, with v: the TMA descriptors of its scratch tiles and of v where it runs the
    Hopper pass (over Addresses: prefill_pass_hopper.Address), else None each. They are made
    before the first launch (the prep writes the tiles they describe) and kept by the
    addresses and shapes they encode (making them costs the host ~25 us a call, docs/serving.md);
    each launch encodes them (Triton's launcher)."""
    if call.plan.hopper_pass is None:
        return _NO_DESCRIPTORS
    key = (base, v.data_ptr(), call.constants[0], call.plan.hopper_pass.block_v)
    kept = _DESCRIPTOR_CACHE.get(key)
    if kept is None:
        if len(_DESCRIPTOR_CACHE) >= _KEPT_DESCRIPTORS:
            _DESCRIPTOR_CACHE.clear()
        bases = {slot.name: Address(base + slot.offset, slot.dtype) for slot in call.slots}
        kept = _DESCRIPTOR_CACHE[key] = _tile_descriptors(call, bases, Address(v.data_ptr(), v.dtype))
    return kept


def _tile_descriptors(call, bases, v):
    """The TMA descriptors of CallPlan `call`'s tiles (prefill_pass_hopper.tile_descriptors) over
    its scratch `bases` (views or Addresses by slot name) and v, or None each without the Hopper
    pass."""
    hopper = call.plan.hopper_pass
    if hopper is None:
        return _NO_DESCRIPTORS
    total = call.constants[0]
    return tile_descriptors(bases, v, total, _blocks(total), hopper.block_v, NUM_Q_HEADS, NUM_V_HEADS, HEAD_SIZE,
                            CHUNK)

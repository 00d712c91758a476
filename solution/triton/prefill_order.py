"""The order in which the chunked path's walks take the sequences: longest first.

The span pass and the span summary run one program per (sequence, span, value head, columns
of V), each carrying the state through its blocks one after another, and a GPU starts the
programs in grid order as earlier ones finish. Taken in their given order, a long sequence
that comes after shorter ones starts late and ends the launch alone; taken longest first
(the longest-processing-time rule of list scheduling), the short sequences fill the slots
the long ones leave. So the prep writes the call's order once (for the calls prefill.py's
ORDER_* settings pick), order[r] = the sequence of rank r, the sequences ranked by the
blocks of C tokens they touch (most first; equal counts by index, so sequences of one
length keep their order), and the walks map their grid position to a sequence through it
(docs/perf.md item 23 has what it saved). Any cu_seqlens, malformed included, gives a
permutation: the bounds are clamped (clamped_bounds)."""

import triton
import triton.language as tl

from .prefill_common import clamped_bounds
from .prefill_spans import sequence_blocks, sequence_span

# Sequences ranked at a time: a [TILE, TILE] comparison. The prep writes the order after its
# block's work at the limit of 255 registers, where a [64, 64] one spilled on sm_100a.
TILE = tl.constexpr(16)


@triton.jit
def _blocks_at(cu_ptr, n, N, T, C: tl.constexpr):
    """The blocks of C tokens that sequences n [TILE] touch (sequence_blocks, their bounds
    clamped); -1 for n >= N, so that no entry past the last sequence ranks ahead of one."""
    inside = n < N
    bos, eos = clamped_bounds(tl.load(cu_ptr + n, mask=inside, other=0), tl.load(cu_ptr + n + 1, mask=inside, other=0),
                              T)
    return tl.where(inside, sequence_blocks(bos, eos, C), -1)


@triton.jit
def write_longest_first(cu_ptr, order_ptr, program, programs, N, T, C: tl.constexpr):
    """order[rank_n] = n for the sequences n of cu_seqlens [N + 1] in this program's share,
    TILE at a time (share `program` of `programs`: the sequences program * TILE .. + TILE - 1,
    then every programs * TILE on), rank_n the number of sequences that touch more blocks
    than n, or as many with a smaller index."""
    offs = tl.arange(0, TILE)
    for start in range(program * TILE, N, programs * TILE):
        n = start + offs
        mine = _blocks_at(cu_ptr, n, N, T, C)
        rank = tl.zeros([TILE], dtype=tl.int32)
        for other_start in range(0, N, TILE):
            m = other_start + offs
            rank += tl.sum(_ahead(_blocks_at(cu_ptr, m, N, T, C), m, mine, n), axis=1)
        tl.store(order_ptr + rank, n.to(tl.int32), mask=n < N)


@triton.jit
def _ahead(other, m, mine, n):
    """[TILE, TILE] 0/1: whether sequence m (columns) ranks ahead of sequence n (rows), by their
    blocks `other` and `mine`."""
    return ((other[None, :] > mine[:, None]) | ((other[None, :] == mine[:, None]) & (m[None, :] < n[:, None]))).to(
        tl.int32)


@triton.jit
def sequence_at(order_ptr, position, SINGLE: tl.constexpr, ORDERED: tl.constexpr):
    """The sequence a walk takes at `position` of the call's order: the one (SINGLE, a
    constant the compiler folds into every offset), order[position] where the prep wrote the
    order (ORDERED), else the sequence of that index."""
    if SINGLE:
        return position * 0
    elif ORDERED:
        return tl.load(order_ptr + position)
    else:
        return position


@triton.jit
def walk_piece(pid, per_sequence, order_ptr, cu_ptr, T, S, J, SINGLE: tl.constexpr, ORDERED: tl.constexpr,
               TILES: tl.constexpr, HV: tl.constexpr, C: tl.constexpr):
    """What program `pid` of a walk's grid takes (the span pass's and the summary's, Triton and
    Gluon alike): grid order (piece, value head, tile) with TILES tiles per head and per_sequence
    (sequence, span) pieces per sequence, the sequences in the call's order (sequence_at). Returns
    (tile, head, sequence, span, then sequence_span's bos, eos, first block, blocks, spans)."""
    tile = pid % TILES
    head = (pid // TILES) % HV
    piece = pid // (TILES * HV)
    seq = sequence_at(order_ptr, piece // per_sequence, SINGLE, ORDERED)
    span = piece % per_sequence
    bos, eos, first, count, spans = sequence_span(cu_ptr, seq, span, T, S, J, SINGLE, C)
    return tile, head, seq, span, bos, eos, first, count, spans

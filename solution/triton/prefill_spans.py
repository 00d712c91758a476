"""The span rule of the chunked prefill path, in one home: the host's plan (S, J) for a call
and the device's cut of one sequence into spans, with a host mirror of that cut for tests.

A sequence's blocks of C tokens at fixed positions, from the one holding its first token, are
cut into spans of S_n = max(S, ceil(blocks_n / J)) blocks, so at most J of them (a sequence
takes more spans as it grows, up to J, then longer ones). The plan: the call's blocks are cut
into about `most` spans in all, of at least `min_blocks` blocks each (S); J is what one
sequence of all T tokens would take, within `pieces // N`; no spans (J = 1, S covering any
sequence) when that leaves fewer than 2, when the sequences hold fewer than `min_tokens`
tokens on average, or when `most` < 2."""

from typing import NamedTuple

import triton
import triton.language as tl

from .prefill_common import sequence_bounds


class SpanSettings(NamedTuple):
    """The settings of the span plan (prefill.py's SPAN_* settings)."""
    min_tokens: int  # tokens per sequence, on average, from which spans are cut
    min_blocks: int  # blocks per span, at least
    most: int  # spans a call is cut into, about; below 2: none
    pieces: int  # (sequence, span) pieces per call, at most


def span_plan(total, num_seqs, chunk, settings):
    """(S, J): blocks per span at least and spans per sequence at most, for T tokens in N
    sequences of blocks of `chunk` tokens (J = 1: no spans; then S covers any sequence)."""
    blocks = triton.cdiv(total, chunk)
    if settings.most < 2:
        return max(blocks, 1), 1
    span = max(settings.min_blocks, triton.cdiv(blocks, settings.most))
    spans = min(settings.pieces // num_seqs, triton.cdiv(blocks, span))
    if spans < 2 or total < settings.min_tokens * num_seqs:
        return max(blocks, 1), 1
    return span, spans


def sequence_span_host(bos, eos, span, S, J, C):
    """sequence_span's answer on the host, from the sequence's bounds: (first block, blocks in
    the span, spans of the sequence)."""
    first = bos // C
    blocks = sequence_blocks_host(bos, eos, C)
    length = max(S, -(-blocks // J))
    spans = -(-blocks // length)
    count = max(min(blocks - span * length, length), 0)
    return first + span * length, count, spans


def sequence_blocks_host(bos, eos, C):
    """sequence_blocks on the host."""
    return (eos - 1) // C - bos // C + 1 if eos > bos else 0


@triton.jit
def sequence_blocks(bos, eos, C: tl.constexpr):
    """The blocks of C tokens at fixed positions that the tokens bos <= t < eos touch (0 when
    there are none)."""
    return tl.where(eos > bos, (eos - 1) // C - bos // C + 1, 0)


@triton.jit
def sequence_span(cu_ptr, seq, span, T, S, J, SINGLE: tl.constexpr, C: tl.constexpr):
    """(bos, eos, first block, blocks in the span, spans of the sequence) for span `span` of
    sequence `seq` (sequence_bounds), cut as the module says; an empty sequence has no span
    (its span 0 holds no block). sequence_span_host is the same on the host."""
    bos, eos = sequence_bounds(cu_ptr, seq, T, SINGLE)
    first = bos // C
    blocks = sequence_blocks(bos, eos, C)
    length = tl.maximum(S, (blocks + J - 1) // J)
    spans = (blocks + length - 1) // length
    count = tl.maximum(tl.minimum(blocks - span * length, length), 0)
    return bos, eos, first + span * length, count, spans

"""What scripts/tune_launch.py --definition prefill tunes in the prefill submission
(gdn_bench.table_tuning does it): prefill.py's tables of named rows, one TableSweep each in
SWEEPS. A sweep names the table and its bound fields, the settings to try and the call shapes
to time; a probe's point is computed as prefill.py computes what it compares with the bounds.
When prefill.py's tables change, this file changes with them, and only this file. Each table is
a dict by architecture (shared.arch_key): a sweep tunes and rewrites the rows of the GPU's.

- PREP_TABLE (bound max_blocks: the call's blocks of CHUNK tokens): the prep's warps, and
  4 warps capped at 168 registers (three programs per multiprocessor), on the chunked path's
  calls;
- PASS_TABLE (bound max_pieces: (sequence, span) pieces of the span pass's grid): the
  chunked path's calls, from many mid-length sequences (one span each, pieces = N) to long
  single sequences (cut into spans: pieces = spans);
- SUMMARY_TABLE and FIXUP_TABLE (the same bound): the span summary's and the fix-up's
  launches, on the calls of PASS_TABLE's that are cut into spans;
- HOPPER_PASS_TABLE (the same bound; Hopper only): the Gluon pass's columns, warps (at most
  one per 16 columns) and stages, on the calls of PASS_TABLE's that it takes (no spans, enough
  sequences and blocks);
- WALK_TABLE (bounds max_mean_length, the mean sequence length rounded up, and max_pairs,
  the (sequence, value head) pairs): the calls that walk their tokens, one-token sequences at
  every batch and short sequences.

Every probe's outputs are checked against the float64 reference (worst margin at most 1,
gdn_bench.checking.worst_margin) before it is timed.
"""

import itertools

import torch
import triton

from gdn_bench.checking import worst_margin
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.definitions.prefill.mix import model_like_inputs
from gdn_bench.definitions.prefill.reference import gdn_prefill
from gdn_bench.prefill_bench import even_lengths, runs
from gdn_bench.shapes import HEAD_SIZE, NUM_V_HEADS
from gdn_bench.signature import empty_outputs
from gdn_bench.table_tuning import Probe, TableSweep

# Chunked calls as (T, N), split evenly: mid-length sequences (no spans), long single ones, and
# a few long ones (spans in every sequence).
PASS_SHAPES = ((512, 1), (1024, 2), (2048, 4), (4096, 8), (8192, 16), (8192, 32), (8192, 57), (2048, 1), (4096, 1),
               (8192, 1), (16384, 1), (8192, 4))
# Calls that walk: one-token sequences, then short ones (T <= 64, or a mean of at most 4).
WALK_SHAPES = tuple((n, n) for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)) + (
    (8, 1), (16, 1), (32, 1), (64, 1), (16, 4), (64, 8), (64, 16), (256, 64))


def _probe(total: int, count: int, point: tuple[int, ...]) -> Probe:
    """One call of `count` sequences splitting `total` tokens evenly (model-like inputs), its
    outputs checked against the float64 reference."""
    lengths = even_lengths(total, count)

    def make(module):
        inputs = model_like_inputs(lengths, torch.Generator(device="cuda").manual_seed(total + count), "cuda")
        args = tuple(inputs.values())
        axes = {"total_seq_len": total, "num_seqs": count, "len_cu_seqlens": count + 1}
        outputs = empty_outputs(PREFILL.build_definition(), axes, "cuda")
        reference = gdn_prefill(*args, compute_dtype=torch.float64)

        def check():
            margin = max(worst_margin(got, want) for got, want in zip(outputs, reference))
            assert margin <= 1, f"worst margin {margin:.3f} against float64"
        return (lambda: module.kernel(*args, *outputs)), check

    return Probe(label=f"T={total} {runs(lengths)}", size=total, point=point, make=make)


def _pass_probes(module) -> list[Probe]:
    return [_probe(t, n, (n * module._span_plan(t, n)[1],)) for t, n in PASS_SHAPES]


def _span_probes(module) -> list[Probe]:
    """The calls of PASS_SHAPES cut into spans (the summary and the fix-up run only there)."""
    plans = [(t, n, module._span_plan(t, n)[1]) for t, n in PASS_SHAPES]
    return [_probe(t, n, (n * spans,)) for t, n, spans in plans if spans > 1]


def _hopper_probes(module) -> list[Probe]:
    """The calls of PASS_SHAPES that take the Hopper pass (its rule, prefill._plan, on sm90)."""
    return [_probe(t, n, (n,)) for t, n in PASS_SHAPES if module._plan(t, n, "sm90").hopper_pass is not None]


def _hopper_candidates(module) -> list[dict]:
    return [dict(launch=module.Launch(block_v=bv, warps=w, stages=s))
            for bv, w, s in itertools.product((64, 128), (4, 8), (2, 3)) if w * 16 <= bv]


def _walk_probes(module) -> list[Probe]:
    return [_probe(t, n, (triton.cdiv(t, n), n * NUM_V_HEADS)) for t, n in WALK_SHAPES]


def _fills_vectors(block_v: int, warps: int) -> bool:
    """Whether every thread holds at least one 16-byte vector of a [BV, D] float32 tile."""
    return block_v * HEAD_SIZE // (32 * warps) >= 4


def _launch_candidates(module) -> list[dict]:
    return [dict(launch=module.Launch(block_v=bv, warps=w, stages=s))
            for bv, w, s in itertools.product((16, 32, 64), (2, 4, 8), (1, 2, 3)) if _fills_vectors(bv, w)]


def _pass_candidates(module) -> list[dict]:
    """_launch_candidates, each with and without the L2 prefetch of the next block (the pass's)."""
    return [dict(launch=candidate["launch"]._replace(prefetch=prefetch))
            for candidate in _launch_candidates(module) for prefetch in (False, True)]


def _walk_candidates(module) -> list[dict]:
    return [dict(launch=module.WalkLaunch(block_v=bv, warps=w, tile=t))
            for bv, w, t in itertools.product((2, 4, 8, 16, 32), (1, 2, 4), (1, 2, 4, 8)) if _fills_vectors(bv, w)]


def _prep_probes(module) -> list[Probe]:
    return [_probe(t, n, (triton.cdiv(t, module.CHUNK),)) for t, n in PASS_SHAPES]


SWEEPS = {
    # Capped at 168 registers: three 4-warp programs per multiprocessor; at 128: four (on an
    # H200 0.6-2.4 us faster than 168 with 24-164 bytes spilled: docs/perf.md item 28).
    "PREP_TABLE": TableSweep(table="PREP_TABLE", bounds=("max_blocks",),
                             candidates=lambda module: [*(dict(warps=w, maxnreg=None) for w in (2, 4, 8)),
                                                        *(dict(warps=4, maxnreg=r) for r in (168, 128))],
                             probes=_prep_probes),
    "PASS_TABLE": TableSweep(table="PASS_TABLE", bounds=("max_pieces",), candidates=_pass_candidates,
                             probes=_pass_probes),
    "SUMMARY_TABLE": TableSweep(table="SUMMARY_TABLE", bounds=("max_pieces",), candidates=_launch_candidates,
                                probes=_span_probes),
    "FIXUP_TABLE": TableSweep(table="FIXUP_TABLE", bounds=("max_pieces",), candidates=_launch_candidates,
                              probes=_span_probes),
    "HOPPER_PASS_TABLE": TableSweep(table="HOPPER_PASS_TABLE", bounds=("max_pieces",),
                                    candidates=_hopper_candidates, probes=_hopper_probes),
    "WALK_TABLE": TableSweep(table="WALK_TABLE", bounds=("max_mean_length", "max_pairs"),
                             candidates=_walk_candidates, probes=_walk_probes),
}

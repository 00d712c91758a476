"""solution/triton/prefill.py against the float64 reference, on fresh random inputs.

Every call checks several sequences at once (one launch covers them all), so the suite stays
cheap in Triton's interpreter while each sequence is its own case: its length (0 to a few
hundred, across the 64-token blocks), its gate regime, its state (given or None) and the
call's scale kind vary. Outputs are poisoned with NaN first; every element must be written,
empty sequences must end with a zero state, and the input state must be left unchanged.
"""

import math
import random

import numpy as np
import pytest
import torch

from gdn_bench.algos import load_solution_file
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.definitions.prefill.mix import STRESS
from gdn_bench.shapes import HEAD_SIZE as D
from gdn_bench.shapes import NUM_V_HEADS as HV
from helpers import DEVICE, SCALE_KINDS, SEED, call_and_check, draw_inputs, poisoned_outputs

sub = load_solution_file(PREFILL.submission_entry(), "gdn_prefill_submission")
# Each call is checked against float64 by helpers.check_against_float64 (prefill's tolerances
# there: STATE_TOL, MARGIN). Two paths of the kernel on the same call (token walk or chunked,
# spans or not) agree within PATHS_AGREE (products rounded and summed in other orders); each is
# also checked against float64 on its own.
PATHS_AGREE = 1e-2


def _random_calls(rng: random.Random, sequences: int) -> list[list[int]]:
    """Calls of 2..12 sequences, lengths 0..90 (about one in six empty), until they hold at
    least `sequences` sequences in all."""
    calls = []
    while sum(map(len, calls)) < sequences:
        calls.append([0 if rng.random() < 0.15 else rng.randint(1, 90) for _ in range(rng.randint(2, 12))])
    return calls


# (lengths, state given): fixed edges first, then random calls drawn from the run's seed.
CALLS = [([1], True), ([32], True), ([33], False), ([64], True), ([200], True), ([0], True), ([0, 0, 5], False),
         ([3, 0, 11, 18], True),
         ([31, 1, 0, 40], True), ([97, 2, 0, 0, 65], True)]
CALLS += [(lengths, i % 3 != 2) for i, lengths in enumerate(_random_calls(random.Random(SEED), 100 - sum(len(c) for c, _ in CALLS)))]
assert sum(len(lengths) for lengths, _ in CALLS) >= 100  # the table covers at least 100 sequences



def _call_id(index):
    lengths, with_state = CALLS[index]
    shown = ",".join(map(str, lengths)) if len(lengths) <= 5 else f"{len(lengths)} seqs, T={sum(lengths)}"
    return f"{index}:[{shown}]{'' if with_state else ' no-state'}"


@pytest.mark.parametrize("index", range(len(CALLS)), ids=_call_id)
def test_matches_float64_reference(index, device):
    lengths, with_state = CALLS[index]
    call_and_check(sub.kernel, lengths, with_state, SCALE_KINDS[index % len(SCALE_KINDS)], SEED + index, device,
                   "prefill", first_regime=index)


@pytest.mark.parametrize("path", ("chunked", "spans"))
@pytest.mark.parametrize("stress", STRESS)
def test_stress_inputs(stress, path, device, monkeypatch):
    """The regimes where bfloat16 operands fail the contest's check, and keys that are not
    unit-norm, on both chunked paths: a long sequence and a short one after it."""
    _force_spans(monkeypatch, 1) if path == "spans" else _force_chunked(monkeypatch)
    call_and_check(sub.kernel, [150, 40], True, "none", SEED + 1200 + STRESS.index(stress), device, f"{stress}, {path}",
                   stress=stress)


LAUNCH_TABLES = ("PASS_TABLE", "SUMMARY_TABLE", "FIXUP_TABLE")
GPU_ARCHITECTURES = ("sm90", "sm100", "sm100_mma")  # sm100_mma: the sm100 ladder's rung (prefill_guard)


def _runs_as(table, launch):
    """What a launch of `table` computes where the tests run: Triton's interpreter ignores the
    warps, the stages and the L2 prefetch (a launch differs there by its width only)."""
    return (table, launch.block_v) if DEVICE == "cpu" else (table, launch)


_LAUNCH_ROWS = [(f"{table} {arch} row {row}", table, launch) for table in LAUNCH_TABLES
                for arch in GPU_ARCHITECTURES for row, (_, launch) in enumerate(getattr(sub, table)[arch])]
# Each production launch once (the first row that has it, by what it computes here).
PRODUCTION_LAUNCHES = {name: (table, launch) for index, (name, table, launch) in enumerate(_LAUNCH_ROWS)
                       if _runs_as(table, launch) not in {_runs_as(t, x) for _, t, x in _LAUNCH_ROWS[:index]}}


def _force_launch(monkeypatch, table, launch):
    """`launch` for every call of `table`'s kernel where this runs: the "interpreter" rows on a
    CPU, every architecture's on a GPU."""
    for arch in getattr(sub, table):
        monkeypatch.setitem(getattr(sub, table), arch, (sub.PiecesRow(None, launch),))


@pytest.mark.parametrize("name", PRODUCTION_LAUNCHES)
def test_every_production_launch(name, device, monkeypatch):
    """Each production Launch (every row of the span pass's, the summary's and the fix-up's
    tables, every GPU architecture's, once: PRODUCTION_LAUNCHES), forced onto a small call with
    spans: several sequences, one of them empty. (On a GPU, a launch of another architecture's table runs on this one:
    what its code computes is the same.)"""
    table, launch = PRODUCTION_LAUNCHES[name]
    for other in LAUNCH_TABLES:  # the others as wide as the state: few programs
        _force_launch(monkeypatch, other, sub.Launch(block_v=D, warps=4, stages=1))
    _force_launch(monkeypatch, table, launch)
    _force_spans(monkeypatch, 1)
    row = list(PRODUCTION_LAUNCHES).index(name)
    call_and_check(sub.kernel, [70, 0, 135], True, "none", SEED + 100 + row, device, name)


def _force_spans(monkeypatch, span_blocks):
    """Spans of `span_blocks` blocks (or more) on calls of any length (_force_chunked)."""
    _force_chunked(monkeypatch)
    for name, value in (("SPAN_MIN_BLOCKS", span_blocks), ("SPAN_MIN_TOKENS", 1), ("SPAN_MAX", 1 << 10),
                        ("SPAN_PIECES", 1 << 10)):
        monkeypatch.setattr(sub, name, value)


def _force_chunked(monkeypatch):
    """The chunked kernels on calls of any length: no token walk; and the walks take several
    sequences longest first (prefill_order) on calls of any size, which the unforced small
    calls of the other tests do not."""
    for name in ("WALK_MAX_TOKENS", "WALK_MAX_MEAN_LENGTH"):
        monkeypatch.setattr(sub, name, -1)
    for name in ("ORDER_MIN_BLOCKS", "ORDER_MIN_PROGRAMS"):
        monkeypatch.setattr(sub, name, 0)


# Spans forced onto small calls (spans of 1 or 2 blocks): sequences of one to many spans,
# starting inside a block or at its edge, ending at a span's edge or inside it, empty ones
# between them, with and without a state; with few pieces allowed (the last field), a
# sequence longer than J spans of S blocks takes longer spans (300 tokens in J = 2: 3 + 2).
SPAN_CASES = [
    ([200], True, 1, 1 << 10), ([300], False, 2, 1 << 10), ([64, 96], True, 1, 1 << 10),
    ([150, 0, 64, 0, 130], True, 1, 1 << 10), ([31, 300, 1], False, 1, 1 << 10), ([5, 250], True, 1, 1 << 10),
    ([300, 5], True, 1, 4),
]


@pytest.mark.parametrize("lengths, with_state, span_blocks, pieces", SPAN_CASES, ids=str)
def test_spans_match_float64_reference(lengths, with_state, span_blocks, pieces, device, monkeypatch):
    """A long sequence cut into spans (summary, fix-up, span pass) gives the float64
    reference's result, like the one-span path; and the two paths agree up to float32 rounding."""
    _force_spans(monkeypatch, span_blocks)
    monkeypatch.setattr(sub, "SPAN_PIECES", pieces)
    assert sub._span_plan(sum(lengths), len(lengths))[1] > 1
    seed = SEED + 800 + sum(lengths)
    spans = call_and_check(sub.kernel, lengths, with_state, "float", seed, device, f"spans of {span_blocks} blocks")
    monkeypatch.setattr(sub, "SPAN_PIECES", 0)
    whole = call_and_check(sub.kernel, lengths, with_state, "float", seed, device, "no spans")
    torch.testing.assert_close(spans[1], whole[1], rtol=PATHS_AGREE, atol=PATHS_AGREE)
    torch.testing.assert_close(spans[0].float(), whole[0].float(), rtol=2**-7, atol=PATHS_AGREE)


def test_span_plan():
    """No spans for short calls, short sequences on average or many sequences; otherwise the
    call's blocks cut into about SPAN_MAX spans of at least SPAN_MIN_BLOCKS blocks, at most
    SPAN_MAX and SPAN_PIECES // N per sequence."""
    C = sub.CHUNK
    assert sub._span_plan(sub.SPAN_MIN_TOKENS - 1, 1)[1] == 1
    assert sub._span_plan(sub.SPAN_MIN_TOKENS * 4 - 1, 4)[1] == 1
    assert sub._span_plan(1 << 20, sub.SPAN_PIECES)[1] == 1
    assert sub._span_plan(0, 3) == (1, 1)
    for total in (sub.SPAN_MIN_TOKENS, 8192, 16384, 1 << 20):
        for num_seqs in (1, 2, 4):
            if total < sub.SPAN_MIN_TOKENS * num_seqs:
                continue
            span, spans = sub._span_plan(total, num_seqs)
            blocks = -(-total // C)
            assert span == max(sub.SPAN_MIN_BLOCKS, -(-blocks // sub.SPAN_MAX)), (total, num_seqs, span)
            assert 2 <= spans <= min(sub.SPAN_MAX, sub.SPAN_PIECES // num_seqs), (total, num_seqs, span, spans)
            assert span * spans >= min(blocks, span * (sub.SPAN_PIECES // num_seqs))  # room for one sequence of all
    # The span length comes from the call, not from each sequence: four sequences of 2048
    # tokens are cut into spans as long as one of 8192 is (not into two spans each).
    assert sub._span_plan(8192, 4)[0] == sub._span_plan(8192, 1)[0]


def test_in_place_state_update(device, monkeypatch):
    """new_state may be the state tensor itself: each program reads its tile before writing;
    with spans (span 0 reads what the last span writes, in one launch) the state is copied."""
    call_and_check(sub.kernel, [20, 0, 45], True, "none", SEED + 300, device, "in place", in_place=True)
    _force_spans(monkeypatch, 1)
    assert sub._span_plan(250, 3)[1] > 1
    call_and_check(sub.kernel, [150, 0, 100], True, "none", SEED + 301, device, "in place, spans", in_place=True)


def test_span_max_below_two_means_no_spans(monkeypatch):
    """SPAN_MAX 0 or 1 (--config takes them): no spans, nothing divides by it."""
    for value in (0, 1):
        monkeypatch.setattr(sub, "SPAN_MAX", value)
        assert sub._span_plan(1 << 16, 1)[1] == 1


def test_two_calls_are_bit_identical(device):
    first = call_and_check(sub.kernel, [37, 5, 64], True, "none", SEED + 400, device, "determinism")
    second = call_and_check(sub.kernel, [37, 5, 64], True, "none", SEED + 400, device, "determinism")
    assert torch.equal(first[0].view(torch.int16), second[0].view(torch.int16))
    assert torch.equal(first[1], second[1])


def _record_launches(monkeypatch) -> list:
    """Patches the launches to log ("prepare", kernel) and ("launch", kernel) events, whether a
    launch is prepared by Triton's path (prepare) or its arguments laid out for the direct one
    (the layouts shared.direct_layouts gives prefill, on a GPU once a configuration has been
    launched; the ones kept before are made stale for the test)."""
    events = []
    real_prepare, real_layouts = sub.Launcher.prepare, sub.direct_layouts

    def prepare(self, *args, **kwargs):
        launch = real_prepare(self, *args, **kwargs)
        events.append(("prepare", self.fn.__name__))
        return lambda: (events.append(("launch", self.fn.__name__)), launch())

    def recorded(run, layout, name):
        return (lambda *a: (events.append(("launch", name)), run(*a)),
                lambda *a: (events.append(("prepare", name)), layout(*a))[1])

    def direct_layouts(launches, *args, **kwargs):
        made = real_layouts(launches, *args, **kwargs)
        if made is None:
            return None
        stream_of, layouts = made
        return stream_of, tuple(recorded(run, layout, launcher.fn.__name__)
                                for (run, layout), (launcher, _, _) in zip(layouts, launches))
    generation = object()  # every CallPlan asks direct_layouts again, once
    monkeypatch.setattr(sub.Launcher, "prepare", prepare)
    monkeypatch.setattr(sub, "direct_layouts", direct_layouts)
    monkeypatch.setattr(sub, "launch_generation", lambda: generation)
    return events


def test_at_most_four_launches_all_prepared_first(device, monkeypatch):
    """1 to 4 kernels per call, every launch prepared before the first goes out (so the host
    time between two kernels is one launch, see shared.Launcher)."""
    events = _record_launches(monkeypatch)

    def expect(*kernels):
        """Each kernel prepared before the first launch (a direct launch found for some steps but
        not all is prepared again, through Triton), then launched once, in order."""
        first = [event for event, _ in events].index("launch")
        assert {k for _, k in events[:first]} == set(kernels) and {e for e, _ in events[:first]} == {"prepare"}, events
        assert events[first:] == [("launch", k) for k in kernels], events
        events.clear()
    call_and_check(sub.kernel, [150, 3], True, "none", SEED + 500, device, "launch count")
    expect("chunk_prep_kernel", "span_pass_kernel")
    call_and_check(sub.kernel, [4, 0, 9, 10, 1], True, "none", SEED + 504, device, "launch count, token walk")
    expect("token_walk_kernel")
    _force_spans(monkeypatch, 1)
    call_and_check(sub.kernel, [150, 100], True, "none", SEED + 501, device, "launch count, spans")
    expect("chunk_prep_kernel", "span_summary_kernel", "span_fixup_kernel", "span_pass_kernel")


def test_empty_call_on_the_chunked_path_still_runs_the_prep(device, monkeypatch):
    """With no token at all, the chunked path still launches one prep program: it writes the
    cu_seqlens flag that every starting state adds (uninitialized scratch otherwise)."""
    _force_chunked(monkeypatch)
    events = _record_launches(monkeypatch)
    call_and_check(sub.kernel, [0, 0], True, "none", SEED + 520, device, "empty, chunked")
    assert ("launch", "chunk_prep_kernel") in events, events


@pytest.mark.parametrize("lengths", ([7], [32], [0], [3, 0, 20], [8, 8, 8, 8], [1] * 9), ids=str)
def test_token_walk_agrees_with_the_chunked_path(lengths, device, monkeypatch):
    """A short call walks its tokens (_walks); forced through the chunked kernels it gives the
    same result up to float32 rounding (the two paths are each checked against float64)."""
    assert sub._walks(sum(lengths), len(lengths))
    walked = call_and_check(sub.kernel, lengths, True, "float", SEED + 700, device, "token walk")
    _force_chunked(monkeypatch)
    chunked = call_and_check(sub.kernel, lengths, True, "float", SEED + 700, device, "token walk's call, chunked path")
    torch.testing.assert_close(walked[1], chunked[1], rtol=PATHS_AGREE, atol=PATHS_AGREE)
    torch.testing.assert_close(walked[0].float(), chunked[0].float(), rtol=2**-7, atol=PATHS_AGREE)


# Short calls: at and around the switch-over to the chunked path (T = WALK_MAX_TOKENS, a mean
# length of WALK_MAX_MEAN_LENGTH), one-token and few-token batches, one long sequence among
# one-token ones (its first token is not where an even split puts it), empty sequences.
W, M = sub.WALK_MAX_TOKENS, sub.WALK_MAX_MEAN_LENGTH
SHORT_CASES = [([W], True), ([W + 1], True), ([1] * 12, True), ([4] * 6, False), ([21] + [1] * 7, True),
               ([0, 1, 0, 2, 0], True), ([M] * (W // M + 1), True), ([M + 1] * (W // M + 1), False)]


PRODUCTION_WALKS = sorted({launch for arch in GPU_ARCHITECTURES if arch in sub.WALK_TABLE
                           for _, _, launch in sub.WALK_TABLE[arch]})


@pytest.mark.parametrize("row", range(len(PRODUCTION_WALKS)))
def test_every_production_walk_launch(row, device, monkeypatch):
    """Each launch of WALK_TABLE (every GPU architecture's), forced onto a small call (a few
    programs' worth in the interpreter)."""
    for arch in sub.WALK_TABLE:
        monkeypatch.setitem(sub.WALK_TABLE, arch, (sub.WalkRow(None, None, PRODUCTION_WALKS[row]),))
    call_and_check(sub.kernel, [2] if DEVICE == "cpu" else [9, 0, 3, 1], True, "float", SEED + 950 + row, device,
                   f"walk row {row}")


@pytest.mark.parametrize("lengths, with_state", SHORT_CASES, ids=lambda x: f"T={sum(x)},N={len(x)}" if isinstance(x, list) else str(x))
def test_short_calls_match_float64_reference(lengths, with_state, device):
    """Each short shape against float64, on the path _walks picks for it (both sides of each threshold)."""
    total, count = sum(lengths), len(lengths)
    walks = total <= W or total <= M * count
    assert sub._walks(total, count) == walks
    call_and_check(sub.kernel, lengths, with_state, "tensor", SEED + 900 + total, device,
                   "token walk" if walks else "chunked")


MALFORMED = {  # cu_seqlens for T = 72 (valid: [0, 40, 70, 72] or [0, 72]; three blocks)
    "decreasing": [0, 50, 30, 72],
    "not from 0": [2, 40, 70, 72],
    "last below T": [0, 40, 70, 71],
    "last past T": [0, 40, 70, 80],
    "negative": [0, -3, 70, 72],
    "far out of range": [0, 40, 1 << 40, 72],
    "one sequence, not from 0": [3, 72],
    "one sequence, last below T": [0, 70],
}
PATHS = ("token walk", "chunked", "spans")


def _guarded(shape, dtype, device, guard=4096):
    """A NaN-poisoned contiguous tensor inside a buffer whose `guard` elements on either side
    hold a sentinel: (tensor, buffer)."""
    count = math.prod(shape)
    buffer = torch.full((count + 2 * guard,), 7.0, dtype=dtype, device=device)
    tensor = buffer[guard:guard + count].view(shape)
    tensor.fill_(float("nan"))
    return tensor, buffer, guard


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind", MALFORMED)
def test_malformed_cu_seqlens_mark_every_output(kind, path, device, monkeypatch):
    """A malformed cu_seqlens: NaN in every element of output and new_state (a valid output
    would be written over the poison, so the outputs start at zero), nothing written outside
    them (guard elements on either side keep their sentinel), the inputs left unchanged."""
    if path != "token walk":
        _force_spans(monkeypatch, 1) if path == "spans" else _force_chunked(monkeypatch)
    count = len(MALFORMED[kind]) - 1
    inputs = draw_inputs([40, 30, 2][-count:] if count > 1 else [72], torch.Generator().manual_seed(SEED + 1000), device)
    inputs["cu_seqlens"] = torch.tensor(MALFORMED[kind], dtype=torch.int64, device=device)
    before = {name: t.clone() for name, t in inputs.items()}
    (output, out_buffer, guard), (new_state, state_buffer, _) = (
        _guarded((72, HV, D), torch.bfloat16, device), _guarded((count, HV, D, D), torch.float32, device))
    output.zero_()
    new_state.zero_()
    sub.kernel(*inputs.values(), None, output, new_state)
    assert output.isnan().all() and new_state.isnan().all(), f"{kind}: not every element marked"
    for buffer in (out_buffer, state_buffer):
        assert (buffer[:guard] == 7).all() and (buffer[-guard:] == 7).all(), f"{kind}: written outside the outputs"
    for name, t in inputs.items():
        assert torch.equal(t.cpu(), before[name].cpu()), f"{kind}: input {name} changed"


@pytest.mark.parametrize("path", PATHS)
def test_repeated_cu_seqlens_values_are_empty_sequences(path, device, monkeypatch):
    """Equal neighbours in cu_seqlens are empty sequences, not malformed: no NaN anywhere."""
    if path != "token walk":
        _force_spans(monkeypatch, 1) if path == "spans" else _force_chunked(monkeypatch)
    call_and_check(sub.kernel, [0, 5, 0, 0, 6, 0], True, "none", SEED + 1100, device, f"repeated values, {path}")


@pytest.mark.parametrize("kind, message", [
    ("one sequence, not from 0", r"cu_seqlens\[0\]: expected 0, got 3"),
    ("one sequence, last below T", r"cu_seqlens\[1\]: expected total_seq_len = 72, got 70"),
    ("decreasing", r"cu_seqlens\[2\]: expected at least cu_seqlens\[1\] = 50 \(nondecreasing\), got 30"),
    ("not from 0", r"cu_seqlens\[0\]: expected 0, got 2"),
    ("last below T", r"cu_seqlens\[3\]: expected total_seq_len = 72, got 71"),
    ("last past T", r"cu_seqlens\[3\]: expected total_seq_len = 72, got 80"),
    ("negative", r"cu_seqlens\[1\]: expected at least cu_seqlens\[0\] = 0 \(nondecreasing\), got -3"),
    ("far out of range", r"cu_seqlens\[3\]: expected at least cu_seqlens\[2\] = 1099511627776"),
])
def test_check_cu_seqlens_names_the_first_bad_entry(kind, message):
    with pytest.raises(ValueError, match=message):
        sub.check_cu_seqlens(torch.tensor(MALFORMED[kind]), 72)
    sub.check_cu_seqlens(torch.tensor([0, 40, 40, 72]), 72)
    sub.check_cu_seqlens(torch.tensor([0]), 0)
    with pytest.raises(ValueError, match=r"^cu_seqlens: expected a 1-D tensor"):
        sub.check_cu_seqlens(torch.tensor([[0, 9]]), 9)


@pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA GPU (GDN_TEST_DEVICE=cuda)")
def test_no_host_synchronization_and_no_recompilation(device):
    """The whole call is captured into a CUDA graph (any host synchronization inside it would
    fail the capture), and new lengths compile at most one new configuration per kernel."""
    inputs = draw_inputs([300, 20], torch.Generator().manual_seed(SEED), device)
    output, new_state = poisoned_outputs([300, 20], device)
    scale = torch.tensor(0.1, device=device)
    sub.kernel(*inputs.values(), scale, output, new_state)  # compile, warm up
    sub.kernel(*inputs.values(), None, output, new_state)  # the later calls' scale kind, whatever ran before
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        sub.kernel(*inputs.values(), scale, output, new_state)
    kernels = (sub.chunk_prep_kernel, sub.span_pass_kernel, sub.token_walk_kernel)
    compiled = [len(k.device_caches[torch.cuda.current_device()][0]) for k in kernels]
    for lengths in ([1], [77], [5, 9, 0, 200], [33, 33, 33]):
        x = draw_inputs(lengths, torch.Generator().manual_seed(SEED + 1), device)
        out, state = poisoned_outputs(lengths, device)
        sub.kernel(*x.values(), None, out, state)
    after = [len(k.device_caches[torch.cuda.current_device()][0]) for k in kernels]
    # at most one new configuration each: the prep's one-sequence path, the walk (first use)
    assert all(a <= c + 1 for a, c in zip(after, compiled)), (compiled, after)


def test_scale_kinds_agree(device):
    """None and 0 mean 1/sqrt(128); a float, a numpy float and a one-element tensor (read on
    the device) give the same result."""
    inputs = draw_inputs([9, 30], torch.Generator().manual_seed(SEED + 600), device)
    results = []
    for scale in (None, 0.0, 1 / math.sqrt(D), np.float64(1 / math.sqrt(D)), torch.tensor(1 / math.sqrt(D), device=device)):
        output, new_state = poisoned_outputs([9, 30], device)
        sub.kernel(*inputs.values(), scale, output, new_state)
        results.append(output.float().cpu())
    for other in results[1:]:
        torch.testing.assert_close(other, results[0], rtol=0, atol=0)

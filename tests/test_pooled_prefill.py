"""pooled_prefill (solution/triton/prefill.py): prefill over a state pool, on both paths (token
walk and chunked, with and without spans), against the float64 reference on random pools.

Every call checks every slot: slots no sequence reads are poisoned with NaN first (a stray
read would show in the outputs); written slots hold the reference's final state (an empty
sequence's: its initial state), all others are bit for bit what they were; outputs start as
NaN and must be written everywhere (zero for padding, NaN past the pool).

In Triton's interpreter every kernel runs with the state's whole width per program, so the
calls stay at a few seconds each.
"""

import pytest
import torch

from gdn_bench.algos import load_solution_file
from gdn_bench.checking import worst_margin
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.definitions.prefill.mix import model_like_inputs
from gdn_bench.definitions.prefill.reference import gdn_prefill
from helpers import DEVICE, HOPPER_ONLY, ON_HOPPER, SEED, wrong_dtype

sub = load_solution_file(PREFILL.submission_entry(), "gdn_prefill_pooled")
HV, D = sub.NUM_V_HEADS, sub.HEAD_SIZE
# The kernels' float16 operands against float64 (as tests/test_prefill_kernel.py checks the
# contest call): final states within STATE_TOL normwise, outputs within the contest's tolerance.
STATE_TOL = 3e-3
ARGS = ("q", "k", "v", "A_log", "a", "dt_bias", "b", "cu_seqlens")


def _force_chunked(monkeypatch, span_blocks=None, hopper=False):
    """The chunked kernels on calls of any length (no token walk); with span_blocks, spans of
    that many blocks (or more) too; hopper: the Hopper pass on every call of them (sm_90 only)."""
    monkeypatch.setattr(sub, "WALK_MAX_TOKENS", -1)
    monkeypatch.setattr(sub, "WALK_MAX_MEAN_LENGTH", -1)
    if hopper:
        monkeypatch.setattr(sub, "HOPPER_PASS_MIN_BLOCKS", 1)
        monkeypatch.setattr(sub, "HOPPER_PASS_MIN_PIECES", 1)
    if span_blocks is not None:
        for name, value in (("SPAN_MIN_BLOCKS", span_blocks), ("SPAN_MIN_TOKENS", 1), ("SPAN_MAX", 1 << 10),
                            ("SPAN_PIECES", 1 << 10)):
            monkeypatch.setattr(sub, name, value)


def _call(lengths, reads, writes, pool_size, seed, index_dtype=torch.int32, in_place_default=False):
    """pooled_prefill on fresh inputs for sequences of these lengths and a fresh random pool
    whose slots no sequence reads are NaN; checked by _check. Returns (output, pool after)."""
    gen = torch.Generator().manual_seed(seed)
    inputs = {n: t for n, t in model_like_inputs(lengths, gen, "cpu", with_state=False).items() if n in ARGS}
    pool = torch.randn(pool_size, HV, D, D, generator=gen)
    unread = [n for n in range(pool_size) if n not in reads]
    pool[unread] = float("nan")
    before = pool.clone()
    pool, output = pool.to(DEVICE), torch.full((sum(lengths), HV, D), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    args = {n: t.to(DEVICE) for n, t in inputs.items()}
    indices = [torch.tensor(i, dtype=index_dtype, device=DEVICE) for i in (reads, writes)]
    sub.pooled_prefill(*(args[n] for n in ARGS[:3]), pool, indices[0], *(args[n] for n in ARGS[3:]), None, output,
                       *(() if in_place_default else indices[1:]))
    what = f"lengths={lengths} reads={reads} writes={writes} P={pool_size} seed={seed}"
    _check(inputs, before, pool.cpu(), output.cpu(), reads, writes, what)
    return output, pool


def _check(inputs, before, after, output, reads, writes, what):
    """Sequences with a read index in the pool (and no write index past it): outputs within the
    contest's tolerance of the float64 reference on the state they read, written slots within
    STATE_TOL of its final state (an empty sequence: the state read, exactly). Padding
    sequences (read < 0): outputs zero. Others: outputs NaN. Every slot not written: unchanged."""
    pool_size = before.shape[0]
    live = [0 <= r < pool_size and w < pool_size for r, w in zip(reads, writes)]
    start = torch.stack([before[r] if ok else torch.zeros(HV, D, D) for r, ok in zip(reads, live)])
    ref_out, ref_state = gdn_prefill(**inputs, state=start, scale=None, compute_dtype=torch.float64)
    ends = inputs["cu_seqlens"].tolist()
    for n, (r, w) in enumerate(zip(reads, writes)):
        rows = slice(ends[n], ends[n + 1])
        if live[n]:
            margin = worst_margin(output[rows], ref_out[rows])
            assert margin <= 1.0, f"{what}: sequence {n} output worst margin {margin:.3f}"
            if w < 0:
                continue
            if ends[n] == ends[n + 1]:
                assert torch.equal(after[w], before[r]), f"{what}: empty sequence {n} did not copy its state"
            else:
                err = ((after[w].double() - ref_state[n]).norm() / ref_state[n].norm()).item()
                assert err < STATE_TOL, f"{what}: sequence {n} final state relative error {err:.3e}"
        elif r < 0:
            assert (output[rows] == 0).all(), f"{what}: padding sequence {n} has a nonzero output"
        else:
            assert output[rows].isnan().all(), f"{what}: sequence {n} has an index past the pool but numbers out"
    written = {w for w, ok in zip(writes, live) if ok and w >= 0}
    untouched = [n for n in range(pool_size) if n not in written]
    assert torch.equal(after[untouched].view(torch.int32), before[untouched].view(torch.int32)), \
        f"{what}: a slot not written changed"


# One sequence of each kind, in one call: in place, another in place, padding (its write index
# ignored), moving its state to another slot, output only (negative write index), read index
# past the pool, write index past the pool, empty in place (keeps its state), empty moving.
KINDS_READS = [0, 1, -1, 2, 3, 10, 4, 5, 6]
KINDS_WRITES = [0, 1, 7, 8, -1, 2, 13, 5, 9]
POOL_SIZE = 10


@pytest.mark.parametrize("index_dtype", (torch.int32, torch.int64), ids=str)
def test_every_index_convention_token_walk(index_dtype):
    _call([3, 5, 2, 4, 1, 2, 3, 0, 0], KINDS_READS, KINDS_WRITES, POOL_SIZE, SEED, index_dtype)


# The chunked pass as the architecture takes it, and on Hopper the Gluon pass on every call too.
PASSES = ("pass", pytest.param("hopper pass", marks=pytest.mark.skipif(not ON_HOPPER, reason=HOPPER_ONLY)))


@pytest.mark.parametrize("kind", PASSES)
def test_every_index_convention_chunked(monkeypatch, kind):
    """The same on the chunked path, sequences across the 64-token blocks."""
    _force_chunked(monkeypatch, hopper=kind == "hopper pass")
    _call([70, 9, 20, 5, 40, 3, 6, 0, 0], KINDS_READS, KINDS_WRITES, POOL_SIZE, SEED + 1, torch.int64)


@pytest.mark.parametrize("kind", PASSES)
def test_spans_in_place(monkeypatch, kind):
    """Sequences of several spans updated in place (the pass's last span rewrites the slot its
    first span starts from: it reads the summary's copy), one moving to another slot, padding
    and a read past the pool between them."""
    _force_chunked(monkeypatch, span_blocks=1, hopper=kind == "hopper pass")
    assert sub._span_plan(630, 5)[1] > 1
    _call([150, 150, 150, 150, 30], [3, -1, 0, 7, 5], [3, 2, 4, 1, 5], 7, SEED + 2)


@pytest.mark.parametrize("path", ("token walk", "chunked"))
def test_in_place_by_default_on_a_random_subset(path, monkeypatch):
    """No write indices: each sequence updates its own slot, a random subset of a larger pool."""
    if path == "chunked":
        _force_chunked(monkeypatch)
    lengths = [4, 0, 7] if path == "token walk" else [66, 0, 12]
    reads = torch.randperm(9, generator=torch.Generator().manual_seed(SEED))[:3].tolist()
    _call(lengths, reads, reads, 9, SEED + 3, in_place_default=True)


@pytest.mark.parametrize("kind", PASSES)
@pytest.mark.parametrize("path", ("token walk", "chunked", "spans"))
def test_same_numbers_as_the_contest_kernel(path, kind, monkeypatch):
    """Pool slots in any order give what kernel() gives on those states gathered (but for
    empty sequences, whose state kernel() zeroes): bit for bit, except the token walk on a GPU,
    whose compiled code differs with the pooled loads (there: within float32 rounding)."""
    if path != "token walk":
        _force_chunked(monkeypatch, 1 if path == "spans" else None, kind == "hopper pass")
    elif kind == "hopper pass":
        pytest.skip("the token walk has no pass")
    lengths = [5, 9] if path == "token walk" else [130, 40]
    gen = torch.Generator().manual_seed(SEED + 4)
    inputs = {n: t.to(DEVICE) for n, t in model_like_inputs(lengths, gen, "cpu").items() if n in ARGS}
    pool = torch.randn(5, HV, D, D, generator=gen).to(DEVICE)
    reads = torch.tensor([4, 1], device=DEVICE)
    dense_out = torch.empty(sum(lengths), HV, D, dtype=torch.bfloat16, device=DEVICE)
    dense_state = torch.empty(2, HV, D, D, device=DEVICE)
    front, back = [inputs[n] for n in ARGS[:3]], [inputs[n] for n in ARGS[3:]]
    sub.kernel(*front, pool[reads].clone(), *back, 0.1, dense_out, dense_state)
    output = torch.empty_like(dense_out)
    sub.pooled_prefill(*front, pool, reads, *back, 0.1, output)
    if path == "token walk" and DEVICE == "cuda":
        torch.testing.assert_close(output.float(), dense_out.float(), rtol=2**-7, atol=1e-5)
        torch.testing.assert_close(pool[reads], dense_state, rtol=1e-5, atol=1e-6)
    else:
        assert torch.equal(output.view(torch.int16), dense_out.view(torch.int16))
        assert torch.equal(pool[reads], dense_state)


def _valid(device):
    lengths = [3, 0, 4]
    inputs = model_like_inputs(lengths, torch.Generator().manual_seed(0), "cpu", with_state=False)
    args = {n: inputs[n].to(device) for n in ARGS}
    return dict(args, state_pool=torch.zeros(4, HV, D, D, device=device),
                read_indices=torch.tensor([1, 3, 0], dtype=torch.int32, device=device), scale=None,
                output=torch.empty(7, HV, D, dtype=torch.bfloat16, device=device))


@pytest.mark.parametrize("name, bad, message", [
    ("q", lambda t: t[0], "q: expected a [T, 4, 128] tensor, got shape [4, 128]"),
    ("cu_seqlens", lambda t: t[None], "cu_seqlens: expected a 1-D tensor [N + 1], got shape [1, 4]"),
    ("state_pool", lambda t: t[0], "state_pool: expected a [pool_size, 8, 128, 128] tensor, got shape [8, 128, 128]"),
    ("state_pool", wrong_dtype, "state_pool: expected dtype torch.float32, got torch.float16"),
    ("read_indices", lambda t: t.float(), "read_indices: expected dtype torch.int32 or torch.int64, got torch.float32"),
    ("read_indices", lambda t: t[:2], "read_indices: expected shape [3], got [2]"),
    ("write_indices", lambda t: t.long(), "write_indices: expected dtype torch.int32, got torch.int64"),
    ("write_indices", lambda t: t.tolist(), "write_indices: expected a torch.Tensor, got list"),
    ("b", wrong_dtype, "b: expected dtype torch.bfloat16, got torch.float16"),
    ("cu_seqlens", lambda t: t.int(), "cu_seqlens: expected dtype torch.int64, got torch.int32"),
    ("output", lambda t: t[1:], "output: expected shape [7, 8, 128], got [6, 8, 128]"),
])
def test_bad_argument_is_named(name, bad, message):
    args = _valid(DEVICE)
    args[name] = bad(args.get(name, args["read_indices"]))
    with pytest.raises(ValueError) as e:
        sub.pooled_prefill(**args)
    assert str(e.value) == message


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("lengths", ([3, 0, 4], [100, 30, 0]), ids=("token walk", "chunked"))
def test_replays_in_a_cuda_graph(lengths):
    """Captured once, replayed with new indices and inputs copied into the captured tensors:
    each replay matches the reference (no host synchronization in the call)."""
    pool_size = 6
    gen = torch.Generator().manual_seed(SEED + 5)
    fresh = [{n: t.cuda() for n, t in model_like_inputs(lengths, gen, "cpu").items() if n in ARGS} for _ in range(4)]
    args = dict(fresh[0], state_pool=torch.randn(pool_size, HV, D, D, generator=gen).cuda(),
                read_indices=torch.tensor([0, 1, 2], device="cuda"), scale=None,
                output=torch.empty(sum(lengths), HV, D, dtype=torch.bfloat16, device="cuda"))
    sub.pooled_prefill(**args)  # compiles and registers the launches outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        sub.pooled_prefill(**args)
    for replay, reads in enumerate(([2, -1, 5], [0, 3, 1], [4, 5, -1])):
        for name in ARGS:
            args[name].copy_(fresh[1 + replay][name])
        args["state_pool"].copy_(torch.randn(pool_size, HV, D, D, generator=gen))
        args["read_indices"].copy_(torch.tensor(reads))
        before = args["state_pool"].cpu()
        args["output"].fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _check({n: args[n].cpu() for n in ARGS}, before, args["state_pool"].cpu(), args["output"].cpu(), reads, reads,
               f"replay {replay} lengths={lengths}")

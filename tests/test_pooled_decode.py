"""pooled_decode (solution/triton/kernel.py): the decode kernel over a state pool, against the
float64 reference on fresh random pools. Every call checks every slot: those written hold the
reference's new state, all others are bit for bit what they were; outputs start as NaN.

In Triton's interpreter the calls run with two 64-row tiles per head (as tests/test_kernel.py
does), so each costs a few tenths of a second.
"""

import pytest
import torch

from gdn_bench.algos import load_solution_file
from gdn_bench.definitions.decode.reference import gdn_decode
from helpers import DEVICE, KERNEL_PATH, SEED, check_against_float64, draw_inputs, wrong_dtype

sub = load_solution_file(KERNEL_PATH, "gdn_submission_pooled")
HV, D = sub.NUM_V_HEADS, sub.HEAD_SIZE


def _pool_call(batch: int, pool_size: int, seed: int, device: str):
    """(inputs, pool, output, generator): fresh inputs for `batch` rows (every gate regime), a
    random pool, a NaN-filled output, and the generator to draw indices from."""
    gen = torch.Generator().manual_seed(seed)
    inputs = draw_inputs(batch, gen, device, with_state=False)
    pool = torch.randn(pool_size, HV, D, D, generator=gen).to(device)
    output = torch.full((batch, 1, HV, D), float("nan"), dtype=torch.bfloat16, device=device)
    return inputs, pool, output, gen


def _check(inputs, pool_before, pool_after, output, reads, writes, what):
    """Rows with a read index in the pool: outputs within bf16 rounding of the float64 reference
    on the state they read, written slots holding its new state. Padding rows (read < 0):
    output zero. Rows with an index past the pool: output NaN. Every slot not written: unchanged."""
    pool_size = pool_before.shape[0]
    live = [i for i, (r, w) in enumerate(zip(reads, writes)) if 0 <= r < pool_size and w < pool_size]
    written = {w: i for i, w in enumerate(writes) if i in live and w >= 0}
    if live:
        rows = torch.tensor(live)
        given = {n: (t[rows.to(t.device)] if n not in ("A_log", "dt_bias") else t) for n, t in inputs.items()
                 if t is not None}
        given["state"] = pool_before[torch.tensor([reads[i] for i in live]).to(pool_before.device)]
        _, want = gdn_decode(**{n: t.cpu() for n, t in given.items()}, scale=None)
        # A row that writes no slot (negative write index) has its output checked; its state is the reference's.
        new_state = torch.stack([pool_after[writes[i]] if writes[i] >= 0 else want[n].float().to(pool_after.device)
                                 for n, i in enumerate(live)])
        check_against_float64(given, None, output[rows.to(output.device)], new_state, what)
    for i, r in enumerate(reads):
        if r < 0:
            assert (output[i] == 0).all(), f"{what}: padding row {i} has a nonzero output"
        elif i not in live:
            assert output[i].isnan().all(), f"{what}: row {i} has an index past the pool but a number as output"
    untouched = [n for n in range(pool_size) if n not in written]
    assert torch.equal(pool_after[untouched], pool_before[untouched]), f"{what}: a slot not written changed"


@pytest.mark.parametrize("index_dtype", (torch.int32, torch.int64), ids=str)
def test_every_index_convention_in_one_call(index_dtype, device):
    """One call, one row of each kind: two in place, a padding row (its write index ignored),
    a row moving its state to another slot, a row reading that same slot with a negative write
    index (output only), a read index past the pool, a write index past the pool."""
    pool_size = 12
    inputs, pool, output, gen = _pool_call(7, pool_size, SEED, device)
    s = torch.randperm(pool_size, generator=gen).tolist()
    reads = [s[0], s[1], -1, s[2], s[2], pool_size, s[3]]
    writes = [s[0], s[1], s[4], s[5], -1, s[6], pool_size + 3]
    before = pool.clone()
    sub.pooled_decode(*(inputs[n] for n in ("q", "k", "v")), pool, torch.tensor(reads, dtype=index_dtype, device=device),
                      *(inputs[n] for n in ("A_log", "a", "dt_bias", "b")), None, output,
                      torch.tensor(writes, dtype=index_dtype, device=device))
    _check(inputs, before, pool, output, reads, writes, f"seed={SEED}")


@pytest.mark.parametrize("batch", (1, 5))
def test_in_place_by_default_on_a_random_subset(batch, device):
    """No write indices: each row updates its own slot, a random subset of a larger pool."""
    pool_size = 2 * batch + 3
    inputs, pool, output, gen = _pool_call(batch, pool_size, SEED + batch, device)
    reads = torch.randperm(pool_size, generator=gen)[:batch].tolist()
    before = pool.clone()
    sub.pooled_decode(*(inputs[n] for n in ("q", "k", "v")), pool, torch.tensor(reads, dtype=torch.int32, device=device),
                      *(inputs[n] for n in ("A_log", "a", "dt_bias", "b")), None, output)
    _check(inputs, before, pool, output, reads, reads, f"B={batch} seed={SEED + batch}")


@pytest.mark.parametrize("writes_given", (False, True), ids=("no_write_indices", "read_indices_again"))
@pytest.mark.parametrize("batch", (5, 20))
def test_in_place_keeps_the_index_conventions(batch, writes_given, device):
    """In place (no write indices, or the read indices' own tensor: on a GPU the kernel's
    IN_PLACE variant from 16-row tiles, B = 20 here; always in the interpreter), padding rows
    and indices past the pool still behave as documented: zero and NaN outputs, no slot
    touched; the other rows update their own slots."""
    pool_size = batch + 4
    inputs, pool, output, gen = _pool_call(batch, pool_size, SEED + 11 + batch, device)
    s = torch.randperm(pool_size, generator=gen).tolist()
    reads = [s[0], -1, pool_size, s[1], -4, *s[2:batch - 3]]
    read_indices = torch.tensor(reads, dtype=torch.int64, device=device)
    before = pool.clone()
    sub.pooled_decode(*(inputs[n] for n in ("q", "k", "v")), pool, read_indices,
                      *(inputs[n] for n in ("A_log", "a", "dt_bias", "b")), None, output,
                      read_indices if writes_given else None)
    _check(inputs, before, pool, output, reads, reads, f"B={batch} seed={SEED + 11 + batch} writes given: {writes_given}")


def test_same_numbers_as_the_dense_kernel(device):
    """Pool slots in any order give bit for bit what kernel() gives on those states gathered."""
    inputs, pool, output, gen = _pool_call(3, 6, SEED + 7, device)
    reads = torch.randperm(6, generator=gen)[:3].to(device)
    dense_out, dense_state = torch.empty_like(output), torch.empty(3, HV, D, D, device=device)
    args = [inputs[n] for n in ("q", "k", "v")], [inputs[n] for n in ("A_log", "a", "dt_bias", "b")]
    sub.kernel(*args[0], pool[reads].clone(), *args[1], 0.1, dense_out, dense_state)
    sub.pooled_decode(*args[0], pool, reads, *args[1], 0.1, output)
    assert torch.equal(output, dense_out) and torch.equal(pool[reads], dense_state)


def _valid(device):
    inputs, pool, output, _ = _pool_call(2, 4, 0, device)
    return dict(q=inputs["q"], k=inputs["k"], v=inputs["v"], state_pool=pool,
                read_indices=torch.tensor([1, 3], dtype=torch.int32, device=device), A_log=inputs["A_log"],
                a=inputs["a"], dt_bias=inputs["dt_bias"], b=inputs["b"], scale=None, output=output)


@pytest.mark.parametrize("name, bad, message", [
    ("state_pool", lambda t: t[0], "state_pool: expected a [pool_size, 8, 128, 128] tensor, got shape [8, 128, 128]"),
    ("state_pool", lambda t: t[:, :4].contiguous(), "state_pool: expected shape [4, 8, 128, 128], got [4, 4, 128, 128]"),
    ("state_pool", wrong_dtype, "state_pool: expected dtype torch.float32, got torch.float16"),
    ("read_indices", lambda t: t.float(), "read_indices: expected dtype torch.int32 or torch.int64, got torch.float32"),
    ("read_indices", lambda t: t[:1], "read_indices: expected shape [2], got [1]"),
    ("read_indices", lambda t: t.tolist(), "read_indices: expected a torch.Tensor, got list"),
    ("write_indices", lambda t: t.long(), "write_indices: expected dtype torch.int32, got torch.int64"),
    ("output", wrong_dtype, "output: expected dtype torch.bfloat16, got torch.float16"),
])
def test_bad_argument_is_named(name, bad, message, device):
    args = _valid(device)
    args[name] = bad(args.get(name, args["read_indices"]))
    with pytest.raises(ValueError) as e:
        sub.pooled_decode(**args)
    assert str(e.value) == message


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA graphs need a GPU")
def test_replays_in_a_cuda_graph():
    """Captured once, replayed with new indices and inputs copied into the captured tensors:
    each replay matches the reference (no host synchronization or allocation in the call)."""
    args = _valid("cuda")
    pool, reads = args["state_pool"], args["read_indices"]
    sub.pooled_decode(**args)  # compiles and registers the launch outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        sub.pooled_decode(**args)
    for replay in range(3):
        fresh = _valid("cuda")
        for name in ("q", "k", "v", "a", "b", "A_log", "dt_bias", "state_pool"):
            args[name].copy_(fresh[name])
        chosen = [[2, -1], [0, 3], [3, 1]][replay]
        reads.copy_(torch.tensor(chosen, dtype=torch.int32))
        before = pool.clone()
        args["output"].fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        inputs = {n: args[n] for n in ("q", "k", "v", "A_log", "a", "dt_bias", "b")}
        _check(inputs, before, pool, args["output"], chosen, chosen, f"replay {replay}")

"""The MTP submission (solution/triton/mtp.py) against the float64 reference on fresh random
pools: T = 1..8 tokens per row (every gate regime among the tokens, unit-norm keys as the
model's), each row's slot a random one of a larger pool. Outputs and the buffer of states
start as NaN: every element a call should write is checked, every buffer slot it should not
touch must still be NaN, and the pool must come back bit for bit unchanged.

In Triton's interpreter the calls run with two 64-row tiles per head (as tests/test_kernel.py
does), so each costs well under a second; its launch table preloads every token's inputs at
B = 1 only, so the rows of one batch and of several run both ways of loading them.
"""

import pytest
import torch

from gdn_bench.algos import load_solution_file
from gdn_bench.definitions.mtp.reference import gdn_mtp
from helpers import BF16_REL, DEVICE, KERNEL_PATH, SEED, draw_inputs, wrong_dtype

sub = load_solution_file(KERNEL_PATH.parent / "mtp.py", "gdn_mtp_submission")
HQ, HV, D = sub.NUM_Q_HEADS, sub.NUM_V_HEADS, sub.HEAD_SIZE
PER_TOKEN = ("q", "k", "v", "a", "b")


def _draw(batch: int, steps: int, pool_size: int, seed: int, device: str):
    """(inputs by name, pool, generator): `batch` rows of `steps` tokens whose gate regimes
    cycle over the tokens (tests/helpers.py draw_inputs), keys scaled to unit norm, and a
    random pool."""
    gen = torch.Generator().manual_seed(seed)
    drawn = draw_inputs(batch * steps, gen, device, with_state=False)
    k = drawn["k"].float()
    drawn["k"] = (k / k.norm(dim=-1, keepdim=True)).bfloat16()
    inputs = {n: drawn[n].reshape(batch, steps, *drawn[n].shape[2:]) for n in PER_TOKEN}
    inputs.update(A_log=drawn["A_log"], dt_bias=drawn["dt_bias"])
    return inputs, torch.randn(pool_size, HV, D, D, generator=gen).to(device), gen


def _nan(*shape, dtype=torch.float32, device=DEVICE):
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def _check_rows(inputs, pool, slots, rows, scale, output, states, what):
    """Rows `rows` (reading pool slots `slots[i]`): outputs within bf16 rounding of the float64
    reference (BF16_REL relative, plus float32 accumulation slack); their states (`states`
    [len(rows), T, 8, 128, 128], or None) within 1e-5 normwise relative error."""
    picked = torch.tensor(rows)
    given = {n: inputs[n].cpu()[picked] for n in PER_TOKEN}
    given.update(A_log=inputs["A_log"].cpu(), dt_bias=inputs["dt_bias"].cpu())
    index = torch.tensor([slots[i] for i in rows])
    ref_out, ref_states = gdn_mtp(**given, initial_state=pool.cpu(), initial_state_indices=index, scale=scale)
    got = output.cpu()[picked].double()
    assert torch.isfinite(got).all(), f"{what}: output has unwritten or non-finite elements"
    q_h = given["q"].double().repeat_interleave(HV // HQ, dim=2)
    magnitude = (scale or D**-0.5) * torch.einsum("bthvk,bthk->bthv", ref_states.abs(), q_h.abs())
    ratio = ((got - ref_out).abs() / (BF16_REL * ref_out.abs() + 1e-5 * magnitude + 1e-30)).max().item()
    assert ratio <= 1.0, f"{what}: output error exceeds bf16 rounding (ratio {ratio:.2f})"
    if states is not None:
        states = states.cpu().double()
        assert torch.isfinite(states).all(), f"{what}: a state in the buffer was not written"
        rel = ((states - ref_states).norm() / ref_states.norm()).item()
        assert rel < 1e-5, f"{what}: states normwise relative error {rel:.3e}"


def _call(fn, inputs, pool, indices, scale, *tail):
    """fn(q, k, v, pool, indices, A_log, a, dt_bias, b, scale, *tail), the call order of every entry point."""
    return fn(*(inputs[n] for n in ("q", "k", "v")), pool, indices,
              *(inputs[n] for n in ("A_log", "a", "dt_bias", "b")), scale, *tail)


@pytest.mark.parametrize("steps", range(1, 9))
def test_definition_call_matches_float64(steps, device):
    """kernel(), the definition's call: one row with a negative index (the pool's end, as the
    reference indexes), the others a random subset of a larger pool; final_state a copy of it."""
    batch, pool_size = 1 + steps % 3, 6 + steps
    seed = SEED + steps
    inputs, pool, gen = _draw(batch, steps, pool_size, seed, device)
    slots = torch.randperm(pool_size, generator=gen)[:batch].tolist()
    given = [slot - pool_size if row == 0 else slot for row, slot in enumerate(slots)]
    before = pool.clone()
    buffer, output = _nan(pool_size, steps, HV, D, D, device=device), _nan(batch, steps, HV, D, dtype=torch.bfloat16,
                                                                           device=device)
    final_state = _nan(pool_size, HV, D, D, device=device)
    scale = [None, 0.0, 0.07][steps % 3]
    _call(sub.kernel, inputs, pool, torch.tensor(given, dtype=torch.int32, device=device), scale, buffer, output,
          final_state)
    what = f"T={steps} B={batch} seed={seed}"
    _check_rows(inputs, before, slots, range(batch), scale, output, buffer[slots], what)
    untouched = [n for n in range(pool_size) if n not in slots]
    assert buffer[untouched].isnan().all(), f"{what}: a buffer slot of no row was written"
    assert torch.equal(pool, before) and torch.equal(final_state, before), f"{what}: the pool or its copy differs"


def test_serving_call_padding_and_indices_past_the_pool(device):
    """pooled_mtp: padding rows (negative index) get zero output and touch no slot; an index
    past the pool gives NaN output and touches none; the others are exact; without a buffer
    the outputs are the same, bit for bit."""
    batch, steps, pool_size = 5, 3, 9
    inputs, pool, gen = _draw(batch, steps, pool_size, SEED + 20, device)
    free = torch.randperm(pool_size, generator=gen).tolist()
    slots = [free[0], -1, pool_size, free[1], -3]
    before = pool.clone()
    buffer = _nan(pool_size, steps, HV, D, D, device=device)
    output = _nan(batch, steps, HV, D, dtype=torch.bfloat16, device=device)
    indices = torch.tensor(slots, dtype=torch.int64, device=device)
    _call(sub.pooled_mtp, inputs, pool, indices, None, output, buffer)
    what = f"seed={SEED + 20}"
    _check_rows(inputs, before, slots, [0, 3], None, output, buffer[[free[0], free[1]]], what)
    assert (output[[1, 4]] == 0).all(), f"{what}: a padding row's output is not zero"
    assert output[2].isnan().all(), f"{what}: a row past the pool has a number as output"
    assert buffer[free[2:]].isnan().all(), f"{what}: a slot of no row was written"
    assert torch.equal(pool, before), f"{what}: the pool changed"
    without = _nan(batch, steps, HV, D, dtype=torch.bfloat16, device=device)
    _call(sub.pooled_mtp, inputs, pool, indices, None, without)
    assert torch.equal(without.isnan(), output.isnan()) and torch.equal(without[[0, 1, 3, 4]], output[[0, 1, 3, 4]])


def test_states_stream_where_they_outgrow_the_l2():
    """The per-token states take the streaming hint from STREAM_L2_FRACTION of the L2 on, and
    never where no L2 is known (the CPU). 16 rows of 8 tokens write 64 MiB of states."""
    states = 16 * 8 * HV * D * D * 4
    assert states == 64 * 2**20
    fraction = sub.STREAM_L2_FRACTION
    assert sub.streams(states, 50 * 2**20) and sub.streams(states, 60 * 2**20)
    assert sub.streams(states, states / fraction) and not sub.streams(states, states / fraction + 64)
    assert not sub.streams(states // 2, 50 * 2**20), "32 MiB on a 50 MiB L2 (H100 and H200 both)"
    assert not sub.streams(states, 0)


def test_streamed_states_match_float64(device, monkeypatch):
    """With the streaming hint in force (an L2 far smaller than the states), pooled_mtp's
    outputs and states are those of the float64 reference, as without it."""
    monkeypatch.setattr(sub, "l2_bytes", lambda _device: 1)
    batch, steps, pool_size = 2, 3, 5
    inputs, pool, gen = _draw(batch, steps, pool_size, SEED + 40, device)
    slots = torch.randperm(pool_size, generator=gen)[:batch].tolist()
    buffer = _nan(pool_size, steps, HV, D, D, device=device)
    output = _nan(batch, steps, HV, D, dtype=torch.bfloat16, device=device)
    _call(sub.pooled_mtp, inputs, pool, torch.tensor(slots, dtype=torch.int32, device=device), None, output, buffer)
    _check_rows(inputs, pool, slots, range(batch), None, output, buffer[slots], f"streamed, seed={SEED + 40}")
    untouched = [n for n in range(pool_size) if n not in slots]
    assert buffer[untouched].isnan().all(), "a slot of no row was written"


def test_rows_sharing_a_slot(device):
    """Two rows reading one slot each start from the pool's state (both outputs exact); the
    slot's buffer holds, element by element, one of the two rows' states (which one is not
    defined: programs of both write it, and on a GPU their stores interleave, so one state row
    can mix both)."""
    batch, steps, pool_size = 3, 2, 5
    inputs, pool, gen = _draw(batch, steps, pool_size, SEED + 30, device)
    shared, other = torch.randperm(pool_size, generator=gen)[:2].tolist()
    slots = [shared, other, shared]
    buffer = _nan(pool_size, steps, HV, D, D, device=device)
    output = _nan(batch, steps, HV, D, dtype=torch.bfloat16, device=device)
    _call(sub.pooled_mtp, inputs, pool, torch.tensor(slots, dtype=torch.int32, device=device), None, output, buffer)
    _check_rows(inputs, pool, slots, [0, 1, 2], None, output, None, f"seed={SEED + 30}")
    given = {n: inputs[n].cpu() for n in inputs}
    _, states = gdn_mtp(**given, initial_state=pool.cpu(), initial_state_indices=torch.tensor(slots), scale=None)
    got = buffer[shared].cpu().double()  # [T, HV, V, K]
    errors = [(got - states[row]).abs() / states[row].abs().amax() for row in (0, 2)]
    assert (torch.minimum(*errors) < 1e-5).all(), "an element of the shared slot is neither row's"


def test_value_returning_call_returns_the_pool_itself(device):
    """run(): kernel()'s output and buffer, bit for bit, and the pool itself as final_state."""
    inputs, pool, gen = _draw(2, 3, 4, SEED + 40, device)
    indices = torch.tensor([3, 0], dtype=torch.int32, device=device)
    buffer, output = _nan(4, 3, HV, D, D, device=device), _nan(2, 3, HV, D, dtype=torch.bfloat16, device=device)
    _call(sub.kernel, inputs, pool, indices, None, buffer, output, torch.empty_like(pool))
    returned_buffer = _nan(4, 3, HV, D, D, device=device)
    returned, final_state = _call(sub.run, inputs, pool, indices, None, returned_buffer)
    assert torch.equal(returned, output) and final_state is pool
    assert torch.equal(returned_buffer[[0, 3]], buffer[[0, 3]])


def _valid(device, seed=0):
    """A valid kernel() call's arguments by name: 2 rows of 3 tokens, a pool of 4 slots."""
    inputs, pool, _ = _draw(2, 3, 4, seed, device)
    return dict(inputs, initial_state=pool, initial_state_indices=torch.tensor([1, 3], dtype=torch.int32, device=device),
                scale=None, intermediate_states_buffer=_nan(4, 3, HV, D, D, device=device),
                output=_nan(2, 3, HV, D, dtype=torch.bfloat16, device=device), final_state=torch.empty_like(pool))


@pytest.mark.parametrize("name, bad, message", [
    ("q", lambda t: t[:, :2].contiguous(), "k: expected shape [2, 2, 4, 128], got [2, 3, 4, 128]"),
    ("initial_state_indices", lambda t: t.float(),
     "initial_state_indices: expected dtype torch.int32 or torch.int64, got torch.float32"),
    ("intermediate_states_buffer", lambda t: t[:, :2].contiguous(),
     "intermediate_states_buffer: expected shape [4, 3, 8, 128, 128], got [4, 2, 8, 128, 128]"),
    ("a", wrong_dtype, "a: expected dtype torch.bfloat16, got torch.float16"),
    ("final_state", lambda t: t[:3], "final_state: expected shape [4, 8, 128, 128], got [3, 8, 128, 128]"),
])
def test_bad_argument_is_named(name, bad, message, device):
    args = _valid(device)
    args[name] = bad(args[name])
    with pytest.raises(ValueError) as e:
        sub.kernel(**args)
    assert str(e.value) == message


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA graphs need a GPU")
def test_serving_call_replays_in_a_cuda_graph():
    """pooled_mtp captured once, replayed with new indices and inputs copied in: each replay
    matches the reference (no host synchronization or allocation in the call)."""
    args = _valid("cuda")
    inputs = {n: args[n] for n in (*PER_TOKEN, "A_log", "dt_bias")}
    pool, indices, buffer, output = (args[n] for n in ("initial_state", "initial_state_indices",
                                                      "intermediate_states_buffer", "output"))
    _call(sub.pooled_mtp, inputs, pool, indices, None, output, buffer)  # compiles outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _call(sub.pooled_mtp, inputs, pool, indices, None, output, buffer)
    for replay, slots in enumerate(([2, 0], [3, 1], [0, 3])):
        fresh = _valid("cuda", SEED + replay)
        for name in inputs:
            inputs[name].copy_(fresh[name])
        pool.copy_(fresh["initial_state"])
        indices.copy_(torch.tensor(slots, dtype=torch.int32))
        buffer.fill_(float("nan"))
        output.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _check_rows(inputs, pool, slots, [0, 1], None, output, buffer[slots], f"replay {replay}")


@pytest.mark.parametrize("bad", ["q", "v", "initial_state", "initial_state_indices", "a", "dt_bias",
                                 "intermediate_states_buffer", "output", "scale"])
@pytest.mark.parametrize("also_output", [False, True])
def test_one_pass_checks_name_what_the_one_at_a_time_checks_name(bad, also_output):
    """The calls check in one pass (shared.pooled_pointers and its guards, made by a valid call
    first); a bad argument, alone or beside a bad output, is named as _check_inputs and then
    output's check name it, in call order, by kernel() and (with its own names of the pool, the
    indices and the buffer) by pooled_mtp. Nothing is launched: every call here fails."""
    names = ("q", "k", "v", "initial_state", "initial_state_indices", "A_log", "a", "dt_bias", "b")
    sub.kernel(**_valid(DEVICE))  # a valid call: the guards are made
    args = _valid(DEVICE, SEED + 1)
    args[bad] = float("inf") if bad == "scale" else args[bad].double()
    if also_output:
        args["output"] = args["output"][:, :1]
    inputs = [args[n] for n in names]
    with pytest.raises(ValueError) as expected:
        sub._check_inputs(*inputs, args["scale"], args["intermediate_states_buffer"], sub._DEFINITION_NAMES)
        sub.expect("output", args["output"], *sub._expected(2, 3)["output"], inputs[0].device)
    name, colon, rest = str(expected.value).partition(":")
    pooled_name = dict(zip(sub._DEFINITION_NAMES, sub._POOLED_NAMES)).get(name, name)
    pooled = dict({n: args[n] for n in (*PER_TOKEN, "A_log", "dt_bias", "scale", "output")},
                  state_pool=args["initial_state"], indices=args["initial_state_indices"],
                  intermediate_states=args["intermediate_states_buffer"])
    for call, called, message in ((sub.kernel, args, str(expected.value)),
                                  (sub.pooled_mtp, pooled, pooled_name + colon + rest)):
        with pytest.raises(ValueError) as raised:
            call(**called)
        assert str(raised.value) == message

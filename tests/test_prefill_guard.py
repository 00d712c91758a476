"""solution/triton/prefill_guard.py: the sm_100 plan checked where it runs. The verdict on real
outputs (bitwise repeats, the contest's tolerance against the token walk, nothing to compare);
then kernel() and pooled_prefill() planned for sm_100 (shared.planning_for): a configuration
that passes is checked once, one that fails walks the device down the ladder to the token walk,
and every call's outputs stay right against float64 throughout (helpers.call_and_check:
poisoned outputs, every element written; pooled: every slot as it should be)."""

import importlib
import warnings

import pytest
import torch

from gdn_bench.algos import load_solution_file
from gdn_bench.checking import worst_margin
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.definitions.prefill.mix import model_like_inputs
from gdn_bench.definitions.prefill.reference import gdn_prefill
from helpers import DEVICE, SEED, call_and_check, prefill_kernel_args, PREFILL_CALL_ORDER

PACKAGE = "gdn_prefill_guard_submission"
sub = load_solution_file(PREFILL.submission_entry(), PACKAGE)
guard = importlib.import_module(f"{PACKAGE}.prefill_guard")
shared = importlib.import_module(f"{PACKAGE}.shared")
BLACKWELL = (10, 0)
LENGTHS = [70, 0, 20]  # chunked, spans forced below: every kernel of the ladder's plans
SHORT = [40, 0, 15]  # chunked, one block a sequence: the ladder's tests (the walk costs most here)


@pytest.fixture(autouse=True)
def fresh_guard(monkeypatch):
    """No configuration checked and no device moved down, for each test; in Triton's
    interpreter the ladder's plans take the interpreter's launches (each program costs
    milliseconds there whatever its tile), on a GPU their own; spans on short calls."""
    monkeypatch.setattr(guard, "_PASSED", set())
    monkeypatch.setattr(guard, "_PASSED_PLANS", {})
    monkeypatch.setattr(guard, "_RUNGS", {})
    if DEVICE == "cpu":
        for name in ("WALK_TABLE", "PREP_TABLE", "PASS_TABLE", "SUMMARY_TABLE", "FIXUP_TABLE"):
            table = getattr(sub, name)
            for arch in guard.LADDER.keys() | set(guard.LADDER.values()):
                if arch in table:  # the rungs' walks are sm100's (prefill._WALKS_AS)
                    monkeypatch.setitem(table, arch, table["interpreter"])
    for name, value in (("WALK_MAX_TOKENS", 1), ("SPAN_MIN_BLOCKS", 1), ("SPAN_MIN_TOKENS", 1), ("SPAN_MAX", 1 << 10),
                        ("SPAN_PIECES", 1 << 10)):
        monkeypatch.setattr(sub, name, value)


def _outputs(seed, shape_out=(40, 8, 128), shape_state=(2, 8, 128, 128)):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape_out, generator=gen).to(torch.bfloat16), torch.randn(shape_state, generator=gen))


def test_verdict():
    """Two identical runs near the walk pass; a repeat that differs in one bit, an element off
    by more than GUARD_MARGIN tolerances or one left unwritten (NaN) fails; a walk holding NaN
    leaves nothing to compare."""
    run = _outputs(SEED)
    near = (run[0], run[1] + 0.5 * guard.TOLERANCE)
    assert guard.verdict(run, tuple(t.clone() for t in run), near) is True
    flipped = run[1].clone()
    flipped.view(torch.int32)[0, 0, 0, 0] ^= 1
    assert guard.verdict(run, (run[0], flipped), run) is False
    far = run[1].clone()
    far[1, 2, 3, 4] += (guard.GUARD_MARGIN + 1) * guard.TOLERANCE * (1 + far[1, 2, 3, 4].abs())
    assert guard.verdict(run, run, (run[0], far)) is False
    unwritten = run[0].clone()
    unwritten[5, 1, 7] = float("nan")
    assert guard.verdict((unwritten, run[1]), (unwritten, run[1]), run) is False
    walked_nan = run[1].clone()
    walked_nan[0, 0, 0, 0] = float("nan")
    assert guard.verdict(run, run, (run[0], walked_nan)) is None


def test_worst_margin_is_the_contests():
    """An element fails the contest's check only where its error exceeds both 1e-2 and 1e-2 of
    the expected value: the margin is the smaller of the two ratios."""
    want = torch.tensor([10.0, 0.0, 0.0, 1.0], dtype=torch.float64)
    assert guard.worst_margin(want, want) == 0.0
    assert guard.worst_margin(torch.tensor([10.02, 0.0, 0.0, 1.0], dtype=torch.float64), want) == pytest.approx(0.2)  # relative
    assert guard.worst_margin(torch.tensor([10.0, 0.005, 0.0, 1.0], dtype=torch.float64), want) == pytest.approx(0.5)  # absolute
    assert guard.worst_margin(torch.tensor([10.0, 0.0, float("nan"), 1.0]), want) == float("inf")


def _checked_call(seed, lengths=LENGTHS):
    """One kernel() call planned for sm_100, checked against float64; the warnings it gave."""
    with shared.planning_for(BLACKWELL), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call_and_check(sub.kernel, lengths, True, "none", seed, DEVICE, "sm100 plan")
    return [w for w in caught if issubclass(w.category, RuntimeWarning) and "gdn prefill" in str(w.message)]


def _index():
    """The device index kernel() keys the ladder by (None on the CPU)."""
    return torch.empty(0, device=DEVICE).device.index


def _rung():
    return guard.rung("sm100", _index())


def test_a_passing_plan_is_checked_once():
    """The sm100 plan passes its check on the first call, is not moved, and the next call of
    the same configuration is not checked again."""
    assert _checked_call(SEED + 1) == []
    assert _rung() == "sm100" and len(guard._PASSED) == 1
    assert _checked_call(SEED + 2) == []
    assert len(guard._PASSED) == 1 and len(guard._PASSED_PLANS) == 1


def test_a_walked_call_is_not_checked():
    """A call the plan walks (a few tokens a sequence) is not checked: the walk is the reference."""
    assert _checked_call(SEED + 5, [2, 3]) == []
    assert guard._PASSED == set() and _rung() == "sm100"


def test_failing_checks_walk_down_the_ladder(monkeypatch):
    """Checks that every configuration fails (a negative margin) move the device from the sm100
    plan to sm100_mma and then to the token walk, with a warning each; the call's own outputs
    are the walk's and right; later calls, pooled_prefill's too, plan the walk."""
    monkeypatch.setattr(guard, "GUARD_MARGIN", -1.0)
    caught = _checked_call(SEED + 3, SHORT)
    assert [str(w.message).split(" plan")[0] for w in caught] == ["gdn prefill: the sm100", "gdn prefill: the sm100_mma"]
    assert _rung() == "sm100_walk" and guard.rung("sm100_mma", _index()) == "sm100_walk"
    with shared.planning_for(BLACKWELL), shared.recording_launches() as launches:
        args = prefill_kernel_args(DEVICE, SHORT)
        sub.kernel(*(args[name] for name in PREFILL_CALL_ORDER))
        pool = torch.zeros(4, 8, 128, 128, device=DEVICE)
        indices = torch.tensor([2, 0, 3], dtype=torch.int32, device=DEVICE)
        sub.pooled_prefill(args["q"], args["k"], args["v"], pool, indices, args["A_log"], args["a"], args["dt_bias"],
                           args["b"], args["cu_seqlens"], None, args["output"])
    assert [launch.fn.__name__ for launch in launches] == ["token_walk_kernel"] * 2


def test_recording_checks_nothing():
    """While launches are recorded (the architecture report, the tuner) nothing runs, so nothing
    is checked: the call records its plan's launches only."""
    args = prefill_kernel_args(DEVICE, LENGTHS)
    with shared.planning_for(BLACKWELL), shared.recording_launches() as launches:
        sub.kernel(*(args[name] for name in PREFILL_CALL_ORDER))
    assert "token_walk_kernel" not in [launch.fn.__name__ for launch in launches]
    assert guard._PASSED == set()


def test_pooled_calls_are_checked():
    """pooled_prefill's configurations are checked too, each run over a pool of its own (the
    caller's is untouched by the check; the ladder is kernel()'s, tested above): the call passes
    and runs on the sm100 plan, its outputs (zero for padding) and written slots right, no other
    slot changed."""
    lengths, reads, writes = [40, 0, 15, 9], [3, 0, -1, 2], [1, 4, -1, 2]
    gen = torch.Generator().manual_seed(SEED + 7)
    names = ("q", "k", "v", "A_log", "a", "dt_bias", "b", "cu_seqlens")
    inputs = {n: t for n, t in model_like_inputs(lengths, gen, "cpu", with_state=False).items() if n in names}
    pool = torch.randn(5, 8, 128, 128, generator=gen)
    start = torch.stack([pool[r] if r >= 0 else torch.zeros(8, 128, 128) for r in reads])
    ref_out, ref_state = gdn_prefill(**inputs, state=start, scale=None, compute_dtype=torch.float64)
    on = {n: t.to(DEVICE) for n, t in inputs.items()}
    after, output = pool.to(DEVICE), torch.full((sum(lengths), 8, 128), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    indices = [torch.tensor(i, dtype=torch.int32, device=DEVICE) for i in (reads, writes)]
    with shared.planning_for(BLACKWELL), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sub.pooled_prefill(on["q"], on["k"], on["v"], after, indices[0], on["A_log"], on["a"], on["dt_bias"], on["b"],
                           on["cu_seqlens"], None, output, indices[1])
    assert not [w for w in caught if "gdn prefill" in str(w.message)]
    assert _rung() == "sm100" and len(guard._PASSED) == 1
    after, output, ends = after.cpu(), output.cpu(), inputs["cu_seqlens"].tolist()
    for n, (r, w) in enumerate(zip(reads, writes)):
        rows = slice(ends[n], ends[n + 1])
        if r < 0:
            assert torch.equal(output[rows], torch.zeros_like(output[rows])), f"padding sequence {n}"
            continue
        assert worst_margin(output[rows], ref_out[rows]) <= 1, f"sequence {n} outputs"
        final = pool[r] if lengths[n] == 0 else ref_state[n]  # pooled: an empty sequence keeps its state
        assert worst_margin(after[w], final) <= 1, f"sequence {n} final state"
    untouched = [slot for slot in range(5) if slot not in writes]
    assert torch.equal(after[untouched], pool[untouched])

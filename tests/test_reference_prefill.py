"""gdn_bench/definitions/prefill/reference.py (the prefill definition's reference) against an independent
float64 token loop (pt-reference's, run in float64): random lengths, empty sequences, state
None, every scale form; plus the official semantics the loop cannot show by itself."""

import ast

import pytest
import torch

from gdn_bench.algos import load_module
from gdn_bench.definitions.prefill.mix import model_like_inputs
from gdn_bench.definitions.prefill.reference import gdn_prefill, run
from gdn_bench.shapes import DEFAULT_SCALE
from helpers import ROOT, SEED

token_loop = load_module(ROOT / "baselines" / "prefill" / "pt_reference" / "main.py",
                         "prefill_pt_reference").token_loop
SCALES = (None, 0.0, 0.0625, "tensor")


def _lengths(case: int, gen: torch.Generator) -> list[int]:
    """1–6 sequences of 0–12 tokens; every third case has an empty one."""
    count = 1 + case % 6
    lengths = torch.randint(1, 13, (count,), generator=gen).tolist()
    if case % 3 == 2:
        lengths[case % count] = 0
    return lengths


@pytest.mark.parametrize("case", range(12))
def test_matches_a_float64_token_loop(case):
    gen = torch.Generator().manual_seed(SEED + case)
    lengths = _lengths(case, gen)
    inputs = model_like_inputs(lengths, gen, "cpu", with_state=case % 4 != 1)
    scale = SCALES[case % len(SCALES)]
    inputs["scale"] = torch.tensor(0.09) if scale == "tensor" else scale
    out, state = gdn_prefill(**inputs)
    want_out, want_state = token_loop(**inputs, dtype=torch.float64)
    what = f"lengths={lengths} state={inputs['state'] is not None} scale={scale} seed={SEED + case}"
    torch.testing.assert_close(out, want_out, rtol=1e-12, atol=1e-12, msg=what)
    torch.testing.assert_close(state, want_state, rtol=1e-12, atol=1e-12, msg=what)


def test_empty_sequences_leave_a_zero_state_and_no_output():
    gen = torch.Generator().manual_seed(SEED)
    inputs = model_like_inputs([0, 3, 0], gen, "cpu")
    out, state = gdn_prefill(**inputs)
    assert out.shape == (3, 8, 128)
    assert not state[0].any() and not state[2].any() and state[1].abs().sum() > 0
    inputs = model_like_inputs([0, 0], gen, "cpu")
    out, state = gdn_prefill(**inputs)
    assert out.shape == (0, 8, 128) and state.shape == (2, 8, 128, 128) and not state.any()


def test_scale_zero_or_none_is_one_over_sqrt_128():
    inputs = model_like_inputs([4, 2], torch.Generator().manual_seed(SEED), "cpu")
    expected, _ = gdn_prefill(**dict(inputs, scale=DEFAULT_SCALE))
    for scale in (None, 0.0):
        assert torch.equal(gdn_prefill(**dict(inputs, scale=scale))[0], expected)


def test_first_token_is_the_decode_step():
    """Token by token the recurrence is decode's: the first token of each sequence from its
    state, checked against the decode reference."""
    from gdn_bench.definitions.decode.reference import gdn_decode

    inputs = model_like_inputs([1, 1, 1], torch.Generator().manual_seed(SEED), "cpu")
    out, state = gdn_prefill(**inputs)
    step = {n: inputs[n][:, None] for n in ("q", "k", "v", "a", "b")}
    want_out, want_state = gdn_decode(**step, state=inputs["state"], A_log=inputs["A_log"],
                                      dt_bias=inputs["dt_bias"], scale=inputs["scale"])
    torch.testing.assert_close(out, want_out, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(state, want_state, rtol=1e-12, atol=1e-12)


def test_run_gives_the_definitions_dtypes_and_leaves_inputs_alone():
    inputs = model_like_inputs([5, 0, 7], torch.Generator().manual_seed(SEED), "cpu")
    before = {n: t.clone() for n, t in inputs.items() if isinstance(t, torch.Tensor)}
    out, state = run(*inputs.values())
    assert out.dtype == torch.bfloat16 and out.shape == (12, 8, 128)
    assert state.dtype == torch.float32 and state.shape == (3, 8, 128, 128)
    assert all(torch.equal(inputs[n], t) for n, t in before.items())
    want_out, want_state = gdn_prefill(**inputs)
    assert ((out.double() - want_out).abs() <= 2**-7 * want_out.abs() + 1e-5).all()
    assert ((state.double() - want_state).norm() / want_state.norm()) < 1e-5


def test_reference_text_is_self_contained():
    """The file is the Definition's reference: it may import only math and torch."""
    from gdn_bench.definitions.prefill import reference as reference_prefill

    tree = ast.parse(open(reference_prefill.__file__, encoding="utf-8").read())
    roots = {alias.name.split(".")[0]
             for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert roots <= {"math", "torch"}

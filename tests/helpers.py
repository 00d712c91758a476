"""What the tests share (test modules import it from here, never from each other or from
conftest): the checkout and run settings, the decode call's arguments, inputs drawn in every
gate regime, the float64 check of one call, valid and bad arguments of either definition's
call, and the import check."""

import ast
import os
from pathlib import Path

import torch

from gdn_bench.definitions.decode.definition import DECODE
from gdn_bench.definitions.decode.reference import gdn_decode
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.definitions.prefill.mix import model_like_inputs
from gdn_bench.shapes import HEAD_SIZE, NUM_Q_HEADS, NUM_V_HEADS, output_scale
from gdn_bench.signature import dps_arguments, tensor_inputs

_DECODE, _PREFILL = DECODE.build_definition(), PREFILL.build_definition()
CALL_ORDER = dps_arguments(_DECODE)
TENSOR_ARGS = tuple(tensor_inputs(_DECODE) + list(_DECODE.outputs))
PREFILL_TENSOR_ARGS = tuple(tensor_inputs(_PREFILL) + list(_PREFILL.outputs))
ROOT = Path(__file__).resolve().parent.parent  # the checkout under test (conftest makes it the project)
DEVICE = os.environ.get("GDN_TEST_DEVICE", "cpu")  # conftest: Triton's interpreter unless "cuda"
SEED = int(os.environ["GDN_TEST_SEED"])  # set by conftest: fresh per run unless given
ALLOWED_THIRD_PARTY = {"torch", "triton"}  # what a submission may import besides the standard library
KERNEL_PATH = ROOT / "solution" / "triton" / "kernel.py"
TMA_PATH = KERNEL_PATH.parent / "kernel_tma.py"
HQ, HV, D = NUM_Q_HEADS, NUM_V_HEADS, HEAD_SIZE
# bf16 rounding of the output: round-to-nearest on a GPU (half an ulp, 2^-8 relative);
# Triton's interpreter truncates float32 -> bfloat16 instead (up to a whole ulp, 2^-7).
BF16_REL = 2.0**-7 if os.environ.get("TRITON_INTERPRET") == "1" else 2.0**-8
# Gate regimes a batch row can be drawn from (see draw_inputs).
REGIMES = ("typical", "softplus_large", "softplus_negative", "beta_saturated")


def draw_inputs(batch: int, gen: torch.Generator, device: str, with_state: bool = True) -> dict:
    """Fresh random inputs; batch row i uses gate regime REGIMES[i % 4]:
    typical (randn gates), softplus_large (a + dt_bias in 20..80), softplus_negative
    (a + dt_bias in -80..-20), beta_saturated (|b| in 20..60). A_log spans -6..3."""

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    def uniform(lo, hi, *shape):
        return lo + (hi - lo) * torch.rand(*shape, generator=gen)

    A_log = uniform(-6.0, 3.0, HV)
    A_log[0], A_log[-1] = -6.0, 3.0
    dt_bias = randn(HV)
    a = randn(batch, 1, HV)
    b = randn(batch, 1, HV)
    for row in range(batch):
        regime = REGIMES[row % len(REGIMES)]
        if regime == "softplus_large":
            a[row] = uniform(20.0, 60.0, 1, HV) - dt_bias
        elif regime == "softplus_negative":
            a[row] = uniform(-60.0, -20.0, 1, HV) - dt_bias
        elif regime == "beta_saturated":
            b[row] = uniform(20.0, 60.0, 1, HV) * torch.where(torch.rand(1, HV, generator=gen) < 0.5, -1.0, 1.0)
    inputs = dict(
        q=randn(batch, 1, HQ, D).bfloat16(),
        k=randn(batch, 1, HQ, D).bfloat16(),
        v=randn(batch, 1, HV, D).bfloat16(),
        state=randn(batch, HV, D, D) if with_state else None,
        A_log=A_log,
        a=a.bfloat16(),
        dt_bias=dt_bias,
        b=b.bfloat16(),
    )
    return {n: (t.to(device) if t is not None else None) for n, t in inputs.items()}


def poisoned_outputs(batch: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """output and new_state filled with NaN, so unwritten elements show."""
    output = torch.full((batch, 1, HV, D), float("nan"), dtype=torch.bfloat16, device=device)
    new_state = torch.full((batch, HV, D, D), float("nan"), dtype=torch.float32, device=device)
    return output, new_state


def check_against_float64(inputs: dict, scale, output: torch.Tensor, new_state: torch.Tensor, what: str) -> None:
    """Assert: every element written; new_state normwise relative error < 1e-5; output within
    bf16 rounding of the float64 reference (BF16_REL relative, plus float32 accumulation slack)."""
    assert torch.isfinite(output).all(), f"{what}: output has unwritten/non-finite elements"
    assert torch.isfinite(new_state).all(), f"{what}: new_state has unwritten/non-finite elements"
    cpu = {n: (t.cpu() if t is not None else None) for n, t in inputs.items()}
    ref_out, ref_state = gdn_decode(**cpu, scale=scale, compute_dtype=torch.float64)
    got_state = new_state.cpu().double()
    rel = ((got_state - ref_state).norm() / ref_state.norm().clamp_min(1e-300)).item()
    assert rel < 1e-5, f"{what}: new_state normwise relative error {rel:.3e}"
    s = output_scale(scale)
    q_h = cpu["q"][:, 0].double().repeat_interleave(HV // HQ, dim=1)
    magnitude = s * torch.einsum("bhvk,bhk->bhv", ref_state.abs(), q_h.abs())
    bound = BF16_REL * ref_out.abs() + 1e-5 * magnitude + 1e-30
    err = (output.cpu()[:, 0].double() - ref_out).abs()
    worst = (err / bound).max().item()
    assert worst <= 1.0, f"{what}: output error {err.max().item():.3e} exceeds bf16 rounding (ratio {worst:.2f})"


def run_and_check(call, inputs: dict, outputs: tuple, check, what: str, in_place: bool = False):
    """call(output, new_state) on NaN-poisoned `outputs` (new_state is the input state itself
    if in_place), then check(inputs as given, output, new_state, what); an input state not
    updated in place must come back unchanged. Returns (output, new_state)."""
    original_state = None if inputs["state"] is None else inputs["state"].clone()
    output, new_state = outputs
    if in_place:
        new_state = inputs["state"]
    call(output, new_state)
    if output.is_cuda:
        torch.cuda.synchronize()
    check(dict(inputs, state=original_state), output, new_state, what)
    if original_state is not None and not in_place:
        assert torch.equal(inputs["state"], original_state), f"{what}: the input state was modified"
    return output, new_state


def call_and_check(fn, batch: int, with_state: bool, scale, seed: int, device: str, what: str,
                   in_place: bool = False) -> None:
    """Call fn(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state) positionally on
    fresh inputs through run_and_check, against check_against_float64."""
    inputs = draw_inputs(batch, torch.Generator().manual_seed(seed), device, with_state)

    def call(output, new_state):
        args = dict(inputs, scale=scale, output=output, new_state=new_state)
        fn(*(args[n] for n in CALL_ORDER))

    def check(given, output, new_state, what):
        check_against_float64(given, scale, output, new_state, what)

    run_and_check(call, inputs, poisoned_outputs(batch, device), check,
                  f"{what} B={batch} state={with_state} scale={scale} seed={seed}", in_place)


def kernel_args(device: str, batch: int = 2) -> dict:
    """A valid destination-passing decode call's arguments by name (seed 0, scale None)."""
    inputs = draw_inputs(batch, torch.Generator().manual_seed(0), device)
    output, new_state = poisoned_outputs(batch, device)
    return dict(inputs, scale=None, output=output, new_state=new_state)


def prefill_kernel_args(device: str, lengths=(3, 0, 4)) -> dict:
    """A valid destination-passing prefill call's arguments by name: model-like inputs
    (seed 0) for sequences of these lengths, scale None, NaN-filled outputs."""
    inputs = model_like_inputs(list(lengths), torch.Generator(device=device).manual_seed(0), device)
    output = torch.full((sum(lengths), HV, D), float("nan"), dtype=torch.bfloat16, device=device)
    new_state = torch.full((len(lengths), HV, D, D), float("nan"), dtype=torch.float32, device=device)
    return dict(inputs, scale=None, output=output, new_state=new_state)


def wrong_shape(t: torch.Tensor) -> torch.Tensor:
    """One element short (or, for a last axis of 1, doubled) in the last axis."""
    return t[..., :-1].contiguous() if t.shape[-1] > 1 else t.repeat(*([1] * (t.dim() - 1)), 2)


def wrong_dtype(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float16)


def non_contiguous(t: torch.Tensor) -> torch.Tensor:
    """The same shape and dtype, every other element of a tensor twice as wide."""
    wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
    return wide[..., ::2]


def imported_roots(path: Path):
    """The top-level package of every absolute import in a Python file. A relative import
    must name a file beside it (`from .shared import x`, `from . import shared`): one that is
    packed with it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            siblings = [node.module] if node.module else [alias.name for alias in node.names]
            assert node.level == 1 and all((path.parent / f"{name}.py").is_file() for name in siblings), \
                f"{path.name}: {ast.unparse(node)} does not import a file beside it"

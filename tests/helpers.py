"""What the tests share (test modules import it from here, never from each other or from
conftest): the checkout and run settings, either definition's call (decode's or prefill's):
inputs drawn in every gate regime, the scale kinds, the float64 check of one call and the call
checked against it, valid and bad arguments; and the import check."""

import ast
import math
import os
import random
from pathlib import Path

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gdn_bench.checking import worst_margin
from gdn_bench.definitions.decode.definition import DECODE
from gdn_bench.definitions.decode.reference import gdn_decode
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.definitions.prefill.mix import cu_seqlens_of, model_like_inputs, stressed
from gdn_bench.definitions.prefill.reference import gdn_prefill
from gdn_bench.shapes import HEAD_SIZE, NUM_Q_HEADS, NUM_V_HEADS, output_scale
from gdn_bench.signature import dps_arguments, tensor_inputs

_DECODE, _PREFILL = DECODE.build_definition(), PREFILL.build_definition()
CALL_ORDER = dps_arguments(_DECODE)
PREFILL_CALL_ORDER = dps_arguments(_PREFILL)
TENSOR_ARGS = tuple(tensor_inputs(_DECODE) + list(_DECODE.outputs))
PREFILL_TENSOR_ARGS = tuple(tensor_inputs(_PREFILL) + list(_PREFILL.outputs))
ROOT = Path(__file__).resolve().parent.parent  # the checkout under test (conftest makes it the project)
DEVICE = os.environ.get("GDN_TEST_DEVICE", "cpu")  # conftest: Triton's interpreter unless "cuda"
SEED = int(os.environ["GDN_TEST_SEED"])  # set by conftest: fresh per run unless given
# The Hopper kernels are Gluon for sm_90: they run only on such a GPU (not in the interpreter).
ON_HOPPER = DEVICE != "cpu" and torch.cuda.get_device_capability()[0] == 9
HOPPER_ONLY = "the Hopper pass is Gluon for sm_90 (no interpreter)"
ALLOWED_THIRD_PARTY = {"torch", "triton"}  # what a submission may import besides the standard library
KERNEL_PATH = ROOT / "solution" / "triton" / "kernel.py"
TMA_PATH = KERNEL_PATH.parent / "kernel_tma.py"
HQ, HV, D = NUM_Q_HEADS, NUM_V_HEADS, HEAD_SIZE
# bf16 rounding of the output: round-to-nearest on a GPU (half an ulp, 2^-8 relative);
# Triton's interpreter truncates float32 -> bfloat16 instead (up to a whole ulp, 2^-7).
BF16_REL = 2.0**-7 if os.environ.get("TRITON_INTERPRET") == "1" else 2.0**-8
# Gate regimes a sequence (a decode row: DECODE_REGIMES, one token has no keys to repeat) can
# be drawn from (see draw_inputs).
REGIMES = ("typical", "softplus_large", "softplus_negative", "beta_saturated", "repeated_keys")
DECODE_REGIMES = REGIMES[:4]
SCALE_KINDS = ("none", "zero", "float", "tensor", "numpy")  # see make_scale


def draw_inputs(lengths, gen: torch.Generator, device: str, with_state: bool = True, first_regime: int = 0,
                stress: str | None = None) -> dict:
    """Fresh random inputs of a call, by argument name. `lengths`: an int B for decode's B rows
    of one token (q, k [B, 1, 4, 128], v [B, 1, 8, 128], a, b [B, 1, 8]), or prefill's sequence
    lengths (q, k [T, 4, 128], v [T, 8, 128], a, b [T, 8], then cu_seqlens [N + 1]); state
    [N, 8, 128, 128] (None unless with_state) for its N rows or sequences.

    q, v and state are N(0, 1), A_log spans -6..3 (both ends drawn); keys are N(0, 1) for
    decode and unit-norm for prefill (as the model gives them). Row or sequence n uses gate
    regime REGIMES[(first_regime + n) % 5] for all its tokens (decode: DECODE_REGIMES, % 4):
    typical (N(0, 1) gates), softplus_large (a + dt_bias in 20..60, strong decay),
    softplus_negative (in -60..-20, no decay), beta_saturated (|b| in 20..60), repeated_keys
    (its tokens share two keys, the worst case for the triangular solve). `stress` (prefill,
    one of gdn_bench's STRESS) instead draws every sequence typical and then puts the call
    under that regime (stressed: weak decay, repeated keys with beta ~ 1, or keys off the unit
    sphere)."""
    decode = isinstance(lengths, int)
    lengths, regimes = ([1] * lengths, DECODE_REGIMES) if decode else (list(lengths), REGIMES)
    total, count = sum(lengths), len(lengths)

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    def uniform(lo, hi, *shape):
        return lo + (hi - lo) * torch.rand(*shape, generator=gen)

    k = randn(total, HQ, D)
    A_log = uniform(-6.0, 3.0, HV)
    A_log[0], A_log[-1] = -6.0, 3.0
    dt_bias = randn(HV)
    a, b = randn(total, HV), randn(total, HV)
    start = 0
    for n, length in enumerate(lengths):
        rows = slice(start, start + length)
        regime = regimes[(first_regime + n) % len(regimes)] if stress is None else "typical"
        if regime == "softplus_large":
            a[rows] = uniform(20.0, 60.0, length, HV) - dt_bias
        elif regime == "softplus_negative":
            a[rows] = uniform(-60.0, -20.0, length, HV) - dt_bias
        elif regime == "beta_saturated":
            b[rows] = uniform(20.0, 60.0, length, HV) * torch.where(torch.rand(length, HV, generator=gen) < 0.5, -1, 1)
        elif regime == "repeated_keys" and length:
            k[rows] = randn(2, HQ, D)[torch.randint(0, 2, (length,), generator=gen)]
        start += length
    inputs = dict(
        q=randn(total, HQ, D).bfloat16(), k=(k if decode else k / k.norm(dim=-1, keepdim=True)).bfloat16(),
        v=randn(total, HV, D).bfloat16(), state=randn(count, HV, D, D) if with_state else None,
        A_log=A_log, a=a.bfloat16(), dt_bias=dt_bias, b=b.bfloat16(),
    )
    if decode:  # one token per row: [B, ...] -> [B, 1, ...]
        inputs.update({name: inputs[name].unsqueeze(1) for name in ("q", "k", "v", "a", "b")})
    else:
        inputs["cu_seqlens"] = cu_seqlens_of(lengths)
    if stress is not None:
        inputs = stressed(inputs, stress, gen)
    return {name: (t.to(device) if t is not None else None) for name, t in inputs.items()}


def make_scale(kind: str, seed: int, device: str):
    """A scale of kind `kind` (SCALE_KINDS): None and 0.0 (both mean 1/sqrt(128)), or a value
    in 0.05..0.25 drawn from `seed` as a Python float, a one-element tensor on `device` or a
    numpy float."""
    value = 0.05 + 0.2 * random.Random(seed).random()
    return {"none": None, "zero": 0.0, "float": value, "tensor": torch.tensor(value, device=device),
            "numpy": np.float32(value)}[kind]


def poisoned_outputs(lengths, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """output and new_state of a call (`lengths` as draw_inputs takes it) filled with NaN, so
    unwritten elements show."""
    tokens, count = ((lengths, 1), lengths) if isinstance(lengths, int) else ((sum(lengths),), len(lengths))
    output = torch.full((*tokens, HV, D), float("nan"), dtype=torch.bfloat16, device=device)
    new_state = torch.full((count, HV, D, D), float("nan"), dtype=torch.float32, device=device)
    return output, new_state


# Prefill's kernels take float16 operands on the tensor cores, and Triton's interpreter computes
# a float16 product exactly as they do (operands rounded to float16, products summed in
# float32), so the CPU checks the same precision as a GPU: new_state within STATE_TOL
# (normwise relative, per sequence) of the float64 reference, and the output within the
# contest's tolerance (worst margin <= MARGIN, |err| <= max(atol, rtol |ref|), 1e-2 each)
# against float64 and against the definition's float32 reference. The interpreter truncates
# float32 to bfloat16 where a GPU rounds to nearest (up to a whole unit in the last place
# instead of half of one): on the CPU the margin leaves that extra half unit out
# (truncation_slack).
STATE_TOL = 3e-3
MARGIN = 1.0


def truncation_slack(got: torch.Tensor) -> torch.Tensor:
    """Half a bfloat16 unit in the last place of each element of `got` (float64) in Triton's
    interpreter, which truncates to bfloat16 (a GPU rounds, so 0 there)."""
    if DEVICE != "cpu":
        return torch.zeros_like(got)
    _, exponent = torch.frexp(got)  # |got| = m 2^e, m in [1/2, 1): a bfloat16 unit is 2^(e - 8)
    return torch.ldexp(torch.ones_like(got), exponent - 9)


def margin(got: torch.Tensor, want: torch.Tensor) -> float:
    """worst_margin of got against want, less the interpreter's truncation (truncation_slack)."""
    slack = truncation_slack(got)
    return worst_margin(got - torch.sign(got - want) * torch.minimum(slack, (got - want).abs()), want)


def check_against_float64(inputs: dict, scale, output: torch.Tensor, new_state: torch.Tensor, what: str) -> None:
    """Assert every element written, then the definition's check against its float64
    reference: prefill's where `inputs` hold cu_seqlens (_check_prefill), else decode's
    (_check_decode)."""
    assert torch.isfinite(output).all(), f"{what}: output has unwritten or non-finite elements"
    assert torch.isfinite(new_state).all(), f"{what}: new_state has unwritten or non-finite elements"
    cpu = {n: (t.cpu() if isinstance(t, torch.Tensor) else t) for n, t in inputs.items()}
    (_check_prefill if "cu_seqlens" in cpu else _check_decode)(cpu, scale, output.cpu(), new_state.cpu().double(),
                                                              what)


def _check_decode(cpu: dict, scale, output: torch.Tensor, got_state: torch.Tensor, what: str) -> None:
    """new_state normwise relative error < 1e-5; output within bf16 rounding of the float64
    reference (BF16_REL relative, plus float32 accumulation slack)."""
    ref_out, ref_state = gdn_decode(**cpu, scale=scale, compute_dtype=torch.float64)
    rel = ((got_state - ref_state).norm() / ref_state.norm().clamp_min(1e-300)).item()
    assert rel < 1e-5, f"{what}: new_state normwise relative error {rel:.3e}"
    s = output_scale(scale)
    q_h = cpu["q"][:, 0].double().repeat_interleave(HV // HQ, dim=1)
    magnitude = s * torch.einsum("bhvk,bhk->bhv", ref_state.abs(), q_h.abs())
    bound = BF16_REL * ref_out.abs() + 1e-5 * magnitude + 1e-30
    err = (output[:, 0].double() - ref_out).abs()
    worst = (err / bound).max().item()
    assert worst <= 1.0, f"{what}: output error {err.max().item():.3e} exceeds bf16 rounding (ratio {worst:.2f})"


def _check_prefill(cpu: dict, scale, output: torch.Tensor, got_state: torch.Tensor, what: str) -> None:
    """Per sequence, new_state within STATE_TOL (normwise) of the float64 reference and exactly
    zero for an empty sequence; the output within MARGIN of the contest's tolerance against
    float64 and against the definition's float32 reference."""
    ref_out, ref_state = gdn_prefill(**cpu, scale=output_scale(scale), compute_dtype=torch.float64)
    lengths = cpu["cu_seqlens"].diff().tolist()
    for n, length in enumerate(lengths):
        if length == 0:
            assert (got_state[n] == 0).all(), f"{what}: empty sequence {n} must end with a zero state"
            continue
        err = ((got_state[n] - ref_state[n]).norm() / ref_state[n].norm().clamp_min(1e-300)).item()
        assert err < STATE_TOL, f"{what}: sequence {n} (length {length}) new_state relative error {err:.3e}"
    got_out = output.double()
    if not ref_out.numel():
        return
    exact = margin(got_out, ref_out)
    assert exact <= MARGIN, f"{what}: output worst margin {exact:.3f} against float64"
    contest = margin(got_out, gdn_prefill(**cpu, scale=output_scale(scale), compute_dtype=torch.float32)[0]
                           .to(torch.bfloat16).double())
    assert contest <= MARGIN, f"{what}: fails the contest's check (worst margin {contest:.3f})"


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


def call_and_check(fn, lengths, with_state: bool, scale, seed: int, device: str, what: str, in_place: bool = False,
                   first_regime: int = 0, stress: str | None = None):
    """Call fn positionally in its definition's order (decode's CALL_ORDER for an int `lengths`,
    else PREFILL_CALL_ORDER) on fresh inputs (draw_inputs(lengths, ...) from `seed`) through
    run_and_check, against check_against_float64. `scale`: the call's scale, or a kind of
    SCALE_KINDS (make_scale draws it from `seed`). Returns (output, new_state)."""
    inputs = draw_inputs(lengths, torch.Generator().manual_seed(seed), device, with_state, first_regime, stress)
    value = make_scale(scale, seed, device) if isinstance(scale, str) else scale
    order = CALL_ORDER if isinstance(lengths, int) else PREFILL_CALL_ORDER

    def call(output, new_state):
        args = dict(inputs, scale=value, output=output, new_state=new_state)
        fn(*(args[n] for n in order))

    def check(given, output, new_state, what):
        check_against_float64(given, value, output, new_state, what)

    shown = f"B={lengths}" if isinstance(lengths, int) else f"lengths={lengths}"
    return run_and_check(call, inputs, poisoned_outputs(lengths, device), check,
                         f"{what} {shown} state={with_state} scale={scale} seed={seed}", in_place)


def kernel_args(device: str, batch: int = 2) -> dict:
    """A valid destination-passing decode call's arguments by name (seed 0, scale None)."""
    inputs = draw_inputs(batch, torch.Generator().manual_seed(0), device)
    output, new_state = poisoned_outputs(batch, device)
    return dict(inputs, scale=None, output=output, new_state=new_state)


def prefill_kernel_args(device: str, lengths=(3, 0, 4)) -> dict:
    """A valid destination-passing prefill call's arguments by name: model-like inputs
    (seed 0) for sequences of these lengths, scale None, NaN-filled outputs."""
    inputs = model_like_inputs(list(lengths), torch.Generator(device=device).manual_seed(0), device)
    output, new_state = poisoned_outputs(list(lengths), device)
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


# Launch counts on CPU (tests/test_run_estimate.py, tests/test_official_cli.py): every op but views.
LAUNCHLESS_VIEWS = {"view", "_unsafe_view", "select", "slice", "unsqueeze", "transpose", "t", "expand",
                    "as_strided", "detach", "alias", "squeeze", "permute", "_reshape_alias", "lift_fresh", "reshape"}


class Launches(TorchDispatchMode):
    """Counts the ops that launch a kernel on a GPU (views launch none)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func.overloadpacket.__name__ not in LAUNCHLESS_VIEWS
        return func(*args, **(kwargs or {}))


def mtp_inputs(batch, steps, pool):
    """One mtp call's inputs (B, T, pool slots), seeded, on CPU, the buffer included."""
    gen = torch.Generator().manual_seed(0)

    def rand(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, generator=gen).to(dtype)

    return [rand(batch, steps, 4, 128), rand(batch, steps, 4, 128), rand(batch, steps, 8, 128),
            rand(pool, 8, 128, 128, dtype=torch.float32), torch.randperm(pool, generator=gen)[:batch].to(torch.int32),
            rand(8, dtype=torch.float32), rand(batch, steps, 8), rand(8, dtype=torch.float32), rand(batch, steps, 8),
            1 / math.sqrt(128), torch.zeros(pool, steps, 8, 128, 128)]


def counted_launches(run, inputs) -> int:
    """How many ops of run(*inputs) would launch a kernel on a GPU."""
    with Launches() as launches:
        run(*inputs)
    return launches.count

"""The prefill submission's stages one by one (solution/triton/prefill_*.py): the triangular
inverse against torch.linalg.inv in float64, the prep's tiles against their float64
definitions, the host's and the device's span plans agreeing, the fused path (no spans: one
program walks a whole sequence) against the float64 reference on its own, and the rule that
picks the path on the shapes it was measured on."""

import importlib
import random

import pytest
import torch
import triton
import triton.language as tl

from gdn_bench.algos import load_solution_file
from gdn_bench.checking import worst_margin
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.definitions.prefill.mix import contest_mix_plan, cu_seqlens_of, model_like_inputs
from gdn_bench.definitions.prefill.reference import gdn_prefill
from gdn_bench.shapes import HEAD_SIZE as D
from gdn_bench.shapes import NUM_Q_HEADS as HQ
from gdn_bench.shapes import NUM_V_HEADS as HV
from helpers import DEVICE, HOPPER_ONLY, ON_HOPPER, SEED

sub = load_solution_file(PREFILL.submission_entry(), "gdn_prefill_stages")
prep = importlib.import_module("gdn_prefill_stages.prefill_prep")
spans = importlib.import_module("gdn_prefill_stages.prefill_spans")
order = importlib.import_module("gdn_prefill_stages.prefill_order")
common = importlib.import_module("gdn_prefill_stages.prefill_common")
shared = importlib.import_module("gdn_prefill_stages.shared")
C = sub.CHUNK


@triton.jit
def _inverse_kernel(a_ptr, out_ptr, C: tl.constexpr, LOG_C: tl.constexpr):
    i = tl.arange(0, C)
    square = i[:, None] * C + i[None, :]
    tl.store(out_ptr + square, prep.unit_lower_inverse(tl.load(a_ptr + square), C, LOG_C))


def _gate_like_lower(gen: torch.Generator, repeated: bool) -> torch.Tensor:
    """A strictly lower [C, C] matrix as the prep builds it: beta_i exp(G_i - G_j) k_i . k_j, unit
    keys (all one key repeated, with beta near 1, when `repeated`: the hardest case)."""
    k = torch.nn.functional.normalize(torch.randn(C, D, generator=gen, dtype=torch.float64), dim=-1)
    if repeated:
        k = k[:1].expand(C, D)
    beta = torch.sigmoid(torch.randn(C, generator=gen, dtype=torch.float64) + (6.0 if repeated else 0.0))
    G = torch.cumsum(-0.05 * torch.rand(C, generator=gen, dtype=torch.float64), 0)
    decay = torch.exp(G[:, None] - G[None, :])
    return torch.tril(beta[:, None] * decay * (k @ k.T), diagonal=-1)


@pytest.mark.parametrize("repeated", (False, True), ids=("random keys", "repeated keys"))
def test_the_inverse_matches_float64(repeated):
    """unit_lower_inverse(A) = (I + A)^-1 within float16 operands' rounding (relative to the
    inverse's largest entry; its float64 simulation gave 9.1e-4 at worst, docs/perf.md item 19)."""
    gen = torch.Generator().manual_seed(SEED + repeated)
    A = _gate_like_lower(gen, repeated)
    out = torch.full((C, C), float("nan"), device=DEVICE)
    _inverse_kernel[(1,)](A.float().to(DEVICE), out, C=C, LOG_C=C.bit_length() - 1)
    want = torch.linalg.inv(torch.eye(C, dtype=torch.float64) + A)
    error = (out.cpu().double() - want).abs().max() / want.abs().max()
    assert error < 2e-3, float(error)


@pytest.mark.parametrize("single", (True, False), ids=("one-sequence kernel", "several-sequence kernel"))
def test_the_prep_writes_its_definitions(single):
    """One sequence of two blocks, the prep alone: Tb = (I + A)^-1 diag(beta), M = scale
    exp(G_i - G_j) q_i . k_j (j <= i), the gate rows and the float16 copies of k and q, per
    block and value head, against float64 (the tiles are float16: 2e-3 of their largest entry).
    The several-sequence kernel (SINGLE false) finds both blocks inside one sequence
    (_segment_edges) and must write the same."""
    lengths = [2 * C - 7]
    inputs = model_like_inputs(lengths, torch.Generator(device=DEVICE).manual_seed(SEED + 3), DEVICE)
    q, k, v, state, A_log, a, dt_bias, b, cu = (inputs[n] for n in ("q", "k", "v", "state", "A_log", "a", "dt_bias",
                                                                     "b", "cu_seqlens"))
    total, blocks, scale = lengths[0], 2, D ** -0.5
    slots, size = sub._scratch_layout(blocks, 1, 1)
    s = sub._scratch_views(torch.empty(size, dtype=torch.uint8, device=DEVICE), slots)
    output = torch.empty(total, HV, D, dtype=torch.bfloat16, device=DEVICE)
    sub.chunk_prep_kernel[(blocks, HV)](
        q, k, A_log, a, dt_bias, b, cu, s["tb"], s["m"], s["gates"], s["k16"], s["q16"], s["flag"], s["order"], output,
        scale, A_log, total, 1, SINGLE=single, ORDERED=False, SCALE_FROM_PTR=False, WIDEN_BF16=DEVICE == "cpu",
        IDX=tl.int32, HQ=HQ, HV=HV, D=D, C=C, LOG_C=C.bit_length() - 1, BN=64)
    assert float(s["flag"][0]) == 0.0
    for block in range(blocks):
        rows = torch.arange(block * C, min(block * C + C, total))
        n = len(rows)
        for head in range(HV):
            kh = k[rows, head // (HV // HQ)].double().cpu()
            qh = q[rows, head // (HV // HQ)].double().cpu()
            x = (a[rows, head].double() + dt_bias[head].double()).cpu()
            g = -torch.exp(A_log[head].double().cpu()) * torch.nn.functional.softplus(x)
            beta = torch.sigmoid(b[rows, head].double().cpu())
            G = torch.cumsum(g, 0)
            decay = torch.tril(torch.exp(G[:, None] - G[None, :]))
            A = torch.tril(beta[:, None] * decay * (kh @ kh.T), diagonal=-1)
            want = {"tb": torch.linalg.inv(torch.eye(n, dtype=torch.float64) + A) * beta[None, :],
                    "m": scale * decay * (qh @ kh.T)}
            slot = block * HV + head
            for name, tile in want.items():
                got = s[name].view(blocks, HV, C, C)[block, head, :n, :n].double().cpu()
                assert (got - tile).abs().max() <= 2e-3 * tile.abs().max(), (name, block, head)
            gates = s["gates"].view(blocks * HV, prep.GATE_ROWS.value, C)[slot, :, :n].double().cpu()
            rows_want = torch.stack([torch.exp(G), scale * torch.exp(G), torch.exp(G[-1] - G), torch.exp(G[-1]).expand(n)])
            torch.testing.assert_close(gates, rows_want, rtol=1e-5, atol=1e-7)
        for name, source in (("k16", k), ("q16", q)):
            copy = s[name].view(blocks, HQ, C, D)[block, :, :n].cpu()
            assert torch.equal(copy, source[rows].transpose(0, 1).to(torch.float16).cpu()), name


@triton.jit
def _segment_edges_kernel(cu_ptr, first_ptr, last_ptr, N, C: tl.constexpr, BN: tl.constexpr):
    block = tl.program_id(0)
    _, ends, _, _ = common.cu_seqlens_load(cu_ptr, N, BN)
    first, last = prep._segment_edges(ends, cu_ptr, N, block * C, C, BN)
    rows = block * C + tl.arange(0, C)
    tl.store(first_ptr + rows, first)
    tl.store(last_ptr + rows, last)


@pytest.mark.parametrize("num_seqs", (5, 90, 150), ids=("few sequences", "more ends than one load", "three loads"))
def test_segment_edges_find_each_rows_segment(num_seqs):
    """_segment_edges (the prep's segments, without a branch): for every row of every block, the
    first and last rows of its sequence's part of the block, against the host, on random
    lengths with empty sequences, boundaries on and off block edges, and more cu_seqlens
    entries than the BN the kernel loads at its start."""
    rng = random.Random(SEED + 11 + num_seqs)
    lengths = [rng.choice((0, C, 2 * C, rng.randrange(1, 3 * C))) for _ in range(num_seqs)]
    total = sum(lengths)
    cu = cu_seqlens_of(lengths, DEVICE)
    blocks = triton.cdiv(total, C)
    first = torch.full((blocks * C,), -1, dtype=torch.int32, device=DEVICE)
    last = torch.full((blocks * C,), -1, dtype=torch.int32, device=DEVICE)
    _segment_edges_kernel[(blocks,)](cu, first, last, num_seqs, C=C, BN=64)
    ends = cu.tolist()
    want_first, want_last = [], []
    for row in range(blocks * C):
        start = row - row % C
        want_first.append(max([e for e in ends if start <= e <= row], default=start) - start)
        want_last.append(min([e for e in ends if row < e < start + C], default=start + C) - 1 - start)
    assert first.cpu().tolist() == want_first
    assert last.cpu().tolist() == want_last


@triton.jit
def _order_kernel(cu_ptr, order_ptr, N, T, C: tl.constexpr):
    order.write_longest_first(cu_ptr, order_ptr, tl.program_id(0), tl.num_programs(0), N, T, C)


def _longest_first(ends, total):
    """The order prefill_order defines, on the host: sequences by blocks touched (bounds
    clamped to 0 <= bos <= eos <= T as the kernels clamp them), most first, ties by index."""
    def blocks(n):
        bos = min(max(ends[n], 0), total)
        return spans.sequence_blocks_host(bos, min(max(ends[n + 1], bos), total), C)
    return sorted(range(len(ends) - 1), key=lambda n: (-blocks(n), n))


@pytest.mark.parametrize("num_seqs,programs", ((7, 1), (45, 2)), ids=("one tile", "several tiles and programs"))
def test_the_walks_take_the_longest_sequences_first(num_seqs, programs):
    """write_longest_first's order is the host's: random lengths with empty sequences and
    ties, more sequences than one tile (prefill_order.TILE) shared by several programs; and a
    malformed cu_seqlens still gives a permutation (every sequence is walked once)."""
    rng = random.Random(SEED + 13 + num_seqs)
    lengths = [rng.choice((0, C, rng.randrange(1, 5 * C))) for _ in range(num_seqs)]
    total = sum(lengths)
    malformed = torch.tensor([0, total, 3 * C] + [C] * (num_seqs - 2), device=DEVICE)
    for ends in (cu_seqlens_of(lengths, DEVICE), malformed):
        got = torch.full((num_seqs,), -1, dtype=torch.int32, device=DEVICE)
        _order_kernel[(programs,)](ends, got, num_seqs, total, C=C)
        assert got.tolist() == _longest_first(ends.tolist(), total), (lengths, ends.tolist())


@triton.jit
def _span_kernel(cu_ptr, out_ptr, T, S, J, C: tl.constexpr):
    seq = tl.program_id(0)
    span = tl.program_id(1)
    bos, eos, first, count, spans_n = spans.sequence_span(cu_ptr, seq, span, T, S, J, False, C)
    base = out_ptr + (seq * J + span) * 3
    tl.store(base, first)
    tl.store(base + 1, count)
    tl.store(base + 2, spans_n)


def test_host_and_device_span_plans_agree():
    """sequence_span on the device and sequence_span_host give the same cut for random
    sequences and plans (S, J), including empty sequences and sequences longer than J spans."""
    rng = random.Random(SEED + 7)
    for _ in range(6):
        lengths = [0 if rng.random() < 0.2 else rng.randint(1, 700) for _ in range(rng.randint(1, 6))]
        S, J = rng.randint(1, 5), rng.randint(1, 6)
        total = sum(lengths)
        cu = cu_seqlens_of(lengths, DEVICE)
        out = torch.full((len(lengths), J, 3), -1, dtype=torch.int64, device=DEVICE)
        _span_kernel[(len(lengths), J)](cu, out, total, S, J, C=C)
        ends = cu.tolist()
        for n in range(len(lengths)):
            for j in range(J):
                want = spans.sequence_span_host(ends[n], ends[n + 1], j, S, J, C)
                assert tuple(out[n, j].tolist()) == want, (lengths, S, J, n, j)


def test_the_span_plan_covers_every_block_once():
    """The host's cut, over each sequence's spans, covers its blocks once, in order, in at
    most J spans (J from span_plan)."""
    settings = spans.SpanSettings(min_tokens=1, min_blocks=2, most=16, pieces=64)
    for lengths in ([4096], [1, 8191], [2048] * 4, [300, 5, 0, 900]):
        S, J = spans.span_plan(sum(lengths), len(lengths), C, settings)
        bos = 0
        for length in lengths:
            first_block, covered = bos // C, []
            for j in range(J):
                first, count, _ = spans.sequence_span_host(bos, bos + length, j, S, J, C)
                covered += list(range(first, first + count))
            blocks = (bos + length - 1) // C - first_block + 1 if length else 0
            assert covered == list(range(first_block, first_block + blocks)), (lengths, length)
            bos += length


def test_the_fused_path_matches_float64(monkeypatch):
    """The fused path on its own (no spans: each program walks its whole sequence), on several
    sequences straddling blocks, one empty: outputs within the contest's tolerance and states
    close to the float64 reference."""
    monkeypatch.setattr(sub, "WALK_MAX_TOKENS", -1)
    monkeypatch.setattr(sub, "WALK_MAX_MEAN_LENGTH", -1)
    lengths = [70, 0, 135, 64]
    assert sub._plan(sum(lengths), len(lengths), sub.arch_key(torch.device(DEVICE))).spans == 1
    slack = 2.0 if DEVICE == "cpu" else 1.0  # the interpreter truncates to bfloat16 (a GPU rounds)
    _check_against_float64(lengths, SEED + 11, slack)


def _check_against_float64(lengths, seed, slack, odd_v=False):
    """One call of the submission on model-like `lengths` (outputs poisoned with NaN first):
    every element written, outputs within `slack` of the contest's tolerance and states within
    0.1 of it, against the float64 reference. odd_v: v passed as a contiguous view 2 bytes past
    a 16-byte boundary (_odd_view)."""
    inputs = model_like_inputs(lengths, torch.Generator(device=DEVICE).manual_seed(seed), DEVICE)
    if odd_v:
        inputs["v"] = _odd_view(inputs["v"])
    output = torch.full((sum(lengths), HV, D), float("nan"), dtype=torch.bfloat16, device=DEVICE)
    new_state = torch.full((len(lengths), HV, D, D), float("nan"), device=DEVICE)
    sub.kernel(*inputs.values(), output, new_state)
    want_out, want_state = gdn_prefill(*inputs.values(), compute_dtype=torch.float64)
    assert not output.isnan().any() and not new_state.isnan().any()
    assert worst_margin(output, want_out) <= slack
    assert worst_margin(new_state, want_state) <= 0.1


def _odd_view(t):
    """A contiguous copy of `t` whose first element lies 2 bytes past a 16-byte boundary (a view
    one element into a larger buffer): a legal argument that TMA cannot read."""
    view = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)[1:].view(t.shape)
    view.copy_(t)
    assert view.is_contiguous() and view.data_ptr() % 16 == 2
    return view


MIX_22 = next(list(lengths) for lengths in contest_mix_plan() if len(lengths) == 22)  # the kit's, measured


# Calls as measured (docs/perf.md items 19-20) -> the path the rule gives them: the token walk,
# the fused path (chunked, no spans) or spans.
MEASURED_PATHS = {
    "64": ([64], "walk"), "512×1": ([1] * 512, "walk"), "4×256": ([256] * 4, "fused"), "1×1024": ([1024], "fused"),
    "16×512": ([512] * 16, "fused"), "57 / 8192": ([144] * 41 + [143] * 16, "fused"),
    "40×70": ([70] * 40, "fused"), "1×2048": ([2048], "spans"), "1×8192": ([8192], "spans"), "1×16384": ([16384], "spans"),
    "[1, 8191]": ([1, 8191], "spans"), "4×2048": ([2048] * 4, "spans"),
}


@pytest.mark.parametrize("name", MEASURED_PATHS)
def test_the_rule_picks_the_measured_path(name):
    lengths, path = MEASURED_PATHS[name]
    plan = sub._plan(sum(lengths), len(lengths), "interpreter")
    got = "walk" if plan.walk is not None else "spans" if plan.spans > 1 else "fused"
    assert got == path, (name, plan)


@pytest.mark.parametrize("name", MEASURED_PATHS)
def test_the_hopper_kernels_replace_the_span_pass_and_summary_where_hopper_runs(name):
    """The state pass on Hopper is the Gluon pass (HOPPER_PASS_TABLE, measured faster on an H200:
    docs/perf.md items 26-27): chunked calls of at least HOPPER_PASS_MIN_PIECES (sequence, span)
    pieces and HOPPER_PASS_MIN_BLOCKS blocks on sm90, pooled or not, with spans or without;
    never for one or two sequences without spans, for short calls, on sm100 or in the
    interpreter. With spans the summary runs in Gluon with it (HOPPER_SUMMARY)."""
    lengths, path = MEASURED_PATHS[name]
    total, count = sum(lengths), len(lengths)
    plan = sub._plan(total, count, "sm90")
    want = path != "walk" and count * plan.spans > 2 and total > 32 * C
    assert (plan.hopper_pass is not None) == want, name
    assert plan.hopper_summary == (want and path == "spans"), name
    pooled = sub._new_call_plan(total, count, "sm90", True, True, False).plan  # pooled_prefill's
    assert (pooled.hopper_pass is not None) == want, name
    assert sub._plan(total, count, "sm100").hopper_pass is None
    assert sub._plan(total, count, "interpreter").hopper_pass is None


def test_the_hopper_pass_s_descriptors_describe_the_prep_s_tiles():
    """The TMA descriptors a Hopper call makes before its first launch (prefill._descriptors):
    over the scratch slots the prep writes, q16 right after k16 ([2 blocks HQ C, D] in [C, D]
    tiles) and M right after Tb ([2 blocks HV C, C] in [C, C] tiles), and over v [T, HV D] in
    [C, BV] tiles, each with the swizzle Gluon picks for its tile; the same as a launch through
    Triton makes over the scratch's views (_tensor_arguments); kept by the addresses they
    encode; None for a call without the Hopper pass."""
    gl = pytest.importorskip("triton.experimental.gluon.language")
    total, count = 8192, 16
    call = sub._new_call_plan(total, count, "sm90", True, False, False)
    bv = call.plan.hopper_pass.block_v
    buffer = torch.empty(call.scratch_bytes, dtype=torch.uint8)
    v = torch.empty(total, HV, D, dtype=torch.bfloat16)
    at = {slot.name: buffer.data_ptr() + slot.offset for slot in call.slots}
    blocks = total // C
    assert at["q16"] == at["k16"] + blocks * HQ * C * D * 2 and at["m"] == at["tb"] + blocks * HV * C * C * 2
    want = {"k16": ([2 * blocks * HQ * C, D], [C, D]), "tb": ([2 * blocks * HV * C, C], [C, C])}
    descriptors = sub._descriptors(call, buffer.data_ptr(), v)
    objects = [None] * len(sub._VALUES)
    objects[sub._VALUES.index("v")] = v
    through_triton = sub._tensor_arguments(objects, buffer, call, sub._DESCRIPTORS)
    for (name, (shape, block)), desc, viewed in zip(want.items(), descriptors, through_triton):
        for d in (desc, viewed):
            assert d.base.data_ptr() == at[name] and d.base.dtype == torch.float16, name
            assert list(d.shape) == shape and list(d.block_shape) == block and list(d.strides) == [shape[1], 1]
            assert d.layout == gl.NVMMASharedLayout.get_default_for(block, gl.float16), name
        assert isinstance(viewed.base, torch.Tensor), name
    v_desc = descriptors[-1]
    assert v_desc.base.data_ptr() == v.data_ptr() and list(v_desc.shape) == [total, HV * D]
    assert list(v_desc.block_shape) == [C, bv] and v_desc.layout == gl.NVMMASharedLayout.get_default_for([C, bv],
                                                                                                      gl.bfloat16)
    assert through_triton[-1].base is v
    assert sub._descriptors(call, buffer.data_ptr(), v) is descriptors  # kept
    other = torch.empty_like(v)
    assert sub._descriptors(call, buffer.data_ptr(), other)[-1].base.data_ptr() == other.data_ptr()
    assert sub._descriptors(call, buffer.data_ptr() + 256, v)[0].base.data_ptr() == at["k16"] + 256
    sm100 = sub._new_call_plan(total, count, "sm100", True, False, False)
    assert sub._descriptors(sm100, buffer.data_ptr(), v) == (None,) * 3
    assert sub._tensor_arguments(objects, buffer, sm100, sub._DESCRIPTORS) == [None] * 3


@pytest.mark.skipif(not ON_HOPPER, reason=HOPPER_ONLY)
@pytest.mark.parametrize("lengths", ([70, 0, 135, 64], [512] * 16, [100, 0, 900, 64, 3000], [64, 0, 0], [1024],
                                     [4096], [1, 8191], [300, 0, 5000, 3000]),
                         ids=("straddling", "16x512", "mixed", "empty at T", "one", "spans", "spans 1+8191",
                              "spans mixed"))
def test_the_hopper_pass_matches_float64(monkeypatch, lengths):
    """The Hopper pass (prefill_pass_hopper) on its own, against the float64 reference: every
    output and state written (poisoned before), within the contest's tolerance and close."""
    monkeypatch.setattr(sub, "WALK_MAX_TOKENS", -1)
    monkeypatch.setattr(sub, "WALK_MAX_MEAN_LENGTH", -1)
    monkeypatch.setattr(sub, "HOPPER_PASS_MIN_BLOCKS", 1)
    monkeypatch.setattr(sub, "HOPPER_PASS_MIN_PIECES", 1)
    assert sub._plan(sum(lengths), len(lengths), sub.arch_key(torch.device(DEVICE))).hopper_pass is not None
    _check_against_float64(lengths, SEED + 12, 0.5)


@pytest.mark.parametrize("lengths", ([512] * 16, [8192]), ids=("fused", "spans"))
def test_a_v_that_tma_cannot_read_takes_the_span_pass(lengths):
    """v at an address that is not a multiple of 16 bytes (_odd_view) is a legal argument, which
    the Hopper pass's TMA cannot read: a Hopper plan then runs the span pass (and, with spans,
    the span summary) for it, kernel() and pooled_prefill() alike, and the Hopper kernels for an
    aligned v (launches recorded, not run)."""
    args = dict(model_like_inputs(lengths, torch.Generator().manual_seed(0), "cpu"), scale=None)
    total, count = sum(lengths), len(lengths)
    output, new_state = torch.empty(total, HV, D, dtype=torch.bfloat16), torch.empty(count, HV, D, D)
    pool, slots = torch.zeros(count, HV, D, D), torch.arange(count, dtype=torch.int32)
    names = {}
    for v in (args["v"], _odd_view(args["v"])):
        with shared.planning_for((9, 0)), shared.recording_launches() as launches:
            sub.kernel(args["q"], args["k"], v, args["state"], args["A_log"], args["a"], args["dt_bias"], args["b"],
                       args["cu_seqlens"], None, output, new_state)
            sub.pooled_prefill(args["q"], args["k"], v, pool, slots, args["A_log"], args["a"], args["dt_bias"],
                               args["b"], args["cu_seqlens"], None, output)
        names[v.data_ptr() % 16 == 0] = {launch.fn.__name__ for launch in launches}
    assert "hopper_pass_kernel" in names[True] and "span_pass_kernel" not in names[True]
    assert "span_pass_kernel" in names[False] and not any("hopper" in name for name in names[False])


@pytest.mark.skipif(not ON_HOPPER, reason=HOPPER_ONLY)
@pytest.mark.parametrize("lengths", ([512] * 16, [1, 8191]), ids=("fused", "spans"))
def test_a_v_that_tma_cannot_read_matches_float64(lengths):
    """On Hopper, a call whose v lies off TMA's 16-byte alignment (_odd_view: the span pass runs
    it) against the float64 reference."""
    _check_against_float64(lengths, SEED + 13, 0.5, odd_v=True)


# Calls as measured on an H200 (docs/perf.md item 23) -> whether the walks take the sequences
# longest first under the Hopper plan: the kit's many-sequence mix and spans with sequences of
# unequal lengths, yes; one wave of pass programs or a short call, no.
MEASURED_ORDER = {
    "22 of the mix": (MIX_22, True), "[4484, 1239, 2469]": ([4484, 1239, 2469], True), "[1, 8191]": ([1, 8191], True),
    "57 / 8192": ([144] * 41 + [143] * 16, True), "16×512": ([512] * 16, False), "4×75": ([75] * 4, False),
    "4×256": ([256] * 4, False), "449+63×1": ([449] + [1] * 63, False), "1×8192": ([8192], False),
}


@pytest.mark.parametrize("name", MEASURED_ORDER)
def test_the_rule_orders_the_measured_calls(name):
    lengths, ordered = MEASURED_ORDER[name]
    assert sub._plan(sum(lengths), len(lengths), "sm90").ordered == ordered, name



@pytest.mark.parametrize("count, block", ((1, 16), (2, 16), (16, 16), (17, 32), (22, 32), (32, 32), (33, 64),
                                          (57, 64), (64, 64), (65, 64), (1000, 64)))
def test_the_prep_compares_a_power_of_two_of_entries_that_covers_the_sequences(count, block):
    """The prep compares each block's rows with BN entries of cu_seqlens at a time: the call's
    sequences rounded up to a power of two, at least 16 and at most 64 (more sequences: several
    steps), so that a call of few sequences compares few (measured faster: docs/perf.md item 27)
    and at most three variants compile."""
    steps = sub._call_plan(2 * count * C, count, "sm90", True, False, False).steps
    assert steps[0].launcher.fn is prep.chunk_prep_kernel
    assert dict(steps[0].constexprs)["BN"] == block


@pytest.mark.parametrize("arch", ("sm90", "sm100"))
def test_the_prep_launches_with_its_table_s_register_cap(arch):
    """The prep's launch carries PREP_TABLE's maxnreg as a compile option (Hopper: 168, three
    4-warp programs per multiprocessor, from 33 blocks; Blackwell: none), on one and on several
    sequences; a call of at most 32 blocks (no more than two programs per multiprocessor) runs
    uncapped."""
    capped = {"sm90": (("maxnreg", 168),), "sm100": ()}[arch]
    for lengths, cap in (([4096], capped), ([512] * 16, capped), ([1024], ()), ([256] * 4, ()), ([32 * C], ()),
                         ([32 * C + 1], capped)):
        steps = sub._call_plan(sum(lengths), len(lengths), arch, True, False, False).steps
        assert steps[0].launcher.fn is prep.chunk_prep_kernel
        assert steps[0].options == cap, lengths
        assert all(step.options == () for step in steps[1:])

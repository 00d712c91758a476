"""Gated Delta Net over T tokens per sequence from a state pool (speculative-decoding
verification), fused recurrent Triton kernel (K-last state).

Definition ``gdn_mtp_qk4_v8_d128_k_last`` (Qwen3-Next linear attention, TP=4). Batch row b
holds T tokens and starts from pool slot n = initial_state_indices[b]: S = initial_state[n]
(D_v x D_k per value head, K contiguous: "K-last"). For every token t in order and value
head h (query/key head hq = h // 2), with D = 128:

    g      = exp(-exp(A_log[h]) * softplus(a[b,t,h] + dt_bias[h]))      decay gate
    beta   = sigmoid(b[b,t,h])                                          update gate
    delta  = beta * (v[b,t,h] - g * (S @ k[b,t,hq]))                     (D_v,)
    S      = g * S + outer(delta, k[b,t,hq])
    out[b,t,h] = scale * (S @ q[b,t,hq])                                 (from the old S in one pass)
    intermediate_states_buffer[n, t, h] = S                             the state after token t

One program handles a BV-row tile of one (b, h) state: it reads the tile from the pool once,
keeps it in registers through the T tokens (decode's step, kernel.py, T times in a row) and
writes it into the buffer after each token; at small batch sizes it loads every token's inputs
before the first step (LAUNCH_TABLES' preload); where the buffer's states outgrow the L2
(STREAM_L2_FRACTION) it writes them with the streaming cache hint. ``scale`` of 0 or None means
1/sqrt(D).

Entry points (all take the pool [P, 8, 128, 128] f32 and the indices [B] int32 or int64):
  * ``kernel``: the definition's call (destination-passing). As its reference: a negative
    index counts from the end of the pool (n + P), the pool is not updated, and final_state
    receives a copy of it. Two launches: that copy, then the kernel.
  * ``run``: the same, value-returning, with the pool itself as final_state (no copy), as
    FlashInfer's gated_delta_rule_mtp returns it.
  * ``pooled_mtp``: for serving engines: a negative index marks a padding row (output zeroed,
    no slot read or written), the buffer is optional, one launch, no allocation and no wait on
    the device, so a CUDA graph can capture it.
In every entry point an index the pool does not hold gives that row NaN output and touches
no slot (raising would mean waiting on the device). Rows may share a slot: each starts from
the pool's state and its output is exact, but the slot's buffer then holds, tile by tile, the
states of one of them (the definition's reference keeps the last row's).

Only torch, triton, the standard library and the sibling module shared.py (packed with this
file) are imported: the official evaluator has nothing else.
"""

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from .shared import (HEAD_SIZE, NUM_Q_HEADS, NUM_V_HEADS, Launcher, all_aligned, arch_key, delta_rule_step, expect,
                     expect_indices, expect_pool, expect_rank, expected_specs, gates, l2_bytes, launch_row,
                     pooled_pointers, scale_value, step_gates)

class MtpLaunchRow(NamedTuple):
    """One row of LAUNCH_TABLES: batch sizes up to max_batch (None: any larger one, the last
    row) run with block_v state rows and `warps` warps per program; `preload`: every token's
    inputs are loaded before the first step (one round of loads instead of one per token:
    a token's loads cannot start before the previous token's stores, whose addresses the
    compiler cannot tell apart from theirs), at the cost of holding them in registers."""
    max_batch: int | None
    block_v: int
    warps: int
    preload: bool


# Launch configuration per architecture (shared.arch_key) and batch size, rows in increasing
# max_batch. sm90, measured on an H200 (docs/perf.md, "MTP: what bounds a short verify"):
# preloading takes B = 1 T = 8 from 7.5 to 5.3 µs and costs 5-30 % from B = 16 (16-row tiles).
# sm100 takes sm90's rows until a B200 sweep writes its own (tune_launch.py --definition mtp).
LAUNCH_TABLES = {
    "sm90": (
        MtpLaunchRow(max_batch=4, block_v=4, warps=1, preload=True),
        MtpLaunchRow(max_batch=16, block_v=4, warps=1, preload=False),
        MtpLaunchRow(max_batch=None, block_v=16, warps=1, preload=False),
    ),
    "sm100": (
        MtpLaunchRow(max_batch=4, block_v=4, warps=1, preload=True),
        MtpLaunchRow(max_batch=16, block_v=4, warps=1, preload=False),
        MtpLaunchRow(max_batch=None, block_v=16, warps=1, preload=False),
    ),
    "interpreter": (
        MtpLaunchRow(max_batch=1, block_v=64, warps=1, preload=True),
        MtpLaunchRow(max_batch=None, block_v=64, warps=1, preload=False),
    ),
}

# The per-token states are written once and never read back by the call. Where a call's states
# (B T HV D^2 float32) reach STREAM_L2_FRACTION of the GPU's L2 they are stored with the streaming
# hint (".cs": evicted first), so that they do not push the call's inputs out of the L2. Measured
# (docs/serving.md, thirteenth session; CUDA-graph replay / CUPTI span with a cold L2, µs, plain
# stores -> streamed): H100 (50 MB of L2) B = 16 T = 8 29.9 -> 24.2 / 29.1 -> 29.3, B = 12 T = 8
# 22.4 -> 18.0 / 22.4 -> 22.1; H200 (60 MB) B = 16 T = 8 22.3 -> 19.3 / 22.4 -> 22.7, B = 12 T = 8
# 16.3 -> 14.7 / 17.0 -> 17.0. With 32 MB of states the H200 gains nothing by graph and loses 3 %
# by span (B = 8 T = 8 12.2 -> 12.5), hence the threshold.
STREAM_L2_FRACTION = 0.75


def streams(states_bytes, l2_size):
    """Whether a call writing `states_bytes` of per-token states stores them with the streaming
    hint, on a GPU of `l2_size` bytes of L2 (0: none known, as on the CPU: never)."""
    return l2_size > 0 and states_bytes >= STREAM_L2_FRACTION * l2_size


@triton.jit(do_not_specialize=["pool_size"])
def _gdn_mtp_kernel(
    q_ptr, k_ptr, v_ptr, pool_ptr, index_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr, out_ptr, states_ptr,
    scale, pool_size,
    T: tl.constexpr, TP: tl.constexpr, PRELOAD: tl.constexpr, NEGATIVE_WRAPS: tl.constexpr, HAS_STATES: tl.constexpr,
    STREAM: tl.constexpr, HQ: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, BV: tl.constexpr,
):
    tile = tl.program_id(0)          # which BV-row tile of the V dimension
    bh = tl.program_id(1)            # b * HV + h
    batch = bh // HV
    head = bh % HV
    offs_k = tl.arange(0, D)
    offs_v = tile * BV + tl.arange(0, BV)
    tile_offs = offs_v[:, None] * D + offs_k[None, :]

    raw = tl.load(index_ptr + batch).to(tl.int64)
    if NEGATIVE_WRAPS:  # Python's indexing, as the definition's reference does: -1 is the last slot
        index = tl.where(raw < 0, raw + pool_size, raw)
        fill = float("nan")
    else:  # a negative index marks a padding row
        index = raw
        fill = tl.where(raw < 0, 0.0, float("nan"))
    in_pool = (index >= 0) & (index < pool_size)
    slot = tl.where(in_pool, index, 0)
    # A whole-tile mask, as a comparison of the row offsets (Triton's interpreter cannot
    # broadcast a scalar mask), constant along K so that loads and stores stay vectorized.
    tile_mask = offs_v[:, None] < tl.where(in_pool, D, 0)
    s = tl.load(pool_ptr + (slot * HV + head) * (D * D) + tile_offs, mask=tile_mask, other=0.0)

    A_log = tl.load(A_log_ptr + head)
    dt_bias = tl.load(dt_bias_ptr + head)
    if PRELOAD:  # every token's inputs in one round of loads (MtpLaunchRow); TP: T rounded up to 2^n
        steps = tl.arange(0, TP)
        rows = batch * T + steps
        in_call = steps < T
        qk_rows = rows * HQ + head // (HV // HQ)
        qs = tl.load(q_ptr + qk_rows[:, None] * D + offs_k[None, :], mask=in_call[:, None], other=0.0).to(tl.float32)
        ks = tl.load(k_ptr + qk_rows[:, None] * D + offs_k[None, :], mask=in_call[:, None], other=0.0).to(tl.float32)
        vs = tl.load(v_ptr + (rows[None, :] * HV + head) * D + offs_v[:, None], mask=in_call[None, :],
                     other=0.0).to(tl.float32)
        log_gs, betas = gates(A_log, tl.load(a_ptr + rows * HV + head, mask=in_call, other=0.0).to(tl.float32),
                              dt_bias, tl.load(b_ptr + rows * HV + head, mask=in_call, other=0.0).to(tl.float32))
        gs = tl.exp(log_gs)
        qks = tl.sum(qs * ks, axis=1)
    for t in tl.static_range(T):
        row = batch * T + t          # the token's row of [B * T]
        if PRELOAD:  # token t's row of each preloaded block
            here = steps == t
            q = tl.sum(tl.where(here[:, None], qs, 0.0), axis=0)
            k = tl.sum(tl.where(here[:, None], ks, 0.0), axis=0)
            v = tl.sum(tl.where(here[None, :], vs, 0.0), axis=1)
            g = tl.sum(tl.where(here, gs, 0.0), axis=0)
            beta = tl.sum(tl.where(here, betas, 0.0), axis=0)
            qk = tl.sum(tl.where(here, qks, 0.0), axis=0)
        else:
            qk_row = row * HQ + head // (HV // HQ)
            q = tl.load(q_ptr + qk_row * D + offs_k).to(tl.float32)
            k = tl.load(k_ptr + qk_row * D + offs_k).to(tl.float32)
            v = tl.load(v_ptr + (row * HV + head) * D + offs_v).to(tl.float32)
            g, beta = step_gates(A_log, dt_bias, a_ptr, b_ptr, row * HV + head)
            qk = tl.sum(q * k, axis=0)
        out, s = delta_rule_step(s, q, k, v, g, beta, scale, qk)
        out = tl.where(in_pool, out, fill)
        tl.store(out_ptr + (row * HV + head) * D + offs_v, out.to(out_ptr.dtype.element_ty))
        if HAS_STATES:
            state_ptrs = states_ptr + ((slot * T + t) * HV + head) * (D * D) + tile_offs
            if STREAM:  # streams(): evicted first, the inputs stay in the L2
                tl.store(state_ptrs, s, mask=tile_mask, cache_modifier=".cs")
            else:
                tl.store(state_ptrs, s, mask=tile_mask)


# --- Host side: checks, configuration, launch --------------------------------------------
# Launches after the first of a configuration skip Triton's per-call binding (shared.Launcher).
_launcher = Launcher(_gdn_mtp_kernel)


_NAMES = ("q", "k", "v", "A_log", "a", "dt_bias", "b", "output")  # the arguments expected_specs checks
Q_DIMS = ("B", "T", NUM_Q_HEADS, HEAD_SIZE)  # q's layout, for expect_rank
_KEPT_PLANS = 256  # launch plans kept (_plan); more forget them all
_PLANS = {}


def _expected(batch, steps):
    """{name: (shape, dtype)} of q, k, v, A_log, a, dt_bias, b and output for `batch` rows of
    `steps` tokens."""
    return dict(zip(_NAMES, expected_specs(_NAMES, (batch, steps), batch)))


def _check_inputs(q, k, v, pool, indices, A_log, a, dt_bias, b, scale, states, names):
    """(batch, steps, pool size, scale as a float) once every input checks, in call order;
    else ValueError naming the first bad one (`names`: the call's own names of the pool, the
    indices and the buffer of states, which may be None)."""
    (batch, steps), device = expect_rank("q", q, Q_DIMS)[:2], q.device
    expected = _expected(batch, steps)
    for name, t in (("q", q), ("k", k), ("v", v)):
        expect(name, t, *expected[name], device)
    pool_size = expect_pool(names[0], pool, device)
    expect_indices(names[1], indices, batch, device)
    for name, t in (("A_log", A_log), ("a", a), ("dt_bias", dt_bias), ("b", b)):
        expect(name, t, *expected[name], device)
    scale = scale_value(scale)
    if states is not None:
        expect(names[2], states, _states_shape(pool_size, steps), torch.float32, device)
    return batch, steps, pool_size, scale


def _states_shape(pool_size, steps):
    """The buffer of states' shape, [P, T, 8, 128, 128]."""
    return torch.Size((pool_size, steps, NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE))


def _checked_call(q, k, v, pool, indices, A_log, a, dt_bias, b, scale, states, output, names):
    """A call's checks in one pass (shared.pooled_pointers, with its guards): (the data pointers
    in the kernel's order, q, k, v, pool, indices, A_log, a, dt_bias, b, output, states (None
    without them); batch; steps; pool size; scale as a float) once every argument checks, else
    ValueError naming the first bad one in call order, output last (_check_inputs' order)."""
    batch, steps = expect_rank("q", q, Q_DIMS)[:2]
    device = q.device
    expected = expected_specs(_NAMES, (batch, steps), batch)
    checked = pooled_pointers(_NAMES, (q, k, v, A_log, a, dt_bias, b, output), expected, pool, indices, None, batch,
                              device)
    if checked is None:  # the first bad argument, in call order
        _check_inputs(q, k, v, pool, indices, A_log, a, dt_bias, b, scale, states, names)
        expect("output", output, *expected[-1], device)
        raise AssertionError("pooled_pointers and the one-at-a-time checks disagree")
    pointers, pool_size, _ = checked  # q, k, v, pool, A_log, a, dt_bias, b, output, pool, indices, indices
    scale = scale_value(scale)
    states_ptr = None
    if states is not None:
        expect(names[2], states, _states_shape(pool_size, steps), torch.float32, device)
        states_ptr = states.data_ptr()
    return (*pointers[:4], pointers[10], *pointers[4:9], states_ptr), batch, steps, pool_size, scale


class MtpPlan(NamedTuple):
    """A launch's grid, constexprs as (name, value) pairs and warps (_plan)."""
    grid: tuple
    constexprs: tuple
    warps: int


def _plan(batch, steps, has_states, negative_wraps, device):
    """The MtpPlan of a call of `batch` rows of `steps` tokens on `device`, kept (by the launch
    table's rows in force and the L2's size too) so that a call of the same shape reuses its
    tuples (shared.Launcher.config's fast path)."""
    table = LAUNCH_TABLES[arch_key(device)]
    l2_size = l2_bytes(device)
    key = (batch, steps, has_states, negative_wraps, table, l2_size)
    plan = _PLANS.get(key)
    if plan is None:
        row = launch_row(batch, table)
        states_bytes = batch * steps * NUM_V_HEADS * HEAD_SIZE * HEAD_SIZE * 4
        stream = has_states and streams(states_bytes, l2_size)
        constexprs = (("T", steps), ("TP", triton.next_power_of_2(steps)), ("PRELOAD", row.preload),
                      ("NEGATIVE_WRAPS", negative_wraps), ("HAS_STATES", has_states), ("STREAM", stream),
                      ("HQ", NUM_Q_HEADS), ("HV", NUM_V_HEADS), ("D", HEAD_SIZE), ("BV", row.block_v))
        if len(_PLANS) >= _KEPT_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = MtpPlan((HEAD_SIZE // row.block_v, batch * NUM_V_HEADS, 1), constexprs, row.warps)
    return plan


def _launch(inputs, states, output, checked, negative_wraps):
    """One launch of the kernel on a checked call (`inputs`: q, k, v, pool, indices, A_log, a,
    dt_bias, b; `checked`: _checked_call's answer): outputs, and states unless None."""
    pointers, batch, steps, pool_size, scale = checked
    if batch == 0 or steps == 0:
        return
    device, index_dtype = inputs[0].device, inputs[4].dtype  # q's device, the indices' dtype
    plan = _plan(batch, steps, states is not None, negative_wraps, device)
    _launcher.launch(plan.grid, (*inputs, output, states, scale, pool_size), plan.constexprs, plan.warps,
                     device.index, ((*pointers, scale, pool_size), all_aligned(pointers)),
                     specialization=(index_dtype,))


_POOLED_NAMES = ("state_pool", "indices", "intermediate_states")  # pooled_mtp's names of them
_DEFINITION_NAMES = ("initial_state", "initial_state_indices", "intermediate_states_buffer")


def kernel(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale, intermediate_states_buffer,
           output, final_state):
    """DPS entry point, the definition's call: writes `output` [B,T,8,128] bf16, the state after
    every token into intermediate_states_buffer [P,T,8,128,128] f32 at each row's slot (nothing
    when it is None), and `final_state` [P,8,128,128] f32, a copy of the pool, which is not
    updated. A negative index counts from the end of the pool, as the definition's reference
    indexes it. Raises ValueError naming the first bad argument.
    """
    inputs = (q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b)
    checked = _checked_call(*inputs, scale, intermediate_states_buffer, output, _DEFINITION_NAMES)
    expect("final_state", final_state, initial_state.shape, torch.float32, q.device)
    final_state.copy_(initial_state)
    _launch(inputs, intermediate_states_buffer, output, checked, negative_wraps=True)


def run(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale, intermediate_states_buffer=None):
    """Value-returning entry point, the definition's call: (output, final_state) as kernel()
    writes them, but final_state is initial_state itself, the pool unchanged (no copy), and
    output is allocated here."""
    inputs = (q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b)
    batch, steps = expect_rank("q", q, Q_DIMS)[:2]
    output = torch.empty(_expected(batch, steps)["output"][0], dtype=torch.bfloat16, device=q.device)
    _launch(inputs, intermediate_states_buffer, output,
            _checked_call(*inputs, scale, intermediate_states_buffer, output, _DEFINITION_NAMES), negative_wraps=True)
    return output, initial_state


def pooled_mtp(q, k, v, state_pool, indices, A_log, a, dt_bias, b, scale, output, intermediate_states=None):
    """T tokens per row from a state pool, as a serving engine verifies draft tokens: row i
    starts from state_pool[indices[i]], which is not updated; its outputs go to `output`
    [B,T,8,128] bf16 and, when `intermediate_states` [P,T,8,128,128] f32 is given, its state
    after token t to intermediate_states[indices[i], t] (the engine then keeps the accepted
    prefix's state). A negative index marks a padding row: its output is zeroed and no slot
    is read or written.

    Launches exactly one kernel, never synchronizes with the device and allocates nothing, so
    a CUDA graph can capture it (with scale a number: a tensor scale is read on the host).
    Raises ValueError naming the first bad argument.
    """
    inputs = (q, k, v, state_pool, indices, A_log, a, dt_bias, b)
    checked = _checked_call(*inputs, scale, intermediate_states, output, _POOLED_NAMES)
    _launch(inputs, intermediate_states, output, checked, negative_wraps=False)

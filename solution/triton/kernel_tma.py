"""Gated Delta Net decode step, "fla-tma": Triton with TMA tensor descriptors (sm_90+).

Definition ``gdn_decode_qk4_v8_d128_k_last`` (Qwen3-Next linear attention, TP=4), the math of
kernel.py's docstring: for every batch row b and value head h, the gates g and beta of token
(b, h) (shared.gates) and one delta-rule step on S = state[b,h] (shared.delta_rule_step) give
new_state[b,h] = S' and out[b,h] = scale * (S' @ q[b,hq]).

One program per (b, h) computes q, k, q . k and both gates once, then loops over the D / BV
row tiles of that head's state. Each [BV, D] tile moves between global and shared memory
through TMA (host-side tensor descriptors over the state viewed as [B * 8 * D, D]); the
loop is software-pipelined with ``tl.range(num_stages=NUM_STAGES)``, so the loads of the
next tiles are in flight while one tile is reduced, updated and stored.

Design choices:
  * Host-side descriptors (``triton.tools.tensor_descriptor.TensorDescriptor``), built once
    per launch and passed as kernel arguments: programs create no descriptors, so no global
    scratch allocator (``triton.set_allocator``) is needed or installed.
  * No warp specialization: ``tl.range`` documents ``warp_specialize=True`` as supported on
    Blackwell GPUs only, and for simple matmul loops; this loop runs on Hopper and has no
    dot. Pipelining alone overlaps the TMA traffic with the arithmetic.

``state=None`` means S = 0 (nothing is read); ``scale`` of 0 or None means 1/sqrt(D).
On CUDA GPUs below sm_90, or on CPU outside Triton's interpreter, the launcher raises
RuntimeError. Only torch, triton, the standard library and the sibling modules kernel.py (the
decode call's arguments) and shared.py are imported. It lies beside the submission, so it is
packed with it (unused there: the evaluator imports only the entry file and what it imports).
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from .kernel import ARG_NAMES, Q_DIMS, expected_arguments
from .shared import (HEAD_SIZE, INTERPRETED, NUM_Q_HEADS, NUM_V_HEADS, delta_rule_step, expect_all, expect_rank,
                     scale_value, step_gates)

BLOCK_V = 32     # state rows per TMA tile (a [32, 128] f32 tile is 16 KiB)
NUM_STAGES = 3   # tiles in flight in the pipelined loop
NUM_WARPS = 4


@triton.jit
def _gdn_decode_tma_kernel(
    q_ptr, k_ptr, v_ptr, state_desc, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr,
    out_ptr, new_state_desc, scale,
    HAS_STATE: tl.constexpr, HQ: tl.constexpr, HV: tl.constexpr,
    D: tl.constexpr, BV: tl.constexpr, STAGES: tl.constexpr,
):
    bh = tl.program_id(0)            # b * HV + h
    head = bh % HV
    qk_row = (bh // HV) * HQ + head // (HV // HQ)

    offs_k = tl.arange(0, D)
    q = tl.load(q_ptr + qk_row * D + offs_k).to(tl.float32)
    k = tl.load(k_ptr + qk_row * D + offs_k).to(tl.float32)
    qk = tl.sum(q * k, axis=0)
    g, beta = step_gates(tl.load(A_log_ptr + head), tl.load(dt_bias_ptr + head), a_ptr, b_ptr, bh)

    for tile in tl.range(0, D // BV, num_stages=STAGES):
        offs_v = tile * BV + tl.arange(0, BV)
        row = bh * D + tile * BV     # first row of this tile in the [B * HV * D, D] view
        if HAS_STATE:
            s = state_desc.load([row, 0])
        else:
            s = tl.zeros((BV, D), dtype=tl.float32)
        v = tl.load(v_ptr + bh * D + offs_v).to(tl.float32)
        out, s_new = delta_rule_step(s, q, k, v, g, beta, scale, qk)
        new_state_desc.store([row, 0], s_new)
        tl.store(out_ptr + bh * D + offs_v, out.to(out_ptr.dtype.element_ty))


def _require_tma(device):
    """Raise RuntimeError unless `device` is an sm_90+ GPU (or Triton interprets on CPU)."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if major < 9:
            raise RuntimeError(f"fla-tma needs TMA (sm_90+); this GPU is sm_{major}{minor}")
    elif not INTERPRETED:
        raise RuntimeError(
            f"fla-tma needs TMA (sm_90+); the tensors are on {device}, not on a CUDA GPU "
            "(only Triton's interpreter, TRITON_INTERPRET=1, runs it elsewhere)"
        )


def _tile_descriptor(name, state):
    """TMA descriptor of a [B, HV, D, D] state as [B * HV * D, D] rows, [BLOCK_V, D] tiles."""
    if state.data_ptr() % 16 != 0:
        raise ValueError(f"{name}: expected a 16-byte aligned data pointer (TMA)")
    return TensorDescriptor.from_tensor(state.view(-1, HEAD_SIZE), [BLOCK_V, HEAD_SIZE])


def kernel(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):
    """DPS entry point: writes `output` [B,1,8,128] bf16 and `new_state` [B,8,128,128] f32.

    Launches exactly one kernel. Raises ValueError naming the first bad argument, and
    RuntimeError where TMA is not available (see _require_tma).
    """
    batch, device = expect_rank("q", q, Q_DIMS)[0], q.device
    tensors = (q, k, v, state, A_log, a, dt_bias, b, output, new_state)
    expect_all(ARG_NAMES, tensors, expected_arguments(batch), device)
    scale = scale_value(scale)
    _require_tma(device)
    if batch == 0:
        return
    new_state_desc = _tile_descriptor("new_state", new_state)
    state_desc = new_state_desc if state is None else _tile_descriptor("state", state)
    D, HQ, HV = HEAD_SIZE, NUM_Q_HEADS, NUM_V_HEADS
    _gdn_decode_tma_kernel[(batch * HV,)](
        q, k, v, state_desc, A_log, a, dt_bias, b, output, new_state_desc, scale,
        HAS_STATE=state is not None, HQ=HQ, HV=HV, D=D, BV=BLOCK_V, STAGES=NUM_STAGES,
        num_warps=NUM_WARPS,
    )

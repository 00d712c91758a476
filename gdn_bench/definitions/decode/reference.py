"""Reference GDN decode step (gdn_decode_qk4_v8_d128_k_last), vectorized PyTorch.

This file is self-contained: its whole text is the `reference` of the shipped
definition, so flashinfer-bench compiles it and calls `run`.

Per batch row b and value head h (query/key head h // (HV / HQ)), state S = state[b, h]
stored K-last as [V, K]:

    g     = exp(-exp(A_log[h]) * softplus(a[b, h] + dt_bias[h]))
    beta  = sigmoid(b[b, h])
    S     = g * S
    S     = S + outer(beta * (v - S @ k), k)
    out   = scale * (S @ q)             scale = 1/sqrt(D) when 0 or None

Outputs: output [B, 1, HV, D] bf16 and new_state [B, HV, D, D] float32.
"""

import math

import torch
import torch.nn.functional as F


def gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale, compute_dtype=torch.float64):
    """One decode step in `compute_dtype`; returns (out [B,HV,D], new_state [B,HV,V,K]).

    `state` may be None (a zero state). Both results stay in `compute_dtype`.
    """
    batch, _, num_q_heads, head_size = q.shape
    num_v_heads = v.shape[2]
    if scale is None or float(scale) == 0.0:
        scale = 1.0 / math.sqrt(head_size)
    group = num_v_heads // num_q_heads

    def cast(t):
        return t.to(compute_dtype)

    q_h = cast(q[:, 0]).repeat_interleave(group, dim=1)  # [B, HV, K]
    k_h = cast(k[:, 0]).repeat_interleave(group, dim=1)  # [B, HV, K]
    v_h = cast(v[:, 0])  # [B, HV, V]
    g = torch.exp(-torch.exp(cast(A_log)) * F.softplus(cast(a[:, 0]) + cast(dt_bias)))
    beta = torch.sigmoid(cast(b[:, 0]))  # [B, HV]

    if state is None:
        s = torch.zeros(batch, num_v_heads, head_size, head_size, dtype=compute_dtype, device=q.device)
    else:
        s = cast(state)
    s = g[..., None, None] * s
    s_k = torch.einsum("bhvk,bhk->bhv", s, k_h)
    delta = beta[..., None] * (v_h - s_k)
    s = s + delta[..., :, None] * k_h[..., None, :]
    out = float(scale) * torch.einsum("bhvk,bhk->bhv", s, q_h)
    return out, s


def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    """The definition's reference: float32 math, outputs in the definition's dtypes."""
    out, new_state = gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale, torch.float32)
    return out.unsqueeze(1).to(torch.bfloat16), new_state.to(torch.float32)

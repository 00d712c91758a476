"""Reference GDN prefill (gdn_prefill_qk4_v8_d128_k_last), vectorized PyTorch.

This file is self-contained: its whole text is the `reference` of the shipped
definition, so flashinfer-bench compiles it and calls `run`.

Sequence n owns tokens cu_seqlens[n] : cu_seqlens[n+1] and starts from S = state[n]
(zero when state is None), one [V, K] matrix per value head h ("K-last"). For every
token t of the sequence, in order, and every value head h (query/key head h // (HV / HQ)):

    g     = exp(-exp(A_log[h]) * softplus(a[t, h] + dt_bias[h]))
    beta  = sigmoid(b[t, h])
    S     = g * S
    S     = S + outer(beta * (v[t, h] - S @ k[t]), k[t])
    out[t, h] = scale * (S @ q[t])         scale = 1/sqrt(D) when 0 or None

new_state[n] is the final S; a sequence of length 0 leaves new_state[n] at zero (not the
input state). Outputs: output [T, HV, D] bf16 and new_state [N, HV, D, D] float32.

The loop runs over token positions p = 0 .. max length - 1 and updates every sequence and
head at once. A sequence shorter than p + 1 reads a padding token with g = 1, beta = 0 and
k = q = v = 0, which leaves its S exactly unchanged, so the recurrence is exact.
"""

import math

import torch
import torch.nn.functional as F


def gdn_prefill(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, compute_dtype=torch.float64):
    """The prefill in `compute_dtype`; returns (out [T, HV, D], new_state [N, HV, V, K]).

    `state` may be None (zero states). Both results stay in `compute_dtype`.
    """
    total, num_q_heads, head_size = q.shape
    num_v_heads = v.shape[1]
    num_seqs = cu_seqlens.numel() - 1
    if scale is None or float(scale) == 0.0:
        scale = 1.0 / math.sqrt(head_size)
    group = num_v_heads // num_q_heads
    device = q.device

    def padded(x, pad_value=0.0):
        """x cast to compute_dtype, one padding token appended at index T."""
        x = x.to(compute_dtype)
        return torch.cat([x, torch.full_like(x[:1], pad_value)])

    # Per token and v-head, [q | k | v] and [g | beta], with the padding token at index T.
    qkv = padded(torch.cat([q.repeat_interleave(group, dim=1), k.repeat_interleave(group, dim=1), v], dim=-1))
    decay = torch.exp(-torch.exp(A_log.to(compute_dtype)) * F.softplus(a.to(compute_dtype) + dt_bias.to(compute_dtype)))
    gates = torch.stack([padded(decay, 1.0), padded(torch.sigmoid(b.to(compute_dtype)))], dim=-1)

    starts = cu_seqlens[:-1].to(device=device, dtype=torch.int64)
    lengths = cu_seqlens[1:].to(device=device, dtype=torch.int64) - starts
    if state is None:
        s = torch.zeros(num_seqs, num_v_heads, head_size, head_size, dtype=compute_dtype, device=device)
    else:
        s = state.to(compute_dtype)
    out = torch.zeros(total + 1, num_v_heads, head_size, dtype=compute_dtype, device=device)

    max_len = int(lengths.max()) if num_seqs else 0
    for p in range(max_len):
        t = torch.where(lengths > p, starts + p, total)  # this position's token per sequence
        q_t, k_t, v_t = qkv[t].split(head_size, dim=-1)  # [N, HV, D] each
        g, beta = gates[t].unbind(-1)  # [N, HV] each
        s = g[..., None, None] * s
        delta = beta[..., None] * (v_t - torch.einsum("nhvk,nhk->nhv", s, k_t))
        s = s + delta[..., :, None] * k_t[..., None, :]
        out[t] = float(scale) * torch.einsum("nhvk,nhk->nhv", s, q_t)
    s = torch.where((lengths > 0)[:, None, None, None], s, torch.zeros_like(s))
    return out[:total], s


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    """The definition's reference: float32 math, outputs in the definition's dtypes."""
    out, new_state = gdn_prefill(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, torch.float32)
    return out.to(torch.bfloat16), new_state.to(torch.float32)

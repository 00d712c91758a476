"""pt-reference (prefill): the definition's math as a plain loop over sequences and their
tokens, all v-heads of a token at once (PyTorch, float32), value-returning. The slowest
honest implementation; the speedup baseline.

Per sequence n, S = state[n] ([HV, V, K], zero if state is None); per token t of n:
g = exp(-exp(A_log)·softplus(a[t] + dt_bias)), beta = sigmoid(b[t]), S <- g·S,
S <- S + outer(beta·(v[t] - S k[t]), k[t]), out[t] = scale·(S q[t]); new_state[n] = S,
zero for an empty sequence.
"""

import torch
import torch.nn.functional as F

from gdn_bench.shapes import output_scale


def token_loop(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, dtype=torch.float32):
    """(out [T, HV, D], new_state [N, HV, V, K]) in `dtype`, one token at a time."""
    total, num_q_heads, head_size = q.shape
    num_v_heads = v.shape[1]
    scale = output_scale(scale)
    group = num_v_heads // num_q_heads
    bounds = cu_seqlens.tolist()
    output = torch.zeros(total, num_v_heads, head_size, dtype=dtype, device=q.device)
    new_state = torch.zeros(len(bounds) - 1, num_v_heads, head_size, head_size, dtype=dtype, device=q.device)
    for n, (start, end) in enumerate(zip(bounds[:-1], bounds[1:])):
        if start == end:
            continue
        s = torch.zeros_like(new_state[n]) if state is None else state[n].to(dtype)
        for t in range(start, end):
            q_t = q[t].to(dtype).repeat_interleave(group, dim=0)  # [HV, K]
            k_t = k[t].to(dtype).repeat_interleave(group, dim=0)
            g = torch.exp(-torch.exp(A_log.to(dtype)) * F.softplus(a[t].to(dtype) + dt_bias.to(dtype)))
            beta = torch.sigmoid(b[t].to(dtype))
            s = g[:, None, None] * s
            delta = beta[:, None] * (v[t].to(dtype) - (s @ k_t[:, :, None])[..., 0])
            s = s + delta[:, :, None] * k_t[:, None, :]
            output[t] = scale * (s @ q_t[:, :, None])[..., 0]
        new_state[n] = s
    return output, new_state


def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    output, new_state = token_loop(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale)
    return output.to(torch.bfloat16), new_state

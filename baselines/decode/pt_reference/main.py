"""pt-reference: the definition's math as a plain loop over batch rows and v-heads (PyTorch,
float32), value-returning. The slowest honest implementation; the speedup baseline.

Per (b, h), S = state[b, h] as [V, K]:  g = exp(-exp(A_log)·softplus(a + dt_bias)),
beta = sigmoid(b), S <- g·S, S <- S + outer(beta·(v - S k), k), out = scale·(S q).
"""

import torch
import torch.nn.functional as F

from gdn_bench.shapes import output_scale


def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    batch, _, num_q_heads, head_size = q.shape
    num_v_heads = v.shape[2]
    scale = output_scale(scale)
    output = torch.empty(batch, 1, num_v_heads, head_size, dtype=torch.float32, device=q.device)
    new_state = torch.empty(batch, num_v_heads, head_size, head_size, dtype=torch.float32, device=q.device)
    for i in range(batch):
        for h in range(num_v_heads):
            hq = h // (num_v_heads // num_q_heads)
            q_i, k_i = q[i, 0, hq].float(), k[i, 0, hq].float()
            g = torch.exp(-torch.exp(A_log[h]) * F.softplus(a[i, 0, h].float() + dt_bias[h]))
            beta = torch.sigmoid(b[i, 0, h].float())
            s = torch.zeros(head_size, head_size, device=q.device) if state is None else state[i, h]
            s = g * s
            s = s + torch.outer(beta * (v[i, 0, h].float() - s @ k_i), k_i)
            new_state[i, h] = s
            output[i, 0, h] = scale * (s @ q_i)
    return output.to(torch.bfloat16), new_state

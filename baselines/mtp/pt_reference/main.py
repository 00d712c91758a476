"""pt-reference (mtp): the definition's math as a plain loop over batch rows, v-heads and tokens
(PyTorch, float32), value-returning, as the official reference loops. The slowest honest
implementation.

Row i starts from S = initial_state[initial_state_indices[i], h] as [V, K] (Python's indexing:
-1 is the last slot). Per token: g = exp(-exp(A_log)·softplus(a + dt_bias)), beta = sigmoid(b),
S <- g·S, S <- S + outer(beta·(v - S k), k), out = scale·(S q), and S goes into
intermediate_states_buffer at the row's slot and the token (rows in order: of rows sharing a
slot, the last one's states stay). final_state is a copy of the pool, which is not updated.
"""

import torch
import torch.nn.functional as F

from gdn_bench.shapes import output_scale


def run(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale, intermediate_states_buffer=None):
    batch, steps, num_q_heads, head_size = q.shape
    num_v_heads = v.shape[2]
    scale = output_scale(scale)
    output = torch.empty(batch, steps, num_v_heads, head_size, dtype=torch.float32, device=q.device)
    for i in range(batch):
        slot = int(initial_state_indices[i])
        for h in range(num_v_heads):
            hq = h // (num_v_heads // num_q_heads)
            s = initial_state[slot, h]
            for t in range(steps):
                q_t, k_t = q[i, t, hq].float(), k[i, t, hq].float()
                g = torch.exp(-torch.exp(A_log[h]) * F.softplus(a[i, t, h].float() + dt_bias[h]))
                beta = torch.sigmoid(b[i, t, h].float())
                s = g * s
                s = s + torch.outer(beta * (v[i, t, h].float() - s @ k_t), k_t)
                output[i, t, h] = scale * (s @ q_t)
                if intermediate_states_buffer is not None:
                    intermediate_states_buffer[slot, t, h] = s
    return output.to(torch.bfloat16), initial_state.clone()

"""Reference GDN multi-token step over a state pool (gdn_mtp_qk4_v8_d128_k_last), vectorized
PyTorch: the verification of T draft tokens per sequence in speculative decoding.

This file is self-contained: its whole text is the `reference` of the kit's definition, so
flashinfer-bench compiles it and calls `run`.

Batch row b starts from pool slot n = initial_state_indices[b] (a negative index counts from
the end of the pool, n + pool_size, as Python's indexing in the official reference does):
S = initial_state[n], one [V, K] matrix per value head h ("K-last"). For every token t of the
row, in order, and every value head h (query/key head h // (HV / HQ)):

    g     = exp(-exp(A_log[h]) * softplus(a[b, t, h] + dt_bias[h]))
    beta  = sigmoid(b[b, t, h])
    S     = g * S
    S     = S + outer(beta * (v[b, t, h] - S @ k[b, t]), k[b, t])
    output[b, t, h] = scale * (S @ q[b, t])          scale = 1/sqrt(D) when 0 or None
    intermediate_states_buffer[n, t] = S             (when the buffer is given)

The pool is not updated: final_state is a copy of initial_state (the official reference's
`disable_state_update=True`). Rows that share a slot each start from the pool's state; the
buffer's slot then holds the states of the last of them, as the official reference, which
writes the rows in order, leaves it. An index outside [-pool_size, pool_size) is an error.
Outputs: output [B, T, HV, D] bf16 and final_state [pool_size, HV, D, D] float32.

The loop runs over the T token positions and updates every row and head at once.
"""

import math

import torch
import torch.nn.functional as F


def pool_slots(initial_state_indices, pool_size):
    """Each row's pool slot: its index, plus pool_size when negative. ValueError for an index
    outside [-pool_size, pool_size) (reading the indices waits on their device)."""
    indices = initial_state_indices.to(torch.int64)
    if indices.numel() and (int(indices.min()) < -pool_size or int(indices.max()) >= pool_size):
        raise ValueError(f"initial_state_indices: expected values in [-{pool_size}, {pool_size}) "
                         f"(pool_size {pool_size}), got {indices.tolist()}")
    return torch.where(indices < 0, indices + pool_size, indices)


def gdn_mtp(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale,
            compute_dtype=torch.float64):
    """The T steps (T >= 1) of every row in `compute_dtype`; returns (output [B, T, HV, D],
    states [B, T, HV, V, K]: S after each token). Both stay in `compute_dtype`."""
    steps, num_q_heads, head_size = q.shape[1:]
    num_v_heads = v.shape[2]
    if scale is None or float(scale) == 0.0:
        scale = 1.0 / math.sqrt(head_size)
    group = num_v_heads // num_q_heads

    def cast(t):
        return t.to(compute_dtype)

    q_h = cast(q).repeat_interleave(group, dim=2)  # [B, T, HV, K]
    k_h = cast(k).repeat_interleave(group, dim=2)  # [B, T, HV, K]
    v_h = cast(v)  # [B, T, HV, V]
    g = torch.exp(-torch.exp(cast(A_log)) * F.softplus(cast(a) + cast(dt_bias)))  # [B, T, HV]
    beta = torch.sigmoid(cast(b))  # [B, T, HV]

    s = cast(initial_state[pool_slots(initial_state_indices, initial_state.shape[0])])  # [B, HV, V, K]
    outputs, states = [], []
    for t in range(steps):
        s = g[:, t, :, None, None] * s
        delta = beta[:, t, :, None] * (v_h[:, t] - torch.einsum("bhvk,bhk->bhv", s, k_h[:, t]))
        s = s + delta[..., :, None] * k_h[:, t, :, None, :]
        outputs.append(float(scale) * torch.einsum("bhvk,bhk->bhv", s, q_h[:, t]))
        states.append(s)
    return torch.stack(outputs, dim=1), torch.stack(states, dim=1)


def last_of_each_slot(slots):
    """Whether each row is the last one reading its slot: the row whose states the buffer keeps."""
    rows = torch.arange(slots.numel(), device=slots.device)
    later_same = (slots[:, None] == slots[None, :]) & (rows[None, :] > rows[:, None])
    return ~later_same.any(dim=1)


@torch.no_grad()
def run(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale, intermediate_states_buffer=None):
    """The definition's reference: float32 math, outputs in the definition's dtypes; the
    states after every token written into intermediate_states_buffer at each row's slot."""
    output, states = gdn_mtp(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale,
                             torch.float32)
    if intermediate_states_buffer is not None:
        slots = pool_slots(initial_state_indices, initial_state.shape[0])
        last = last_of_each_slot(slots)
        intermediate_states_buffer[slots[last]] = states[last]
    return output.to(torch.bfloat16), initial_state.clone()

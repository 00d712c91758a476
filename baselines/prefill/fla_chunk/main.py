"""fla-chunk (prefill): flash-linear-attention 0.6's chunked GDN, `chunk_gated_delta_rule`
(fla/ops/gated_delta_rule/chunk.py), varlen through cu_seqlens, gates fused in-kernel.
Value-returning; GPU only; `pip install -e ".[baselines]"`.

Facts from fla/ops/gated_delta_rule/chunk.py, gate.py and fla/ops/common/chunk_delta_h.py
(wheel fla_core-0.6.0):
- q, k [B, T, H, K] and v [B, T, HV, V] with B = 1 for varlen (cu_seqlens [N + 1] int64).
- use_gate_in_kernel=True (with A_log, dt_bias, passed as keyword arguments): g is the raw
  `a` and the kernel computes the log-decay -exp(A_log)·softplus(a + dt_bias) and its chunk
  cumsum (gdn_gate_chunk_cumsum). use_beta_sigmoid_in_kernel=True: beta is the raw `b`.
- state_v_first=True: initial and final states are [N, HV, V, K] (the definition's K-last);
  the default would be [N, HV, K, V]. The final state is a new float32 tensor; the initial
  state is only read.
- A zero-length sequence gets its *initial* state as final state (the state pass loads h0,
  runs no chunk and stores it), so the rows of empty sequences are zeroed here, as the
  definition asks, by one elementwise select on the device (no host synchronization).
- scale: always passed as the float it stands for (gdn_bench.shapes.output_scale).
"""

from fla.ops.gated_delta_rule import chunk_gated_delta_rule

from gdn_bench.shapes import output_scale


def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    output, new_state = chunk_gated_delta_rule(
        q[None], k[None], v[None], g=a[None], beta=b[None], scale=output_scale(scale), initial_state=state,
        output_final_state=True, use_beta_sigmoid_in_kernel=True, state_v_first=True,
        cu_seqlens=cu_seqlens, use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias,
    )
    nonempty = (cu_seqlens[1:] > cu_seqlens[:-1])[:, None, None, None]
    return output[0], new_state.where(nonempty, 0.0)

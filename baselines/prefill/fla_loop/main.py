"""fla-loop (prefill): flash-linear-attention 0.6's token loop, `fused_recurrent_gated_delta_rule`
(fla/ops/gated_delta_rule/fused_recurrent.py), varlen through cu_seqlens, gates fused in-kernel:
one program per (sequence, head, V tile) walks the sequence token by token, the state in
registers. What a serving engine would call for many short sequences (speculative-decoding
verifies, one-token batches); its time grows with the longest sequence. Value-returning; GPU
only; `pip install -e ".[baselines]"`.

The arguments are those of fla-chunk (see baselines/prefill/fla_chunk/main.py): B = 1 for
varlen, use_gate_in_kernel with A_log and dt_bias, use_beta_sigmoid_in_kernel, state_v_first
for the K-last state; empty sequences' rows of the final state zeroed on the device.
"""

from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule

from gdn_bench.shapes import output_scale


def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    output, new_state = fused_recurrent_gated_delta_rule(
        q[None], k[None], v[None], g=a[None], beta=b[None], scale=output_scale(scale), initial_state=state,
        output_final_state=True, use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias,
        use_beta_sigmoid_in_kernel=True, state_v_first=True, cu_seqlens=cu_seqlens,
    )
    nonempty = (cu_seqlens[1:] > cu_seqlens[:-1])[:, None, None, None]
    return output[0], new_state.where(nonempty, 0.0)

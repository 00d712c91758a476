"""fla-loop (mtp): flash-linear-attention 0.6's token loop, `fused_recurrent_gated_delta_rule`, over
each row's T tokens, gates fused in-kernel (use_gate_in_kernel with A_log and dt_bias,
use_beta_sigmoid_in_kernel), state_v_first for the K-last state. Value-returning; GPU only;
`pip install -e ".[baselines]"`.

FLA 0.6's gated delta rule kernels take no slot indices (its KDA kernel has
ssm_state_indices; this one does not), so the rows' states are gathered first
(initial_state[initial_state_indices]: a copy of B states), and the kernel cannot write the
state after every token: this writes none into intermediate_states_buffer. It thus does less
work than the definition asks (a bound, not a peer; the harness compares outputs only).
final_state is the pool itself, not updated.
"""

from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule

from gdn_bench.shapes import output_scale


def run(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale, intermediate_states_buffer=None):
    output, _ = fused_recurrent_gated_delta_rule(
        q, k, v, g=a, beta=b, scale=output_scale(scale), initial_state=initial_state[initial_state_indices],
        output_final_state=False, use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias,
        use_beta_sigmoid_in_kernel=True, state_v_first=True,
    )
    return output, initial_state

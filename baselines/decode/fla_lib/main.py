"""fla-lib: flash-linear-attention's fused_recurrent_gated_delta_rule (>= 0.6), the library a
user would otherwise call: gates and beta sigmoid fused in-kernel, V-first (K-last) state."""

from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule

from gdn_bench.shapes import output_scale


def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    return fused_recurrent_gated_delta_rule(
        q, k, v, g=a, beta=b, scale=output_scale(scale), initial_state=state, output_final_state=True,
        use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias,
        use_beta_sigmoid_in_kernel=True, state_v_first=True,
    )

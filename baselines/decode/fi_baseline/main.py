"""fi-baseline: FlashInfer's gated_delta_rule_decode_pretranspose, called as the contest's
baseline does: output pre-allocated, no q/k L2 normalization, the K-last state updated in
place and returned as new_state (value-returning, so no extra copy)."""

import torch
from flashinfer.gdn_decode import gated_delta_rule_decode_pretranspose


def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    output = torch.empty(v.shape, dtype=torch.bfloat16, device=v.device)
    scale = None if scale is None or float(scale) == 0.0 else float(scale)
    gated_delta_rule_decode_pretranspose(
        q=q, k=k, v=v, state=state, A_log=A_log, a=a, dt_bias=dt_bias, b=b,
        scale=scale, output=output, use_qk_l2norm=False,
    )
    return output, state

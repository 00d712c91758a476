"""fi-baseline (prefill): FlashInfer 0.7.2's chunked GDN prefill, `chunk_gated_delta_rule`
(flashinfer/gdn_prefill.py), with the gates computed in torch, as a contest wrapper calls it.
Value-returning; GPU only (FlashInfer dispatches to its SM90 / SM100 / SM120 kernels).

Facts from flashinfer/gdn_prefill.py and its kernels (wheel flashinfer_python-0.7.2):
- signature: chunk_gated_delta_rule(q, k, v, g=None, beta=None, scale=None, initial_state=None,
  output_final_state=False, cu_seqlens=None, use_qk_l2norm_in_kernel=False, output=None,
  output_state=None, ...); q, k [T, HQ, D], v [T, HV, D] contiguous bf16; cu_seqlens [N + 1]
  int32 or int64 (zero-length sequences allowed); returns (output [T, max(HQ, HV), D],
  final_state) when output_final_state.
- g is the decay *factor* alpha = exp(-exp(A_log)·softplus(a + dt_bias)) in (0, 1], float32
  [T, HV], not its log: the kernels take log2(g + 1e-10) themselves
  (gdn_kernels/delta_rule_dsl/alpha.py). beta is sigmoid(b), float32 [T, HV].
- initial_state and the final state are [N, HV, V, K] float32 ("K-last", the definition's
  layout); the final state is a new tensor (output_state=None), the input state is only read.
- scale None or 0 means 1/sqrt(D); it is passed as the float it stands for
  (gdn_bench.shapes.output_scale).
- A zero-length sequence's final state is left as the allocator gave it (docs/perf.md,
  "Notes moved from the code"), where the definition wants zeros, so this baseline fails
  the workloads that hold an empty sequence. It is kept as a contest wrapper calls it; the
  FI ratio skips those workloads (docs/perf.md).
"""

import torch
import torch.nn.functional as F
from flashinfer.gdn_prefill import chunk_gated_delta_rule

from gdn_bench.shapes import output_scale


def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    g = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))
    beta = torch.sigmoid(b.float())
    return chunk_gated_delta_rule(
        q, k, v, g=g, beta=beta, scale=output_scale(scale), initial_state=state,
        output_final_state=True, cu_seqlens=cu_seqlens, use_qk_l2norm_in_kernel=False,
    )

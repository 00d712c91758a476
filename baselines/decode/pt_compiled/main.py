"""pt-compiled: torch.compile (dynamic shapes) of the vectorized reference in
gdn_bench/definitions/decode/reference.py, float32, value-returning."""

import torch

from gdn_bench.definitions.decode.reference import gdn_decode

_compiled = torch.compile(gdn_decode, dynamic=True)


def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    out, new_state = _compiled(q, k, v, state, A_log, a, dt_bias, b, scale, torch.float32)
    return out.unsqueeze(1).to(torch.bfloat16), new_state

"""What scripts/tune_launch.py --definition mtp tunes in the mtp submission (gdn_bench.table_tuning
does it): mtp.py's LAUNCH_TABLES (the rows of the GPU's architecture), (BV, warps, preload) per batch
size, over every valid configuration (decode_tuning.valid_configs: the same [BV, 128] state
tile per program), on the calls of the generated serving mix (each batch size at four draft lengths, its pool size; the times at one
batch size add up).

A probe times pooled_mtp with the buffer of intermediate states: the launch the definition's
call makes, without its copy of the pool into final_state, which no launch setting changes.
Its outputs and buffered states are checked against the float64 reference (worst margin at
most 1, gdn_bench.checking.worst_margin) before it is timed.
"""

import torch

from gdn_bench.checking import worst_margin
from gdn_bench.decode_tuning import valid_configs
from gdn_bench.definitions.mtp.mix import Verify, serving_mix_plan
from gdn_bench.definitions.mtp.reference import gdn_mtp
from gdn_bench.serving_bench import serving_inputs
from gdn_bench.shapes import DEFAULT_SCALE, HEAD_SIZE, NUM_V_HEADS
from gdn_bench.table_tuning import Probe, TableSweep

_CALL_ORDER = ("q", "k", "v", "pool", "slots", "A_log", "a", "dt_bias", "b")


def _probe(verify: Verify) -> Probe:
    """One verify call of the mix (model-like inputs, distinct slots), checked against float64."""
    batch, steps, pool_size = verify

    def make(module):
        x = serving_inputs(batch, steps, pool_size, seed=1000 * batch + steps)
        args = [x[name] for name in _CALL_ORDER]
        output = torch.empty_like(x["v"])
        buffer = torch.empty(pool_size, steps, NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE, device=output.device)
        want_output, want_states = gdn_mtp(*args, DEFAULT_SCALE)

        def check():
            margin = max(worst_margin(output, want_output), worst_margin(buffer[x["slots"].long()], want_states))
            assert margin <= 1, f"worst margin {margin:.3f} against float64"
        return (lambda: module.pooled_mtp(*args, DEFAULT_SCALE, output, buffer)), check

    return Probe(label=f"B={batch} T={steps}", size=batch, point=(batch,), make=make)


SWEEPS = {
    "LAUNCH_TABLES": TableSweep(
        table="LAUNCH_TABLES", bounds=("max_batch",),
        candidates=lambda module: [dict(block_v=bv, warps=w, preload=p) for bv, w in valid_configs()
                                   for p in (False, True)],
        probes=lambda module: [_probe(verify) for verify in serving_mix_plan()]),
}

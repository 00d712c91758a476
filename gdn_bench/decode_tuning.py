"""What scripts/tune_launch.py tunes in the decode submission (gdn_bench.table_tuning does it):
kernel.py's LAUNCH_TABLES (the rows of the GPU's architecture), (BV, warps) per batch size, over
every valid configuration at each batch size of bench_sizes.DECODE_BATCH_SIZES, each checked
against float64 before it is timed.
"""

from gdn_bench.bench_sizes import DECODE_BATCH_SIZES
from gdn_bench.decode_bench import decode_inputs, decode_outputs, errors
from gdn_bench.shapes import HEAD_SIZE
from gdn_bench.table_tuning import Probe, TableSweep


def valid_configs() -> list[tuple[int, int]]:
    """(BV, warps) pairs where every thread holds at least one 16-byte vector of the tile."""
    return [(bv, w) for bv in (2, 4, 8, 16, 32, 64) for w in (1, 2, 4, 8) if bv * HEAD_SIZE // (32 * w) >= 4]


def _probe(batch: int) -> Probe:
    """One call at this batch size (state present), its errors against float64 checked."""

    def make(module):
        inputs = decode_inputs(batch, seed=batch)
        output, new_state = decode_outputs(batch)
        args = (*inputs.values(), output, new_state)

        def check():
            state_err, out_err = errors(inputs, output, new_state)
            assert state_err <= 1e-5 and out_err <= 1e-2, f"errors {state_err:.2e} (state), {out_err:.2e} (output)"
        return (lambda: module.kernel(*args)), check

    return Probe(label=f"B={batch}", size=batch, point=(batch,), make=make)


SWEEPS = {
    "LAUNCH_TABLES": TableSweep(
        table="LAUNCH_TABLES", bounds=("max_batch",),
        candidates=lambda module: [dict(block_v=bv, warps=w) for bv, w in valid_configs()],
        probes=lambda module: [_probe(batch) for batch in DECODE_BATCH_SIZES]),
}

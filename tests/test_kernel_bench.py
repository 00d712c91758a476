"""The launch-table logic of scripts/tune_launch.py (the sweep itself needs a GPU)."""

from gdn_bench.kernel_bench import best_table, valid_configs, write_launch_table
from helpers import KERNEL_PATH


def _rows(timings):
    return [{"batch_size": b, "block_v": bv, "num_warps": w, "us": us, "floor_us": 1.0}
            for b, configs in timings.items() for (bv, w), us in configs.items()]


def test_ties_within_tolerance_keep_the_current_row():
    timings = {1: {(4, 1): 2.00, (8, 1): 2.50}, 4: {(4, 1): 3.02, (16, 1): 3.00},
               16: {(4, 1): 6.00, (16, 1): 5.00}, 64: {(4, 1): 20.0, (16, 1): 18.0}}
    assert best_table(_rows(timings)) == ((4, 4, 1), (1 << 62, 16, 1))


def test_exact_winners_without_tolerance():
    timings = {1: {(4, 1): 2.0, (8, 1): 2.5}, 8: {(4, 1): 5.0, (8, 1): 4.0}}
    assert best_table(_rows(timings), tolerance=0.0) == ((1, 4, 1), (1 << 62, 8, 1))


def test_every_config_fills_whole_vectors():
    for block_v, warps in valid_configs():
        assert block_v * 128 // (32 * warps) >= 4


def test_write_launch_table_round_trip(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text(KERNEL_PATH.read_text())
    write_launch_table(((8, 4, 1), (1 << 62, 32, 2)), path)
    text = path.read_text()
    assert "LAUNCH_TABLE = (\n    (8, 4, 1),\n    (1 << 62, 32, 2),\n)" in text

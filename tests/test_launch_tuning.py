"""The launch-table logic of scripts/tune_launch.py (gdn_bench.decode_tuning; the sweep itself
needs a GPU), and the pieces of scripts/bench_kernel.py that run without one."""

import shutil

import pytest
import torch

from gdn_bench import decode_bench as kernel_bench
from gdn_bench.algos import load_solution_file
from gdn_bench.definitions.decode.definition import build_definition
from gdn_bench.decode_tuning import best_table, read_launch_table, valid_configs, write_launch_table
from gdn_bench.signature import empty_outputs, random_inputs
from helpers import KERNEL_PATH


def _row(max_batch, block_v, warps):
    return {"max_batch": max_batch, "block_v": block_v, "warps": warps}


def _rows(timings):
    return [{"batch_size": b, "block_v": bv, "num_warps": w, "us": us, "floor_us": 1.0}
            for b, configs in timings.items() for (bv, w), us in configs.items()]


def test_ties_within_tolerance_keep_the_current_row():
    timings = {1: {(4, 1): 2.00, (8, 1): 2.50}, 4: {(4, 1): 3.02, (16, 1): 3.00},
               16: {(4, 1): 6.00, (16, 1): 5.00}, 64: {(4, 1): 20.0, (16, 1): 18.0}}
    assert best_table(_rows(timings)) == [_row(4, 4, 1), _row(None, 16, 1)]


def test_exact_winners_without_tolerance():
    timings = {1: {(4, 1): 2.0, (8, 1): 2.5}, 8: {(4, 1): 5.0, (8, 1): 4.0}}
    assert best_table(_rows(timings), tolerance=0.0) == [_row(1, 4, 1), _row(None, 8, 1)]


def test_every_config_fills_whole_vectors():
    for block_v, warps in valid_configs():
        assert block_v * 128 // (32 * warps) >= 4


def test_write_launch_table_round_trip(tmp_path):
    """The tuner rewrites kernel.py's table as named rows, leaves the rest of the file as it
    was, and the module loads with the new table."""
    path = tmp_path / "kernel.py"
    original = KERNEL_PATH.read_text()
    path.write_text(original)
    shutil.copy(KERNEL_PATH.parent / "shared.py", tmp_path)  # what it imports
    table = [_row(8, 4, 1), _row(None, 32, 2)]
    write_launch_table(table, path)
    text = path.read_text()
    assert ("LAUNCH_TABLE = (\n    LaunchRow(max_batch=8, block_v=4, warps=1),\n"
            "    LaunchRow(max_batch=None, block_v=32, warps=2),\n)\n") in text
    assert read_launch_table(text) == table
    start = original.index("LAUNCH_TABLE = (")
    end = original.index("\n)\n", start) + 3
    assert text.replace(text[start:text.index("\n)\n", start) + 3], "") == original.replace(original[start:end], "")
    module = load_solution_file(path, "gdn_submission_tuned")
    assert module.LAUNCH_TABLE == (module.LaunchRow(8, 4, 1), module.LaunchRow(None, 32, 2))


@pytest.mark.parametrize("table, error", [
    ([{"max_batch": None, "block_v": 16}], "has the fields"),
    ([{"max_batch": None, "bv": 16, "warps": 1}], "has the fields"),
])
def test_write_launch_table_refuses_rows_that_are_not_launch_rows(tmp_path, table, error):
    path = tmp_path / "kernel.py"
    path.write_text(KERNEL_PATH.read_text())
    with pytest.raises(ValueError, match=error):
        write_launch_table(table, path)
    assert path.read_text() == KERNEL_PATH.read_text()


def test_write_launch_table_refuses_a_positional_table(tmp_path):
    path = tmp_path / "kernel.py"
    text = KERNEL_PATH.read_text()
    start = text.index("LAUNCH_TABLE = (")
    path.write_text(text[:start] + "LAUNCH_TABLE = (\n    (16, 4, 1),\n)\n" + text[text.index("\n)\n", start) + 3:])
    with pytest.raises(ValueError, match="is not LaunchRow"):
        write_launch_table([_row(None, 16, 1)], path)


def test_inputs_and_outputs_take_the_definitions_shapes():
    definition = build_definition()
    inputs = random_inputs(definition, {"batch_size": 3}, torch.Generator().manual_seed(0), {"scale": 0.5})
    assert list(inputs) == list(definition.inputs) and inputs["scale"] == 0.5
    assert inputs["q"].shape == (3, 1, 4, 128) and inputs["q"].dtype == torch.bfloat16
    assert inputs["state"].shape == (3, 8, 128, 128) and inputs["state"].dtype == torch.float32
    output, new_state = empty_outputs(definition, {"batch_size": 3}, "cpu")
    assert (output.shape, output.dtype, new_state.shape) == ((3, 1, 8, 128), torch.bfloat16, (3, 8, 128, 128))


def test_bench_rows_derive_their_ratios_and_show_what_was_not_measured():
    row = kernel_bench.derived({"batch_size": 4, "ours_us": 3.0, "floor_us": 2.0, "host_ours_us": 9.0,
                                "host_copy_us": 6.0, "fi-baseline_us": 6.0, "state_rel_err": 1e-7, "out_rel_err": 1e-3})
    assert (row["x_floor"], row["host_ratio"], row["vs_fi"]) == (1.5, 1.5, 2.0)
    header, line = kernel_bench.format_rows([row]).splitlines()
    assert "×floor" in header and line.split()[5] == "-"  # no fla-lib column measured

"""The table-tuning mechanism of scripts/tune_launch.py (gdn_bench.table_tuning: the sweep with a
stand-in module and timer, rows from times, the rewrite of a table of named rows), the tables
each definition tunes (gdn_bench.decode_tuning, prefill_tuning, mtp_tuning) against the
submission files, and the pieces of scripts/bench_kernel.py that run without a GPU."""

import functools
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import pytest
import torch

from gdn_bench import decode_bench as kernel_bench
from gdn_bench import decode_tuning, mtp_tuning, prefill_tuning
from gdn_bench.algos import load_module, load_solution_file
from gdn_bench.definitions.decode.definition import build_definition
from gdn_bench.definitions.mtp.mix import Verify, serving_mix_plan
from gdn_bench.serving_bench import serving_inputs
from gdn_bench.signature import empty_outputs, random_inputs
from gdn_bench.table_tuning import Probe, TableSweep, best_rows, plain, read_table, sweep, table_rows, write_table
from helpers import DEVICE, KERNEL_PATH, ROOT

PREFILL_PATH = KERNEL_PATH.parent / "prefill.py"
MTP_PATH = KERNEL_PATH.parent / "mtp.py"
tune_launch = load_module(ROOT / "scripts" / "tune_launch.py", "tune_launch_script")
LAUNCH_FIELDS = load_solution_file(KERNEL_PATH, "gdn_tuning_fields").LaunchRow._fields


def _row(max_batch, block_v, warps):
    return {"max_batch": max_batch, "block_v": block_v, "warps": warps}


def _records(timings):
    """Sweep records from {point: {(BV, warps): us}}, one probe per point."""
    return [{"probe": f"p{point}", "size": point[0], "point": list(point), "setting": {"block_v": bv, "warps": w},
             "us": us} for point, configs in timings.items() for (bv, w), us in configs.items()]


def test_ties_within_tolerance_keep_the_current_row():
    timings = {(1,): {(4, 1): 2.00, (8, 1): 2.50}, (4,): {(4, 1): 3.02, (16, 1): 3.00},
               (16,): {(4, 1): 6.00, (16, 1): 5.00}, (64,): {(4, 1): 20.0, (16, 1): 18.0}}
    assert best_rows(_records(timings), ("max_batch",)) == [_row(4, 4, 1), _row(None, 16, 1)]


def test_exact_winners_without_tolerance():
    timings = {(1,): {(4, 1): 2.0, (8, 1): 2.5}, (8,): {(4, 1): 5.0, (8, 1): 4.0}}
    assert best_rows(_records(timings), ("max_batch",), tolerance=0.0) == [_row(1, 4, 1), _row(None, 8, 1)]


def test_two_bounds_group_by_the_first_and_merge_equal_groups():
    """(mean, pairs) points: the mean-1 and mean-2 groups find the same rows and merge; the
    last group is unbounded in the mean, each group's last row in the pairs."""
    timings = {(1, 8): {(2, 1): 1.0, (16, 1): 2.0}, (1, 64): {(2, 1): 3.0, (16, 1): 2.0},
               (2, 8): {(2, 1): 1.0, (16, 1): 2.0}, (2, 64): {(2, 1): 3.0, (16, 1): 2.0},
               (8, 8): {(2, 1): 2.0, (16, 1): 1.0}}
    rows = best_rows(_records(timings), ("max_mean", "max_pairs"))
    assert [(r["max_mean"], r["max_pairs"], r["block_v"]) for r in rows] == [(2, 8, 2), (2, None, 16), (None, None, 16)]


def test_probes_at_one_point_add_up_and_a_setting_missing_on_one_is_left_out():
    records = _records({(1,): {(4, 1): 2.0, (8, 1): 1.0}})
    records += [dict(records[0], probe="second", us=5.0), dict(records[1], probe="second", us=None)]
    assert best_rows(records, ("max_batch",)) == [_row(None, 4, 1)]  # (8, 1) did not run on the second


class _Launch(NamedTuple):
    block_v: int
    warps: int


class _Row(NamedTuple):
    max_size: int | None
    launch: _Launch


def test_sweep_forces_each_setting_checks_and_times_it_and_restores_the_table():
    """A stand-in module whose call records the table it ran with; one setting computes wrong
    on the second probe, so it is left out of both, with why."""
    table = (_Row(4, _Launch(16, 1)), _Row(None, _Launch(32, 2)))
    module = SimpleNamespace(TABLE=table, seen=[])
    wrong = _Launch(8, 1)

    def probe(size):
        def make(m):
            def check():
                assert not (size == 2 and m.seen[-1].launch == wrong), "wrong outputs"
            return (lambda: m.seen.append(m.TABLE[0])), check
        return Probe(label=f"n={size}", size=size, point=(size,), make=make)

    spec = TableSweep(table="TABLE", bounds=("max_size",), candidates=lambda m: [dict(launch=_Launch(16, 1))],
                      probes=lambda m: [probe(1), probe(2)])
    timer = lambda call: (call(), float(module.TABLE[0].launch.block_v))[1]  # noqa: E731
    records = sweep(module, spec, spec.probes(module), timer=timer)
    assert [(r["probe"], r["point"], plain(r["setting"]), r["us"]) for r in records] == [
        ("n=1", [1], {"launch": {"block_v": 16, "warps": 1}}, 16.0), ("n=2", [2], {"launch": {"block_v": 16, "warps": 1}}, 16.0)]
    assert module.TABLE is table and {row.max_size for row in module.seen} == {None}
    spec = TableSweep(table="TABLE", bounds=("max_size",), candidates=lambda m: [dict(launch=_Launch(16, 1)),
                                                                                dict(launch=wrong)],
                      probes=spec.probes)
    records = sweep(module, spec, spec.probes(module), timer=timer)
    left_out = [r for r in records if r["setting"] == dict(launch=wrong)]
    assert [(r["probe"], r["us"], r["wrong"]) for r in left_out] == [
        ("n=1", None, "wrong on n=2: wrong outputs"), ("n=2", None, "wrong on n=2: wrong outputs")]
    assert best_rows(records, spec.bounds) == [{"max_size": None, "launch": _Launch(16, 1)}]
    assert module.TABLE is table


def test_settings_that_make_the_same_launches_are_timed_once():
    """With `launches`, a setting whose call makes the launches of an earlier one on the probe
    (here: every block_v above 16 launches as 16, as prefill's plan on sm100 does) takes that
    one's time and names it; the table kept per architecture is swept on its `arch` rows only."""
    tables = {"sm90": (_Row(None, _Launch(64, 4)),), "sm100": (_Row(None, _Launch(64, 4)),)}
    module = SimpleNamespace(TABLES=tables)
    timed = []

    def probe(m):
        return (lambda: None), (lambda: None)

    spec = TableSweep(table="TABLES", bounds=("max_size",),
                      candidates=lambda m: [dict(launch=_Launch(bv, 1)) for bv in (16, 32, 64)],
                      probes=lambda m: [Probe(label="n=1", size=1, point=(1,), make=probe)])

    def timer(call):
        timed.append(module.TABLES["sm100"][0].launch.block_v)
        return float(len(timed))

    def launches(call):
        return (min(module.TABLES["sm100"][0].launch.block_v, 16),)

    records = sweep(module, spec, spec.probes(module), finalists=1, repeats=0, timer=timer, arch="sm100",
                    launches=launches)
    assert timed == [16] and module.TABLES is tables and tables["sm90"] == (_Row(None, _Launch(64, 4)),)
    assert [(r["setting"]["launch"].block_v, r["us"], plain(r.get("same_launch_as"))) for r in records] == [
        (16, 1.0, None), (32, 1.0, {"launch": {"block_v": 16, "warps": 1}}),
        (64, 1.0, {"launch": {"block_v": 16, "warps": 1}})]


def test_every_config_fills_whole_vectors():
    for block_v, warps in decode_tuning.valid_configs():
        assert block_v * 128 // (32 * warps) >= 4


@pytest.mark.parametrize("tuning, path", [(decode_tuning, KERNEL_PATH), (prefill_tuning, PREFILL_PATH),
                                           (mtp_tuning, MTP_PATH)], ids=["decode", "prefill", "mtp"])
def test_each_sweep_matches_its_table_in_the_submission(tuning, path):
    """A table each sweep names exists, is written as named rows, its bound fields come first
    in its rows, and every candidate setting makes a row: what tune_launch needs of a file
    (when the submission's tables change, the definition's tuning module changes with them)."""
    module = load_solution_file(path, f"gdn_tuning_{path.stem}")
    text = path.read_text(encoding="utf-8")
    for name, spec in tuning.SWEEPS.items():
        table = getattr(module, spec.table)
        assert spec.table == name
        for arch in table if isinstance(table, dict) else (None,):  # a table per architecture: each one's
            assert read_table(text, name, arch)
            row_class = type(table_rows(module, name, arch)[0])
            assert row_class._fields[:len(spec.bounds)] == spec.bounds
            for setting in spec.candidates(module):
                row = row_class(**dict.fromkeys(spec.bounds), **setting)
                assert set(row._fields) == set(spec.bounds) | set(setting)


def test_mtp_probes_are_the_serving_mix_calls_by_batch_size():
    """mtp's LAUNCH_TABLES is tuned on the generated mix's calls, at the point of their batch
    size (the bound max_batch), selected by --batch-sizes."""
    probes = mtp_tuning.SWEEPS["LAUNCH_TABLES"].probes(None)
    plan = serving_mix_plan()
    assert [p.label for p in probes] == [f"B={v.batch_size} T={v.seq_len}" for v in plan]
    assert [(p.size, p.point) for p in probes] == [(v.batch_size, (v.batch_size,)) for v in plan]


def test_an_mtp_probe_checks_the_call_it_times(monkeypatch):
    """A probe of mtp.py's table (here the smallest call, on the test device) passes its check
    after its call, and fails it when an output element is off by more than the tolerance."""
    monkeypatch.setattr(mtp_tuning, "serving_inputs", functools.partial(serving_inputs, device=DEVICE))
    module = load_solution_file(MTP_PATH, "gdn_tuning_mtp_probe")
    call, check = mtp_tuning._probe(Verify(batch_size=1, seq_len=2, pool_size=3)).make(module)
    call()
    check()
    right = module.pooled_mtp

    def off_by_one(*args):
        right(*args)
        args[-2][0, 0, 0, 0] += 1  # output

    monkeypatch.setattr(module, "pooled_mtp", off_by_one)
    call()
    with pytest.raises(AssertionError, match="worst margin"):
        check()


def _kernel_copy(tmp_path):
    """kernel.py and the modules it imports (shared.py and the direct_launch.py and tensor_guards.py
    that it imports), in a folder of their own."""
    for module in ("shared.py", "direct_launch.py", "tensor_guards.py"):
        shutil.copy(KERNEL_PATH.parent / module, tmp_path)
    return Path(shutil.copy(KERNEL_PATH, tmp_path))


def test_write_table_round_trip(tmp_path):
    """The tuner rewrites one architecture's rows of kernel.py's table as named rows, leaves the
    rest of the file as it was, and the module loads with the new rows."""
    path = _kernel_copy(tmp_path)
    original = KERNEL_PATH.read_text()
    table = [_row(8, 4, 1), _row(None, 32, 2)]
    write_table(table, path, "LAUNCH_TABLES", LAUNCH_FIELDS, "sm100")
    text = path.read_text()
    new = ('    "sm100": (\n        LaunchRow(max_batch=8, block_v=4, warps=1),\n'
           '        LaunchRow(max_batch=None, block_v=32, warps=2),\n    ),\n')
    assert new in text and read_table(text, "LAUNCH_TABLES", "sm100") == table
    start = original.index('    "sm100": (')
    end = original.index("\n    ),\n", start) + 8
    assert text.replace(new, "") == original.replace(original[start:end], "")
    module = load_solution_file(path, "gdn_submission_tuned")
    assert module.LAUNCH_TABLES["sm100"] == (module.LaunchRow(8, 4, 1), module.LaunchRow(None, 32, 2))
    assert module.LAUNCH_TABLES["sm90"] == load_solution_file(KERNEL_PATH, "gdn_submission_now").LAUNCH_TABLES["sm90"]


def test_write_table_writes_namedtuple_settings_by_their_class(tmp_path):
    path = tmp_path / "tables.py"
    path.write_text("TABLE = (\n    _Row(max_size=None, launch=_Launch(block_v=16, warps=1)),\n)\n")
    write_table([{"launch": _Launch(32, 2), "max_size": 4}, {"max_size": None, "launch": _Launch(64, 4)}], path, "TABLE",
                _Row._fields)
    assert path.read_text().endswith("TABLE = (\n    _Row(max_size=4, launch=_Launch(block_v=32, warps=2)),\n"
                                     "    _Row(max_size=None, launch=_Launch(block_v=64, warps=4)),\n)\n")


@pytest.mark.parametrize("table, error", [
    ([{"max_batch": None, "block_v": 16}], "has the fields"),
    ([{"max_batch": None, "bv": 16, "warps": 1}], "has the fields"),
])
def test_write_table_refuses_rows_that_are_not_its_rows(tmp_path, table, error):
    path = _kernel_copy(tmp_path)
    with pytest.raises(ValueError, match=error):
        write_table(table, path, "LAUNCH_TABLES", LAUNCH_FIELDS, "sm90")
    assert path.read_text() == KERNEL_PATH.read_text()


def test_write_table_refuses_a_positional_table_and_an_architecture_it_has_not(tmp_path):
    path = tmp_path / "kernel.py"
    text = KERNEL_PATH.read_text()
    start = text.index("LAUNCH_TABLES = {")
    path.write_text(text[:start] + "LAUNCH_TABLES = {\n    'sm90': (\n        (16, 4, 1),\n    ),\n}\n"
                    + text[text.index("\n}\n", start) + 3:])
    with pytest.raises(ValueError, match=r"is not Row\(name=value, ...\)"):
        write_table([_row(None, 16, 1)], path, "LAUNCH_TABLES", LAUNCH_FIELDS, "sm90")
    with pytest.raises(ValueError, match=r"LAUNCH_TABLES has no rows for 'sm120'; it has 'sm90'"):
        write_table([_row(None, 16, 1)], path, "LAUNCH_TABLES", LAUNCH_FIELDS, "sm120")


@pytest.mark.parametrize("argv, error", [
    (["--definition", "prefill", "--table", "LAUNCH_TABLES"],
     "argument --table: prefill has no table LAUNCH_TABLES; it has PREP_TABLE, PASS_TABLE, SUMMARY_TABLE, FIXUP_TABLE, "
     "HOPPER_PASS_TABLE, WALK_TABLE"),
    (["--seq-lens", "6"], "argument --seq-lens: not a flag of decode; its sizes are --batch-sizes"),
    (["--definition", "mtp", "--table", "PASS_TABLE"], "argument --table: mtp has no table PASS_TABLE; "
                                                       "it has LAUNCH_TABLES"),
    (["--definition", "mtp", "--seq-lens", "6"], "argument --seq-lens: not a flag of mtp; its sizes are --batch-sizes"),
])
def test_tune_launch_refuses_what_the_definition_has_not(argv, error, capsys):
    with pytest.raises(SystemExit) as e:
        tune_launch.main(argv)
    assert e.value.code == 2 and capsys.readouterr().err.strip().endswith(error)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal without a GPU")
def test_tune_launch_needs_a_gpu(tmp_path, capsys):
    assert tune_launch.main(["--definition", "prefill", "--out", str(tmp_path / "t.json")]) == 2
    assert capsys.readouterr().err == "tune_launch: error: needs a CUDA GPU\n"


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

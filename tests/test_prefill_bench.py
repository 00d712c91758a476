"""scripts/bench_prefill.py's pieces on CPU (the benchmark itself needs a GPU): the shape grid,
the even split, variants of prefill.py, the table, and the one-line refusal without a GPU."""

import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from gdn_bench import prefill_bench
from gdn_bench import prefill_variants as variants
from gdn_bench.bench_sizes import PREFILL_NUM_SEQS, PREFILL_SEQ_LENS
from helpers import ROOT


def test_grid_skips_more_sequences_than_tokens():
    assert prefill_bench.grid((6, 64), (1, 4, 32)) == [(6, 1), (6, 4), (64, 1), (64, 4), (64, 32)]
    assert len(prefill_bench.grid(PREFILL_SEQ_LENS, PREFILL_NUM_SEQS)) == 17


@pytest.mark.parametrize("total, count", [(6, 4), (300, 32), (8192, 32), (7, 7)])
def test_even_lengths(total, count):
    lengths = prefill_bench.even_lengths(total, count)
    assert sum(lengths) == total and len(lengths) == count and max(lengths) - min(lengths) <= 1
    assert lengths == sorted(lengths, reverse=True)


def test_parse_config_takes_the_listed_settings_only():
    parsed = variants.parse_config("CHUNK=32, SPAN_MIN_BLOCKS=2,SPAN_MAX=(8)")
    assert parsed == {"CHUNK": 32, "SPAN_MIN_BLOCKS": 2, "SPAN_MAX": 8}
    for bad in ("CHUNK", "=3", "CHUNK=thirty", "1A=2", "", "CHUNK=1), f(2", "**x"):
        with pytest.raises(ValueError, match="expected"):
            variants.parse_config(bad)
    for name in ("_CHUNK", "PREP_WARPS", "PASS_TABLE", "SUMMARY_TABLE"):
        with pytest.raises(ValueError, match=rf"^{name}: not a setting --config takes; it takes CHUNK, WALK_MAX_TOKENS, "):
            variants.parse_config(f"{name}=2")


def test_every_setting_is_the_submissions_in_its_form_and_takes_its_value_there():
    """SETTINGS follows prefill.py: each a public integer setting of the file whose value in
    the file passes its own check."""
    module = variants.load_variant({}, 0)
    for name in variants.SETTINGS:
        value = getattr(module, name)
        assert not name.startswith("_") and type(value) is int, (name, value)
        variants.check_setting(name, value)


BAD_SETTINGS = {  # --config text -> what the one line says the setting takes
    "CHUNK=0": "CHUNK (tokens per block): expected a power of two from 16 to 128, got 0",
    "CHUNK=48": "CHUNK (tokens per block): expected a power of two from 16 to 128, got 48",
    "CHUNK=100000": "CHUNK (tokens per block): expected a power of two from 16 to 128, got 100000",
    "CHUNK=True": "CHUNK (tokens per block): expected a power of two from 16 to 128, got True",
    "CHUNK=64.0": "CHUNK (tokens per block): expected a power of two from 16 to 128, got 64.0",
    "WALK_MAX_TOKENS=-2": "WALK_MAX_TOKENS (calls of at most this many tokens walk them; -1: none): expected an "
                          "integer >= -1, got -2",
    "SPAN_MIN_BLOCKS=0": "SPAN_MIN_BLOCKS (blocks per span, at least): expected an integer >= 1, got 0",
    "SPAN_PIECES=4096": "SPAN_PIECES ((sequence, span) pieces per call, at most): expected an integer from 0 to 1024, "
                        "got 4096",
    "SPAN_MAX=(16,8)": "SPAN_MAX (spans a call is cut into, about (so per sequence at most); below 2: none): "
                       "expected an integer from 0 to 1024, got (16, 8)",
}


@pytest.mark.parametrize("text, message", BAD_SETTINGS.items(), ids=BAD_SETTINGS)
def test_a_value_a_setting_does_not_take_is_one_line_naming_it(text, message):
    with pytest.raises(ValueError) as error:
        variants.parse_config(text)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_the_values_the_readme_and_the_tests_use_are_taken():
    assert variants.parse_config("SPAN_MAX=8,WALK_MAX_TOKENS=-1,SPAN_MIN_TOKENS=1,SPAN_PIECES=1024,CHUNK=64,"
                                 "SPAN_MIN_BLOCKS=2")


def test_variants_set_listed_settings(tmp_path, monkeypatch):
    source = tmp_path / "prefill.py"
    source.write_text("CHUNK = 64\nSPAN_MIN_BLOCKS = (4, 8)\n\ndef kernel(*args):\n    return CHUNK\n")
    monkeypatch.setattr(variants, "PREFILL", SimpleNamespace(submission_entry=lambda: source))
    base, variant = variants.load_variant({}, 0), variants.load_variant({"CHUNK": 16}, 1)
    assert base.kernel() == 64 and variant.kernel() == 16
    assert variants.variant_label({"CHUNK": 16}) == "ours[CHUNK=16]" and variants.variant_label({}) == "ours"
    for config, message in (({"CHUNKS": 16}, "CHUNKS: not a setting --config takes; it takes CHUNK, "),
                            ({"SPAN_MAX": 16}, "prefill.py has no integer setting 'SPAN_MAX' that --config takes"),
                            ({"SPAN_MIN_BLOCKS": 2}, "prefill.py has no integer setting 'SPAN_MIN_BLOCKS'"),
                            ({"CHUNK": 1.5}, r"CHUNK \(tokens per block\): expected a power of two")):
        with pytest.raises(ValueError, match=message):
            variants.load_variant(config, 2)


def test_table_marks_what_was_not_measured():
    rows = [{"T": 6, "N": 1, "variant": "ours", "ours_us": 9.0, "fi-baseline_us": 300.0, "x_fi-baseline": 33.3,
             "deterministic": True, "margin_f64": 0.1, "margin_f32": 0.05},
            {"T": 6, "N": 1, "variant": "ours[CHUNK=16]", "ours_us": 8.0, "ours_graph_us": 7.0, "ours_ksum_us": 6.0,
             "deterministic": False, "margin_f64": 0.2, "margin_f32": 0.1}]
    lines = prefill_bench.format_rows(rows).splitlines()
    assert len(lines) == 3 and "×FI" in lines[0] and "FI graph" in lines[0] and "33.30" in lines[1] and " yes" in lines[1]
    assert lines[1].split()[2:4] == ["-", "-"] and lines[1].split()[6:8] == ["-", "-"]
    assert lines[2].split()[5:8] == ["8.0", "7.0", "6.0"] and lines[2].split()[8:20] == ["-"] * 12 and " NO" in lines[2]


def test_table_shows_lengths_as_runs_and_the_decode_ratio():
    rows = [{"T": 64, "N": 16, "lengths": [49] + [1] * 15, "variant": "ours", "ours_us": 9.0, "decode_us": 6.0,
             "x_decode": 1.5}]
    assert prefill_bench.runs([449] + [1] * 63) == "449+63×1" and prefill_bench.runs([512] * 16) == "16×512"
    assert prefill_bench.runs([3, 0, 0, 5]) == "3+2×0+5"
    cells = prefill_bench.format_rows(rows).splitlines()[1].split()
    assert cells[2] == "49+15×1" and cells[15:17] == ["6.0", "1.50"]


def test_default_shapes_are_lengths():
    shapes = prefill_bench.default_shapes()
    assert [1, 8191] in shapes and [8192] in shapes and [512] * 16 in shapes
    assert shapes[:len(prefill_bench.SHORT_SHAPES)] == [list(s) for s in prefill_bench.SHORT_SHAPES]
    grid = shapes[len(prefill_bench.SHORT_SHAPES):]
    assert all(sum(s) == t and len(s) == n for s, (t, n) in zip(grid, prefill_bench.DEFAULT_SHAPES) if s != [1, 8191])
    assert [1] * 512 in shapes and [4] * 64 in shapes and [449] + [1] * 63 in shapes


def test_a_bad_config_is_refused_before_the_gpu_is_looked_for():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_prefill.py"), "--config", "CHUNK=48"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.endswith(
        "bench_prefill: error: argument --config: CHUNK (tokens per block): expected a power of two from 16 to "
        "128, got 48\n")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
def test_refuses_without_gpu():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_prefill.py")],
                            capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr == "bench_prefill: error: needs a CUDA GPU (CUPTI timing)\n"

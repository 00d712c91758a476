"""scripts/bench_serving.py's pieces that run without a GPU (the benchmark itself needs one):
the tables, the notes and the verdicts on issue 29's targets, the prefill calls' names and
flag, and the refusal on CPU."""

import pytest
import torch

from gdn_bench.algos import load_module
from gdn_bench.serving_bench import (DECODE_COLUMNS, MTP_COLUMNS, PREFILL_COLUMNS, call_name, format_rows, notes,
                                     verdicts)
from helpers import ROOT

DECODE_ROWS = [{"batch_size": 1, "dense_us": 4.0, "pooled_us": 4.1, "pooled_vs_dense": 1.025, "same_as_dense": True},
               {"batch_size": 64, "dense_us": 20.0, "pooled_us": 21.0, "pooled_vs_dense": 1.05,
                "pooled_graph_note": "not capturable (RuntimeError: x)"}]
MTP_ROWS = [{"batch_size": 1, "seq_len": 2, "ours_us": 5.0, "fi_us": 6.0, "fi_vs_ours": 1.2, "decode_steps_us": 9.0,
             "ours_vs_decode_steps": 0.56},
            {"batch_size": 16, "seq_len": 8, "ours_us": 30.0, "fi_us": 27.0, "fi_vs_ours": 0.9, "decode_steps_us": 29.0,
             "ours_vs_decode_steps": 1.03}]

PREFILL_ROWS = [{"call": "1 × 6", "dense_us": 10.0, "pooled_us": 10.2, "pooled_vs_dense": 1.02, "same_as_dense": True},
                {"call": "[1, 8191]", "dense_us": 300.0, "pooled_us": 312.0, "pooled_vs_dense": 1.04,
                 "pooled_graph_note": "not capturable (RuntimeError: y)"}]


def test_tables_show_a_dash_for_what_was_not_measured():
    table = format_rows(DECODE_ROWS, DECODE_COLUMNS).splitlines()
    assert len(table) == 3 and "1.025" in table[1] and "True" in table[1] and table[2].split()[-1] == "-"
    assert "0.56" in format_rows(MTP_ROWS, MTP_COLUMNS)
    assert format_rows(PREFILL_ROWS, PREFILL_COLUMNS).splitlines()[1].split()[:4] == ["1", "×", "6", "10.00"]


def test_verdicts_name_where_a_target_is_missed():
    assert verdicts({"pooled_decode": DECODE_ROWS, "mtp": MTP_ROWS}) == [
        "pooled decode within 3% of dense at every batch size: missed (worst B=64: 1.050)",
        "MTP no slower than FlashInfer's: missed at B=16 T=8",
        "MTP below T calls of pooled decode: missed at B=16 T=8",
    ]
    met = verdicts({"pooled_decode": DECODE_ROWS[:1], "mtp": MTP_ROWS[:1]})
    assert all(line.split(": ")[1].startswith("met") for line in met)
    assert "not measured" in verdicts({"pooled_decode": DECODE_ROWS, "mtp": [{"ours_vs_decode_steps": 0.5}]})[1]
    assert verdicts({"pooled_decode": DECODE_ROWS, "mtp": MTP_ROWS, "pooled_prefill": PREFILL_ROWS})[3] == (
        "pooled prefill within 3% of dense on every call (decode's target): missed (worst [1, 8191]: 1.040)")


def test_notes_say_which_call_could_not_be_captured():
    assert notes(DECODE_ROWS) == ["B=64 pooled_graph: not capturable (RuntimeError: x)"]
    assert notes(MTP_ROWS + PREFILL_ROWS) == ["[1, 8191] pooled_graph: not capturable (RuntimeError: y)"]


def test_prefill_calls_are_named_and_taken_from_the_flag():
    assert (call_name((16, 16, 16, 16)), call_name((1, 8191))) == ("4 × 16", "[1, 8191]")
    calls = load_module(ROOT / "scripts" / "bench_serving.py", "bench_serving_script")._calls("6;75,75;8192")
    assert calls == [(6,), (75, 75), (8192,)]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without a GPU")
def test_refuses_without_a_gpu(capsys, tmp_path):
    main = load_module(ROOT / "scripts" / "bench_serving.py", "bench_serving_script").main
    assert main(["--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "bench_serving: error: needs a CUDA GPU (CUPTI timing, CUDA graphs)\n"


def test_the_host_cost_report_names_absent_baselines_and_missed_targets():
    from gdn_bench.host_cost import host_cost_report

    rows = [{"call": "1 × 6", "kernel_launches": 1, "kernel_host_us": 12.0, "pooled_host_us": 16.5,
             "fla_note": "absent (ModuleNotFoundError: No module named 'fla')"},
            {"call": "1 × 300", "kernel_launches": 2, "kernel_host_us": 30.0, "pooled_host_us": 35.0, "fi_host_us": 300.0}]
    text = host_cost_report({"rows": rows, "calls": 50, "warmup": 5, "versions": {}}, "GPU").splitlines()
    assert text[2].split()[:6] == ["1", "×", "6", "12.0", "16.5", "-"] and "300.0" in text[3]
    assert text[4:] == ["1 × 6 fla: absent (ModuleNotFoundError: No module named 'fla')",
                        "token walk at most 15 µs per call: missed: 1 × 6 pooled 16.5",
                        "chunked path at most 40 µs per call: met"]

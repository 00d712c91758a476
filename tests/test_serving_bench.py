"""scripts/bench_serving.py's pieces that run without a GPU (the benchmark itself needs one):
the tables, the notes and the verdicts on issue 29's targets, the prefill calls' names and
flag, the refusal on CPU; and FLA beside ours: its rows built with fake timers, submissions and
FLA calls (the fake FLA computes what FLA 0.6.0's calls compute, in float64), its tables, and
the line saying it is absent."""

import sys
from types import SimpleNamespace

import pytest
import torch

import gdn_bench.serving_bench as serving_bench
from gdn_bench.algos import load_module
from gdn_bench.definitions.mtp.reference import gdn_mtp
from gdn_bench.definitions.prefill.reference import gdn_prefill
from gdn_bench.fla_serving import Fla, draft_slots, load_fla
from gdn_bench.serving_bench import (DECODE_COLUMNS, MTP_COLUMNS, PREFILL_COLUMNS, call_name, fla_tables, format_rows,
                                     notes, verdicts)
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
    text = host_cost_report({"rows": rows, "calls": 50, "warmup": 5, "rounds": 5, "versions": {}}, "GPU").splitlines()
    assert text[2].split()[:6] == ["1", "×", "6", "12.0", "16.5", "-"] and "300.0" in text[3]
    assert text[4:] == ["1 × 6 fla: absent (ModuleNotFoundError: No module named 'fla')",
                        "token walk at most 15 µs per call: missed: 1 × 6 pooled 16.5",
                        "chunked path at most 40 µs per call: met"]


def _fake_pooled(*, q, k, v, g, beta, A_log, dt_bias, initial_state, scale, inplace_final_state, state_v_first,
                 ssm_state_indices, use_gate_in_kernel, use_beta_sigmoid_in_kernel, out):
    """fused_recurrent_kda_fwd as FLA 0.6.0's source reads, in float64, for gates equal over K:
    row n starts from initial_state[indices[n, 0]] and leaves the state after token t in
    initial_state[indices[n, t]]."""
    assert inplace_final_state and state_v_first and use_gate_in_kernel and use_beta_sigmoid_in_kernel
    assert g.shape == (*beta.shape, k.shape[-1]) and torch.equal(g, g[..., :1].expand_as(g))
    assert torch.equal(dt_bias, dt_bias[:, :1].expand_as(dt_bias))
    indices = ssm_state_indices.view(q.shape[0], -1).long()
    output, states = gdn_mtp(q, k, v, initial_state, indices[:, 0], A_log, g[..., 0], dt_bias[:, 0], beta, scale)
    out.copy_(output)
    initial_state[indices] = states.float()


def _fake_recurrent(q, k, v, state, A_log, a, dt_bias, b, scale):
    """baselines/decode/fla_lib's run: dense states in, (output, final states) out."""
    output, states = gdn_mtp(q, k, v, state, torch.arange(q.shape[0]), A_log, a, dt_bias, b, scale)
    return output.bfloat16(), states[:, -1].float()


def _fake_chunk(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    """baselines/prefill/fla_chunk's run."""
    output, final = gdn_prefill(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale)
    return output.bfloat16(), final.float()


def _no_call(*args, **kwargs):
    """A submission's entry point that the row calls but this test does not check."""


SUBMISSION = SimpleNamespace(kernel=_no_call, pooled_decode=_no_call, pooled_mtp=_no_call, pooled_prefill=_no_call)
FLA = Fla("0.6.0", _fake_pooled, _fake_recurrent, _fake_chunk)


@pytest.fixture
def fake_timers(monkeypatch):
    monkeypatch.setattr(serving_bench, "kernel_time_us", lambda fn: 4.0)
    monkeypatch.setattr(serving_bench, "graph_replay_us", lambda fn: 2.0)


def _fla_entries(row: dict, name: str) -> None:
    """The row holds FLA call `name` timed, and its output and states close to float64."""
    assert (row[f"{name}_us"], row[f"{name}_graph_us"], row[f"{name}_vs_ours"]) == (4.0, 2.0, 1.0)
    assert row[f"{name}_out_rel_err"] < 2.0**-7 and row[f"{name}_state_rel_err"] < 1e-6


def test_fla_rows_hold_its_calls_times_and_errors(fake_timers, device):
    decode = serving_bench.pooled_decode_row(SUBMISSION, None, FLA, 3, device=device)
    _fla_entries(decode, "fla_indexed")
    _fla_entries(decode, "fla_gathered")
    mtp = serving_bench.mtp_row(SUBMISSION, SUBMISSION, None, FLA, 2, 3, device=device)
    _fla_entries(mtp, "fla_indexed")
    prefill = serving_bench.pooled_prefill_row(SUBMISSION, FLA, (5, 2), device=device)
    _fla_entries(prefill, "fla_gathered")
    result = {"pooled_decode": [decode], "mtp": [mtp], "pooled_prefill": [prefill], "fla": {"version": "0.6.0"}}
    tables = fla_tables(result).split("\n\n")
    assert tables[0].startswith("FLA 0.6.0 beside ours") and len(tables) == 4
    assert [len(t.splitlines()) for t in tables[1:]] == [3, 3, 3]
    assert "no chunked call over a pool" in tables[3] and tables[3].splitlines()[2].split()[:3] == ["[5,", "2]", "4.00"]


def test_an_fla_call_that_fails_is_a_note(fake_timers, device):
    def failing(**kwargs):
        raise RuntimeError("no kernel\nfor this")

    row = serving_bench.mtp_row(SUBMISSION, SUBMISSION, None, FLA._replace(pooled=failing), 1, 2, device=device)
    assert notes([row]) == ["B=1 T=2 fla_indexed: RuntimeError: no kernel"]
    assert not any(key.startswith("fla_indexed_") and key != "fla_indexed_note" for key in row)
    cells = format_rows([row], serving_bench.MTP_FLA_COLUMNS).splitlines()[1].split()
    fla_cells = [cell for cell, (_, key, _) in zip(cells, serving_bench.MTP_FLA_COLUMNS) if key.startswith("fla_")]
    assert fla_cells == ["-"] * 5


def test_draft_slots_give_each_token_its_own_slot():
    slots = torch.tensor([5, 1], dtype=torch.int32)
    indices = draft_slots(slots, 3, 12)
    assert indices.dtype == torch.int32 and indices.tolist() == [[5, 12, 13], [1, 14, 15]]
    assert draft_slots(slots, 1, 12).tolist() == [[5], [1]]


def test_without_fla_the_tables_say_it_is_absent(monkeypatch):
    for name in [m for m in sys.modules if m == "fla" or m.startswith("fla.")] + ["fla"]:
        monkeypatch.setitem(sys.modules, name, None)
    fla, why = load_fla()
    assert fla is None and why.startswith("ModuleNotFoundError: ")
    assert fla_tables({"fla": {"absent": why}}) == f"FLA: absent ({why}): no FLA tables"

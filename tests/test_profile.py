"""scripts/profile_call.py (gdn_bench.profiling) on CPU: its arguments and refusals, and the parsing
behind each mode's table: ncu's CSV pages, Proton's PC-sampling tree and torch.profiler's
Chrome trace. The ncu and Proton samples under tests/data/profile are synthetic (see the
README there); the profiling itself needs a GPU."""

import json
import re
import sys

import pytest
import torch

from gdn_bench import kernel_breakdown, ncu_summary, profiling, proton_lines
from gdn_bench.profile_target import Target
from gdn_bench.timing import split_calls
from helpers import ROOT

DATA = ROOT / "tests" / "data" / "profile"
SCRIPT = ROOT / "scripts" / "profile_call.py"
NCU_RAW = DATA / "ncu_raw_prefill_T8192_N1.csv"
NCU_DETAILS = DATA / "ncu_details_prefill_T8192_N1.csv"
PROTON = DATA / "proton_prefill_T8192_N1.hatchet"
REAL_NCU_RAW = DATA / "ncu_raw_span_summary_T8192_N1_h100.csv"  # made on an H100 (README there)
REAL_PROTON = DATA / "proton_prefill_T8192_N1_h100.hatchet"


def _target(argv):
    parser = profiling.build_parser(ROOT)
    return profiling.target_from_args(parser, parser.parse_args(argv))


def test_synthetic_samples_name_the_submission_s_kernels():
    """The synthetic samples (and this file's trace) name kernels that solution/triton defines."""
    sources = "".join(path.read_text() for path in (ROOT / "solution" / "triton").glob("*.py"))
    defined = set(re.findall(r"^def (\w+_kernel)\(", sources, re.MULTILINE))
    named = {k.name for sample in (NCU_RAW, NCU_DETAILS) for k in ncu_summary.parse_csv(sample.read_text())}
    named |= {h.function for h in proton_lines.hot_lines(json.loads(PROTON.read_text()), ".")}
    named |= {event["name"] for event in _trace()["traceEvents"] if event["name"].endswith("_kernel")}
    assert named and named <= defined, sorted(named - defined)


# --- arguments -------------------------------------------------------------------------------

def test_defaults_name_the_submission_at_the_issue_shapes():
    decode, prefill = _target([]), _target(["--definition", "prefill"])
    assert decode == Target("decode", "fla-recurrent", batch_size=64)
    assert prefill == Target("prefill", "triton-chunked", lengths=(8192,))
    assert decode.file_stem() == "decode-fla-recurrent-B64" and prefill.label() == "prefill triton-chunked T=8192 N=1"


def test_prefill_shapes_even_split_or_explicit_lengths():
    even = _target(["--definition", "prefill", "-T", "64", "-N", "3", "--algo", "fi-baseline"])
    assert even.lengths == (22, 21, 21) and even.shape() == "T=64 N=3"
    assert even.file_stem() == "prefill-fi-baseline-T64-N3"
    explicit = _target(["--definition", "prefill", "--lengths", "1,8191"])
    assert explicit.shape() == "T=8192 N=2 lengths=1,8191"
    assert explicit.file_stem() == "prefill-triton-chunked-T8192-N2-L1_8191"
    with_empty = _target(["--definition", "prefill", "--lengths", "5,0,7"])
    assert with_empty.lengths == (5, 0, 7)
    many = _target(["--definition", "prefill", "--lengths", ",".join(["3"] * 9 + ["4"])])
    assert many.file_stem().startswith("prefill-triton-chunked-T31-N10-L") and len(many.file_stem()) < 50


def test_config_variant_merges_and_names_itself():
    target = _target(["--definition", "prefill", "-T", "64", "--config", "CHUNK=16,WALK_MAX_TOKENS=8",
                      "--config", "SPAN_MIN_BLOCKS=2,SPAN_MAX=8"])
    assert target.config == {"CHUNK": 16, "WALK_MAX_TOKENS": 8, "SPAN_MIN_BLOCKS": 2, "SPAN_MAX": 8}
    assert target.variant() == "triton-chunked[CHUNK=16,WALK_MAX_TOKENS=8,SPAN_MIN_BLOCKS=2,SPAN_MAX=8]"
    assert target.file_stem() == "prefill-triton-chunked_CHUNK_16_WALK_MAX_TOKENS_8_SPAN_MIN_BLOCKS_2_SPAN_MAX_8-T64-N1"


@pytest.mark.parametrize("argv", [
    [], ["--definition", "prefill", "--lengths", "5,0,7", "--algo", "fla-chunk"],
    ["--definition", "prefill", "-T", "64", "--config", "CHUNK=16,SPAN_MIN_BLOCKS=2"],
])
def test_target_argv_names_the_same_target_again(argv, tmp_path):
    """--mode ncu re-runs the script with target_argv: it must parse back to the same target."""
    parser = profiling.build_parser(ROOT)
    args = parser.parse_args([*argv, "--seed", "7"])
    target = profiling.target_from_args(parser, args)
    again = parser.parse_args([*profiling.target_argv(target, args), "--under-ncu"])
    assert profiling.target_from_args(parser, again) == target and again.seed == 7 and again.under_ncu


@pytest.mark.parametrize("argv, message", [
    (["--algo", "triton-chunked"], "argument --algo: decode has no algorithm 'triton-chunked'; valid: fla-recurrent"),
    (["-T", "64"], "argument --seq-len: applies to --definition prefill; decode takes --batch-size"),
    (["--lengths", "1,2"], "argument --lengths: applies to --definition prefill"),
    (["--definition", "prefill", "-B", "4"], "argument --batch-size: applies to --definition decode"),
    (["--definition", "prefill", "--lengths", "1,2", "-N", "2"], "give either --lengths or --seq-len/--num-seqs"),
    (["--definition", "prefill", "-T", "4", "-N", "8"], "argument --num-seqs: 8 sequences need at least 8 tokens"),
    (["--definition", "prefill", "--lengths", "0,0"], "expected lengths >= 0 with at least one token"),
    (["--definition", "prefill", "--lengths", "3,-1"], "expected lengths >= 0"),
    (["--definition", "prefill", "--lengths", "3,x"], "expected comma-separated sequence lengths"),
    (["--config", "CHUNK=16"], "argument --config: variants are of the prefill submission (triton-chunked) only"),
    (["--definition", "prefill", "--algo", "fi-baseline", "--config", "CHUNK=16"], "variants are of the prefill"),
    (["--definition", "prefill", "--config", "CHUNK"], "argument --config: expected NAME=VALUE"),
    (["--definition", "prefill", "--config", "PREP_WARPS=8"], "argument --config: PREP_WARPS: not a setting --config takes"),
    (["--definition", "prefill", "--config", "CHUNK=48"],
     "argument --config: CHUNK (tokens per block): expected a power of two from 16 to 128, got 48"),
    (["--kernel", "(unclosed"], "argument --kernel: not a regular expression"),
    (["--sections", "SpeedOfLight,not a section"], "argument --sections: expected comma-separated ncu section"),
    (["--mode", "nsys"], "argument --mode: invalid choice: 'nsys'"),
    (["-B", "0"], "argument -B/--batch-size: expected a positive integer, got 0"),
])
def test_bad_flags_one_message_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        profiling.main(argv, script=SCRIPT)
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and "Traceback" not in err


def _main(argv, capsys):
    code = profiling.main(argv, script=SCRIPT)
    return code, capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusals without a GPU")
def test_refuses_without_gpu_or_ncu_in_one_line(capsys, monkeypatch, tmp_path):
    assert _main(["--out", str(tmp_path)], capsys) == (2, "profile_call: error: needs a CUDA GPU\n")
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no ncu
    code, err = _main(["--mode", "ncu", "--out", str(tmp_path)], capsys)
    assert code == 2 and err.startswith("profile_call: error: ncu (Nsight Compute) is not on PATH: install")
    assert err.count("\n") == 1
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert _main(["--mode", "ncu", "--out", str(tmp_path)], capsys) == (2, "profile_call: error: needs a CUDA GPU\n")


def test_proton_missing_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton.profiler", None)  # import fails, as in a triton without Proton
    with pytest.raises(proton_lines.ProtonError, match=r"Proton profiler cannot be imported in triton .*install a "):
        proton_lines.proton()


def test_permission_errors_say_how_to_get_permission():
    output = ("==PROF== Connected to process 4242 (/usr/bin/python3)\n==ERROR== ERR_NVGPUCTRPERM - The user does "
              "not have permission to access NVIDIA GPU Performance Counters on the target device 0.\n")
    assert ncu_summary.failure(output, 1, ".") == ncu_summary.PERMISSION
    assert "NVreg_RestrictProfilingToAdminUsers=0" in ncu_summary.PERMISSION
    reason = proton_lines._reason(RuntimeError("[PROTON] CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"))
    assert reason.startswith("no permission for CUPTI's PC sampling: run as root")


def test_ncu_failures_are_one_line():
    assert ncu_summary.failure("==PROF== Disconnected from process 1\n", 0, ".") is None
    assert ncu_summary.failure("==WARNING== No kernels were profiled.\n", 0, "prep") == \
        "ncu profiled no kernel: none of the call's kernels matched --kernel 'prep'"
    assert ncu_summary.failure("==ERROR== Failed to find section 'Roofline'\n==ERROR== Bad section\n", 1, ".") == \
        "ncu: Bad section"
    assert ncu_summary.failure("Traceback (most recent call last):\nValueError: boom\n", 1, ".") == \
        "the profiled command failed with status 1: ValueError: boom"


def test_ncu_command_profiles_only_the_bracketed_call():
    command = ncu_summary.profile_command("ncu", DATA / "r", "chunk|summary", ("SpeedOfLight", "Occupancy"),
                                          ["--clock-control", "none"], ["python", "profile.py"])
    text = " ".join(command)
    assert "--profile-from-start off" in text and "--kernel-name regex:chunk|summary" in text
    assert "--section SpeedOfLight --section Occupancy --clock-control none python profile.py" in text
    report = DATA / "r.ncu-rep"
    assert ncu_summary.export_command("ncu", report) == ["ncu", "--import", str(report), "--page", "raw", "--csv",
                                                         "--print-units", "base"]


# --- ncu's CSV ------------------------------------------------------------------------------

def test_raw_page_summary():
    kernels = ncu_summary.parse_csv(NCU_RAW.read_text())
    assert [k.name for k in kernels] == ["chunk_prep_kernel", "span_summary_kernel", "span_pass_kernel"]
    prep, summary, _ = (ncu_summary.summarize(k) for k in kernels)
    assert summary.duration_us == pytest.approx(61.472) and summary.dram_pct == pytest.approx(2.06)
    assert summary.l2_pct == pytest.approx(3.44) and summary.occupancy_pct == pytest.approx(6.21)
    assert summary.registers == 168 and summary.grid == "(1, 8, 4)"
    assert prep.tensor_pct == pytest.approx(14.71)  # the highest tensor-pipe metric; "n/a" ignored
    reasons = [r for r, _ in summary.stalls]
    assert reasons[:3] == ["long_scoreboard", "barrier", "wait"] and "selected" not in reasons
    assert sum(share for _, share in summary.stalls) == pytest.approx(1.0)
    assert summary.stalls[0][1] == pytest.approx(9.84 / 21.82)


def test_real_raw_page_summary():
    """The H100 export gives the summary that run printed (docs/data/profile/*_ncu.txt)."""
    [kernel] = ncu_summary.parse_csv(REAL_NCU_RAW.read_text())
    s = ncu_summary.summarize(kernel)
    assert (s.name, s.registers) == ("_span_summary_kernel", 255)
    assert round(s.duration_us, 2) == 137.73 and round(s.dram_pct, 1) == 22.1 and round(s.l2_pct, 1) == 34.2
    assert round(s.occupancy_pct, 1) == 11.2 and round(s.tensor_pct, 1) == 22.7
    assert [r for r, _ in s.stalls[:3]] == ["wait", "long_scoreboard", "short_scoreboard"]


def test_details_page_summary_has_what_the_page_holds():
    first = ncu_summary.summarize(ncu_summary.parse_csv(NCU_DETAILS.read_text())[0])
    assert (first.name, first.duration_us, first.dram_pct, first.l2_pct) == ("chunk_prep_kernel", 18.94, 41.37, 38.12)
    assert first.occupancy_pct == 23.41 and first.registers == 128
    assert first.stalls == [] and first.tensor_pct is None


def test_summary_table_marks_what_is_missing():
    raw = [ncu_summary.summarize(k) for k in ncu_summary.parse_csv(NCU_RAW.read_text())]
    details = [ncu_summary.summarize(k) for k in ncu_summary.parse_csv(NCU_DETAILS.read_text())]
    lines = ncu_summary.format_summary(raw + details).splitlines()
    assert len(lines) == 7 and "DRAM %" in lines[0] and "tensor %" in lines[0]
    assert "256×8×1" in lines[1] and "18.94" in lines[1] and "long_scoreboard 39%" in lines[1]
    assert lines[-1].split()[-2:] == ["-", "-"]  # details page: no tensor pipes, no stalls


def test_parser_takes_bare_and_partial_exports():
    """No ==PROF== lines, no units row (time then in ns), only the PC-sampling stall family
    (its _not_issued variants left out), a missing metric, and a short row."""
    text = ('"ID","Kernel Name","Grid Size","gpu__time_duration.sum","smsp__pcsamp_warps_issue_stalled_wait",'
            '"smsp__pcsamp_warps_issue_stalled_barrier","smsp__pcsamp_warps_issue_stalled_barrier_not_issued"\n'
            '"3","_gdn_decode_kernel","(4096, 1, 1)","18,460","300","100","9,000"\n"4","cut short"\n')
    [kernel] = ncu_summary.parse_csv(text)
    summary = ncu_summary.summarize(kernel)
    assert summary.duration_us == pytest.approx(18.46) and summary.dram_pct is None
    assert summary.stalls == [("wait", 0.75), ("barrier", 0.25)]


def test_parser_refuses_what_it_cannot_read():
    with pytest.raises(ncu_summary.NcuError, match="not an ncu CSV export"):
        ncu_summary.parse_csv("==ERROR== the application returned an error code (1)\n")
    odd = '"ID","Kernel Name","gpu__time_duration.sum"\n"","","fortnight"\n"0","k","3"\n'
    with pytest.raises(ncu_summary.NcuError, match="unknown unit 'fortnight'"):
        ncu_summary.summarize(ncu_summary.parse_csv(odd)[0])


# --- Proton's tree --------------------------------------------------------------------------

def test_hot_lines_share_of_samples():
    lines = proton_lines.hot_lines(json.loads(PROTON.read_text()), ".")
    total = sum(h.samples for h in lines)
    assert total == 12100 and [h.function for h in lines[:3]] == ["span_summary_kernel"] * 2 + ["span_pass_kernel"]
    top = lines[0]
    assert (top.line, top.samples, top.top_stall) == (341, 3212, "long_scoreboard")
    assert top.share == pytest.approx(3212 / 12100)
    assert 300 not in [h.line for h in lines]  # sampled in the warm-up scope only
    prep = [h for h in lines if h.function == "chunk_prep_kernel"]
    assert prep[0].path == "/root/.cache/flashinfer_bench/cache/python/gdn-prefill-triton-chunked_3f9c2a71/prefill.py"
    assert prep[0].top_stall == "short_scoreboard"  # "selected" (issuing) is not a stall


def test_real_hot_lines():
    """The H100 Proton tree gives the lines that run printed (docs/data/profile/*_proton.txt)."""
    lines = proton_lines.hot_lines(json.loads(REAL_PROTON.read_text()), ".")
    top = lines[0]
    assert (top.line, top.function, top.samples, top.top_stall) == (98, "_span_summary_kernel", 215662, "short_scoreboard")
    assert round(100 * top.share, 1) == 9.5 and len(lines) == 143


def test_hot_lines_of_one_kernel_and_none():
    lines = proton_lines.hot_lines(json.loads(PROTON.read_text()), "span_summary")
    assert {h.function for h in lines} == {"span_summary_kernel"} and sum(h.share for h in lines) == pytest.approx(1)
    with pytest.raises(proton_lines.ProtonError, match="no PC samples .* 'nothing'; kernels sampled: "
                                                       "chunk_prep_kernel, span_pass_kernel, span_summary_kernel"):
        proton_lines.hot_lines(json.loads(PROTON.read_text()), "nothing")


def test_hot_lines_read_the_source_and_format(tmp_path):
    source = tmp_path / "k.py"
    source.write_text("def k():\n    x = tl.load(p)  # the load\n")
    tree = {"frame": {"name": "ROOT"}, "metrics": {}, "children": [
        {"frame": {"name": f"{source}:2@k"}, "metrics": {"num_samples": 30, "stalled_wait": 4}, "children": []},
        {"frame": {"name": f"{source}:1@k"}, "metrics": {"num_samples": 10}, "children": []}]}
    lines = proton_lines.hot_lines(tree, "^k$", scope=None)
    assert lines[0].source == "x = tl.load(p)  # the load" and lines[1].top_stall is None
    with pytest.raises(proton_lines.ProtonError, match="has no scope 'sampled'"):
        proton_lines.hot_lines(tree, "^k$")
    text = proton_lines.format_lines(lines, top=1)
    assert "75.0%" in text and "k.py:2" in text and "wait" in text
    assert "1 of 2 lines shown, 75.0% of the samples" in text


# --- torch.profiler's trace -------------------------------------------------------------------

FLUSH = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<signed char> >(int)"


def _kernel(name, ts, dur, grid=(256, 8, 1), regs=128, smem=33792):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "registers per thread": regs, "shared memory": smem,
                     "grid": list(grid), "block": [128, 1, 1], "est. achieved occupancy %": 25}}


def _trace():
    events = [_kernel("chunk_prep_kernel", 1.0, 5.0),  # before the first flush: warm-up, ignored
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 2.0, "dur": 3.0}]
    for call, t in enumerate((100.0, 200.0, 300.0, 400.0)):
        events.append(_kernel(FLUSH, t, 40.0, grid=(2048, 1, 1), regs=16, smem=0))
        events += [_kernel("chunk_prep_kernel", t + 50, 10.0 + call), _kernel("span_summary_kernel", t + 62, 20.0),
                   _kernel("span_pass_kernel", t + 84, 8.0 + call)]
        if call == 3:
            events.append({"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "ts": t + 95, "dur": 1.0,
                           "args": {"device": 0}})
    return {"schemaVersion": 1, "traceEvents": events}


def test_breakdown_of_a_trace():
    calls = split_calls(kernel_breakdown.trace_activities(_trace()), frozenset({FLUSH}))
    assert [len(c) for c in calls] == [3, 3, 3, 4]
    rows, span, kept, dropped = kernel_breakdown.summarize(calls)
    assert (kept, dropped) == (3, 1)  # the call with a memset launched another sequence
    assert [(r.index, r.name, r.median_us) for r in rows] == [
        (1, "chunk_prep_kernel", 11.0), (2, "span_summary_kernel", 20.0), (3, "span_pass_kernel", 9.0)]
    assert rows[0].grid == (256, 8, 1) and rows[0].registers == 128 and rows[0].shared_bytes == 33792
    assert span == 43.0  # 50 → 84 + 9 for the median call


def test_breakdown_table():
    rows, span, kept, dropped = kernel_breakdown.summarize(
        split_calls(kernel_breakdown.trace_activities(_trace()), frozenset({FLUSH})))
    eager = kernel_breakdown.Breakdown(rows, span, kept, dropped, 41.5)
    text = kernel_breakdown.format_breakdown(eager)
    assert "256×8×1" in text and "33792" in text and "sum of kernel medians   40.00 µs" in text
    assert "span − sum = 3.00 µs between kernels" in text
    assert "median of 3 calls; 1 more left out for another kernel sequence" in text
    assert "CUDA-graph replay span  41.50 µs (eager span − graph span = 1.50 µs)" in text
    no_graph = kernel_breakdown.Breakdown(rows, span, kept, 0, None, "not capturable (RuntimeError: sync)")
    assert "CUDA-graph replay span  not capturable (RuntimeError: sync)" in kernel_breakdown.format_breakdown(no_graph)


# --- the ncu mode's plumbing, with a stand-in for ncu -------------------------------------------

FAKE_NCU = """#!/bin/sh
# A stand-in for ncu: with --import it prints the stored raw page; else it writes an empty report
# where --export says, and prints what $NCU_SAYS holds (exit status $NCU_STATUS).
case " $* " in *" --import "*) cat "{csv}"; exit 0;; esac
while [ $# -gt 0 ]; do [ "$1" = --export ] && touch "$2.ncu-rep"; shift; done
printf '%b' "$NCU_SAYS"; exit "${{NCU_STATUS:-0}}"
"""


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    ncu = folder / "ncu"
    ncu.write_text(FAKE_NCU.format(csv=NCU_RAW))
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    monkeypatch.setattr(profiling, "_gpu", lambda: "a GPU")
    return monkeypatch


def _run_ncu(tmp_path, argv=()):
    parser = profiling.build_parser(ROOT)
    args = parser.parse_args(["--definition", "prefill", "--mode", "ncu", "--out", str(tmp_path / "out"), *argv])
    return profiling.run_ncu(profiling.target_from_args(parser, args), args, SCRIPT)


def test_ncu_mode_keeps_report_csv_summary_and_log(fake_ncu, tmp_path, capsys):
    fake_ncu.setenv("NCU_SAYS", "==PROF== Disconnected from process 1\\n")
    written = _run_ncu(tmp_path, ["--kernel", "summary", "--ncu-args", "--clock-control none"])
    assert [p.name for p in written] == [f"prefill-triton-chunked-T8192-N1_ncu.{e}" for e in ("ncu-rep", "csv", "txt",
                                                                                              "log")]
    out = capsys.readouterr().out
    assert "--kernel-name regex:summary" in out and "--clock-control none" in out and "--under-ncu" in out
    assert "prefill triton-chunked T=8192 N=1 | GPU: a GPU" in out and "span_summary_kernel" in out
    assert written[1].read_text() == NCU_RAW.read_text()


def test_ncu_mode_without_permission_says_so(fake_ncu, tmp_path):
    fake_ncu.setenv("NCU_SAYS", "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\\n")
    fake_ncu.setenv("NCU_STATUS", "1")
    with pytest.raises(ncu_summary.NcuError, match=r"^no permission to read the GPU's performance counters .*"
                                                   r"\(ncu's output: .*_ncu\.log\)$"):
        _run_ncu(tmp_path)

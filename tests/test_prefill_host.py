"""prefill.py's host path: no host synchronization inside a call. On CPU, kernel() and
pooled_prefill() run with their launches stubbed (gdn_bench.launch_stubs: everything but the
compiled kernel's call, as on a warmed-up GPU) while every tensor method that reads device
memory on the host raises; on a GPU (skipped without one), the real call under torch's sync
debug mode. Both paths (token walk, chunked; with spans too), a device scale tensor on the GPU.
The host-cost proxy's rows (gdn_bench.host_cost) on one small call."""

import contextlib
import importlib

import pytest
import torch

from gdn_bench import host_ab
from gdn_bench.algos import load_solution_file
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.host_cost import WARMUP, call_inputs, our_calls, proxy_rows, time_rounds
from gdn_bench.launch_stubs import stubbed_launches

sub = load_solution_file(PREFILL.submission_entry(), "gdn_prefill_host")
shared = importlib.import_module(sub.Launcher.__module__)
# Tensor methods that read a tensor's memory on the host (a synchronization on a GPU).
SYNCHRONIZING = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__", "__array__")
# (lengths, launches): the token walk, the fused chunked path, spans (one sequence of 8192 tokens).
CALLS = (((6,), 1), ((300,), 2), ((8192,), 4))


@contextlib.contextmanager
def host_reads_raise(monkeypatch):
    """Inside: every method of SYNCHRONIZING raises AssertionError naming itself."""
    with monkeypatch.context() as patch:
        for name in SYNCHRONIZING:
            def read(*args, name=name, **kwargs):
                raise AssertionError(f"torch.Tensor.{name} called inside the call")
            patch.setattr(torch.Tensor, name, read)
        yield


@pytest.mark.parametrize("lengths, launches", CALLS)
def test_no_host_read_inside_a_call(lengths, launches, monkeypatch):
    calls = our_calls(sub, call_inputs(lengths, "cpu"))
    with stubbed_launches(sub.Launcher) as made:
        for name, call in calls.items():
            call()  # the configuration's first launch, then the direct path's
            made.clear()
            with host_reads_raise(monkeypatch):
                call()
            assert len(made) == launches, (name, made)


def test_kept_launch_layouts_go_stale_with_the_launches_they_make():
    """A call keeps its launches' layouts (prefill._direct_launches); once the compiled kernels
    they launch are replaced (a stub put back) or launches are recorded, it asks again: no launch
    goes to a stub that is gone, nor runs while launches are recorded."""
    call = our_calls(sub, call_inputs((300,), "cpu"))["kernel"]
    with stubbed_launches(sub.Launcher) as first:
        call()
        call()
    with stubbed_launches(sub.Launcher) as second:
        call()
        call()
        with shared.recording_launches() as recorded:
            call()
    assert len(first) == len(second) == 4 and len(recorded) == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("lengths, launches", CALLS)
def test_no_synchronization_on_a_gpu(lengths, launches):
    x = call_inputs(lengths, "cuda")
    x["scale"] = torch.tensor(0.125, device="cuda")  # read in-kernel
    for call in our_calls(sub, x).values():
        call()  # compiled outside the check
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            call()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def test_the_proxy_counts_launches_and_times_each_entry_point():
    row, = proxy_rows(sub, [(6,)], calls_per_round=3, rounds=1)
    assert row["call"] == "1 × 6" and row["kernel_launches"] == row["pooled_launches"] == 1
    assert row["kernel_host_us"] > 0 and row["pooled_host_us"] > 0
    if "cc_note" not in row:  # the compiled checks built here
        assert row["kernel_cc_launches"] == 1 and row["kernel_cc_host_us"] > 0 and row["pooled_cc_host_us"] > 0


def test_host_ab_times_every_copy_of_every_call_in_the_same_rounds():
    """gdn_bench.host_ab on the CPU proxy: two copies (the checkout's, twice), one prefill call
    and decode at one batch size: every entry point of every copy timed, with either checks."""
    entry = PREFILL.submission_entry()
    copies = {label: host_ab.load_copy(entry, label) for label in ("one", "two")}
    rows = host_ab.ab_rows(copies, [(6,)], [2], rounds=1, calls_per_round=3)
    assert [(row["call"], row["entry"]) for row in rows] == [
        ("1 × 6", "kernel"), ("1 × 6", "pooled"), ("B = 2", "decode"), ("B = 2", "pooled_decode")]
    for row in rows:
        for label in copies:
            assert row[f"{label}_host_us"] > 0
            assert row[f"{label}_cc_host_us"] > 0 or f"{label}_cc_note" in row


def test_rounds_go_over_every_entry_in_turn_and_failures_are_noted():
    made, first, second = [], {}, {}

    def fails():
        raise RuntimeError("boom")

    entries = [(first, "x", lambda: made.append("x"), None), (first, "y", fails, None),
               (second, "x", lambda: made.append("second x"), None), (second, "z", "absent (no module)", None)]
    time_rounds(entries, 2, calls=1)
    calls = WARMUP + 1
    assert made == (["x"] * calls + ["second x"] * calls) * 2
    assert first["y_note"] == "RuntimeError: boom" and second["z_note"] == "absent (no module)"
    assert first["x_host_us"] > 0 and second["x_host_us"] > 0 and "y_host_us" not in first

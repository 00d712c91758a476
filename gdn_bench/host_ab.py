"""Host cost of several copies of the submission, alternated in one process: how to tell whether
a change of the host path made a call cheaper. The lent GPU hosts move by up to 2x between runs
minutes apart (docs/serving.md, "Costs"), more than most changes do, so two codes are compared
only this way: each copy's calls timed in the same rounds (host_cost.time_rounds: the least of
ROUNDS medians, the rounds taken in turn over every call, copy and checks).

A copy is a prefill.py with the files it imports beside it (the checkout's, or another
commit's: `git archive REV solution/triton | tar -x --strip-components=2 -C DIR`, as
scripts/bench_prefill.py's --against takes it). Per copy: prefill's kernel() and
pooled_prefill() on host_cost's calls, decode's kernel() and pooled_decode() (kernel.py beside
it) at the given batch sizes, each with the default argument checks and with the compiled ones
("cc": host_checks.enable(), where the copy has them and they build). On a GPU the calls launch
their kernels (a synchronization before each call, outside the timed span); without one they
run as host_cost's CPU proxy (launches stubbed, planned for sm_90), so that a change can be
compared on any machine, the launch's own cost left out.
"""

import contextlib
import importlib
from pathlib import Path

import torch

from gdn_bench.algos import load_solution_file
from gdn_bench.host_cost import (PROXY_CAPABILITY, ROUNDS, call_inputs, compiled_checks, keep_freed_memory, our_calls,
                                 time_rounds, variants)
from gdn_bench.launch_stubs import stubbed_launches
from gdn_bench.serving_bench import call_name, serving_inputs
from gdn_bench.shapes import DEFAULT_SCALE

def load_copy(entry: Path, label: str) -> tuple:
    """(prefill module, decode module) of the copy whose prefill.py is `entry`, as a package of
    its own named after `label`."""
    package = f"gdn_host_ab_{label}"
    return load_solution_file(Path(entry), package), importlib.import_module(f"{package}.kernel")


def decode_calls(dec, batch: int, device: str) -> dict:
    """{"decode": kernel(), "pooled_decode": pooled_decode() in place} of decode module `dec` at
    batch size `batch`, as functions of no arguments."""
    x = serving_inputs(batch, 1, 2 * batch + 8, seed=batch, device=device)
    q, k, v, A_log, a, dt_bias, b = (x[n] for n in ("q", "k", "v", "A_log", "a", "dt_bias", "b"))
    state = x["pool"][x["slots"].long()].clone()
    output, new_state = torch.empty_like(v), torch.empty_like(state)
    return {"decode": lambda: dec.kernel(q, k, v, state, A_log, a, dt_bias, b, DEFAULT_SCALE, output, new_state),
            "pooled_decode": lambda: dec.pooled_decode(q, k, v, x["pool"], x["slots"], A_log, a, dt_bias, b,
                                                       DEFAULT_SCALE, output)}


def ab_rows(copies: dict, calls, batches, rounds: int = ROUNDS, calls_per_round: int | None = None) -> list[dict]:
    """One row per call and entry point ({"call": ..., "entry": ...}), with row[f"{label}_host_us"] and
    row[f"{label}_cc_host_us"] (or row[f"{label}_cc_note"]) per copy: `copies` maps labels to
    load_copy's pairs; `calls`: prefill calls by sequence lengths; `batches`: decode's batch
    sizes. On a GPU where there is one, else the CPU proxy (module docstring)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows, entries = {}, []
    for label, (pre, dec) in copies.items():
        note = {}
        checks = compiled_checks(pre, note)
        named = {}
        for lengths in calls:
            for name, fn in our_calls(pre, call_inputs(lengths, device, seed=sum(lengths))).items():
                named[(call_name(lengths), name)] = fn
        for batch in batches:
            for name, fn in decode_calls(dec, batch, device).items():
                named[(f"B = {batch}", name)] = fn
        for (call, entry), fn in named.items():
            row = rows.setdefault((call, entry), {"call": call, "entry": entry})
            row.update({f"{label}_{key}": value for key, value in note.items()})
            entries += [(row, label + name[len("call"):], fn, used)
                        for name, fn, used in variants({"call": fn}, checks)]
    with contextlib.ExitStack() as stack:
        if device == "cpu":
            keep_freed_memory()
            for pre, _ in copies.values():
                stack.enter_context(importlib.import_module(pre.Launcher.__module__).planning_for(PROXY_CAPABILITY))
                stack.enter_context(stubbed_launches(pre.Launcher))
        for _, _, fn, _ in entries:
            fn()  # compiled (or stubbed) before any is timed
        before = torch.cuda.synchronize if device == "cuda" else None
        time_rounds(entries, rounds, **({"calls": calls_per_round} if calls_per_round else {}), before=before)
    return list(rows.values())


def ab_columns(labels) -> tuple:
    """format_rows' columns for ab_rows' rows: the call, then each copy's default and compiled."""
    return (("call", "call", ""), ("entry", "entry", ""),
            *((f"{label} µs", f"{label}_host_us", ".1f") for label in labels),
            *((f"{label} cc", f"{label}_cc_host_us", ".1f") for label in labels))

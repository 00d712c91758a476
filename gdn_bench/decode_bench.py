"""Kernel-level decode benchmark on a GPU, outside flashinfer-bench's workload loop
(scripts/bench_kernel.py).

Per batch size, on inputs drawn as flashinfer-bench draws `random` ones (shapes and dtypes
from the decode Definition): the submission's CUPTI kernel time against the memory floor
(copying the state), fi-baseline and fla-lib (when they run); host time (`sync; call; sync`)
of the submission and of the copy; and the submission's error against a float64 reference.
Derived per row: x_floor = ours / floor, host_ratio = host ours / host copy, vs_fi =
fi-baseline / ours.
"""

import torch
from flashinfer_bench.compile import BuilderRegistry
from tqdm import tqdm

from gdn_bench.algos import load_solution_file
from gdn_bench.bench_sizes import DECODE_BATCH_SIZES
from gdn_bench.definitions.decode.definition import DECODE, LIBRARY, build_definition
from gdn_bench.definitions.decode.reference import gdn_decode
from gdn_bench.roles import BASELINE
from gdn_bench.shapes import DEFAULT_SCALE
from gdn_bench.signature import empty_outputs, random_inputs
from gdn_bench.timing import copy_floor_us, host_time_us, kernel_time_us

COLUMNS = (("B", "batch_size", "d"), ("ours µs", "ours_us", ".2f"), ("floor µs", "floor_us", ".2f"),
           ("×floor", "x_floor", ".3f"), ("FI µs", f"{BASELINE}_us", ".2f"), ("FLA µs", f"{LIBRARY}_us", ".2f"),
           ("FI/ours", "vs_fi", ".3f"), ("host ours", "host_ours_us", ".1f"), ("host copy", "host_copy_us", ".1f"),
           ("host ×", "host_ratio", ".2f"), ("state err", "state_rel_err", ".1e"), ("out err", "out_rel_err", ".1e"))


def load_submission():
    """The decode submission's kernel.py (of the project checkout) as a module."""
    return load_solution_file(DECODE.submission_entry(), "gdn_submission")


def decode_inputs(batch: int, seed: int = 0) -> dict:
    """One call's inputs on the GPU, drawn from `seed`; scale 1/sqrt(128)."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return random_inputs(build_definition(), {"batch_size": batch}, gen, {"scale": DEFAULT_SCALE})


def decode_outputs(batch: int) -> list[torch.Tensor]:
    """output and new_state for a destination-passing call, uninitialized, on the GPU."""
    return empty_outputs(build_definition(), {"batch_size": batch}, "cuda")


def errors(inputs: dict, output: torch.Tensor, new_state: torch.Tensor) -> tuple[float, float]:
    """(normwise relative error of new_state, max |output - ref| / max |ref|) vs float64."""
    ref_out, ref_state = gdn_decode(**inputs, compute_dtype=torch.float64)
    state_err = ((new_state.double() - ref_state).norm() / ref_state.norm()).item()
    out_err = ((output[:, 0].double() - ref_out).abs().max() / ref_out.abs().max()).item()
    return state_err, out_err


def _baseline_runnables() -> dict:
    definition = build_definition()
    registry = BuilderRegistry.get_instance()
    algos = DECODE.algos_by_name
    return {
        name: registry.build(definition, algos[name].solution())
        for name in (BASELINE, LIBRARY)
        if algos[name].unavailable() is None
    }


def derived(row: dict) -> dict:
    """The row with its ratios added (see the module docstring)."""
    row["x_floor"] = row["ours_us"] / row["floor_us"]
    row["host_ratio"] = row["host_ours_us"] / row["host_copy_us"]
    if f"{BASELINE}_us" in row:
        row["vs_fi"] = row[f"{BASELINE}_us"] / row["ours_us"]
    return row


def bench(batch_sizes=DECODE_BATCH_SIZES) -> list[dict]:
    """One row per batch size (µs; see the module docstring)."""
    sub = load_submission()
    baselines = _baseline_runnables()
    rows = []
    for batch in tqdm(batch_sizes, desc="bench", unit="batch"):
        inputs = decode_inputs(batch, seed=batch)
        output, new_state = decode_outputs(batch)
        args = (*inputs.values(), output, new_state)
        sub.kernel(*args)
        state_err, out_err = errors(inputs, output, new_state)
        copy = lambda: new_state.copy_(inputs["state"])  # noqa: E731
        row = {
            "batch_size": batch,
            "ours_us": kernel_time_us(lambda: sub.kernel(*args)),
            "floor_us": copy_floor_us(DECODE.floor_shape(batch)),
            "state_rel_err": state_err,
            "out_rel_err": out_err,
            "host_ours_us": host_time_us(lambda: sub.kernel(*args)),
            "host_copy_us": host_time_us(copy),
        }
        for name, runnable in baselines.items():
            fresh = decode_inputs(batch, seed=batch)  # fi-baseline updates its state in place
            row[f"{name}_us"] = kernel_time_us(lambda: runnable(*fresh.values()))
        rows.append(derived(row))
    return rows


def format_rows(rows: list[dict]) -> str:
    """The table: one line per batch size, '-' where a column was not measured."""
    lines = ["  ".join(f"{title:>9}" for title, _, _ in COLUMNS)]
    for row in rows:
        lines.append("  ".join(f"{row[key]:>9{spec}}" if key in row else f"{'-':>9}" for _, key, spec in COLUMNS))
    return "\n".join(lines)

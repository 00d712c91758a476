"""Kernel-level benchmarks on a GPU, outside flashinfer-bench's workload loop.

`bench`: per batch size, the submission's CUPTI kernel time against the copy floor,
fi-baseline and fla-lib (when installed), plus host time (`sync; call; sync`) of the
submission and of the copy, and the submission's error against a float64 reference.
`sweep`: every valid (BV, warps) launch configuration of the submission per batch size,
and the launch table that picks the fastest; used to regenerate kernel.py's LAUNCH_TABLE.
"""

import re
import statistics

import torch
from flashinfer_bench.compile import BuilderRegistry
from tqdm import tqdm

from gdn_bench.algos import load_module
from gdn_bench.definitions.decode import DECODE, LIBRARY, build_definition
from gdn_bench.reference import gdn_decode
from gdn_bench.roles import BASELINE
from gdn_bench.shapes import DEFAULT_SCALE
from gdn_bench.timing import host_time_us, kernel_time_us

BATCH_SIZES = (1, 4, 8, 16, 32, 48, 64, 128, 256, 512)


def load_submission():
    """The decode submission's kernel.py (of the project checkout) as a module."""
    return load_module(DECODE.submission_entry(), "gdn_submission")


def random_inputs(batch: int, seed: int = 0) -> dict:
    """Inputs as flashinfer-bench draws them (randn everywhere), scale 1/sqrt(128)."""
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen, device="cuda").to(dtype)

    bf16 = torch.bfloat16
    return dict(
        q=randn(batch, 1, 4, 128, dtype=bf16), k=randn(batch, 1, 4, 128, dtype=bf16),
        v=randn(batch, 1, 8, 128, dtype=bf16), state=randn(batch, 8, 128, 128), A_log=randn(8),
        a=randn(batch, 1, 8, dtype=bf16), dt_bias=randn(8), b=randn(batch, 1, 8, dtype=bf16),
        scale=DEFAULT_SCALE,
    )


def _outputs(batch: int):
    return (torch.empty(batch, 1, 8, 128, dtype=torch.bfloat16, device="cuda"),
            torch.empty(batch, 8, 128, 128, device="cuda"))


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


def bench(batch_sizes=BATCH_SIZES) -> list[dict]:
    """One row per batch size (µs; see module docstring)."""
    sub = load_submission()
    baselines = _baseline_runnables()
    rows = []
    for batch in tqdm(batch_sizes, desc="bench", unit="batch"):
        inputs = random_inputs(batch, seed=batch)
        output, new_state = _outputs(batch)
        args = (*inputs.values(), output, new_state)
        sub.kernel(*args)
        state_err, out_err = errors(inputs, output, new_state)
        copy = lambda: new_state.copy_(inputs["state"])  # noqa: E731
        row = {
            "batch_size": batch,
            "ours_us": kernel_time_us(lambda: sub.kernel(*args)),
            "floor_us": DECODE.floor_us(batch),
            "state_rel_err": state_err,
            "out_rel_err": out_err,
            "host_ours_us": host_time_us(lambda: sub.kernel(*args)),
            "host_copy_us": host_time_us(copy),
        }
        for name, runnable in baselines.items():
            fresh = random_inputs(batch, seed=batch)  # fi-baseline updates its state in place
            row[f"{name}_us"] = kernel_time_us(lambda: runnable(*fresh.values()))
        rows.append(row)
    return rows


def valid_configs() -> list[tuple[int, int]]:
    """(BV, warps) pairs where every thread holds at least one 16-byte vector of the tile."""
    return [(bv, w) for bv in (2, 4, 8, 16, 32, 64) for w in (1, 2, 4, 8) if bv * 128 // (32 * w) >= 4]


def sweep(batch_sizes=BATCH_SIZES, configs=None, finalists: int = 4, repeats: int = 3) -> list[dict]:
    """CUPTI time of every config at every batch size (state present), each checked against
    float64 first. The `finalists` fastest per batch size are timed `repeats` more times and
    keep the median, so the choice rests on more than one sample near the top.
    Rows: batch_size, block_v, num_warps, us, floor_us."""
    sub = load_submission()
    configs = configs or valid_configs()
    rows = []
    for batch in tqdm(batch_sizes, desc="sweep", unit="batch"):
        inputs = random_inputs(batch, seed=batch)
        output, new_state = _outputs(batch)
        args = (*inputs.values(), output, new_state)
        floor = DECODE.floor_us(batch)

        def timed(block_v, num_warps):
            sub.LAUNCH_TABLE = ((1 << 62, block_v, num_warps),)
            return kernel_time_us(lambda: sub.kernel(*args))

        mine = []
        for block_v, num_warps in configs:
            sub.LAUNCH_TABLE = ((1 << 62, block_v, num_warps),)
            sub.kernel(*args)
            state_err, out_err = errors(inputs, output, new_state)
            if state_err > 1e-5 or out_err > 1e-2:
                raise AssertionError(f"BV={block_v} warps={num_warps} B={batch}: errors {state_err}, {out_err}")
            mine.append({"batch_size": batch, "block_v": block_v, "num_warps": num_warps,
                         "us": timed(block_v, num_warps), "floor_us": floor})
        for row in sorted(mine, key=lambda r: r["us"])[:finalists]:
            samples = [row["us"]] + [timed(row["block_v"], row["num_warps"]) for _ in range(repeats)]
            row["us"] = statistics.median(samples)
        rows += mine
    return rows


def best_table(rows: list[dict], tolerance: float = 0.02) -> tuple[tuple[int, int, int], ...]:
    """LAUNCH_TABLE rows (max batch, BV, warps) from a sweep.

    At each swept batch size, every config within `tolerance` of the fastest counts as best
    (timings repeat to a few percent, so closer calls are noise). Walking up the batch sizes,
    the current config is kept while it stays among the best; otherwise the best config that
    stays among the best for the most following batch sizes takes over. A row serves every
    batch up to its last swept size; the last row is unbounded."""
    by_batch = {}
    for r in rows:
        by_batch.setdefault(r["batch_size"], {})[(r["block_v"], r["num_warps"])] = r["us"]
    batches = sorted(by_batch)
    good = [{c for c, us in by_batch[b].items() if us <= (1 + tolerance) * min(by_batch[b].values())} for b in batches]

    def run_length(config, start):
        n = 0
        while start + n < len(batches) and config in good[start + n]:
            n += 1
        return n

    table = []
    for i, batch in enumerate(batches):
        if table and table[-1][1:] in good[i]:
            table[-1] = (batch, *table[-1][1:])
        else:
            config = max(sorted(good[i]), key=lambda c: (run_length(c, i), -by_batch[batch][c]))
            table.append((batch, *config))
    table[-1] = (1 << 62, *table[-1][1:])
    return tuple(table)


def write_launch_table(table, path) -> None:
    """Replace the LAUNCH_TABLE literal in kernel.py."""
    text = path.read_text(encoding="utf-8")
    body = "".join(f"    ({'1 << 62' if b == 1 << 62 else b}, {bv}, {w}),\n" for b, bv, w in table)
    new, count = re.subn(r"LAUNCH_TABLE = \(\n(?:    \(.*\),\n)+\)", f"LAUNCH_TABLE = (\n{body})", text)
    if count != 1:
        raise ValueError(f"{path}: LAUNCH_TABLE literal not found")
    path.write_text(new, encoding="utf-8")

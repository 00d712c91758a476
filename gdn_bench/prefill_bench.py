"""Kernel-level prefill benchmark on a GPU, outside flashinfer-bench's workload loop
(scripts/bench_prefill.py).

Over a grid of total_seq_len T × num_seqs N (N <= T; lengths split evenly, the first
T mod N sequences one token longer), on model-like inputs (unit-norm keys, the rest N(0, 1),
gdn_bench.prefill_mix.model_like_inputs): the CUPTI cold-L2 kernel time of the submission
(solution/triton/prefill.py) and, where they run, of fi-baseline and fla-chunk; the
speedups FI / ours and FLA / ours; whether two calls of ours on the same inputs give
bit-identical outputs; and ours' worst margin (gdn_bench.checking.worst_margin, over both
outputs) against the float64 reference and against the definition's float32 reference.

Variants: each `--config NAME=VALUE,...` loads prefill.py afresh and sets those module-level
names before timing it (say, a chunk size or a warp count the module reads at launch), so
several launch configurations compare side by side without editing the file.
"""

import ast

import torch
from flashinfer_bench.compile import BuilderRegistry
from tqdm import tqdm

from gdn_bench.algos import load_module
from gdn_bench.checking import worst_margin
from gdn_bench.definitions.prefill import LIBRARY, PREFILL
from gdn_bench.prefill_mix import model_like_inputs
from gdn_bench.reference_prefill import gdn_prefill, run
from gdn_bench.roles import BASELINE
from gdn_bench.signature import empty_outputs
from gdn_bench.timing import kernel_time_us

SEQ_LENS = (6, 64, 300, 1024, 4096, 8192)
NUM_SEQS = (1, 4, 32)
BASELINES = {BASELINE: "FI", LIBRARY: "FLA"}


def grid(seq_lens, num_seqs) -> list[tuple[int, int]]:
    """(T, N) pairs with N <= T, in the given orders."""
    return [(t, n) for t in seq_lens for n in num_seqs if n <= t]


def even_lengths(total: int, count: int) -> list[int]:
    """`count` lengths summing to `total`, the first total % count one longer."""
    return [total // count + (i < total % count) for i in range(count)]


def parse_config(text: str) -> dict:
    """'CHUNK=32,STATE_WARPS=2' -> {'CHUNK': 32, 'STATE_WARPS': 2} (values are Python literals)."""
    config = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise ValueError(f"expected NAME=VALUE[,NAME=VALUE...], got {text!r}")
        try:
            config[name.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise ValueError(f"{name.strip()}: expected a Python literal, got {value.strip()!r}") from None
    return config


def load_variant(config: dict, index: int):
    """prefill.py loaded afresh with `config`'s module-level names set (each must exist)."""
    module = load_module(PREFILL.submission_entry(), f"gdn_prefill_variant_{index}")
    for name, value in config.items():
        if not hasattr(module, name):
            raise ValueError(f"{PREFILL.submission_entry().name} has no module-level name {name!r}")
        setattr(module, name, value)
    return module


def variant_label(config: dict) -> str:
    return "ours" + (f"[{','.join(f'{k}={v}' for k, v in config.items())}]" if config else "")


def _baselines() -> dict:
    definition = PREFILL.build_definition()
    registry = BuilderRegistry.get_instance()
    algos = PREFILL.algos_by_name
    return {name: registry.build(definition, algos[name].solution())
            for name in BASELINES if algos[name].unavailable() is None}


def _outputs(definition, total: int, num_seqs: int):
    axes = {"total_seq_len": total, "num_seqs": num_seqs, "len_cu_seqlens": num_seqs + 1}
    return empty_outputs(definition, axes, "cuda")


def _margin(outputs, reference) -> float:
    return max(worst_margin(got, want) for got, want in zip(outputs, reference))


def bench(shapes, configs=({},), seed: int = 0) -> list[dict]:
    """One row per (T, N, variant of ours): see the module docstring. Times in µs."""
    variants = [(variant_label(c), load_variant(c, i)) for i, c in enumerate(configs)]
    baselines = _baselines()
    definition = PREFILL.build_definition()
    rows = []
    for total, num_seqs in tqdm(shapes, desc="bench_prefill", unit="shape"):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        inputs = model_like_inputs(even_lengths(total, num_seqs), gen, "cuda")
        args = tuple(inputs.values())
        ref64 = gdn_prefill(*args, compute_dtype=torch.float64)
        ref32 = run(*args)  # the definition's reference, in the definition's dtypes
        base_us = {name: kernel_time_us(lambda r=runnable: r(*args)) for name, runnable in baselines.items()}
        for label, module in variants:
            first, second = _outputs(definition, total, num_seqs), _outputs(definition, total, num_seqs)
            module.kernel(*args, *first)
            module.kernel(*args, *second)
            torch.cuda.synchronize()
            row = {
                "T": total, "N": num_seqs, "variant": label,
                "ours_us": kernel_time_us(lambda m=module, out=second: m.kernel(*args, *out)),
                "deterministic": all(torch.equal(a, b) for a, b in zip(first, second)),
                "margin_f64": _margin(first, ref64), "margin_f32": _margin(first, ref32),
            }
            for name, us in base_us.items():
                row[f"{name}_us"] = us
                row[f"x_{name}"] = us / row["ours_us"]
            rows.append(row)
    return rows


COLUMNS = (("T", "T", "d"), ("N", "N", "d"), ("variant", "variant", "s"), ("ours µs", "ours_us", ".1f"),
           ("FI µs", f"{BASELINE}_us", ".1f"), ("FLA µs", f"{LIBRARY}_us", ".1f"), ("×FI", f"x_{BASELINE}", ".2f"),
           ("×FLA", f"x_{LIBRARY}", ".2f"), ("det", "deterministic", "s"), ("margin f64", "margin_f64", ".3f"),
           ("margin f32", "margin_f32", ".3f"))


def format_rows(rows: list[dict]) -> str:
    """The table: one line per row, '-' where a column was not measured."""
    width = max([len("variant")] + [len(r["variant"]) for r in rows])

    def cell(row, key, spec):
        if key not in row:
            return "-"
        value = row[key]
        return ("yes" if value else "NO") if isinstance(value, bool) else format(value, spec)

    sizes = [width if key == "variant" else max(len(title), 10) for title, key, _ in COLUMNS]
    lines = ["  ".join(f"{title:>{w}}" for (title, _, _), w in zip(COLUMNS, sizes))]
    lines += ["  ".join(f"{cell(r, key, spec):>{w}}" for (_, key, spec), w in zip(COLUMNS, sizes)) for r in rows]
    return "\n".join(lines)

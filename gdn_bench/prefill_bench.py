"""Kernel-level prefill benchmark on a GPU, outside flashinfer-bench's workload loop
(scripts/bench_prefill.py).

Per call shape (sequence lengths: DEFAULT_SHAPES, a grid of total_seq_len T × num_seqs N split
evenly with the first T mod N sequences one token longer, or explicit lengths such as
[1, 8191]), on model-like inputs (unit-norm keys, the rest N(0, 1),
gdn_bench.definitions.prefill.mix.model_like_inputs), then the STRESS_SHAPES (the same inputs
under a stress regime, gdn_bench.definitions.prefill.mix.stressed), for the submission (solution/triton/prefill.py) and,
where they run, fi-baseline, fla-chunk and fla-loop, side by side in one process, three times
(gdn_bench.timing): `<impl>_us`, the contest's measure (CUPTI span of a call, cold L2);
`<impl>_ksum_us`, the sum of that call's kernel durations; `<impl>_graph_us`, one replay of the
call captured in a CUDA graph (warm L2), the GPU work with no host gaps (absent where the call
cannot be captured). Also the speedups FI / ours and FLA / ours on the span (`x_<impl>`) and
on graph replay (`xg_<impl>`). Where every sequence has at most DECODE_MAX_LENGTH tokens, our decode
kernel (solution/triton/kernel.py) at batch size N, the same work for one token per sequence:
`decode_us` (CUPTI span) and `x_decode` = ours / decode. Whether two calls of ours on the same inputs give bit-identical
outputs; and ours' worst margin (gdn_bench.checking.worst_margin, over both outputs) against
the float64 reference and against the definition's float32 reference.

Variants (gdn_bench.prefill_variants): each `--config NAME=VALUE,...` is prefill.py
loaded afresh with those settings, timed beside the others; each `--against FILE` another
prefill.py (an earlier version, say, with its shared.py beside it), labelled by its path.
"""

import sys

import torch
from flashinfer_bench.compile import BuilderRegistry
from flashinfer_bench.compile.builder import BuildError
from tqdm import tqdm

from gdn_bench.algos import load_solution_file
from gdn_bench.checking import worst_margin
from gdn_bench.decode_bench import decode_inputs, decode_outputs, load_submission
from gdn_bench.definitions.prefill.definition import LIBRARY, PREFILL, TOKEN_LOOP
from gdn_bench.definitions.prefill.mix import STRESS, model_like_inputs, stressed
from gdn_bench.definitions.prefill.reference import gdn_prefill, run
from gdn_bench.prefill_variants import load_variant, variant_label
from gdn_bench.roles import BASELINE
from gdn_bench.signature import empty_outputs
from gdn_bench.timing import graph_replay_us, kernel_times_us

BASELINES = {BASELINE: "FI", LIBRARY: "FLA", TOKEN_LOOP: "FLA loop"}
DECODE_MAX_LENGTH = 8
# Short calls: few tokens, many one-token or few-token sequences, one long sequence among
# one-token ones (as sequence lengths)...
SHORT_SHAPES = (
    [1], [8], [32], [8] * 4, [64], [128], [1] * 64, [1] * 512, [4] * 8, [4] * 16, [4] * 64, [49] + [1] * 15,
    [449] + [1] * 63,
)
# ... then (T, N) split evenly: short and mid-size calls, the long single sequences, full
# batches, and a lopsided pair.
DEFAULT_SHAPES = (
    (6, 1), (6, 4), (64, 1), (64, 4), (300, 1), (300, 4), (1024, 1), (1024, 4), (4096, 1), (8192, 1),
    (8192, 16), (8192, 57), (16384, 1), (1, 8191),
)


def grid(seq_lens, num_seqs) -> list[tuple[int, int]]:
    """(T, N) pairs with N <= T, in the given orders."""
    return [(t, n) for t in seq_lens for n in num_seqs if n <= t]


# The stress regimes (gdn_bench.definitions.prefill.mix.stressed), timed and checked like the
# rest: each at 1 x 1024, and the repeated keys at 1 x 8192 (spans).
STRESS_SHAPES = tuple((kind, [1024]) for kind in STRESS) + (("repeated_keys_saturated", [8192]),)


def default_shapes() -> list[list[int]]:
    """SHORT_SHAPES, then DEFAULT_SHAPES as sequence lengths: (T, N) split evenly; (1, 8191) is a
    pair of lengths."""
    return [list(s) for s in SHORT_SHAPES] + [[1, 8191] if shape == (1, 8191) else even_lengths(*shape)
                                               for shape in DEFAULT_SHAPES]


def even_lengths(total: int, count: int) -> list[int]:
    """`count` lengths summing to `total`, the first total % count one longer."""
    return [total // count + (i < total % count) for i in range(count)]


def _baselines() -> dict:
    """The baselines that build here, by name; one line on stderr for each that does not
    (unavailable, or failing to build: e.g. FlashInfer installed without its CUDA libraries)."""
    definition = PREFILL.build_definition()
    registry = BuilderRegistry.get_instance()
    algos = PREFILL.algos_by_name
    built = {}
    for name in BASELINES:
        reason = algos[name].unavailable()
        if reason is None:
            try:
                built[name] = registry.build(definition, algos[name].solution())
            except BuildError as e:
                reason = f"does not build: {str(e).splitlines()[0][:300]}"
        if reason is not None:
            print(f"bench_prefill: {name} left out: {reason}", file=sys.stderr)
    return built


def _outputs(definition, total: int, num_seqs: int):
    axes = {"total_seq_len": total, "num_seqs": num_seqs, "len_cu_seqlens": num_seqs + 1}
    return empty_outputs(definition, axes, "cuda")


def _margin(outputs, reference) -> float:
    return max(worst_margin(got, want) for got, want in zip(outputs, reference))


def _times(fn) -> dict:
    """us, ksum_us and, where `fn` can be captured in a CUDA graph, graph_us (see module docstring)."""
    span, total = kernel_times_us(fn)
    times = {"us": span, "ksum_us": total}
    try:
        times["graph_us"] = graph_replay_us(fn)
    except RuntimeError:  # a host synchronization inside the call: no graph
        torch.cuda.synchronize()
    return times


def _decode_us(batch: int, decode) -> float:
    """Our decode kernel's CUPTI span at this batch size, on random inputs."""
    args = (*decode_inputs(batch).values(), *decode_outputs(batch))  # in call order, as decode's bench
    return kernel_times_us(lambda: decode.kernel(*args))[0]


def bench(shapes, configs=({},), seed: int = 0, stress=(), against=()) -> list[dict]:
    """One row per (call shape, variant of ours): see the module docstring. `shapes` are
    lists of sequence lengths; `against`, paths of other prefill.py files. Times in µs."""
    variants = [(variant_label(c), load_variant(c, i)) for i, c in enumerate(configs)]
    variants += [(f"file:{path}", load_solution_file(path, f"gdn_prefill_against_{i}")) for i, path in enumerate(against)]
    baselines = _baselines()
    decode = load_submission()
    definition = PREFILL.build_definition()
    rows = []
    for kind, lengths in tqdm([(None, s) for s in shapes] + list(stress), desc="bench_prefill", unit="shape"):
        total, num_seqs = sum(lengths), len(lengths)
        gen = torch.Generator(device="cuda").manual_seed(seed)
        inputs = model_like_inputs(list(lengths), gen, "cuda")
        if kind is not None:
            inputs = stressed(inputs, kind, gen)
        args = tuple(inputs.values())
        ref64 = gdn_prefill(*args, compute_dtype=torch.float64)
        ref32 = run(*args)  # the definition's reference, in the definition's dtypes
        base = {name: _times(lambda r=runnable: r(*args)) for name, runnable in baselines.items()}
        decode_us = _decode_us(num_seqs, decode) if 0 < max(lengths) <= DECODE_MAX_LENGTH else None
        for label, module in variants:
            first, second = _outputs(definition, total, num_seqs), _outputs(definition, total, num_seqs)
            module.kernel(*args, *first)
            module.kernel(*args, *second)
            torch.cuda.synchronize()
            row = {"T": total, "N": num_seqs, "lengths": list(lengths), "inputs": kind or "model-like", "variant": label,
                   **{f"ours_{key}": value for key, value in _times(lambda m=module, out=second: m.kernel(*args, *out)).items()},
                   "deterministic": all(torch.equal(a, b) for a, b in zip(first, second)),
                   "margin_f64": _margin(first, ref64), "margin_f32": _margin(first, ref32)}
            for name, times in base.items():
                row.update({f"{name}_{key}": value for key, value in times.items()})
                row[f"x_{name}"] = times["us"] / row["ours_us"]
                if "graph_us" in times and "ours_graph_us" in row:
                    row[f"xg_{name}"] = times["graph_us"] / row["ours_graph_us"]
            if decode_us is not None:
                row.update(decode_us=decode_us, x_decode=row["ours_us"] / decode_us)
            rows.append(row)
    return rows


COLUMNS = (("T", "T", "d"), ("N", "N", "d"), ("lengths", "lengths", "s"), ("inputs", "inputs", "s"),
           ("variant", "variant", "s"), ("ours µs", "ours_us", ".1f"),
           ("graph", "ours_graph_us", ".1f"), ("ksum", "ours_ksum_us", ".1f"),
           ("FI µs", f"{BASELINE}_us", ".1f"), ("FI graph", f"{BASELINE}_graph_us", ".1f"),
           ("FI ksum", f"{BASELINE}_ksum_us", ".1f"),
           ("FLA µs", f"{LIBRARY}_us", ".1f"), ("FLA graph", f"{LIBRARY}_graph_us", ".1f"),
           ("FLA ksum", f"{LIBRARY}_ksum_us", ".1f"), ("FLA loop µs", f"{TOKEN_LOOP}_us", ".1f"),
           ("decode µs", "decode_us", ".1f"), ("ours/decode", "x_decode", ".2f"), ("×FI", f"x_{BASELINE}", ".2f"),
           ("×FI graph", f"xg_{BASELINE}", ".2f"), ("×FLA graph", f"xg_{LIBRARY}", ".2f"),
           ("det", "deterministic", "s"), ("margin f64", "margin_f64", ".3f"), ("margin f32", "margin_f32", ".3f"))


def runs(lengths: list[int]) -> str:
    """Sequence lengths as runs: [449, 1, 1, 1] -> '449+3×1', [512] * 16 -> '16×512'."""
    parts, i = [], 0
    while i < len(lengths):
        j = i
        while j < len(lengths) and lengths[j] == lengths[i]:
            j += 1
        parts.append(f"{j - i}×{lengths[i]}" if j - i > 1 else str(lengths[i]))
        i = j
    return "+".join(parts)


def format_rows(rows: list[dict]) -> str:
    """The table: one line per row, '-' where a column was not measured."""
    width = max([len("variant")] + [len(r["variant"]) for r in rows])

    def cell(row, key, spec):
        if key not in row:
            return "-"
        value = row[key]
        if key == "lengths":
            return runs(value)
        return ("yes" if value else "NO") if isinstance(value, bool) else format(value, spec)

    sizes = [width if key == "variant" else 23 if key == "inputs" else max(len(title), 10) for title, key, _ in COLUMNS]
    lines = ["  ".join(f"{title:>{w}}" for (title, _, _), w in zip(COLUMNS, sizes))]
    lines += ["  ".join(f"{cell(r, key, spec):>{w}}" for (_, key, spec), w in zip(COLUMNS, sizes)) for r in rows]
    return "\n".join(lines)

"""Kernel-level prefill table: the submission (solution/triton/prefill.py) against fi-baseline
and fla-chunk, side by side, per call shape: CUPTI span (cold L2, the contest's measure), kernel
sum and CUDA-graph replay, with determinism and worst margins
(gdn_bench/prefill_bench.py says what each column is). Needs a GPU.

    python scripts/bench_prefill.py                       # the default shapes, then the stress rows (STRESS_SHAPES)
    python scripts/bench_prefill.py --seq-lens 6,64 --num-seqs 1,4   # a T x N grid, split evenly
    python scripts/bench_prefill.py --lengths 1,8191 --lengths 8192  # explicit lengths per call
    python scripts/bench_prefill.py --config NAME=VALUE,...  # also a variant of prefill.py
    python scripts/bench_prefill.py --against /tmp/old/prefill.py  # also another prefill.py, side by side

`--against` takes a prefill.py with the files it imports beside it, e.g. the last commit's:
`mkdir -p /tmp/old && git archive HEAD solution/triton | tar -x --strip-components=2 -C /tmp/old`.

Each --config times another variant of prefill.py with those settings (the ones it takes, and
their values: gdn_bench/prefill_variants.py, SETTINGS), checked before anything
needs a GPU. Writes
bench_prefill.json and bench_prefill.txt under --out (default results/bench_prefill).
"""

import argparse
import json
import sys
from pathlib import Path

from gdn_bench.arguments import (ScriptParser, add_root_argument, chosen_project, output_folder, positive_ints,
                                 sequence_lengths)
from gdn_bench.bench_sizes import PREFILL_NUM_SEQS, PREFILL_SEQ_LENS
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.paths import checkout_of
from gdn_bench.prefill_variants import parse_config


def _config(text: str) -> dict:
    try:
        return parse_config(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _prefill_file(text: str) -> Path:
    path = Path(text).resolve()
    if not path.is_file() or path.suffix != ".py":
        raise argparse.ArgumentTypeError(f"expected an existing prefill .py file, got {text!r}")
    return path


def _shapes(args) -> list[list[int]]:
    """The calls to time: --lengths, then the --seq-lens x --num-seqs grid; the default shapes if neither."""
    from gdn_bench.prefill_bench import default_shapes, even_lengths, grid

    shapes = list(args.lengths)
    if args.seq_lens or args.num_seqs:
        pairs = grid(args.seq_lens or PREFILL_SEQ_LENS, args.num_seqs or PREFILL_NUM_SEQS)
        shapes += [even_lengths(t, n) for t, n in pairs]
    return shapes or default_shapes()


def main(argv=None) -> int:
    parser = ScriptParser("bench_prefill", description=__doc__)
    parser.add_argument("--seq-lens", type=positive_ints,
                        help="total_seq_len values of a T x N grid "
                             f"(default with --num-seqs: {','.join(map(str, PREFILL_SEQ_LENS))})")
    parser.add_argument("--num-seqs", type=positive_ints,
                        help="num_seqs values of a T x N grid "
                             f"(default with --seq-lens: {','.join(map(str, PREFILL_NUM_SEQS))})")
    parser.add_argument("--lengths", type=sequence_lengths, action="append", default=[],
                        help="one call's sequence lengths, e.g. 1,8191, zeros allowed (repeatable)")
    parser.add_argument("--config", type=_config, action="append", default=[],
                        help="a variant of ours: module-level NAME=VALUE[,NAME=VALUE...] (repeatable)")
    parser.add_argument("--against", type=_prefill_file, action="append", default=[],
                        help="another prefill.py to time side by side (repeatable)")
    parser.add_argument("--out", type=output_folder, default="results/bench_prefill", help="output folder")
    add_root_argument(parser, checkout_of(__file__))
    args = parser.parse_args(argv)
    chosen_project(parser, args)
    # What needs torch, once the arguments are checked.
    import torch

    from gdn_bench.prefill_bench import STRESS_SHAPES, bench, format_rows

    if not torch.cuda.is_available():
        print("bench_prefill: error: needs a CUDA GPU (CUPTI timing)", file=sys.stderr)
        return 2
    if not PREFILL.submission_entry().is_file():
        print(f"bench_prefill: error: {PREFILL.submission_entry()} does not exist yet", file=sys.stderr)
        return 2
    try:
        given = args.seq_lens or args.num_seqs or args.lengths
        rows = bench(_shapes(args), [{}] + args.config, stress=() if given else STRESS_SHAPES, against=args.against)
    except ValueError as e:
        print(f"bench_prefill: error: {e}", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    table = format_rows(rows)
    print(f"GPU: {gpu}; µs: CUPTI span, cold L2, median; graph: CUDA-graph replay, warm L2, median; ksum: sum of the "
          "call's kernel times; ×FI = FI / ours (span), ×FI graph on graph replay; margin: worst |err| / max(atol, rtol·|ref|)")
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_prefill.json").write_text(json.dumps({"gpu": gpu, "rows": rows}, indent=2))
    (args.out / "bench_prefill.txt").write_text(f"GPU: {gpu}\n{table}\n")
    print(f"wrote {args.out / 'bench_prefill.json'} and {args.out / 'bench_prefill.txt'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

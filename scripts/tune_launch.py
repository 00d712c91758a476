"""Sweep the submission's launch configurations (BV rows per program, warps) on this GPU and
derive LAUNCH_TABLE from the fastest per batch size. Needs a GPU.

    python scripts/tune_launch.py [--batch-sizes 1,4,...] [--write] [--out FILE]

--write replaces LAUNCH_TABLE in solution/triton/kernel.py; the sweep itself goes to --out
(default results/tune_launch.json).
"""

import argparse
import json
import sys

import torch

from gdn_bench.arguments import add_root_argument, checked, chosen_project, output_file, positive_ints
from gdn_bench.decode_bench import BATCH_SIZES
from gdn_bench.definitions.decode.definition import DECODE
from gdn_bench.decode_tuning import best_table, sweep, write_launch_table
from gdn_bench.paths import checkout_of


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", type=positive_ints, default=list(BATCH_SIZES),
                        help=f"comma-separated (default {','.join(map(str, BATCH_SIZES))})")
    parser.add_argument("--write", action="store_true", help="rewrite LAUNCH_TABLE in kernel.py")
    parser.add_argument("--out", type=output_file("tune_launch.json"), default="results/tune_launch.json",
                        help="the sweep, as JSON (a folder gets tune_launch.json in it)")
    add_root_argument(parser, checkout_of(__file__))
    args = parser.parse_args(argv)
    chosen_project(parser, args)
    if args.write:  # the file it rewrites, checked before the sweep
        entry = DECODE.submission_entry()
        checked(parser, "--write", output_file(entry.name), entry)
    if not torch.cuda.is_available():
        print("tune_launch: error: needs a CUDA GPU", file=sys.stderr)
        return 2
    rows = sweep(args.batch_sizes)
    configs = sorted({(r["block_v"], r["num_warps"]) for r in rows})
    print(f"GPU: {torch.cuda.get_device_name()}; µs (CUPTI, cold L2, median) per (BV, warps); * = fastest")
    print(f"{'B':>4} {'floor':>7} " + " ".join(f"{f'{bv}/{w}':>7}" for bv, w in configs))
    for batch in sorted({r["batch_size"] for r in rows}):
        mine = {(r["block_v"], r["num_warps"]): r for r in rows if r["batch_size"] == batch}
        fastest = min(mine.values(), key=lambda r: r["us"])
        cells = " ".join(f"{mine[c]['us']:>6.2f}{'*' if mine[c] is fastest else ' '}" for c in configs)
        print(f"{batch:>4} {fastest['floor_us']:>7.2f} {cells}")
    table = best_table(rows)
    print("LAUNCH_TABLE rows:", ", ".join(f"{r['block_v']}/{r['warps']} up to B={r['max_batch'] or 'any'}" for r in table))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows, "table": table}, indent=2))
    if args.write:
        write_launch_table(table, DECODE.submission_entry())
        print(f"rewrote LAUNCH_TABLE in {DECODE.submission_entry()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

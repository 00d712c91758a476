"""One table of the submission's kernel time per batch size against the copy floor,
fi-baseline and fla-lib (CUPTI, cold L2, median), with host time per call. Needs a GPU.

    python scripts/bench_kernel.py [--batch-sizes 1,4,...] [--out DIR]

Writes bench_kernel.json and bench_kernel.png under --out (default results/bench_kernel).
"""

import json
import sys

from gdn_bench.arguments import ScriptParser, add_root_argument, chosen_project, output_folder, positive_ints
from gdn_bench.bench_sizes import DECODE_BATCH_SIZES
from gdn_bench.definitions.decode.definition import DECODE, LIBRARY
from gdn_bench.paths import checkout_of
from gdn_bench.roles import BASELINE


def main(argv=None) -> int:
    parser = ScriptParser("bench_kernel", description=__doc__)
    parser.add_argument("--batch-sizes", type=positive_ints, default=list(DECODE_BATCH_SIZES),
                        help=f"comma-separated (default {','.join(map(str, DECODE_BATCH_SIZES))})")
    parser.add_argument("--out", type=output_folder, default="results/bench_kernel", help="output folder")
    add_root_argument(parser, checkout_of(__file__))
    args = parser.parse_args(argv)
    chosen_project(parser, args)
    # What needs torch, once the arguments are checked.
    import torch

    from gdn_bench.decode_bench import bench, format_rows
    from gdn_bench.plots import kernel_time_plot

    if not torch.cuda.is_available():
        print("bench_kernel: error: needs a CUDA GPU (CUPTI timing)", file=sys.stderr)
        return 2
    rows = bench(args.batch_sizes)
    gpu = torch.cuda.get_device_name()
    print(f"GPU: {gpu}; kernel times: CUPTI, cold L2, median; host: median wall time of sync; call; sync")
    print(format_rows(rows))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_kernel.json").write_text(json.dumps({"gpu": gpu, "rows": rows}, indent=2))
    series = {name: [(r["batch_size"], r[key]) for r in rows if key in r]
              for name, key in ((DECODE.submission, "ours_us"), (BASELINE, f"{BASELINE}_us"), (LIBRARY, f"{LIBRARY}_us"))}
    kernel_time_plot(series, args.out / "bench_kernel.png", "batch size", f"{DECODE.name} on {gpu}",
                     floor=[(r["batch_size"], r["floor_us"]) for r in rows])
    print(f"wrote {args.out / 'bench_kernel.json'} and {args.out / 'bench_kernel.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

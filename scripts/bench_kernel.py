"""One table of the submission's kernel time per batch size against the copy floor,
fi-baseline and fla-lib (CUPTI, cold L2, median), with host time per call. Needs a GPU.

    python scripts/bench_kernel.py [--batch-sizes 1,4,...] [--out DIR]

Writes bench_kernel.json and bench_kernel.png under --out (default results/bench_kernel).
"""

import argparse
import json
import sys

import torch

from gdn_bench.arguments import add_root_argument, chosen_project, output_folder
from gdn_bench.definitions.decode import DECODE, LIBRARY
from gdn_bench.kernel_bench import BATCH_SIZES, bench
from gdn_bench.paths import checkout_of
from gdn_bench.report import plot
from gdn_bench.results import Results, Row
from gdn_bench.roles import BASELINE

COLUMNS = (("B", "batch_size", "d"), ("ours µs", "ours_us", ".2f"), ("floor µs", "floor_us", ".2f"),
           ("×floor", "x_floor", ".3f"), ("FI µs", f"{BASELINE}_us", ".2f"), ("FLA µs", f"{LIBRARY}_us", ".2f"),
           ("FI/ours", "vs_fi", ".3f"), ("host ours", "host_ours_us", ".1f"), ("host copy", "host_copy_us", ".1f"),
           ("host ×", "host_ratio", ".2f"), ("state err", "state_rel_err", ".1e"), ("out err", "out_rel_err", ".1e"))


def _derive(row: dict) -> dict:
    row["x_floor"] = row["ours_us"] / row["floor_us"]
    row["host_ratio"] = row["host_ours_us"] / row["host_copy_us"]
    if f"{BASELINE}_us" in row:
        row["vs_fi"] = row[f"{BASELINE}_us"] / row["ours_us"]
    return row


def format_rows(rows: list[dict]) -> str:
    lines = ["  ".join(f"{title:>9}" for title, _, _ in COLUMNS)]
    for row in rows:
        lines.append("  ".join(f"{row[key]:>9{spec}}" if key in row else f"{'-':>9}" for _, key, spec in COLUMNS))
    return "\n".join(lines)


def as_results(rows: list[dict], gpu: str) -> Results:
    """The rows as a Results, so report.plot draws them like run_local's."""
    results = Results(meta={"gpu": gpu, "definition": DECODE.name})
    for row in rows:
        batch = row["batch_size"]
        results.floors_us[batch] = row["floor_us"]
        for algo, key in ((DECODE.submission, "ours_us"), (BASELINE, f"{BASELINE}_us"), (LIBRARY, f"{LIBRARY}_us")):
            if key in row:
                results.rows.append(Row(algo, f"B{batch}", {"batch_size": batch}, "PASSED", kernel_us=row[key]))
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", default=",".join(map(str, BATCH_SIZES)), help="comma-separated")
    parser.add_argument("--out", type=output_folder, default="results/bench_kernel", help="output folder")
    add_root_argument(parser, checkout_of(__file__))
    args = parser.parse_args(argv)
    chosen_project(parser, args)
    if not torch.cuda.is_available():
        print("bench_kernel: error: needs a CUDA GPU (CUPTI timing)", file=sys.stderr)
        return 2
    rows = [_derive(r) for r in bench([int(b) for b in args.batch_sizes.split(",")])]
    gpu = torch.cuda.get_device_name()
    print(f"GPU: {gpu}; kernel times: CUPTI, cold L2, median; host: median wall time of sync; call; sync")
    print(format_rows(rows))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_kernel.json").write_text(json.dumps({"gpu": gpu, "rows": rows}, indent=2))
    plot(as_results(rows, gpu), args.out / "bench_kernel.png")
    print(f"wrote {args.out / 'bench_kernel.json'} and {args.out / 'bench_kernel.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

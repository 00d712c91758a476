"""Run GDN decode algorithms through flashinfer-bench on this machine and report truthfully.

    python scripts/run_local.py                         # the submission on the embedded trace set
    python scripts/run_local.py --algo all --batch-sizes 1,64
    python scripts/run_local.py --algo fla-recurrent,fi-baseline --dataset ~/mlsys26-contest

With a CUDA GPU: every selected workload, correctness + three timing tiers (harness, kernel,
floor). Without one: correctness only, on a small subset, with Triton's interpreter.
Writes results.json, kernel_time.png and report.txt under --out. Exit status: 0 when every
(algorithm, workload) passed, 1 when any failed, 2 for bad arguments.
"""

import argparse
import datetime
import os
import sys
from pathlib import Path

from gdn_bench.definition import DEFINITION_NAME
from gdn_bench.device import prepare_triton

DEFAULT_ALGO = "fla-recurrent"


def _batch_sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not sizes or any(s <= 0 for s in sizes):
        raise argparse.ArgumentTypeError(f"expected positive batch sizes, got {text!r}")
    return sizes


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every runner shares (run_local and run_modal): all but --dataset."""
    parser.add_argument("--algo", default=os.environ.get("ALGO", DEFAULT_ALGO),
                        help=f"NAME[,NAME...] or 'all' (default: $ALGO, else {DEFAULT_ALGO})")
    parser.add_argument("--definition", default=DEFINITION_NAME, help=f"definition name (default {DEFINITION_NAME})")
    parser.add_argument("-n", "--num-workloads", type=positive_int, help="at most this many workloads")
    parser.add_argument("--batch-sizes", type=_batch_sizes, help="only these batch sizes, e.g. 1,4,64")
    parser.add_argument("--workload-id", help="only workloads whose uuid starts with this")
    parser.add_argument("--warmup", type=positive_int, default=10, help="harness warm-up calls (default 10)")
    parser.add_argument("--iterations", type=positive_int, default=50, help="harness timed calls (default 50)")
    parser.add_argument("--trials", type=positive_int, default=3, help="harness trials (default 3)")
    parser.add_argument("--out", type=Path, help="results folder (default results/<UTC time>)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser)
    parser.add_argument("--dataset", type=Path, default=os.environ.get("FIB_DATASET_PATH"),
                        help="trace set root (default: $FIB_DATASET_PATH, else the embedded one)")
    return parser


def settings_from_args(args: argparse.Namespace):
    """RunSettings from parsed arguments; raises ValueError for an unknown algorithm."""
    from gdn_bench.algos import resolve
    from gdn_bench.runner import RunSettings

    out = args.out or Path("results") / datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return RunSettings(
        algos=[a.name for a in resolve(args.algo)], dataset=args.dataset, definition=args.definition,
        num_workloads=args.num_workloads, batch_sizes=args.batch_sizes, workload_id=args.workload_id,
        warmup=args.warmup, iterations=args.iterations, trials=args.trials, out=out,
    )


def report(results, out: Path) -> int:
    """Print the table and write the report under `out`; the exit status: 0 when every
    (algorithm, workload) passed, else 1."""
    from gdn_bench.report import format_table, write_report

    print(format_table(results))
    paths = write_report(results, Path(out))
    print(f"wrote {paths['json']}, {paths['plot']}, {paths['table']}")
    ok = results.rows and all(r.status == "PASSED" for r in results.rows)
    return 0 if ok else 1


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    prepare_triton()
    from gdn_bench.runner import run

    try:
        settings = settings_from_args(args)
        results = run(settings)
    except (ValueError, FileNotFoundError) as e:
        print(f"run_local: error: {e}", file=sys.stderr)
        return 2
    return report(results, settings.out)


if __name__ == "__main__":
    raise SystemExit(main())

"""Compare run_local's contest speedups (reference time / the submission's, per workload) with
what flashinfer-bench's own CLI (`flashinfer-bench run`, the reference profiled) reports on a
few of the same workloads (gdn_bench/fib_compare.py says how the two time and what to expect).

    python scripts/run_local.py --definition prefill --out results/prefill      # on a GPU, first
    python scripts/compare_fib_cli.py results/prefill/results.json              # then, same GPU
    python scripts/compare_fib_cli.py results/prefill/results.json -k 3 --runner persistent
    python scripts/compare_fib_cli.py results/prefill/results.json --dry-run    # write, print the command
    python scripts/compare_fib_cli.py results/prefill/results.json --cli ~/bin/flashinfer-bench-main

Takes the results.json of a run_local run on a GPU (with reference times: not --reference
skip), picks -k workloads where the submission passed, spread over the reference's times
(the fastest and the slowest included), writes a trace set for the CLI under --work (by
default fib_cli/ beside the results.json; it must not exist yet): the run's definition from
its trace set, those workloads, and the submission packed from this checkout (--root; it
should be the one the run timed). Then runs `flashinfer-bench run` on it (--cli names the
executable; by default this Python's, else the one on PATH) with the run's warm-up /
iterations / trials (the isolated runner unless --runner persistent),
and prints and writes (comparison.json under --work) both speedups per workload, and how many
reference times agree within 10 % (issue 27's criterion). Exit
status: 0 when the CLI ran and passed every workload, 1 otherwise, 2 for bad arguments.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from gdn_bench.arguments import ScriptParser, add_root_argument, chosen_project, positive_int
from gdn_bench.definitions import resolve
from gdn_bench.fib_compare import (DEFAULT_COUNT, agreement, cli_command, compare, format_agreement,
                                   format_comparison, pick_workloads, write_cli_trace_set)
from gdn_bench.paths import checkout_of
from gdn_bench.results import Results

COMPARISON = "comparison.json"


def flashinfer_bench_cli() -> str:
    """The `flashinfer-bench` command of this Python's environment, else the one on PATH."""
    beside = Path(sys.executable).parent / "flashinfer-bench"
    return str(beside) if beside.is_file() else shutil.which("flashinfer-bench") or "flashinfer-bench"


def main(argv=None) -> int:
    parser = ScriptParser("compare_fib_cli", description=__doc__)
    parser.add_argument("results", type=Path, help="results.json of a run_local run on a GPU")
    parser.add_argument("-k", "--count", type=positive_int, default=DEFAULT_COUNT,
                        help=f"how many workloads (default {DEFAULT_COUNT})")
    parser.add_argument("--work", type=Path, help="a new folder for the CLI's trace set (default: fib_cli/ beside "
                                                  "the results.json)")
    parser.add_argument("--runner", choices=("isolated", "persistent"), default="isolated",
                        help="flashinfer-bench's runner (default isolated: --use-isolated-runner)")
    parser.add_argument("--cli", help="the flashinfer-bench executable to run (default: the one beside this Python, "
                                      "else the one on PATH)")
    parser.add_argument("--dry-run", action="store_true", help="write the trace set and print the command only")
    add_root_argument(parser, checkout_of(__file__))
    args = parser.parse_args(argv)
    chosen_project(parser, args)
    try:
        results = Results.from_json(json.loads(args.results.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError) as e:
        parser.error(f"argument results: not a run_local results.json ({e})")
    if results.meta.get("mode") != "gpu":
        parser.error(f"argument results: {args.results} is a CPU run's (a correctness pass: nothing timed); this "
                     "compares timings: give the results.json of a run_local run on a GPU")
    if not results.reference_us:
        parser.error(f"argument results: {args.results} has no reference times (a GPU run with --reference skip); "
                     "run run_local on the GPU without it")
    work = args.work or args.results.parent / "fib_cli"
    if work.exists():
        parser.error(f"argument --work: {work} exists; name a new folder")
    uuids = pick_workloads(results, args.count)
    if not uuids:
        parser.error(f"argument results: in {args.results} the submission passed no workload with both times")

    from flashinfer_bench import TraceSet

    from gdn_bench.dataset import load_trace_set

    spec = resolve(results.meta["definition"])
    try:
        source = load_trace_set(results.meta["dataset"], spec.name)
    except (FileNotFoundError, ValueError) as e:
        parser.error(f"argument results: the run's trace set: {e}")
    solution = spec.algos_by_name[spec.submission].solution()
    write_cli_trace_set(work, source, spec.name, uuids, solution)
    command = cli_command(args.cli or flashinfer_bench_cli(), work, spec.name, solution.name, results.meta["harness"],
                          args.runner == "isolated")
    print(f"trace set for the CLI: {work} ({len(uuids)} workloads of {spec.name}, solution {solution.name})")
    print(" ".join(command))
    if args.dry_run:
        return 0
    ran = subprocess.run(command, check=False)
    traces = TraceSet.from_path(str(work)).traces.get(spec.name, [])  # what it saved, even if it stopped early
    entries = compare(results, traces, solution.name, spec)
    agreed = agreement(entries)
    print(format_comparison(entries))
    print(format_agreement(agreed))
    (work / COMPARISON).write_text(json.dumps({
        "results": str(args.results), "gpu": results.meta.get("gpu"), "command": command,
        "cli_exit_status": ran.returncode, "agreement": agreed, "workloads": entries}, indent=2), encoding="utf-8")
    print(f"wrote {work / COMPARISON}")
    passed = len(entries) == len(uuids) and all(e["flashinfer_bench"]["status"] == "PASSED" for e in entries)
    return 0 if ran.returncode == 0 and passed else 1


if __name__ == "__main__":
    raise SystemExit(main())

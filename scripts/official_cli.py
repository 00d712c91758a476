"""Run flashinfer-bench main's own CLI (`flashinfer-bench run`, the contest's evaluator) on a
definition's whole generated trace set with the submission, and say whether every workload
PASSED (issue 36 item 4, issue 34). Put a copy of main's package first on PYTHONPATH
(`git archive HEAD flashinfer_bench | tar -x -C .fib_main`, `git rev-parse HEAD >
.fib_main/COMMIT`); main also needs pyyaml.

    python scripts/official_cli.py --definition mtp --out docs/data/cli_agreement/official_mtp_h200
    python scripts/official_cli.py --definition prefill --out docs/data/cli_agreement/official_prefill_h200
    python scripts/official_cli.py --definition mtp --dry-run --out OUT   # write the trace set, print the command

The trace set (under --work, default OUT/trace_set) holds the definition (mtp: the official
declaration with its own reference, --reference kit for the kit's; prefill: the kit's), every
workload of the kit's generated mix (blobs linked), and the submission packed from this
checkout; the CLI runs with the definition's contest warm-up / iterations / trials, the
persistent runner (--runner isolated for the other), and --no-profile-baseline unless
--profile-reference: the reference then makes the expected outputs only (gdn_bench.official_cli
says what timing it would cost; the estimate is printed first). OUT gets summary.txt and
cli.json: the command, flashinfer-bench's commit and file, the wall time, and per workload the
CLI's status, errors and times. Exit status 0 when every workload PASSED, 1 otherwise, 2 for
bad arguments or without a CUDA GPU (but --dry-run).
"""

import shlex
import subprocess
import sys
import time
from pathlib import Path

from gdn_bench.arguments import ScriptParser, add_root_argument, chosen_project, fail, output_folder
from gdn_bench.definitions import resolve

PROG = "official_cli"


def main(argv=None) -> int:
    from gdn_bench.paths import checkout_of

    parser = ScriptParser(PROG, description=__doc__)
    parser.add_argument("--definition", choices=("mtp", "prefill", "decode"), required=True)
    parser.add_argument("--reference", choices=("official", "kit"),
                        help="whose reference makes the expected outputs (default: official for mtp, else kit)")
    parser.add_argument("--profile-reference", action="store_true",
                        help="time the reference too (slow: see the printed estimate)")
    parser.add_argument("--runner", choices=("persistent", "isolated"), default="persistent",
                        help="flashinfer-bench's runner (default persistent, the CLI's own default)")
    parser.add_argument("--work", type=Path, help="a new folder for the CLI's trace set (default: OUT/trace_set)")
    parser.add_argument("--dry-run", action="store_true", help="write the trace set and print the command only")
    parser.add_argument("--out", type=output_folder, required=True, help="folder for summary.txt and cli.json")
    add_root_argument(parser, checkout_of(__file__))
    args = parser.parse_args(argv)
    chosen_project(parser, args)
    spec = resolve(args.definition)
    work = args.work or args.out / "trace_set"
    if work.exists():
        parser.error(f"argument --work: {work} exists; name a new folder")
    import torch

    if not (args.dry_run or torch.cuda.is_available()):
        return fail(PROG, "needs a CUDA GPU (the CLI runs on one); --dry-run writes the trace set without")
    import flashinfer_bench

    from gdn_bench.dataset import load_trace_set
    from gdn_bench.fib_compare import cli_command, write_cli_trace_set
    from gdn_bench.official_cli import (declared_definition, fib_commit, official_mtp_pass_seconds, reference_calls,
                                        summarize, write_summary)

    official = (args.reference or ("official" if args.definition == "mtp" else "kit")) == "official"
    try:
        declared = declared_definition(spec.short, official)
        source = load_trace_set(spec.default_dataset(True), spec.name)
    except (ValueError, FileNotFoundError) as e:
        return fail(PROG, str(e))
    workloads = [t.workload for t in source.workloads[spec.name]]
    solution = spec.algos_by_name[spec.submission].solution()
    write_cli_trace_set(work, source, spec.name, [w.uuid for w in workloads], solution, declared)
    harness = {"warmup": spec.harness.warmup, "iterations": spec.harness.iterations, "trials": spec.harness.trials}
    # The CLI of this Python's flashinfer_bench (main's, first on PYTHONPATH), whatever is on PATH.
    command = [sys.executable, "-c", "from flashinfer_bench.cli.main import cli; cli()", *cli_command(
        "", work, spec.name, solution.name, harness, args.runner == "isolated", args.profile_reference)[1:]]
    calls = reference_calls(harness, args.profile_reference)
    print(f"trace set for the CLI: {work} ({len(workloads)} workloads of {spec.name}, solution {solution.name}, "
          f"{'official' if official else 'the kit'}'s reference, called {calls} times a workload)")
    if official:
        print(f"estimate: the official reference's loop alone, about {official_mtp_pass_seconds(workloads) * calls:.0f}"
              " s (host launch cost as on an H200; more under CUPTI tracing when profiled)")
    print(shlex.join(command))
    if args.dry_run:
        return 0
    started = time.monotonic()
    ran = subprocess.run(command, check=False)
    seconds = time.monotonic() - started
    traces = flashinfer_bench.TraceSet.from_path(str(work)).traces.get(spec.name, [])
    labels = {w.uuid: spec.workload_label(dict(w.axes)) for w in workloads}
    summary = summarize(traces, solution.name, labels)
    context = {"command": command, "cli_exit_status": ran.returncode, "wall_seconds": round(seconds, 1),
               "gpu": torch.cuda.get_device_name(), "flashinfer_bench": flashinfer_bench.__file__,
               "flashinfer_bench_commit": fib_commit(),
               "reference": "official" if official else "kit", "reference_profiled": args.profile_reference}
    paths = write_summary(args.out, summary, context)
    print((args.out / "summary.txt").read_text(encoding="utf-8"))
    print(f"wrote {', '.join(map(str, paths))}")
    return 0 if ran.returncode == 0 and summary["passed"] == summary["total"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""run_local's command line (scripts/run_local.py), and the flags every runner shares
(scripts/run_modal.py takes them too).

    python scripts/run_local.py                         # decode: the submission on the embedded trace set
    python scripts/run_local.py --definition prefill --algo all
    python scripts/run_local.py --algo all --batch-sizes 1,64
    python scripts/run_local.py --algo fla-recurrent,fi-baseline --dataset ~/mlsys26-contest

With a CUDA GPU: every selected workload, correctness + timing tiers (harness, kernel, and
for decode the memory floor). Without one: correctness only, with Triton's interpreter, on
the definition's CPU subset unless flags choose the workloads (-n: the first N of each
report group). Random inputs come from --seed. The trace set is the definition's own unless
--dataset is given: decode's is embedded; prefill's is generated once into the cache folder
(a small embedded subset on CPU). The project checkout is the script's own unless --root
names another. Writes results.json, report.txt, margins.png and (when anything was timed)
kernel_time.png under --out, which is checked first. Ctrl-C stops the run and writes what
finished, marked partial. Exit status: 0 when every (algorithm, workload) passed, 1 when any
failed or none ran, 2 for bad arguments, 130 when interrupted.
"""

import argparse
import datetime
import sys
from pathlib import Path

from gdn_bench.arguments import (add_root_argument, chosen_project, definition_name, output_folder, positive_int,
                                 positive_ints, seed)
from gdn_bench.definitions import DEFAULT, DEFINITIONS, resolve
from gdn_bench.device import prepare_triton
from gdn_bench.interrupts import EXIT_STATUS

PROG = "run_local"


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every runner shares (run_local and run_modal): all but --dataset and --root."""
    choices = ", ".join(f"{s.short} ({s.name})" for s in DEFINITIONS.values())
    parser.add_argument("--definition", type=definition_name, default=DEFAULT,
                        help=f"{choices}; default {DEFAULT}")
    parser.add_argument("--algo", metavar="NAME[,NAME...]",
                        help="algorithms to run, or 'all' (default: the definition's submission); "
                             "the list below names them per definition")
    per_group = "; ".join(f"{s.short}: {s.group_title}" for s in DEFINITIONS.values())
    parser.add_argument("-n", "--num-workloads", type=positive_int, metavar="N",
                        help=f"at most N workloads of each report group, the first in the trace set ({per_group})")
    for spec in DEFINITIONS.values():
        parser.add_argument(spec.size_flag, type=positive_ints, dest=f"sizes_{spec.short}",
                            help=f"{spec.short}: only these {spec.size_axis} values, e.g. 1,4,64")
    parser.add_argument("--workload-id", help="only workloads whose uuid starts with this")
    harness = "; ".join(f"{s.short} {s.harness.warmup}/{s.harness.iterations}/{s.harness.trials}"
                        for s in DEFINITIONS.values())
    parser.add_argument("--warmup", type=positive_int, help="harness warm-up calls (default: the contest's)")
    parser.add_argument("--iterations", type=positive_int, help="harness timed calls (default: the contest's)")
    parser.add_argument("--trials", type=positive_int,
                        help=f"harness trials (contest warm-up/iterations/trials: {harness})")
    parser.add_argument("--seed", type=seed, default=0,
                        help="seed of the random inputs the kit draws (each workload's from it and its uuid), "
                             "printed in the report; default 0")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    parser.add_argument("--out", type=output_folder, default=str(Path("results") / now),
                        help="results folder, checked before anything runs (default: results/<UTC time> in the "
                             "current folder; the paths written are printed in full)")


def algorithms_epilog() -> str:
    """The algorithms --algo takes, per definition, for --help."""
    lines = ["algorithms (--algo), per definition (--definition); the first is the default:"]
    for spec in DEFINITIONS.values():
        lines.append(f"  {spec.short}:")
        width = max(len(a.name) for a in spec.algos)
        for algo in sorted(spec.algos, key=lambda a: a.name != spec.submission):
            gpu = " (GPU)" if algo.needs_gpu else ""
            lines.append(f"    {algo.name:<{width}}  {algo.summary}{gpu}")
    return "\n".join(lines)


def build_parser(checkout: Path) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="run_local.py", description=__doc__, epilog=algorithms_epilog(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser)
    add_root_argument(parser, checkout)
    parser.add_argument("--dataset", type=Path, help="trace set root (default: the definition's own)")
    return parser


def chosen_algos(spec, text: str | None) -> list[str]:
    """The algorithm names --algo gives for `spec` (its submission when None); ValueError for
    an unknown name, saying which definition it belongs to when it is another's."""
    from gdn_bench.algos import UnknownAlgorithm, resolve as resolve_algos

    try:
        return [a.name for a in resolve_algos(spec.algos_by_name, text or spec.submission)]
    except UnknownAlgorithm as e:
        hints = "".join(f"; {name} is a {other.short} algorithm: add --definition {other.short}"
                        for name in e.names for other in DEFINITIONS.values() if name in other.algos_by_name)
        valid = ", ".join([*spec.algos_by_name, "all"])
        raise ValueError(f"--algo: unknown {spec.short} algorithm {', '.join(e.names)}{hints} "
                         f"({spec.short}'s: {valid})") from None


def settings_from_args(args: argparse.Namespace):
    """RunSettings from parsed arguments; raises ValueError for an unknown algorithm or a size
    flag of another definition."""
    from gdn_bench.runner import RunSettings

    spec = resolve(args.definition)
    for other in DEFINITIONS.values():
        if other is not spec and getattr(args, f"sizes_{other.short}") is not None:
            raise ValueError(f"{other.size_flag} applies to --definition {other.short}; "
                             f"{spec.short} selects by {spec.size_flag}")
    return RunSettings(
        algos=chosen_algos(spec, args.algo),
        dataset=args.dataset, definition=spec.short, num_workloads=args.num_workloads,
        sizes=getattr(args, f"sizes_{spec.short}"), workload_id=args.workload_id,
        warmup=args.warmup, iterations=args.iterations, trials=args.trials, seed=args.seed, out=args.out,
    )


def report(results, out: Path, prog: str = PROG) -> int:
    """Print the table and write the report under `out`; the exit status: 0 when every
    (algorithm, workload) passed, 1 otherwise, EXIT_STATUS (130) for a run that Ctrl-C
    stopped. A report that cannot be written is one line on stderr (from `prog`), status 2."""
    from gdn_bench.report import format_table, write_report
    from gdn_bench.results import summarize

    summary = summarize(results, resolve(results.meta["definition"]))
    print(format_table(results, summary))
    try:
        paths = write_report(results, summary, Path(out))
    except OSError as e:
        print(f"{prog}: error: cannot write the report under {out}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"wrote {', '.join(map(str, paths.values()))}")
    if "plot" not in paths:
        print("no kernel_time.png: nothing was timed" + ("" if "margins" in paths else ", and no margins.png: "
                                                           "nothing was checked"))
    if results.meta.get("partial"):
        print(f"{prog}: {results.meta['partial']}; the report holds those (marked partial)", file=sys.stderr)
        return EXIT_STATUS
    return 0 if summary.total and summary.passed == summary.total else 1


def main(argv=None, *, checkout: Path) -> int:
    """run_local with `argv` (default sys.argv[1:]); `checkout` is the calling script's own."""
    parser = build_parser(checkout)
    args = parser.parse_args(argv)
    chosen_project(parser, args)
    try:
        prepare_triton()
        from gdn_bench.runner import run

        settings = settings_from_args(args)
        results = run(settings)
    except (ValueError, FileNotFoundError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted by Ctrl-C before any case ran; nothing written", file=sys.stderr)
        return EXIT_STATUS
    try:
        return report(results, settings.out)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted by Ctrl-C while writing the report under {settings.out}; it may be incomplete",
              file=sys.stderr)
        return EXIT_STATUS

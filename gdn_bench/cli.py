"""run_local's command line (scripts/run_local.py), and the flags every runner shares
(scripts/run_modal.py takes them too).

    python scripts/run_local.py                         # decode: the submission on the embedded trace set
    python scripts/run_local.py --definition prefill --algo all
    python scripts/run_local.py --algo all --batch-sizes 1,64
    python scripts/run_local.py --algo fla-recurrent,fi-baseline --dataset ~/mlsys26-contest
    python scripts/run_local.py --definition both       # the track: decode, then prefill, then the track score
    python scripts/run_local.py --definition mtp        # the third definition (not in the track's score)

With a CUDA GPU: every selected workload, correctness + timing tiers (harness, kernel, and
for decode the memory floor), the kernel time of the definition's own reference (cached per
GPU model and workload; --reference, --reference-cache) and the contest score: the mean over
workloads of the reference's time / the submission's. Without one: correctness only, with Triton's interpreter, on
the definition's CPU subset unless flags choose the workloads (-n: the first N of each
report group). Random inputs come from --seed. The trace set is the definition's own unless
--dataset is given: decode's is embedded; prefill's and mtp's are generated once into the
cache folder (a small embedded subset on CPU). The project checkout is the script's own unless --root
names another. Writes results.json, report.txt, margins.png and (when anything was timed)
kernel_time.png under --out, which is checked first (with --definition both: under
--out/decode and --out/prefill, and on a GPU track.json with the track score under --out).
Ctrl-C stops the run and writes what finished, marked partial. Exit status: 0 when every
(algorithm, workload) passed, 1 when any failed or none ran, 2 for bad arguments, 130 when
interrupted.
"""

import argparse
import datetime
import json
import sys
import tempfile
from pathlib import Path

from gdn_bench.arguments import (ScriptParser, add_root_argument, chosen_project, count, definitions_name, output_file,
                                 output_folder, positive_int, positive_ints, seed)
from gdn_bench.definitions import BOTH, DEFAULT, DEFINITIONS, chosen, resolve
from gdn_bench.device import prepare_triton
from gdn_bench.interrupts import EXIT_STATUS
from gdn_bench.reference_times import MODES, REFERENCE_FILE

PROG = "run_local"
TRACK_FILE = "track.json"
SUBMISSION = "submission"  # what --algo takes for the definition's own submission, whatever its name


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every runner shares (run_local and run_modal): all but --dataset and --root."""
    choices = ", ".join(f"{s.short} ({s.name})" for s in DEFINITIONS.values())
    parser.add_argument("--definition", type=definitions_name, default=DEFAULT,
                        help=f"{choices}, or {BOTH} (each in turn, then the track score); default {DEFAULT}")
    parser.add_argument("--algo", metavar="NAME[,NAME...]",
                        help=f"algorithms to run, or 'all' (default: the definition's submission, which "
                             f"'{SUBMISSION}' also names, e.g. --definition both --algo {SUBMISSION},fi-baseline); "
                             "the list below names them per definition")
    per_group = "; ".join(f"{s.short}: {s.group_title}" for s in DEFINITIONS.values())
    parser.add_argument("-n", "--num-workloads", type=positive_int, metavar="N",
                        help=f"at most N workloads of each report group, the first in the trace set ({per_group})")
    for flag, specs in _size_flags().items():
        parser.add_argument(flag, type=positive_ints, dest=_size_dest(flag),
                            help=f"{' and '.join(s.short for s in specs)}: only these {specs[0].size_axis} values, "
                                 "e.g. 1,4,64")
    parser.add_argument("--workload-id", help="only workloads whose uuid starts with this")
    harness = "; ".join(f"{s.short} {s.harness.warmup}/{s.harness.iterations}/{s.harness.trials}"
                        for s in DEFINITIONS.values())
    parser.add_argument("--warmup", type=count, help="harness warm-up calls, 0 for none (GPU; default: the contest's)")
    parser.add_argument("--iterations", type=positive_int, help="harness timed calls (GPU; default: the contest's)")
    parser.add_argument("--trials", type=positive_int,
                        help=f"harness trials (GPU; contest warm-up/iterations/trials: {harness})")
    parser.add_argument("--seed", type=seed, default=0,
                        help="seed of the random inputs the kit draws (each workload's from it and its uuid), "
                             "printed in the report; default 0")
    parser.add_argument("--reference", choices=MODES, default=MODES[0],
                        help="the kernel times of the definition's own reference (GPU; the contest's speedup is "
                             "its time / ours): cached = take them from the cache, measuring those missing "
                             "(default); measure = measure every one anew; skip = measure none (none cached: no "
                             "contest score)")
    parser.add_argument("--reference-cache", type=output_file(REFERENCE_FILE), metavar="FILE",
                        help=f"the file of reference times, one per GPU model and workload, to copy and share "
                             f"(default: {REFERENCE_FILE} in the cache folder, $GDN_BENCH_CACHE or ~/.cache/gdn-bench)")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    parser.add_argument("--out", type=output_folder, default=str(Path("results") / now),
                        help="results folder, checked before anything runs (default: results/<UTC time> in the "
                             "current folder; the paths written are printed in full)")


def gpu_only_flags(args: argparse.Namespace) -> list[str]:
    """The flags given that only a GPU run uses: the harness's counts and the reference times
    (the CPU pass checks correctness and times nothing)."""
    given = [flag for flag, value in (("--warmup", args.warmup), ("--iterations", args.iterations),
                                      ("--trials", args.trials), ("--reference-cache", args.reference_cache))
             if value is not None]
    return given + ([f"--reference {args.reference}"] if args.reference != MODES[0] else [])


def _size_flags() -> dict:
    """{size flag: the definitions that select by it} (decode and mtp share --batch-sizes)."""
    flags: dict[str, list] = {}
    for spec in DEFINITIONS.values():
        flags.setdefault(spec.size_flag, []).append(spec)
    return flags


def _size_dest(flag: str) -> str:
    """The argparse destination of a size flag: --batch-sizes -> sizes_batch_sizes."""
    return "sizes_" + flag.lstrip("-").replace("-", "_")


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
    parser = ScriptParser(PROG, description=__doc__, epilog=algorithms_epilog())
    add_run_arguments(parser)
    add_root_argument(parser, checkout)
    parser.add_argument("--dataset", type=Path, help="trace set root (default: the definition's own)")
    return parser


def chosen_algos(spec, text: str | None) -> list[str]:
    """The algorithm names --algo gives for `spec` (its submission when None; SUBMISSION names
    it too); ValueError for an unknown name, saying which definition it belongs to when it is
    another's."""
    from gdn_bench.algos import UnknownAlgorithm, resolve as resolve_algos

    text = ",".join(spec.submission if n.strip() == SUBMISSION else n
                    for n in (SUBMISSION if text is None else text).split(","))
    try:
        return [a.name for a in resolve_algos(spec.algos_by_name, text)]
    except UnknownAlgorithm as e:
        hints = "".join(f"; {name} is a {other.short} algorithm: add --definition {other.short}"
                        for name in e.names for other in DEFINITIONS.values() if name in other.algos_by_name)
        valid = ", ".join([*spec.algos_by_name, SUBMISSION, "all"])
        raise ValueError(f"--algo: unknown {spec.short} algorithm {', '.join(e.names)}{hints} "
                         f"({spec.short}'s: {valid})") from None


def chosen_runs(args: argparse.Namespace) -> list[tuple]:
    """(spec, algorithm names) per definition --definition names (both: decode, then prefill);
    raises ValueError for an unknown algorithm or a size flag of a definition that does not
    run. Reads the registry only: no torch, so argument errors come at once."""
    specs = chosen(args.definition)
    for flag, users in _size_flags().items():
        if getattr(args, _size_dest(flag)) is not None and not any(spec in users for spec in specs):
            raise ValueError(f"{flag} applies to --definition {' or '.join(s.short for s in users)}; "
                             f"{specs[0].short} selects by {specs[0].size_flag}")
    runs = []
    for spec in specs:
        try:
            runs.append((spec, chosen_algos(spec, args.algo)))
        except ValueError as e:
            raise ValueError(f"{spec.short}: {e}" if len(specs) > 1 else str(e)) from None
    return runs


def settings_from_args(args: argparse.Namespace) -> list:
    """One RunSettings per definition --definition names (both: decode, then prefill, each
    writing under --out/<definition>); raises ValueError as chosen_runs does."""
    runs = chosen_runs(args)
    from gdn_bench.runner import RunSettings  # after the checks: it imports torch

    return [RunSettings(
        algos=algos, dataset=args.dataset, definition=spec.short, num_workloads=args.num_workloads,
        sizes=getattr(args, _size_dest(spec.size_flag)), workload_id=args.workload_id,
        warmup=args.warmup, iterations=args.iterations, trials=args.trials, seed=args.seed,
        out=args.out / spec.short if len(runs) > 1 else args.out,
        reference=args.reference, reference_file=args.reference_cache,
    ) for spec, algos in runs]


def report(results, out: Path, prog: str = PROG) -> int:
    """Print the table and write the report under `out` (elsewhere if it cannot be, see
    `written`); the exit status: 0 when every (algorithm, workload) passed, 1 otherwise,
    EXIT_STATUS (130) for a run that Ctrl-C stopped, else 2 when the report is not under `out`."""
    from gdn_bench.report import format_table, write_report
    from gdn_bench.results import summarize

    summary = summarize(results, resolve(results.meta["definition"]))
    print(format_table(results, summary))
    paths, status = written(Path(out), lambda folder: write_report(results, summary, folder), "the report", prog)
    if paths is None:
        return status
    print(f"wrote {', '.join(map(str, paths.values()))}")
    if "plot" not in paths:
        print("no kernel_time.png: nothing was timed" + ("" if "margins" in paths else ", and no margins.png: "
                                                           "nothing was checked"))
    if results.meta.get("partial"):
        print(f"{prog}: {results.meta['partial']}; the report holds those (marked partial)", file=sys.stderr)
        return EXIT_STATUS
    return status or (0 if summary.total and summary.passed == summary.total else 1)


def written(out: Path, write, what: str, prog: str = PROG) -> tuple:
    """(write(out), 0); where `out` cannot be written (made a file, removed or its disk full
    since it was checked, mid-run), (write(a new folder in the system's temporary folder), 2),
    saying so in one line on stderr, so that nothing is lost; (None, 2) and one line when
    neither can be written."""
    try:
        return write(out), 0
    except OSError as e:
        why = f"cannot write {what} under {out} ({e.strerror or e})"
    try:
        kept = Path(tempfile.mkdtemp(prefix=f"{prog}-"))
        done = write(kept)
    except OSError as e:
        print(f"{prog}: error: {why}, nor in a temporary folder ({e.strerror or e}); what is printed above is all "
              "there is", file=sys.stderr)
        return None, 2
    print(f"{prog}: error: {why}; wrote it under {kept} instead", file=sys.stderr)
    return done, 2


def report_track(runs: list, out: Path, prog: str = PROG) -> int:
    """The track score of runs of every definition (Results, each with its submission): print
    it, or why there is none, and write it to TRACK_FILE under `out` (elsewhere if it cannot
    be, see `written`); returns 0, or 2 when it is not under `out`."""
    from gdn_bench.results import summarize, track_score

    summaries = {r.meta["definition"]: summarize(r, resolve(r.meta["definition"])) for r in runs}
    scores = {name: s.contest_score for name, s in summaries.items()}
    track = {"contest_scores": scores, "track_score": track_score(scores),
             "fi_ratios": {name: s.fi_ratio for name, s in summaries.items()}}
    names = " and ".join(resolve(name).short for name in scores)
    if track["track_score"] is None:
        missing = ", ".join(resolve(name).short for name, score in scores.items() if score is None)
        print(f"track score: not measured (no contest score for {missing})")
    else:
        print(f"track score: {track['track_score']:.2f} (the mean of the {names} contest scores, "
              + ", ".join(f"{score:.2f}" for score in scores.values()) + ")")

    def write(folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / TRACK_FILE).write_text(json.dumps(track, indent=2), encoding="utf-8")

    return written(out, write, TRACK_FILE, prog)[1]


def main(argv=None, *, checkout: Path) -> int:
    """run_local with `argv` (default sys.argv[1:]); `checkout` is the calling script's own."""
    parser = build_parser(checkout)
    args = parser.parse_args(argv)
    chosen_project(parser, args)
    statuses, runs, current = [], [], None
    try:
        chosen_runs(args)  # argument errors before torch is imported
        ignored = [] if prepare_triton() else gpu_only_flags(args)
        if ignored:
            print(f"{PROG}: note: no CUDA GPU, so {', '.join(ignored)} change nothing: the CPU pass checks "
                  "correctness and times nothing", file=sys.stderr)
        from gdn_bench.runner import run

        for current in settings_from_args(args):
            runs.append(run(current))
            statuses.append(report(runs[-1], current.out))
            if statuses[-1] == EXIT_STATUS:  # Ctrl-C stopped this definition: none after it
                return EXIT_STATUS
    except (ValueError, FileNotFoundError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if len(runs) > len(statuses):
            where = f"while writing the report under {current.out}; it may be incomplete"
        else:
            where = "before any case ran" + (f" of {current.definition}" if statuses else "") + "; nothing written"
            where += f" for it (written: {', '.join(str(r.meta['definition']) for r in runs)})" if statuses else ""
        print(f"{PROG}: interrupted by Ctrl-C {where}", file=sys.stderr)
        return EXIT_STATUS
    if len(runs) > 1 and any(r.meta["mode"] == "gpu" for r in runs):  # on CPU nothing is timed: no score
        statuses.append(report_track(runs, args.out))
    return max(statuses)

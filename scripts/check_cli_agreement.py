"""Check on a GPU that run_local's contest score is the contest evaluator's (issue 27): time the
definition's reference as run_local does, run flashinfer-bench's own CLI on the same
workloads, and put the two side by side. Run it with flashinfer-bench main first on
PYTHONPATH (its CLI is the contest's evaluator; it is not released, so a copy of its package:
`git archive HEAD flashinfer_bench | tar -x -C DIR`, with `git rev-parse HEAD > DIR/COMMIT`),
FlashInfer and cupti-python installed, and libcupti on LD_LIBRARY_PATH.

    python scripts/check_cli_agreement.py --definition prefill -n 1 -k 8 --out OUT
    python scripts/check_cli_agreement.py --definition decode -n 2 -k 8 --host-cost prefill:6,262,2305 --out OUT

1. The timer: which one gdn_bench times the reference with here (gdn_bench.evaluator_timing),
   and flashinfer-bench's commit (from the COMMIT file beside its package, if any). It must be
   flashinfer-bench main's time_runnable with CUPTI, else the check stops (exit 1). A small
   call is then timed by the kit's timer, the evaluator's, and the kit's again (run_local
   --definition both mixes them in one process).
2. --host-cost DEFINITION:SIZES: scripts/reference_host_cost.py on those workloads (why the
   two timers differ), into OUT/host_cost.json.
3. For each definition: scripts/run_local.py --definition D -n N (--sizes for the size flag)
   --reference measure, its reference times into a new cache file; then
   scripts/compare_fib_cli.py on its results.json with -k K, running the CLI through a wrapper
   named flashinfer-bench (put first on PATH) that runs this Python's flashinfer_bench.
4. The summary, printed last and written to OUT/summary.txt: the timer, then per definition
   the comparison table and how many reference times agree within 10 %.

Each step is a process of its own, working in a new folder under the system's temporary one
(made once the timer passes, and kept: the summary names it); its output goes to OUT/log.txt
(step 2's is printed too), and it is stopped when --budget seconds (for everything) run out,
leaving room for the summary. OUT gets check.json (the timer, the versions, the small call's
times), log.txt, summary.txt, reference-times.json and, per definition, results.json,
report.txt and comparison.json under OUT/<definition>/ (with --host-cost, host_cost.json: 8
files for one definition). Exit status 0 when every definition compared at least -k workloads
and every reference time agrees; 1 otherwise; 2, with one line and nothing written, for bad
arguments or without a CUDA GPU.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gdn_bench.arguments import ScriptParser, fail, output_folder, positive_int, positive_ints
from gdn_bench.definitions import DEFINITIONS, resolve
from gdn_bench.fib_compare import TOLERANCE, format_agreement, format_comparison
from gdn_bench.reference_times import REFERENCE_FILE

PROG = "check_cli_agreement"
SCRIPTS = Path(__file__).resolve().parent
SUMMARY_SECONDS = 15  # kept back from the budget for the summary
CLI_NAME = "flashinfer-bench"


def check_timer() -> dict:
    """Step 1 (module docstring): the timer, the versions, and a small call's times (µs) by the
    kit's timer, the evaluator's and the kit's again; "ok" is False, with "why", when the
    evaluator's timer is not flashinfer-bench main's with CUPTI or cannot time the call. The
    kit's timer failing after the evaluator's is noted ("mixing"), not fatal: a run of one
    definition times the reference last."""
    import torch
    import triton

    from gdn_bench.evaluator_timing import TIME_RUNNABLE, evaluator_time_us, reference_timer
    from gdn_bench.official_cli import fib_commit
    from gdn_bench.timing import TimingError, kernel_time_us

    timer = reference_timer()
    found = {"timer": timer.name, "description": timer.describe(1, 5, 3),
             "versions": {**timer.versions, "triton": triton.__version__}, "commit": fib_commit(),
             "gpu": torch.cuda.get_device_name(), "ld_library_path": os.environ.get("LD_LIBRARY_PATH"),
             "python": sys.version.split()[0]}
    if timer.name != TIME_RUNNABLE:
        return {**found, "ok": False, "why": f"the reference would be timed by {timer.describe(1, 5, 3)}; the check "
                                             f"needs flashinfer-bench main's time_runnable with CUPTI ({_main()})"}
    x = torch.zeros(1 << 20, device="cuda")
    times = {"kit": kernel_time_us(lambda: x.add_(1))}
    try:
        times["evaluator"] = evaluator_time_us(timer.time_ms, x.add_, [1], 10, 50, 1)[0]
    except TimingError as e:
        return {**found, "ok": False, "why": f"the evaluator's timer failed on a small call: {e}"}
    try:
        times["kit_after_evaluator"] = kernel_time_us(lambda: x.add_(1))
        mixing = "ok"
    except TimingError as e:
        mixing = f"the kit's timer failed after the evaluator's ({e}): run_local --definition both would too"
    return {**found, "ok": True, "small_call_us": times, "mixing": mixing}


def _main() -> str:
    """Why flashinfer-bench main's time_runnable is not the timer, or where it is."""
    try:
        from flashinfer_bench.bench import timing
    except Exception as e:  # noqa: BLE001 - whatever stops the import is the answer
        return f"flashinfer_bench.bench.timing does not import: {type(e).__name__}: {e}"
    if not hasattr(timing, "bench_gpu_time_with_cupti"):
        return f"{timing.__file__} is not flashinfer-bench main's: it does not time with CUPTI"
    return f"main's is {timing.__file__}"


def cli_wrapper(folder: Path) -> Path:
    """An executable `flashinfer-bench` in `folder` that runs this Python's flashinfer_bench CLI
    (whatever PYTHONPATH puts first), saying on stderr which one."""
    folder.mkdir(parents=True, exist_ok=True)
    code = ("import sys, flashinfer_bench; print('flashinfer-bench CLI from', flashinfer_bench.__file__, "
            "file=sys.stderr); from flashinfer_bench.cli.main import cli; sys.argv[0] = 'flashinfer-bench'; cli()")
    path = folder / CLI_NAME
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "{code}" "$@"\n', encoding="utf-8")
    path.chmod(0o755)
    return path


class Steps:
    """Runs each step's process with what is left of the budget, its output appended to a log."""

    def __init__(self, budget: float, log: Path, env: dict):
        self.deadline, self.log, self.env = time.monotonic() + budget - SUMMARY_SECONDS, log, env

    def run(self, name: str, command: list[str], echo: bool = False) -> int | None:
        """The command's exit status; None when it was stopped at the deadline or never started."""
        left = self.deadline - time.monotonic()
        with self.log.open("a", encoding="utf-8") as log:
            log.write(f"\n=== {name} ({left:.0f} s left): {' '.join(command)}\n")
            log.flush()
            if left < 1:
                log.write("not started: no time left\n")
                return None
            start = time.monotonic()
            try:
                ran = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env,
                                     timeout=left, text=True, errors="replace")
            except subprocess.TimeoutExpired as e:
                log.write((e.stdout or "") if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace"))
                log.write(f"\nstopped after {time.monotonic() - start:.0f} s: the budget ran out\n")
                return None
            log.write(ran.stdout)
            log.write(f"\nexit status {ran.returncode} after {time.monotonic() - start:.0f} s\n")
        if echo:
            print(ran.stdout)
        return ran.returncode


def definition_summary(short: str, out: Path, status: dict, count: int) -> tuple[list[str], bool]:
    """Lines for one definition, from its comparison.json in `out` (if any), and whether it
    passed: at least `count` workloads compared, every reference time within TOLERANCE."""
    lines = [f"--- {resolve(short).name}: run_local exit {status.get('run_local')}, "
             f"compare_fib_cli exit {status.get('compare')}"]
    path = out / short / "comparison.json"
    if not path.is_file():
        return lines + ["no comparison: see log.txt"], False
    data = json.loads(path.read_text(encoding="utf-8"))
    agreed = data["agreement"]
    lines += [format_comparison(data["workloads"]), format_agreement(agreed)]
    passed = agreed["compared"] >= count and agreed["within"] == agreed["compared"]
    lines.append(f"{'PASS' if passed else 'FAIL'}: {agreed['within']} of {agreed['compared']} reference times within "
                 f"{TOLERANCE:.0%}, {count} needed")
    return lines, passed


def _copy(source: Path, target: Path) -> None:
    if source.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def main(argv=None) -> int:
    parser = ScriptParser(PROG, description=__doc__)
    parser.add_argument("--definition", action="append", choices=[s.short for s in DEFINITIONS.values()],
                        required=True, help="a definition to check (repeatable)")
    parser.add_argument("-n", "--num-workloads", type=positive_int, default=1,
                        help="run_local's -n: workloads per report group (default 1)")
    parser.add_argument("--sizes", type=positive_ints, help="run_local's size flag (--batch-sizes / --seq-lens)")
    parser.add_argument("-k", "--count", type=positive_int, default=8,
                        help="workloads compared with the CLI per definition, and needed to pass (default 8)")
    parser.add_argument("--host-cost", metavar="DEFINITION:SIZES", help="also run reference_host_cost.py on these")
    parser.add_argument("--budget", type=positive_int, default=540, help="seconds for everything (default 540)")
    parser.add_argument("--out", type=output_folder, required=True, help="folder for what is kept (see above)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    import torch

    if not torch.cuda.is_available():
        return fail(PROG, "needs a CUDA GPU: the check times on one")
    args.out.mkdir(parents=True, exist_ok=True)
    log, cache = args.out / "log.txt", args.out / REFERENCE_FILE
    check = check_timer()
    (args.out / "check.json").write_text(json.dumps(check, indent=2), encoding="utf-8")
    lines = [f"timer: {check['description']}", f"GPU: {check['gpu']}; versions: {check['versions']}",
             f"flashinfer-bench commit: {check.get('commit')}"]
    if check["ok"]:
        work = Path(tempfile.mkdtemp(prefix="cli-agreement-"))
        wrapper = cli_wrapper(work / "bin")
        env = {**os.environ, "PATH": f"{wrapper.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        steps = Steps(args.budget - (time.monotonic() - started), log, env)
        lines.append(f"work folder: {work}")
        lines.append(f"small call, µs: {check['small_call_us']}; the kit's timer after the evaluator's: "
                     f"{check['mixing']}")
        if args.host_cost:
            name, _, sizes = args.host_cost.partition(":")
            steps.run("reference_host_cost", [sys.executable, str(SCRIPTS / "reference_host_cost.py"), "--definition",
                                              name, "--sizes", sizes, "--out", str(args.out / "host_cost.json")],
                      echo=True)
        statuses = {}
        for short in args.definition:
            spec, folder = resolve(short), work / short
            statuses[short] = {"run_local": steps.run(f"run_local {short}", [
                sys.executable, str(SCRIPTS / "run_local.py"), "--definition", short, "-n", str(args.num_workloads),
                *([spec.size_flag, ",".join(map(str, args.sizes))] if args.sizes else []), "--reference", "measure",
                "--reference-cache", str(cache), "--out", str(folder)])}
            if (folder / "results.json").is_file():
                statuses[short]["compare"] = steps.run(f"compare_fib_cli {short}", [
                    sys.executable, str(SCRIPTS / "compare_fib_cli.py"), str(folder / "results.json"), "-k",
                    str(args.count), "--cli", str(wrapper), "--work", str(folder / "fib_cli")])
            for name in ("results.json", "report.txt"):
                _copy(folder / name, args.out / short / name)
            _copy(folder / "fib_cli" / "comparison.json", args.out / short / "comparison.json")
        passed = []
        for short in args.definition:
            text, ok = definition_summary(short, args.out, statuses[short], args.count)
            lines += text
            passed.append(ok)
        ok = all(passed)
    else:
        lines.append(f"STOPPED: {check['why']}")
        ok = False
    lines.append(f"{'PASS' if ok else 'FAIL'}: issue 27's check ({', '.join(args.definition)})")
    summary = "\n".join(lines)
    (args.out / "summary.txt").write_text(summary + "\n", encoding="utf-8")
    print(summary)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

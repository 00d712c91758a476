#!/usr/bin/env bash
# Issue 27 on a GPU: is the contest evaluator's reference time (flashinfer-bench main's
# time_runnable -> FlashInfer 0.7.2's bench_gpu_time_with_cupti) the same in a fresh process,
# in a process where the kit's torch.profiler timer ran first (as run_local), and in the CLI?
# And what inside a timed call makes it long (CUPTI buffer callbacks, GC)?
#
#   run from the repo root, carry [".dev", ".whl"]:   bash .dev/gpu27.sh
#
# Steps (each under `timeout`, ending by a fixed second after the start, ~7.5 min in all):
#   setup  carried wheels -> /tmp/site27 (.dev/fib27/wheels: FlashInfer 0.7.2 without its JIT
#          sources, cupti-python 13.0.1; .whl without flashinfer-bench 0.1.2), flashinfer-bench
#          main (.dev/fib27, commit in .dev/fib27/COMMIT) first on PYTHONPATH, libcupti on
#          LD_LIBRARY_PATH
#   a1, a2 two fresh processes that never touch torch.profiler: each checks the timer (main's
#          time_runnable, CUPTI, no fallback warning, buffers seen), then times each reference
#          once with time_runnable, the contest's counts, one trial: decode B=1,16,64 (warm-up 10,
#          iterations 50), prefill T=6..2305 from the contest mix (warm-up 1, iterations 5), T=262
#          again after T=1105, T=2305 last (skipped when it would overrun)
#   b      a fresh process that first runs the kit's torch.profiler timer on our submission for
#          every workload (run_local's kernel tier), then the same sweep
#   cli    flashinfer-bench main's CLI (`run`, persistent runner: the reference is timed in the
#          CLI's main process with either runner) on B=1,16,64 and T=6,131,262,553, the same
#          counts, one trial (eval.yaml), our submissions; reference times from its saved traces
#   summary  the table (printed last; also $OUT/summary.txt)
# Progress lines ([a1] ...) and errors are printed; everything is in $OUT/log.txt.
# $OUT gets log.txt, a1.jsonl, a2.jsonl, b.jsonl, cli.json, summary.txt.
set -u
START=$(date +%s)
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out27}
mkdir -p "$OUT"
LOG="$OUT/log.txt"
ROOT=$PWD
WORK=/tmp/work27
rm -rf "$WORK" && mkdir -p "$WORK"
PROBE=$WORK/probe27.py

# Run "$@" under timeout until START + $1 seconds (+15 s grace), its output into the log.
step() {
  local name=$1 until=$2; shift 2
  local left=$(( START + until - $(date +%s) ))
  (( left < 20 )) && left=20
  echo "=== $name (t=$(( $(date +%s) - START )) s, up to $left s): $*" | tee -a "$LOG"
  timeout -k 5 $(( left + 15 )) "$@" 2>&1 | tee -a "$LOG" \
    | grep --line-buffered -E '^\[(a1|a2|b)\]|Traceback|Error|PASSED|INCORRECT|TIMEOUT' | cut -c1-400
  echo "=== $name: exit ${PIPESTATUS[0]} at t=$(( $(date +%s) - START )) s" | tee -a "$LOG"
}

cat > "$PROBE" <<'PY'
"""Issue 27 probe: the definitions' references timed by the contest evaluator's own function
(flashinfer-bench main's time_runnable -> FlashInfer's bench_gpu_time_with_cupti), with what
happens inside each timed call recorded beside the time.

    python3 probe27.py sweep LABEL OUT.jsonl --deadline EPOCH [--profiler-first]
    python3 probe27.py cli-set ROOT            # the CLI's trace set (both definitions)
    python3 probe27.py cli-read ROOT OUT.json  # the CLI's reference times, from its saved traces
    python3 probe27.py summary OUTDIR          # the table

sweep: the timer check first (main's time_runnable, CUPTI, no fallback warning, buffers
seen), then every WORKLOAD in order, each one session of time_runnable with the contest's
counts (decode 10 / 50, prefill 1 / 5; one trial), one JSON line each. --profiler-first runs
the kit's torch.profiler timer on our submission for every workload before (as run_local's
kernel tier does before its reference tier). Recorded per session: the median time_runnable
returns, every traced call's CUPTI span and host wall time, the untraced calls' wall times,
and the CUPTI buffer callbacks (count, records, milliseconds, thread) and garbage-collector
pauses that fell inside the traced calls. A workload whose estimated session would end
after --deadline is skipped (said so).
"""

import argparse
import gc
import json
import statistics
import sys
import threading
import time
from pathlib import Path

# (definition, label, uuid prefix): decode from the embedded trace set, prefill from the
# generated contest mix (T = total tokens, N = sequences, P = the reference's loop length).
WORKLOADS = [
    ("decode", "B=1", "6e75df36"),
    ("decode", "B=16", None),
    ("decode", "B=64", None),
    ("prefill", "T=6 N=3", "f66a0ef1"),
    ("prefill", "T=18 N=1", "b0d74d17"),
    ("prefill", "T=34 N=2", "d0137523"),
    ("prefill", "T=131 N=1", "ceab7fe7"),
    ("prefill", "T=262 N=1", "f0764c0c"),
    ("prefill", "T=553 N=1", "e9e2d328"),
    ("prefill", "T=1105 N=13", "8073ed72"),
    ("prefill", "T=262 N=1 again", "f0764c0c"),
    ("prefill", "T=2305 N=2", "7f2285b0"),
]
CLI_LABELS = ("B=1", "B=16", "B=64", "T=6 N=3", "T=131 N=1", "T=262 N=1", "T=553 N=1")
COUNTS = {"decode": (10, 50), "prefill": (1, 5)}  # the contest's warm-up / iterations
BLOWUP_GUESS = 12  # traced call / untraced call, for the deadline estimate only (up to ~20 seen)


class Recorder:
    """CUPTI buffer callbacks and GC pauses, with perf_counter times, for the whole process."""

    def __init__(self):
        self.session = -1  # the time_runnable session in flight (index), -1 between sessions
        self.sessions = 0
        self.buffers: list[dict] = []
        self.gc_pauses: list[tuple[float, float]] = []
        self.main = threading.get_ident()
        self.patched = self._patch_cupti()
        self._gc_start = None
        gc.callbacks.append(self._gc)

    def _gc(self, phase, info):
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif self._gc_start is not None:
            self.gc_pauses.append((self._gc_start, time.perf_counter()))
            self._gc_start = None

    def _patch_cupti(self) -> str:
        """Wrap cupti-python's activity_register_callbacks (each registration is a session;
        its completed-buffer callback is timed) and finalize (the session's end)."""
        try:
            from cupti import cupti
        except Exception as e:  # noqa: BLE001
            return f"cupti does not import: {type(e).__name__}: {e}"
        register, finalize, recorder = cupti.activity_register_callbacks, cupti.finalize, self

        def activity_register_callbacks(requested, completed):
            owner = recorder.sessions
            recorder.session, recorder.sessions = owner, owner + 1

            def buffer_completed(activities):
                start = time.perf_counter()
                try:
                    return completed(activities)
                finally:
                    recorder.buffers.append({"owner": owner, "during": recorder.session, "start": start,
                                             "end": time.perf_counter(), "records": len(activities),
                                             "main_thread": threading.get_ident() == recorder.main})

            return register(requested, buffer_completed)

        def cupti_finalize():
            recorder.session = -1
            return finalize()

        try:
            cupti.activity_register_callbacks, cupti.finalize = activity_register_callbacks, cupti_finalize
        except Exception as e:  # noqa: BLE001
            return f"cannot wrap cupti's functions: {type(e).__name__}: {e}"
        return "ok"

    def inside(self, intervals, since: int, gc_since: int) -> dict:
        """Buffer callbacks and GC pauses (recorded after index since / gc_since) overlapping
        the given (start, end) intervals: count, records, ms of overlap, longest callback."""
        def overlap(a, b):
            return sum(max(0.0, min(b, e) - max(a, s)) for s, e in intervals)

        new = self.buffers[since:]
        hit = [b for b in new if overlap(b["start"], b["end"]) > 0]
        return {"buffers_session": len(new), "records_session": sum(b["records"] for b in new),
                "buffers_in_traced": len(hit), "records_in_traced": sum(b["records"] for b in hit),
                "callback_ms_in_traced": 1e3 * sum(overlap(b["start"], b["end"]) for b in hit),
                "callback_ms_max": 1e3 * max((b["end"] - b["start"] for b in new), default=0.0),
                "callback_on_main_thread": sum(b["main_thread"] for b in new),
                "callback_outside_own_session": sum(b["owner"] != b["during"] for b in new),
                "gc_ms_in_traced": 1e3 * sum(overlap(s, e) for s, e in self.gc_pauses[gc_since:])}


def evaluator_check(recorder: Recorder) -> dict:
    """Which timer runs, and that it is CUPTI's: main's time_runnable on a small call, with no
    fallback warning and at least one CUPTI buffer seen."""
    import inspect
    import warnings

    import flashinfer_bench
    import torch
    from flashinfer_bench.bench import timing

    from gdn_bench.evaluator_timing import FALLBACK_WARNING, TIME_RUNNABLE, cupti_problem, reference_timer

    timer = reference_timer()
    facts = {"flashinfer_bench": flashinfer_bench.__file__, "timing": timing.__file__,
             "time_runnable_calls_cupti": "bench_gpu_time_with_cupti" in inspect.getsource(timing.time_runnable),
             "flashinfer_testing": inspect.getsourcefile(timing.bench_gpu_time_with_cupti),
             "kit_timer": timer.name, "versions": timer.versions, "cupti_problem": cupti_problem(),
             "instrumentation": recorder.patched, "gpu": torch.cuda.get_device_name(), "libcupti": _libcupti()}
    x = torch.zeros(1 << 20, device="cuda")
    since = len(recorder.buffers)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            facts["small_call_us"] = 1e3 * timing.time_runnable(x.add_, [1], 10, 50, "cuda:0")
        except Exception as e:  # noqa: BLE001 - the check fails, saying why
            facts["error"] = f"{type(e).__name__}: {e}"
    facts["warnings"] = [str(w.message)[:200] for w in caught]
    facts["buffers_seen"] = len(recorder.buffers) - since
    facts["ok"] = ("error" not in facts and timer.name == TIME_RUNNABLE and facts["time_runnable_calls_cupti"] and not facts["cupti_problem"]
                   and not any(FALLBACK_WARNING in w for w in facts["warnings"])
                   and (facts["buffers_seen"] > 0 or recorder.patched != "ok"))
    return facts


def _libcupti() -> list[str]:
    """The libcupti files mapped into this process (two would be two CUPTIs)."""
    with open("/proc/self/maps", encoding="utf-8") as f:
        return sorted({line.split()[-1] for line in f if "libcupti" in line})


def load_workloads():
    """{definition: (spec, definition, root, {label: workload})} for WORKLOADS."""
    from gdn_bench.dataset import load_trace_set
    from gdn_bench.definitions import resolve

    found = {}
    for short in ("decode", "prefill"):
        spec = resolve(short)
        trace_set = load_trace_set(spec.default_dataset(True), spec.name)
        workloads = [t.workload for t in trace_set.workloads[spec.name]]
        chosen = {}
        for name, label, prefix in WORKLOADS:
            if name != short:
                continue
            if prefix:
                chosen[label] = next(w for w in workloads if w.uuid.startswith(prefix))
            else:  # decode by batch size: the first of that size
                size = int(label.split("=")[1])
                chosen[label] = next(w for w in workloads if w.axes["batch_size"] == size)
        found[short] = (spec, trace_set.definitions[spec.name], trace_set.root, chosen)
    return found


def run_kit_profiler(found) -> dict:
    """The kit's torch.profiler timer on our submission for every workload, as run_local's
    kernel tier does before its reference tier: {label: µs or the error}."""
    import torch
    from flashinfer_bench.compile import BuilderRegistry

    from gdn_bench.checking import SolutionCall, workload_inputs
    from gdn_bench.timing import kernel_time_us

    registry, times = BuilderRegistry.get_instance(), {}
    for short, (spec, definition, root, chosen) in found.items():
        runnable = registry.build(definition, spec.algos_by_name[spec.submission].solution())
        for label, w in chosen.items():
            call = SolutionCall(definition, runnable, workload_inputs(definition, w, root, "cuda", 0), "cuda")
            try:
                with torch.no_grad():
                    times[label] = kernel_time_us(call)
            except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
                times[label] = f"{type(e).__name__}: {e}"
    return times


def session(recorder: Recorder, timing, reference, args: list, warmup: int, iterations: int) -> dict:
    """One time_runnable session of `reference` on `args`, with what happened inside it."""
    import torch

    walls: list[tuple[float, float]] = []

    def fn(*a):
        start = time.perf_counter()
        out = reference(*a)
        walls.append((start, time.perf_counter()))
        return out

    spans: list[float] = []
    original = timing.bench_gpu_time_with_cupti

    def spy(*a, **k):
        times = original(*a, **k)
        spans.extend(times)
        return times

    since, gc_since = len(recorder.buffers), len(recorder.gc_pauses)
    timing.bench_gpu_time_with_cupti = spy
    start = time.perf_counter()
    try:
        median_ms = timing.time_runnable(fn, args, warmup, iterations, f"cuda:{torch.cuda.current_device()}")
    finally:
        timing.bench_gpu_time_with_cupti = original
    traced, untraced = walls[-iterations:], walls[1:6]  # 1 first call, 5 estimate calls, warm-up, traced
    return {"ref_ms": median_ms, "spans_ms": spans, "traced_wall_ms": [1e3 * (e - s) for s, e in traced],
            "untraced_wall_ms": statistics.median(1e3 * (e - s) for s, e in untraced),
            "session_s": time.perf_counter() - start, "session_index": recorder.sessions - 1,
            **recorder.inside(traced, since, gc_since)}


def sweep(label: str, out: Path, deadline: float, profiler_first: bool) -> int:
    recorder = Recorder()  # before anything imports cupti's functions by name
    import torch
    from flashinfer_bench.bench import timing
    from flashinfer_bench.compile import BuilderRegistry

    from gdn_bench.checking import workload_inputs

    with out.open("w", encoding="utf-8") as f:
        def write(record):
            f.write(json.dumps({"variant": label, **record}) + "\n")
            f.flush()

        check = evaluator_check(recorder)
        write({"check": check})
        print(f"[{label}] timer check: {'ok' if check['ok'] else 'NOT OK'} {json.dumps(check)}")
        if not check["ok"]:
            return 1
        found = load_workloads()
        if profiler_first:
            start = time.perf_counter()
            kit = run_kit_profiler(found)
            write({"kit_profiler_us": kit, "seconds": time.perf_counter() - start})
            print(f"[{label}] kit torch.profiler timer ran first ({time.perf_counter() - start:.0f} s): {kit}")
        references = {short: BuilderRegistry.get_instance().build_reference(d) for short, (_, d, _, _) in found.items()}
        for short, name, _ in WORKLOADS:
            spec, definition, root, chosen = found[short]
            w, (warmup, iterations) = chosen[name], COUNTS[short]
            args = workload_inputs(definition, w, root, "cuda", 0)
            torch.cuda.synchronize()
            start = time.perf_counter()
            references[short](*args)  # as build_baseline's untimed call
            torch.cuda.synchronize()
            once = time.perf_counter() - start
            row = {"definition": short, "label": name, "uuid": w.uuid, "axes": dict(w.axes), "warmup": warmup,
                   "iterations": iterations, "first_call_ms": 1e3 * once}
            estimate = once * (6 + warmup + iterations * BLOWUP_GUESS)
            if time.time() + estimate > deadline:
                write({**row, "skipped": f"estimated {estimate:.0f} s, {deadline - time.time():.0f} s left"})
                print(f"[{label}] {name}: skipped (estimated {estimate:.0f} s)")
                continue
            row.update(session(recorder, timing, references[short], args, warmup, iterations))
            write(row)
            print(f"[{label}] {name}: {row['ref_ms']:.3f} ms (untraced call {row['untraced_wall_ms']:.3f} ms, "
                  f"traced walls {[round(x, 2) for x in row['traced_wall_ms']]}, spans "
                  f"{[round(x, 2) for x in row['spans_ms']]}, buffers {row['buffers_in_traced']}/"
                  f"{row['buffers_session']}, callbacks {row['callback_ms_in_traced']:.1f} ms in traced calls, "
                  f"gc {row['gc_ms_in_traced']:.1f} ms, session {row['session_s']:.1f} s)")
    return 0


def cli_set(root: Path) -> int:
    """A trace set at `root` for flashinfer-bench's CLI: both definitions, the CLI_LABELS
    workloads, our submission for each, and an eval config giving each definition the
    contest's counts with one trial (root/eval.yaml)."""
    from flashinfer_bench import Trace, TraceSet

    from gdn_bench.packing import write_solution
    from gdn_bench.trace_cache import new_trace_set

    found = load_workloads()
    root.mkdir(parents=True)
    lines = ["definition_config:"]
    for short, (spec, definition, source_root, chosen) in found.items():
        trace_set = new_trace_set(root, definition)
        trace_set.add_workload_traces([Trace(definition=definition.name, workload=w)
                                       for label, w in chosen.items() if label in CLI_LABELS])
        if (Path(source_root) / "blob").is_dir() and not (root / "blob").exists():
            (root / "blob").symlink_to((Path(source_root) / "blob").resolve(), target_is_directory=True)
        solution = spec.algos_by_name[spec.submission].solution()
        write_solution(solution, root / "solutions" / f"{solution.name}.json")
        warmup, iterations = COUNTS[short]
        lines += [f"  {definition.name}:", f"    warmup_runs: {warmup}", f"    iterations: {iterations}",
                  "    num_trials: 1"]
        print(f"{short}: {definition.name}, solution {solution.name}")
    (root / "eval.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    loaded = TraceSet.from_path(str(root))
    print(f"trace set {root}: " + ", ".join(f"{d}: {len(ws)} workloads" for d, ws in loaded.workloads.items()))
    return 0


def cli_read(root: Path, out: Path) -> int:
    """The CLI's reference latency (and ours) per workload uuid, from the traces it saved."""
    from flashinfer_bench import TraceSet

    rows = {}
    for name, traces in TraceSet.from_path(str(root)).traces.items():
        for t in traces:
            perf = t.evaluation.performance
            rows[t.workload.uuid] = {"definition": name, "status": t.evaluation.status.value,
                                     "ref_ms": perf.reference_latency_ms if perf else None,
                                     "ours_ms": perf.latency_ms if perf else None}
    out.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(f"CLI traces: {len(rows)} workloads")
    return 0


def _fmt(value, spec=".2f") -> str:
    return "-" if value is None else format(value, spec)


def summary(folder: Path) -> int:
    """The table: per workload the reference's time in each variant and the CLI, their ratios
    to the first fresh process, and what happened inside a1's traced calls."""
    variants, rows, checks, notes = [], {}, {}, []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            v = r["variant"]
            if v not in variants:
                variants.append(v)
            if "check" in r:
                checks[v] = r["check"]
            elif "label" in r:
                rows.setdefault(r["label"], {})[v] = r
            elif "kit_profiler_us" in r:
                notes.append(f"{v}: the kit's torch.profiler timer ran first on our submission ({r['seconds']:.0f} s)")
    cli_path = folder / "cli.json"
    cli = json.loads(cli_path.read_text(encoding="utf-8")) if cli_path.is_file() else {}
    for v, c in checks.items():
        print(f"{v}: timer {c.get('kit_timer')} ok={c.get('ok')} small call {_fmt(c.get('small_call_us'))} µs, "
              f"buffers {c.get('buffers_seen')}, instrumentation {c.get('instrumentation')}, "
              f"warnings {c.get('warnings')}")
    for n in notes:
        print(n)
    base = variants[0] if variants else None
    head = (f"{'workload':<17}{'untraced':>9}" + "".join(f"{v:>10}" for v in variants) + f"{'CLI':>10}"
            + "".join(f"{v + '/' + str(base):>9}" for v in variants[1:]) + f"{'CLI/' + str(base):>9}"
            + f"{'walls':>9}{'bufs':>6}{'cb ms':>9}{'gc ms':>7}{'stray':>6}")
    print("reference ms: time_runnable's median (one session; decode 10/50, prefill 1/5); untraced = "
          f"median host wall of the 5 untraced estimate calls ({base}); walls = median host wall of {base}'s "
          "traced calls; bufs / cb ms / gc ms = CUPTI buffer callbacks / their ms / GC pause ms inside "
          f"{base}'s traced calls; stray = callbacks delivered outside the session that registered them")
    print(head)
    print("-" * len(head))
    for _, label, _ in WORKLOADS:
        by = rows.get(label, {})
        first = by.get(base, {})
        times = [by.get(v, {}).get("ref_ms") for v in variants]
        uuid = next((r.get("uuid") for r in by.values() if r.get("uuid")), None)
        theirs = cli.get(uuid, {}).get("ref_ms") if uuid and "again" not in label else None
        ratios = [t / times[0] if t and times[0] else None for t in times[1:]]
        ratios.append(theirs / times[0] if theirs and times[0] else None)
        walls = first.get("traced_wall_ms")
        print(f"{label:<17}{_fmt(first.get('untraced_wall_ms')):>9}" + "".join(f"{_fmt(t):>10}" for t in times)
              + f"{_fmt(theirs):>10}" + "".join(f"{_fmt(r, '.3f'):>9}" for r in ratios)
              + f"{_fmt(statistics.median(walls) if walls else None):>9}"
              + f"{_fmt(first.get('buffers_in_traced'), 'd'):>6}{_fmt(first.get('callback_ms_in_traced'), '.1f'):>9}"
              + f"{_fmt(first.get('gc_ms_in_traced'), '.1f'):>7}{_fmt(first.get('callback_outside_own_session'), 'd'):>6}")
    skipped = [f"{v}:{label}" for label, by in rows.items() for v, r in by.items() if "skipped" in r]
    if skipped:
        print("skipped (deadline): " + ", ".join(skipped))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("sweep")
    p.add_argument("label")
    p.add_argument("out", type=Path)
    p.add_argument("--deadline", type=float, required=True, help="epoch seconds")
    p.add_argument("--profiler-first", action="store_true")
    sub.add_parser("cli-set").add_argument("root", type=Path)
    p = sub.add_parser("cli-read")
    p.add_argument("root", type=Path)
    p.add_argument("out", type=Path)
    sub.add_parser("summary").add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    from gdn_bench.paths import use_project

    use_project(Path.cwd())  # run from the checkout's root: our submission is packed from it
    if args.mode == "sweep":
        return sweep(args.label, args.out, args.deadline, args.profiler_first)
    if args.mode == "cli-set":
        return cli_set(args.root)
    if args.mode == "cli-read":
        return cli_read(args.root, args.out)
    return summary(args.folder)


if __name__ == "__main__":
    sys.exit(main())
PY

WHEELS=$(ls "$ROOT"/.dev/fib27/wheels/*.whl "$ROOT"/.whl/*.whl | grep -v '/flashinfer_bench-')
step setup 60 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site27 $WHEELS
export PYTHONPATH=$ROOT/.dev/fib27:/tmp/site27:$ROOT
export LD_LIBRARY_PATH=/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
echo "flashinfer-bench main commit $(cat "$ROOT/.dev/fib27/COMMIT")" | tee -a "$LOG"

step a1 175 python3 "$PROBE" sweep a1 "$OUT/a1.jsonl" --deadline $(( START + 175 ))
step a2 240 python3 "$PROBE" sweep a2 "$OUT/a2.jsonl" --deadline $(( START + 240 ))
step b 335 python3 "$PROBE" sweep b "$OUT/b.jsonl" --deadline $(( START + 335 )) --profiler-first
step cli-set 345 python3 "$PROBE" cli-set "$WORK/cli"
step cli 435 python3 -c "import sys; from flashinfer_bench.cli.main import cli; sys.argv[0] = 'flashinfer-bench'; cli()" \
  run --local "$WORK/cli" --config "$WORK/cli/eval.yaml" --save-results
step cli-read 445 python3 "$PROBE" cli-read "$WORK/cli" "$OUT/cli.json"

echo "=== summary (t=$(( $(date +%s) - START )) s)"
timeout 20 python3 "$PROBE" summary "$OUT" 2>&1 | tee "$OUT/summary.txt"
echo "total $(( $(date +%s) - START )) s"

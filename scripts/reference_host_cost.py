"""Why the contest evaluator's timer times the definition's reference longer than the kit's
own (issue 27): the reference on a few workloads, each call's host wall time (perf_counter
around the call) and GPU span, untraced and under each timer. Needs a GPU, and the
evaluator's timer with CUPTI (gdn_bench.evaluator_timing).

    python scripts/reference_host_cost.py --definition prefill --sizes 6,262,2305 --out host_cost.json

Per workload (the first of each size in the definition's GPU trace set), in this order:

- untraced: UNTRACED calls, each after a synchronize, as the evaluator calls it;
- kit: KIT_CALLS calls under the kit's timer (torch.profiler: gdn_bench.timing), each after
  its L2 flush; its profile gives the GPU records per call (kernels, copies, memsets: the
  launches) and each call's span;
- evaluator: the evaluator's timer with --warmup / --iterations (default prefill's contest
  1 / 5): its first calls are untraced (estimate and warm-up), its last `iterations` traced.

A host-bound call's span follows its host time, so where the evaluator's traced calls take
the host longer than untraced ones, that tracing is what lengthens the reference's time: the
table gives the extra host time per launch under each timer, and the evaluator's traced
calls' spread (a slow call among fast ones is one that handled a full CUPTI buffer).
"""

import json
import statistics
import sys
import time

from gdn_bench.arguments import ScriptParser, definition_name, output_file, positive_int, positive_ints
from gdn_bench.dataset import load_trace_set
from gdn_bench.definitions import resolve

UNTRACED = 3
KIT_CALLS = 3


def _timed(fn, walls: list[float]):
    """fn, appending each call's host wall time (seconds) to `walls`."""
    def call(*args):
        start = time.perf_counter()
        out = fn(*args)
        walls.append(time.perf_counter() - start)
        return out
    return call


def _ms(values) -> float:
    return statistics.median(values) * 1e3


def host_cost(definition, reference, workload, root, timer, warmup: int, iterations: int) -> dict:
    """One workload's numbers (module docstring), times in ms."""
    import torch

    from gdn_bench.checking import workload_inputs
    from gdn_bench.timing import _device_kernels, call_span, profile_cold_calls, split_calls

    args = workload_inputs(definition, workload, root, "cuda", 0)
    walls: list[float] = []
    fn = _timed(reference, walls)
    for _ in range(UNTRACED):
        torch.cuda.synchronize()
        fn(*args)
        torch.cuda.synchronize()
    untraced = walls[-UNTRACED:]
    prof, flush_names, _ = profile_cold_calls(lambda: fn(*args), calls=KIT_CALLS, warmup=0, busy=False)
    calls = split_calls(_device_kernels(prof), flush_names)
    kit = walls[-KIT_CALLS:]
    before = len(walls)
    span = timer.time_ms(fn, args, warmup, iterations, f"cuda:{torch.cuda.current_device()}")
    traced, warm = walls[-iterations:], walls[before:-iterations]
    launches = statistics.median(len(c) for c in calls)
    host = {"untraced": _ms(untraced), "kit": _ms(kit), "evaluator": _ms(traced),
            "evaluator_min": min(traced) * 1e3, "evaluator_max": max(traced) * 1e3,
            "evaluator_untraced": _ms(warm)}
    return {"workload": workload.uuid, "axes": dict(workload.axes), "launches": launches, "host_ms": host,
            "span_ms": {"kit": statistics.median(call_span(c) for c in calls) / 1e3, "evaluator": span},
            "extra_us_per_launch": {name: (host[name] - host["untraced"]) * 1e3 / launches
                                    for name in ("kit", "evaluator")}}


def format_rows(rows: list[dict], label) -> str:
    header = (f"{'workload':<14} {'launches':>8}   {'host ms: untraced':>17} {'kit':>8} {'evaluator':>9} "
              f"{'(min–max)':>17}   {'span ms: kit':>12} {'evaluator':>9}   {'extra µs/launch: kit':>19} "
              f"{'evaluator':>9}")
    lines = [header, "-" * len(header)]
    for r in rows:
        h, s, x = r["host_ms"], r["span_ms"], r["extra_us_per_launch"]
        spread = f"{h['evaluator_min']:.1f}–{h['evaluator_max']:.1f}"
        lines.append(f"{label(r['axes']):<14} {r['launches']:>8.0f}   {h['untraced']:>17.2f} {h['kit']:>8.2f} "
                     f"{h['evaluator']:>9.2f} {spread:>17}   {s['kit']:>12.2f} {s['evaluator']:>9.2f}   "
                     f"{x['kit']:>19.2f} {x['evaluator']:>9.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = ScriptParser("reference_host_cost", description=__doc__)
    parser.add_argument("--definition", type=definition_name, default="prefill",
                        help="decode or prefill (default prefill)")
    parser.add_argument("--sizes", type=positive_ints, required=True,
                        help="the size axis' values (batch_size, total_seq_len): the first workload of each")
    parser.add_argument("--warmup", type=positive_int, default=1, help="the evaluator's warm-up calls (default 1)")
    parser.add_argument("--iterations", type=positive_int, default=5, help="the evaluator's timed calls (default 5)")
    parser.add_argument("--out", type=output_file("host_cost.json"), default="host_cost.json",
                        help="JSON file of the numbers (default host_cost.json)")
    args = parser.parse_args(argv)
    spec = resolve(args.definition)
    # What needs torch, once the arguments are checked.
    import torch
    from flashinfer_bench.compile import BuilderRegistry

    from gdn_bench.evaluator_timing import reference_timer
    from gdn_bench.runner import RunSettings, select_workloads

    if not torch.cuda.is_available():
        print("reference_host_cost: error: needs a CUDA GPU", file=sys.stderr)
        return 2
    timer = reference_timer()
    if not timer.is_evaluators:
        print(f"reference_host_cost: error: {timer.describe(args.warmup, args.iterations, 1)}", file=sys.stderr)
        return 1
    trace_set = load_trace_set(spec.default_dataset(True), spec.name)
    settings = RunSettings(algos=[], definition=spec.name, sizes=args.sizes, num_workloads=1)
    try:
        workloads = select_workloads([t.workload for t in trace_set.workloads[spec.name]], settings, cpu=False)
    except ValueError as e:
        parser.error(f"argument --sizes: {e}")
    definition = trace_set.definitions[spec.name]
    reference = BuilderRegistry.get_instance().build_reference(definition)
    rows = [host_cost(definition, reference, w, trace_set.root, timer, args.warmup, args.iterations)
            for w in sorted(workloads, key=lambda w: w.axes[spec.size_axis])]
    print(f"{spec.name} reference on {torch.cuda.get_device_name()}; evaluator's timer: "
          f"{timer.describe(args.warmup, args.iterations, 1)}")
    print(format_rows(rows, spec.workload_label))
    args.out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "timer": timer.name,
                                    "versions": timer.versions, "warmup": args.warmup,
                                    "iterations": args.iterations, "rows": rows}, indent=2), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

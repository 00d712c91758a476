"""Run algorithms over a trace set: correctness and timing tiers, into a Results.

On a GPU, each workload goes through flashinfer-bench's Benchmark (status, max errors and
its own "harness" latency), then this process times every passing (algorithm, workload)
with CUPTI and a cold L2 ("kernel") and times the state copy per batch size ("floor").
Without a GPU, it checks correctness only, with Triton's interpreter (TRITON_INTERPRET=1 must
be set before triton is first imported: gdn_bench.device.prepare_triton does it).
Nothing is ever written into the dataset folder. `split` cuts a run into jobs that can run
anywhere (scripts/run_modal.py runs them on Modal) and whose Results merge back into one.
"""

import datetime
import importlib.metadata
import platform
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from flashinfer_bench import Benchmark, BenchmarkConfig, Trace, TraceSet, Workload
from tqdm import tqdm

from gdn_bench import algos as algo_registry
from gdn_bench.checking import check_solution, workload_inputs
from gdn_bench.dataset import load_trace_set
from gdn_bench.definition import DEFINITION_NAME
from gdn_bench.packing import PackError
from gdn_bench.results import Results, Row
from gdn_bench.timing import TimingError, copy_floor_us, kernel_time_us

# CPU fallback default: the first random workload of B=1 and B=4, and the first model-like one.
CPU_DEFAULT_BATCHES = (1, 4)


@dataclass
class RunSettings:
    algos: list[str]
    dataset: Path | None = None
    definition: str = DEFINITION_NAME
    num_workloads: int | None = None
    batch_sizes: list[int] | None = None
    workload_id: str | None = None
    warmup: int = 10
    iterations: int = 50
    trials: int = 3
    out: Path = Path("results")
    shard: tuple[int, int] | None = None  # (index, count): one slice of the selection, see select_workloads


def _has_blob(w: Workload) -> bool:
    return any(spec.type == "safetensors" for spec in w.inputs.values())


def select_workloads(trace_set: TraceSet, settings: RunSettings, cpu: bool) -> list[Workload]:
    """Filter by --workload-id prefix and --batch-sizes, then cap at -n. With no filter on CPU,
    the small default subset (CPU_DEFAULT_BATCHES plus one model-like workload). With a shard
    (index, count), only the index-th of `count` near-equal contiguous slices of that selection
    ordered by batch size (possibly empty when count exceeds the selection)."""
    workloads = [t.workload for t in trace_set.workloads[settings.definition]]
    if settings.workload_id:
        workloads = [w for w in workloads if w.uuid.startswith(settings.workload_id)]
    if settings.batch_sizes:
        workloads = [w for w in workloads if w.axes["batch_size"] in settings.batch_sizes]
    unfiltered = not (settings.workload_id or settings.batch_sizes or settings.num_workloads)
    if cpu and unfiltered:
        firsts = {}
        for w in workloads:
            key = "blob" if _has_blob(w) else w.axes["batch_size"]
            firsts.setdefault(key, w)
        workloads = [firsts[k] for k in (*CPU_DEFAULT_BATCHES, "blob") if k in firsts]
    if settings.num_workloads:
        workloads = workloads[: settings.num_workloads]
    if not workloads:
        raise ValueError("no workload matches the given --workload-id / --batch-sizes")
    if settings.shard:
        index, count = settings.shard
        workloads = sorted(workloads, key=lambda w: w.axes["batch_size"])
        workloads = workloads[len(workloads) * index // count: len(workloads) * (index + 1) // count]
    return workloads


def split(settings: RunSettings, groups: int) -> list[RunSettings]:
    """One job per (algorithm, batch-size group): each algorithm's selection cut into `groups`
    slices of neighbouring batch sizes. Together the jobs cover exactly what `settings` covers."""
    return [replace(settings, algos=[algo], shard=(i, groups)) for algo in settings.algos for i in range(groups)]


def _meta(settings: RunSettings, trace_set: TraceSet, cpu: bool) -> dict:
    def version(pkg):
        try:
            return importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "mode": "cpu-correctness" if cpu else "gpu",
        "gpu": None if cpu else torch.cuda.get_device_name(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "dataset": str(trace_set.root),
        "definition": settings.definition,
        "versions": {p: version(p) for p in ("torch", "triton", "flashinfer-bench", "flashinfer-python",
                                                 "flash-linear-attention")},
        "harness": {"warmup": settings.warmup, "iterations": settings.iterations, "trials": settings.trials},
    }


def _packed(algos, results: Results, workloads):
    """Pack each runnable algorithm; unavailable ones go to results.skipped, broken ones get
    COMPILE_ERROR rows. Returns {name: Solution}."""
    solutions = {}
    for algo in algos:
        reason = algo.unavailable()
        if reason:
            results.skipped[algo.name] = reason
            continue
        try:
            solutions[algo.name] = algo.solution()
        except PackError as e:
            results.rows += [Row(algo.name, w.uuid, w.axes["batch_size"], "COMPILE_ERROR", message=str(e))
                             for w in workloads]
    return solutions


def run(settings: RunSettings) -> Results:
    """Run settings.algos over the selected workloads (GPU: full tiers; CPU: correctness)."""
    cpu = not torch.cuda.is_available()
    algos = [algo_registry.ALGOS[n] for n in settings.algos]
    trace_set = load_trace_set(settings.dataset, settings.definition)
    workloads = select_workloads(trace_set, settings, cpu)
    results = Results(meta=_meta(settings, trace_set, cpu))
    solutions = _packed(algos, results, workloads)
    if solutions and workloads:
        (_run_cpu if cpu else _run_gpu)(settings, trace_set, workloads, solutions, results)
    results.rows.sort(key=lambda r: (r.batch_size, r.workload, r.algo))
    return results


def _run_cpu(settings, trace_set, workloads, solutions, results: Results) -> None:
    definition = trace_set.definitions[settings.definition]
    with tqdm(total=len(workloads) * len(solutions), desc="checking (CPU)", unit="case") as bar:
        for name, solution in solutions.items():
            for r in check_solution(definition, solution, workloads, trace_set.root, "cpu", progress=bar.update):
                results.rows.append(Row(name, r.workload, r.batch_size, r.status, _finite(r.max_abs_error),
                                        _finite(r.max_rel_error), message=r.message))


def _finite(x: float) -> float | None:
    return x if x == x else None  # NaN -> None (JSON has no NaN)


def _run_gpu(settings, trace_set, workloads, solutions, results: Results) -> None:
    definition = trace_set.definitions[settings.definition]
    rows = _harness_tier(settings, trace_set, definition, workloads, solutions)
    _kernel_tier(definition, trace_set.root, workloads, solutions, rows)
    results.rows += rows.values()
    batches = sorted({w.axes["batch_size"] for w in workloads})
    for batch in tqdm(batches, desc="copy floor", unit="batch"):
        results.floors_us[batch] = copy_floor_us(batch)


def _harness_tier(settings, trace_set, definition, workloads, solutions) -> dict:
    """flashinfer-bench's Benchmark, one workload at a time (for progress), never dumping
    traces. Returns {(algo, workload uuid): Row}."""
    bench_set = TraceSet(
        root=trace_set.root,
        definitions={definition.name: definition},
        solutions={definition.name: list(solutions.values())},
        workloads={definition.name: []},
    )
    by_solution_name = {s.name: algo for algo, s in solutions.items()}
    config = BenchmarkConfig(
        warmup_runs=settings.warmup, iterations=settings.iterations, num_trials=settings.trials,
        log_dir=str(Path(settings.out) / "logs"), definitions=[definition.name], profile_baseline=False,
    )
    bench = Benchmark(bench_set, config)
    rows = {}
    try:
        for w in tqdm(workloads, desc="flashinfer-bench", unit="workload"):
            bench_set.workloads[definition.name] = [Trace(definition=definition.name, workload=w)]
            traces = bench.run_all(dump_traces=False).traces.get(definition.name, [])
            for t in traces:
                ev, algo = t.evaluation, by_solution_name[t.solution]
                row = Row(algo, w.uuid, w.axes["batch_size"], ev.status.value)
                if ev.correctness:
                    row.max_abs_error = _finite(ev.correctness.max_absolute_error)
                    row.max_rel_error = _finite(ev.correctness.max_relative_error)
                if ev.performance:
                    row.harness_us = ev.performance.latency_ms * 1e3
                if ev.status.value != "PASSED":
                    row.message = ev.log[-2000:]
                rows[(algo, w.uuid)] = row
            for algo in solutions:  # a workload the runner gave up on
                rows.setdefault((algo, w.uuid), Row(algo, w.uuid, w.axes["batch_size"], "RUNTIME_ERROR",
                                                    message="flashinfer-bench returned no evaluation"))
    finally:
        bench.close()
    return rows


def _kernel_tier(definition, root, workloads, solutions, rows: dict) -> None:
    """CUPTI kernel time for every (algorithm, workload) that passed, one algorithm at a time,
    those marked `time_last` after the rest."""
    from flashinfer_bench.bench.evaluators.utils import allocate_outputs
    from flashinfer_bench.compile import BuilderRegistry

    registry = BuilderRegistry.get_instance()
    order = sorted(solutions, key=lambda a: algo_registry.ALGOS[a].time_last)
    todo = [(a, w) for a in order for w in workloads if rows[(a, w.uuid)].status == "PASSED"]
    for algo, w in tqdm(todo, desc="kernel time (CUPTI)", unit="case"):
        row = rows[(algo, w.uuid)]
        runnable = registry.build(definition, solutions[algo])
        inputs = workload_inputs(definition, w, root, "cuda")
        if runnable.metadata.destination_passing_style:
            outputs = allocate_outputs(definition, inputs, "cuda")

            def call():
                runnable(*inputs, *outputs)
        else:
            def call():
                runnable(*inputs)
        try:
            with torch.no_grad():
                row.kernel_us = kernel_time_us(call)
        except TimingError as e:
            row.message = f"kernel timing failed: {e}"

"""Run one definition's algorithms over a trace set: correctness and timing tiers, into a Results.

On a GPU, each workload goes through flashinfer-bench's Benchmark (status, max errors and
its own "harness" latency, with the contest's warm-up / iteration / trial counts for the
definition), then this process checks every algorithm again for the worst margins
(gdn_bench.checking), times every passing (algorithm, workload) with CUPTI and a cold L2
("kernel"), takes the time of the definition's own reference on every workload from the
cache of reference times or measures it with the contest evaluator's own timer
(gdn_bench.reference_times, gdn_bench.evaluator_timing: the contest's speedup is that time /
the submission's) and, where the definition has one, times the memory floor per report group.
Without a GPU, it checks correctness only, with Triton's interpreter (TRITON_INTERPRET=1 must
be set before triton is first imported: gdn_bench.device.prepare_triton does it).
Nothing is ever written into the dataset folder. A trace set whose workloads could not run
is refused when it loads (gdn_bench.trace_set_checks); a workload that still fails mid-run
(its inputs, the reference, flashinfer-bench's Benchmark) gets failed rows saying why, and the
run goes on. Ctrl-C stops a run and returns what finished, marked partial (meta["partial"]
says where it stopped; gdn_bench.interrupts).
`split` cuts a run into jobs that can run anywhere (scripts/run_modal.py runs them on Modal)
and whose Results merge back into one.
"""

import datetime
import importlib.metadata
import math
import platform
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from flashinfer_bench import Benchmark, BenchmarkConfig, Trace, TraceSet, Workload
from tqdm import tqdm

from gdn_bench.checking import (ATOL, RTOL, WORKLOAD_ERROR, CheckResult, SolutionCall, check_solutions,
                                workload_inputs)
from gdn_bench.dataset import load_trace_set
from gdn_bench.definitions import DEFAULT, DefinitionSpec, resolve
from gdn_bench.evaluator_timing import reference_timer
from gdn_bench.interrupts import Interrupted, stage, workers_ignore_ctrl_c
from gdn_bench.packing import PackError
from gdn_bench.paths import harness_outside_project, project_root
from gdn_bench.reference_times import ReferenceTimes, collect, default_file, to_measure
from gdn_bench.results import Results, Row
from gdn_bench.run_estimate import estimate_line, loop_harness, slashed, tiers
from gdn_bench.timing import TimingError, copy_floor_us, kernel_time_us, single_call_time_us


@dataclass
class RunSettings:
    """One run. `definition` is a short or full name; `dataset` None means the definition's
    default trace set; `sizes` filters the definition's size axis (batch_size for decode,
    total_seq_len for prefill); warmup / iterations / trials None take the contest's values
    for the definition. `seed` draws the random inputs of the kit's own checks and timings
    (checking.workload_inputs); flashinfer-bench's Benchmark draws its own."""

    algos: list[str]
    dataset: Path | None = None
    definition: str = DEFAULT
    num_workloads: int | None = None
    sizes: list[int] | None = None
    workload_id: str | None = None
    warmup: int | None = None
    iterations: int | None = None
    trials: int | None = None
    seed: int = 0
    out: Path = Path("results")
    shard: tuple[int, int] | None = None  # (index, count): one slice of the selection, see select_workloads
    reference: str | None = "cached"
    reference_file: Path | None = None
    reference_known: dict[str, dict] | None = None

    @property
    def spec(self) -> DefinitionSpec:
        return resolve(self.definition)


def select_workloads(workloads: list[Workload], settings: RunSettings, cpu: bool) -> list[Workload]:
    """Filter a trace set's workloads by --workload-id prefix and by size, then keep at most
    -n of each report group (the first in the trace set's order; spec.group_of: a batch size
    for decode, a total_seq_len bucket for prefill). With no filter on CPU, the definition's
    small CPU subset. ValueError when the uuid prefix matches nothing, a requested size has no
    workload (the message lists the sizes there are), or the CPU subset is empty. With a shard (index, count), only the
    index-th of `count` near-equal contiguous slices of that selection ordered by size
    (possibly empty when count exceeds the selection)."""
    spec = settings.spec
    if settings.workload_id:
        workloads = [w for w in workloads if w.uuid.startswith(settings.workload_id)]
        if not workloads:
            raise ValueError(f"no workload's uuid starts with {settings.workload_id!r}")
    if settings.sizes:
        present = sorted({w.axes[spec.size_axis] for w in workloads})
        missing = [size for size in settings.sizes if size not in present]
        if missing:
            among = " of those --workload-id chose" if settings.workload_id else ""
            raise ValueError(f"{spec.size_flag}: no workload has {spec.size_axis} {_listed(missing)}; "
                             f"the {spec.size_axis} values{among} are {_listed(present)}")
        workloads = [w for w in workloads if w.axes[spec.size_axis] in settings.sizes]
    unfiltered = not (settings.workload_id or settings.sizes or settings.num_workloads)
    if cpu and unfiltered:
        workloads = spec.cpu_subset(workloads)
        if not workloads:  # a trace set given with --dataset may have none
            raise ValueError(f"the CPU pass takes {spec.cpu_subset_note}, and this trace set has none; "
                             f"choose workloads with {spec.size_flag}, -n or --workload-id")
    if settings.num_workloads:
        workloads = first_per_group(workloads, spec.group_of, settings.num_workloads)
    if settings.shard:
        index, count = settings.shard
        workloads = sorted(workloads, key=lambda w: w.axes[spec.size_axis])
        workloads = workloads[len(workloads) * index // count: len(workloads) * (index + 1) // count]
    return workloads


def _listed(values) -> str:
    return ", ".join(map(str, values))


def first_per_group(workloads: list[Workload], group_of, count: int) -> list[Workload]:
    """The first `count` workloads of each group (group_of(axes)), in their original order."""
    taken: dict[int, int] = {}
    chosen = []
    for w in workloads:
        group = group_of(w.axes)
        if taken.get(group, 0) < count:
            taken[group] = taken.get(group, 0) + 1
            chosen.append(w)
    return chosen


def split(settings: RunSettings, groups: int) -> list[RunSettings]:
    """One job per (algorithm, size group): each algorithm's selection cut into `groups`
    slices of neighbouring sizes. Together the jobs cover exactly what `settings` covers; the
    reference times are the first algorithm's jobs' to get, once per workload."""
    return [replace(settings, algos=[algo], shard=(i, groups), reference=settings.reference if n == 0 else None)
            for n, algo in enumerate(settings.algos) for i in range(groups)]


def harness_settings(settings: RunSettings) -> dict:
    """warmup / iterations / trials: the given ones (a warm-up of 0 included), else the contest's
    for the definition."""
    default = settings.spec.harness
    given = {"warmup": settings.warmup, "iterations": settings.iterations, "trials": settings.trials}
    return {name: getattr(default, name) if value is None else value for name, value in given.items()}


def given_harness(settings: RunSettings) -> dict:
    """The warm-up / iterations / trials the run was given, None where it was not."""
    return {"warmup": settings.warmup, "iterations": settings.iterations, "trials": settings.trials}


def harness_passes(settings: RunSettings, algos) -> list[tuple[list[str], dict]]:
    """The Benchmark's passes: (algorithm names, warm-up / iterations / trials) for the kernels
    together with harness_settings' counts, then one per Python-loop algorithm (Algo.launches)
    with run_estimate.loop_harness's; passes with no algorithm are left out."""
    kernels = [a.name for a in algos if a.launches is None]
    loops = [([a.name], loop_harness(given_harness(settings))) for a in algos if a.launches is not None]
    return ([(kernels, harness_settings(settings))] if kernels else []) + loops


def _str_or_none(value) -> str | None:
    return None if value is None else str(value)


def selection_note(settings: RunSettings, cpu: bool) -> str:
    """How the workloads were chosen, in words, for the report."""
    spec = settings.spec
    chosen = []
    if settings.workload_id:
        chosen.append(f"--workload-id {settings.workload_id}")
    if settings.sizes:
        chosen.append(f"{spec.size_flag} {_listed(settings.sizes).replace(' ', '')}")
    if settings.num_workloads:
        chosen.append(f"-n {settings.num_workloads} (the first {settings.num_workloads} of each {spec.group_title})")
    if chosen:
        return "chosen by " + ", ".join(chosen)
    return f"the default CPU subset: {spec.cpu_subset_note}" if cpu else "the whole trace set"


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
        "root": str(project_root()),
        "package": _str_or_none(harness_outside_project()),  # gdn_bench's folder when not the checkout's
        "dataset": str(trace_set.root),
        "available": len(trace_set.workloads[settings.spec.name]),
        "selection": selection_note(settings, cpu),
        "seed": settings.seed,
        "check": {"atol": ATOL, "rtol": RTOL},
        "definition": settings.spec.name,
        "submission": settings.spec.submission,
        "versions": {p: version(p) for p in ("torch", "triton", "flashinfer-bench", "flashinfer-python",
                                                 "flash-linear-attention")},
        "harness": harness_settings(settings),
        # The Python-loop algorithms' counts (gdn_bench.run_estimate), when any is selected.
        "loop_harness": (loop_harness(given_harness(settings))
                         if any(settings.spec.algos_by_name[n].launches for n in settings.algos) else None),
        "reference": {"mode": settings.reference, "file": _str_or_none(_reference_file(settings))},
    }


PACK_ERROR = "PACK_ERROR"  # config.toml or the sources could not be packed: nothing was built


def _reference_file(settings: RunSettings) -> Path | None:
    """The file of reference times the run reads and writes; None when it has its entries in memory."""
    return None if settings.reference_known is not None else settings.reference_file or default_file()


def _reference_times(settings: RunSettings) -> ReferenceTimes:
    """The cached reference times the run starts from: settings.reference_known, else the file's."""
    if settings.reference_known is not None:
        return ReferenceTimes(None, dict(settings.reference_known))
    return ReferenceTimes.load(_reference_file(settings))


def _packed(algos, results: Results, workloads):
    """Pack each runnable algorithm; unavailable ones go to results.skipped, ones that cannot
    be packed (a broken config.toml, an entry point that is not there) get PACK_ERROR rows.
    Returns {name: Solution}."""
    solutions = {}
    for algo in algos:
        reason = algo.unavailable()
        if reason:
            results.skipped[algo.name] = reason
            continue
        try:
            solutions[algo.name] = algo.solution()
        except PackError as e:
            results.rows += [Row(algo.name, w.uuid, dict(w.axes), PACK_ERROR, message=str(e)) for w in workloads]
    return solutions


def run(settings: RunSettings) -> Results:
    """Run settings.algos over the selected workloads (GPU: full tiers; CPU: correctness).
    Ctrl-C once the workloads are chosen returns the rows that finished, with
    meta["partial"] saying where the run stopped; before, it raises KeyboardInterrupt."""
    cpu = not torch.cuda.is_available()
    spec = settings.spec
    algos = [spec.algos_by_name[n] for n in settings.algos]
    trace_set = load_trace_set(settings.dataset or spec.default_dataset(not cpu), spec.name)
    workloads = select_workloads([t.workload for t in trace_set.workloads[spec.name]], settings, cpu)
    results = Results(meta=_meta(settings, trace_set, cpu))
    # Read before any work, so that a broken file stops the run at once.
    times = None if cpu or settings.reference is None else _reference_times(settings)
    timer = None if times is None else reference_timer()
    if not cpu:
        print(_estimate(settings, trace_set, algos, workloads, times, timer))
    try:
        with stage("packing"):
            solutions = _packed(algos, results, workloads)
        if solutions and workloads:
            (_run_cpu if cpu else _run_gpu)(settings, trace_set, workloads, solutions, results)
            if times is not None:
                failed = {r.workload for r in results.rows if r.status == WORKLOAD_ERROR}
                with stage("definition reference"):
                    _reference_tier(settings, trace_set.definitions[spec.name], trace_set.root,
                                    [w for w in workloads if w.uuid not in failed], times, timer, results)
    except KeyboardInterrupt as e:
        where = e.stage if isinstance(e, Interrupted) else "the run"
        planned = len(workloads) * sum(a.name not in results.skipped for a in algos)
        results.meta["partial"] = (f"interrupted by Ctrl-C during {where}: {len(results.rows)} of {planned} "
                                   "(algorithm, workload) cases have a row")
    kinds = {w.uuid: spec.workload_kind(w) for w in workloads}
    for row in results.rows:
        row.kind = kinds[row.workload]
    results.rows.sort(key=Row.order)
    return results


def _estimate(settings: RunSettings, trace_set: TraceSet, algos, workloads, times: ReferenceTimes | None,
              timer) -> str:
    """The GPU run's estimate (gdn_bench.run_estimate), counting the definition reference's
    workloads with no cached time (none when `times` is None: no reference tier)."""
    harness = harness_settings(settings)
    uncached = [] if times is None else to_measure(
        settings.reference, torch.cuda.get_device_name(), timer.method(*_counts(harness)),
        trace_set.definitions[settings.spec.name], trace_set.root, workloads, times)
    return estimate_line(tiers(settings.spec, algos, workloads, harness, loop_harness(given_harness(settings)),
                               uncached))


def _counts(harness: dict) -> tuple[int, int, int]:
    return harness["warmup"], harness["iterations"], harness["trials"]


def _row(algo: str, r: CheckResult) -> Row:
    margins = {name: (m if math.isfinite(m) else None) for name, m in r.margins.items()}
    return Row(algo, r.workload, r.axes, r.status, _finite(r.max_abs_error), _finite(r.max_rel_error),
               margins=margins, message=r.message)


def _checked(settings, trace_set, workloads, solutions, device: str, desc: str, take) -> None:
    """check_solutions over the selection: take(Row) as each (algorithm, workload) finishes."""
    definition = trace_set.definitions[settings.spec.name]
    with stage(desc), tqdm(total=len(workloads) * len(solutions), desc=desc, unit="case") as bar:
        def finished(algo: str, result: CheckResult) -> None:
            take(_row(algo, result))
            bar.update()

        check_solutions(definition, solutions, workloads, trace_set.root, device, settings.seed, progress=finished)


def _run_cpu(settings, trace_set, workloads, solutions, results: Results) -> None:
    _checked(settings, trace_set, workloads, solutions, "cpu", "checking (CPU)", results.rows.append)


def _finite(x: float) -> float | None:
    return x if x == x else None  # NaN -> None (JSON has no NaN)


def _run_gpu(settings, trace_set, workloads, solutions, results: Results) -> None:
    """The tiers in turn; the rows hold what finished even when Ctrl-C stops a tier."""
    spec = settings.spec
    definition = trace_set.definitions[spec.name]
    rows: dict[tuple[str, str], Row] = {}

    def margins(checked: Row) -> None:
        row = rows[(checked.algo, checked.workload)]
        row.margins = checked.margins
        if checked.status == WORKLOAD_ERROR:  # whatever the harness made of it, the workload could not run
            row.status, row.message = checked.status, checked.message

    try:
        _harness_tier(settings, trace_set, definition, workloads, solutions, rows)
        _checked(settings, trace_set, workloads, solutions, "cuda", "margins", margins)
        _kernel_tier(spec, definition, trace_set.root, workloads, solutions, rows, settings.seed)
    finally:
        results.rows += rows.values()
    if spec.floor_shape is not None:
        groups = sorted({spec.group_of(w.axes) for w in workloads})
        with stage("memory floor"):
            for group in tqdm(groups, desc="memory floor", unit="group"):
                results.floors_us[group] = copy_floor_us(spec.floor_shape(group))


def _harness_tier(settings, trace_set, definition, workloads, solutions, rows: dict) -> None:
    """flashinfer-bench's Benchmark, one workload at a time (for progress), never dumping
    traces, in harness_passes' passes (a progress bar each, naming its algorithms): a Row per
    (algo, workload uuid) into `rows`. Its worker processes ignore Ctrl-C (this process stops
    them when it closes the Benchmark)."""
    passes = harness_passes(settings, [settings.spec.algos_by_name[a] for a in solutions])
    for names, harness in passes:
        chosen = {name: solutions[name] for name in names}
        bench_set = TraceSet(
            root=trace_set.root,
            definitions={definition.name: definition},
            solutions={definition.name: list(chosen.values())},
            workloads={definition.name: []},
        )
        config = BenchmarkConfig(
            warmup_runs=harness["warmup"], iterations=harness["iterations"], num_trials=harness["trials"],
            log_dir=str(Path(settings.out) / "logs"), definitions=[definition.name], profile_baseline=False,
        )
        with stage("flashinfer-bench's Benchmark"), workers_ignore_ctrl_c():
            _benchmark(Benchmark(bench_set, config), bench_set, definition, workloads, chosen, rows,
                       harness_label(names, harness, len(passes) > 1))


def harness_label(names: list[str], harness: dict, several: bool) -> str:
    """The Benchmark's progress bar for a pass over `names`: flashinfer-bench, the algorithms,
    and when the run has several passes, the pass's warm-up / iterations / trials."""
    counts = f" ({slashed(harness)})" if several else ""
    return f"flashinfer-bench: {', '.join(names)}{counts}"


def _benchmark(bench: Benchmark, bench_set: TraceSet, definition, workloads, solutions, rows: dict,
               label: str) -> None:
    """Each workload through `bench` (closed at the end) into `rows`, under a progress bar `label`."""
    by_solution_name = {s.name: algo for algo, s in solutions.items()}
    try:
        for w in tqdm(workloads, desc=label, unit="workload"):
            bench_set.workloads[definition.name] = [Trace(definition=definition.name, workload=w)]
            try:
                traces = bench.run_all(dump_traces=False).traces.get(definition.name, [])
            except Exception as e:  # noqa: BLE001 - this workload's rows say so; the next one goes on
                for algo in solutions:
                    rows[(algo, w.uuid)] = Row(algo, w.uuid, dict(w.axes), "RUNTIME_ERROR",
                                               message=f"flashinfer-bench failed on this workload: "
                                                       f"{type(e).__name__}: {e}")
                continue
            for t in traces:
                ev, algo = t.evaluation, by_solution_name[t.solution]
                row = Row(algo, w.uuid, dict(w.axes), ev.status.value)
                if ev.correctness:
                    row.max_abs_error = _finite(ev.correctness.max_absolute_error)
                    row.max_rel_error = _finite(ev.correctness.max_relative_error)
                if ev.performance:
                    row.harness_us = ev.performance.latency_ms * 1e3
                if ev.status.value != "PASSED":
                    row.message = ev.log[-2000:]
                rows[(algo, w.uuid)] = row
            for algo in solutions:  # a workload the runner gave up on
                rows.setdefault((algo, w.uuid), Row(algo, w.uuid, dict(w.axes), "RUNTIME_ERROR",
                                                    message="flashinfer-bench returned no evaluation"))
    finally:
        bench.close()


def _kernel_tier(spec, definition, root, workloads, solutions, rows: dict, seed: int) -> None:
    """CUPTI kernel time for every (algorithm, workload) that passed, one algorithm at a time,
    those marked `time_last` after the rest, the progress bar naming the algorithm timed; a
    Python-loop algorithm (Algo.launches), called in the margins tier already, by one profiled
    call (timing.single_call_time_us)."""
    from flashinfer_bench.compile import BuilderRegistry

    registry = BuilderRegistry.get_instance()
    order = sorted(solutions, key=lambda a: spec.algos_by_name[a].time_last)
    todo = [(a, w) for a in order for w in workloads if rows[(a, w.uuid)].status == "PASSED"]
    with stage("kernel time (CUPTI)"), tqdm(todo, desc="kernel time (CUPTI)", unit="case") as bar:
        for algo, w in bar:
            bar.set_description(kernel_label(algo), refresh=False)
            row = rows[(algo, w.uuid)]
            call = SolutionCall(definition, registry.build(definition, solutions[algo]),
                                workload_inputs(definition, w, root, "cuda", seed), "cuda")
            try:
                with torch.no_grad():
                    row.kernel_us = (kernel_time_us(call) if spec.algos_by_name[algo].launches is None
                                     else single_call_time_us(call))
            except TimingError as e:
                row.message = f"kernel timing failed: {e}"


def kernel_label(algo: str) -> str:
    """The kernel tier's progress bar while `algo` is timed."""
    return f"kernel time (CUPTI): {algo}"


def _reference_tier(settings: RunSettings, definition, root, workloads, times: ReferenceTimes, timer,
                    results: Results) -> None:
    """The time of the definition's own reference (flashinfer-bench's build_reference, as the
    contest builds it) on every workload, into results.reference: cached or measured as
    reference_times.collect says, measured by the contest evaluator's timer with the run's
    warm-up / iterations / trials by `timer` (evaluator_timing.reference_timer: the evaluator's,
    or where it cannot run, the kit's own and why); which one, into
    results.meta["reference"]["timer"]."""
    from flashinfer_bench.compile import BuilderRegistry

    reference = BuilderRegistry.get_instance().build_reference(definition)
    counts = _counts(harness_settings(settings))
    timing = {"method": timer.method(*counts), "timer": timer.describe(*counts), "evaluators": timer.is_evaluators,
              "versions": timer.versions}
    results.meta["reference"]["timer"] = timing

    def measure(w) -> tuple[float, int]:
        call = SolutionCall(definition, reference, workload_inputs(definition, w, root, "cuda", settings.seed), "cuda")
        return timer.time_us(call, *counts)

    results.reference.update(collect(settings.reference, torch.cuda.get_device_name(), definition, root, workloads,
                                     times, measure, timing))

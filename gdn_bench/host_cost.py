"""Prefill's host cost: the CPU time of one eager call, what a serving engine that runs prefill
without CUDA graphs pays when the GPU work is short (scripts/bench_serving.py's host-cost
section; docs/serving.md, "Costs").

A call's host time is perf_counter around it, with no synchronization inside (each call starts
after one, outside the timed span, so that no queue of earlier work stalls it): the least of
ROUNDS medians of CALLS calls after WARMUP, the rounds taken in turn over every call timed
(time_rounds: one median read up to twice another on the shared GPU hosts, in bursts:
docs/serving.md). Timed on a GPU (bench_host_cost), for solution/triton/prefill.py's kernel()
and pooled_prefill(), FlashInfer's chunk_gated_delta_rule (gates computed in torch) and FLA
0.6's chunked rule, as baselines/prefill/fi_baseline and fla_chunk call them; beside each, its
GPU work: one CUDA-graph replay (gdn_bench.timing.graph_replay_us). A baseline that is not
installed, or fails to run, is reported with the reason instead. Ours is timed twice: with its
default argument checks (Python's, confirmed after the first call by torch's tensor guards:
solution/triton/tensor_guards.py) and with the compiled ones a serving engine opts into
(solution/triton/host_checks.py: "kernel_cc", "pooled_cc"), where they build here.

The CPU proxy (proxy_rows) times ours on CPU tensors with the launches stubbed
(gdn_bench.launch_stubs: the direct launch path up to the compiled launcher's call, which is a
no-op), planned as for an sm_90 GPU: every check, the plan, the scratch allocation, argument
ordering and lowering. It leaves out the compiled launcher's own cost (a few µs per launch on a
GPU: argument parsing, cuLaunchKernel), and allocates from the CPU's allocator, set to keep
freed memory as CUDA's caching allocator does (keep_freed_memory), not from CUDA's. The
machine's CPU is not the GPU host's: compare proxy numbers with each other only.
"""

import ctypes
import importlib
import importlib.metadata
import statistics
import time

import torch

from gdn_bench.algos import load_module, load_solution_file
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.definitions.prefill.mix import model_like_inputs
from gdn_bench.launch_stubs import stubbed_launches
from gdn_bench.paths import project_root
from gdn_bench.serving_bench import call_name, format_rows, notes
from gdn_bench.shapes import HEAD_SIZE, NUM_V_HEADS

CALLS = 50
TARGETS_US = {"token walk": 15, "chunked path": 40}  # issue 36's targets for ours, per call
WARMUP = 5
BASELINES = {"fi": "fi_baseline", "fla": "fla_chunk"}  # name -> folder under baselines/prefill
MMAP_THRESHOLD, TRIM_THRESHOLD = -3, -1  # glibc's mallopt parameters M_MMAP_THRESHOLD, M_TRIM_THRESHOLD
PROXY_CAPABILITY = (9, 0)  # the GPU the CPU proxy plans for (sm_90's launch tables)
ROUNDS = 8  # a time: the least of this many medians (the other work of a shared machine is noise)
OURS = ("kernel", "pooled", "kernel_cc", "pooled_cc")  # ours, then ours with the compiled checks
COLUMNS = (("call", "call", ""), ("kernel µs", "kernel_host_us", ".1f"), ("pooled µs", "pooled_host_us", ".1f"),
           ("kernel cc", "kernel_cc_host_us", ".1f"), ("pooled cc", "pooled_cc_host_us", ".1f"),
           ("FI µs", "fi_host_us", ".1f"), ("FLA µs", "fla_host_us", ".1f"), ("graph µs", "kernel_graph_us", ".1f"),
           ("FI graph", "fi_graph_us", ".1f"), ("FLA graph", "fla_graph_us", ".1f"))


def host_us(fn, before=None, calls: int = CALLS, warmup: int = WARMUP) -> float:
    """Median host time of fn() in µs (perf_counter around the call), over `calls` calls after
    `warmup`; before() runs untimed ahead of each."""
    times = []
    for index in range(warmup + calls):
        if before is not None:
            before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times[warmup:]) * 1e6


def call_inputs(lengths, device: str, seed: int = 0) -> dict:
    """One prefill call's inputs (model-like, with states) and outputs, by argument name, plus a
    pool of 2N + 8 slots and N distinct slots (int32) for pooled_prefill."""
    num_seqs = len(lengths)
    gen = torch.Generator(device=device).manual_seed(seed)
    x = model_like_inputs(list(lengths), gen, device)
    pool = torch.randn(2 * num_seqs + 8, NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE, generator=gen, device=device)
    slots = torch.randperm(pool.shape[0], generator=gen, device=device)[:num_seqs].to(torch.int32)
    return dict(x, pool=pool, slots=slots, output=torch.empty_like(x["v"]), new_state=torch.empty_like(x["state"]))


def our_calls(pre, x: dict) -> dict:
    """{"kernel": the contest's call, "pooled": pooled_prefill in place} on inputs `x`
    (call_inputs), as functions of no arguments."""
    args = [x[n] for n in ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens")]
    q, k, v, _, A_log, a, dt_bias, b, cu_seqlens = args
    return {"kernel": lambda: pre.kernel(*args, x["scale"], x["output"], x["new_state"]),
            "pooled": lambda: pre.pooled_prefill(q, k, v, x["pool"], x["slots"], A_log, a, dt_bias, b, cu_seqlens,
                                                 x["scale"], x["output"])}


def baseline_runs() -> dict:
    """{name: the baseline's run(), or the reason it cannot be imported} for BASELINES."""
    runs = {}
    for name, folder in BASELINES.items():
        try:
            runs[name] = load_module(project_root() / "baselines" / "prefill" / folder / "main.py",
                                     f"host_cost_{folder}").run
        except Exception as e:  # noqa: BLE001 - not installed, or installed without its libraries
            runs[name] = f"absent ({type(e).__name__}: {e})".splitlines()[0]
    return runs


def gpu_calls(pre, runs: dict, lengths, checks) -> tuple[dict, list]:
    """One call on the GPU: (its row, with the launches ours makes; [(name, fn, checks)]: what
    to time, ours (kernel, pooled: variants, with `checks`) and each baseline's run, or the
    reason it cannot run as fn, with None)."""
    x = call_inputs(lengths, "cuda", seed=sum(lengths))
    ours = our_calls(pre, x)
    args = [x[n] for n in ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens")]
    baselines = [(name, run if isinstance(run, str) else (lambda run=run: run(*args, x["scale"])), None)
                 for name, run in runs.items()]
    row = {"call": call_name(lengths), "kernel_launches": launch_count(pre, ours["kernel"])}
    return row, [*variants(ours, checks), *baselines]


def variants(ours: dict, checks) -> list:
    """[(name, fn, checks in use)] for `ours` (our_calls'): each with the default checks (None),
    then each as "<name>_cc" with the compiled ones where `checks` (compiled_checks') is not
    None."""
    timed = [(name, fn, None) for name, fn in ours.items()]
    return timed + ([(f"{name}_cc", fn, checks) for name, fn in ours.items()] if checks is not None else [])


def compiled_checks(pre, note: dict):
    """The host_checks module of `pre`'s package, its compiled checks built (host_checks.enable())
    and disabled again; None where they cannot be built or the package has none (a copy from
    before them: host_ab), the reason in note["cc_note"]."""
    try:
        checks = importlib.import_module(f"{pre.Launcher.__module__.rpartition('.')[0]}.host_checks")
    except ModuleNotFoundError as error:
        note["cc_note"] = str(error)
        return None
    try:
        checks.enable()
    except RuntimeError as error:
        note["cc_note"] = str(error).splitlines()[0]
        return None
    checks.disable()
    return checks


def time_rounds(entries: list, rounds: int, calls: int = CALLS, before=None) -> None:
    """Host µs of every (row, name, fn, checks) of `entries` into row["<name>_host_us"]: the
    least of `rounds` medians of `calls` calls (host_us), the rounds taken in turn over all the
    entries, so that each entry's medians are spread over the whole run and a burst of the
    host's other work does not fall on all of them (the least rejects it). The compiled checks
    are in use while an entry whose `checks` is a host_checks module (not None) is timed. A
    call that fails is reported in row["<name>_note"] and timed no more; an fn that is a
    string is that note."""
    medians = {}
    for _ in range(rounds):
        for row, name, fn, checks in entries:
            if isinstance(fn, str) or f"{name}_note" in row:
                row.setdefault(f"{name}_note", fn)
                continue
            if checks is not None:
                checks.enable()
            try:
                medians.setdefault((id(row), name), (row, []))[1].append(host_us(fn, before=before, calls=calls))
            except Exception as e:  # noqa: BLE001 - a call that fails is reported
                row[f"{name}_note"] = _reason(e)
            finally:
                if checks is not None:
                    checks.disable()
    for (_, name), (row, times) in medians.items():
        if f"{name}_note" not in row:
            row[f"{name}_host_us"] = min(times)


def _reason(error: Exception) -> str:
    """What a row's note says of a call that failed: the error's type and its first line."""
    return f"{type(error).__name__}: {error}".splitlines()[0]


def launch_count(pre, call) -> int:
    """How many launches `call` (of prefill module `pre`) makes, recorded (nothing launches)."""
    with importlib.import_module(pre.Launcher.__module__).recording_launches() as recorded:
        call()
    return len(recorded)


def bench_host_cost(calls) -> dict:
    """{"rows": one per call (its sequence lengths): host µs of ours (kernel, pooled; with the
    compiled checks too: gpu_calls) and of each baseline, timed in interleaved rounds
    (time_rounds), then the GPU work of ours (kernel) and of each baseline (graph replay µs);
    "calls", "warmup" and "rounds": the medians' sizes and how many each time is the least of,
    "versions": the baselines' packages'} for the project's prefill.py. Every host time is taken
    before the first graph is profiled."""
    from gdn_bench.timing import graph_replay_us

    pre = load_solution_file(PREFILL.submission_entry(), "gdn_prefill_host_cost")
    runs = baseline_runs()
    versions = {name: _version(name) for name in ("flashinfer-python", "fla-core", "triton", "torch")}
    note = {}
    checks = compiled_checks(pre, note)
    rows, entries = [], []
    for lengths in calls:
        row, timed = gpu_calls(pre, runs, lengths, checks)
        rows.append(dict(row, **note))
        entries += [(rows[-1], *entry) for entry in timed]
    time_rounds(entries, ROUNDS, before=torch.cuda.synchronize)
    for row, name, fn, _ in entries:
        if name in ("kernel", *runs) and f"{name}_note" not in row:
            try:
                row[f"{name}_graph_us"] = graph_replay_us(fn)
            except Exception as e:  # noqa: BLE001 - a call that cannot be captured is reported
                row[f"{name}_note"] = _reason(e)
    return {"rows": rows, "calls": CALLS, "warmup": WARMUP, "rounds": ROUNDS, "versions": versions}


def _version(package: str) -> str | None:
    """The installed version of `package`, or None."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def host_cost_report(result: dict, gpu: str) -> str:
    """bench_host_cost's result as text: what was measured, the table, the notes (baselines
    absent or not captured) and the targets (TARGETS_US), met or not."""
    rows = result["rows"]
    lines = [f"prefill host cost on {gpu}: µs of host time per eager call (perf_counter, no synchronization "
             f"inside, the least of {result['rounds']} medians of {result['calls']} after {result['warmup']}); cc: ours "
             f"with the compiled argument checks (host_checks.enable()); graph: one CUDA-graph replay (the GPU "
             f"work); versions {result['versions']}", format_rows(rows, COLUMNS),
             *notes(rows)]
    for path, target in TARGETS_US.items():
        over = [f"{row['call']} {name} {row[f'{name}_host_us']:.1f}" for row in rows
                for name in OURS if _path(row) == path and f"{name}_host_us" in row
                and row[f"{name}_host_us"] > target]
        lines.append(f"{path} at most {target} µs per call: {'met' if not over else 'missed: ' + ', '.join(over)}")
    return "\n".join(lines)


def _path(row: dict) -> str:
    """The path a row's call takes (token walk or chunked), from its launches."""
    return "token walk" if row.get("kernel_launches") == 1 else "chunked path"


def keep_freed_memory() -> bool:
    """Make the C library's allocator keep freed memory for the next allocation, large ones
    included (glibc's mallopt: no mmap, no trim), as CUDA's caching allocator does, so that the
    proxy's scratch allocation costs what a cached one does rather than a system call; whether
    it could (glibc only). For this process, for good."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(MMAP_THRESHOLD, 1 << 30) and libc.mallopt(TRIM_THRESHOLD, (1 << 31) - 1))
    except (OSError, AttributeError):
        return False


def proxy_rows(pre, calls, calls_per_round: int = CALLS, rounds: int = ROUNDS) -> list[dict]:
    """The CPU proxy (module docstring): host µs of ours (kernel, pooled; each with the compiled
    checks too, where they build: variants) per call (the least of `rounds` medians of
    `calls_per_round` calls, interleaved: time_rounds), with the launches each makes."""
    keep_freed_memory()
    shared = importlib.import_module(pre.Launcher.__module__)
    note = {}
    checks = compiled_checks(pre, note)
    rows = []
    for lengths in calls:
        row = {"call": call_name(lengths), **note}
        entries = [(row, *entry) for entry in variants(our_calls(pre, call_inputs(lengths, "cpu", seed=sum(lengths))),
                                                       checks)]
        with shared.planning_for(PROXY_CAPABILITY), stubbed_launches(pre.Launcher) as launches:
            for _, name, fn, _ in entries:
                launches.clear()
                fn()
                row[f"{name}_launches"] = len(launches)
            time_rounds(entries, rounds, calls=calls_per_round)
        rows.append(row)
    return rows

"""Prefill's host cost: the CPU time of one eager call, what a serving engine that runs prefill
without CUDA graphs pays when the GPU work is short (scripts/bench_serving.py's host-cost
section; docs/serving.md, "Costs").

A call's host time is perf_counter around it, with no synchronization inside (each call starts
after one, outside the timed span, so that no queue of earlier work stalls it): the least of
ROUNDS medians of CALLS calls after WARMUP (one median read up to twice another on the shared
GPU hosts: docs/serving.md). Timed on a GPU (gpu_rows), for solution/triton/prefill.py's kernel()
and pooled_prefill(), FlashInfer's chunk_gated_delta_rule (gates computed in torch) and FLA
0.6's chunked rule, as baselines/prefill/fi_baseline and fla_chunk call them; beside each, its
GPU work: one CUDA-graph replay (gdn_bench.timing.graph_replay_us). A baseline that is not
installed, or fails to run, is reported with the reason instead.

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
ROUNDS = 5  # a time: the least of this many medians (the other work of a shared machine is noise)
COLUMNS = (("call", "call", ""), ("kernel µs", "kernel_host_us", ".1f"), ("pooled µs", "pooled_host_us", ".1f"),
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


def gpu_row(pre, runs: dict, lengths) -> dict:
    """One call on the GPU: host µs of ours (kernel, pooled) and of each baseline, and the GPU
    work of ours (kernel) and of each baseline (graph replay µs); `<name>_note` where one could
    not run or be captured."""
    from gdn_bench.timing import graph_replay_us

    x = call_inputs(lengths, "cuda", seed=sum(lengths))
    calls = our_calls(pre, x)
    args = [x[n] for n in ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens")]
    for name, run in runs.items():
        calls[name] = run if isinstance(run, str) else (lambda run=run: run(*args, x["scale"]))
    row = {"call": call_name(lengths), "kernel_launches": launch_count(pre, calls["kernel"])}
    for name, fn in calls.items():
        if isinstance(fn, str):
            row[f"{name}_note"] = fn
            continue
        try:
            row[f"{name}_host_us"] = min(host_us(fn, before=torch.cuda.synchronize) for _ in range(ROUNDS))
            if name != "pooled":
                row[f"{name}_graph_us"] = graph_replay_us(fn)
        except Exception as e:  # noqa: BLE001 - a call that fails or cannot be captured is reported
            row[f"{name}_note"] = f"{type(e).__name__}: {e}".splitlines()[0]
    return row


def launch_count(pre, call) -> int:
    """How many launches `call` (of prefill module `pre`) makes, recorded (nothing launches)."""
    with importlib.import_module(pre.Launcher.__module__).recording_launches() as recorded:
        call()
    return len(recorded)


def bench_host_cost(calls) -> dict:
    """{"rows": gpu_row per call (its sequence lengths), "calls", "warmup" and "rounds": the
    medians' sizes and how many each time is the least of, "versions": the baselines'
    packages'} for the project's prefill.py."""
    pre = load_solution_file(PREFILL.submission_entry(), "gdn_prefill_host_cost")
    runs = baseline_runs()
    versions = {name: _version(name) for name in ("flashinfer-python", "fla-core", "triton", "torch")}
    return {"rows": [gpu_row(pre, runs, lengths) for lengths in calls], "calls": CALLS, "warmup": WARMUP,
            "rounds": ROUNDS, "versions": versions}


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
             f"inside, the least of {result['rounds']} medians of {result['calls']} after {result['warmup']}); graph: "
             f"one CUDA-graph replay (the GPU work); versions {result['versions']}", format_rows(rows, COLUMNS),
             *notes(rows)]
    for path, target in TARGETS_US.items():
        over = [f"{row['call']} {name} {row[f'{name}_host_us']:.1f}" for row in rows
                for name in ("kernel", "pooled") if _path(row) == path and f"{name}_host_us" in row
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
    """The CPU proxy (module docstring): host µs of ours (kernel, pooled) per call (the least of
    `rounds` medians of `calls_per_round` calls), with the launches each makes."""
    keep_freed_memory()
    shared = importlib.import_module(pre.Launcher.__module__)
    rows = []
    for lengths in calls:
        calls_of = our_calls(pre, call_inputs(lengths, "cpu", seed=sum(lengths)))
        row = {"call": call_name(lengths)}
        with shared.planning_for(PROXY_CAPABILITY), stubbed_launches(pre.Launcher) as launches:
            for name, fn in calls_of.items():
                launches.clear()
                fn()
                row[f"{name}_launches"] = len(launches)
                row[f"{name}_host_us"] = min(host_us(fn, calls=calls_per_round) for _ in range(rounds))
        rows.append(row)
    return rows


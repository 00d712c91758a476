"""A sketch, not the kit's code: the token walk's kernel() (1 x 6) against a minimal walk with one
cached route per shape (sizes, guard, pointers, scale, the settings' check, one launch by the
kept layout), both on the CPU proxy (launches stubbed), µs per call, the least of 9 medians of 3000,
three times. docs/perf.md item 36 reads it: what is left in the walk's Python.

    python docs/data/serving/cpu/walk_floor_sketch.py 6
"""
import time, statistics, importlib, sys, math, functools, operator
import torch
from gdn_bench.algos import load_solution_file
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.host_cost import call_inputs, our_calls, keep_freed_memory, PROXY_CAPABILITY
from gdn_bench.launch_stubs import stubbed_launches
from gdn_bench.paths import use_project; use_project("/work/main")
keep_freed_memory()
pre = load_solution_file(PREFILL.submission_entry(), "pp")
shared = importlib.import_module(pre.Launcher.__module__)
guard = importlib.import_module(pre.rung.__module__)
lengths = [int(v) for v in sys.argv[1].split(",")] if len(sys.argv) > 1 else [6]
x = call_inputs(lengths, "cpu", seed=1)
fns = our_calls(pre, x)
def t(fn, n=3000):
    best = 1e9
    for r in range(9):
        ts = []
        for i in range(n):
            s = time.perf_counter(); fn(); ts.append(time.perf_counter() - s)
        best = min(best, statistics.median(ts))
    return best * 1e6
names = pre._ARG_NAMES
G = shared._PLAIN_GUARDS
READY = {}
dp = torch.Tensor.data_ptr
def ideal(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, output, new_state):
    tensors = (q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, output, new_state)
    total = q.shape[0]; n = cu_seqlens.shape[0] - 1; device = q.device
    expected = shared.expected_specs(names, (total,), n)
    if G.confirmed(expected, tensors) is None: raise RuntimeError
    pointers = list(map(dp, tensors))
    scale = shared.scale_value(scale)
    arch = shared.arch_key(device)
    ready = READY.get((total, n, device.index, state is None))
    settings = pre._settings(arch)
    if ready[0] != settings: raise RuntimeError
    call, stream_of, layouts = ready[1], ready[2], ready[3]
    scale_address = dp(A_log)
    if functools.reduce(operator.or_, pointers, scale_address) & 15 or shared.hooks_installed(): raise RuntimeError
    values = (*pointers, None, None, scale_address, None, scale, *call.constants)
    stream = stream_of(device.index)
    for step, (run, layout) in zip(call.steps, layouts):
        run(*layout(stream, step.take(values)))
with shared.planning_for(PROXY_CAPABILITY), stubbed_launches(pre.Launcher) as launches:
    fns["kernel"](); fns["kernel"]()
    total, N, device = pre._sizes(x["q"], x["cu_seqlens"])
    call = pre._call_plan(total, N, "sm90", True, False, False, True)
    so, lay = shared.direct_layouts(call.launches, device.index, (None, torch.float32))
    READY[(total, N, device.index, False)] = (pre._settings("sm90"), call, so, lay)
    args = (x["q"], x["k"], x["v"], x["state"], x["A_log"], x["a"], x["dt_bias"], x["b"], x["cu_seqlens"], x["scale"], x["output"], x["new_state"])
    n0 = len(launches); ideal(*args); assert len(launches) == n0 + 1, (launches)
    for i in range(3):
        print("kernel", round(t(fns["kernel"]), 2), "ideal", round(t(lambda: ideal(*args)), 2))

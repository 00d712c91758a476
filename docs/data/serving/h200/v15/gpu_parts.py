"""Where 1x8192's host time goes on a GPU host (compiled checks on)."""
import importlib, sys, time, statistics, operator, functools
import torch
sys.path.insert(0, ".")
from gdn_bench.algos import load_solution_file
from gdn_bench.host_cost import call_inputs, our_calls, host_us
from gdn_bench.paths import use_project
use_project(".")
pre = load_solution_file("solution/triton/prefill.py", "gdn_prefill_parts")
shared = importlib.import_module(pre.Launcher.__module__)
hc = importlib.import_module(pre.Launcher.__module__.rpartition(".")[0] + ".host_checks")
hc.enable()
def t(fn, n=200, before=None):
    return min(host_us(fn, before=before, calls=n) for _ in range(5))
sync = torch.cuda.synchronize
for lengths in [(8192,), (300,)]:
    x = call_inputs(lengths, "cuda", seed=1)
    kern = our_calls(pre, x)["kernel"]; kern(); kern(); sync()
    print(lengths, "kernel()", round(t(kern, before=sync), 2))
    T, N = sum(lengths), len(lengths)
    dev = x["q"].device
    arch = pre.rung(pre.arch_key(dev), dev.index)
    call = pre._call_plan(T, N, arch, True, False, False, True)
    nbytes = call.scratch_bytes
    print(" torch.empty scratch", round(t(lambda: torch.empty(nbytes, dtype=torch.uint8, device=dev), before=sync), 2))
    raw_alloc, raw_delete = torch._C._cuda_cudaCachingAllocator_raw_alloc, torch._C._cuda_cudaCachingAllocator_raw_delete
    stream_of = torch._C._cuda_getCurrentRawStream
    def raw():
        p = raw_alloc(nbytes, stream_of(0)); raw_delete(p)
    print(" raw alloc+delete", round(t(raw, before=sync), 2))
    print(" stream_of", round(t(lambda: stream_of(0)), 3))
    # the direct launches of this call, as _launch_call makes them
    names = pre._ARG_NAMES
    args = (x["q"], x["k"], x["v"], x["state"], x["A_log"], x["a"], x["dt_bias"], x["b"], x["cu_seqlens"], x["output"], x["new_state"])
    ptrs = shared.checked_pointers(names, args, shared.expected_specs(names, (T,), N), dev) + [None, None]
    buf = torch.empty(nbytes, dtype=torch.uint8, device=dev); base = buf.data_ptr()
    values = (*ptrs, x["A_log"].data_ptr(), None, x["scale"], *call.constants, *[base + s.offset for s in call.slots], *pre._descriptors(call, base, x["v"]))
    spec = (None, torch.float32)
    direct = [s.launcher.direct(s.grid, s.take(values), s.config, dev.index, spec) for s in call.steps]
    print(" python of direct() x", len(direct), round(t(lambda: [s.launcher.direct(s.grid, s.take(values), s.config, dev.index, spec) for s in call.steps], before=sync), 2))
    for s, (run, a) in zip(call.steps, direct):
        print("  launch", s.launcher.fn.__name__, len(a), "args", round(t(lambda: run(*a), before=sync), 2))
    print(" all launches", round(t(lambda: [run(*a) for run, a in direct], before=sync), 2))
    print(" launch_call", round(t(lambda: pre._launch_call(call, args, ptrs, (None, None, None, x["scale"]), None, dev), before=sync), 2))

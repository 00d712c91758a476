"""A/B of host cost in the CPU proxy: old (/tmp/old) vs new (working tree), alternated."""
import sys, time, statistics, importlib
import torch
from gdn_bench.paths import use_project; use_project("/work/main")
from gdn_bench.algos import load_solution_file
from gdn_bench.host_cost import call_inputs, our_calls, keep_freed_memory, PROXY_CAPABILITY
from gdn_bench.launch_stubs import stubbed_launches
keep_freed_memory()
mods = {"old": load_solution_file("/tmp/old/solution/triton/prefill.py", "old_pre"),
        "new": load_solution_file("/work/main/solution/triton/prefill.py", "new_pre")}
decs = {"old": load_solution_file("/tmp/old/solution/triton/kernel.py", "old_pre_k"),
        "new": load_solution_file("/work/main/solution/triton/kernel.py", "new_pre_k")}
calls = [[6], [300], [8192], [512]*16]
bf = torch.bfloat16
B = 1
dq = dict(q=torch.randn(B,1,4,128).to(bf), k=torch.randn(B,1,4,128).to(bf), v=torch.randn(B,1,8,128).to(bf),
          st=torch.randn(B,8,128,128), A=torch.randn(8), a=torch.randn(B,1,8).to(bf), b=torch.randn(B,1,8).to(bf), dt=torch.randn(8))
pool = torch.randn(2*B+8, 8, 128, 128); slots = torch.randperm(pool.shape[0])[:B].to(torch.int32)
out = torch.empty_like(dq["v"]); ns = torch.empty_like(dq["st"])
entries = []
for lengths in calls:
    x = call_inputs(lengths, "cpu", seed=1)
    for tag, m in mods.items():
        for name, fn in our_calls(m, x).items():
            entries.append((f"{lengths[0]}x{len(lengths)} {name}", tag, fn, m))
for tag, m in decs.items():
    entries.append(("decode B=1", tag, lambda m=m: m.kernel(dq["q"], dq["k"], dq["v"], dq["st"], dq["A"], dq["a"], dq["dt"], dq["b"], 0.088, out, ns), m))
    entries.append(("pooled_decode B=1", tag, lambda m=m: m.pooled_decode(dq["q"], dq["k"], dq["v"], pool, slots, dq["A"], dq["a"], dq["dt"], dq["b"], 0.088, out), m))
import contextlib
best = {}
with contextlib.ExitStack() as stack:
    for m in [*mods.values(), *decs.values()]:
        sh = importlib.import_module(m.Launcher.__module__)
        stack.enter_context(sh.planning_for(PROXY_CAPABILITY))
        stack.enter_context(stubbed_launches(m.Launcher))
    for name, tag, fn, m in entries:
        fn(); fn()
    for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 8):
        for name, tag, fn, m in entries:
            ts = []
            for i in range(300):
                s = time.perf_counter(); fn(); ts.append(time.perf_counter() - s)
            med = statistics.median(ts) * 1e6
            best[(name, tag)] = min(best.get((name, tag), 1e9), med)
names = list(dict.fromkeys(n for n, *_ in entries))
for n in names:
    o, w = best[(n, "old")], best[(n, "new")]
    print(f"{n:22s} old {o:6.1f}  new {w:6.1f}  diff {w-o:+5.1f}")

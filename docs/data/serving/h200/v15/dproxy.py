"""Decode's host path on CPU, launches stubbed: kernel() and pooled_decode(), Python / compiled checks,
the code of 52a8f85 (its solution/triton under .scratch/old15/, from git archive) against the working
tree (new). Run from the checkout's root: python docs/data/serving/h200/v15/dproxy.py"""
import importlib, sys, timeit, torch
sys.path.insert(0, ".")
from gdn_bench.algos import load_solution_file
from gdn_bench.paths import use_project
from gdn_bench.launch_stubs import stubbed_launches
from gdn_bench.host_cost import keep_freed_memory, PROXY_CAPABILITY
use_project("."); keep_freed_memory()
def calls(dec, B):
    bf = torch.bfloat16
    q = torch.randn(B, 1, 4, 128).to(bf); k = torch.randn_like(q); v = torch.randn(B, 1, 8, 128).to(bf)
    st = torch.randn(B, 8, 128, 128); A = torch.randn(8); a = torch.randn(B, 1, 8).to(bf)
    dt = torch.randn(8); b = torch.randn_like(a); out = torch.empty_like(v); ns = torch.empty_like(st)
    pool = torch.randn(B + 4, 8, 128, 128); idx = torch.randperm(B + 4)[:B].to(torch.int32)
    return {"kernel": lambda: dec.kernel(q, k, v, st, A, a, dt, b, 0.088, out, ns),
            "pooled": lambda: dec.pooled_decode(q, k, v, pool, idx, A, a, dt, b, 0.088, out)}
mods = {}
for tag, path in (("old", ".scratch/old15/solution/triton/kernel.py"), ("new", "solution/triton/kernel.py")):
    dec = load_solution_file(path, f"gdn_{tag}_dec")
    mods[tag] = (dec, importlib.import_module(f"gdn_{tag}_dec.host_checks"), importlib.import_module(f"gdn_{tag}_dec.shared"))
t = lambda f: min(timeit.repeat(f, number=3000, repeat=7)) / 3000 * 1e6
for B in (1, 64):
    for tag, (dec, hc, shared) in mods.items():
        fns = calls(dec, B)
        with shared.planning_for(PROXY_CAPABILITY), stubbed_launches(dec.Launcher):
            for f in fns.values(): f()
            row = []
            for on in (False, True):
                hc.enable() if on else hc.disable()
                row += [f"{n}{' cc' if on else ''} {t(f):5.1f}" for n, f in fns.items()]
            hc.disable()
        print(f"B={B:3} {tag}: " + "  ".join(row))

"""GPU host A/B in one process, alternated: old code (ee08539, Python checks), new code with the
Python checks, new code with the compiled checks. kernel()/pooled_prefill() per prefill call, and
decode kernel() at B = 1 and 64; µs per call: least of REPS medians of 50 (median of medians)."""
import importlib, json, os, statistics, sys, time
import torch
sys.path.insert(0, ".")
from gdn_bench.algos import load_solution_file
from gdn_bench.host_cost import call_inputs, our_calls, host_us
from gdn_bench.paths import use_project
use_project(".")
new = load_solution_file("solution/triton/prefill.py", "gdn_new")
new_dec = importlib.import_module("gdn_new.kernel")
hc = importlib.import_module("gdn_new.host_checks")
old = load_solution_file(".scratch/old/solution/triton/prefill.py", "gdn_old")
old_dec = importlib.import_module("gdn_old.kernel")
t0 = time.time(); hc.enable(); print(f"host_checks.enable() (build or load) {time.time() - t0:.1f} s", flush=True); hc.disable()

def decode_call(dec, B):
    bf = torch.bfloat16; d = "cuda"; g = torch.Generator(device=d).manual_seed(B)
    q = torch.randn(B, 1, 4, 128, device=d, generator=g).to(bf); k = torch.randn_like(q); v = torch.randn(B, 1, 8, 128, device=d).to(bf)
    st = torch.randn(B, 8, 128, 128, device=d); A = torch.randn(8, device=d); a = torch.randn(B, 1, 8, device=d).to(bf)
    dt = torch.randn(8, device=d); b = torch.randn_like(a); out = torch.empty_like(v); ns = torch.empty_like(st)
    return lambda: dec.kernel(q, k, v, st, A, a, dt, b, 0.088, out, ns)

variants = {"old": None, "new": False, "new cc": True}
calls = {}
for lengths in [(6,), (300,), (1024,), (8192,), (512,) * 16]:
    x = call_inputs(lengths, "cuda", seed=sum(lengths))
    for mod, label in ((old, "old"), (new, "new")):
        for name, fn in our_calls(mod, x).items():
            calls.setdefault(f"{len(lengths)} x {lengths[0]} {name}", {})[label] = fn
for B in (1, 64):
    calls[f"decode B={B}"] = {"old": decode_call(old_dec, B), "new": decode_call(new_dec, B)}
results = {name: {v: [] for v in variants} for name in calls}
for fns in calls.values():
    for fn in fns.values():
        fn(); fn()
torch.cuda.synchronize()
for rep in range(int(os.environ.get("REPS", 8))):
    for name, fns in calls.items():
        for label, compiled in variants.items():
            hc.enable() if compiled else hc.disable()
            fn = fns["old" if compiled is None else "new"]
            results[name][label].append(host_us(fn, before=torch.cuda.synchronize, calls=50))
    hc.disable()
gpu = torch.cuda.get_device_name()
lines = [f"{gpu}: host µs per call, least of {len(results[name]['old'])} medians of 50 (median of medians in brackets), alternated in one process",
         f"{'call':20} {'old (ee08539)':>20} {'new, Python checks':>20} {'new, compiled checks':>22}"]
for name, r in results.items():
    lines.append(f"{name:20} " + " ".join(f"{min(r[v]):12.1f} ({statistics.median(r[v]):5.1f})" for v in variants))
print("\n".join(lines))
out = os.environ.get("OUT")
if out:
    tag = os.environ.get("TAG", "gpu")
    open(f"{out}/host_ab_{tag}.txt", "w").write("\n".join(lines) + "\n")
    json.dump({"gpu": gpu, "results": results}, open(f"{out}/host_ab_{tag}.json", "w"), indent=1)

"""GPU host A/B in one process, alternated: old code (be03643) and new code (tensor guards), each
with the Python checks and with the compiled ones. kernel()/pooled_prefill() per prefill call,
decode kernel() and pooled_decode() at B = 1 and 64; µs per call: least of REPS medians of 50
(median of medians in brackets)."""
import importlib, json, os, statistics, sys, time
import torch
sys.path.insert(0, ".")
from gdn_bench.algos import load_solution_file
from gdn_bench.host_cost import call_inputs, our_calls, host_us
from gdn_bench.paths import use_project
use_project(".")
mods = {"old": load_solution_file(".scratch/old/solution/triton/prefill.py", "gdn_old"),
        "new": load_solution_file("solution/triton/prefill.py", "gdn_new")}
decs = {tag: importlib.import_module(f"gdn_{tag}.kernel") for tag in mods}
hcs = {tag: importlib.import_module(f"gdn_{tag}.host_checks") for tag in mods}
t0 = time.time()
for hc in hcs.values():
    hc.enable(); hc.disable()
print(f"host_checks.enable() (build or load) {time.time() - t0:.1f} s", flush=True)

def decode_calls(dec, B):
    bf = torch.bfloat16; d = "cuda"; g = torch.Generator(device=d).manual_seed(B)
    q = torch.randn(B, 1, 4, 128, device=d, generator=g).to(bf); k = torch.randn_like(q); v = torch.randn(B, 1, 8, 128, device=d).to(bf)
    st = torch.randn(B, 8, 128, 128, device=d); A = torch.randn(8, device=d); a = torch.randn(B, 1, 8, device=d).to(bf)
    dt = torch.randn(8, device=d); b = torch.randn_like(a); out = torch.empty_like(v); ns = torch.empty_like(st)
    pool = torch.randn(2 * B + 8, 8, 128, 128, device=d); slots = torch.randperm(2 * B + 8, device=d)[:B].to(torch.int32)
    return {"decode": lambda: dec.kernel(q, k, v, st, A, a, dt, b, 0.088, out, ns),
            "pooled_decode": lambda: dec.pooled_decode(q, k, v, pool, slots, A, a, dt, b, 0.088, out)}

variants = [("old", False), ("old", True), ("new", False), ("new", True)]
calls = {}
for lengths in [(6,), (300,), (1024,), (8192,), (512,) * 16]:
    x = call_inputs(lengths, "cuda", seed=sum(lengths))
    for tag, mod in mods.items():
        for name, fn in our_calls(mod, x).items():
            calls.setdefault(f"{len(lengths)} x {lengths[0]} {name}", {})[tag] = fn
for B in (1, 64):
    for tag, dec in decs.items():
        for name, fn in decode_calls(dec, B).items():
            calls.setdefault(f"{name} B={B}", {})[tag] = fn
results = {name: {f"{t} {'cc' if c else 'py'}": [] for t, c in variants} for name in calls}
for fns in calls.values():
    for fn in fns.values():
        fn(); fn()
torch.cuda.synchronize()
for rep in range(int(os.environ.get("REPS", 8))):
    for name, fns in calls.items():
        for tag, compiled in variants:
            hcs[tag].enable() if compiled else hcs[tag].disable()
            results[name][f"{tag} {'cc' if compiled else 'py'}"].append(host_us(fns[tag], before=torch.cuda.synchronize, calls=50))
            hcs[tag].disable()


def table(results, labels, gpu):
    """The report's lines: what was timed, the columns, then each call's least (median) per column."""
    title = (f"{gpu}: host µs per call, least of {os.environ.get('REPS', 8)} medians of 50 (median of medians "
             "in brackets), alternated in one process; old = be03643, new = tensor guards; py = Python checks "
             "(default), cc = host_checks.enable()")
    cells = lambda r: " ".join(f"{min(r[v]):7.1f} ({statistics.median(r[v]):5.1f})" for v in labels)
    return [title, f"{'call':24} " + " ".join(f"{l:>16}" for l in labels),
            *(f"{name:24} {cells(r)}" for name, r in results.items())]


gpu = torch.cuda.get_device_name()
report = table(results, [f"{t} {'cc' if c else 'py'}" for t, c in variants], gpu)
print("\n".join(report))
if os.environ.get("OUT"):
    base = f"{os.environ['OUT']}/host_ab_{os.environ.get('TAG', 'gpu')}"
    with open(base + ".txt", "w") as file:
        file.write("\n".join(report) + "\n")
    with open(base + ".json", "w") as file:
        json.dump({"gpu": gpu, "results": results}, file, indent=1)

"""GPU host A/B of MTP's entry points in one process, alternated: the code of HEAD (bc2c388: one
argument at a time) and the working tree's (one pass, guards), default checks. Host µs per call
(perf_counter, a synchronization before each outside the span): least of REPS medians of 50."""
import importlib, json, os, statistics, sys
import torch
sys.path.insert(0, ".")
from gdn_bench.algos import load_solution_file
from gdn_bench.host_cost import host_us
mods = {"old": load_solution_file(".scratch/old/solution/triton/mtp.py", "gdn_mtp_old"),
        "new": load_solution_file("solution/triton/mtp.py", "gdn_mtp_new")}
decs = {tag: importlib.import_module(f"gdn_mtp_{tag}.kernel") for tag in mods}

def calls(m, dec, B, T, seed):
    d, bf = "cuda", torch.bfloat16
    g = torch.Generator(device=d).manual_seed(seed)
    r = lambda *s: torch.randn(*s, device=d, generator=g)
    q, k, v = r(B, T, 4, 128).to(bf), r(B, T, 4, 128).to(bf), r(B, T, 8, 128).to(bf)
    a, b, A, dt = r(B, T, 8).to(bf), r(B, T, 8).to(bf), r(8), r(8)
    P = 2 * B + 8
    pool, idx = r(P, 8, 128, 128), torch.randperm(P, device=d)[:B].to(torch.int32)
    out, states, final = torch.empty_like(v), torch.empty(P, T, 8, 128, 128, device=d), torch.empty_like(pool)
    return {"pooled_mtp": lambda: m.pooled_mtp(q, k, v, pool, idx, A, a, dt, b, 0.088, out, states),
            "kernel (definition)": lambda: m.kernel(q, k, v, pool, idx, A, a, dt, b, 0.088, states, out, final)}

table = {}
for B, T in ((1, 2), (1, 8), (16, 8)):
    for tag in mods:
        for name, fn in calls(mods[tag], decs[tag], B, T, B * T).items():
            table.setdefault(f"{name} B={B} T={T}", {})[tag] = fn
for fns in table.values():
    for fn in fns.values():
        fn(); fn()
torch.cuda.synchronize()
results = {name: {tag: [] for tag in mods} for name in table}
for _ in range(int(os.environ.get("REPS", 8))):
    for name, fns in table.items():
        for tag, fn in fns.items():
            results[name][tag].append(host_us(fn, before=torch.cuda.synchronize, calls=50))
gpu = torch.cuda.get_device_name()
report = [f"{gpu}: MTP host µs per call, least of {os.environ.get('REPS', 8)} medians of 50 (median in brackets); old = bc2c388, new = one pass with guards",
          *(f"{name:28} " + " ".join(f"{tag} {min(r[tag]):6.1f} ({statistics.median(r[tag]):5.1f})" for tag in mods)
            for name, r in results.items())]
print("\n".join(report))
if os.environ.get("OUT"):
    with open(f"{os.environ['OUT']}/mtp_host_ab.txt", "w") as file:
        file.write("\n".join(report) + "\n")

"""Decode (dense and pooled) with evict_first on the state stores (des) and on the state loads too (deb), against
the submitted kernel: DEC_BATCHES.
The variants are copies of solution/triton/ in .scratch/mtpv/des (kernel.py's two new-state stores with
eviction_policy="evict_first") and .scratch/mtpv/deb (its state loads too)."""
import os, sys, torch
sys.path.insert(0, ".")
from gdn_bench.paths import use_project; use_project(".")
from gdn_bench.algos import load_solution_file
from gdn_bench.serving_bench import load_submissions, serving_inputs, _gates, timed
from gdn_bench.shapes import DEFAULT_SCALE
print(torch.cuda.get_device_name(), flush=True)
dec, mtp = load_submissions()
mods = {"base": dec}
for v in ("des", "deb"):
    mods[v] = load_solution_file(f".scratch/mtpv/{v}/kernel.py", f"decv_{v}")
for batch in eval(os.environ.get("DEC_BATCHES", "[1, 8, 32, 128, 512]")):
    x = serving_inputs(batch, 1, 2 * batch, seed=batch)
    q, k, v, A_log, a, dt_bias, b = _gates(x, slice(0, 1))
    pool, slots = x["pool"], x["slots"]
    state = pool[slots.long()].clone(); new_state = torch.empty_like(state); out = torch.empty_like(v)
    for rep in range(int(os.environ.get("REPS", 2))):
        for name, m in mods.items():
            for kind, fn in (("dense", lambda: m.kernel(q, k, v, state, A_log, a, dt_bias, b, DEFAULT_SCALE, out, new_state)),
                             ("pooled", lambda: m.pooled_decode(q, k, v, pool, slots, A_log, a, dt_bias, b, DEFAULT_SCALE, out))):
                row = {}
                timed(row, "x", fn)
                print(f"DEC B={batch:4d} r{rep} {name:5s} {kind:6s} span {row['x_us']:8.2f} graph {row['x_graph_us']:8.2f}", flush=True)

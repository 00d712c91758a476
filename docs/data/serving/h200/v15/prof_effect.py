"""Does a torch.profiler session (graph_replay_us) or loading FI/FLA change later host timings?"""
import importlib, sys, statistics
import torch
sys.path.insert(0, ".")
from gdn_bench.algos import load_solution_file
from gdn_bench.host_cost import call_inputs, our_calls, host_us
from gdn_bench.paths import use_project
from gdn_bench.timing import graph_replay_us
use_project(".")
pre = load_solution_file("solution/triton/prefill.py", "gdn_new")
hc = importlib.import_module("gdn_new.host_checks"); hc.enable()
fns = {}
for lengths in [(6,), (300,), (8192,)]:
    x = call_inputs(lengths, "cuda", seed=sum(lengths))
    fns[f"1 x {lengths[0]}"] = our_calls(pre, x)["kernel"]
for f in fns.values(): f(); f()
def measure(tag):
    row = {n: min(host_us(f, before=torch.cuda.synchronize) for _ in range(5)) for n, f in fns.items()}
    print(f"{tag:34}", "  ".join(f"{n} {v:6.1f}" for n, v in row.items()), flush=True)
measure("fresh (compiled checks)")
measure("fresh again")
try:
    import flashinfer, fla  # noqa
    measure("after importing flashinfer and fla")
except Exception as e:
    print("no fi/fla", e)
graph_replay_us(fns["1 x 6"])
measure("after one graph_replay_us (profiler)")
measure("again")

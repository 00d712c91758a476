"""Session 10: prefill_guard on a GPU, the sm100 plan forced (planning_for((10, 0))). MODE:
cost: the first call's check (wall ms, first call against second), margins against float64;
mma: the sm100_mma rung forced: margins (model-like and stress), determinism, graph time;
miscompile: a launch Triton 3.6 computes wrongly on Hopper (the span pass at 16 columns, 4 warps,
one stage: docs/perf.md item 20) as the sm100 pass, first unguarded, then guarded."""
import sys, time, importlib, warnings, torch
from gdn_bench.algos import load_solution_file
from gdn_bench.checking import worst_margin
from gdn_bench.definitions.prefill.mix import model_like_inputs, stressed, STRESS
from gdn_bench.definitions.prefill.reference import gdn_prefill
from gdn_bench import kernel_breakdown
MODE = sys.argv[1]
sub = load_solution_file("solution/triton/prefill.py", "g2")
shared = importlib.import_module("g2.shared"); guard = importlib.import_module("g2.prefill_guard")
SHAPES = {"16x512": [512] * 16, "57/8192": [144] * 41 + [143] * 16, "1x8192": [8192], "1x1024": [1024]}
def inputs(lengths, kind="model", seed=7):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = model_like_inputs(lengths, g, "cuda")
    return list((x if kind == "model" else stressed(x, kind, g)).values())
def call(args, T, N):
    out = torch.full((T, 8, 128), float("nan"), dtype=torch.bfloat16, device="cuda")
    ns = torch.full((N, 8, 128, 128), float("nan"), device="cuda")
    with shared.planning_for((10, 0)), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sub.kernel(*args, out, ns)
    torch.cuda.synchronize()
    return out, ns, [str(m.message)[:120] for m in w]
def margins(lengths, kind="model"):
    args = inputs(lengths, kind); T, N = sum(lengths), len(lengths)
    ro, rs = gdn_prefill(*args, compute_dtype=torch.float64)
    o1, s1, w = call(args, T, N); o2, s2, _ = call(args, T, N)
    det = torch.equal(o1.view(torch.int16), o2.view(torch.int16)) and torch.equal(s1.view(torch.int32), s2.view(torch.int32))
    return f"out {worst_margin(o1, ro):.3f} state {worst_margin(s1, rs):.3f} det {det} warnings {w}"
if MODE == "cost":
    for name, lengths in SHAPES.items():
        args = inputs(lengths); T, N = sum(lengths), len(lengths)
        call(args, T, N)  # compile everything first (the plan's kernels and the walk) ...
        guard._PASSED.clear(); guard._PASSED_PLANS.clear()  # ... then time a first call's check
        t0 = time.perf_counter(); _, _, w = call(args, T, N); t1 = time.perf_counter(); call(args, T, N); t2 = time.perf_counter()
        print(f"COST {name:8s} first call {1e3 * (t1 - t0):8.2f} ms, next {1e3 * (t2 - t1):7.2f} ms; checked {len(guard._PASSED)} rungs {guard._RUNGS} {w}", flush=True)
        print(f"MARGIN {name:8s} {margins(lengths)}", flush=True)
elif MODE == "mma":
    guard._RUNGS[(0, "sm100")] = "sm100_mma"
    for name, lengths in SHAPES.items():
        for kind in ("model",) + STRESS:
            print(f"MMA {name:8s} {kind:24s} {margins(lengths, kind)}", flush=True)
        args = inputs(lengths); T, N = sum(lengths), len(lengths)
        o = torch.empty(T, 8, 128, dtype=torch.bfloat16, device="cuda"); s = torch.empty(N, 8, 128, 128, device="cuda")
        for rung in ("sm100", "sm100_mma"):
            guard._RUNGS[(0, "sm100")] = rung
            def run():
                with shared.planning_for((10, 0)):
                    sub.kernel(*args, o, s)
            b = kernel_breakdown.measure(run, 20)
            ks = " ".join(f"{k.name.split('_kernel')[0][-12:]}:{k.median_us:.1f}({k.registers})" for k in b.kernels)
            print(f"TIME {rung:10s} {name:8s} span {b.span_us:7.1f} graph {b.graph_span_us or -1:7.1f} | {ks}", flush=True)
elif MODE.startswith("miscompile"):
    table, bv, lengths = {"miscompile": ("PASS_TABLE", 16, [1024]), "miscompile32": ("PASS_TABLE", 32, [512] * 16),
                          "miscompile_summary": ("SUMMARY_TABLE", 16, [2048])}[MODE]
    getattr(sub, table)["sm100"] = (sub.PiecesRow(None, sub.Launch(block_v=bv, warps=4, stages=1)),)
    print(MODE, table, bv, lengths, flush=True)
    GUARDED = guard.GUARDED
    guard.GUARDED = ()
    print(f"UNGUARDED {margins(lengths)}", flush=True)
    guard.GUARDED = GUARDED
    print(f"GUARDED   {margins(lengths)} rungs {guard._RUNGS}", flush=True)
if MODE == "pooled_miscompile":
    sub.SUMMARY_TABLE["sm100"] = (sub.PiecesRow(None, sub.Launch(block_v=16, warps=4, stages=1)),)
    lengths = [4096, 2048]
    args = inputs(lengths); T, N = sum(lengths), len(lengths)
    q, k, v, state, A_log, a, dt_bias, b, cu, scale = args
    ro, rs = gdn_prefill(*args, compute_dtype=torch.float64)
    def pooled():
        pool = torch.randn(6, 8, 128, 128, device="cuda")
        reads = torch.tensor([4, 1], dtype=torch.int32, device="cuda")
        pool[reads] = state
        out = torch.full((T, 8, 128), float("nan"), dtype=torch.bfloat16, device="cuda")
        with shared.planning_for((10, 0)), warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            sub.pooled_prefill(q, k, v, pool, reads, A_log, a, dt_bias, b, cu, scale, out)
        torch.cuda.synchronize()
        return f"out {worst_margin(out, ro):.3f} state {max(worst_margin(pool[4], rs[0]), worst_margin(pool[1], rs[1])):.3f} warnings {[str(m.message)[:60] for m in w]} rungs {guard._RUNGS}"
    GUARDED = guard.GUARDED
    guard.GUARDED = ()
    print(f"POOLED UNGUARDED {pooled()}", flush=True)
    guard.GUARDED = GUARDED
    print(f"POOLED GUARDED   {pooled()}", flush=True)

"""The warp-specialized fused Hopper kernel of docs/perf.md item 32: offline compile (MODE=compile, any
machine: regs and spills for sm_90a, PTX and cubin under .scratch/ws/), or on a GPU check against
float64 and the submitted kernel, and time beside the submitted plan (MODE=gpu; VARIANTS
'name=ablate,prep_regs,stages,maxnreg;...', CHECK and TIME ';'-separated lists of sequence lengths,
SM100=1 adds the sm_100 plan forced). Run from the repository root with fused_ws_hopper.patch applied
(`git apply docs/data/prefill/v16/fused_ws_hopper.patch`)."""
import os, sys, math, time, json
sys.path.insert(0, ".")
import torch, triton
from gdn_bench.algos import load_solution_file
sub = load_solution_file("solution/triton/prefill.py", "ws0")
import importlib
fh = importlib.import_module("ws0.prefill_fused_hopper")
shared = importlib.import_module("ws0.shared")
from gdn_bench.definitions.prefill.mix import model_like_inputs

STAGES = int(os.environ.get("STAGES", 3)); REGS = int(os.environ.get("REGS", 152)); MAXNREG = int(os.environ.get("MAXNREG", 168))
WARPS = int(os.environ.get("WARPS", 8))

def args_for(x, out, new_state, descs):
    qd, kd, vd = descs
    return (qd, kd, vd, x["A_log"], x["a"], x["dt_bias"], x["b"], x["cu_seqlens"], x["state"], out, new_state,
            float(x.get("scale") or 1 / math.sqrt(128)), x["q"].shape[0])

ABLATE = int(os.environ.get("ABLATE", 0))
def consts(x, ablate=None, regs=None, stages=None):
    return dict(HAS_STATE=x["state"] is not None, HQ=4, HV=8, D=128, C=64, LOG_C=6, STAGES=stages or STAGES,
                PREP_REGS=regs or REGS, ABLATE=ABLATE if ablate is None else ablate)

def run_fused(x, out, new_state, ablate=None, regs=None, stages=None, maxnreg=None):
    descs = fh.input_descriptors(x["q"], x["k"], x["v"], 64)
    N = x["cu_seqlens"].shape[0] - 1
    fh.fused_hopper_kernel[(N * 8,)](*args_for(x, out, new_state, descs), **consts(x, ablate, regs, stages),
                                     num_warps=WARPS, maxnreg=maxnreg or MAXNREG)

def inputs(lengths, seed, device):
    return model_like_inputs(lengths, torch.Generator().manual_seed(seed), device)

if os.environ.get("MODE", "compile") == "compile":
    from gdn_bench.arch_compile import compile_job, job
    x = inputs([512] * 16, 0, "cpu"); T = 8192
    out = torch.empty(T, 8, 128, dtype=torch.bfloat16); ns = torch.empty(16, 8, 128, 128)
    descs = fh.input_descriptors(x["q"], x["k"], x["v"], 64)
    rec = shared.LaunchRecord(fh.fused_hopper_kernel, (128, 1, 1), args_for(x, out, ns, descs),
                              tuple(consts(x).items()), WARPS, (("maxnreg", MAXNREG),))
    j = job(rec, (9, 0))
    c = compile_job(j)
    print(triton.__version__, c)
    import triton.compiler as tc
    k = triton.compile(j.src, target=j.target, options=j.options.__dict__)
    ptx = k.asm["ptx"]
    open(".scratch/ws/k.ptx", "w").write(ptx); open(".scratch/ws/k.cubin", "wb").write(k.asm["cubin"])
    import re
    print("bar.sync:", len(re.findall(r"bar\.sync", ptx)), "barrier.sync:", len(re.findall(r"barrier\.sync", ptx)),
          "mbarrier.arrive:", len(re.findall(r"mbarrier\.arrive", ptx)), "setmaxnreg:", re.findall(r"setmaxnreg[^;]*", ptx)[:4],
          "wgmma:", len(re.findall(r"wgmma\.mma_async", ptx)))
    sys.exit(0)

# ---- GPU mode: CHECK and TIME (';'-separated shape lists), beside the submitted plans
import contextlib
from gdn_bench.checking import worst_margin
from gdn_bench.definitions.prefill.mix import stressed, STRESS
from gdn_bench.definitions.prefill.reference import gdn_prefill
from gdn_bench import kernel_breakdown

def fused_kernel(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, output, new_state, **kw):
    x = dict(q=q, k=k, v=v, state=state, A_log=A_log, a=a, dt_bias=dt_bias, b=b, cu_seqlens=cu_seqlens, scale=scale)
    run_fused(x, output, new_state, **kw)

subs = {"base": (sub.kernel, contextlib.nullcontext)}
if os.environ.get("SM100"):
    subs["base:sm100"] = (sub.kernel, lambda: shared.planning_for((10, 0)))
import functools
for v in os.environ.get("VARIANTS", "ws=0,152,3,168").split(";"):
    name, _, p = v.partition("=")
    ab, rg, st, mx = map(int, p.split(","))
    subs[name] = (functools.partial(fused_kernel, ablate=ab, regs=rg, stages=st, maxnreg=mx), contextlib.nullcontext)
def call(fn, ctx, args, T, N):
    out = torch.full((T, 8, 128), float("nan"), dtype=torch.bfloat16, device="cuda")
    ns = torch.full((N, 8, 128, 128), float("nan"), device="cuda")
    with ctx():
        fn(*args, out, ns)
    torch.cuda.synchronize()
    return out, ns
for text in filter(None, os.environ.get("CHECK", "").split(";")):
    lengths = eval(text); T, N = sum(lengths), len(lengths)
    for kind in ("model",) + STRESS:
        g = torch.Generator(device="cuda").manual_seed(7)
        inp = model_like_inputs(lengths, g, "cuda")
        if kind != "model":
            inp = stressed(inp, kind, g)
        args = list(inp.values())
        ref_o, ref_s = gdn_prefill(*args, compute_dtype=torch.float64)
        for spec in [n for n in subs if n == "base" or n.startswith("ws")]:
            fn, ctx = subs[spec]
            t0 = time.time()
            o1, s1 = call(fn, ctx, args, T, N); o2, s2 = call(fn, ctx, args, T, N)
            det = torch.equal(o1.view(torch.int16), o2.view(torch.int16)) and torch.equal(s1.view(torch.int32), s2.view(torch.int32))
            print(f"CHECK {spec:10s} {text[:24]:24s} {kind:24s} out {worst_margin(o1, ref_o):.3f} state {worst_margin(s1, ref_s):.3f} "
                  f"nan {bool(o1.isnan().any() or s1.isnan().any())} det {det} ({time.time() - t0:.1f}s)", flush=True)
for text in filter(None, os.environ.get("TIME", "").split(";")):
    lengths = eval(text); T, N = sum(lengths), len(lengths)
    inp = model_like_inputs(lengths, torch.Generator(device="cuda").manual_seed(0), "cuda")
    args = list(inp.values())
    o = torch.empty(T, 8, 128, dtype=torch.bfloat16, device="cuda"); s = torch.empty(N, 8, 128, 128, device="cuda")
    for rep in range(int(os.environ.get("REPS", "2"))):
        for spec, (fn, ctx) in subs.items():
            def run(fn=fn, ctx=ctx):
                with ctx():
                    fn(*args, o, s)
            try:
                b = kernel_breakdown.measure(run, 20)
            except Exception as e:
                print(f"TIME {spec} {text[:24]} failed {type(e).__name__}: {str(e)[:300]}", flush=True); continue
            ks = " ".join(f"{k.name.split('_kernel')[0][-12:]}:{k.median_us:.1f}({k.registers})" for k in b.kernels)
            print(f"TIME r{rep} {spec:10s} {text[:24]:24s} span {b.span_us:7.1f} graph {b.graph_span_us or -1:7.1f} sum {b.kernel_sum_us:7.1f} | {ks}", flush=True)

"""MTP store hints on the per-token states (.cs streaming, evict_first) and launch rows, against the submitted
kernel (and FlashInfer's MTP where it imports): MTP_SHAPES [(B, T)], MTP_ROWS [(bv, warps, preload)] for B <= 16.
The variants are copies of solution/triton/ (as it was before this session) in .scratch/mtpv/cs and
.scratch/mtpv/ef, each with one edit to mtp.py's per-token state store: cache_modifier=".cs" or
eviction_policy="evict_first". FI=1 times FlashInfer's gated_delta_rule_mtp beside them."""
import os, sys, torch
sys.path.insert(0, ".")
from gdn_bench.paths import use_project; use_project(".")
from gdn_bench.algos import load_solution_file
from gdn_bench.serving_bench import load_submissions, flashinfer_gdn, serving_inputs, _gates, timed
from gdn_bench.shapes import DEFAULT_SCALE, NUM_V_HEADS, HEAD_SIZE
print(torch.cuda.get_device_name(), "L2", getattr(torch.cuda.get_device_properties(0), "L2_cache_size", None), flush=True)
dec, mtp = load_submissions()
fi = flashinfer_gdn() if os.environ.get("FI") else None
mods = {"base": mtp}
for v in ("cs", "ef"):
    mods[v] = load_solution_file(f".scratch/mtpv/{v}/mtp.py", f"mtpv_{v}")
rows = eval(os.environ.get("MTP_ROWS", "[]"))
base = mtp.LAUNCH_TABLES["sm90"]
for batch, steps in eval(os.environ.get("MTP_SHAPES", "[(16, 8)]")):
    pool_size = 2 * batch + 8
    x = serving_inputs(batch, steps, pool_size, seed=1000 * batch + steps)
    q, k, v, A_log, a, dt_bias, b = _gates(x, slice(None))
    pool, slots = x["pool"], x["slots"]
    buffer = torch.empty(pool_size, steps, NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE, device="cuda")
    out = torch.empty_like(v)
    ref_out, ref_buf = None, None
    for rep in range(int(os.environ.get("REPS", 3))):
        if fi is not None:
            fo, fb = torch.empty_like(v), torch.empty_like(buffer)
            row = {}
            timed(row, "fi", lambda: fi.gated_delta_rule_mtp(q=q, k=k, v=v, initial_state=pool, initial_state_indices=slots,
                  A_log=A_log, a=a, dt_bias=dt_bias, b=b, scale=DEFAULT_SCALE, output=fo, intermediate_states_buffer=fb,
                  disable_state_update=True, use_qk_l2norm=False))
            print(f"MTP B={batch:3d} T={steps} r{rep} FI          span {row['fi_us']:7.2f} graph {row['fi_graph_us']:7.2f}", flush=True)
        variants = [(name, m, None) for name, m in mods.items()]
        variants += [(f"bv{bv}w{w}p{int(p)}", mtp, (bv, w, p)) for bv, w, p in rows if batch <= 16]
        for name, m, r in variants:
            if r is not None:
                mtp.LAUNCH_TABLES["sm90"] = (base[0], mtp.MtpLaunchRow(16, *r), base[2])
            row = {}
            o2, b2 = torch.full_like(out, float("nan")), torch.full_like(buffer, float("nan"))
            m.pooled_mtp(q, k, v, pool, slots, A_log, a, dt_bias, b, DEFAULT_SCALE, o2, b2)
            torch.cuda.synchronize()
            if ref_out is None:
                ref_out, ref_buf = o2.clone(), b2.clone()
            same = torch.equal(o2.view(torch.int16), ref_out.view(torch.int16)) and torch.equal(b2[slots.long()], ref_buf[slots.long()])
            timed(row, "ours", lambda: m.pooled_mtp(q, k, v, pool, slots, A_log, a, dt_bias, b, DEFAULT_SCALE, out, buffer))
            mtp.LAUNCH_TABLES["sm90"] = base
            print(f"MTP B={batch:3d} T={steps} r{rep} {name:11s} span {row['ours_us']:7.2f} graph {row['ours_graph_us']:7.2f} same {same}", flush=True)

"""Experiment (#36 item 2): pooled decode whose programs ask the L2 for the state tile of the
program AHEAD launch places later (its row's index loaded, then prefetch.global.L2), so that
later waves find their scattered slots (and their pages' translations) warm. Against dense
decode and the landed pooled_decode, random slots of a pool of 2B and identity slots.
CUPTI span cold L2 / graph replay, µs."""
import os, sys, importlib
import torch, triton, triton.language as tl
from gdn_bench.algos import load_solution_file
from gdn_bench.definitions.decode.definition import DECODE
from gdn_bench.serving_bench import serving_inputs, _gates
from gdn_bench.timing import kernel_time_us, graph_replay_us
from gdn_bench.paths import use_project; use_project(".")

old = load_solution_file(".scratch/old_dec/kernel.py", "olddec")
dec = load_solution_file(DECODE.submission_entry(), "dec")
sh = importlib.import_module(dec.Launcher.__module__)
carry = importlib.import_module(sh.__package__ + ".prefill_carry")
step_gates, delta_rule_step, pool_slots, prefetch_lines = sh.step_gates, sh.delta_rule_step, sh.pool_slots, carry.prefetch_lines


@triton.jit
def pooled_ahead(q_ptr, k_ptr, v_ptr, pool_ptr, A_log_ptr, a_ptr, dt_bias_ptr, b_ptr, out_ptr, index_ptr, scale,
                 pool_size, HQ: tl.constexpr, HV: tl.constexpr, D: tl.constexpr, BV: tl.constexpr,
                 AHEAD: tl.constexpr):
    tile = tl.program_id(0)
    bh = tl.program_id(1)
    batch = bh // HV
    head = bh % HV
    qk_row = batch * HQ + head // (HV // HQ)
    offs_k = tl.arange(0, D)
    offs_v = tile * BV + tl.arange(0, BV)
    NT: tl.constexpr = D // BV
    if AHEAD > 0:
        later = bh * NT + tile + AHEAD
        later_bh = later // NT
        ok = later_bh < tl.num_programs(1)
        later_row = tl.where(ok, later_bh // HV, 0)
        slot = tl.load(index_ptr + later_row).to(tl.int64)
        ok = ok & (slot >= 0) & (slot < pool_size)
        base = pool_ptr + (tl.where(ok, slot, 0) * HV + later_bh % HV) * (D * D) + (later % NT) * (BV * D)
        prefetch_lines(base, BV * D // 32, 32, ok)
    q = tl.load(q_ptr + qk_row * D + offs_k).to(tl.float32)
    k = tl.load(k_ptr + qk_row * D + offs_k).to(tl.float32)
    v = tl.load(v_ptr + bh * D + offs_v).to(tl.float32)
    qk = tl.sum(q * k, axis=0)
    g, beta = step_gates(tl.load(A_log_ptr + head), tl.load(dt_bias_ptr + head), a_ptr, b_ptr, bh)
    read, write, reads, writes, fill = pool_slots(index_ptr, index_ptr, batch, pool_size)
    tile_offs = offs_v[:, None] * D + offs_k[None, :]
    read_mask = offs_v[:, None] < tl.where(reads, D, 0)
    write_mask = offs_v[:, None] < tl.where(writes, D, 0)
    s = tl.load(pool_ptr + (read * HV + head) * (D * D) + tile_offs, mask=read_mask, other=0.0)
    out, s_new = delta_rule_step(s, q, k, v, g, beta, scale, qk)
    tl.store(pool_ptr + (write * HV + head) * (D * D) + tile_offs, s_new, mask=write_mask)
    out = tl.where(reads, out, fill)
    tl.store(out_ptr + bh * D + offs_v, out.to(out_ptr.dtype.element_ty))


def ahead_call(q, k, v, pool, slots, A_log, a, dt_bias, b, out, ahead, bv=None, warps=1):
    B = q.shape[0]
    row = sh.launch_row(B, dec.LAUNCH_TABLES[sh.arch_key(q.device)])
    bv = bv or row.block_v
    grid = (128 // bv, B * 8)
    return lambda: pooled_ahead[grid](q, k, v, pool, A_log, a, dt_bias, b, out, slots, 128 ** -0.5, pool.shape[0],
                                      HQ=4, HV=8, D=128, BV=bv, AHEAD=ahead, num_warps=warps)


def main():
    sizes = [int(s) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else [1, 8, 16, 32, 48, 64, 128, 256, 512]
    aheads = [int(s) for s in sys.argv[2].split(",")] if len(sys.argv) > 2 else [0, 1024, 2048, 4096]
    scale = 128 ** -0.5
    for B in sizes:
        x = serving_inputs(B, 1, 2 * B, seed=B)
        q, k, v, A_log, a, dt_bias, b = _gates(x, slice(0, 1))
        pool, slots = x["pool"], x["slots"]
        state = pool[slots.long()].clone()
        ident = pool[:B].clone().contiguous(); islots = torch.arange(B, device="cuda", dtype=torch.int32)
        out, ns = torch.empty_like(v), torch.empty_like(state)
        wslots = slots.clone()
        # correctness of the variant against the landed pooled_decode (bit for bit expected)
        p1, p2, o1, o2 = pool.clone(), pool.clone(), torch.empty_like(v), torch.empty_like(v)
        dec.pooled_decode(q, k, v, p1, slots, A_log, a, dt_bias, b, scale, o1)
        p3, o3 = pool.clone(), torch.empty_like(v)
        old.pooled_decode(q, k, v, p3, slots, A_log, a, dt_bias, b, scale, o3)
        assert torch.equal(o1, o3) and torch.equal(p1, p3), B
        p3.copy_(pool); dec.pooled_decode(q, k, v, p3, slots, A_log, a, dt_bias, b, scale, o3, slots.clone())
        assert torch.equal(o1, o3) and torch.equal(p1, p3), B
        for ah in aheads:
            p2.copy_(pool); ahead_call(q, k, v, p2, slots, A_log, a, dt_bias, b, o2, ah)()
            assert torch.equal(o1, o2) and torch.equal(p1, p2), (B, ah)
        fns = {"dense": lambda: dec.kernel(q, k, v, state, A_log, a, dt_bias, b, scale, out, ns),
               "pooled": lambda: dec.pooled_decode(q, k, v, pool, slots, A_log, a, dt_bias, b, scale, out),
               "old_pooled": lambda: old.pooled_decode(q, k, v, pool, slots, A_log, a, dt_bias, b, scale, out),
               "pooled_sep": lambda: dec.pooled_decode(q, k, v, pool, slots, A_log, a, dt_bias, b, scale, out, wslots),
               "pooled_ident": lambda: dec.pooled_decode(q, k, v, ident, islots, A_log, a, dt_bias, b, scale, out)}
        for ah in aheads:
            fns[f"ahead{ah}"] = ahead_call(q, k, v, pool, slots, A_log, a, dt_bias, b, out, ah)
        for r in range(int(os.environ.get("ROUNDS", "2"))):
            cells = []
            for name, fn in fns.items():
                cells.append(f"{name} {kernel_time_us(fn):7.2f}/{graph_replay_us(fn):7.2f}")
            print(f"B={B:4d} r{r} " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()

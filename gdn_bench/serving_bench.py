"""Kernel-level benchmark of the serving entry points on a GPU (scripts/bench_serving.py): what
issue 29's speed targets are measured with.

Pooled decode: solution/triton/kernel.py's pooled_decode against its kernel (the contest's
dense call) at every batch size: the same step, each row's state read from a random slot of a
pool of 2B slots and written back in place, against states passed densely (read from one
tensor, written to another: the same bytes). Target: pooled within 3 % of dense. Beside them,
FlashInfer's pooled decode (gated_delta_rule_decode_pretranspose with initial_state and
initial_state_indices, its float32 path) where it runs.

MTP at T = 2, 4, 8 and B = 1, 16, 64 (pool of 2B + 8 slots, distinct random slots):
solution/triton/mtp.py's pooled_mtp (the state after every token into the buffer, the pool
not updated); its kernel(), the definition's call (that, plus copying the pool into
final_state); FlashInfer's gated_delta_rule_mtp as baselines/mtp/fi_baseline calls it; and T
calls of pooled_decode (the same T steps, one launch each, the pool updated in place, no
buffer). Targets: pooled_mtp no slower than FlashInfer's, and below T calls of pooled decode.

Pooled prefill: solution/triton/prefill.py's pooled_prefill against its kernel() (the contest's
dense call) on calls of PREFILL_CALLS (token walk, chunked, spans): each sequence's state read
from a random slot of a pool of 2N + 8 slots and written back in place, against states passed
densely. Reported beside decode's 3 % target.

FLA 0.6.0 beside them, where fla imports (gdn_bench/fla_serving.py says what it offers and what
engines call): `fla_indexed`, its token loop over the pool through indices, in place (decode:
row b reads and writes slots[b]; MTP: the state after token t goes to FLA's pool slot [b, t],
the first being slots[b], in a copy of the pool grown by B (T - 1) slots), and
`fla_gathered`, its dense-state GDN call between a gather of the rows' states and their write
back (decode: fused_recurrent_gated_delta_rule; prefill: chunk_gated_delta_rule, FLA having no
chunked call over a pool). Each FLA call's first run, on the pool as it was drawn, is checked
against float64 (gdn_mtp, gdn_prefill): `<name>_out_rel_err` (output) and
`<name>_state_rel_err` (the states it left in its pool), max |error| / max |reference|; ours
get `out_rel_err`. Where fla does not import, the result says why and the rows have no FLA
entries.

Each time is taken two ways (gdn_bench.timing): `<name>_us`, the CUPTI span of one call with a
cold L2 (first kernel start to last kernel end, median: the contest's measure), and
`<name>_graph_us`, one replay of the call captured in a CUDA graph (warm L2, the CUPTI span of
the replay's kernels, median): what an engine that replays graphs pays on the GPU. A call that cannot be captured gets
`<name>_graph_note` instead. Inputs are model-like: unit-norm keys (so that states stay bounded
through repeated in-place calls), everything else N(0, 1), scale 1/sqrt(128).

mtp.py's LAUNCH_TABLES is tuned as the other submissions' tables are: scripts/tune_launch.py
--definition mtp (gdn_bench/mtp_tuning.py).
"""

import torch
from tqdm import tqdm

from gdn_bench.algos import load_solution_file
from gdn_bench.bench_sizes import DECODE_BATCH_SIZES, DRAFT_LENGTHS, MTP_BATCH_SIZES, PREFILL_CALLS
from gdn_bench.definitions.decode.definition import DECODE
from gdn_bench.definitions.mtp.definition import MTP
from gdn_bench.definitions.mtp.reference import gdn_mtp
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.definitions.prefill.mix import model_like_inputs
from gdn_bench.definitions.prefill.reference import gdn_prefill
from gdn_bench.fla_serving import draft_slots, gathered, indexed_recurrent, load_fla
from gdn_bench.shapes import DEFAULT_SCALE, HEAD_SIZE, NUM_Q_HEADS, NUM_V_HEADS
from gdn_bench.timing import graph_replay_us, kernel_time_us

POOLED_DECODE_TARGET = 1.03  # pooled / dense
DECODE_COLUMNS = (("B", "batch_size", "d"), ("dense µs", "dense_us", ".2f"), ("pooled µs", "pooled_us", ".2f"),
                  ("pool/dense", "pooled_vs_dense", ".3f"), ("FI pool µs", "fi_pooled_us", ".2f"),
                  ("dense graph", "dense_graph_us", ".2f"), ("pool graph", "pooled_graph_us", ".2f"),
                  ("FI graph", "fi_pooled_graph_us", ".2f"), ("same bits", "same_as_dense", ""))
MTP_COLUMNS = (("B", "batch_size", "d"), ("T", "seq_len", "d"), ("ours µs", "ours_us", ".2f"),
               ("contest µs", "contest_us", ".2f"), ("FI µs", "fi_us", ".2f"), ("T×dec µs", "decode_steps_us", ".2f"),
               ("FI/ours", "fi_vs_ours", ".2f"), ("ours/T×dec", "ours_vs_decode_steps", ".2f"),
               ("ours graph", "ours_graph_us", ".2f"), ("FI graph", "fi_graph_us", ".2f"),
               ("T×dec graph", "decode_steps_graph_us", ".2f"), ("out err", "out_rel_err", ".1e"),
               ("FI err", "fi_out_rel_err", ".1e"))
PREFILL_COLUMNS = (("call", "call", ""), ("dense µs", "dense_us", ".2f"), ("pooled µs", "pooled_us", ".2f"),
                   ("pool/dense", "pooled_vs_dense", ".3f"), ("dense graph", "dense_graph_us", ".2f"),
                   ("pool graph", "pooled_graph_us", ".2f"), ("same bits", "same_as_dense", ""))
# FLA beside ours (gdn_bench/fla_serving.py): idx = its token loop on the pool through indices, in
# place; gat = a dense-state call between a gather of the states and their write back.
DECODE_FLA_COLUMNS = (("B", "batch_size", "d"), ("pooled µs", "pooled_us", ".2f"),
                      ("FLA idx µs", "fla_indexed_us", ".2f"), ("FLA gat µs", "fla_gathered_us", ".2f"),
                      ("idx/ours", "fla_indexed_vs_ours", ".2f"), ("pool graph", "pooled_graph_us", ".2f"),
                      ("idx graph", "fla_indexed_graph_us", ".2f"), ("gat graph", "fla_gathered_graph_us", ".2f"),
                      ("out err", "out_rel_err", ".1e"), ("idx err", "fla_indexed_out_rel_err", ".1e"),
                      ("gat err", "fla_gathered_out_rel_err", ".1e"),
                      ("idx st err", "fla_indexed_state_rel_err", ".1e"),
                      ("gat st err", "fla_gathered_state_rel_err", ".1e"))
MTP_FLA_COLUMNS = (("B", "batch_size", "d"), ("T", "seq_len", "d"), ("ours µs", "ours_us", ".2f"),
                   ("FLA idx µs", "fla_indexed_us", ".2f"), ("idx/ours", "fla_indexed_vs_ours", ".2f"),
                   ("ours graph", "ours_graph_us", ".2f"), ("idx graph", "fla_indexed_graph_us", ".2f"),
                   ("out err", "out_rel_err", ".1e"), ("idx err", "fla_indexed_out_rel_err", ".1e"),
                   ("idx st err", "fla_indexed_state_rel_err", ".1e"))
PREFILL_FLA_COLUMNS = (("call", "call", ""), ("pooled µs", "pooled_us", ".2f"),
                       ("FLA gat µs", "fla_gathered_us", ".2f"), ("gat/ours", "fla_gathered_vs_ours", ".2f"),
                       ("pool graph", "pooled_graph_us", ".2f"), ("gat graph", "fla_gathered_graph_us", ".2f"),
                       ("out err", "out_rel_err", ".1e"), ("gat err", "fla_gathered_out_rel_err", ".1e"),
                       ("gat st err", "fla_gathered_state_rel_err", ".1e"))


def load_submissions():
    """(kernel.py, mtp.py) of the project checkout, as modules."""
    return (load_solution_file(DECODE.submission_entry(), "gdn_decode_submission"),
            load_solution_file(MTP.submission_entry(), "gdn_mtp_submission"))


def call_name(lengths) -> str:
    """A prefill call's name, as the prefill tables write it: N × L for N sequences of L tokens,
    else the lengths."""
    if len(set(lengths)) == 1:
        return f"{len(lengths)} × {lengths[0]}"
    return "[" + ", ".join(map(str, lengths)) + "]"


def flashinfer_gdn():
    """FlashInfer's gdn_decode module, or None where it cannot be imported."""
    try:
        from flashinfer import gdn_decode
    except Exception:  # noqa: BLE001 - missing, or installed without its CUDA libraries
        return None
    return gdn_decode


def serving_inputs(batch: int, steps: int, pool_size: int, seed: int, device: str = "cuda") -> dict:
    """One call's inputs: q, k, v, a, b for `steps` tokens per row (unit-norm keys), A_log,
    dt_bias, a pool [P, 8, 128, 128] f32 and `slots`, distinct random slots [B] int32."""
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=device)

    k = randn(batch, steps, NUM_Q_HEADS, HEAD_SIZE)
    return dict(
        q=randn(batch, steps, NUM_Q_HEADS, HEAD_SIZE).bfloat16(), k=(k / k.norm(dim=-1, keepdim=True)).bfloat16(),
        v=randn(batch, steps, NUM_V_HEADS, HEAD_SIZE).bfloat16(), A_log=randn(NUM_V_HEADS),
        a=randn(batch, steps, NUM_V_HEADS).bfloat16(), dt_bias=randn(NUM_V_HEADS),
        b=randn(batch, steps, NUM_V_HEADS).bfloat16(), pool=randn(pool_size, NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE),
        slots=torch.randperm(pool_size, generator=gen, device=device)[:batch].to(torch.int32),
    )


def timed(row: dict, name: str, fn) -> None:
    """row[name_us] (CUPTI span, cold L2) and row[name_graph_us] (CUDA-graph replay), or
    row[name_graph_note] saying why the call could not be captured."""
    row[f"{name}_us"] = kernel_time_us(fn)
    try:
        row[f"{name}_graph_us"] = graph_replay_us(fn)
    except Exception as e:  # noqa: BLE001 - any capture failure is reported, not fatal
        row[f"{name}_graph_note"] = f"not capturable ({type(e).__name__}: {e})".splitlines()[0]


def _gates(x: dict, step: slice) -> list:
    """q, k, v, A_log, a, dt_bias, b of tokens `step`, contiguous, in call order (the pool and
    indices go between v and A_log)."""
    return [x[n][:, step].contiguous() if n not in ("A_log", "dt_bias") else x[n]
            for n in ("q", "k", "v", "A_log", "a", "dt_bias", "b")]


def pooled_decode_row(dec, fi, fla, batch: int, device: str = "cuda") -> dict:
    """One batch size: dense and pooled decode (and FlashInfer's and FLA's pooled decode), µs;
    pooled decode's output error against float64 (FLA's: output and states)."""
    x = serving_inputs(batch, 1, 2 * batch, seed=batch, device=device)
    q, k, v, A_log, a, dt_bias, b = _gates(x, slice(0, 1))
    pool, slots = x["pool"], x["slots"]
    rows = slots.long()
    ref_out, ref_states = gdn_mtp(q, k, v, pool, slots, A_log, a, dt_bias, b, DEFAULT_SCALE)
    fla_pools = (pool.clone(), pool.clone()) if fla is not None else None  # the pool before in-place calls
    state = pool[rows].clone()
    new_state, out = torch.empty_like(state), torch.empty_like(v)
    dense_out, pooled_out = torch.empty_like(v), torch.empty_like(v)
    check_pool = pool.clone()
    dec.kernel(q, k, v, state, A_log, a, dt_bias, b, DEFAULT_SCALE, dense_out, new_state)
    dec.pooled_decode(q, k, v, check_pool, slots, A_log, a, dt_bias, b, DEFAULT_SCALE, pooled_out)
    row = {"batch_size": batch, "same_as_dense": bool(torch.equal(dense_out, pooled_out)
                                                      and torch.equal(new_state, check_pool[rows])),
           "out_rel_err": _relative_error(pooled_out, ref_out)}
    timed(row, "dense", lambda: dec.kernel(q, k, v, state, A_log, a, dt_bias, b, DEFAULT_SCALE, out, new_state))
    timed(row, "pooled", lambda: dec.pooled_decode(q, k, v, pool, slots, A_log, a, dt_bias, b, DEFAULT_SCALE, out))
    row["pooled_vs_dense"] = row["pooled_us"] / row["dense_us"]
    if fi is not None:
        fi_pool = pool.clone()

        def fi_pooled():
            fi.gated_delta_rule_decode_pretranspose(
                q=q, k=k, v=v, state=None, A_log=A_log, a=a, dt_bias=dt_bias, b=b, scale=DEFAULT_SCALE, output=out,
                use_qk_l2norm=False, initial_state=fi_pool, initial_state_indices=slots)

        _baseline(row, "fi_pooled", fi_pooled)
    if fla is not None:
        indexed_pool, gathered_pool = fla_pools
        _baseline(row, "fla_indexed", indexed_recurrent(fla, q, k, v, indexed_pool, slots, A_log, a, dt_bias, b,
                                                        DEFAULT_SCALE, torch.empty_like(v)),
                  _checked(row, "fla_indexed", ref_out, ref_states[:, 0], lambda: indexed_pool[rows]))
        _baseline(row, "fla_gathered", gathered(fla.recurrent, q, k, v, gathered_pool, rows, A_log, a, dt_bias, b,
                                                DEFAULT_SCALE),
                  _checked(row, "fla_gathered", ref_out, ref_states[:, 0], lambda: gathered_pool[rows]))
        _ratio(row, "fla_indexed", "pooled")
        _ratio(row, "fla_gathered", "pooled")
    return row


def pooled_prefill_row(pre, fla, lengths, device: str = "cuda") -> dict:
    """One prefill call: the contest's kernel() on states gathered from the pool and
    pooled_prefill on the pool itself (in place), µs; whether they agree bit for bit; pooled
    prefill's output error against float64; FLA's chunked call on the gathered states, written
    back (FLA 0.6.0 has none over a pool), µs, its output and states' errors."""
    num_seqs = len(lengths)
    gen = torch.Generator(device=device).manual_seed(sum(lengths) + num_seqs)
    x = model_like_inputs(list(lengths), gen, device, with_state=False)
    q, k, v, A_log, a, dt_bias, b, cu_seqlens = (x[n] for n in ("q", "k", "v", "A_log", "a", "dt_bias", "b",
                                                                "cu_seqlens"))
    pool_size = 2 * num_seqs + 8
    pool = torch.randn(pool_size, NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE, generator=gen, device=device)
    slots = torch.randperm(pool_size, generator=gen, device=device)[:num_seqs].to(torch.int32)
    rows = slots.long()
    state = pool[rows].clone()
    ref_out, ref_states = gdn_prefill(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, DEFAULT_SCALE)
    fla_pool = pool.clone() if fla is not None else None  # the pool before in-place calls
    new_state, out = torch.empty_like(state), torch.empty_like(v)
    dense_out, pooled_out, check_pool = torch.empty_like(v), torch.empty_like(v), pool.clone()
    pre.kernel(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, DEFAULT_SCALE, dense_out, new_state)
    pre.pooled_prefill(q, k, v, check_pool, slots, A_log, a, dt_bias, b, cu_seqlens, DEFAULT_SCALE, pooled_out)
    row = {"call": call_name(lengths), "same_as_dense": bool(torch.equal(dense_out, pooled_out)
                                                            and torch.equal(new_state, check_pool[rows])),
           "out_rel_err": _relative_error(pooled_out, ref_out)}
    timed(row, "dense", lambda: pre.kernel(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, DEFAULT_SCALE, out,
                                           new_state))
    timed(row, "pooled", lambda: pre.pooled_prefill(q, k, v, pool, slots, A_log, a, dt_bias, b, cu_seqlens,
                                                    DEFAULT_SCALE, out))
    row["pooled_vs_dense"] = row["pooled_us"] / row["dense_us"]
    if fla is not None:
        _baseline(row, "fla_gathered", gathered(fla.chunk, q, k, v, fla_pool, rows, A_log, a, dt_bias, b, cu_seqlens,
                                                DEFAULT_SCALE),
                  _checked(row, "fla_gathered", ref_out, ref_states, lambda: fla_pool[rows]))
        _ratio(row, "fla_gathered", "pooled")
    return row


def _baseline(row: dict, name: str, fn, check=None) -> None:
    """timed(), or row[name_note] with the reason when the baseline fails to run; check(what
    the first call returned) before the timed ones, when given."""
    try:
        result = fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - a baseline that does not run here is reported, not fatal
        row[f"{name}_note"] = f"{type(e).__name__}: {e}".splitlines()[0]
        return
    if check is not None:
        check(result)
    timed(row, name, fn)


def _checked(row: dict, name: str, ref_out: torch.Tensor, ref_states: torch.Tensor, states):
    """A check for _baseline: the output a call returned and the states it left in its pool
    (states(): the rows' slots) against float64, as row[name_out_rel_err] and
    row[name_state_rel_err]."""
    def check(output):
        row[f"{name}_out_rel_err"] = _relative_error(output, ref_out)
        row[f"{name}_state_rel_err"] = _relative_error(states(), ref_states)

    return check


def _ratio(row: dict, name: str, ours: str) -> None:
    """row[name_vs_ours]: its time over ours, where it was timed."""
    if f"{name}_us" in row:
        row[f"{name}_vs_ours"] = row[f"{name}_us"] / row[f"{ours}_us"]


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got - want| / max |want|, in float64."""
    return ((got.double() - want).abs().max() / want.abs().max()).item()


def mtp_row(dec, mtp, fi, fla, batch: int, steps: int, device: str = "cuda") -> dict:
    """One (B, T): pooled_mtp, kernel(), FlashInfer's MTP, FLA's pooled token loop and T calls
    of pooled decode, µs; the output's error against float64 (ours, FlashInfer's, FLA's; FLA's
    states too)."""
    pool_size = 2 * batch + 8
    x = serving_inputs(batch, steps, pool_size, seed=1000 * batch + steps, device=device)
    q, k, v, A_log, a, dt_bias, b = _gates(x, slice(None))
    pool, slots = x["pool"], x["slots"]
    buffer = torch.empty(pool_size, steps, NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE, device=pool.device)
    out, final_state = torch.empty_like(v), torch.empty_like(pool)
    ref_out, ref_states = gdn_mtp(q, k, v, pool, slots, A_log, a, dt_bias, b, DEFAULT_SCALE)
    mtp.pooled_mtp(q, k, v, pool, slots, A_log, a, dt_bias, b, DEFAULT_SCALE, out, buffer)
    row = {"batch_size": batch, "seq_len": steps, "pool_size": pool_size, "out_rel_err": _relative_error(out, ref_out)}
    timed(row, "ours", lambda: mtp.pooled_mtp(q, k, v, pool, slots, A_log, a, dt_bias, b, DEFAULT_SCALE, out, buffer))
    timed(row, "contest", lambda: mtp.kernel(q, k, v, pool, slots, A_log, a, dt_bias, b, DEFAULT_SCALE, buffer, out,
                                             final_state))
    tokens = [_gates(x, slice(t, t + 1)) for t in range(steps)]
    decode_pool, decode_out = pool.clone(), torch.empty_like(tokens[0][2])

    def decode_steps():
        for qt, kt, vt, _, at, _, bt in tokens:
            dec.pooled_decode(qt, kt, vt, decode_pool, slots, A_log, at, dt_bias, bt, DEFAULT_SCALE, decode_out)

    timed(row, "decode_steps", decode_steps)
    row["ours_vs_decode_steps"] = row["ours_us"] / row["decode_steps_us"]
    if fi is not None:
        fi_out, fi_buffer = torch.empty_like(v), torch.empty_like(buffer)

        def fi_mtp():
            fi.gated_delta_rule_mtp(
                q=q, k=k, v=v, initial_state=pool, initial_state_indices=slots, A_log=A_log, a=a, dt_bias=dt_bias,
                b=b, scale=DEFAULT_SCALE, output=fi_out, intermediate_states_buffer=fi_buffer,
                disable_state_update=True, use_qk_l2norm=False)

        _baseline(row, "fi", fi_mtp)
        if "fi_us" in row:
            row["fi_vs_ours"] = row["fi_us"] / row["ours_us"]
            row["fi_out_rel_err"] = _relative_error(fi_out, ref_out)
    if fla is not None:
        indices = draft_slots(slots, steps, pool_size)
        fla_pool = torch.cat([pool, pool.new_empty(batch * (steps - 1), *pool.shape[1:])])
        _baseline(row, "fla_indexed", indexed_recurrent(fla, q, k, v, fla_pool, indices, A_log, a, dt_bias, b,
                                                        DEFAULT_SCALE, torch.empty_like(v)),
                  _checked(row, "fla_indexed", ref_out, ref_states, lambda: fla_pool[indices.long()]))
        _ratio(row, "fla_indexed", "ours")
    return row


def bench(decode_batch_sizes=DECODE_BATCH_SIZES, mtp_batch_sizes=MTP_BATCH_SIZES,
          draft_lengths=DRAFT_LENGTHS, prefill_calls=PREFILL_CALLS) -> dict:
    """{"pooled_decode": rows per batch size, "mtp": rows per (B, T), "pooled_prefill": rows
    per call, "fla": {"version": fla-core's} or {"absent": why}} (see the module docstring)."""
    dec, mtp = load_submissions()
    pre = load_solution_file(PREFILL.submission_entry(), "gdn_prefill_submission")
    fi = flashinfer_gdn()
    fla, fla_absent = load_fla()
    decode_rows = [pooled_decode_row(dec, fi, fla, batch) for batch in tqdm(decode_batch_sizes, desc="pooled decode")]
    shapes = [(batch, steps) for batch in mtp_batch_sizes for steps in draft_lengths]
    mtp_rows = [mtp_row(dec, mtp, fi, fla, batch, steps) for batch, steps in tqdm(shapes, desc="mtp")]
    prefill_rows = [pooled_prefill_row(pre, fla, lengths) for lengths in tqdm(prefill_calls, desc="pooled prefill")]
    return {"pooled_decode": decode_rows, "mtp": mtp_rows, "pooled_prefill": prefill_rows,
            "fla": {"version": fla.version} if fla is not None else {"absent": fla_absent}}


def _cell(row: dict, key: str, spec: str) -> str:
    if key not in row or row[key] is None:
        return "-"
    return str(row[key]) if isinstance(row[key], bool) else format(row[key], spec)


def format_rows(rows: list[dict], columns) -> str:
    """A table, one line per row, '-' where a column was not measured."""
    lines = ["  ".join(f"{title:>11}" for title, _, _ in columns)]
    lines += ["  ".join(f"{_cell(row, key, spec):>11}" for _, key, spec in columns) for row in rows]
    return "\n".join(lines)


def fla_tables(result: dict) -> str:
    """FLA beside ours, one table per entry point, each saying which of FLA's calls it runs;
    or the line saying that FLA is absent."""
    fla = result["fla"]
    if "absent" in fla:
        return f"FLA: absent ({fla['absent']}): no FLA tables"
    return "\n".join([
        f"FLA {fla['version']} beside ours (gdn_bench/fla_serving.py). idx = fused_recurrent_kda_fwd on the pool "
        "through ssm_state_indices, in place (its per-channel gate given GDN's, repeated over K); gat = its GDN "
        "call on the states gathered from the pool, written back after it (gather and write back timed). "
        "err: output, st err: the states the call left in its pool, against float64.",
        "\npooled decode (idx: reads and writes slots[b]; gat: fused_recurrent_gated_delta_rule):",
        format_rows(result["pooled_decode"], DECODE_FLA_COLUMNS),
        "\nMTP (idx writes the state after token t to its own slot [b, t], t = 0 over the state read; "
        "FLA 0.6.0 has no call that leaves the pool and writes a buffer):",
        format_rows(result["mtp"], MTP_FLA_COLUMNS),
        "\npooled prefill (FLA 0.6.0 has no chunked call over a pool: gat = chunk_gated_delta_rule):",
        format_rows(result["pooled_prefill"], PREFILL_FLA_COLUMNS),
    ])


def notes(rows: list[dict]) -> list[str]:
    """The `_note` entries of the rows (calls that could not be captured, baselines that did not run)."""
    return [f"{_label(row)} {key[:-5]}: {value}" for row in rows for key, value in row.items() if key.endswith("_note")]


def _label(row: dict) -> str:
    """A row's shape: B (and T) for decode and MTP, the call for prefill."""
    if "call" in row:
        return row["call"]
    return f"B={row['batch_size']}" + (f" T={row['seq_len']}" if "seq_len" in row else "")


def verdicts(result: dict) -> list[str]:
    """Issue 29's speed targets, met or not, one line each."""
    decode = result["pooled_decode"]
    worst = max(decode, key=lambda r: r["pooled_vs_dense"])
    lines = [f"pooled decode within {POOLED_DECODE_TARGET - 1:.0%} of dense at every batch size: "
             f"{'met' if worst['pooled_vs_dense'] <= POOLED_DECODE_TARGET else 'missed'} "
             f"(worst B={worst['batch_size']}: {worst['pooled_vs_dense']:.3f})"]
    mtp = result["mtp"]
    against_fi = [r for r in mtp if "fi_vs_ours" in r]
    if against_fi:
        slower = [f"B={r['batch_size']} T={r['seq_len']}" for r in against_fi if r["fi_vs_ours"] < 1]
        lines.append(f"MTP no slower than FlashInfer's: {'met' if not slower else 'missed at ' + ', '.join(slower)}")
    else:
        lines.append("MTP no slower than FlashInfer's: not measured (FlashInfer did not run)")
    slower = [f"B={r['batch_size']} T={r['seq_len']}" for r in mtp if r["ours_vs_decode_steps"] >= 1]
    lines.append(f"MTP below T calls of pooled decode: {'met' if not slower else 'missed at ' + ', '.join(slower)}")
    prefill = result.get("pooled_prefill")
    if prefill:
        worst = max(prefill, key=lambda r: r["pooled_vs_dense"])
        lines.append(f"pooled prefill within {POOLED_DECODE_TARGET - 1:.0%} of dense on every call (decode's target): "
                     f"{'met' if worst['pooled_vs_dense'] <= POOLED_DECODE_TARGET else 'missed'} "
                     f"(worst {worst['call']}: {worst['pooled_vs_dense']:.3f})")
    return lines

"""Prefill workloads without a download: a seeded, deterministic plan of sequence lengths
mirroring the contest's prefill mix, and the tensors that make them model-like.

The contest's 100 prefill workloads are captured model data: total_seq_len 6…8192 (median
≈ 140, 16 at 8192), num_seqs 1…57 (33 single-sequence, 48 with 2–4, the rest more),
sequences up to ≈ 5600 tokens, a few batches holding an empty sequence. `contest_mix_plan`
draws lengths with those statistics. Each workload stores only k (L2-normalized per token
and head, as the model's keys are: random N(0, 1) keys make the recurrence blow up) and
cu_seqlens; q, v, state, A_log, a, dt_bias and b are flashinfer-bench `random` inputs and
scale is 1/sqrt(128).

The full mix (~160 MB of keys) is written once into the cache folder (gdn_bench.trace_cache);
EMBEDDED_SUBSET, a few short workloads, is part of the committed trace set gdn_bench/data.
"""

import math
import random
import statistics
import uuid
from collections.abc import Sequence
from pathlib import Path

import torch
from flashinfer_bench import Definition, RandomInput, SafetensorsInput, Trace, TraceSet, Workload
from flashinfer_bench.data import ScalarInput
from safetensors.torch import save_file
from tqdm import tqdm

from gdn_bench import trace_cache
from gdn_bench.shapes import DEFAULT_SCALE, HEAD_SIZE, NUM_Q_HEADS, NUM_V_HEADS
from gdn_bench.signature import tensor_inputs

# Bump when the plan or the tensors change: the cached trace set is then written anew.
GENERATOR_VERSION = 1
SEED = 20260302
CACHE_FOLDER = "prefill-contest-mix"
MAX_TOKENS = 8192  # the largest total_seq_len, 16 workloads of the mix
MAX_SEQ_LEN = 5600  # the longest single sequence
# num_seqs classes of the mix: 33 single sequences, 48 of 2–4, 19 of 5–57.
SINGLE, SMALL_BATCHES, LARGE_BATCHES = 33, 48, 19
MAX_NUM_SEQS = 57
# Of the 16 workloads at MAX_TOKENS: this many hold 2–4 sequences, the rest 5–57. One
# single sequence has MAX_SEQ_LEN tokens.
FULL_SMALL, FULL_LARGE = 6, 10
# Lengths of the other workloads follow a log-normal (quantiles, not draws): median
# exp(LOG_MEDIAN) ≈ 99 among them, which puts the whole mix's median near 140.
LOG_MEDIAN, LOG_SIGMA, MIN_TOKENS = 4.6, 1.5, 6
EMPTY_SEQUENCE_WORKLOADS = 3
# The committed CPU subset: sequence lengths per workload (0 is an empty sequence). Its job is
# to show the submission runs and is correct on each path prefill.py chooses from T tokens and
# N sequences, at the smallest size that reaches the path, so that Triton's interpreter gets
# through it in seconds: the token walk for one sequence (T = 5) and for several, one of them
# empty and one a single token (T = 8); the walk beyond 64 tokens, taken because the sequences
# hold at most 4 tokens on average (T = 68, 17 sequences); the chunked path (blocks of 64
# tokens) for one sequence, its last block partial (T = 65), and for several, one of them empty
# and one across a block's edge (T = 70). Spans (2048 tokens per sequence on average, and
# more) are too long for the interpreter: the test suite forces them onto small calls.
EMBEDDED_SUBSET = ((5,), (3, 0, 1, 4), (65,), (4,) * 17, (30, 0, 40))
STORED = ("k", "cu_seqlens")  # the inputs a workload's blob holds; flashinfer-bench draws the other tensors


def _split(total: int, count: int, rng: random.Random) -> list[int]:
    """`count` positive lengths summing to `total`, uneven, none above MAX_SEQ_LEN."""
    weights = [rng.uniform(0.3, 1.7) for _ in range(count)]
    lengths = [max(1, int(total * w / sum(weights))) for w in weights]
    lengths[lengths.index(max(lengths))] += total - sum(lengths)
    while max(lengths) > MAX_SEQ_LEN:
        longest = lengths.index(max(lengths))
        shortest = lengths.index(min(lengths))
        moved = min(lengths[longest] - MAX_SEQ_LEN, MAX_SEQ_LEN - lengths[shortest])
        lengths[longest] -= moved
        lengths[shortest] += moved
    return lengths


def contest_mix_plan(seed: int = SEED) -> list[tuple[int, ...]]:
    """Sequence lengths of each workload of the mix (100), ordered by (total, num_seqs)."""
    rng = random.Random(seed)
    small = [2 + i % 3 for i in range(SMALL_BATCHES)]
    large = [round(5 * (MAX_NUM_SEQS / 5) ** (i / (LARGE_BATCHES - 1))) for i in range(LARGE_BATCHES)]
    fixed = [(MAX_TOKENS, n) for n in small[:FULL_SMALL] + large[-FULL_LARGE:]] + [(MAX_SEQ_LEN, 1)]
    others = SINGLE + SMALL_BATCHES + LARGE_BATCHES - len(fixed)
    log_lengths = statistics.NormalDist(LOG_MEDIAN, LOG_SIGMA)
    totals = sorted(min(MAX_SEQ_LEN, max(MIN_TOKENS, round(math.exp(log_lengths.inv_cdf((i + 0.5) / others)))))
                    for i in range(others))
    rest_large = large[:-FULL_LARGE]
    picked = sorted(rng.sample(range(others // 2, others), len(rest_large)))  # many sequences: long batches
    planned = fixed + [(totals[i], n) for i, n in zip(picked, rest_large)]
    remaining = [t for i, t in enumerate(totals) if i not in picked]
    rng.shuffle(remaining)
    planned += list(zip(remaining, [1] * (SINGLE - 1) + small[FULL_SMALL:]))
    plan = [_split(total, n, rng) for total, n in planned]
    candidates = [i for i, lengths in enumerate(plan) if len(lengths) >= 3 and sum(lengths) < MAX_TOKENS]
    for i in rng.sample(candidates, EMPTY_SEQUENCE_WORKLOADS):
        empty = rng.randrange(len(plan[i]) - 1)
        plan[i][empty + 1] += plan[i][empty]
        plan[i][empty] = 0
    return sorted((tuple(lengths) for lengths in plan), key=lambda lengths: (sum(lengths), len(lengths)))


def unit_keys(total: int, gen: torch.Generator, device: str = "cpu") -> torch.Tensor:
    """[total, 4, 128] bf16 keys, each (token, head) row L2-normalized in float32."""
    k = torch.randn(total, NUM_Q_HEADS, HEAD_SIZE, generator=gen, device=device)
    return (k / k.norm(dim=-1, keepdim=True)).bfloat16()


def cu_seqlens_of(lengths: Sequence[int], device: str = "cpu") -> torch.Tensor:
    """[len(lengths) + 1] int64 offsets: 0, l0, l0 + l1, ..."""
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int64, device=device)


# Inputs under which bfloat16 operands fail the contest's check (docs/perf.md, issue 26), and
# keys off the unit sphere (the definition does not promise unit keys): see stressed().
STRESS = ("weak_decay", "repeated_keys_saturated", "keys_not_unit")


def stressed(inputs: dict, kind: str, gen: torch.Generator) -> dict:
    """`inputs` of one call (unit keys) with every sequence under the stress regime `kind`:
    weak_decay: A_log = -5 for every head (a decay of ~0.99 per token at typical gates);
    repeated_keys_saturated: every token's key one of two unit keys per head, b in 20..60
    (beta ~ 1), A_log = -4 (the triangular solve's worst case: A's rows nearly repeat);
    keys_not_unit: each key scaled to a norm uniform in 0.25..1.4 (beta |k|^2 < 2 still: the
    recurrence still contracts). `gen` draws on the inputs' device."""
    if kind not in STRESS:
        raise ValueError(f"stress kind {kind!r}: expected one of {', '.join(STRESS)}")
    k, device = inputs["k"], inputs["k"].device
    out = dict(inputs)
    if kind == "keys_not_unit":
        norms = 0.25 + 1.15 * torch.rand(*k.shape[:-1], 1, generator=gen, device=device)
        out["k"] = (k.float() * norms).bfloat16()
        return out
    out["A_log"] = torch.full_like(inputs["A_log"], -5.0 if kind == "weak_decay" else -4.0)
    if kind == "repeated_keys_saturated":
        pair = unit_keys(2, gen, str(device))
        out["k"] = pair[torch.randint(0, 2, (k.shape[0],), generator=gen, device=device)]
        b = inputs["b"]
        out["b"] = (20.0 + 40.0 * torch.rand(b.shape, generator=gen, device=device)).to(b.dtype)
    return out


def model_like_inputs(lengths: Sequence[int], gen: torch.Generator, device: str, with_state: bool = True) -> dict:
    """All inputs of one prefill call, as the harness feeds the mix: k unit rows, cu_seqlens
    from `lengths`, everything else N(0, 1) as flashinfer-bench draws it, scale 1/sqrt(128)."""
    total, num_seqs = sum(lengths), len(lengths)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen, device=device).to(dtype)

    bf16 = torch.bfloat16
    return dict(
        q=randn(total, NUM_Q_HEADS, HEAD_SIZE, dtype=bf16), k=unit_keys(total, gen, device),
        v=randn(total, NUM_V_HEADS, HEAD_SIZE, dtype=bf16),
        state=randn(num_seqs, NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE) if with_state else None,
        A_log=randn(NUM_V_HEADS), a=randn(total, NUM_V_HEADS, dtype=bf16), dt_bias=randn(NUM_V_HEADS),
        b=randn(total, NUM_V_HEADS, dtype=bf16), cu_seqlens=cu_seqlens_of(lengths, device),
        scale=DEFAULT_SCALE,
    )


def plan_workloads(definition: Definition, plan: Sequence[Sequence[int]], kind: str) -> list[Workload]:
    """One Workload per entry of `plan` (its sequence lengths): the STORED inputs from a
    safetensors blob named by the workload's uuid, the other tensors random, scale 1/sqrt(128)."""
    name = definition.name
    workloads = []
    for index, lengths in enumerate(plan):
        wl_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"gdn-bench/{name}/{kind}/{index}"))
        blob = f"blob/workloads/gdn/{name}/{name}_{wl_uuid}.safetensors"
        inputs = {n: RandomInput() for n in tensor_inputs(definition) if n not in STORED}
        inputs.update({key: SafetensorsInput(path=blob, tensor_key=key) for key in STORED})
        axes = {"total_seq_len": sum(lengths), "num_seqs": len(lengths), "len_cu_seqlens": len(lengths) + 1}
        workloads.append(Workload(axes=axes, uuid=wl_uuid,
                                  inputs={**inputs, "scale": ScalarInput(value=DEFAULT_SCALE)}))
    return workloads


def write_workloads(trace_set: TraceSet, name: str, plan: Sequence[Sequence[int]], seed: int, kind: str,
                    progress: bool = False) -> None:
    """Add plan_workloads to `trace_set` for its definition `name` and write their blobs (keys
    drawn from `seed` in plan order)."""
    gen = torch.Generator().manual_seed(seed)
    workloads = plan_workloads(trace_set.definitions[name], plan, kind)
    for lengths, workload in zip(tqdm(plan, desc=f"writing {kind} workloads", unit="workload", disable=not progress),
                                 workloads):
        path = Path(trace_set.root) / workload.inputs["k"].path
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(dict(zip(STORED, (unit_keys(sum(lengths), gen), cu_seqlens_of(lengths)))), path)
    trace_set.add_workload_traces([Trace(definition=name, workload=w) for w in workloads])


def write_embedded_subset(trace_set: TraceSet, name: str, seed: int) -> None:
    """The committed CPU subset (EMBEDDED_SUBSET) into the embedded trace set."""
    write_workloads(trace_set, name, EMBEDDED_SUBSET, seed, "subset")


def contest_mix_workloads(definition: Definition, seed: int = SEED) -> list[Workload]:
    """The generated mix's workloads (uuids, axes, inputs) without writing anything."""
    return plan_workloads(definition, contest_mix_plan(seed), f"mix-v{GENERATOR_VERSION}")


def contest_mix_root(definition: Definition, seed: int = SEED) -> Path:
    """The generated contest-like mix as a trace set in the cache folder (written on first
    use, and again when GENERATOR_VERSION or the seed changes); returns its root."""

    def write(root: Path) -> None:
        trace_set = trace_cache.new_trace_set(root, definition)
        write_workloads(trace_set, definition.name, contest_mix_plan(seed), seed, f"mix-v{GENERATOR_VERSION}",
                        progress=True)

    return trace_cache.materialized(CACHE_FOLDER, {"version": GENERATOR_VERSION, "seed": seed}, write)

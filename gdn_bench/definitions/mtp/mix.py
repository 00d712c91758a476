"""MTP workloads without a download: a seeded, deterministic plan shaped like speculative-decoding
verification in a serving engine, and the tensors that make them usable.

Each workload is one verify call: B sequences with T draft tokens each, their states in a pool
of pool_size slots, more than B (B + 1 to 2B + 8: the engine keeps slots of requests that are not
in this batch), each row's slot drawn from the pool without repeats, in random order. B takes
decode's contest batch sizes (1 to 64), each with T = 2, 4 and 8, and once with another T of 3
to 7. Only k (L2-normalized per token and head, as the model's keys are: with random N(0, 1)
keys each token scales the state by up to |k|^2 ~ 128) and initial_state_indices are stored;
q, v, the pool, the gates and the buffer are flashinfer-bench `random` inputs, and scale is
1/sqrt(128).

The whole mix is written once into the cache folder (gdn_bench.trace_cache); EMBEDDED_SUBSET,
a few small workloads, is part of the committed trace set gdn_bench/data (the CPU pass).
"""

import random
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import torch
from flashinfer_bench import Definition, RandomInput, SafetensorsInput, Trace, TraceSet, Workload
from flashinfer_bench.data import ScalarInput
from safetensors.torch import save_file

from gdn_bench import trace_cache
from gdn_bench.definitions.prefill.mix import unit_keys
from gdn_bench.shapes import DEFAULT_SCALE, NUM_Q_HEADS
from gdn_bench.signature import tensor_inputs

# Bump when the plan or the tensors change: the cached trace set is then written anew.
GENERATOR_VERSION = 1
SEED = 20260304
CACHE_FOLDER = "mtp-serving-mix"
BATCH_SIZES = (1, 4, 8, 16, 32, 48, 64)  # decode's contest batch sizes
DRAFT_LENGTHS = (2, 4, 8)  # every batch size at each of these
OTHER_DRAFT_LENGTHS = (3, 5, 7, 6, 3, 5, 6)  # and once at this one, in BATCH_SIZES' order
STORED = ("k", "initial_state_indices")  # the inputs a workload's blob holds


class Verify(NamedTuple):
    """One workload: batch size, draft tokens per row, pool slots."""

    batch_size: int
    seq_len: int
    pool_size: int


# The committed CPU subset (small: Triton's interpreter runs it).
EMBEDDED_SUBSET = (Verify(1, 2, 3), Verify(2, 4, 5), Verify(3, 3, 8))


def serving_mix_plan(seed: int = SEED) -> list[Verify]:
    """The generated mix (28 workloads), ordered by (batch size, draft tokens)."""
    rng = random.Random(seed)
    shapes = [(batch, steps) for batch, other in zip(BATCH_SIZES, OTHER_DRAFT_LENGTHS)
              for steps in sorted((*DRAFT_LENGTHS, other))]
    return [Verify(batch, steps, batch + rng.randint(1, batch + 8)) for batch, steps in shapes]


def slot_indices(batch: int, pool_size: int, gen: torch.Generator) -> torch.Tensor:
    """[batch] int32: distinct pool slots in random order."""
    return torch.randperm(pool_size, generator=gen)[:batch].to(torch.int32)


def stored_tensors(verify: Verify, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """The STORED inputs of one workload: unit-norm keys [B, T, 4, 128] bf16 and the slots."""
    keys = unit_keys(verify.batch_size * verify.seq_len, gen)
    return {"k": keys.reshape(verify.batch_size, verify.seq_len, NUM_Q_HEADS, -1),
            "initial_state_indices": slot_indices(verify.batch_size, verify.pool_size, gen)}


def plan_workloads(definition: Definition, plan: Sequence[Verify], kind: str) -> list[Workload]:
    """One Workload per entry of `plan`: the STORED inputs from a safetensors blob named by the
    workload's uuid, the other tensors random, scale 1/sqrt(128)."""
    name = definition.name
    workloads = []
    for index, verify in enumerate(plan):
        wl_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"gdn-bench/{name}/{kind}/{index}"))
        blob = f"blob/workloads/gdn/{name}/{name}_{wl_uuid}.safetensors"
        inputs = {n: RandomInput() for n in tensor_inputs(definition) if n not in STORED}
        inputs.update({key: SafetensorsInput(path=blob, tensor_key=key) for key in STORED})
        workloads.append(Workload(axes=verify._asdict(), uuid=wl_uuid,
                                  inputs={**inputs, "scale": ScalarInput(value=DEFAULT_SCALE)}))
    return workloads


def write_workloads(trace_set: TraceSet, name: str, plan: Sequence[Verify], seed: int, kind: str) -> None:
    """Add plan_workloads to `trace_set` for its definition `name` and write their blobs (drawn
    from `seed` in plan order)."""
    gen = torch.Generator().manual_seed(seed)
    workloads = plan_workloads(trace_set.definitions[name], plan, kind)
    for verify, workload in zip(plan, workloads):
        path = Path(trace_set.root) / workload.inputs["k"].path
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(stored_tensors(verify, gen), path)
    trace_set.add_workload_traces([Trace(definition=name, workload=w) for w in workloads])


def write_embedded_subset(trace_set: TraceSet, name: str, seed: int) -> None:
    """The committed CPU subset (EMBEDDED_SUBSET) into the embedded trace set."""
    write_workloads(trace_set, name, EMBEDDED_SUBSET, seed, "subset")


def serving_mix_workloads(definition: Definition, seed: int = SEED) -> list[Workload]:
    """The generated mix's workloads (uuids, axes, inputs) without writing anything."""
    return plan_workloads(definition, serving_mix_plan(seed), f"mix-v{GENERATOR_VERSION}")


def serving_mix_root(definition: Definition, seed: int = SEED) -> Path:
    """The generated mix as a trace set in the cache folder (written on first use, and again
    when GENERATOR_VERSION or the seed changes); returns its root."""

    def write(root: Path) -> None:
        trace_set = trace_cache.new_trace_set(root, definition)
        write_workloads(trace_set, definition.name, serving_mix_plan(seed), seed, f"mix-v{GENERATOR_VERSION}")

    return trace_cache.materialized(CACHE_FOLDER, {"version": GENERATOR_VERSION, "seed": seed}, write)

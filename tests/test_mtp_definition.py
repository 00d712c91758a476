"""The MTP definition in the kit (gdn_bench/definitions/mtp): the declaration is the official
one; the kit's reference computes what the official reference computes (outputs, the buffer
of states, the pool's copy) and what the plain loop of pt-reference does; the serving mix's
plan and blobs; the registry and run_local's flags; packing for the evaluator; and the
submission through flashinfer-bench's builder on the embedded subset (CPU)."""

import math
import os
from collections import Counter

import pytest
import torch

from gdn_bench import cli
from gdn_bench.algos import load_module
from gdn_bench.checking import workload_inputs
from gdn_bench.dataset import load_trace_set
from gdn_bench.definitions import DEFINITIONS, TRACK, chosen, resolve
from gdn_bench.definitions.mtp import mix
from gdn_bench.definitions.mtp.definition import (MTP, NAME, REFERENCE_PATH, SUBMISSION, build_definition,
                                                  official_definition)
from gdn_bench.definitions.mtp.reference import run as kit_reference
from gdn_bench.packing import read_config
from gdn_bench.paths import CONFIG_NAME
from gdn_bench.runner import RunSettings, run, select_workloads
from gdn_bench.trace_cache import new_trace_set
from helpers import ROOT, SEED

HQ, HV, D = 4, 8, 128


def test_the_declaration_is_the_official_one():
    ours, official = build_definition(), official_definition()
    assert ours.model_dump(exclude={"reference"}) == official.model_dump(exclude={"reference"})
    assert ours.name == NAME and ours.reference == REFERENCE_PATH.read_text(encoding="utf-8")
    assert "disable_state_update=True" in official.reference  # the pool is not updated


def _inputs(batch, steps, pool_size, indices, seed):
    """Random inputs (unit-norm keys), the indices as given, a NaN-filled buffer."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    k = randn(batch, steps, HQ, D)
    return dict(q=randn(batch, steps, HQ, D).bfloat16(), k=(k / k.norm(dim=-1, keepdim=True)).bfloat16(),
                v=randn(batch, steps, HV, D).bfloat16(), initial_state=randn(pool_size, HV, D, D),
                initial_state_indices=torch.tensor(indices, dtype=torch.int32), A_log=randn(HV),
                a=randn(batch, steps, HV).bfloat16(), dt_bias=randn(HV), b=randn(batch, steps, HV).bfloat16(),
                scale=0.0, intermediate_states_buffer=torch.full((pool_size, steps, HV, D, D), float("nan")))


def _call(fn, inputs):
    given = {n: (t.clone() if isinstance(t, torch.Tensor) else t) for n, t in inputs.items()}
    output, final_state = fn(**given)
    return output, final_state, given["intermediate_states_buffer"]


@pytest.mark.parametrize("other", ("official", "pt-reference"))
def test_the_kit_reference_computes_what_the_official_one_does(other):
    """Against the official reference's own text (a loop over rows, tokens and heads) and
    pt-reference: a negative index (the pool's last slot) and a slot two rows share (its
    buffer keeps the last row's states); every other buffer slot untouched."""
    inputs = _inputs(4, 3, 6, [2, -1, 2, 4], SEED)
    if other == "official":
        namespace = {}
        exec(official_definition().reference, namespace)  # noqa: S102 - the contest's own reference text
        fn = namespace["run"]
    else:
        fn = load_module(ROOT / "baselines" / "mtp" / "pt_reference" / "main.py", "mtp_pt_reference").run
    ours, theirs = _call(kit_reference, inputs), _call(fn, inputs)
    torch.testing.assert_close(ours[0].float(), theirs[0].float(), rtol=2.0**-7, atol=1e-5)
    assert torch.equal(ours[1], inputs["initial_state"]) and torch.equal(theirs[1], inputs["initial_state"])
    written = [2, 4, 5]
    assert torch.equal(ours[2].isnan(), theirs[2].isnan()) and not ours[2][written].isnan().any()
    assert ours[2][[0, 1, 3]].isnan().all()
    rel = ((ours[2][written] - theirs[2][written]).norm() / theirs[2][written].norm()).item()
    assert rel < 1e-5, rel


def test_an_index_outside_the_pool_is_an_error():
    inputs = _inputs(2, 2, 3, [0, 3], SEED)
    with pytest.raises(ValueError, match=r"initial_state_indices: expected values in \[-3, 3\) \(pool_size 3\), "
                                         r"got \[0, 3\]"):
        kit_reference(**inputs)


def test_the_serving_mix_plan():
    plan = mix.serving_mix_plan()
    assert len(plan) == 28 and plan == sorted(plan)
    assert Counter(v.batch_size for v in plan) == {batch: 4 for batch in mix.BATCH_SIZES}
    assert {v.seq_len for v in plan} == set(range(2, 9))
    assert {(b, t) for b, t, _ in plan} >= {(b, t) for b in mix.BATCH_SIZES for t in mix.DRAFT_LENGTHS}
    assert all(v.batch_size < v.pool_size <= 2 * v.batch_size + 8 for v in plan)
    assert mix.serving_mix_plan() == plan and mix.serving_mix_plan(1) != mix.serving_mix_plan(2)
    workloads = mix.serving_mix_workloads(build_definition())
    assert [tuple(w.axes.values()) for w in workloads] == [tuple(v) for v in plan]
    assert len({w.uuid for w in workloads}) == 28
    assert all(w.inputs[n].type == "safetensors" for w in workloads for n in mix.STORED)
    assert all(w.inputs["q"].type == "random" and w.inputs["scale"].value == 1 / math.sqrt(D) for w in workloads)


def test_written_workloads_hold_unit_keys_and_distinct_slots(tmp_path):
    plan = [mix.Verify(2, 3, 5), mix.Verify(4, 2, 9)]
    trace_set = new_trace_set(tmp_path, build_definition())
    mix.write_workloads(trace_set, NAME, plan, SEED, "tiny")
    trace_set = load_trace_set(tmp_path, NAME)
    for verify, trace in zip(plan, trace_set.workloads[NAME]):
        args = dict(zip(build_definition().inputs, workload_inputs(trace_set.definitions[NAME], trace.workload,
                                                                   trace_set.root, "cpu", SEED)))
        assert args["k"].shape == (verify.batch_size, verify.seq_len, HQ, D)
        assert (args["k"].float().norm(dim=-1) - 1).abs().max() < 1e-2
        slots = args["initial_state_indices"]
        assert slots.dtype == torch.int32 and len(set(slots.tolist())) == verify.batch_size
        assert 0 <= slots.min() and slots.max() < verify.pool_size
        assert args["intermediate_states_buffer"].shape == (verify.pool_size, verify.seq_len, HV, D, D)


def test_the_embedded_subset_is_the_cpu_pass():
    workloads = [t.workload for t in load_trace_set(None, NAME).workloads[NAME]]
    assert [tuple(w.axes.values()) for w in workloads] == [tuple(v) for v in mix.EMBEDDED_SUBSET]
    assert select_workloads(workloads, RunSettings(algos=[], definition="mtp"), cpu=True) == workloads


def _settings(argv):
    return cli.settings_from_args(cli.build_parser(ROOT).parse_args(argv))


def test_registry_and_run_local_flags():
    assert resolve("mtp") is MTP is resolve(NAME) is DEFINITIONS["mtp"]
    assert chosen("both") == list(TRACK) and MTP not in TRACK
    [settings] = _settings(["--definition", "mtp", "--batch-sizes", "1,64"])
    assert settings.spec is MTP and settings.algos == [SUBMISSION] and settings.sizes == [1, 64]
    with pytest.raises(ValueError, match="^--seq-lens applies to --definition prefill; mtp selects by --batch-sizes$"):
        _settings(["--definition", "mtp", "--seq-lens", "6"])


def test_packs_as_the_evaluator_reads_the_tag():
    config = read_config(ROOT / CONFIG_NAME, definition=NAME)
    assert (config.definition, config.entry_point, config.destination_passing_style) == (NAME, "mtp.py::kernel", True)
    solution = MTP.algos_by_name[SUBMISSION].solution()
    assert solution.definition == NAME and {s.path for s in solution.sources} >= {"mtp.py", "kernel.py"}


def test_the_submission_passes_on_the_smallest_embedded_workload(tmp_path, monkeypatch):
    """Through flashinfer-bench's builder, as run_local's CPU pass checks it (a GPU hidden)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "0"))  # restored after the CPU path sets it
    settings = RunSettings(algos=[SUBMISSION, "triton-no-copy"], definition="mtp", sizes=[1], out=tmp_path)
    results = run(settings)
    assert sorted((row.algo, row.status) for row in results.rows) == [("triton-mtp", "PASSED"),
                                                                      ("triton-no-copy", "PASSED")]
    assert all(row.margins["output"] <= 1 and row.margins["final_state"] == 0 for row in results.rows)

"""The prefill trace sets: the generated mix's plan (the contest's statistics, deterministic),
its cache (written once, atomically, again on a version change), and the committed subset."""

import statistics

import pytest
import torch
from safetensors.torch import load_file

from gdn_bench import trace_cache
from gdn_bench.algos import load_solution_file
from gdn_bench.checking import workload_inputs
from gdn_bench.dataset import load_trace_set
from gdn_bench.definitions.prefill import mix as prefill_mix
from gdn_bench.definitions.prefill.definition import NAME, PREFILL, build_definition
from gdn_bench.paths import cache_dir
from helpers import SEED

TINY_PLAN = [(3,), (2, 0, 4)]


def test_plan_mirrors_the_contest_mix():
    plan = prefill_mix.contest_mix_plan()
    totals, counts = [sum(p) for p in plan], [len(p) for p in plan]
    assert len(plan) == 100 and min(totals) == 6 and max(totals) == 8192 and totals.count(8192) == 16
    assert 120 <= statistics.median(totals) <= 160
    assert min(counts) == 1 and max(counts) == 57
    assert counts.count(1) == 33 and sum(2 <= n <= 4 for n in counts) == 48
    assert max(max(p) for p in plan) == 5600
    assert sum(0 in p for p in plan) == 3
    assert all(min(p) >= 0 for p in plan) and totals == sorted(totals)


def test_plan_is_deterministic_and_seeded():
    assert prefill_mix.contest_mix_plan() == prefill_mix.contest_mix_plan()
    assert prefill_mix.contest_mix_plan(1) != prefill_mix.contest_mix_plan(2)


def test_planned_workloads_match_the_plan():
    workloads = prefill_mix.contest_mix_workloads(build_definition())
    plan = prefill_mix.contest_mix_plan()
    assert [w.axes["total_seq_len"] for w in workloads] == [sum(p) for p in plan]
    assert all(w.axes["len_cu_seqlens"] == w.axes["num_seqs"] + 1 for w in workloads)
    assert len({w.uuid for w in workloads}) == 100
    assert all(w.inputs["k"].type == "safetensors" and w.inputs["q"].type == "random" for w in workloads)


def _write_tiny(root, seed=5):
    trace_set = trace_cache.new_trace_set(root, build_definition())
    prefill_mix.write_workloads(trace_set, NAME, TINY_PLAN, seed, "tiny")
    return trace_set


def test_written_workloads_are_deterministic_model_like_and_consistent(tmp_path):
    _write_tiny(tmp_path / "a")
    _write_tiny(tmp_path / "b")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)
    trace_set = load_trace_set(tmp_path / "a", NAME)
    definition = trace_set.definitions[NAME]
    for trace, lengths in zip(trace_set.workloads[NAME], TINY_PLAN):
        inputs = dict(zip(definition.inputs, workload_inputs(definition, trace.workload, trace_set.root, "cpu", SEED)))
        assert inputs["cu_seqlens"].tolist() == [0, *torch.tensor(lengths).cumsum(0).tolist()]
        assert inputs["k"].shape == (sum(lengths), 4, 128) and inputs["q"].shape == (sum(lengths), 4, 128)
        assert (inputs["k"].float().norm(dim=-1) - 1).abs().max() < 1e-2
        assert inputs["state"].shape == (len(lengths), 8, 128, 128) and inputs["scale"] == pytest.approx(128**-0.5)


@pytest.fixture
def tiny_cache(tmp_path, monkeypatch):
    """The cache in tmp_path/cache, the mix reduced to TINY_PLAN, and a count of writes."""
    monkeypatch.setenv("GDN_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(prefill_mix, "contest_mix_plan", lambda seed: TINY_PLAN)
    writes = []
    real = prefill_mix.write_workloads
    monkeypatch.setattr(prefill_mix, "write_workloads", lambda *a, **k: writes.append(a[-1]) or real(*a, **k))
    return writes


def test_cache_is_written_once_and_reused(tiny_cache):
    root = prefill_mix.contest_mix_root(build_definition())
    assert root == cache_dir() / prefill_mix.CACHE_FOLDER and root.is_relative_to(cache_dir())
    assert len(load_trace_set(root, NAME).workloads[NAME]) == len(TINY_PLAN)
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    assert prefill_mix.contest_mix_root(build_definition()) == root
    assert tiny_cache == ["mix-v1"] and {p: p.stat().st_mtime_ns for p in root.rglob("*")} == before
    assert [p.name for p in cache_dir().iterdir()] == [prefill_mix.CACHE_FOLDER]  # no temporary folder left


def test_cache_is_written_again_when_the_generator_changes(tiny_cache, monkeypatch):
    root = prefill_mix.contest_mix_root(build_definition())
    old = {t.workload.uuid for t in load_trace_set(root, NAME).workloads[NAME]}
    monkeypatch.setattr(prefill_mix, "GENERATOR_VERSION", 99)
    assert prefill_mix.contest_mix_root(build_definition()) == root
    new = {t.workload.uuid for t in load_trace_set(root, NAME).workloads[NAME]}
    assert tiny_cache == ["mix-v1", "mix-v99"] and not old & new
    assert len(list((root / "blob").rglob("*.safetensors"))) == len(TINY_PLAN)  # the old blobs are gone
    assert [p.name for p in cache_dir().iterdir()] == [prefill_mix.CACHE_FOLDER]


def test_interrupted_generation_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("GDN_BENCH_CACHE", str(tmp_path))

    def broken(root):
        (root / "partial").write_text("x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        trace_cache.materialized("mix", {"version": 1}, broken)
    assert list(tmp_path.iterdir()) == []


def test_committed_subset():
    trace_set = load_trace_set(None, NAME)
    workloads = [t.workload for t in trace_set.workloads[NAME]]
    lengths = [load_file(trace_set.root / w.inputs["cu_seqlens"].path)["cu_seqlens"].diff().tolist() for w in workloads]
    assert lengths == [list(p) for p in prefill_mix.EMBEDDED_SUBSET]
    assert all(w.axes["total_seq_len"] <= 128 for w in workloads)  # all of it in the CPU pass


def test_committed_subset_takes_every_path_of_the_submission_but_spans():
    """What the README says the CPU pass covers: each path prefill.py chooses from T and N
    (the walk by either of its rules, the chunked path for one sequence and for several, with
    a partial last block and a sequence across a block's edge), an empty sequence on each
    path, and no spans (too long for Triton's interpreter)."""
    sub = load_solution_file(PREFILL.submission_entry(), "prefill_paths")
    paths = set()
    for lengths in prefill_mix.EMBEDDED_SUBSET:
        total, count = sum(lengths), len(lengths)
        assert sub._span_plan(total, count)[1] == 1, lengths
        if not sub._walks(total, count):
            ends = torch.tensor(lengths).cumsum(0)
            assert total % sub.CHUNK and any(e // sub.CHUNK > (e - n) // sub.CHUNK for e, n in zip(ends, lengths))
            path = "chunked"
        else:
            path = "walk" if total <= sub.WALK_MAX_TOKENS else "walk, by the mean length"
        paths.add((path, count > 1, 0 in lengths))
    assert paths == {("walk", False, False), ("walk", True, True), ("walk, by the mean length", True, False),
                     ("chunked", False, False), ("chunked", True, True)}


def test_cache_folder_defaults_to_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("GDN_BENCH_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "gdn-bench"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == tmp_path / ".cache" / "gdn-bench"


def test_stressed_inputs_follow_each_regime():
    """stressed() changes only what its regime says, on fresh model-like inputs."""
    STRESS, model_like_inputs, stressed = prefill_mix.STRESS, prefill_mix.model_like_inputs, prefill_mix.stressed
    base = model_like_inputs([40, 24], torch.Generator().manual_seed(7), "cpu")
    weak = stressed(base, "weak_decay", torch.Generator().manual_seed(1))
    assert (weak["A_log"] == -5.0).all() and torch.equal(weak["k"], base["k"]) and torch.equal(weak["b"], base["b"])
    rep = stressed(base, "repeated_keys_saturated", torch.Generator().manual_seed(1))
    assert (rep["A_log"] == -4.0).all() and rep["b"].float().min() >= 20 and rep["b"].float().max() <= 60
    assert torch.unique(rep["k"].view(64, -1), dim=0).shape[0] == 2  # two keys, each a row of 4 heads
    norms = stressed(base, "keys_not_unit", torch.Generator().manual_seed(1))["k"].float().norm(dim=-1)
    assert norms.min() >= 0.25 - 1e-2 and norms.max() <= 1.4 + 1e-2 and norms.std() > 0.1
    assert all(torch.equal(stressed(base, kind, torch.Generator().manual_seed(1))["v"], base["v"]) for kind in STRESS)
    with pytest.raises(ValueError, match="stress kind 'hot': expected one of weak_decay"):
        stressed(base, "hot", torch.Generator())

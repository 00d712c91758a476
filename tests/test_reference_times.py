"""The cache of the definition reference's times (gdn_bench.reference_times), on CPU with a
stand-in for the GPU timing: what a key depends on (so that a changed definition, trace set or
timer is measured anew, and a copied trace set is not), the file (round trip, concurrent
writers, bad files, entries from before issue 27's timer), and collect's modes: cached,
measure, skip.
Also how many calls a slow reference is profiled (gdn_bench.timing.slow_calls) and the
profiler's records as the timing reads them (on CPU events, the same records as torch's)."""

import hashlib
import json
import shutil

import pytest
import torch

from gdn_bench.dataset import load_trace_set
from gdn_bench.definitions import DEFINITIONS
from gdn_bench.reference_times import (REFERENCE_FILE, ReferenceTimes, as_cached, blob_files, collect, default_file,
                                       reference_key, to_measure)
from gdn_bench import timing
from gdn_bench.timing import MIN_SLOW_CALLS, TimingError, _device_kernels, slow_calls

GPU = "NVIDIA Test GPU"
METHOD = "evaluator CUPTI span, warmup 1, iterations 5, trials 3"
TIMING = {"method": METHOD, "timer": "the evaluator's", "evaluators": True, "versions": {"torch": "2.13"}}


@pytest.fixture(scope="module")
def decode():
    """The embedded decode definition, its root, a random workload and a model-like one (with a blob)."""
    trace_set = load_trace_set()
    name = DEFINITIONS["decode"].name
    workloads = [t.workload for t in trace_set.workloads[name]]
    blobbed = next(w for w in workloads if blob_files(w, trace_set.root))
    return trace_set.definitions[name], trace_set.root, workloads[0], blobbed


def test_a_key_depends_on_the_gpu_the_timer_the_definition_and_the_workload(decode):
    definition, root, random, blobbed = decode
    key = reference_key(GPU, METHOD, definition, random, root)
    assert key == reference_key(GPU, METHOD, definition, random, root)  # the same inputs, the same key
    changed_reference = definition.model_copy(update={"reference": definition.reference + "\n# changed\n"})
    changed_axes = random.model_copy(update={"axes": {**random.axes, "batch_size": random.axes["batch_size"] + 1}})
    others = {reference_key("NVIDIA Other GPU", METHOD, definition, random, root),
              reference_key(GPU, "kit torch.profiler span, bounded", definition, random, root),
              reference_key(GPU, METHOD.replace("trials 3", "trials 1"), definition, random, root),
              reference_key(GPU, METHOD, changed_reference, random, root),
              reference_key(GPU, METHOD, definition, changed_axes, root),
              reference_key(GPU, METHOD, definition, blobbed, root)}
    assert key not in others and len(others) == 6


def test_a_key_follows_the_blobs_bytes_not_where_the_trace_set_lies(decode, tmp_path):
    definition, root, _, blobbed = decode
    [blob] = blob_files(blobbed, root)
    copy = tmp_path / "copy"
    (copy / blob.relative_to(root)).parent.mkdir(parents=True)
    shutil.copy(blob, copy / blob.relative_to(root))
    key = reference_key(GPU, METHOD, definition, blobbed, root)
    assert reference_key(GPU, METHOD, definition, blobbed, copy) == key  # a copy elsewhere: the cached time holds
    data = bytearray((copy / blob.relative_to(root)).read_bytes())
    data[-1] ^= 1  # one bit of the stored tensors
    (copy / blob.relative_to(root)).write_bytes(bytes(data))
    assert reference_key(GPU, METHOD, definition, blobbed, copy) != key


def _counting(start=100.0, samples=7):
    """A stand-in for the GPU measurement: a new time per call, `samples` calls timed; .calls
    lists the workloads."""
    def measure(w):
        measure.calls.append(w.uuid)
        return start + len(measure.calls), samples
    measure.calls = []
    return measure


def test_collect_measures_what_is_missing_once_then_reads_the_file(decode, tmp_path):
    definition, root, random, blobbed = decode
    path = tmp_path / "ref.json"
    measure = _counting()
    first = collect("cached", GPU, definition, root, [random, blobbed], ReferenceTimes.load(path), measure, TIMING)
    assert measure.calls == [random.uuid, blobbed.uuid]
    assert {e["source"] for e in first.values()} == {"measured"}
    assert (first[random.uuid]["us"], first[random.uuid]["samples"], first[random.uuid]["timer"]) == \
        (101.0, 7, "the evaluator's")
    assert (first[random.uuid]["method"], first[random.uuid]["evaluators"], first[random.uuid]["versions"]) == \
        (METHOD, True, {"torch": "2.13"})
    assert first[random.uuid]["axes"] == dict(random.axes) and first[random.uuid]["gpu"] == GPU

    again = collect("cached", GPU, definition, root, [random, blobbed], ReferenceTimes.load(path), measure, TIMING)
    assert measure.calls == [random.uuid, blobbed.uuid]  # nothing measured: a second run reuses them
    assert {w: (e["us"], e["samples"]) for w, e in again.items()} == {w: (e["us"], 7) for w, e in first.items()}
    assert {e["source"] for e in again.values()} == {"cached"}

    changed = definition.model_copy(update={"reference": definition.reference + "\n# changed\n"})
    anew = collect("cached", GPU, changed, root, [random], ReferenceTimes.load(path), measure, TIMING)
    assert anew[random.uuid]["source"] == "measured" and len(measure.calls) == 3
    other_gpu = collect("cached", "NVIDIA Other GPU", definition, root, [random], ReferenceTimes.load(path), measure,
                        TIMING)
    assert other_gpu[random.uuid]["source"] == "measured" and len(measure.calls) == 4
    kit = {**TIMING, "method": "kit torch.profiler span, bounded", "evaluators": False}
    other_timer = collect("cached", GPU, definition, root, [random], ReferenceTimes.load(path), measure, kit)
    assert other_timer[random.uuid]["source"] == "measured" and len(measure.calls) == 5
    assert len(json.loads(path.read_text())["entries"]) == 5  # the old entries stay, unused


def test_measure_mode_replaces_and_skip_mode_measures_nothing(decode, tmp_path):
    definition, root, random, blobbed = decode
    path = tmp_path / "ref.json"
    measure = _counting()
    assert collect("skip", GPU, definition, root, [random], ReferenceTimes.load(path), measure, TIMING) == {}
    assert measure.calls == [] and not path.exists()  # nothing cached, nothing measured: no time at all

    collect("cached", GPU, definition, root, [random], ReferenceTimes.load(path), measure, TIMING)
    remeasured = collect("measure", GPU, definition, root, [random], ReferenceTimes.load(path), measure, TIMING)
    assert (remeasured[random.uuid]["us"], remeasured[random.uuid]["source"]) == (102.0, "measured")
    assert len(measure.calls) == 2
    skipped = collect("skip", GPU, definition, root, [random, blobbed], ReferenceTimes.load(path), measure, TIMING)
    assert skipped[random.uuid]["us"] == 102.0 and blobbed.uuid not in skipped and len(measure.calls) == 2


def test_a_failed_timing_is_an_entry_without_a_time_and_is_not_cached(decode, tmp_path):
    definition, root, random, _ = decode

    def fails(w):
        raise TimingError("a timed call launched no kernel between two L2 flushes")

    path = tmp_path / "ref.json"
    found = collect("cached", GPU, definition, root, [random], ReferenceTimes.load(path), fails, TIMING)
    assert found[random.uuid]["us"] is None and found[random.uuid]["source"] == "failed"
    assert "reference timing failed: a timed call launched no kernel" in found[random.uuid]["message"]
    assert not path.exists()


def test_to_measure_names_what_collect_will_measure(decode, tmp_path):
    """What a run's estimate counts: the workloads without a cached time (all with "measure",
    none with "skip"), as collect then measures them."""
    definition, root, random, blobbed = decode
    times = ReferenceTimes.load(tmp_path / "ref.json")
    collect("cached", GPU, definition, root, [random], times, _counting(), TIMING)
    for mode, expected in (("cached", [blobbed]), ("measure", [random, blobbed]), ("skip", [])):
        assert to_measure(mode, GPU, METHOD, definition, root, [random, blobbed], times) == expected
        measure = _counting()
        collect(mode, GPU, definition, root, [random, blobbed], ReferenceTimes(None, dict(times.entries)), measure,
                TIMING)
        assert measure.calls == [w.uuid for w in expected]


def test_collect_rejects_an_unknown_mode(decode):
    definition, root, random, _ = decode
    with pytest.raises(ValueError, match="reference mode 'fresh': expected one of cached, measure, skip"):
        collect("fresh", GPU, definition, root, [random], ReferenceTimes(), _counting(), TIMING)


def test_writers_of_one_file_keep_each_others_entries(tmp_path):
    path = tmp_path / "sub" / "ref.json"
    one, two = ReferenceTimes.load(path), ReferenceTimes.load(path)
    one.add("a", {"us": 1.0})
    two.add("b", {"us": 2.0})  # loaded before "a" was written
    assert ReferenceTimes.load(path).entries == {"a": {"us": 1.0}, "b": {"us": 2.0}}
    assert [p.name for p in path.parent.iterdir()] == ["ref.json"]  # no temporary file left behind
    in_memory = ReferenceTimes(None, {"a": {"us": 1.0}})
    in_memory.add("c", {"us": 3.0})  # run_modal's jobs: no file
    assert in_memory.entries == {"a": {"us": 1.0}, "c": {"us": 3.0}}


@pytest.mark.parametrize("text, says", [("not json", "cannot read it"), ('{"entries": {}}', "expected"),
                                        ('{"version": 1, "entries": []}', "expected")], ids=["text", "old", "list"])
def test_a_file_of_something_else_is_one_clear_error(text, says, tmp_path):
    path = tmp_path / "ref.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=f"reference times file {path}: {says}"):
        ReferenceTimes.load(path)


def test_the_default_file_lies_in_the_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("GDN_BENCH_CACHE", str(tmp_path))
    assert default_file() == tmp_path / REFERENCE_FILE


def test_as_cached_keeps_what_a_run_measured_by_key():
    reference = {"w1": {"us": 5.0, "gpu": GPU, "key": "k1", "source": "measured"},
                 "w2": {"us": 6.0, "gpu": GPU, "key": "k2", "source": "cached"},
                 "w3": {"us": None, "key": "k3", "source": "failed", "message": "x"}}
    assert as_cached(reference) == {"k1": {"us": 5.0, "gpu": GPU}}


def test_a_time_from_before_the_evaluators_timer_is_measured_anew(decode, tmp_path):
    """A file written before issue 27 (the kit's own timer, keys without a timing method) still
    loads, but none of its times is found: every one is measured again, beside them."""
    definition, root, random, _ = decode
    path = tmp_path / "ref.json"
    old_key = hashlib.sha256(b"".join(hashlib.sha256(part).digest() for part in (
        GPU.encode(), json.dumps(definition.model_dump(mode="json"), sort_keys=True).encode(),
        json.dumps(random.model_dump(mode="json"), sort_keys=True).encode()))).hexdigest()  # the old key
    path.write_text(json.dumps({"version": 1, "entries": {old_key: {"us": 123.0, "samples": 3, "gpu": GPU}}}))
    measure = _counting()
    found = collect("cached", GPU, definition, root, [random], ReferenceTimes.load(path), measure, TIMING)
    assert measure.calls == [random.uuid] and found[random.uuid]["source"] == "measured"
    assert set(json.loads(path.read_text())["entries"]) == {old_key, reference_key(GPU, METHOD, definition, random,
                                                                                   root)}


@pytest.mark.parametrize("once, calls", [
    (0.001, None), (0.0099, None),  # fast: as many as kernel_time_us profiles
    (0.01, 20), (0.05, 4), (0.066, MIN_SLOW_CALLS),  # as many as fit 0.2 s
    (0.07, MIN_SLOW_CALLS), (1.2, MIN_SLOW_CALLS), (30.0, MIN_SLOW_CALLS),  # never fewer than 3
])
def test_a_slow_call_is_profiled_as_often_as_fits_the_target(once, calls):
    assert slow_calls(once) == calls


def test_slow_calls_keep_the_cap():
    assert slow_calls(0.01, max_calls=8) == 8


@pytest.mark.parametrize("once, profiled", [(1.2, (0, MIN_SLOW_CALLS, False)), (0.001, (1, None, True))],
                         ids=["slow", "fast"])
def test_bounded_timing_profiles_a_slow_call_fewer_times(once, profiled, monkeypatch):
    """A slow call: slow_calls calls, no more warm-up, no busy loop; a fast one as kernel_time_us
    profiles it. Either way the median span and the number of calls it is over."""
    asked, warmups = [], []
    spans = [[("k", 0.0, 10.0)], [("k", 0.0, 30.0)], [("k", 5.0, 25.0)]]
    monkeypatch.setattr(timing, "_wall_seconds", lambda fn: once)
    monkeypatch.setattr(timing, "_cold_calls", lambda fn, max_calls, warmup, calls=None, busy=True:
                        asked.append((warmup, calls, busy)) or spans)
    assert timing.bounded_kernel_time_us(lambda: warmups.append(1)) == (20.0, 3)
    assert asked == [profiled] and warmups == [1]  # one warm-up call before the wall-clock one


def test_the_profile_is_read_as_torch_reads_it():
    """_device_kernels reads the profiler's results without torch's per-event parsing: on CPU
    ops (no nested ops of one name, which torch's parsing merges) the same names and times."""
    x = torch.randn(32, 32)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            torch.relu(x @ x) + 1
    cpu = torch.autograd.DeviceType.CPU
    ours = _device_kernels(prof, cpu)
    theirs = [(e.name, e.time_range.start, e.time_range.end) for e in prof.events() if e.device_type == cpu]
    assert len(ours) >= 9 and sorted(ours) == sorted(theirs)
    assert _device_kernels(prof) == []  # no CUDA kernel on a CPU


def test_a_run_times_the_reference_with_its_timer_and_the_runs_counts(decode, monkeypatch):
    """run_local's reference tier (gdn_bench.runner): the timer reference_timer chooses, with
    the run's warm-up / iterations / trials; the run's meta says which timer, each time's entry
    too."""
    from gdn_bench import runner
    from gdn_bench.checking import workload_inputs
    from gdn_bench.evaluator_timing import TIME_RUNNABLE, ReferenceTimer
    from gdn_bench.results import Results

    definition, root, random, _ = decode
    seen = []
    timer = ReferenceTimer(TIME_RUNNABLE, {"torch": "2.13"}, time_ms=lambda fn, args, warmup, iterations, device:
                           seen.append((warmup, iterations)) or 0.25)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: GPU)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(runner, "workload_inputs", lambda d, w, r, device, seed: workload_inputs(d, w, r, "cpu", seed))
    settings = runner.RunSettings(algos=["fla-recurrent"], definition="decode", reference="measure", iterations=7)
    results = Results(meta={"reference": {"mode": "measure", "file": None}})
    runner._reference_tier(settings, definition, root, [random], ReferenceTimes(), timer, results)
    entry = results.reference[random.uuid]
    assert seen == [(10, 7)] * 3  # decode's contest warm-up and trials, the run's iterations
    assert (entry["us"], entry["samples"], entry["source"], entry["evaluators"]) == (250.0, 21, "measured", True)
    assert entry["key"] == reference_key(GPU, timer.method(10, 7, 3), definition, random, root)
    assert results.meta["reference"]["timer"] == {"method": timer.method(10, 7, 3), "timer": timer.describe(10, 7, 3),
                                                  "evaluators": True, "versions": {"torch": "2.13"}}

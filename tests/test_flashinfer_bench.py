"""The packed submission through flashinfer-bench's own machinery: pack -> builder registry
-> run on embedded workloads -> compare with the definition's reference at the
evaluator's tolerance (atol = rtol = 1e-2)."""

import pytest

from gdn_bench.checking import check_solutions
from gdn_bench.dataset import load_trace_set
from gdn_bench.definitions.decode import NAME as DEFINITION_NAME
from gdn_bench.packing import pack, read_config, solution_dir
from helpers import ROOT, SEED


@pytest.fixture(scope="module")
def trace_set():
    return load_trace_set()


def _one_per_batch_and_all_blobs(trace_set):
    """Every model-like (safetensors) workload plus the first random one of each batch size."""
    chosen, seen = [], set()
    for trace in trace_set.workloads[DEFINITION_NAME]:
        w = trace.workload
        blob = any(spec.type == "safetensors" for spec in w.inputs.values())
        if blob or w.axes["batch_size"] not in seen:
            chosen.append(w)
            seen.add(w.axes["batch_size"])
    return chosen


def test_packed_submission_passes_evaluator_check(trace_set, device):
    definition = trace_set.definitions[DEFINITION_NAME]
    solution = pack(read_config(ROOT / "config.toml"), solution_dir(ROOT, "triton"))
    workloads = _one_per_batch_and_all_blobs(trace_set)
    assert {w.axes["batch_size"] for w in workloads} >= {1, 2, 4, 8, 16, 32, 48, 64}
    results = check_solutions(definition, {"submission": solution}, workloads, trace_set.root, device, SEED)["submission"]
    failed = [r for r in results if r.status != "PASSED"]
    assert not failed, failed
    assert all(max(r.margins.values()) <= 1 for r in results)


"""The packed submission through flashinfer-bench's own machinery: pack -> builder registry
-> run on embedded workloads -> compare with the definition's reference at the
evaluator's tolerance (atol = rtol = 1e-2).

Every model-like (safetensors) workload and the first random one of each batch size, one
test each, so that pytest-xdist spreads them; the packed solution is made once per module.
In Triton's interpreter those from B = 16 up (LARGE_GRID; all random) are skipped: they run
the production launch table's programs, about 5 ms each, and only make the grid larger,
which matters on a GPU alone (GDN_TEST_DEVICE=cuda runs them)."""

import pytest

from gdn_bench.checking import check_solutions
from gdn_bench.dataset import load_trace_set
from gdn_bench.definitions.decode.definition import DECODE, NAME as DEFINITION_NAME
from gdn_bench.packing import pack, read_config, solution_dir
from helpers import DEVICE, ROOT, SEED

LARGE_GRID = 16  # workloads from this batch size up run on a GPU only


def _one_per_batch_and_all_blobs() -> list:
    """Every model-like (safetensors) workload plus the first random one of each batch size."""
    chosen, seen = [], set()
    for trace in load_trace_set().workloads[DEFINITION_NAME]:
        w = trace.workload
        blob = any(spec.type == "safetensors" for spec in w.inputs.values())
        if blob or w.axes["batch_size"] not in seen:
            chosen.append(w)
            seen.add(w.axes["batch_size"])
    return chosen


WORKLOADS = _one_per_batch_and_all_blobs()


def _workload_id(w) -> str:
    return f"B{w.axes['batch_size']}-{DECODE.workload_kind(w)}-{w.uuid[:8]}"


@pytest.fixture(scope="module")
def packed():
    """The embedded trace set and the submission packed as the evaluator packs it."""
    return load_trace_set(), pack(read_config(ROOT / "config.toml"), solution_dir(ROOT, "triton"))


def test_covers_every_batch_size_of_the_mix():
    assert {w.axes["batch_size"] for w in WORKLOADS} >= {1, 2, 4, 8, 16, 32, 48, 64}


@pytest.mark.parametrize("workload", WORKLOADS, ids=_workload_id)
def test_packed_submission_passes_evaluator_check(workload, packed, device):
    if DEVICE == "cpu" and workload.axes["batch_size"] >= LARGE_GRID:
        pytest.skip(f"B={workload.axes['batch_size']}: a larger grid of the same programs, a GPU concern")
    trace_set, solution = packed
    definition = trace_set.definitions[DEFINITION_NAME]
    [result] = check_solutions(definition, {"submission": solution}, [workload], trace_set.root, device,
                               SEED)["submission"]
    assert result.status == "PASSED", result
    assert max(result.margins.values()) <= 1

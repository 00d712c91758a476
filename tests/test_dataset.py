"""The embedded trace set: loadable, the contest mix, in sync with the code, reproducible."""

import json
import shutil
from collections import Counter

import pytest
import torch
from flashinfer_bench import TraceSet
from safetensors.torch import load_file, save_file

from gdn_bench import dataset
from gdn_bench.algos import load_module
from gdn_bench.dataset import load_trace_set, write_trace_set
from gdn_bench.definitions import DEFINITIONS
from gdn_bench.definitions.decode.definition import NAME as DEFINITION_NAME
from gdn_bench.definitions.decode.mix import CONTEST_BATCH_MIX
from gdn_bench.paths import EMBEDDED_PATH
from helpers import ROOT, SEED


def test_loads_with_flashinfer_bench():
    trace_set = TraceSet.from_path(str(EMBEDDED_PATH))
    assert DEFINITION_NAME in trace_set.definitions
    assert len(trace_set.workloads[DEFINITION_NAME]) == 54 + 3


def test_contest_batch_mix():
    workloads = [t.workload for t in load_trace_set().workloads[DEFINITION_NAME]]
    random = [w for w in workloads if all(s.type != "safetensors" for s in w.inputs.values())]
    assert Counter(w.axes["batch_size"] for w in random) == Counter(CONTEST_BATCH_MIX)
    assert sum(CONTEST_BATCH_MIX.values()) == 54
    for w in random:
        assert w.inputs["scale"].type == "scalar" and w.inputs["scale"].value == pytest.approx(128**-0.5)
    assert len({w.uuid for w in workloads}) == len(workloads)


def test_blobs_are_small_and_model_like():
    blob_bytes = sum(p.stat().st_size for p in (EMBEDDED_PATH / "blob").rglob("*") if p.is_file())
    assert blob_bytes < 2_000_000
    from gdn_bench.checking import workload_inputs

    trace_set = load_trace_set()
    definition = trace_set.definitions[DEFINITION_NAME]
    blob_workloads = [
        t.workload for t in trace_set.workloads[DEFINITION_NAME]
        if any(s.type == "safetensors" for s in t.workload.inputs.values())
    ]
    assert len(blob_workloads) == 3
    for w in blob_workloads:
        q, k, v, state, A_log, a, dt_bias, b, scale = workload_inputs(definition, w, trace_set.root, "cpu", SEED)
        assert (k.float().norm(dim=-1) - 1).abs().max() < 1e-2
        assert ((A_log.exp() >= 1) & (A_log.exp() <= 16)).all()


@pytest.mark.parametrize("short", DEFINITIONS)
def test_shipped_definition_matches_code(short):
    spec = DEFINITIONS[short]
    shipped = json.loads((EMBEDDED_PATH / "definitions" / "gdn" / f"{spec.name}.json").read_text())
    assert shipped["reference"] == spec.reference_source()
    assert shipped == json.loads(spec.build_definition().model_dump_json(exclude_unset=True))


# Where the blobs regenerate byte for byte (docs/trace-sets.md): this torch, and its AVX2
# or AVX-512 code; elsewhere torch's random draws differ in the last bits.
EXACT_TORCH, EXACT_CAPABILITIES = "2.13.0", ("AVX2", "AVX512")


def test_regeneration_reproduces_the_shipped_files(tmp_path):
    """Same files; JSON byte for byte; blobs byte for byte where the README says so, else the
    same tensor names, dtypes and shapes."""
    write_trace_set(tmp_path)
    shipped = sorted(p.relative_to(EMBEDDED_PATH) for p in EMBEDDED_PATH.rglob("*") if p.is_file())
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert fresh == shipped
    exact = (torch.__version__.split("+")[0] == EXACT_TORCH
             and torch.backends.cpu.get_cpu_capability() in EXACT_CAPABILITIES)
    for rel in shipped:
        if rel.suffix != ".safetensors" or exact:
            assert (tmp_path / rel).read_bytes() == (EMBEDDED_PATH / rel).read_bytes(), rel
            continue
        new, old = load_file(tmp_path / rel), load_file(EMBEDDED_PATH / rel)
        assert new.keys() == old.keys(), rel
        for key in old:
            assert new[key].dtype == old[key].dtype and new[key].shape == old[key].shape, (rel, key)


def test_missing_dataset_is_an_error_and_not_created(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_trace_set(missing)
    assert not missing.exists()


def test_dataset_without_the_definition_is_an_error(tmp_path):
    (tmp_path / "definitions").mkdir()
    with pytest.raises(ValueError, match="has no definition"):
        load_trace_set(tmp_path)


def _broken_copy(tmp_path, change) -> tuple:
    """A copy of the embedded trace set whose first decode workload with a blob went through
    change(root, workload JSON); returns (root, the decode .jsonl, its line number, the workload
    JSON)."""
    root = tmp_path / "data"
    shutil.copytree(EMBEDDED_PATH, root)
    jsonl = next((root / "workloads").rglob(f"{DEFINITION_NAME}.jsonl"))
    lines = jsonl.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if "safetensors" in line)
    trace = json.loads(lines[index])
    change(root, trace["workload"])
    lines[index] = json.dumps(trace)
    jsonl.write_text("\n".join(lines) + "\n")
    return root, jsonl, index + 1, trace["workload"]


def _blob(root, workload):
    return root / workload["inputs"]["k"]["path"]  # every stored input's


def _store_q_as_float32(root, workload):
    tensors = load_file(_blob(root, workload))
    save_file({**tensors, "q": tensors["q"].float()}, _blob(root, workload))


BROKEN_WORKLOADS = {  # what was done to the workload -> what the error says about it
    "blob-against-its-axes": (lambda root, w: w["axes"].update(batch_size=2),
                              "input 'q': its blob {blob} holds shape [1, 1, 4, 128]; the definition's [batch_size, "
                              "seq_len, num_q_heads, head_size] with the workload's batch_size = 2 give [2, 1, 4, 128]"),
    "blob-deleted": (lambda root, w: _blob(root, w).unlink(), "input 'q': its blob {blob} does not exist"),
    "blob-float32": (_store_q_as_float32, "input 'q': its blob {blob} holds F32; the definition's dtype is bfloat16 "
                                          "(BF16)"),
    "tensor-key": (lambda root, w: w["inputs"]["q"].update(tensor_key="query"),
                   "input 'q': its blob {blob} has no tensor 'query' (it has: A_log, a, b, dt_bias, k, q, state, v)"),
    "random-with-dtype": (lambda root, w: w["inputs"].update(scale={"type": "random", "dtype": "float32"}),
                          "workload.inputs.scale.dtype: unknown key, which flashinfer-bench would ignore (a "
                          "RandomInput takes type)"),
    "unknown-input": (lambda root, w: w["inputs"].update(Q={"type": "random"}),
                      "input 'Q': not an input of the definition (its inputs: q, k, v, state, A_log, a, dt_bias, b, "
                      "scale)"),
    "unknown-axis": (lambda root, w: w["axes"].update(batch=1),
                     "axes: batch: not a variable axis (the definition's variable axes: batch_size)"),
    "scalar-for-a-tensor": (lambda root, w: w["inputs"].update(q={"type": "scalar", "value": 1.0}),
                            "input 'q': a scalar, where the definition has a tensor [batch_size, seq_len, num_q_heads, "
                            "head_size]"),
}


@pytest.mark.parametrize("change, reason", BROKEN_WORKLOADS.values(), ids=BROKEN_WORKLOADS)
def test_a_workload_that_could_not_run_is_named_when_the_trace_set_loads(change, reason, tmp_path):
    """One line: the file, the line, the workload's uuid and why; before any case runs."""
    root, jsonl, line, workload = _broken_copy(tmp_path, change)
    with pytest.raises(ValueError) as error:
        load_trace_set(root)
    reason = reason.format(blob=_blob(root, workload))
    assert str(error.value) == f"dataset {root}: {jsonl}, line {line}, workload {workload['uuid']}: {reason}"


def test_every_workload_that_could_not_run_is_counted(tmp_path):
    root = tmp_path / "data"
    shutil.copytree(EMBEDDED_PATH, root)
    shutil.rmtree(root / "blob" / "workloads" / "gdn" / DEFINITION_NAME)
    with pytest.raises(ValueError, match=r"does not exist \(and 2 more workloads that cannot run\)$"):
        load_trace_set(root)


def _snapshot(root) -> dict:
    """Every file under `root` (relative path -> bytes) and every folder (-> None)."""
    return {p.relative_to(root): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


def _make_dataset(argv, capsys) -> tuple[int, str]:
    """scripts/make_dataset.py's exit status and its last line on stderr."""
    main = load_module(ROOT / "scripts" / "make_dataset.py", "make_dataset_under_test").main
    try:
        status = main(argv)
    except SystemExit as e:
        status = e.code
    return status, (capsys.readouterr().err.strip().splitlines() or [""])[-1]


@pytest.mark.parametrize("argv, said", [
    (["--seed", "99999999999999999999999"], "argument --seed: expected a seed from 0 to 2**63 - 1, got "
                                            "99999999999999999999999"),
    (["--seed", "-5"], "argument --seed: expected a seed from 0 to 2**63 - 1, got -5"),
    (["--seed", "x"], "argument --seed: expected a seed from 0 to 2**63 - 1, got 'x'"),
    ([], "one of the arguments --out --embedded is required"),
    (["--out", str(EMBEDDED_PATH)], f"argument --out: {EMBEDDED_PATH} is the committed trace set; rewrite it with "
                                    "--embedded (and no --out)"),
    (["--out", str(EMBEDDED_PATH / "blob")], "is the committed trace set"),
], ids=["huge-seed", "negative-seed", "not-a-seed", "no-target", "committed", "inside-committed"])
def test_make_dataset_refuses_bad_arguments_leaving_the_target_as_it_was(argv, said, tmp_path, capsys):
    """One line, status 2, and the target (a copy of the trace set, and the committed one)
    byte for byte as it was."""
    target = tmp_path / "data"
    shutil.copytree(EMBEDDED_PATH, target)
    before, committed = _snapshot(target), _snapshot(EMBEDDED_PATH)
    status, last = _make_dataset([*argv, "--out", str(target)] if argv[:1] == ["--seed"] else argv, capsys)
    assert status == 2 and last.startswith("make_dataset: error: ") and said in last, last
    assert _snapshot(target) == before and _snapshot(EMBEDDED_PATH) == committed


@pytest.fixture
def cheap_definitions(monkeypatch):
    """write_trace_set with prefill's and mtp's subsets only (decode's takes seconds)."""
    monkeypatch.setattr(dataset, "DEFINITIONS", {k: v for k, v in DEFINITIONS.items() if k != "decode"})


def test_a_failed_write_leaves_the_target_as_it_was(cheap_definitions, tmp_path, monkeypatch):
    from gdn_bench import trace_cache

    target = tmp_path / "data"
    write_trace_set(target, 1)
    before = _snapshot(target)
    calls = []

    def fail_second(root, definition):
        calls.append(definition.name)
        if len(calls) == 2:
            raise OSError("disk full")
        return new_trace_set(root, definition)

    new_trace_set = trace_cache.new_trace_set
    monkeypatch.setattr(trace_cache, "new_trace_set", fail_second)
    with pytest.raises(OSError, match="disk full"):
        write_trace_set(target, 2)
    assert _snapshot(target) == before
    assert [p.name for p in tmp_path.iterdir()] == ["data"]  # no temporary folder left beside it


def test_an_earlier_run_is_replaced_and_other_files_are_refused(cheap_definitions, tmp_path):
    target = tmp_path / "data"
    target.mkdir(mode=0o750)
    write_trace_set(target, 1)
    first = _snapshot(target)
    write_trace_set(target, 2)  # an earlier run's output: replaced whole, its mode kept
    assert _snapshot(target).keys() == first.keys() and _snapshot(target) != first
    assert target.stat().st_mode & 0o777 == 0o750
    (target / "notes.txt").write_text("mine")
    before = _snapshot(target)
    with pytest.raises(ValueError, match=f"{target} holds files that make_dataset does not write "
                                         rf"\({target / 'notes.txt'}\); they would be lost"):
        write_trace_set(target, 3)
    assert _snapshot(target) == before and [p.name for p in tmp_path.iterdir()] == ["data"]

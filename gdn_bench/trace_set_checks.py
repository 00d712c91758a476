"""What is wrong with a trace set on disk, found when it loads, before any case runs: the first
entry flashinfer-bench cannot read (`first_invalid_entry`), and the workloads of a definition
that could not run (`workload_problems`), each named by its file, line and uuid.

A workload can run when its JSON holds nothing flashinfer-bench would ignore (pydantic drops
unknown keys silently: a random input's "dtype" would be lost), its axes give every variable
axis of the definition and no other, each of its inputs is one of the definition's, a scalar
only where the definition has one, and each stored input is a tensor of its blob with the
shape the definition's axes give and the definition's dtype. Blobs are checked from their
safetensors headers: no tensor data is read.
"""

import json
import re
from collections.abc import Iterator
from pathlib import Path

from flashinfer_bench import Definition, Solution, Trace, Workload
from pydantic import BaseModel, ValidationError
from safetensors import SafetensorError, safe_open

# What TraceSet.from_path reads, in its order: folder, file pattern, model (one per file, or per
# line of a .jsonl file).
_LAYOUT = (("definitions", "*.json", Definition), ("solutions", "*.json", Solution),
           ("workloads", "*.jsonl", Trace), ("traces", "*.jsonl", Trace))
# The definition's dtype names as safetensors headers spell them.
STORED_DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
                 "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "int64": "I64", "int32": "I32",
                 "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


def entries(root: Path, folder: str, pattern: str) -> Iterator[tuple[Path, int, str]]:
    """The entries TraceSet.from_path reads from root/folder, in its order, as (file, line
    number, text): a .json file is one entry (line 0), a .jsonl file one per non-blank line."""
    for path in sorted((root / folder).rglob(pattern)):
        text = path.read_text(encoding="utf-8")
        if not pattern.endswith(".jsonl"):
            yield path, 0, text
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                yield path, number, line


def first_invalid_entry(root: Path) -> str | None:
    """The first entry of the trace set at `root` that flashinfer-bench cannot read, in its
    loading order, as 'file, line N: reason' (no line for a .json file); None if every one reads."""
    for folder, pattern, model in _LAYOUT:
        for path, number, text in entries(root, folder, pattern):
            try:
                model.model_validate_json(text)
            except ValidationError as e:
                error = e.errors()[0]
                field = ".".join(map(str, error["loc"]))
                reason = f"{field}: {error['msg']}" if field else error["msg"]
                if number:  # the line is the file's: pydantic counts within it
                    reason = re.sub(r" at line 1 column (\d+)$", r" at column \1", reason)
                return f"{path}{f', line {number}' if number else ''}: {reason}"
    return None


def workload_problems(root: Path, definition: Definition) -> list[str]:
    """Why each workload of `definition` in the trace set at `root` could not run, one line
    each, 'file, line N, workload UUID: reason', in loading order; empty when all can. The
    entries must be readable (first_invalid_entry finds none)."""
    problems = []
    for path, number, text in entries(root, "workloads", "*.jsonl"):
        raw = json.loads(text)
        trace = Trace.model_validate(raw)
        if trace.definition != definition.name:
            continue
        reason = unknown_key(trace, raw) or _workload_problem(root, definition, trace.workload)
        if reason:
            problems.append(f"{path}, line {number}, workload {trace.workload.uuid}: {reason}")
    return problems


def unknown_key(model: BaseModel, raw: dict, where: str = "") -> str | None:
    """The first key of `raw`, the JSON object `model` was read from, that `model` (or a model
    inside it) has no field for, in words; None if there is none."""
    fields = type(model).model_fields
    for key, value in raw.items():
        name = f"{where}{key}"
        if key not in fields:
            return (f"{name}: unknown key, which flashinfer-bench would ignore (a {type(model).__name__} "
                    f"takes {', '.join(fields)})")
        child = getattr(model, key)
        if isinstance(child, BaseModel):
            found = unknown_key(child, value, f"{name}.")
        elif isinstance(child, dict):  # e.g. a workload's inputs, by name
            found = next((f for k, item in child.items()
                          if isinstance(item, BaseModel) and (f := unknown_key(item, value[k], f"{name}.{k}."))), None)
        else:
            found = None
        if found:
            return found
    return None


def _workload_problem(root: Path, definition: Definition, workload: Workload) -> str | None:
    """Why `workload` could not run with `definition`, or None (the module docstring says what
    is checked)."""
    missing = [axis for axis in definition.var_axes if axis not in workload.axes]
    unknown = [axis for axis in workload.axes if axis not in definition.var_axes]
    if missing or unknown:
        what = f"no value for {', '.join(missing)}" if missing else f"{', '.join(unknown)}: not a variable axis"
        return f"axes: {what} (the definition's variable axes: {', '.join(definition.var_axes)})"
    shapes = dict(zip(definition.inputs, definition.get_input_shapes(workload.axes)))
    for name, given in workload.inputs.items():
        if name not in definition.inputs:
            return f"input {name!r}: not an input of the definition (its inputs: {', '.join(definition.inputs)})"
        declared = definition.inputs[name]
        if given.type == "scalar" and declared.shape is not None:
            return f"input {name!r}: a scalar, where the definition has a tensor [{', '.join(declared.shape)}]"
        if given.type == "safetensors":
            if declared.shape is None:
                return f"input {name!r}: a stored tensor, where the definition has a scalar"
            given_axes = [f"{axis} = {workload.axes[axis]}" for axis in dict.fromkeys(declared.shape)
                          if axis in workload.axes]
            shape_from = (f"the definition's [{', '.join(declared.shape)}] with the workload's "
                          f"{', '.join(given_axes) or 'axes'} give {list(shapes[name])}")
            problem = _blob_problem(root, given, list(shapes[name]), declared.dtype.value, shape_from)
            if problem:
                return f"input {name!r}: {problem}"
    return None


def _blob_problem(root: Path, given, shape: list[int], dtype: str, shape_from: str) -> str | None:
    """Why the stored input `given` (a SafetensorsInput) is not a tensor of this shape (which
    `shape_from` explains) and dtype, read from its blob's header; None if it is."""
    path = Path(given.path) if Path(given.path).is_absolute() else root / given.path
    if not path.is_file():
        return f"its blob {path} does not exist"
    try:
        with safe_open(str(path), framework="pt") as blob:
            keys = list(blob.keys())
            if given.tensor_key not in keys:
                return f"its blob {path} has no tensor {given.tensor_key!r} (it has: {', '.join(keys) or 'none'})"
            stored = blob.get_slice(given.tensor_key)
            stored_shape, stored_dtype = list(stored.get_shape()), stored.get_dtype()
    except (SafetensorError, OSError) as e:
        return f"its blob {path} is not a safetensors file that can be read ({e})"
    if stored_shape != shape:
        return f"its blob {path} holds shape {stored_shape}; {shape_from}"
    expected = STORED_DTYPES.get(dtype, dtype)
    if stored_dtype != expected:
        return f"its blob {path} holds {stored_dtype}; the definition's dtype is {dtype} ({expected})"
    return None

"""The embedded trace set gdn_bench/data: every definition with its committed workloads
(decode: the contest's batch mix; prefill: a small CPU subset), and loading any trace set.

Layout (flashinfer-bench's): definitions/gdn/<def>.json, workloads/gdn/<def>.jsonl and
blob/workloads/gdn/<def>/*.safetensors. `write_trace_set` rebuilds it deterministically
from SEED; `load_trace_set` opens any trace set without creating it.
"""

import re
import shutil
from pathlib import Path

from flashinfer_bench import Definition, Solution, Trace, TraceSet
from pydantic import ValidationError

from gdn_bench.definitions import DEFINITIONS
from gdn_bench.paths import EMBEDDED_PATH
from gdn_bench.trace_cache import new_trace_set

SEED = 20260301
# What TraceSet.from_path reads, in its order: folder, file pattern, model (one per file, or per
# line of a .jsonl file).
_LAYOUT = (("definitions", "*.json", Definition), ("solutions", "*.json", Solution),
           ("workloads", "*.jsonl", Trace), ("traces", "*.jsonl", Trace))


def write_trace_set(root: Path = EMBEDDED_PATH, seed: int = SEED) -> TraceSet:
    """(Re)write the whole embedded trace set under `root`, deterministically from `seed`."""
    root = Path(root)
    for sub in ("definitions", "workloads", "blob"):
        shutil.rmtree(root / sub, ignore_errors=True)
    for spec in DEFINITIONS.values():
        definition = spec.build_definition()
        spec.write_embedded(new_trace_set(root, definition), definition.name, seed)
    return TraceSet.from_path(str(root))


def load_trace_set(path: Path | str | None = None, definition: str = DEFINITIONS["decode"].name) -> TraceSet:
    """Open the trace set at `path` (default: the embedded one) and check it has `definition`.

    Unlike TraceSet.from_path, a missing folder is an error, never silently created, and a
    file it cannot read is named (ValueError: the file, the line, the reason).
    """
    root = Path(path) if path is not None else EMBEDDED_PATH
    if not root.is_dir():
        raise FileNotFoundError(f"dataset path {root} does not exist or is not a folder")
    try:
        trace_set = TraceSet.from_path(str(root))
    except ValidationError as e:
        raise ValueError(f"dataset {root}: cannot read {first_invalid_entry(root) or e}") from None
    if definition not in trace_set.definitions:
        known = ", ".join(sorted(trace_set.definitions)) or "none"
        raise ValueError(f"dataset {root} has no definition {definition!r} (it has: {known})")
    if not trace_set.workloads.get(definition):
        raise ValueError(f"dataset {root} has no workloads for {definition!r}")
    return trace_set


def first_invalid_entry(root: Path) -> str | None:
    """The first entry of the trace set at `root` that flashinfer-bench cannot read, in its
    loading order, as 'file, line N: reason' (no line for a .json file); None if every one reads."""
    for folder, pattern, model in _LAYOUT:
        for path in sorted((root / folder).rglob(pattern)):
            text = path.read_text(encoding="utf-8")
            per_line = pattern.endswith(".jsonl")
            for number, chunk in enumerate(text.splitlines(), 1) if per_line else [(0, text)]:
                if not chunk.strip():
                    continue
                try:
                    model.model_validate_json(chunk)
                except ValidationError as e:
                    error = e.errors()[0]
                    field = ".".join(map(str, error["loc"]))
                    reason = f"{field}: {error['msg']}" if field else error["msg"]
                    if per_line:  # the line is the file's: pydantic counts within it
                        reason = re.sub(r" at line 1 column (\d+)$", r" at column \1", reason)
                    return f"{path}{f', line {number}' if per_line else ''}: {reason}"
    return None

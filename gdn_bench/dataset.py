"""The embedded trace set gdn_bench/data: every definition with its committed workloads
(decode: the contest's batch mix; prefill: a small CPU subset), and loading any trace set.

Layout (flashinfer-bench's): definitions/gdn/<def>.json, workloads/gdn/<def>.jsonl and
blob/workloads/gdn/<def>/*.safetensors. `write_trace_set` rebuilds it deterministically
from SEED; `load_trace_set` opens any trace set without creating it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from gdn_bench.definitions import DEFINITIONS
from gdn_bench.paths import EMBEDDED_PATH

if TYPE_CHECKING:  # flashinfer-bench is imported where it is used: make_dataset parses its arguments first
    from flashinfer_bench import TraceSet

SEED = 20260301


def write_trace_set(root: Path = EMBEDDED_PATH, seed: int = SEED) -> TraceSet:
    """(Re)write the whole embedded trace set under `root`, deterministically from `seed`."""
    from flashinfer_bench import TraceSet

    from gdn_bench.trace_cache import new_trace_set

    root = Path(root)
    for sub in ("definitions", "workloads", "blob"):
        shutil.rmtree(root / sub, ignore_errors=True)
    for spec in DEFINITIONS.values():
        definition = spec.build_definition()
        spec.write_embedded(new_trace_set(root, definition), definition.name, seed)
    return TraceSet.from_path(str(root))


def load_trace_set(path: Path | str | None = None, definition: str = DEFINITIONS["decode"].name) -> TraceSet:
    """Open the trace set at `path` (default: the embedded one) and check it has `definition`.

    Unlike TraceSet.from_path, a missing folder is an error, never silently created, a file it
    cannot read is named (ValueError: the file, the line, the reason), and so is the first
    workload of `definition` that could not run (gdn_bench.trace_set_checks: its file, line,
    uuid and why), before any case runs.
    """
    from flashinfer_bench import TraceSet
    from pydantic import ValidationError

    from gdn_bench.trace_set_checks import first_invalid_entry, workload_problems

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
    problems = workload_problems(root, trace_set.definitions[definition])
    if problems:
        more = f" (and {len(problems) - 1} more workloads that cannot run)" if len(problems) > 1 else ""
        raise ValueError(f"dataset {root}: {problems[0]}{more}")
    return trace_set

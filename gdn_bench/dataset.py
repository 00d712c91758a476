"""The embedded trace set gdn_bench/data: every definition with its committed workloads
(decode: the contest's batch mix; prefill: a small CPU subset), and loading any trace set.

Layout (flashinfer-bench's): definitions/gdn/<def>.json, workloads/gdn/<def>.jsonl and
blob/workloads/gdn/<def>/*.safetensors. `write_trace_set` rebuilds it deterministically
from SEED, atomically; `load_trace_set` opens any trace set without creating it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from gdn_bench.definitions import DEFINITIONS
from gdn_bench.paths import EMBEDDED_PATH

if TYPE_CHECKING:  # flashinfer-bench is imported where it is used: make_dataset parses its arguments first
    from flashinfer_bench import TraceSet

SEED = 20260301


def write_trace_set(root: Path, seed: int = SEED) -> TraceSet:
    """Write the embedded trace set (every definition and its committed workloads) at `root`,
    deterministically from `seed`; returns it, loaded from `root`.

    Atomic: it is built in a temporary folder beside `root` and swapped in only once
    complete, so an error (or Ctrl-C) leaves `root` as it was. An existing `root` may hold
    only files that this writes (an earlier run's): ValueError naming the first other file
    otherwise, before `root` is touched.
    """
    from flashinfer_bench import TraceSet

    from gdn_bench.trace_cache import new_trace_set

    root = Path(root).absolute()
    root.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=root.parent))
    fresh, old = stage / "new", stage / "old"
    try:
        fresh.mkdir()
        for spec in DEFINITIONS.values():
            definition = spec.build_definition()
            spec.write_embedded(new_trace_set(fresh, definition), definition.name, seed)
        if root.exists():
            _check_replaceable(root, fresh)
            shutil.copymode(root, fresh)
            root.rename(old)
        try:
            fresh.rename(root)
        except BaseException:
            if old.exists():
                old.rename(root)
            raise
    finally:
        if root.exists() or not old.exists():  # never the old trace set's only copy
            shutil.rmtree(stage, ignore_errors=True)
    return TraceSet.from_path(str(root))


def _files(root: Path) -> set[Path]:
    """Every entry under `root` that is not a folder, relative to it."""
    return {p.relative_to(root) for p in root.rglob("*") if p.is_symlink() or not p.is_dir()}


def _check_replaceable(root: Path, fresh: Path) -> None:
    """ValueError unless every file under `root` is one that `fresh` has too."""
    others = sorted(_files(root) - _files(fresh))
    if others:
        more = f" and {len(others) - 1} more" if len(others) > 1 else ""
        raise ValueError(f"{root} holds files that make_dataset does not write ({root / others[0]}{more}); they "
                         "would be lost: name a new or empty folder, or one it wrote")


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

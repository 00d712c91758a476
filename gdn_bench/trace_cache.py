"""Generated trace sets in the cache folder (gdn_bench.paths.cache_dir: $GDN_BENCH_CACHE, else
~/.cache/gdn-bench): written once, atomically, and again when their generator changes.

A folder is complete when its stamp file holds the generator's key (a version, a seed).
It is written into a temporary folder beside it and renamed into place, so an interrupted
run or a concurrent one never leaves a half-written trace set under the final name.
"""

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from flashinfer_bench import Definition, TraceSet
from flashinfer_bench.data import save_json_file

from gdn_bench.paths import cache_dir, cache_dir_origin

STAMP = "generator.json"


def new_trace_set(root: Path, definition: Definition) -> TraceSet:
    """An empty trace set at `root` holding `definition` (written to definitions/)."""
    save_json_file(definition, root / "definitions" / definition.op_type / f"{definition.name}.json")
    return TraceSet(root=root, definitions={definition.name: definition})


def _stamped(root: Path, key: dict) -> bool:
    try:
        return json.loads((root / STAMP).read_text(encoding="utf-8")) == key
    except (OSError, ValueError):
        return False


def materialized(folder: str, key: dict, write: Callable[[Path], None]) -> Path:
    """cache_dir()/folder, first (re)written by write(root) unless it is stamped with `key`;
    ValueError, naming the cache folder and where it came from, when it cannot be written."""
    root = cache_dir() / folder
    if _stamped(root, key):
        return root
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        fresh = Path(tempfile.mkdtemp(prefix=f".{folder}-", dir=root.parent))
    except OSError as e:
        raise ValueError(f"cannot write the generated trace set {folder} into the cache folder {root.parent} "
                         f"({cache_dir_origin()}): {e.strerror}") from None
    try:
        write(fresh)
        (fresh / STAMP).write_text(json.dumps(key), encoding="utf-8")
        if root.exists() and not _stamped(root, key):  # another generator's output: replace it
            stale = Path(tempfile.mkdtemp(prefix=f".{folder}-stale-", dir=root.parent))
            root.rename(stale / folder)
            shutil.rmtree(stale)
        fresh.rename(root)
    except OSError:
        if not _stamped(root, key):  # not a concurrent run that finished first
            raise
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    return root

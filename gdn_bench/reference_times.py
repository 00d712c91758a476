"""The definition reference's time per workload, measured once per GPU model and kept in a JSON
file (REFERENCE_FILE in the cache folder, gdn_bench.paths.cache_dir, unless named).

The contest scores a definition by the mean over its workloads of the reference's time over
the solution's, the reference being the definition's own `reference` text, timed by the
evaluator's timer (gdn_bench.evaluator_timing). That reference is slow (prefill's loops over
tokens: seconds per call at 8192 tokens), so its times are kept. An entry's key
(`reference_key`) is a hash of what the time depends on: the GPU model, the timing method
(which timer, with its warm-up / iterations / trials: ReferenceTimer.method), the whole
definition (its reference text included), and the workload's record (uuid, axes, inputs) with
the bytes of every blob it reads. A changed definition, trace set or timer gives new keys, so
a stale time is never used; the old entries stay in the file, unused. Entries written before
issue 27 (the kit's own torch.profiler timer, keys without a method) are never found, so
every time is measured anew with the evaluator's timer. The file is plain JSON, and can be
copied to another machine:

    {"version": 1, "entries": {key: {"us": µs, "samples": n, "method": ..., "timer": how, "evaluators": bool,
                                     "versions": {...}, "gpu": ..., "definition": ..., "workload": uuid,
                                     "axes": {...}, "date": ..., "host": ...}}}

"us" is the time; "samples" how many calls were timed for it; "timer" says in words which
timer ran and how (ReferenceTimer.describe: the evaluator's, the mean of `trials` medians of
`iterations` calls; or the kit's fallback and why), "evaluators" whether it was the
evaluator's own, "versions" those of torch, flashinfer-bench, FlashInfer and cupti-python.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import tempfile
from dataclasses import dataclass, field
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from gdn_bench.paths import cache_dir

if TYPE_CHECKING:  # flashinfer-bench is imported where it is used: command lines read MODES before it
    from flashinfer_bench import Definition, Workload

REFERENCE_FILE = "reference-times.json"
VERSION = 1
# What run_local's --reference takes: use the cached times and measure the missing ones;
# measure every one anew (replacing the cached ones); or measure none.
MODES = ("cached", "measure", "skip")


def default_file() -> Path:
    """REFERENCE_FILE in the cache folder."""
    return cache_dir() / REFERENCE_FILE


def _canonical(model) -> bytes:
    return json.dumps(model.model_dump(mode="json"), sort_keys=True).encode()


def _file_digest(path: Path) -> bytes:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").digest()


def blob_files(workload: Workload, root: Path | None) -> list[Path]:
    """The blob files the workload's inputs read (once each, sorted), under the trace set's root."""
    paths = {spec.path for spec in workload.inputs.values() if spec.type == "safetensors"}
    return [Path(root or ".") / p for p in sorted(paths)]


def reference_key(gpu: str, method: str, definition: Definition, workload: Workload, root: Path | None) -> str:
    """The cache key of the reference's time on `workload`: a hash of the GPU model, the timing
    method, the whole definition, the workload's record and the bytes of its blobs (read from
    the trace set at `root`)."""
    parts = [hashlib.sha256(part).digest()
             for part in (gpu.encode(), method.encode(), _canonical(definition), _canonical(workload))]
    parts += [_file_digest(p) for p in blob_files(workload, root)]
    return hashlib.sha256(b"".join(parts)).hexdigest()


def new_entry(us: float, samples: int, timing: dict, gpu: str, definition: Definition, workload: Workload) -> dict:
    """One measured time (`samples` calls timed) with how (`timing`: its "method", "timer",
    "evaluators" and "versions"), what it was measured on and when (the key says which inputs)."""
    return {"us": us, "samples": samples, **timing, "gpu": gpu, "definition": definition.name,
            "workload": workload.uuid, "axes": dict(workload.axes), "host": platform.node(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def _read(path: Path) -> dict[str, dict]:
    """The entries of the file at `path` ({} if there is none); ValueError naming the file if
    it is not one of these files."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise ValueError(f"reference times file {path}: cannot read it ({e})") from None
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("entries"), dict):
        raise ValueError(f"reference times file {path}: expected {{\"version\": {VERSION}, \"entries\": {{...}}}}")
    return data["entries"]


def as_cached(reference: dict[str, dict]) -> dict[str, dict]:
    """The entries a run measured, by key, from a Results.reference ({uuid: entry with its key
    and source}): what run_modal writes into the local file after its jobs."""
    return {e["key"]: {k: v for k, v in e.items() if k not in ("key", "source")}
            for e in reference.values() if e["source"] == "measured"}


@dataclass
class ReferenceTimes:
    """Cached reference times by key. With a `path`, they are read from that file and every
    one added is written back at once (merged with what the file holds by then, atomically), so
    an interrupted run keeps what it measured; with none (run_modal's jobs, which get the
    entries they may need and return what they measure), they live in memory only."""

    path: Path | None = None
    entries: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> "ReferenceTimes":
        """The times in the file at `path` (none if it does not exist yet)."""
        return cls(Path(path), _read(Path(path)))

    def get(self, key: str) -> dict | None:
        return self.entries.get(key)

    def add(self, key: str, entry: dict) -> None:
        """Keep `entry` under `key`, replacing any older one, and write the file if there is one."""
        self.entries[key] = entry
        if self.path is not None:
            self.save({key: entry})

    def save(self, new: dict[str, dict]) -> None:
        """Write the file: the entries it holds now (another run may have added some) with `new`
        over them, through a temporary file renamed into place."""
        merged = {**_read(self.path), **new}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"version": VERSION, "entries": merged}, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _split(mode: str, keys: dict[str, str], workloads: list[Workload],
           times: ReferenceTimes) -> tuple[dict[str, dict], list[Workload]]:
    """({uuid: cached entry, with its "key" and "source"}, the workloads to measure) under
    `mode`, the workloads' keys being `keys` ({uuid: key})."""
    if mode not in MODES:
        raise ValueError(f"reference mode {mode!r}: expected one of {', '.join(MODES)}")
    found, todo = {}, []
    for w in workloads:
        cached = times.get(keys[w.uuid]) if mode != "measure" else None
        if cached:
            found[w.uuid] = {**cached, "key": keys[w.uuid], "source": "cached"}
        elif mode != "skip":
            todo.append(w)
    return found, todo


def to_measure(mode: str, gpu: str, method: str, definition: Definition, root: Path | None,
               workloads: list[Workload], times: ReferenceTimes) -> list[Workload]:
    """The workloads `collect` will measure (with the same arguments, `method` being
    timing["method"]): those with no time in `times` unless `mode` is "measure" (all) or
    "skip" (none). What a run's estimate counts before it starts."""
    keys = {w.uuid: reference_key(gpu, method, definition, w, root) for w in workloads}
    return _split(mode, keys, workloads, times)[1]


def collect(mode: str, gpu: str, definition: Definition, root: Path | None, workloads: list[Workload],
            times: ReferenceTimes, measure: Callable[[Workload], tuple[float, int]], timing: dict) -> dict[str, dict]:
    """The reference's time on each workload, as {uuid: entry, with its "key" and "source"},
    timed as `timing` says ({"method": what the key holds, "timer": in words, "evaluators": ...,
    "versions": ...}):
    the cached one unless `mode` is "measure"; where there is none, unless `mode` is "skip",
    measure(workload), (µs, the number of calls timed), with a progress bar, added to `times`
    ("measured"). A timing that fails gives an entry with no time and its message ("failed");
    a workload with no time and none measured has no entry."""
    from gdn_bench.timing import TimingError

    keys = {w.uuid: reference_key(gpu, timing["method"], definition, w, root) for w in workloads}
    found, todo = _split(mode, keys, workloads, times)
    for w in tqdm(todo, desc="definition reference", unit="workload", disable=not todo):
        try:
            us, samples = measure(w)
        except TimingError as e:
            found[w.uuid] = {"us": None, "key": keys[w.uuid], "source": "failed",
                             "message": f"reference timing failed: {e}"}
            continue
        entry = new_entry(us, samples, timing, gpu, definition, w)
        times.add(keys[w.uuid], entry)
        found[w.uuid] = {**entry, "key": keys[w.uuid], "source": "measured"}
    return found

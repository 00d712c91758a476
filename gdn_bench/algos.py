"""Algorithms: every one is a flashinfer-bench Solution packed from a folder of sources,
exactly as scripts/pack_solution.py packs the submission. Each definition lists its own
(gdn_bench.definitions).

An algorithm whose optional dependency is missing, that needs a GPU the machine lacks, or
whose entry file does not exist yet reports why through `Algo.unavailable()`; the runner
skips it with that line.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from gdn_bench.packing import PackError, SolutionConfig, pack, read_config
from gdn_bench.paths import CONFIG_NAME, project_root

if TYPE_CHECKING:  # flashinfer-bench is imported where it is used (gdn_bench.definitions.spec says why)
    from flashinfer_bench import Solution


@dataclass(frozen=True)
class Algo:
    """One row of the report. `config` None means: the submission of `definition`, read from
    config.toml as the evaluator reads it (see packing.read_config). `source_dir` is relative
    to the project checkout (gdn_bench.paths.project_root)."""

    name: str
    summary: str
    definition: str
    config: SolutionConfig | None
    source_dir: str
    needs_gpu: bool = False
    min_compute_capability: tuple[int, int] | None = None
    requires: tuple[str, ...] = ()  # importable modules it needs
    extra: str | None = None  # `pip install -e ".[extra]"` provides them
    # Timed after every other algorithm: running it changes how other kernels time in the
    # same process (docs/perf.md, "Notes moved from the code").
    time_last: bool = False
    # A Python loop of small launches (the pt-references): its launches per call from the
    # workload's axes, which set its time (gdn_bench.run_estimate); None for a kernel or few.
    launches: Callable[[dict], int] | None = None

    def resolved_config(self) -> SolutionConfig:
        """The SolutionConfig to pack (raises PackError if config.toml is broken)."""
        return self.config or read_config(project_root() / CONFIG_NAME, definition=self.definition)

    def entry_file(self) -> Path:
        """The source file holding the entry point."""
        return project_root() / self.source_dir / self.resolved_config().entry_point.partition("::")[0]

    def unavailable(self) -> str | None:
        """Why this algorithm cannot run here, or None if it can: everything it lacks at once (a
        GPU and the packages, with how to install them), else the first of a too old GPU or a
        missing entry file."""
        import torch

        missing = [m for m in self.requires if importlib.util.find_spec(m) is None]
        needs = (["a CUDA GPU"] if self.needs_gpu and not torch.cuda.is_available() else []) + missing
        if needs:
            how = f'pip install -e ".[{self.extra}]"' if self.extra else f"pip install {' '.join(missing)}"
            return f"needs {' and '.join(needs)}" + (f" ({how})" if missing else "")
        if self.min_compute_capability and torch.cuda.is_available():
            have = torch.cuda.get_device_capability()
            if have < self.min_compute_capability:
                want = "sm_%d%d" % self.min_compute_capability
                return f"needs {want} or newer; this GPU is sm_{have[0]}{have[1]}"
        if self.config is None:
            try:
                entry = self.entry_file()
            except PackError:
                return None  # a broken config.toml: packing reports it, as this algorithm's PACK_ERROR
            if not entry.is_file():
                return f"its entry file {entry.relative_to(project_root())} does not exist yet"
        return None

    def solution(self) -> Solution:
        """The packed Solution (raises PackError if the sources are broken)."""
        return pack(self.resolved_config(), project_root() / self.source_dir)


def baseline_config(name: str, definition: str, language: str = "python", entry: str = "main.py::run",
                    dps: bool = False) -> SolutionConfig:
    """How a baseline or variant folder is packed (not read from config.toml)."""
    return SolutionConfig(
        name=name, definition=definition, author="gdn-contest-kit", description="",
        language=language, entry_point=entry, destination_passing_style=dps,
    )


class UnknownAlgorithm(ValueError):
    """Names that are not algorithms of the definition at hand (`names`: the unknown ones, or
    the text itself when it names none)."""

    def __init__(self, names: list[str], valid: list[str]):
        super().__init__(f"unknown algorithm {', '.join(names)}; valid: {', '.join(valid)}, all")
        self.names = names


def resolve(algos: dict[str, Algo], spec: str) -> list[Algo]:
    """'all' or a comma-separated list of names -> algorithms; unknown names raise UnknownAlgorithm."""
    if spec.strip() == "all":
        return list(algos.values())
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in algos]
    if unknown or not names:
        raise UnknownAlgorithm(unknown or [repr(spec)], list(algos))
    return [algos[n] for n in dict.fromkeys(names)]


def load_module(path: Path, name: str) -> ModuleType:
    """Import a source file as a module of its own (a script, a baseline's main.py)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_solution_file(path: Path, package: str) -> ModuleType:
    """Import a solution's source file as flashinfer-bench's builder does: as a module of a
    package made of its folder, so that its relative imports (`from .shared import ...`) find
    the files beside it. `package` names that package, afresh: a package of that name
    imported before is dropped first, with its modules."""
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]
    spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
    spec.submodule_search_locations = [str(Path(path).parent)]
    sys.modules[package] = importlib.util.module_from_spec(spec)
    return importlib.import_module(f"{package}.{Path(path).stem}")

"""What the harness knows about one contest definition, in one frozen record (DefinitionSpec).
Every module takes definition-specific facts from here, so a new definition is one new
folder in this package plus one line in its registry.

The registry is read when a command line is built, so it imports neither flashinfer-bench
nor torch (about 1.3 s): its callables import them when called (tests/test_scripts.py holds
every script to parsing its arguments without them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gdn_bench.algos import Algo

if TYPE_CHECKING:  # only for the annotations
    from flashinfer_bench import Definition, TensorSpec, TraceSet, Workload


def tensor(shape: list[str] | None, dtype: str, description: str) -> TensorSpec:
    """A Definition input or output: axis names (None for a scalar), dtype, what it is."""
    from flashinfer_bench import TensorSpec

    return TensorSpec(shape=shape, dtype=dtype, description=description)


@dataclass(frozen=True)
class Harness:
    """flashinfer-bench Benchmark settings the contest uses for this definition."""

    warmup: int
    iterations: int
    trials: int


@dataclass(frozen=True)
class DefinitionSpec:
    """One definition: its Definition, trace sets, algorithms, report grouping and timing."""

    name: str  # the contest's full name, e.g. gdn_prefill_qk4_v8_d128_k_last
    short: str  # what --definition takes besides the full name: decode, prefill
    summary: str
    build_definition: Callable[[], Definition]  # with this project's reference as its text
    reference_path: Path  # self-contained module whose text is the Definition's reference
    algos: tuple[Algo, ...]
    submission: str  # the algorithm packed from config.toml: run_local's default
    size_axis: str  # the axis --<size flag> filters and rows are ordered by
    size_flag: str  # run_local's flag for it, e.g. --batch-sizes
    group_of: Callable[[dict], int]  # report group of a workload, from its axes
    group_label: str  # the group column's title in the report, e.g. "B"
    group_title: str  # the group axis in words, for plots
    harness: Harness
    # Trace set root when --dataset is not given; the flag is whether a GPU runs it (the CPU
    # pass takes a small embedded set where generating the full one would not pay off).
    default_dataset: Callable[[bool], Path]
    # The workloads of default_dataset(True), known without writing it (run_modal plans its
    # jobs from them before anything runs).
    planned_workloads: Callable[[], list[Workload]]
    # The workloads of a trace set that the CPU pass checks when nothing selects them, and
    # which ones those are, in words.
    cpu_subset: Callable[[list[Workload]], list[Workload]]
    cpu_subset_note: str
    # A workload in the report's words: its size (e.g. "B=4") from its axes, and how its
    # inputs are made (e.g. "random", "model-like").
    workload_label: Callable[[dict], str]
    workload_kind: Callable[[Workload], str]
    # Adds this definition's part of the embedded trace set (gdn_bench/data) to a trace set
    # that already holds the Definition, deterministically from the seed.
    write_embedded: Callable[[TraceSet, int], None]
    # The memory floor per report group: the shape of the float32 tensor whose copy (read once,
    # written once) it is, timed on a GPU by the harness (timing.copy_floor_us); None where
    # a floor means nothing.
    floor_shape: Callable[[int], tuple[int, ...]] | None
    job_groups: int  # run_modal jobs per algorithm
    # The definition reference's launches per call from a workload's axes, counted on CPU
    # (tests/test_run_estimate.py): its time's estimate (gdn_bench.run_estimate); None where
    # the axes do not give them (prefill's: its longest sequence).
    reference_launches: Callable[[dict], int] | None = None

    @property
    def algos_by_name(self) -> dict[str, Algo]:
        return {a.name: a for a in self.algos}

    def submission_entry(self) -> Path:
        """The submission's entry file in the project checkout (solution/<language>/<file>, from
        its config.toml)."""
        return self.algos_by_name[self.submission].entry_file()

    def reference_source(self) -> str:
        return self.reference_path.read_text(encoding="utf-8")

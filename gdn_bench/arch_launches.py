"""Which launches the Triton submissions make on a GPU this machine need not have: each entry
point of ENTRIES called at each call shape of SHAPES, on CPU tensors that nothing reads, under
shared.planning_for (the GPU's compute capability) and shared.recording_launches (nothing is
launched or compiled); each launch with the call that made it and the setting that chose it
(SETTINGS: the table each kernel's launch comes from; the row is the one the call's plan
iterated last, which is the row a first-match lookup chose).

When the submissions' launches change (a kernel, a table, a new stage module), this file
changes with them, and only this file: a kernel's line in SETTINGS (its file and table), and
shapes in SHAPES that reach every row of every table (the report lists the rows no call
reached, and the tests require none).
"""

import contextlib
import importlib
import inspect
from pathlib import Path
from typing import NamedTuple

import torch

from gdn_bench.algos import load_solution_file
from gdn_bench.definitions import resolve
from gdn_bench.shapes import DEFAULT_SCALE, HEAD_SIZE, NUM_V_HEADS

PACKAGE = "gdn_arch_report"  # the package the submission files are loaded as (with their shared.py)
FILES = ("kernel", "prefill", "mtp")


class Setting(NamedTuple):
    """Where a kernel's launch is chosen: a submission file (its stem) and the name there of
    its table (rows, or rows per shared.arch_key in a dict) or of a constant."""
    module: str
    name: str


SETTINGS = {
    "_gdn_decode_kernel": Setting("kernel", "LAUNCH_TABLES"),
    "_gdn_mtp_kernel": Setting("mtp", "LAUNCH_TABLES"),
    "token_walk_kernel": Setting("prefill", "WALK_TABLE"),
    "chunk_prep_kernel": Setting("prefill", "PREP_TABLE"),
    "span_summary_kernel": Setting("prefill", "SUMMARY_TABLE"),
    "span_fixup_kernel": Setting("prefill", "FIXUP_TABLE"),
    "span_pass_kernel": Setting("prefill", "PASS_TABLE"),
    "hopper_pass_kernel": Setting("prefill", "HOPPER_PASS_TABLE"),
    "hopper_summary_kernel": Setting("prefill", "HOPPER_PASS_TABLE"),  # the Hopper pass's launch
}

# Per definition, its entry points (file.function) and the arguments each call changes from the
# definition's own (None: left out). The arguments are the definition's inputs and outputs,
# and for the pooled calls a pool (mtp: initial_state) with int32 slot indices.
ENTRIES = {
    "decode": (("kernel.kernel", {}), ("kernel.kernel", {"state": None}), ("kernel.pooled_decode", {})),
    "prefill": (("prefill.kernel", {}), ("prefill.kernel", {"state": None}), ("prefill.pooled_prefill", {})),
    "mtp": (("mtp.kernel", {}), ("mtp.pooled_mtp", {}), ("mtp.pooled_mtp", {"intermediate_states": None})),
}
# Per definition, its call shapes (the definition's axes): at least one per row of every table.
# decode and mtp: a batch size per LAUNCH_TABLES row (mtp at its serving mix's shortest and
# longest draft); prefill: WALK_TABLE's rows (one-token sequences, few and many; short ones, few
# and many), PASS_TABLE's by (sequence, span) pieces (1 and 2, 8, 16; one sequence and several),
# spans (SUMMARY_TABLE, FIXUP_TABLE: one sequence of 32 blocks, below the Hopper kernels' 33) and
# HOPPER_PASS_TABLE's (16 sequences of 512: many pieces, no spans; one long sequence and four:
# spans, the Hopper summary too).
SHAPES = {
    "decode": ({"batch_size": 1}, {"batch_size": 64}),
    "mtp": ({"batch_size": 1, "seq_len": 2, "pool_size": 2}, {"batch_size": 64, "seq_len": 8, "pool_size": 72}),
    "prefill": tuple({"total_seq_len": t, "num_seqs": n, "len_cu_seqlens": n + 1} for t, n in (
        (1, 1), (64, 64), (8, 1), (64, 16), (512, 1), (1024, 2), (1024, 8), (2048, 1), (8192, 16), (8192, 1),
        (8192, 4))),
}
_AXIS_LABELS = {"batch_size": "B", "seq_len": "T", "total_seq_len": "T", "num_seqs": "N", "pool_size": "P"}


class Launch(NamedTuple):
    """A recorded launch (shared.LaunchRecord), the call that made it (in words) and the
    setting that chose it ("PASS_TABLE row 2", "LAUNCH_TABLES['sm100'] row 0", "PREP_WARPS")."""
    record: object
    call: str
    setting: str


def load_submissions(root: Path) -> dict:
    """The submission files of checkout `root` (FILES and their shared.py) loaded as one
    package, as the evaluator loads them: {stem: module}."""
    folder = Path(root) / "solution" / "triton"
    load_solution_file(folder / f"{FILES[0]}.py", PACKAGE)
    return {name: importlib.import_module(f"{PACKAGE}.{name}") for name in (*FILES, "shared")}


def launches(modules: dict, capability: tuple[int, int]) -> tuple[list[Launch], list[str]]:
    """Every launch of every call of ENTRIES at SHAPES on a GPU of `capability`, and the
    table rows no call reached (as "PASS_TABLE row 1")."""
    shared = modules["shared"]
    arch = shared.capability_arch(capability)
    found, reached = [], set()
    with shared.planning_for(capability):
        for definition, shapes in SHAPES.items():
            for axes in shapes:
                named = _arguments(definition, axes)
                for entry, changes in ENTRIES[definition]:
                    file, function = entry.split(".")
                    with _traced_tables(modules) as tables, shared.recording_launches() as recorded:
                        _call(getattr(modules[file], function), dict(named, **changes))
                    label = " ".join([entry, *(f"{_AXIS_LABELS[a]}={n}" for a, n in axes.items() if a in _AXIS_LABELS),
                                      *(f"{name}=None" for name in changes)])
                    for record in recorded:
                        setting, row = _chosen(record.fn.__name__, tables, arch)
                        reached.add((setting, row))
                        found.append(Launch(record, label, setting if row is None else f"{setting} row {row}"))
    with _traced_tables(modules) as tables:
        rows = {(_setting_name(kernel, table, arch), row) for kernel, table in tables.items()
                for row in range(len(_rows(table, arch)))}
    return found, [f"{name} row {row}" for name, row in sorted(rows - reached)]


def _arguments(definition: str, axes: dict) -> dict:
    """The named arguments of a call at `axes`: the definition's inputs and outputs as empty
    CPU tensors (scale 1/sqrt(128)), and the pooled entry points' names for a pool, its slot
    indices and the buffer of states."""
    spec = resolve(definition).build_definition()
    named = {}
    for (name, shape), dtype in zip(zip(spec.inputs, spec.get_input_shapes(axes)), spec.torch_input_dtypes):
        named[name] = DEFAULT_SCALE if shape is None else torch.empty(shape, dtype=dtype)
    for name, shape, dtype in zip(spec.outputs, spec.get_output_shapes(axes), spec.torch_output_dtypes):
        named[name] = torch.empty(shape, dtype=dtype)
    rows = axes.get("num_seqs", axes.get("batch_size"))
    pool = named.get("initial_state")
    named["state_pool"] = torch.empty(rows + 1, NUM_V_HEADS, HEAD_SIZE, HEAD_SIZE) if pool is None else pool
    named["read_indices"] = named["indices"] = named.get("initial_state_indices", torch.empty(rows, dtype=torch.int32))
    named["intermediate_states"] = named.get("intermediate_states_buffer")
    return named


def _call(function, named: dict) -> None:
    """`function` called with the arguments of `named` that it takes (by parameter name)."""
    function(**{name: named[name] for name in inspect.signature(function).parameters if name in named})


class _TracedRows(tuple):
    """A table's rows that note the last one iterated: the row a first-match lookup chose.
    Equal only to itself, so that a plan cached under a table's rows (kernel.py's _plan) is
    planned anew."""

    chosen = None
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __iter__(self):
        for index, row in enumerate(tuple.__iter__(self)):
            self.chosen = index
            yield row


@contextlib.contextmanager
def _traced_tables(modules: dict):
    """Inside: each table of SETTINGS replaced in its module by _TracedRows (a dict of them for
    a table per architecture); yields {kernel: that replacement}. Constants are left as they are."""
    traced, saved = {}, []
    for kernel, (file, name) in SETTINGS.items():
        value = getattr(modules[file], name)
        if isinstance(value, dict):
            traced[kernel] = {arch: _TracedRows(rows) for arch, rows in value.items()}
        elif isinstance(value, tuple):
            traced[kernel] = _TracedRows(value)
        else:
            continue
        saved.append((modules[file], name, value))
        setattr(modules[file], name, traced[kernel])
    try:
        yield traced
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def _rows(table, arch: str) -> tuple:
    """A traced table's rows on `arch` (none where a table by architecture has no entry for it:
    its kernel does not run there, as HOPPER_PASS_TABLE's off Hopper)."""
    return table.get(arch, ()) if isinstance(table, dict) else table


def _setting_name(kernel: str, table, arch: str) -> str:
    """How a kernel's table (or constant) is named in the report on `arch`."""
    name = SETTINGS[kernel].name
    return f"{name}[{arch!r}]" if isinstance(table, dict) else name


def _chosen(kernel: str, tables: dict, arch: str) -> tuple[str, int | None]:
    """(setting name, row read last or None) of `kernel`'s launch; a kernel SETTINGS does not
    name: ("not in SETTINGS", None)."""
    if kernel not in SETTINGS:
        return "not in SETTINGS", None
    if kernel not in tables:
        return SETTINGS[kernel].name, None
    return _setting_name(kernel, tables[kernel], arch), _rows(tables[kernel], arch).chosen

"""One tuning mechanism for any table of named rows in a submission file (scripts/tune_launch.py).

A table is a module-level tuple of NamedTuple rows, written as named calls, or a dict of such
tuples by architecture (shared.arch_key), of which a sweep tunes and rewrites the rows of the
GPU's architecture (`arch`) and leaves the others:

    LAUNCH_TABLES = {
        "sm90": (
            LaunchRow(max_batch=16, block_v=4, warps=1),
            LaunchRow(max_batch=None, block_v=16, warps=1),
        ),
        ...
    }

Its first fields are bounds: a call takes the first row whose bounds all hold, value <= bound
(None: no bound), so the last row of a table has none. The other fields are the row's
setting: constants, or NamedTuples of constants (`launch=Launch(block_v=16, warps=4, stages=3)`).

A TableSweep says how to tune one table: its name and bound fields, the settings to try and
the calls to time (probes, each at a point: the values its call compares with the bounds).
`sweep` forces each setting onto the loaded module as a one-row table with no bounds, checks
each probe's outputs with it (a setting that computes wrong on any probe is left out of every
one, with why: compilers do miscompile some configurations), and times the probe
(CUPTI span, cold L2: timing.kernel_time_us), each distinct launch once: settings whose calls
make the same launches (a plan that maps them to one, as prefill's on sm100) share one time,
found by recording the launches (`recorded_launches`). `best_rows` turns the times into rows, and
`write_table` writes them into the file as named rows (the class its rows are written with,
the fields in that class's order, NamedTuple settings by their class names), leaving the
rest of the file as it was.
"""

import ast
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from tqdm import tqdm

from gdn_bench.timing import kernel_time_us


@dataclass(frozen=True)
class Probe:
    """One call to time: `label` in words, `size` (the definition's size: decode's batch
    size, prefill's total tokens, what --batch-sizes / --seq-lens select), `point` (the values
    the table's bound fields are compared with, in their order) and `make`: loaded module ->
    (call, check), `check` raising AssertionError when the last call's outputs are wrong."""

    label: str
    size: int
    point: tuple[int, ...]
    make: Callable[[ModuleType], tuple[Callable[[], None], Callable[[], None]]]


@dataclass(frozen=True)
class TableSweep:
    """How to tune one table: its module-level name, its bound fields (in row order), the
    settings to try (loaded module -> dicts of the other fields, made with its classes) and
    the probes (loaded module -> Probes: a point may depend on the module's other settings)."""

    table: str
    bounds: tuple[str, ...]
    candidates: Callable[[ModuleType], list[dict]]
    probes: Callable[[ModuleType], list[Probe]]


def table_rows(module, name: str, arch: str | None):
    """Table `name`'s rows in `module`: the tuple, or its rows for `arch` in a dict by architecture."""
    value = getattr(module, name)
    return value[arch] if isinstance(value, dict) else value


def _set_rows(module, name: str, arch: str | None, rows: tuple) -> None:
    """Make `rows` table `name`'s rows in `module` (for `arch` in a dict by architecture)."""
    value = getattr(module, name)
    if isinstance(value, dict):
        value[arch] = rows
    else:
        setattr(module, name, rows)


def recorded_launches(shared: ModuleType) -> Callable[[Callable[[], None]], tuple]:
    """A function of a call: the launches it makes, as a key (kernel, grid, constexprs, warps per
    launch), recorded by the submission package's `shared` (shared.recording_launches): nothing
    launches."""

    def launches(call: Callable[[], None]) -> tuple:
        with shared.recording_launches() as recorded:
            call()
        return tuple((r.fn.__name__, r.grid, r.constexprs, r.num_warps) for r in recorded)

    return launches


def plain(value):
    """`value` (a setting, a row, a list of them) with every NamedTuple as a dict of its fields
    (for JSON and comparisons)."""
    if hasattr(value, "_fields"):
        return {field: plain(v) for field, v in zip(value._fields, value)}
    if isinstance(value, dict):
        return {key: plain(v) for key, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def sweep(module: ModuleType, spec: TableSweep, probes: list[Probe], finalists: int = 4, repeats: int = 3,
          timer: Callable[[Callable[[], None]], float] = kernel_time_us, arch: str | None = None,
          launches: Callable[[Callable[[], None]], tuple] | None = None) -> list[dict]:
    """Time every setting of `spec` on every probe (see the module docstring), on the rows of
    `arch` where the table is one per architecture; the table is restored afterwards. The
    `finalists` fastest per probe are timed `repeats` more times and keep the median, so the
    choice rests on more than one sample near the top. A setting that does not fit the GPU
    (Triton's OutOfResources) gets us None; one whose outputs fail a probe's check is not run
    on the later probes, and its records (those up to that probe) get us None and `wrong`
    (what the check said, on which probe). With `launches` (recorded_launches), a setting
    whose call makes the launches an earlier setting's made on the probe is neither run nor
    checked: its record takes that one's time (or wrongness) and names it, `same_launch_as`.
    Records: probe, size, point, setting (a dict), us[, wrong][, same_launch_as]."""
    from triton.runtime.errors import OutOfResources  # triton only once a sweep runs (gdn_bench.device)

    table = table_rows(module, spec.table, arch)
    row_class, open_bounds = type(table[0]), dict.fromkeys(spec.bounds)
    candidates = spec.candidates(module)
    records, wrong = [], {}
    try:
        for probe in tqdm(probes, desc=spec.table, unit="probe"):
            call, check = probe.make(module)
            mine, made, repeated = [], {}, []  # made: launches -> the record that ran them
            for setting in candidates:
                if _setting_key(setting) in wrong:
                    continue
                _set_rows(module, spec.table, arch, (row_class(**open_bounds, **setting),))
                record = {"probe": probe.label, "size": probe.size, "point": list(probe.point), "setting": setting}
                made_now = launches(call) if launches else object()
                if made_now in made:
                    repeated.append((dict(record, same_launch_as=made[made_now]["setting"]), made[made_now]))
                    continue
                made[made_now] = record
                mine.append(record)
                try:
                    call()
                except OutOfResources:
                    record["us"] = None
                    continue
                try:
                    check()
                except AssertionError as e:
                    wrong[_setting_key(setting)] = f"wrong on {probe.label}: {str(e).splitlines()[0]}"
                    record["us"] = None
                    continue
                record["us"] = timer(call)
            for record in sorted((r for r in mine if r["us"] is not None), key=lambda r: r["us"])[:finalists]:
                _set_rows(module, spec.table, arch, (row_class(**open_bounds, **record["setting"]),))
                record["us"] = statistics.median([record["us"]] + [timer(call) for _ in range(repeats)])
            for record, original in repeated:
                record["us"] = original["us"]
                if _setting_key(original["setting"]) in wrong:
                    wrong[_setting_key(record["setting"])] = wrong[_setting_key(original["setting"])]
                mine.append(record)
            records += mine
    finally:
        _set_rows(module, spec.table, arch, table)
    for record in records:
        if _setting_key(record["setting"]) in wrong:
            record.update(us=None, wrong=wrong[_setting_key(record["setting"])])
    return records


def _setting_key(setting: dict) -> tuple:
    return tuple(setting.items())


def best_rows(records: list[dict], bounds: tuple[str, ...], tolerance: float = 0.02) -> list[dict]:
    """Table rows (dicts: the bound fields, then the setting's) from a sweep's records.

    A setting's time at a point is the sum over the probes at that point (a setting that
    did not run on one of them is left out there). One bound: at each swept point every
    setting within `tolerance` of the fastest counts as best (timings repeat to a few
    percent, so closer calls are noise). Walking up the points, the current setting is kept
    while it stays among the best; otherwise the best setting that stays among the best for
    the most following points takes over. A row serves every
    point up to its last swept one; the last row is unbounded (None). Several bounds, in
    order: the points are grouped by the first bound's value and each group's rows found
    over the others; neighbouring groups with the same rows merge, and the last group is
    unbounded in the first."""
    sums, settings, probes = {}, {}, {}
    for record in records:
        point, key = tuple(record["point"]), _setting_key(record["setting"])
        probes.setdefault(point, set()).add(record["probe"])
        if record["us"] is not None:
            settings[key] = record["setting"]
            sums.setdefault(point, {}).setdefault(key, []).append(record["us"])
    times = {point: {key: sum(us) for key, us in by_key.items() if len(us) == len(probes[point])}
             for point, by_key in sums.items()}
    return [dict(zip(bounds, limits), **settings[key]) for limits, key in _rows(times, tolerance)]


def _rows(times: dict[tuple, dict], tolerance: float) -> list[tuple[tuple, tuple]]:
    """[(bounds, setting key)] for `times` {point: {setting key: us}} (see best_rows)."""
    if all(len(point) == 1 for point in times):
        return [((bound,), key) for bound, key in _one_bound({p[0]: t for p, t in times.items()}, tolerance)]
    groups = []  # [first bound, rows over the other bounds]
    for first in sorted({point[0] for point in times}):
        rows = _rows({p[1:]: t for p, t in times.items() if p[0] == first}, tolerance)
        if groups and groups[-1][1] == rows:
            groups[-1][0] = first
        else:
            groups.append([first, rows])
    groups[-1][0] = None
    return [((first, *rest), key) for first, rows in groups for rest, key in rows]


def _one_bound(times: dict[int, dict], tolerance: float) -> list[tuple[int | None, tuple]]:
    """[(largest value, setting key)] over one bound (see best_rows)."""
    points = sorted(times)
    good = [{k for k, us in times[p].items() if us <= (1 + tolerance) * min(times[p].values())} for p in points]

    def run_length(key, start):
        n = 0
        while start + n < len(points) and key in good[start + n]:
            n += 1
        return n

    table = []  # [largest value, setting key]
    for i, point in enumerate(points):
        if table and table[-1][1] in good[i]:
            table[-1][0] = point
        else:
            key = max(sorted(good[i]), key=lambda k: (run_length(k, i), -times[point][k]))
            table.append([point, key])
    table[-1][0] = None
    return [(most, key) for most, key in table]


# --- The table in the file's text ----------------------------------------------------------


def _table_node(tree: ast.Module, name: str) -> ast.Assign:
    """The module-level `NAME = ...` assignment."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            return node
    raise ValueError(f"no module-level {name} assignment")


def _named_call(node: ast.expr, name: str):
    """(class name, {field: value}) of `Class(field=constant or named call, ...)`; ValueError
    for anything else."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args and node.keywords
            and all(k.arg for k in node.keywords)):
        raise ValueError(f"{name} row {ast.unparse(node)!r} is not Row(name=value, ...)")
    fields = {}
    for keyword in node.keywords:
        value = keyword.value
        fields[keyword.arg] = value.value if isinstance(value, ast.Constant) else _named_call(value, name)[1]
    return node.func.id, fields


def read_table(text: str, name: str, arch: str | None = None) -> list[dict]:
    """The rows of table `name` in a file's text (of `arch` where the table is a dict by
    architecture), each {field: value} (a NamedTuple setting as a dict: `plain`'s form), when
    every row is written `Row(name=value, ...)`; ValueError when it is written any other way."""
    return [fields for _, fields in _read_rows(text, name, arch)]


def _rows_node(text: str, name: str, arch: str | None) -> ast.Tuple:
    """The tuple literal of table `name`'s rows (of `arch` in a dict literal by architecture)."""
    node = _table_node(ast.parse(text), name).value
    if isinstance(node, ast.Dict):
        keys = [getattr(key, "value", None) for key in node.keys]
        if arch not in keys:
            raise ValueError(f"{name} has no rows for {arch!r}; it has {', '.join(map(repr, keys))}")
        node = node.values[keys.index(arch)]
    if not isinstance(node, ast.Tuple) or not node.elts:
        raise ValueError(f"{name} is not a tuple literal of rows" + (f" for {arch!r}" if arch else ""))
    return node


def _read_rows(text: str, name: str, arch: str | None) -> list[tuple[str, dict]]:
    return [_named_call(row, name) for row in _rows_node(text, name, arch).elts]


def _source(value) -> str:
    """A value as written in a row: a NamedTuple as Class(field=value, ...)."""
    if hasattr(value, "_fields"):
        return f"{type(value).__name__}({', '.join(f'{f}={_source(v)}' for f, v in zip(value._fields, value))})"
    return repr(value)


def write_table(rows: list[dict], path, name: str, fields: tuple[str, ...], arch: str | None = None) -> None:
    """Replace table `name` in the file at `path` (its rows of `arch` where it is a dict literal
    by architecture) with `rows` (best_rows' dicts), written as named rows of the class its rows
    are written with now, with `fields` in that order (the loaded module's row class's:
    `_fields`); refuses a file whose table is written otherwise, and rows whose fields are not
    those."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    classes = {cls for cls, _ in _read_rows(text, name, arch)}
    if len(classes) != 1:
        raise ValueError(f"{path}: {name}'s rows are written with several classes: {sorted(classes)}")
    [row_class] = classes
    for row in rows:
        if sorted(row) != sorted(fields):
            raise ValueError(f"{path}: a row names {list(row)}, {row_class} has the fields {list(fields)}")
    node = _rows_node(text, name, arch)
    lines = text.splitlines(keepends=True)
    indent = " " * (len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip(" ")))
    body = "".join(f"{indent}    {row_class}({', '.join(f'{f}={_source(row[f])}' for f in fields)}),\n" for row in rows)
    start = sum(map(len, lines[:node.lineno - 1])) + node.col_offset
    end = sum(map(len, lines[:node.end_lineno - 1])) + node.end_col_offset
    new = text[:start] + f"(\n{body}{indent})" + text[end:]
    if read_table(new, name, arch) != [plain({f: row[f] for f in fields}) for row in rows]:
        raise AssertionError(f"{name} did not read back as written")
    path.write_text(new, encoding="utf-8")

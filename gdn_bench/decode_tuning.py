"""Launch-configuration tuning of the decode submission on a GPU (scripts/tune_launch.py).

`sweep`: every valid (BV, warps) configuration of kernel.py at each batch size, checked
against float64 first, timed with CUPTI (cold L2). `best_table` turns a sweep into
LAUNCH_TABLE rows and `write_launch_table` writes them into kernel.py, as the named rows
(kernel.py's LaunchRow) the file holds.
"""

import ast
import statistics

from tqdm import tqdm

from gdn_bench.decode_bench import BATCH_SIZES, decode_inputs, decode_outputs, errors, load_submission
from gdn_bench.definitions.decode.definition import DECODE
from gdn_bench.shapes import HEAD_SIZE
from gdn_bench.timing import kernel_time_us


def valid_configs() -> list[tuple[int, int]]:
    """(BV, warps) pairs where every thread holds at least one 16-byte vector of the tile."""
    return [(bv, w) for bv in (2, 4, 8, 16, 32, 64) for w in (1, 2, 4, 8) if bv * HEAD_SIZE // (32 * w) >= 4]


def sweep(batch_sizes=BATCH_SIZES, configs=None, finalists: int = 4, repeats: int = 3) -> list[dict]:
    """CUPTI time of every config at every batch size (state present), each checked against
    float64 first. The `finalists` fastest per batch size are timed `repeats` more times and
    keep the median, so the choice rests on more than one sample near the top.
    Rows: batch_size, block_v, num_warps, us, floor_us."""
    sub = load_submission()
    configs = configs or valid_configs()
    rows = []
    for batch in tqdm(batch_sizes, desc="sweep", unit="batch"):
        inputs = decode_inputs(batch, seed=batch)
        output, new_state = decode_outputs(batch)
        args = (*inputs.values(), output, new_state)
        floor = DECODE.floor_us(batch)

        def timed(block_v, num_warps):
            sub.LAUNCH_TABLE = (sub.LaunchRow(max_batch=None, block_v=block_v, warps=num_warps),)
            return kernel_time_us(lambda: sub.kernel(*args))

        mine = []
        for block_v, num_warps in configs:
            sub.LAUNCH_TABLE = (sub.LaunchRow(max_batch=None, block_v=block_v, warps=num_warps),)
            sub.kernel(*args)
            state_err, out_err = errors(inputs, output, new_state)
            if state_err > 1e-5 or out_err > 1e-2:
                raise AssertionError(f"BV={block_v} warps={num_warps} B={batch}: errors {state_err}, {out_err}")
            mine.append({"batch_size": batch, "block_v": block_v, "num_warps": num_warps,
                         "us": timed(block_v, num_warps), "floor_us": floor})
        for row in sorted(mine, key=lambda r: r["us"])[:finalists]:
            samples = [row["us"]] + [timed(row["block_v"], row["num_warps"]) for _ in range(repeats)]
            row["us"] = statistics.median(samples)
        rows += mine
    return rows


def best_table(rows: list[dict], tolerance: float = 0.02) -> list[dict]:
    """LAUNCH_TABLE rows from a sweep, as dicts of kernel.py's LaunchRow fields (max_batch,
    block_v, warps).

    At each swept batch size, every config within `tolerance` of the fastest counts as best
    (timings repeat to a few percent, so closer calls are noise). Walking up the batch sizes,
    the current config is kept while it stays among the best; otherwise the best config that
    stays among the best for the most following batch sizes takes over. A row serves every
    batch up to its last swept size; the last row is unbounded (max_batch None)."""
    by_batch = {}
    for r in rows:
        by_batch.setdefault(r["batch_size"], {})[(r["block_v"], r["num_warps"])] = r["us"]
    batches = sorted(by_batch)
    good = [{c for c, us in by_batch[b].items() if us <= (1 + tolerance) * min(by_batch[b].values())} for b in batches]

    def run_length(config, start):
        n = 0
        while start + n < len(batches) and config in good[start + n]:
            n += 1
        return n

    table = []  # [max batch, (BV, warps)]
    for i, batch in enumerate(batches):
        if table and table[-1][1] in good[i]:
            table[-1][0] = batch
        else:
            config = max(sorted(good[i]), key=lambda c: (run_length(c, i), -by_batch[batch][c]))
            table.append([batch, config])
    table[-1][0] = None
    return [{"max_batch": most, "block_v": block_v, "warps": warps} for most, (block_v, warps) in table]


ROW_CLASS = "LaunchRow"


def _table_node(tree: ast.Module) -> ast.Assign:
    """The module-level `LAUNCH_TABLE = (...)` assignment."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["LAUNCH_TABLE"]:
            return node
    raise ValueError("no module-level LAUNCH_TABLE assignment")


def read_launch_table(text: str) -> list[dict]:
    """LAUNCH_TABLE's rows in kernel.py's text, each `LaunchRow(name=constant, ...)`; ValueError
    when it is written any other way."""
    node = _table_node(ast.parse(text))
    if not isinstance(node.value, ast.Tuple):
        raise ValueError("LAUNCH_TABLE is not a tuple literal")
    rows = []
    for row in node.value.elts:
        if not (isinstance(row, ast.Call) and getattr(row.func, "id", None) == ROW_CLASS and not row.args
                and all(isinstance(k.value, ast.Constant) for k in row.keywords)):
            raise ValueError(f"LAUNCH_TABLE row {ast.unparse(row)!r} is not {ROW_CLASS}(name=constant, ...)")
        rows.append({k.arg: k.value.value for k in row.keywords})
    return rows


def row_fields(text: str) -> list[str]:
    """The fields of kernel.py's LaunchRow, in order."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.ClassDef) and node.name == ROW_CLASS:
            return [s.target.id for s in node.body if isinstance(s, ast.AnnAssign)]
    raise ValueError(f"no class {ROW_CLASS}")


def write_launch_table(table: list[dict], path) -> None:
    """Replace LAUNCH_TABLE in kernel.py with `table`'s rows (best_table's dicts), written as
    named LaunchRow rows; refuses a file whose table or rows are written otherwise, and rows
    whose names are not LaunchRow's fields."""
    text = path.read_text(encoding="utf-8")
    fields = row_fields(text)
    read_launch_table(text)  # the current table is one this function can replace
    for row in table:
        if list(row) != fields:
            raise ValueError(f"{path}: a row names {list(row)}, {ROW_CLASS} has the fields {fields}")
    node = _table_node(ast.parse(text))
    body = "".join(f"    {ROW_CLASS}({', '.join(f'{k}={v!r}' for k, v in row.items())}),\n" for row in table)
    lines = text.splitlines(keepends=True)
    new = "".join(lines[:node.lineno - 1]) + f"LAUNCH_TABLE = (\n{body})\n" + "".join(lines[node.end_lineno:])
    if read_launch_table(new) != list(table):
        raise AssertionError("LAUNCH_TABLE did not read back as written")
    path.write_text(new, encoding="utf-8")

"""Tune a submission's tables of launch settings on this GPU: every setting of each table timed
on its probes (each checked first; settings that make the same launches timed once), the table
derived from the fastest per probe point (gdn_bench/table_tuning.py says how). A table kept per
architecture (shared.arch_key) gets the rows of this GPU's; a single table serves every GPU, and
--write replaces it for all. One command per definition; needs a GPU.

    python scripts/tune_launch.py [--definition decode|prefill|mtp] [--table NAME ...]
                                  [--batch-sizes 1,4,... | --seq-lens 6,8192,...] [--write] [--out FILE]

The tables and their probes: gdn_bench/decode_tuning.py (LAUNCH_TABLES of kernel.py, per batch
size), gdn_bench/prefill_tuning.py (prefill.py's PREP_TABLE, PASS_TABLE, SUMMARY_TABLE, FIXUP_TABLE and WALK_TABLE) and
gdn_bench/mtp_tuning.py (LAUNCH_TABLES of mtp.py, per batch size). --table picks
some (default: all of the definition's); --batch-sizes / --seq-lens keep the probes of those
sizes. --write replaces the tables in the submission file; the sweep itself goes to --out
(default results/tune_launch_<definition>.json).
"""

import importlib
import json
import sys

from gdn_bench.algos import load_solution_file
from gdn_bench.arguments import (ScriptParser, add_root_argument, checked, chosen_project, definition_name,
                                 output_file, positive_ints)
from gdn_bench.definitions import DEFAULT, resolve
from gdn_bench.paths import checkout_of


# Each definition's tuning module: its SWEEPS, the tables it tunes and how.
TUNING = {"decode": "gdn_bench.decode_tuning", "prefill": "gdn_bench.prefill_tuning", "mtp": "gdn_bench.mtp_tuning"}


def _table_text(records: list[dict]) -> str:
    """µs per probe (rows) and setting (columns); * marks each probe's fastest."""
    from gdn_bench.table_tuning import plain

    settings = list(dict.fromkeys(json.dumps(plain(r["setting"])) for r in records))
    probes = list(dict.fromkeys(r["probe"] for r in records))
    us = {(r["probe"], json.dumps(plain(r["setting"]))): r["us"] for r in records}
    lines = [f"setting {i}: {s}" for i, s in enumerate(settings)]
    lines.append(f"{'probe':>24} " + " ".join(f"{i:>8}" for i in range(len(settings))))
    for probe in probes:
        fastest = min((v for (p, _), v in us.items() if p == probe and v is not None), default=None)
        cells = [us[probe, s] for s in settings]
        lines.append(f"{probe:>24} " + " ".join(
            f"{'-':>8}" if v is None else f"{v:>7.2f}{'*' if v == fastest else ' '}" for v in cells))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = ScriptParser("tune_launch", description=__doc__)
    parser.add_argument("--definition", type=definition_name, default=DEFAULT,
                        help=f"decode, prefill or mtp, or a full definition name (default {DEFAULT})")
    parser.add_argument("--table", action="append", help="a table to tune (repeatable; default: all)")
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--batch-sizes", type=positive_ints, help="decode: the probes of these batch sizes")
    sizes.add_argument("--seq-lens", type=positive_ints, help="prefill: the probes of these total_seq_len")
    parser.add_argument("--write", action="store_true", help="rewrite the tables in the submission file")
    parser.add_argument("--out", type=output_file("tune_launch.json"),
                        help="the sweep, as JSON (a folder gets tune_launch.json in it; "
                             "default results/tune_launch_<definition>.json)")
    add_root_argument(parser, checkout_of(__file__))
    args = parser.parse_args(argv)
    chosen_project(parser, args)
    spec = resolve(args.definition)
    chosen = (args.batch_sizes, "--batch-sizes") if args.batch_sizes else (args.seq_lens, "--seq-lens")
    if chosen[0] and chosen[1] != spec.size_flag:
        parser.error(f"argument {chosen[1]}: not a flag of {spec.short}; its sizes are {spec.size_flag}")
    args.out = args.out or checked(parser, "--out", output_file("tune_launch.json"),
                                   f"results/tune_launch_{spec.short}.json")
    entry = spec.submission_entry()
    if args.write:  # the file it rewrites, checked before the sweep
        checked(parser, "--write", output_file(entry.name), entry)
    # The tables are the tuning module's, which imports torch (it times): --table is checked last.
    import torch

    from gdn_bench.table_tuning import best_rows, plain, recorded_launches, sweep, table_rows, write_table

    available = importlib.import_module(TUNING[spec.short]).SWEEPS
    unknown = [t for t in args.table or () if t not in available]
    if unknown:
        parser.error(f"argument --table: {spec.short} has no table {', '.join(unknown)}; it has {', '.join(available)}")
    if not torch.cuda.is_available():
        print("tune_launch: error: needs a CUDA GPU", file=sys.stderr)
        return 2
    module = load_solution_file(entry, f"gdn_tune_{spec.short}")
    shared = importlib.import_module(f"{module.__package__}.shared")
    guard = sys.modules.get(f"{module.__package__}.prefill_guard")
    if guard is not None:  # the sweep checks every setting against float64 itself and must time the
        guard.GUARDED = ()  # launches it forces: a failed guard check would move the GPU off them
    gpu, arch, found = torch.cuda.get_device_name(), shared.arch_key(torch.device("cuda")), {}
    for name in args.table or available:
        table = available[name]
        rows_here = getattr(module, table.table)
        if isinstance(rows_here, dict) and arch not in rows_here:  # a kernel this GPU does not run
            print(f"tune_launch: {name} has no rows for {arch} (its kernel does not run there): skipped",
                  file=sys.stderr)
            continue
        probes = [p for p in table.probes(module) if not chosen[0] or p.size in chosen[0]]
        records = sweep(module, table, probes, arch=arch, launches=recorded_launches(shared))
        for why in dict.fromkeys((json.dumps(plain(r["setting"])), r["wrong"]) for r in records if "wrong" in r):
            print(f"tune_launch: {name} {why[0]} left out: {why[1]}", file=sys.stderr)
        rows = best_rows(records, table.bounds)
        print(f"GPU: {gpu} ({arch}); {name}: µs (CUPTI, cold L2, median) per probe and setting; * = fastest")
        print(_table_text(records))
        print(f"{name} rows:", json.dumps(plain(rows)))
        found[name] = {"bounds": list(table.bounds), "records": plain(records), "rows": rows,
                       "fields": type(table_rows(module, name, arch)[0])._fields}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gpu": gpu, "arch": arch, "definition": spec.name, "tables": plain(found)},
                                   indent=2))
    if args.write:
        for name, result in found.items():
            write_table(result["rows"], entry, name, result["fields"], arch)
        print(f"rewrote {', '.join(found)} in {entry}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

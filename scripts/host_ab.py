"""Host cost of the submission against other copies of it, alternated in one process (the way
to tell whether a change of the host path made calls cheaper: the hosts move more than most
changes do). Prefill's kernel() and pooled_prefill() on the host-cost calls, decode's kernel()
and pooled_decode(), each with the default and the compiled argument checks; µs per call, the
least of 8 medians of 50. On a GPU the kernels run; without one, the CPU proxy (launches
stubbed). What it measures: gdn_bench/host_ab.py.

    mkdir -p /tmp/old && git archive HEAD solution/triton | tar -x --strip-components=2 -C /tmp/old
    python scripts/host_ab.py --against /tmp/old/prefill.py [--batch-sizes 1,64] [--out DIR]

Writes host_ab.json and host_ab.txt under --out (default results/host_ab).
"""

import json
from pathlib import Path

from gdn_bench.arguments import (ScriptParser, add_root_argument, chosen_project, output_folder, positive_int,
                                 positive_ints)
from gdn_bench.bench_sizes import HOST_COST_CALLS
from gdn_bench.paths import checkout_of


def main(argv=None) -> int:
    parser = ScriptParser("host_ab", description=__doc__)
    parser.add_argument("--against", type=Path, action="append", required=True,
                        help="another prefill.py, kernel.py and the files they import beside it (repeatable)")
    parser.add_argument("--batch-sizes", type=positive_ints, default=[1], help="decode's batch sizes (default 1)")
    parser.add_argument("--rounds", type=positive_int, default=8, help="the least of this many medians (default 8)")
    parser.add_argument("--out", type=output_folder, default="results/host_ab", help="output folder")
    add_root_argument(parser, checkout_of(__file__))
    args = parser.parse_args(argv)
    chosen_project(parser, args)
    for path in args.against:
        if not (path.is_file() and path.suffix == ".py" and (path.parent / "kernel.py").is_file()):
            parser.error(f"--against: expected a prefill.py with kernel.py beside it, got {path}")
    import torch

    from gdn_bench.definitions.prefill.definition import PREFILL
    from gdn_bench.host_ab import ab_columns, ab_rows, load_copy
    from gdn_bench.serving_bench import format_rows, notes

    entries = {"ours": PREFILL.submission_entry(), **{f"against{i}": path for i, path in enumerate(args.against, 1)}}
    rows = ab_rows({label: load_copy(entry, label) for label, entry in entries.items()}, HOST_COST_CALLS,
                   args.batch_sizes, rounds=args.rounds)
    where = torch.cuda.get_device_name() if torch.cuda.is_available() else "the CPU proxy (launches stubbed)"
    title = (f"host µs per call on {where}, alternated in one process (the least of {args.rounds} medians of 50); "
             + "; ".join(f"{label} = {entry}" for label, entry in entries.items()))
    report = "\n".join([title, format_rows(rows, ab_columns(entries)), *notes(rows)])
    print(report)
    args.out.mkdir(parents=True, exist_ok=True)
    copies = {label: str(entry) for label, entry in entries.items()}
    (args.out / "host_ab.json").write_text(json.dumps({"where": where, "copies": copies, "rows": rows}, indent=2))
    (args.out / "host_ab.txt").write_text(report + "\n")
    print(f"wrote {args.out / 'host_ab.json'} and {args.out / 'host_ab.txt'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Prefill's host cost without a GPU: solution/triton/prefill.py's kernel() and pooled_prefill()
on CPU tensors with their launches stubbed, planned as for an sm_90 GPU, µs per call (median of
50), with the default argument checks (Python's, confirmed by torch's tensor guards) and with the
compiled ones (cc: host_checks.enable(), where they build); what it includes and leaves out:
gdn_bench/host_cost.py. The GPU numbers: scripts/bench_serving.py --host-cost-only; two copies
of the code against each other: scripts/host_ab.py.

    python scripts/prefill_host_proxy.py [--entry path/to/prefill.py] [--json]
"""

import json
from pathlib import Path

from gdn_bench.arguments import ScriptParser, add_root_argument, chosen_project
from gdn_bench.bench_sizes import HOST_COST_CALLS
from gdn_bench.paths import checkout_of


def main(argv=None) -> int:
    parser = ScriptParser("prefill_host_proxy", description=__doc__)
    parser.add_argument("--entry", type=Path, default=None,
                        help="the prefill.py to time, with the files beside it (default: the checkout's)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    add_root_argument(parser, checkout_of(__file__))
    args = parser.parse_args(argv)
    chosen_project(parser, args)
    from gdn_bench.algos import load_solution_file
    from gdn_bench.definitions.prefill.definition import PREFILL
    from gdn_bench.host_cost import proxy_rows
    from gdn_bench.serving_bench import format_rows, notes

    pre = load_solution_file(args.entry or PREFILL.submission_entry(), "gdn_prefill_host_proxy")
    rows = proxy_rows(pre, HOST_COST_CALLS)
    columns = (("call", "call", ""), ("launches", "kernel_launches", "d"), ("kernel µs", "kernel_host_us", ".1f"),
               ("pooled µs", "pooled_host_us", ".1f"), ("kernel cc", "kernel_cc_host_us", ".1f"),
               ("pooled cc", "pooled_cc_host_us", ".1f"))
    print(json.dumps(rows, indent=2) if args.json else "\n".join([format_rows(rows, columns), *notes(rows)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

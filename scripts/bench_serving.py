"""The serving entry points against their targets, on a GPU: pooled decode against dense decode
at every batch size, and MTP (T = 2, 4, 8; B = 1, 16, 64) against FlashInfer's MTP and T calls
of pooled decode, and pooled prefill against the contest's prefill (token walk, chunked, spans);
FLA's calls over the pool beside them, where fla imports (gdn_bench/fla_serving.py); CUPTI span
(cold L2) and CUDA-graph replay, µs (gdn_bench/serving_bench.py). Then prefill's host cost: the
CPU time of an eager call, ours against FlashInfer's and FLA's, beside each one's GPU work
(gdn_bench/host_cost.py).

    python scripts/bench_serving.py [--batch-sizes 1,4,...] [--mtp-batch-sizes 1,16,64] [--draft-lengths 2,4,8]
    python scripts/bench_serving.py --prefill-calls "6;75,75,75,75;8192"   # prefill calls by sequence lengths
    python scripts/bench_serving.py --host-cost-only --out docs/data/serving/h200   # the host-cost section alone

Writes bench_serving.json (all of it) under --out (default results/bench_serving), and the
host-cost section as host_cost.json and host_cost.txt.
"""

import json
import sys

from gdn_bench.arguments import ScriptParser, add_root_argument, chosen_project, output_folder, positive_ints
from gdn_bench.bench_sizes import DECODE_BATCH_SIZES, DRAFT_LENGTHS, HOST_COST_CALLS, MTP_BATCH_SIZES, PREFILL_CALLS
from gdn_bench.paths import checkout_of


def _listed(values) -> str:
    return ",".join(map(str, values))


def _calls(text: str) -> list[tuple]:
    """Prefill calls from '6;16,16,16,16;8192': each call's sequence lengths, calls split by ';'."""
    return [tuple(positive_ints(call)) for call in text.split(";")]


def main(argv=None) -> int:
    parser = ScriptParser("bench_serving", description=__doc__)
    parser.add_argument("--batch-sizes", type=positive_ints, default=list(DECODE_BATCH_SIZES),
                        help=f"pooled decode's batch sizes (default {_listed(DECODE_BATCH_SIZES)})")
    parser.add_argument("--mtp-batch-sizes", type=positive_ints, default=list(MTP_BATCH_SIZES),
                        help=f"MTP's batch sizes (default {_listed(MTP_BATCH_SIZES)})")
    parser.add_argument("--draft-lengths", type=positive_ints, default=list(DRAFT_LENGTHS),
                        help=f"MTP's tokens per row (default {_listed(DRAFT_LENGTHS)})")
    parser.add_argument("--prefill-calls", type=_calls, default=list(PREFILL_CALLS),
                        help="pooled prefill's calls, each its sequence lengths, calls split by ';' "
                             f"(default {';'.join(_listed(c) for c in PREFILL_CALLS)})")
    parser.add_argument("--host-cost-calls", type=_calls, default=list(HOST_COST_CALLS),
                        help="the host-cost section's prefill calls, as --prefill-calls "
                             f"(default {';'.join(_listed(c) for c in HOST_COST_CALLS)})")
    parser.add_argument("--host-cost-only", action="store_true", help="run the host-cost section alone")
    parser.add_argument("--out", type=output_folder, default="results/bench_serving", help="output folder")
    add_root_argument(parser, checkout_of(__file__))
    args = parser.parse_args(argv)
    chosen_project(parser, args)
    # What needs torch, once the arguments are checked.
    import torch

    if not torch.cuda.is_available():
        print("bench_serving: error: needs a CUDA GPU (CUPTI timing, CUDA graphs)", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.host_cost_only:
        _serving(args, gpu)
    _host_cost(args, gpu)
    return 0


def _serving(args, gpu: str) -> None:
    """The serving entry points against their targets: printed, and bench_serving.json."""
    from gdn_bench.serving_bench import (DECODE_COLUMNS, MTP_COLUMNS, PREFILL_COLUMNS, bench, fla_tables, format_rows,
                                         notes, verdicts)

    result = bench(args.batch_sizes, args.mtp_batch_sizes, args.draft_lengths, args.prefill_calls)
    print(f"GPU: {gpu}; µs: CUPTI span of a call (cold L2, median) and CUDA-graph replay (warm L2, median)")
    print("\npooled decode (in place, 2B pool slots) against dense decode (the contest's call):")
    print(format_rows(result["pooled_decode"], DECODE_COLUMNS))
    print("\nMTP: ours = pooled_mtp (buffer written, pool not updated); contest = kernel() (+ pool copied into "
          "final_state); FI = gated_delta_rule_mtp; T×dec = T calls of pooled_decode:")
    print(format_rows(result["mtp"], MTP_COLUMNS))
    print("\npooled prefill (in place, 2N + 8 pool slots) against the contest's prefill (dense states):")
    print(format_rows(result["pooled_prefill"], PREFILL_COLUMNS))
    print("\n" + fla_tables(result))
    print("", *notes(result["pooled_decode"] + result["mtp"] + result["pooled_prefill"]), *verdicts(result), sep="\n")
    path = args.out / "bench_serving.json"
    path.write_text(json.dumps({"gpu": gpu, **result}, indent=2))
    print(f"wrote {path}")


def _host_cost(args, gpu: str) -> None:
    """Prefill's host cost: printed, and host_cost.json and host_cost.txt."""
    from gdn_bench.host_cost import bench_host_cost, host_cost_report

    result = bench_host_cost(args.host_cost_calls)
    text = host_cost_report(result, gpu)
    print("\n" + text)
    (args.out / "host_cost.txt").write_text(text + "\n", encoding="utf-8")
    (args.out / "host_cost.json").write_text(json.dumps({"gpu": gpu, **result}, indent=2), encoding="utf-8")
    print(f"wrote {args.out / 'host_cost.json'} and host_cost.txt")


if __name__ == "__main__":
    raise SystemExit(main())

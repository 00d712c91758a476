"""Regenerate the embedded trace set deterministically: decode's mix, prefill's and mtp's CPU
subsets, as gdn_bench/data holds them.

    python scripts/make_dataset.py --out DIR [--seed N]     # into DIR (new, empty, or an earlier run's)
    python scripts/make_dataset.py --embedded [--seed N]    # rewrite the committed gdn_bench/data

Nothing is touched until every argument is checked, and the trace set is built in a
temporary folder beside its target and swapped in only when complete: an error or Ctrl-C
leaves the target as it was. The committed trace set, this checkout's gdn_bench/data, is
rewritten only with --embedded (git diff shows what changed); an existing --out may hold
only files that this script writes. Exit status 0, or 2 with one line saying what is wrong.

The JSON files come out byte for byte everywhere; the blobs byte for byte with torch 2.13.0
on an x86-64 CPU where torch uses AVX2 or AVX-512, and a few last bits apart elsewhere
(docs/trace-sets.md). The line it prints names the torch version and the vector
instructions it ran with.
"""

from pathlib import Path

from gdn_bench.arguments import ScriptParser, checked, fail, replaceable_folder, seed
from gdn_bench.dataset import SEED
from gdn_bench.paths import EMBEDDED_PATH, checkout_of

PROG = "make_dataset"


def main(argv=None, *, checkout: Path = checkout_of(__file__)) -> int:
    """make_dataset with `argv` (default sys.argv[1:]); `checkout` holds the committed trace set."""
    parser = ScriptParser(PROG, description=__doc__)
    embedded = checkout / "gdn_bench" / "data"
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--out", type=replaceable_folder, help="trace set root to write: a new folder, an empty "
                                                               "one, or one this script wrote")
    target.add_argument("--embedded", action="store_true",
                        help=f"rewrite this checkout's committed trace set, {embedded}, instead")
    parser.add_argument("--seed", type=seed, default=SEED, help=f"generator seed, from 0 to 2**63 - 1 (default {SEED})")
    args = parser.parse_args(argv)
    committed = [p.resolve() for p in (embedded, EMBEDDED_PATH)]
    if args.out is not None and any(args.out.resolve().is_relative_to(p) for p in committed):
        parser.error(f"argument --out: {args.out} is the committed trace set; rewrite it with --embedded "
                     "(and no --out)")
    out = checked(parser, "--embedded", replaceable_folder, embedded) if args.embedded else args.out
    import torch

    from gdn_bench.dataset import write_trace_set

    try:
        trace_set = write_trace_set(out, args.seed)
    except (ValueError, OSError) as e:
        return fail(PROG, f"nothing written: {e}")
    count = sum(len(w) for w in trace_set.workloads.values())
    blob_bytes = sum(p.stat().st_size for p in (out / "blob").rglob("*") if p.is_file())
    print(f"wrote {count} workloads and {blob_bytes / 1e6:.2f} MB of blobs under {out} (torch "
          f"{torch.__version__}, CPU vector instructions {torch.backends.cpu.get_cpu_capability()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

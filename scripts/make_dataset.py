"""Regenerate the embedded trace set deterministically: gdn_bench/data, decode's mix and
prefill's CPU subset.

    python scripts/make_dataset.py [--out DIR] [--seed N]

The JSON files come out byte for byte everywhere; the blobs byte for byte with torch 2.13.0
on an x86-64 CPU where torch uses AVX2 or AVX-512, and a few last bits apart elsewhere
(README, "The trace sets"). The line it prints names the torch version and the vector
instructions it ran with.
"""

import argparse

from gdn_bench.arguments import output_folder
from gdn_bench.dataset import SEED
from gdn_bench.paths import checkout_of


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    embedded = checkout_of(__file__) / "gdn_bench" / "data"
    parser.add_argument("--out", type=output_folder, default=str(embedded),
                        help=f"trace set root (default: this checkout's, {embedded})")
    parser.add_argument("--seed", type=int, default=SEED, help=f"generator seed (default {SEED})")
    args = parser.parse_args(argv)
    import torch

    from gdn_bench.dataset import write_trace_set

    trace_set = write_trace_set(args.out, args.seed)
    count = sum(len(w) for w in trace_set.workloads.values())
    blob_bytes = sum(p.stat().st_size for p in (args.out / "blob").rglob("*") if p.is_file())
    print(f"wrote {count} workloads and {blob_bytes / 1e6:.2f} MB of blobs under {args.out} (torch "
          f"{torch.__version__}, CPU vector instructions {torch.backends.cpu.get_cpu_capability()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

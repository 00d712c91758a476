"""The architecture report: every production launch of the Triton submissions (decode's
kernel.py, prefill.py's paths, mtp.py, their pooled calls) compiled offline, with no GPU, for
Hopper (sm_90a), B200 (sm_100a) and B300 (sm_103a): registers, spill bytes, shared memory, the
MMA instruction class (tcgen05, wgmma, mma.sync or none) and the setting that chose the launch
(gdn_bench/arch_report.py says how and what it checks). Runs anywhere the kit installs.

    python scripts/arch_report.py                 # every architecture: table, then problems
    python scripts/arch_report.py --arch sm_100a  # one
    python scripts/arch_report.py --write         # also into docs/data/arch/ (the landed code's report)
    python scripts/arch_report.py --check         # is docs/data/arch/ the code's? (CI; compiles a sample)

Each launch's result is cached under the cache folder (arch-report/, by the launch's source
hash, options and compiler), so a second run compiles only what changed; --no-cache compiles
everything again. Writes arch_report.json and arch_report.txt under --out (default
results/arch_report). Exit status 0 when no launch has a problem (1 otherwise), 2 for bad
arguments.
"""

import argparse
import os
import sys

from gdn_bench.arguments import ScriptParser, add_root_argument, chosen_project, output_folder, positive_int
from gdn_bench.paths import checkout_of


def _architectures(text: str) -> list[str]:
    from gdn_bench.arch_report import ARCHITECTURES

    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in ARCHITECTURES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{', '.join(unknown) or text!r}: expected some of {', '.join(ARCHITECTURES)}")
    return names


def main(argv=None) -> int:
    parser = ScriptParser("arch_report", description=__doc__)
    parser.add_argument("--arch", type=_architectures, default="sm_90a,sm_100a,sm_103a",
                        help="architectures, comma-separated (default: sm_90a,sm_100a,sm_103a)")
    parser.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1,
                        help="compiles at once (default: the CPU count)")
    parser.add_argument("--no-cache", action="store_true", help="compile every launch again")
    parser.add_argument("--out", type=output_folder, default="results/arch_report",
                        help="folder for arch_report.json and .txt (default results/arch_report)")
    parser.add_argument("--write", action="store_true", help="also write the report into docs/data/arch/")
    parser.add_argument("--check", action="store_true",
                        help="only check the committed report against the code (no table; exit 1 if it is not)")
    add_root_argument(parser, checkout_of(__file__))
    args = parser.parse_args(argv)
    root = chosen_project(parser, args)
    if os.environ.get("TRITON_INTERPRET") == "1":
        parser.error("TRITON_INTERPRET=1 interprets kernels: unset it to compile them")
    from tqdm import tqdm

    from gdn_bench import arch_report

    if args.check:
        wrong = arch_report.check_committed(root, args.jobs)
        print("\n".join(wrong) if wrong else f"{arch_report.committed_path()}: the code's report, no problem")
        return 1 if wrong else 0
    with tqdm(desc="launches", unit="launch", file=sys.stderr) as bar:
        report = arch_report.collect(root, args.arch, args.jobs, use_cache=not args.no_cache, progress=bar.update)
    print(arch_report.format_table(report), end="")
    folders = [args.out] + ([arch_report.committed_path().parent] if args.write else [])
    for folder in folders:
        print("wrote " + ", ".join(str(p) for p in arch_report.write(report, folder)))
    return 1 if arch_report.all_problems(report) else 0


if __name__ == "__main__":
    raise SystemExit(main())

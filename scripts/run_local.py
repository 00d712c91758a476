"""Run GDN algorithms (decode or prefill) through flashinfer-bench on this machine and report
truthfully. The command line is gdn_bench.cli's: python scripts/run_local.py --help."""

from gdn_bench.cli import main
from gdn_bench.paths import checkout_of

if __name__ == "__main__":
    raise SystemExit(main(checkout=checkout_of(__file__)))

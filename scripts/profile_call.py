"""See inside one call of a GDN algorithm on the GPU: a per-kernel breakdown, Nsight Compute
metrics or a Proton line profile. The command line is gdn_bench.profiling's:
python scripts/profile_call.py --help."""

from pathlib import Path

from gdn_bench.profiling import main

if __name__ == "__main__":
    raise SystemExit(main(script=Path(__file__)))

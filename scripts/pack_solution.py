"""Pack solution/<language>/ into solution.json as config.toml describes, then load it back.

    python scripts/pack_solution.py [-o solution.json] [--config config.toml] [--language triton]
"""

import argparse
import sys
from pathlib import Path

from gdn_bench.packing import CONFIG_PATH, PROJECT_ROOT, PackError, pack, read_config, write_solution


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--output", type=Path, default=PROJECT_ROOT / "solution.json", help="where to write")
    parser.add_argument("--config", type=Path, default=CONFIG_PATH, help="config file (default: config.toml)")
    parser.add_argument("--language", help="pack solution/<language>/ with [build.<language>] (default: [build])")
    parser.add_argument("--source-dir", type=Path, help="source folder (default: solution/<language>/)")
    args = parser.parse_args(argv)
    try:
        solution = write_solution(pack(read_config(args.config, args.language), args.source_dir), args.output)
    except PackError as e:
        print(f"pack_solution: error: {e}", file=sys.stderr)
        return 2
    files = ", ".join(s.path for s in solution.sources)
    print(f"wrote {args.output}: {solution.name} ({solution.spec.language.value}, {solution.spec.entry_point}; {files})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

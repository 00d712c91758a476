"""Pack solution/<language>/ into solution.json as config.toml describes it for a definition,
then load it back. For a definition that [solution] does not name, config.toml is read as
scripts/submit.py would commit it for that definition (gdn_bench.packing.config_text_for),
so this packs exactly what the evaluator packs from that tag.

    python scripts/pack_solution.py [--definition decode|prefill|mtp] [-o solution.json] [--root DIR]
                                    [--config config.toml] [--language triton] [--source-dir DIR]

Paths default to the project checkout's (--root, by default the one holding this script):
<root>/config.toml, <root>/solution/<language>/ and <root>/solution.json. An -o that names a
folder (ends with a slash, or exists) writes solution.json in it.
"""

import argparse
import sys
from pathlib import Path

from gdn_bench.arguments import add_root_argument, checked, definition_name, output_file
from gdn_bench.definitions import DEFAULT, resolve
from gdn_bench.packing import PackError, pack, read_config, solution_dir, write_solution
from gdn_bench.paths import CONFIG_NAME, check_checkout, checkout_of

SOLUTION_FILE = "solution.json"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--definition", type=definition_name, default=DEFAULT,
                        help=f"decode, prefill or mtp, or a full definition name (default {DEFAULT})")
    parser.add_argument("-o", "--output", type=output_file(SOLUTION_FILE),
                        help=f"where to write; a folder (a trailing slash, or one that exists) gets {SOLUTION_FILE} "
                             f"in it (default: <root>/{SOLUTION_FILE})")
    parser.add_argument("--config", type=Path, help=f"config file (default: <root>/{CONFIG_NAME})")
    parser.add_argument("--language", help="pack solution/<language>/ with [build.<language>] (default: [build])")
    parser.add_argument("--source-dir", type=Path, help="source folder (default: <root>/solution/<language>/)")
    add_root_argument(parser, checkout_of(__file__))
    args = parser.parse_args(argv)
    args.root = checked(parser, "--root", check_checkout, args.root)
    args.output = args.output or checked(parser, "-o/--output", output_file(SOLUTION_FILE), args.root)
    try:
        config = read_config(args.config or args.root / CONFIG_NAME, args.language, resolve(args.definition).name)
        source_dir = args.source_dir or solution_dir(args.root, config.language)
        solution = write_solution(pack(config, source_dir), args.output)
    except PackError as e:
        print(f"pack_solution: error: {e}", file=sys.stderr)
        return 2
    files = ", ".join(s.path for s in solution.sources)
    print(f"wrote {args.output}: {solution.name} ({solution.definition}; {solution.spec.language.value}, "
          f"{solution.spec.entry_point}; {files})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

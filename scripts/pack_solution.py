"""Pack solution/<language>/ into solution.json as config.toml describes it for a definition,
then load it back. For a definition that [solution] does not name, config.toml is read as
scripts/submit.py would commit it for that definition (gdn_bench.packing.config_text_for),
so this packs exactly what the evaluator packs from that tag.

    python scripts/pack_solution.py [--definition decode|prefill|mtp] [-o solution.json] [--root DIR]
                                    [--config config.toml] [--language triton] [--source-dir DIR]

The definition defaults to the one config.toml's [solution] names: what a checkout of a
submission's tag (scripts/submit.py) submits. Paths default to the project checkout's
(--root, by default the one holding this script): <root>/config.toml,
<root>/solution/<language>/ and <root>/solution.json. An -o that names a folder (ends with a
slash, or exists) writes solution.json in it.
"""

from pathlib import Path

from gdn_bench.arguments import ScriptParser, add_root_argument, checked, definition_name, fail, output_file
from gdn_bench.definitions import resolve
from gdn_bench.packing import PackError, pack, read_config, solution_dir, write_solution
from gdn_bench.paths import CONFIG_NAME, check_checkout, checkout_of

SOLUTION_FILE = "solution.json"


def _check_known(definition: str, config_path: Path) -> None:
    """PackError unless `definition` is one of the kit's."""
    try:
        resolve(definition)
    except ValueError as e:
        raise PackError(f"{config_path}: [solution]: {e}") from None


def main(argv=None) -> int:
    parser = ScriptParser("pack_solution", description=__doc__)
    parser.add_argument("--definition", type=definition_name,
                        help="decode, prefill or mtp, or a full definition name (default: the one config.toml's "
                             "[solution] names)")
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
        config_path = args.config or args.root / CONFIG_NAME
        config = read_config(config_path, args.language, resolve(args.definition).name if args.definition else None)
        _check_known(config.definition, config_path)  # [solution]'s, when --definition is not given
        source_dir = args.source_dir or solution_dir(args.root, config.language)
        solution = write_solution(pack(config, source_dir), args.output)
    except PackError as e:
        return fail("pack_solution", str(e))
    files = ", ".join(s.path for s in solution.sources)
    print(f"wrote {args.output}: {solution.name} ({solution.definition}; {solution.spec.language.value}, "
          f"{solution.spec.entry_point}; {files})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Tag the submission of one definition, for the contest's evaluator to check out.

    python scripts/submit.py --definition decode|prefill|mtp --tag NAME [--push [--remote origin]]

The tag points at a new commit whose tree is HEAD's with config.toml's [solution] and [build]
naming that definition and its entry point (gdn_bench/submit.py: git plumbing, no branch
switch, working tree untouched). `pack_solution.py --definition ...` packs the same thing.
Without --push it says how to push the tag (adding the remote first where the repository has
none of that name). Exit status 0 when tagged (and pushed), 2 when refused (no git
repository, a tag name git does not take, an unknown --remote with --push, missing entry
file, existing tag, uncommitted changes in solution/ or config.toml) or when git fails; every
refusal is one line saying what to do.
"""

import sys
from pathlib import Path

from gdn_bench.arguments import ScriptParser, definition_name
from gdn_bench.definitions import DEFAULT, resolve
from gdn_bench.paths import checkout_of
from gdn_bench.submit import SubmitError, how_to_push, push_tag, tag_submission, toplevel


def main(argv=None) -> int:
    parser = ScriptParser("submit", description=__doc__)
    parser.add_argument("--definition", type=definition_name, default=DEFAULT,
                        help=f"decode, prefill or mtp, or a full definition name (default {DEFAULT})")
    parser.add_argument("--tag", required=True, help="name of the tag to create")
    parser.add_argument("--push", action="store_true", help="push the tag to --remote")
    parser.add_argument("--remote", default="origin", help="remote for --push (default origin)")
    parser.add_argument("--repo", type=Path, default=checkout_of(__file__),
                        help="git checkout (default: the one holding this script)")
    args = parser.parse_args(argv)
    spec = resolve(args.definition)
    try:
        commit = tag_submission(args.repo, spec.name, args.tag, args.remote if args.push else None)
        print(f"tagged {args.tag} -> {commit[:12]}: {spec.name}")
        if args.push:
            push_tag(args.repo, args.tag, args.remote)
            print(f"pushed {args.tag} to {args.remote}")
        else:
            print(f"to submit it, {how_to_push(toplevel(args.repo), args.tag, args.remote)}")
    except SubmitError as e:
        print(f"submit: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

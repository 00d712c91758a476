"""Tag a submission of one definition with git plumbing only (scripts/submit.py).

The evaluator checks out a tag, reads [solution] and [build] of its config.toml and packs the
top-level files of solution/<language>/. To submit both definitions from one branch, the tag
points at a new commit (parent HEAD) whose tree is HEAD's tree with config.toml replaced by
gdn_bench.packing.config_text_for(definition): made through a temporary index, hash-object,
write-tree, commit-tree and tag, so no branch is switched and the working tree and index are
untouched. It refuses, with one SubmitError, when the entry file is missing or does not
define the entry point, when the tag exists, or when solution/ or config.toml have changes
that are not committed (the tag would not hold what the user sees).
"""

import os
import subprocess
import tempfile
from pathlib import Path

from gdn_bench.packing import PackError, config_text_for, pack, parse_config, solution_dir

WATCHED = ("solution", "config.toml")


class SubmitError(RuntimeError):
    """Why no tag was made (or pushed); the message says what to do."""


def git(repo: Path, *args: str, stdin: str | None = None, env: dict | None = None, strip: bool = True) -> str:
    """Run git in `repo`; its stdout (stripped unless told), or SubmitError with git's own message."""
    result = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, text=True,
                            env={**os.environ, **(env or {})})
    if result.returncode != 0:
        raise SubmitError(f"git {' '.join(args)} failed: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout.strip() if strip else result.stdout


def _refuse_uncommitted(repo: Path) -> None:
    changed = git(repo, "status", "--porcelain", "--untracked-files=all", "--", *WATCHED, strip=False)
    if changed:
        paths = ", ".join(line[3:] for line in changed.splitlines())
        raise SubmitError(f"uncommitted changes in {paths}: the tag is made from HEAD, so it would not hold "
                          "them; commit (or stash) them first")


def tag_submission(repo: Path, definition: str, tag: str) -> str:
    """Create tag `tag` on a commit submitting `definition` (a full name); returns the commit."""
    repo = Path(git(repo, "rev-parse", "--show-toplevel"))
    git(repo, "check-ref-format", f"refs/tags/{tag}")
    if subprocess.run(["git", "-C", str(repo), "rev-parse", "-q", "--verify", f"refs/tags/{tag}"],
                      capture_output=True).returncode == 0:
        raise SubmitError(f"tag {tag!r} already exists; choose another name (or delete it: git tag -d {tag})")
    _refuse_uncommitted(repo)
    mode = git(repo, "ls-tree", "HEAD", "config.toml").split(" ")[0]
    if not mode:
        raise SubmitError(f"HEAD of {repo} has no config.toml")
    try:
        text = config_text_for(git(repo, "show", "HEAD:config.toml", strip=False), definition, repo / "config.toml")
        config = parse_config(text, repo / "config.toml")
        pack(config, solution_dir(repo, config.language))  # the tree's sources: solution/ is clean
    except PackError as e:
        raise SubmitError(str(e)) from None
    blob = git(repo, "hash-object", "-w", "--stdin", stdin=text)
    with tempfile.TemporaryDirectory() as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        git(repo, "read-tree", "HEAD", env=index)
        git(repo, "update-index", "--cacheinfo", f"{mode},{blob},config.toml", env=index)
        tree = git(repo, "write-tree", env=index)
    message = f"Submission {tag}: {config.definition} ({config.entry_point})\n\nconfig.toml names it for the evaluator."
    commit = git(repo, "commit-tree", tree, "-p", "HEAD", "-m", message)
    git(repo, "tag", tag, commit)
    return commit


def push_tag(repo: Path, tag: str, remote: str) -> None:
    git(repo, "push", remote, f"refs/tags/{tag}")

"""Tag a submission of one definition with git plumbing only (scripts/submit.py).

The evaluator checks out a tag, reads [solution] and [build] of its config.toml and packs the
top-level files of solution/<language>/. To submit both definitions from one branch, the tag
points at a new commit (parent HEAD) whose tree is HEAD's tree with config.toml replaced by
gdn_bench.packing.config_text_for(definition): made through a temporary index, hash-object,
write-tree, commit-tree and tag, so no branch is switched and the working tree and index are
untouched. It refuses, with one SubmitError, when the folder is in no git repository (or git
is missing), when the tag name is not one git takes, when the entry file is missing or does
not define the entry point, when the tag exists, or when solution/ or config.toml have
changes that are not committed (the tag would not hold what the user sees). Every
SubmitError is one line that says what to do; `how_to_push` says how to push a tag, adding the
remote first where the repository has none of that name.
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
    """Run git in `repo` (never prompting for credentials); its stdout (stripped unless told),
    or SubmitError with git's own reason, in one line."""
    result = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, text=True,
                            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})})
    if result.returncode != 0:
        raise SubmitError(f"git {' '.join(args)} failed: {git_reason(result.stderr or result.stdout)}")
    return result.stdout.strip() if strip else result.stdout


def git_reason(output: str) -> str:
    """git's reason for a failure in one line: its first 'fatal:' or 'error:' line, else its
    first line (or 'no reason given')."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return (errors or lines or ["no reason given"])[0]


def toplevel(repo: Path) -> Path:
    """The top folder of the git repository that holds `repo`; SubmitError, saying what to do,
    when there is none or git is missing."""
    try:
        result = subprocess.run(["git", "-C", str(repo), "rev-parse", "--show-toplevel"], capture_output=True,
                                text=True)
    except FileNotFoundError:
        raise SubmitError("git is not installed (or not on PATH): the contest takes a submission as a tag of a git "
                          "repository, and this script makes it with git; install git") from None
    if result.returncode != 0:
        raise SubmitError(f"{repo} is not in a git repository ({git_reason(result.stderr)}): the contest takes a "
                          "submission as a tag of one; clone the kit with git (not a downloaded archive), or name "
                          "a clone with --repo")
    return Path(result.stdout.strip())


def check_tag_name(repo: Path, tag: str) -> None:
    """SubmitError unless `tag` is a valid git tag name (git check-ref-format)."""
    if subprocess.run(["git", "-C", str(repo), "check-ref-format", f"refs/tags/{tag}"]).returncode != 0:
        raise SubmitError(f"--tag {tag!r} is not a valid git tag name (no spaces, '..', '~', '^', ':', '?', '*', "
                          "'[', '\\' or '@{', no part starting with '.' or ending with '.lock', no trailing '/' or "
                          "'.': git help check-ref-format); choose another")


def has_remote(repo: Path, remote: str) -> bool:
    """Whether `remote` is a remote of `repo`, or a URL or path git can push to as it is."""
    if "/" in remote or ":" in remote:
        return True
    return subprocess.run(["git", "-C", str(repo), "remote", "get-url", remote], capture_output=True).returncode == 0


def how_to_push(repo: Path, tag: str, remote: str) -> str:
    """'push it: git push REMOTE refs/tags/TAG', with how to add the remote first where `repo`
    has none of that name."""
    push = f"push it: git push {remote} refs/tags/{tag}"
    if has_remote(repo, remote):
        return push
    return (f"add the repository you register for the contest as the remote {remote!r} (git remote add {remote} URL; "
            f"this one has none of that name), then {push}")


def check_remote(repo: Path, remote: str) -> None:
    """SubmitError unless `remote` is a remote of `repo`, or a URL or path git can push to."""
    if not has_remote(repo, remote):
        raise SubmitError(f"--remote {remote!r}: no such remote in {repo} (`git remote -v` lists them); add it "
                          f"with `git remote add {remote} URL`, or name another with --remote")


def _refuse_uncommitted(repo: Path) -> None:
    changed = git(repo, "status", "--porcelain", "--untracked-files=all", "--", *WATCHED, strip=False)
    if changed:
        paths = ", ".join(line[3:] for line in changed.splitlines())
        raise SubmitError(f"uncommitted changes in {paths}: the tag is made from HEAD, so it would not hold "
                          "them; commit (or stash) them first")


def tag_submission(repo: Path, definition: str, tag: str, remote: str | None = None) -> str:
    """Create tag `tag` on a commit submitting `definition` (a full name); returns the commit.
    With `remote` (the tag is to be pushed there next), that remote is checked first."""
    repo = toplevel(repo)
    check_tag_name(repo, tag)
    if remote is not None:
        check_remote(repo, remote)
    existing = subprocess.run(["git", "-C", str(repo), "rev-parse", "-q", "--verify", f"refs/tags/{tag}^{{commit}}"],
                              capture_output=True, text=True)
    if existing.returncode == 0:
        push = how_to_push(repo, tag, remote or "origin")
        raise SubmitError(f"tag {tag!r} already exists (commit {existing.stdout.strip()[:12]}); to submit it as it "
                          f"is, {push}; to make it anew, delete it first (git tag -d {tag}) or choose another name")
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
    """Push `tag` to `remote`; SubmitError, saying the tag stays and how to push it, if that fails."""
    try:
        git(repo, "push", remote, f"refs/tags/{tag}")
    except SubmitError as e:
        raise SubmitError(f"{e}; the tag {tag!r} was made and stays: push it with `git push {remote} refs/tags/{tag}` "
                          f"once that is fixed (or delete it: git tag -d {tag})") from None

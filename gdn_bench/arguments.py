"""Command-line pieces every script shares: the kit's parser, whose every error is one line
'<script>: error: <message>' with exit status 2 (argparse's own included, no usage block, no
traceback), argparse types naming what they expected, output paths checked before any work
starts, and --root (the project checkout, gdn_bench.paths)."""

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

from gdn_bench.definitions import BOTH, resolve
from gdn_bench.paths import check_checkout, use_project


EXIT_BAD_ARGUMENTS = 2


def fail(script: str, message: str) -> int:
    """Print the kit's one error line, '<script>: error: <message>', on stderr; returns
    EXIT_BAD_ARGUMENTS (2), the exit status for it."""
    print(f"{script}: error: {message}", file=sys.stderr)
    return EXIT_BAD_ARGUMENTS


class ScriptParser(argparse.ArgumentParser):
    """argparse's parser for scripts/<script>.py: --help keeps the description's line breaks,
    and every error, argparse's own included, is `fail`'s one line (exit status 2); the
    usage block is --help's alone."""

    def __init__(self, script: str, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(prog=f"{script}.py", **kwargs)
        self.script = script

    def error(self, message: str) -> NoReturn:
        raise SystemExit(fail(self.script, message))


def positive_ints(text: str) -> list[int]:
    """'1,4,64' -> [1, 4, 64]; anything else (an empty item included) is an argparse error."""
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def sequence_lengths(text: str) -> tuple[int, ...]:
    """'1,8191' -> (1, 8191): one prefill call's sequence lengths, zeros allowed (empty
    sequences), not all zero; anything else is an argparse error."""
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated sequence lengths, got {text!r}") from None
    if any(v < 0 for v in values) or sum(values) == 0:
        raise argparse.ArgumentTypeError(f"expected lengths >= 0 with at least one token, got {text!r}")
    return values


def _integer(text: str, what: str, low: int, high: int | None = None) -> int:
    """int(text) from `low` to `high` (inclusive; no upper bound if None), else an argparse
    error saying what was expected."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text}")
    return value


def positive_int(text: str) -> int:
    """'4' -> 4; anything but a positive integer is an argparse error."""
    return _integer(text, "a positive integer", 1)


def count(text: str) -> int:
    """'0' -> 0: a number of things, zero included; anything else is an argparse error."""
    return _integer(text, "an integer >= 0", 0)


def seed(text: str) -> int:
    """A random seed: an integer from 0 to 2**63 - 1."""
    return _integer(text, "a seed from 0 to 2**63 - 1", 0, 2**63 - 1)


def definition_name(text: str) -> str:
    """A definition's short name from its short or full name; argparse error otherwise."""
    try:
        return resolve(text).short
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def definitions_name(text: str) -> str:
    """definition_name's, or BOTH ("both": every definition of the track)."""
    if text == BOTH:
        return BOTH
    try:
        return definition_name(text)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"{e}, or {BOTH}") from None


def _writable(folder: Path, what: Path) -> None:
    """ArgumentTypeError unless a file can be created in the existing `folder`: tried (a
    temporary file, removed at once), since permission bits alone do not tell (root, /proc,
    read-only mounts)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        target = "" if what == folder else f"cannot create {what}: "
        raise argparse.ArgumentTypeError(f"{target}cannot write into {folder} ({e.strerror})") from None


def _creatable(path: Path) -> None:
    """ArgumentTypeError unless `path` can be created: its nearest existing ancestor is a
    folder (not a file) that can be written into."""
    ancestor = path.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise argparse.ArgumentTypeError(f"{path}: {ancestor} is a file, not a folder")
    _writable(ancestor, path)


def output_folder(text: str | Path) -> Path:
    """A folder to write results into, as an absolute path: an existing folder that can be
    written into, or one that can be created."""
    path = Path(text).expanduser().absolute()
    if path.exists():
        if not path.is_dir():
            raise argparse.ArgumentTypeError(f"{path} exists and is not a folder")
        _writable(path, path)
        return path
    _creatable(path)
    return path


def replaceable_folder(text: str | Path) -> Path:
    """output_folder's, for a folder replaced as a whole (its replacement is built beside it):
    an existing one's parent must be writable too."""
    path = output_folder(text)
    if path.exists():
        _writable(path.parent, path)
    return path


def output_file(name: str):
    """An argparse type for a file to write, given as an absolute path: a path that names a
    folder (it ends with a slash, or is an existing folder) means the file `name` in that
    folder; the file must be creatable, or replaceable, where it is."""

    def check(text: str | Path) -> Path:
        path = Path(text).expanduser().absolute()
        if str(text).endswith(("/", os.sep)) or path.is_dir():
            path = path / name
            if path.is_dir():
                raise argparse.ArgumentTypeError(f"{path} is a folder; name the file to write")
        if path.exists() and not os.access(path, os.W_OK):
            raise argparse.ArgumentTypeError(f"cannot write {path}")
        _creatable(path)
        return path

    return check


def checked(parser: argparse.ArgumentParser, flag: str, check, value):
    """check(value), or the parser's one-line error naming `flag` (exit 2): for values the
    parser could not check itself, such as defaults derived from other flags."""
    try:
        return check(value)
    except (argparse.ArgumentTypeError, ValueError) as e:
        parser.error(f"argument {flag}: {e}")


def add_root_argument(parser: argparse.ArgumentParser, checkout: Path) -> None:
    """--root: the project checkout to work on, by default `checkout` (the script's own)."""
    parser.add_argument("--root", type=Path, default=checkout,
                        help=f"project checkout: config.toml, solution/, baselines/ (default: this script's, "
                             f"{checkout})")


def chosen_project(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Path:
    """The checked --root, made the project checkout of this process (gdn_bench.paths.use_project)."""
    return use_project(checked(parser, "--root", check_checkout, args.root))

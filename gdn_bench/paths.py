"""Where the kit's files are: the project checkout, the embedded trace set, and the cache
folder for generated trace sets.

The project checkout (config.toml, solution/, baselines/) is the one a command works on,
chosen once per process by its entry point with `use_project`: each script passes its own
checkout (the parent of scripts/) unless --root names another, and the tests pass theirs.
It is never taken from where this package is installed, so one clone's scripts run with
another clone's virtual environment still read their own config.toml and solution/, and a
non-editable install finds them too. The embedded trace set is package data: it travels
with the package.
"""

import os
from pathlib import Path

CONFIG_NAME = "config.toml"
EMBEDDED_PATH = Path(__file__).resolve().parent / "data"
CACHE_ENV = "GDN_BENCH_CACHE"
_MARKERS = (CONFIG_NAME, "solution")  # what makes a folder a checkout of the kit

_project: Path | None = None


def checkout_of(script: str | Path) -> Path:
    """The checkout holding `script`, a file of its scripts/ folder."""
    return Path(script).resolve().parent.parent


def check_checkout(root: str | Path) -> Path:
    """`root` resolved, if it holds config.toml and solution/; else ValueError saying what is missing."""
    root = Path(root).expanduser().resolve()
    missing = [name for name in _MARKERS if not (root / name).exists()]
    if missing:
        raise ValueError(f"{root} is not a checkout of the kit: it has no {' and no '.join(missing)}")
    return root


def use_project(root: str | Path) -> Path:
    """Make `root` the project checkout that later calls read; returns it resolved
    (ValueError if it is not a checkout, see check_checkout)."""
    global _project
    _project = check_checkout(root)
    return _project


def project_root() -> Path:
    """The checkout chosen by use_project (RuntimeError if none was)."""
    if _project is None:
        raise RuntimeError("no project checkout chosen: call gdn_bench.paths.use_project(path) first")
    return _project


def harness_outside_project() -> Path | None:
    """This package's folder when it is not the project checkout's gdn_bench/ (another clone's
    install, or a non-editable one), else None: a report says so."""
    package = Path(__file__).resolve().parent
    return None if package == project_root() / "gdn_bench" else package


def cache_dir() -> Path:
    """$GDN_BENCH_CACHE if set, else gdn-bench under the user's cache folder
    ($XDG_CACHE_HOME, else ~/.cache)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "gdn-bench"


def cache_dir_origin() -> str:
    """Where cache_dir() comes from, in words, for messages about it."""
    if os.environ.get(CACHE_ENV):
        return f"${CACHE_ENV}"
    base = "$XDG_CACHE_HOME" if os.environ.get("XDG_CACHE_HOME") else "~/.cache"
    return f"{base}/gdn-bench, the default; set {CACHE_ENV} to choose another"

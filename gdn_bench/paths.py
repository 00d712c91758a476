"""Where the kit's files are: the project checkout, its config and sources, the embedded trace
set, and the cache folder for generated trace sets."""

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CONFIG_PATH = PROJECT_ROOT / "config.toml"
SOLUTION_ROOT = PROJECT_ROOT / "solution"
EMBEDDED_PATH = Path(__file__).resolve().parent / "data"
CACHE_ENV = "GDN_BENCH_CACHE"


def cache_dir() -> Path:
    """$GDN_BENCH_CACHE if set, else gdn-bench under the user's cache folder
    ($XDG_CACHE_HOME, else ~/.cache)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "gdn-bench"

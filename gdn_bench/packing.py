"""config.toml + solution/<language>/ -> a flashinfer-bench Solution (and solution.json).

config.toml:
    [solution]  name, definition, author, description (optional)
    [build]     language, entry_point ("file::function"), destination_passing_style
    [build.<language>]  optional overrides of entry_point / destination_passing_style
                        used when packing another language than [build].language

Packing uses flashinfer-bench's own `pack_solution_from_files` (top-level source files of
the folder) after checking what it does not: every key present, the decode definition,
no empty source file, and an entry point that exists in its file.
"""

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from flashinfer_bench import BuildSpec, Solution
from flashinfer_bench.agents import pack_solution_from_files
from flashinfer_bench.agents.solution_handler import VALID_SOURCE_EXTENSIONS

from gdn_bench.definition import DEFINITION_NAME

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CONFIG_PATH = PROJECT_ROOT / "config.toml"
SOLUTION_ROOT = PROJECT_ROOT / "solution"


class PackError(ValueError):
    """A config or source problem that stops packing; the message says what and where."""


@dataclass(frozen=True)
class SolutionConfig:
    """What config.toml says about one solution to pack."""

    name: str
    definition: str
    author: str
    description: str
    language: str
    entry_point: str
    destination_passing_style: bool


def _require(table: dict, section: str, key: str, kind: type, path: Path):
    if key not in table:
        raise PackError(f"{path}: missing key '{key}' in [{section}]")
    value = table[key]
    if not isinstance(value, kind) or (kind is str and not value.strip()):
        raise PackError(f"{path}: [{section}] {key} must be a non-empty {kind.__name__}, got {value!r}")
    return value


def read_config(path: Path = CONFIG_PATH, language: str | None = None) -> SolutionConfig:
    """Parse and check config.toml; `language` picks [build.<language>] over [build]."""
    path = Path(path)
    if not path.is_file():
        raise PackError(f"config file {path} not found")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise PackError(f"{path}: not valid TOML: {e}") from e
    for section in ("solution", "build"):
        if not isinstance(data.get(section), dict):
            raise PackError(f"{path}: missing section [{section}]")
    sol, build = data["solution"], data["build"]
    definition = _require(sol, "solution", "definition", str, path)
    if definition != DEFINITION_NAME:
        raise PackError(f"{path}: [solution] definition must be {DEFINITION_NAME!r}, got {definition!r}")
    default_language = _require(build, "build", "language", str, path)
    section, table = "build", build
    if language is not None and language != default_language:
        section, table = f"build.{language}", build.get(language)
        if not isinstance(table, dict):
            raise PackError(f"{path}: no [build.{language}] section for language {language!r}")
    return SolutionConfig(
        name=_require(sol, "solution", "name", str, path) + ("" if section == "build" else f"-{language}"),
        definition=definition,
        author=_require(sol, "solution", "author", str, path),
        description=sol.get("description", ""),
        language=language or default_language,
        entry_point=_require(table, section, "entry_point", str, path),
        destination_passing_style=_require(table, section, "destination_passing_style", bool, path),
    )


def _entry_defined(source: str, suffix: str, function: str) -> bool:
    """Whether `function` is defined at top level of a Python file or exported by a C++/CUDA one."""
    if suffix == ".py":
        tree = ast.parse(source)
        return any(isinstance(n, ast.FunctionDef) and n.name == function for n in tree.body)
    return re.search(rf"TVM_FFI_DLL_EXPORT_TYPED_FUNC\(\s*{re.escape(function)}\s*,", source) is not None


def check_sources(source_dir: Path, entry_point: str) -> None:
    """Raise PackError for a missing folder, an empty source file or a missing entry point."""
    if not source_dir.is_dir():
        raise PackError(f"source folder {source_dir} not found")
    sources = [p for p in sorted(source_dir.iterdir()) if p.is_file() and p.suffix.lower() in VALID_SOURCE_EXTENSIONS]
    for p in sources:
        if not p.read_text(encoding="utf-8").strip():
            raise PackError(f"{p}: empty source file (flashinfer-bench rejects empty sources)")
    file_name, _, function = entry_point.partition("::")
    if not function or "::" in function:
        raise PackError(f"entry_point {entry_point!r} must be 'file::function'")
    entry = source_dir / file_name
    if entry not in sources:
        raise PackError(f"entry_point file {file_name!r} is not a source file in {source_dir}")
    try:
        defined = _entry_defined(entry.read_text(encoding="utf-8"), entry.suffix.lower(), function)
    except SyntaxError as e:
        raise PackError(f"{entry}: not valid Python: {e}") from e
    if not defined:
        raise PackError(f"entry_point function {function!r} is not defined in {entry}")


def pack(config: SolutionConfig, source_dir: Path | None = None) -> Solution:
    """Pack the top-level sources of `source_dir` (default solution/<language>/)."""
    source_dir = Path(source_dir) if source_dir is not None else SOLUTION_ROOT / config.language
    check_sources(source_dir, config.entry_point)
    spec = BuildSpec(
        language=config.language,
        target_hardware=["cuda"],
        entry_point=config.entry_point,
        destination_passing_style=config.destination_passing_style,
    )
    return pack_solution_from_files(
        str(source_dir), spec, config.name, config.definition, config.author, config.description
    )


def write_solution(solution: Solution, path: Path) -> Solution:
    """Write solution.json and load it back; returns the loaded copy (raises if it differs)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(solution.model_dump_json(indent=2), encoding="utf-8")
    loaded = Solution.model_validate_json(path.read_text(encoding="utf-8"))
    if loaded.hash() != solution.hash():
        raise PackError(f"{path}: the written solution does not load back identically")
    return loaded

"""config.toml + solution/<language>/ -> a flashinfer-bench Solution (and solution.json).

config.toml, as the evaluator reads it (it checks out a tag and reads only these two):
    [solution]  name, definition, author, description (optional)
    [build]     language, entry_point ("file::function"), destination_passing_style
and, for this kit:
    [build.<language>]  optional overrides of entry_point / destination_passing_style
                        used when packing another language than [build].language
    [submission.<short name>]  another definition's submission from the same sources:
                        name, definition, entry_point, description (optionally language,
                        destination_passing_style); see `config_text_for`

A repository submits one definition per tag: `config_text_for` gives the config.toml that
scripts/submit.py commits for a definition, and `read_config(definition=...)` reads exactly
that text, so packing here gives what the evaluator packs from the tag.

Packing uses flashinfer-bench's own `pack_solution_from_files` (top-level source files of
the folder) after checking what it does not: every key present, no empty source file, and
an entry point that exists in its file.
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import tomlkit
from tomlkit.exceptions import TOMLKitError

from gdn_bench.paths import CONFIG_NAME

if TYPE_CHECKING:  # flashinfer-bench is imported where it is used (gdn_bench.definitions.spec says why)
    from flashinfer_bench import Solution

# Keys a [submission.<short name>] table may set, and where they go.
SUBMISSION_KEYS = {"name": "solution", "definition": "solution", "description": "solution",
                   "entry_point": "build", "language": "build", "destination_passing_style": "build"}


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


def _require_sections(data: dict, path: Path) -> None:
    for section in ("solution", "build"):
        if not isinstance(data.get(section), dict):
            raise PackError(f"{path}: missing section [{section}]")


def config_text_for(text: str, definition: str, path: Path = Path(CONFIG_NAME)) -> str:
    """config.toml's text with [solution] and [build] naming `definition`.

    Unchanged when [solution] already names it. Otherwise the [submission.<short name>]
    table whose `definition` is it supplies [solution]'s name, definition and description
    and [build]'s entry_point (and language / destination_passing_style if it sets them);
    the [build.<language>] overrides, written for the other definition, are dropped.
    Comments and every other table are kept (tomlkit)."""
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as e:
        raise PackError(f"{path}: not valid TOML: {e}") from e
    _require_sections(doc, path)
    if doc["solution"].get("definition") == definition:
        return text
    tables = doc.get("submission", {})
    matches = [short for short, table in tables.items()
               if isinstance(table, dict) and table.get("definition") == definition]
    if not matches:
        raise PackError(f"{path}: no submission for {definition}: [solution] names "
                        f"{doc['solution'].get('definition')!r} and no [submission.<name>] table names it")
    table = tables[matches[0]]
    for key in ("name", "definition", "entry_point"):
        _require(table, f"submission.{matches[0]}", key, str, path)
    for key, value in table.items():
        if key not in SUBMISSION_KEYS:
            raise PackError(f"{path}: [submission.{matches[0]}] has unknown key {key!r}; "
                            f"allowed: {', '.join(SUBMISSION_KEYS)}")
        doc[SUBMISSION_KEYS[key]][key] = value
    for key in [k for k, v in doc["build"].items() if isinstance(v, dict)]:
        del doc["build"][key]
    return tomlkit.dumps(doc)


def read_config(path: Path, language: str | None = None, definition: str | None = None) -> SolutionConfig:
    """Parse and check config.toml as the evaluator reads it: [solution] and [build] only.

    `definition` reads the text submit.py would commit for it (config_text_for); None takes
    whatever [solution] names (what a checkout of a submission's tag submits). `language`
    picks [build.<language>] over [build]; for another definition than [solution]'s, whose
    [build.<language>] tables are [solution]'s, the error says so."""
    path = Path(path)
    if not path.is_file():
        raise PackError(f"config file {path} not found")
    text = path.read_text(encoding="utf-8")
    adapted = text if definition is None else config_text_for(text, definition, path)
    if adapted != text and language is not None:
        _check_language_of_submission(text, adapted, language, path)
    return parse_config(adapted, path, language)


def _check_language_of_submission(text: str, adapted: str, language: str, path: Path) -> None:
    """PackError when `adapted` (config_text_for's, for another definition than [solution]'s)
    has no `language` build while `text` has one, [solution]'s, which config_text_for dropped."""
    own, other = tomllib.loads(text), tomllib.loads(adapted)
    if other["build"].get("language") == language or not isinstance(own["build"].get(language), dict):
        return
    definition = other["solution"].get("definition")
    short = next((k for k, t in own.get("submission", {}).items() if t.get("definition") == definition), "?")
    raise PackError(f"{path}: no {language} build for {definition}: [build.{language}] is for "
                    f"{own['solution'].get('definition')} ([solution]), and [submission.{short}] builds "
                    f"{other['build'].get('language')} (set language and entry_point there for {language})")


def parse_config(text: str, path: Path = Path(CONFIG_NAME), language: str | None = None) -> SolutionConfig:
    """[solution] and [build] (or [build.<language>]) of a config.toml text; `path` names it
    in error messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PackError(f"{path}: not valid TOML: {e}") from e
    _require_sections(data, path)
    sol, build = data["solution"], data["build"]
    default_language = _require(build, "build", "language", str, path)
    section, table = "build", build
    if language is not None and language != default_language:
        section, table = f"build.{language}", build.get(language)
        if not isinstance(table, dict):
            raise PackError(f"{path}: no [build.{language}] section for language {language!r}")
    return SolutionConfig(
        name=_require(sol, "solution", "name", str, path) + ("" if section == "build" else f"-{language}"),
        definition=_require(sol, "solution", "definition", str, path),
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
    from flashinfer_bench.agents.solution_handler import VALID_SOURCE_EXTENSIONS

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
    if not entry.is_file():
        raise PackError(f"entry_point file {entry} does not exist")
    if entry not in sources:
        raise PackError(f"entry_point file {file_name!r} is not a source file in {source_dir}")
    try:
        defined = _entry_defined(entry.read_text(encoding="utf-8"), entry.suffix.lower(), function)
    except SyntaxError as e:
        raise PackError(f"{entry}: not valid Python: {e}") from e
    if not defined:
        raise PackError(f"entry_point function {function!r} is not defined in {entry}")


def solution_dir(root: Path, language: str) -> Path:
    """Where a checkout keeps the sources of `language`: solution/<language>/."""
    return Path(root) / "solution" / language


def pack(config: SolutionConfig, source_dir: Path) -> Solution:
    """Pack the top-level sources of `source_dir` (a checkout's solution_dir, or a baseline's folder)."""
    from flashinfer_bench import BuildSpec
    from flashinfer_bench.agents import pack_solution_from_files

    source_dir = Path(source_dir)
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
    from flashinfer_bench import Solution

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(solution.model_dump_json(indent=2), encoding="utf-8")
    loaded = Solution.model_validate_json(path.read_text(encoding="utf-8"))
    if loaded.hash() != solution.hash():
        raise PackError(f"{path}: the written solution does not load back identically")
    return loaded

"""The project's layout as its map (docs/layout.md, linked from the README) states it, read
from the sources (nothing is imported): the harness's imports (lazy ones too) form no cycle, a
definition folder imports no measuring tool, no script imports another, and the map names every
module, script and submission file."""

import ast
import re
from pathlib import Path

from helpers import ROOT

PACKAGE = ROOT / "gdn_bench"
# What a definition is built from: its records (algos, roles), paths, shapes, call signature
# and the cache its generated mix is written to. Timing, checking and the tools that measure
# a submission sit above the definitions and import them.
DEFINITION_MAY_IMPORT = {"gdn_bench", "gdn_bench.algos", "gdn_bench.paths", "gdn_bench.roles", "gdn_bench.shapes",
                         "gdn_bench.signature", "gdn_bench.trace_cache"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imported(path: Path) -> set[str]:
    """Every dotted name a file imports, anywhere in it (`from a import b` gives a and a.b)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _harness_imports(module: str) -> set[str]:
    """The gdn_bench modules `module` imports."""
    return {name for name in _imported(MODULES[module]) if name in MODULES and name != module}


def test_the_harness_imports_form_no_cycle():
    graph = {module: _harness_imports(module) for module in MODULES}
    done, path = set(), []

    def visit(module):
        assert module not in path, f"import cycle: {' -> '.join(path[path.index(module):] + [module])}"
        if module in done:
            return
        path.append(module)
        for imported in sorted(graph[module]):
            visit(imported)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)


def test_a_definition_imports_no_measuring_tool():
    for module in MODULES:
        if module.startswith("gdn_bench.definitions"):
            outside = {m for m in _harness_imports(module) if not m.startswith("gdn_bench.definitions")}
            assert outside <= DEFINITION_MAY_IMPORT, f"{module} imports {sorted(outside - DEFINITION_MAY_IMPORT)}"


def test_no_script_imports_another():
    scripts = {p.stem for p in (ROOT / "scripts").glob("*.py")}
    for path in (ROOT / "scripts").glob("*.py"):
        roots = {name.split(".")[0] for name in _imported(path)}
        assert not roots & (scripts | {"scripts"}), f"{path.name} imports {sorted(roots & (scripts | {'scripts'}))}"


def test_the_layout_map_names_every_module_script_and_submission_file():
    page = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    layout = re.search(r"^```\n(.*?)^```$", page, re.S | re.M).group(1)  # the map: the page's fenced block
    named = set(re.findall(r"[\w/]+\.py", layout))
    files = [*PACKAGE.glob("*.py"), *(ROOT / "scripts").glob("*.py"), *(ROOT / "solution" / "triton").glob("*.py")]
    missing = [str(p.relative_to(ROOT)) for p in files
               if p.name != "__init__.py" and p.name not in named and str(p.relative_to(ROOT)) not in named]
    assert not missing, f"docs/layout.md's map does not name {missing}"

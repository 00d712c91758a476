"""The submissions import only torch, triton and the standard library, as the evaluator
requires; so each file holds its own copy of the host code they share, and the copies must
stay identical to the canonical one (SHARED)."""

import ast
import difflib
import subprocess
import sys
import textwrap

import pytest

from helpers import ALLOWED_THIRD_PARTY, KERNEL_PATH, ROOT, imported_roots

PREFILL_PATH = KERNEL_PATH.parent / "prefill.py"
MTP_PATH = KERNEL_PATH.parent / "mtp.py"
TMA_PATH = ROOT / "solution" / "triton_tma" / "kernel.py"
SUBMISSION_FILES = sorted(KERNEL_PATH.parent.glob("*.py")) + sorted(TMA_PATH.parent.glob("*.py"))
# Module-level names that several submission files define, word for word: the evaluator packs
# each solution/<language>/ folder on its own and imports only its entry file, so a shared
# module is not an option. The first file of each is the canonical source: change it there,
# then copy it (the test below prints the diff).
SHARED = {
    **{name: (KERNEL_PATH, PREFILL_PATH, TMA_PATH, MTP_PATH)
       for name in ("NUM_Q_HEADS", "NUM_V_HEADS", "HEAD_SIZE", "_softplus", "_expect", "_scale_value")},
    **{name: (KERNEL_PATH, PREFILL_PATH, TMA_PATH) for name in ("_INTERPRETED", "_expect_all")},
    **{name: (KERNEL_PATH, PREFILL_PATH) for name in ("_RUNTIME_KNOBS", "_hooks_installed", "_direct_launcher")},
    **{name: (KERNEL_PATH, TMA_PATH) for name in ("_ARG_NAMES", "_expected")},
    **{name: (KERNEL_PATH, MTP_PATH)
       for name in ("LaunchRow", "_launch_config", "_delta_rule_step", "_expect_pool", "_expect_indices")},
}
# Names that submission files define with different code, each its own (beyond SHARED's copies:
# prefill.py's _ARG_NAMES and _expected are the prefill definition's, mtp.py's _expected,
# LAUNCH_TABLE and _launch the MTP kernel's; _plan is decode's and prefill's own).
DIFFERENT = {"kernel", "_ARG_NAMES", "_expected", "LAUNCH_TABLE", "_launch", "_plan"}


def _definitions(path):
    """{name: source text} of a file's module-level functions, classes and assignments
    (decorators included)."""
    text = path.read_text(encoding="utf-8")
    lines, found = text.splitlines(), {}
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
        else:
            continue
        start = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
        for name in names:
            found[name] = "\n".join(lines[start - 1:node.end_lineno]) + "\n"
    return found


@pytest.mark.parametrize("name", SHARED)
def test_shared_host_code_is_identical_in_every_file(name):
    canonical, *copies = SHARED[name]
    want = _definitions(canonical)[name]
    for path in copies:
        got = _definitions(path).get(name)
        assert got is not None, f"{path.relative_to(ROOT)} has no {name}: copy it from {canonical.relative_to(ROOT)}"
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), str(canonical.relative_to(ROOT)),
                                            str(path.relative_to(ROOT))))
        assert got == want, f"{name} differs from its canonical copy; copy it over:\n{diff}"


def test_every_name_defined_in_several_files_is_listed():
    """A new copy is either listed in SHARED (and so kept identical) or meant to differ."""
    defined = {path: _definitions(path) for path in SUBMISSION_FILES}
    holders = {}
    for path, names in defined.items():
        for name in names:
            holders.setdefault(name, set()).add(path)
    unlisted = sorted(n for n, paths in holders.items()
                      if n not in DIFFERENT and len(paths) > 1 and paths != set(SHARED.get(n, ())))
    assert not unlisted, f"defined in several submission files, neither in SHARED's files nor DIFFERENT: {unlisted}"


@pytest.mark.parametrize("path", SUBMISSION_FILES, ids=lambda p: str(p.relative_to(ROOT / "solution")))
def test_ast_imports_only_torch_triton_stdlib(path):
    """Every Python file the evaluator packs from solution/triton/ (both definitions' tags hold
    all of them), and fla-tma's."""
    roots = set(imported_roots(path))
    outside = {r for r in roots if r not in ALLOWED_THIRD_PARTY and r not in sys.stdlib_module_names}
    assert not outside, f"{path.name} imports {outside}"


def test_imports_and_runs_where_nothing_else_can_be_imported(device):
    """In a fresh interpreter where flashinfer, fla and this project's package cannot be
    imported, the submission still imports and runs one decode step."""
    script = textwrap.dedent(
        f"""
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {{"flashinfer", "flashinfer_bench", "fla", "gdn_bench"}}:
                    raise ImportError("blocked: " + name)
        sys.meta_path.insert(0, Block())
        sys.path = [p for p in sys.path if p not in ("", {str(ROOT)!r})]
        import importlib.util, torch
        spec = importlib.util.spec_from_file_location("kernel", {str(KERNEL_PATH)!r})
        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
        dev = {device!r}
        B = 1
        q, k = (torch.randn(B, 1, 4, 128, device=dev).bfloat16() for _ in range(2))
        v = torch.randn(B, 1, 8, 128, device=dev).bfloat16()
        out = torch.empty(B, 1, 8, 128, device=dev, dtype=torch.bfloat16)
        ns = torch.empty(B, 8, 128, 128, device=dev)
        state = torch.randn(B, 8, 128, 128, device=dev)
        gates = [torch.randn(8, device=dev), torch.randn(B, 1, 8, device=dev).bfloat16()]
        mod.kernel(q, k, v, state, *gates, *gates, None, out, ns)
        assert torch.isfinite(out.float()).all() and torch.isfinite(ns).all()
        blocked = [m for m in sys.modules if m.split(".")[0] in {{"flashinfer", "flashinfer_bench", "fla", "gdn_bench"}}]
        assert not blocked, blocked
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd="/")
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr

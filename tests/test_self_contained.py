"""The Triton solutions are self-contained as the evaluator packs them: every file imports only
torch, triton, the standard library and files beside it (shared.py, the host code they
share), and each packed solution imports (and, where cheap, runs) from a clean folder where
nothing else can be imported, laid out as flashinfer-bench's builder lays it out."""

import subprocess
import sys
import textwrap

import pytest

from gdn_bench.definitions.decode.definition import DECODE
from gdn_bench.definitions.mtp.definition import MTP
from gdn_bench.definitions.prefill.definition import PREFILL
from helpers import ALLOWED_THIRD_PARTY, DEVICE, KERNEL_PATH, ROOT, imported_roots

SUBMISSION_FILES = sorted(KERNEL_PATH.parent.glob("*.py"))
# (definition, algorithm) of every Triton solution the kit packs from solution/triton/, and
# whether a call runs here: mtp's costs seconds in Triton's interpreter (its own tests make
# such calls), so on CPU it is imported only.
PACKED = {"decode": (DECODE, DECODE.submission, True), "fla-tma": (DECODE, "fla-tma", True),
          "prefill": (PREFILL, PREFILL.submission, True), "mtp": (MTP, MTP.submission, DEVICE == "cuda")}
BLOCKED = {"flashinfer", "flashinfer_bench", "fla", "gdn_bench"}
# One call of either definition's entry point on small random inputs, checked for finite outputs.
CALLS = {
    "decode": """
        B = 1
        q, k = (torch.randn(B, 1, 4, 128, device=dev).bfloat16() for _ in range(2))
        v = torch.randn(B, 1, 8, 128, device=dev).bfloat16()
        out = torch.empty(B, 1, 8, 128, device=dev, dtype=torch.bfloat16)
        ns = torch.empty(B, 8, 128, 128, device=dev)
        state = torch.randn(B, 8, 128, 128, device=dev)
        gates = [torch.randn(8, device=dev), torch.randn(B, 1, 8, device=dev).bfloat16()]
        entry(q, k, v, state, *gates, *gates, None, out, ns)
        """,
    "prefill": """
        T, N = 5, 2
        q, k = (torch.nn.functional.normalize(torch.randn(T, 4, 128, device=dev), dim=-1).bfloat16() for _ in range(2))
        v = torch.randn(T, 8, 128, device=dev).bfloat16()
        out = torch.empty(T, 8, 128, device=dev, dtype=torch.bfloat16)
        ns = torch.empty(N, 8, 128, 128, device=dev)
        state = torch.randn(N, 8, 128, 128, device=dev)
        cu = torch.tensor([0, 2, 5], device=dev)
        gates = [torch.randn(8, device=dev), torch.randn(T, 8, device=dev).bfloat16()]
        entry(q, k, v, state, *gates, *gates, cu, None, out, ns)
        """,
    "mtp": """
        B, T, P = 2, 3, 4
        q, k = (torch.nn.functional.normalize(torch.randn(B, T, 4, 128, device=dev), dim=-1).bfloat16() for _ in range(2))
        v = torch.randn(B, T, 8, 128, device=dev).bfloat16()
        out = torch.empty(B, T, 8, 128, device=dev, dtype=torch.bfloat16)
        pool = torch.randn(P, 8, 128, 128, device=dev)
        ns = torch.empty(P, T, 8, 128, 128, device=dev)
        final = torch.empty(P, 8, 128, 128, device=dev)
        gates = [torch.randn(8, device=dev), torch.randn(B, T, 8, device=dev).bfloat16()]
        entry(q, k, v, pool, torch.tensor([1, 3], device=dev, dtype=torch.int32), *gates, *gates, None, ns, out, final)
        ns = ns[[1, 3]]
        """,
}


@pytest.mark.parametrize("path", SUBMISSION_FILES, ids=lambda p: p.name)
def test_ast_imports_only_torch_triton_stdlib(path):
    """Every Python file the evaluator packs from solution/triton/ (every definition's tag holds
    all of them); a relative import names a file beside it (helpers.imported_roots)."""
    roots = set(imported_roots(path))
    outside = {r for r in roots if r not in ALLOWED_THIRD_PARTY and r not in sys.stdlib_module_names}
    assert not outside, f"{path.name} imports {outside}"


@pytest.mark.parametrize("name", PACKED)
def test_packed_solution_imports_and_runs_from_a_clean_folder(name, tmp_path, device):
    """The solution as packed (every source file, the entry point), written into
    <folder>/<package>/ and imported as <package>.<entry> with only <folder> added to the
    path, as flashinfer-bench's builder does, in a fresh interpreter where flashinfer, fla and
    this project's package cannot be imported."""
    spec, algo, runs = PACKED[name]
    solution = spec.algos_by_name[algo].solution()
    package = tmp_path / "packed_solution"
    package.mkdir()
    for source in solution.sources:
        (package / source.path).write_text(source.content, encoding="utf-8")
    entry_file, entry_symbol = solution.spec.entry_point.split("::")
    prelude = textwrap.dedent(
        f"""
        import importlib, importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {BLOCKED!r}:
                    raise ImportError("blocked: " + name)
        sys.meta_path.insert(0, Block())
        sys.path = [{str(tmp_path)!r}] + [p for p in sys.path if p not in ("", {str(ROOT)!r})]
        import torch
        module = importlib.import_module("packed_solution.{entry_file.removesuffix(".py")}")
        entry = getattr(module, {entry_symbol!r})
        dev = {device!r}
        """
    )
    call = textwrap.dedent(CALLS[spec.short]) + "assert torch.isfinite(out.float()).all() and torch.isfinite(ns).all()\n"
    check = f"assert not [m for m in sys.modules if m.split('.')[0] in {BLOCKED!r}]\nprint('ok')\n"
    result = subprocess.run([sys.executable, "-c", prelude + (call if runs else "") + check], capture_output=True,
                            text=True, cwd="/")
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr

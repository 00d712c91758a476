"""The submission imports only torch, triton and the standard library, as the evaluator requires."""

import subprocess
import sys
import textwrap

import pytest

from helpers import ALLOWED_THIRD_PARTY, KERNEL_PATH, ROOT, imported_roots

@pytest.mark.parametrize("path", sorted(KERNEL_PATH.parent.glob("*.py")), ids=lambda p: p.name)
def test_ast_imports_only_torch_triton_stdlib(path):
    """Every Python file the evaluator packs from solution/triton/ (both definitions' tags hold all of them)."""
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

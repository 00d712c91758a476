"""solution/triton/shared.py's Launcher: arguments by name, and the direct path it takes after
a configuration's first launch (with a stand-in compiled kernel on CPU: Triton's interpreter
compiles nothing; GDN_TEST_DEVICE=cuda runs the real one through the submissions' tests)."""

import pytest
import torch
import triton
import triton.language as tl

from gdn_bench.algos import load_solution_file
from helpers import KERNEL_PATH

shared = load_solution_file(KERNEL_PATH.parent / "shared.py", "gdn_shared_launcher")


@triton.jit
def _scaled_copy(x_ptr, out_ptr, factor, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, factor * tl.load(x_ptr + offs))


def test_arguments_by_name_in_any_order(device):
    x = torch.arange(16.0, device=device)
    out = torch.empty_like(x)
    launcher = shared.Launcher(_scaled_copy)
    launcher.prepare_by_name((1, 1, 1), {"factor": 2.0, "out_ptr": out, "x_ptr": x}, {"BLOCK": 16}, 1, x.get_device())()
    assert torch.equal(out, 2 * x)
    with pytest.raises(TypeError, match=r"^_scaled_copy: arguments \['out_ptr', 'x_ptr'\] and \['BLOCK'\] do not match"):
        launcher.prepare_by_name((1, 1, 1), {"x_ptr": x, "out_ptr": out}, {"BLOCK": 16}, 1, x.get_device())


class _Compiled:
    """A compiled kernel's stand-in: its launcher records what it was called with."""

    function, packed_metadata = "function", "metadata"

    def __init__(self):
        self.runs = []

    def run(self, *args):
        self.runs.append(args)


@pytest.fixture
def stand_in(monkeypatch):
    """(Launcher of a kernel whose every launch through Triton returns the stand-in compiled
    kernel and is logged, the log, the stand-in), compiled as on a GPU."""
    compiled, through_triton = _Compiled(), []

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: (through_triton.append((grid, args, kwargs)), compiled)[1]

    monkeypatch.setattr(shared, "INTERPRETED", False)
    monkeypatch.setattr(shared, "_probed_way", lambda compiled, device_index, args, kept: (
        shared.ways_to_launch(compiled)[0], lambda index: f"stream{index}"))
    monkeypatch.setattr(shared, "hooks_installed", lambda: False)
    return shared.Launcher(Kernel()), through_triton, compiled


def test_the_direct_path_after_the_first_launch(stand_in):
    launcher, through_triton, compiled = stand_in
    x = torch.zeros(16)
    args, constexprs = (x, 0.5), (("BLOCK", 16), ("HAS_STATE", True))
    launcher.launch((2, 3, 1), args, constexprs, 4, 0)
    assert through_triton == [((2, 3, 1), args, {"BLOCK": 16, "HAS_STATE": True, "num_warps": 4})]
    launcher.launch((2, 3, 1), args, constexprs, 4, 0)
    launcher.prepare((5, 1, 1), args, constexprs, 4, 0)()
    assert len(through_triton) == 1
    head = ("stream0", "function", "metadata", None, None, None, x.data_ptr(), 0.5, 16, True)
    assert compiled.runs == [(2, 3, 1, *head), (5, 1, 1, *head)]


def test_compile_options_go_to_triton_and_key_the_compiled_kernel(stand_in):
    """Compile options (maxnreg) reach Triton's launch and make a configuration of their own;
    each configuration then takes the direct path."""
    launcher, through_triton, compiled = stand_in
    x = torch.zeros(16)
    args, constexprs, capped = (x, 0.5), (("BLOCK", 16),), (("maxnreg", 168),)
    launcher.launch((1, 1, 1), args, constexprs, 4, 0)
    launcher.launch((1, 1, 1), args, constexprs, 4, 0, options=capped)
    launcher.prepare((1, 1, 1), args, constexprs, 4, 0, options=capped)()
    assert through_triton == [((1, 1, 1), args, {"BLOCK": 16, "num_warps": 4}),
                              ((1, 1, 1), args, {"BLOCK": 16, "num_warps": 4, "maxnreg": 168})]
    assert len(compiled.runs) == 1
    with shared.recording_launches() as recorded:
        launcher.launch((1, 1, 1), args, constexprs, 4, 0, options=capped)
    assert recorded == [shared.LaunchRecord(launcher.fn, (1, 1, 1), args, constexprs, 4, capped)]


def test_triton_s_path_where_the_direct_one_is_not_valid(stand_in, monkeypatch):
    """A pointer not 16-byte aligned, or a launch hook (a profiler), keeps Triton's path."""
    launcher, through_triton, compiled = stand_in
    x = torch.zeros(16)
    launcher.launch((1, 1, 1), (x, 1.0), (("BLOCK", 16),), 1, 0)
    launcher.launch((1, 1, 1), (x[1:], 1.0), (("BLOCK", 16),), 1, 0)  # 4 bytes in
    monkeypatch.setattr(shared, "hooks_installed", lambda: True)
    launcher.launch((1, 1, 1), (x, 1.0), (("BLOCK", 16),), 1, 0)
    assert len(through_triton) == 3 and compiled.runs == []

"""The architecture report (gdn_bench/arch_report.py, scripts/arch_report.py): the committed
report is the code's and passes its checks (no spill beyond TOLERATED_SPILLS, shared memory
and tensor memory within their limits, the MMA class EXPECTED_MMA asks for, an instruction that
writes global memory, every table row reached), a sample of it compiles again to the same
numbers, and a launch that spills, compiled offline for sm_100a, is flagged; the checks on report
rows; the count of global writes in PTX; run_modal's summary; and the recording of launches
(shared.recording_launches) that the report and the tuner rely on.

Compiling needs Triton without its interpreter, which these tests run under (conftest): the
compiles run in a subprocess without TRITON_INTERPRET (about 25 s of CPU for the check)."""

import json
import os
import subprocess
import sys

import pytest
import torch

from gdn_bench import arch_compile, arch_report
from gdn_bench.algos import load_solution_file
from helpers import KERNEL_PATH, ROOT

shared = load_solution_file(KERNEL_PATH.parent / "shared.py", "gdn_shared_recording")

# A kernel that spills wherever it is compiled: a [128, 128] float32 tile in one warp (512
# values a thread), every element live until the tile's maximum is known (sm_100a: 5192 bytes
# stored, 5952 loaded per thread).
SPILLING = '''
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

from gdn_bench import arch_compile, arch_report
from gdn_bench.algos import load_solution_file


@triton.jit
def _spilling(x_ptr, out_ptr, N: tl.constexpr):
    tile = tl.load(x_ptr + tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(out_ptr + tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :], tile / tl.max(tl.max(tile, 1), 0))


shared = load_solution_file(Path(sys.argv[1]), "gdn_shared_spilling")
record = shared.LaunchRecord(_spilling, (1, 1, 1), (torch.empty(128 * 128), torch.empty(128 * 128)), (("N", 128),), 1)
[compiled] = arch_compile.compile_all([arch_compile.job(record, (10, 0))], 1, use_cache=False)
row = dict(compiled._asdict(), plan="sm100", kernel="_gdn_decode_kernel")  # as if decode's kernel spilled
print(json.dumps({"compiled": compiled._asdict(), "problems": arch_report.problems(row)}))
'''


def _compiling(tmp_path) -> dict:
    """The environment of a subprocess that compiles: no interpreter; Triton's and the report's
    caches in `tmp_path`."""
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    return dict(env, GDN_BENCH_CACHE=str(tmp_path / "gdn-bench"), TRITON_CACHE_DIR=str(tmp_path / "triton"))


def test_the_committed_report_is_the_code_s_and_passes_its_checks(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "arch_report.py"), "--check", "--jobs", "2"],
                          env=_compiling(tmp_path), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.endswith("the code's report, no problem\n")


def test_a_spilling_launch_compiled_for_sm100a_is_flagged(tmp_path):
    script = tmp_path / "spilling.py"
    script.write_text(SPILLING)
    done = subprocess.run([sys.executable, str(script), str(KERNEL_PATH.parent / "shared.py")],
                          env=_compiling(tmp_path), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    compiled = result["compiled"]
    assert compiled["spill_stores"] > 0 and compiled["spill_loads"] > 0
    assert result["problems"] == [f"spills {compiled['spill_stores']} B stored, {compiled['spill_loads']} B loaded "
                                  "per thread"]


def _row(**changes) -> dict:
    """A report row of decode's kernel on sm_100a that passes every check, with `changes`."""
    row = {"arch": "sm_100a", "plan": "sm100", "kernel": "_gdn_decode_kernel", "regs": 128, "stack": 0,
           "spill_stores": 0, "spill_loads": 0, "smem": 32, "tmem": 0, "mma": "none", "global_writes": 3}
    return dict(row, **changes)


TOLERATED = arch_report.TOLERATED_SPILLS["sm100"]["span_pass_kernel"]


@pytest.mark.parametrize("changes, found", [
    ({}, []),
    ({"spill_stores": 4, "spill_loads": 0}, ["spills 4 B stored, 0 B loaded per thread"]),
    ({"kernel": "span_pass_kernel", "spill_stores": TOLERATED, "spill_loads": TOLERATED, "mma": "tcgen05"}, []),
    ({"kernel": "span_pass_kernel", "spill_stores": 4, "spill_loads": TOLERATED + 4, "mma": "tcgen05"},
     [f"spills 4 B stored, {TOLERATED + 4} B loaded per thread (TOLERATED_SPILLS: {TOLERATED})"]),
    ({"smem": arch_report.SHARED_MEMORY_LIMIT + 1},
     [f"shared memory {arch_report.SHARED_MEMORY_LIMIT + 1} B > {arch_report.SHARED_MEMORY_LIMIT} B"]),
    ({"kernel": "span_pass_kernel", "mma": "mma.sync"}, ["MMA mma.sync, expected tcgen05 (EXPECTED_MMA)"]),
    ({"plan": "sm90", "kernel": "span_pass_kernel", "mma": "mma.sync"}, ["MMA mma.sync, expected wgmma (EXPECTED_MMA)"]),
    ({"kernel": "_new_kernel"}, ["a kernel gdn_bench.arch_launches.SETTINGS does not name"]),
    ({"global_writes": 0}, ["no instruction writes global memory: the compiled kernel has no effect (a body "
                            "compiled away, as into a bare trap)"]),
    ({"tmem": arch_report.TENSOR_MEMORY_LIMIT + 128},
     [f"tensor memory {arch_report.TENSOR_MEMORY_LIMIT + 128} columns > {arch_report.TENSOR_MEMORY_LIMIT}"]),
], ids=["clean", "spill", "tolerated", "beyond-tolerated", "shared-memory", "no-tcgen05", "no-wgmma", "unnamed",
        "no-effect", "tensor-memory"])
def test_the_checks_of_a_row(changes, found):
    assert arch_report.problems(_row(**changes)) == found


def test_run_modal_s_summary_is_the_committed_report_s():
    lines = arch_report.committed_summary("B200")
    assert lines[0].startswith("architecture report of B200 (sm_100a), compiled offline with Triton ")
    assert lines[1].startswith("  sm_100a: ") and "    problems: 0" in lines
    assert arch_report.committed_summary("b200:2")[1:] == lines[1:]
    assert arch_report.committed_summary("A100") == []


class _Compiled:
    """A compiled kernel's stand-in: its launcher records what it was called with."""

    function = packed_metadata = None

    def __init__(self):
        self.runs = []

    def run(self, *args):
        self.runs.append(args)


def test_recording_launches_records_every_launch_and_makes_none(monkeypatch):
    """Inside recording_launches a Launcher records its launches, by Triton's path or by the
    direct one of a configuration launched before, prepared or not, and launches nothing;
    after it, launches go out again."""
    through_triton, compiled = [], _Compiled()

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: through_triton.append(grid)

    monkeypatch.setattr(shared, "hooks_installed", lambda: False)
    launcher, x = shared.Launcher(Kernel()), torch.zeros(16)
    constexprs = (("BLOCK", 16),)
    way = shared.ways_to_launch(compiled)[0]  # Triton's wrapper: all a stand-in has
    launcher.compiled[(0, launcher.config(constexprs, 4), ())] = shared.DirectEntry(  # launched before
        way, lambda index: "stream", (16,), {}, {})
    with shared.recording_launches() as recorded:
        launcher.launch((1, 1, 1), (x, 0.5), constexprs, 4, 0)
        launcher.prepare((2, 1, 1), (x, 0.5), (("BLOCK", 32),), 2, 0)()
    assert recorded == [shared.LaunchRecord(launcher.fn, (1, 1, 1), (x, 0.5), constexprs, 4),
                        shared.LaunchRecord(launcher.fn, (2, 1, 1), (x, 0.5), (("BLOCK", 32),), 2)]
    assert compiled.runs == [] and through_triton == [] and type(launcher) is shared.Launcher
    launcher.launch((1, 1, 1), (x, 0.5), constexprs, 4, 0)
    assert len(compiled.runs) == 1


# A kernel compiled into nothing but a trap (Triton 3.6 and 3.7.1 did this to a whole kernel for
# sm_100a, docs/perf.md item 31), cut to its instructions, and the writes PTX can make.
TRAPPED_PTX = """.visible .entry fused_kernel(
	.param .u64 .ptr .global .align 1 fused_kernel_param_0
)
.reqntid 256
{
	trap;
}
"""
WRITING_PTX = """	ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd1];
	st.shared.b32 [%r5], %r1;
	st.global.v4.b32 [%rd2], {%r1, %r2, %r3, %r4};
	@%p1 st.global.b16 [%rd3], %rs1;
	red.global.add.f32 [%rd4], %f1;
	atom.global.cas.b32 %r6, [%rd5], %r7, %r8;
	cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd6, {%r9, %r10}], [%r11];
"""


def test_global_writes_are_counted_from_the_ptx():
    assert arch_compile.global_writes(TRAPPED_PTX) == 0
    assert arch_compile.global_writes(WRITING_PTX) == 5

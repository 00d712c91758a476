"""solution/cuda/kernel.cu, the TVM-FFI CUDA kernels gdn_decode_v4 and gdn_decode_v1.

On CPU: the source compiles and links for sm_90 with nvcc and TVM-FFI's headers, loads
through TVM-FFI with both entry points taking the definition's 11 arguments (state None and
a float scale included), and packs through config.toml's [build.cuda].
On a GPU (GDN_TEST_DEVICE=cuda): both entry points, built by flashinfer-bench's builder from
the packed solution, against the float64 reference, plus argument validation.
"""

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from gdn_bench.packing import pack, read_config, solution_dir
from helpers import (DEVICE, ROOT, SEED, TENSOR_ARGS, call_and_check, kernel_args, non_contiguous, wrong_dtype,
                     wrong_shape)

SOURCE = ROOT / "solution" / "cuda" / "kernel.cu"
ENTRY_POINTS = ("gdn_decode_v4", "gdn_decode_v1")
NVCC = shutil.which("nvcc")
SCALES = (None, 0.0, 0.0625)


def _tvm_ffi_paths():
    """(include dirs, library dir) of the installed TVM-FFI, or None if it has no headers."""
    try:
        from tvm_ffi import libinfo

        includes = sorted({libinfo.find_include_path(), libinfo.find_dlpack_include_path()})
        library = Path(libinfo.find_libtvm_ffi()).parent
    except (ImportError, AttributeError, RuntimeError):  # not installed, too old, or no headers
        return None
    return includes, library


needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
needs_gpu = pytest.mark.skipif(DEVICE != "cuda", reason="needs a CUDA GPU (run with GDN_TEST_DEVICE=cuda)")


@needs_nvcc
def test_compiles_for_sm90_and_exports_both_entry_points(tmp_path):
    paths = _tvm_ffi_paths()
    if paths is None:
        pytest.skip("TVM-FFI (apache-tvm-ffi) headers not found")
    includes, library = paths
    lib = tmp_path / "gdn_cuda.so"
    cmd = [NVCC, "-std=c++17", "-O2", "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC",
           *(f"-I{p}" for p in includes), str(SOURCE), "-o", str(lib), f"-L{library}", "-ltvm_ffi"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, f"nvcc failed:\n{' '.join(cmd)}\n{result.stderr}"

    import tvm_ffi

    module = tvm_ffi.load_module(str(lib))
    args = kernel_args("cpu")
    for entry in ENTRY_POINTS:
        # The FFI layer accepts the definition's argument kinds (else TypeError); the entry
        # point then refuses CPU tensors, naming q.
        with pytest.raises(ValueError, match=r"^q: expected device cuda, got cpu"):
            getattr(module, entry)(*args.values())
        with pytest.raises(ValueError, match=r"^q: expected device cuda"):
            getattr(module, entry)(*dict(args, state=None, scale=0.0).values())


def _solution(entry):
    """The packed CUDA solution of config.toml's [build.cuda], with this entry point."""
    config = read_config(ROOT / "config.toml", language="cuda")
    if entry != config.entry_point.partition("::")[2]:
        config = dataclasses.replace(config, name=f"{config.name}-{entry}", entry_point=f"kernel.cu::{entry}")
    return pack(config, solution_dir(ROOT, "cuda"))


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_packs_from_build_cuda_section(entry):
    solution = _solution(entry)
    assert solution.spec.language.value == "cuda"
    assert solution.spec.entry_point == f"kernel.cu::{entry}"
    assert solution.spec.destination_passing_style is True
    assert {s.path: s.content for s in solution.sources} == {"kernel.cu": SOURCE.read_text()}


def _build(entry):
    """The entry point built by flashinfer-bench's builder registry (cached per process)."""
    from flashinfer_bench.compile import BuilderRegistry

    from gdn_bench.definitions.decode.definition import build_definition

    return BuilderRegistry.get_instance().build(build_definition(), _solution(entry))


@needs_gpu
@needs_nvcc
@pytest.mark.parametrize("with_state", (True, False), ids=("state", "no-state"))
@pytest.mark.parametrize("batch", (1, 3, 16, 64, 128, 512), ids=lambda b: f"B{b}")
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_matches_float64_reference(entry, batch, with_state, device):
    scale = SCALES[(batch + with_state) % len(SCALES)]
    call_and_check(_build(entry), batch, with_state, scale, SEED + 10 * batch + with_state, device, entry)


@needs_gpu
@needs_nvcc
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_in_place_state_update(entry, device):
    """new_state may be the state tensor itself (each lane reads its chunks before writing)."""
    call_and_check(_build(entry), 3, True, None, SEED + 7, device, f"{entry} in place", in_place=True)


def _on_cpu(t):
    return t.cpu()


@needs_gpu
@needs_nvcc
@pytest.mark.parametrize("name", TENSOR_ARGS)
@pytest.mark.parametrize(
    "corrupt, expected",
    [(wrong_shape, "shape"), (wrong_dtype, "dtype"), (_on_cpu, "device"), (non_contiguous, "contiguous")],
    ids=["shape", "dtype", "device", "contiguous"],
)
def test_bad_tensor_is_named(name, corrupt, expected, device):
    args = kernel_args(device)
    args[name] = corrupt(args[name])
    with pytest.raises(ValueError, match=rf"^{name}: expected.*{expected}"):
        _build("gdn_decode_v4")(*args.values())


@needs_gpu
@needs_nvcc
def test_bad_scale_is_named(device):
    with pytest.raises(ValueError, match=r"^scale: expected a finite float"):
        _build("gdn_decode_v4")(*dict(kernel_args(device), scale=float("nan")).values())

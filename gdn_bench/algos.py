"""The algorithm registry: every algorithm is a flashinfer-bench Solution packed from a folder
of sources, exactly as scripts/pack_solution.py packs the submission.

An algorithm whose optional dependency is missing, or that needs a GPU the machine lacks,
reports why through `Algo.unavailable()`; the runner skips it with that line.
"""

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch
from flashinfer_bench import Solution

from gdn_bench.definition import DEFINITION_NAME
from gdn_bench.packing import PROJECT_ROOT, SolutionConfig, pack, read_config

SUBMISSION = "fla-recurrent"


@dataclass(frozen=True)
class Algo:
    """One row of the report. `config` None means: the submission, read from config.toml."""

    name: str
    summary: str
    config: SolutionConfig | None
    source_dir: str
    needs_gpu: bool = False
    min_compute_capability: tuple[int, int] | None = None
    requires: tuple[str, ...] = ()  # importable modules it needs
    extra: str | None = None  # `pip install -e ".[extra]"` provides them
    # Timed after every other algorithm: running it changes how other kernels time in the
    # same process (seen on an H200: fi-baseline timed ~12 % faster once torch.compile had run).
    time_last: bool = False

    def unavailable(self) -> str | None:
        """Why this algorithm cannot run here, or None if it can."""
        missing = [m for m in self.requires if importlib.util.find_spec(m) is None]
        if missing:
            how = f'pip install -e ".[{self.extra}]"' if self.extra else f"pip install {' '.join(missing)}"
            return f"needs {', '.join(missing)}: {how}"
        if self.needs_gpu and not torch.cuda.is_available():
            return "needs a CUDA GPU"
        if self.min_compute_capability and torch.cuda.is_available():
            have = torch.cuda.get_device_capability()
            if have < self.min_compute_capability:
                want = "sm_%d%d" % self.min_compute_capability
                return f"needs {want} or newer; this GPU is sm_{have[0]}{have[1]}"
        return None

    def solution(self) -> Solution:
        """The packed Solution (raises PackError if the sources are broken)."""
        return pack(self.config or read_config(), PROJECT_ROOT / self.source_dir)


def _config(name: str, language: str = "python", entry: str = "main.py::run", dps: bool = False) -> SolutionConfig:
    return SolutionConfig(
        name=name, definition=DEFINITION_NAME, author="gdn-decode-kit", description="",
        language=language, entry_point=entry, destination_passing_style=dps,
    )


ALGOS: dict[str, Algo] = {
    a.name: a
    for a in (
        Algo(SUBMISSION, "the submission: fused recurrent Triton kernel", None, "solution/triton"),
        Algo("pt-reference", "PyTorch loop over batch and head", _config("pt-reference"),
             "baselines/pt_reference"),
        Algo("pt-compiled", "torch.compile of the vectorized reference", _config("pt-compiled"),
             "baselines/pt_compiled", time_last=True),
        Algo("fi-baseline", "FlashInfer gated_delta_rule_decode_pretranspose (contest baseline)",
             _config("fi-baseline"), "baselines/fi_baseline",
             needs_gpu=True, requires=("flashinfer",)),
        Algo("fla-lib", "flash-linear-attention fused_recurrent_gated_delta_rule",
             _config("fla-lib"), "baselines/fla_lib",
             needs_gpu=True, requires=("fla",), extra="baselines"),
        Algo("fla-tma", "Triton variant: TMA tensor descriptors, pipelined loop over V-tiles",
             _config("fla-tma", "triton", "kernel.py::kernel", dps=True), "solution/triton_tma",
             needs_gpu=True, min_compute_capability=(9, 0)),
        Algo("cuda-v1", "CUDA (TVM-FFI): one warp per block, lanes hold float4 columns of 8 rows",
             _config("cuda-v1", "cuda", "kernel.cu::gdn_decode_v1", dps=True), "solution/cuda",
             needs_gpu=True, requires=("tvm_ffi",)),
        Algo("cuda-v4", "CUDA (TVM-FFI): 8 warps per block, one V-row per warp",
             _config("cuda-v4", "cuda", "kernel.cu::gdn_decode_v4", dps=True), "solution/cuda",
             needs_gpu=True, requires=("tvm_ffi",)),
    )
}


def resolve(spec: str) -> list[Algo]:
    """'all' or a comma-separated list of names -> algorithms; unknown names raise ValueError."""
    if spec.strip() == "all":
        return list(ALGOS.values())
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in ALGOS]
    if unknown or not names:
        raise ValueError(f"unknown algorithm {', '.join(unknown) or repr(spec)}; valid: {', '.join(ALGOS)}, all")
    return [ALGOS[n] for n in dict.fromkeys(names)]


def load_module(path: Path, name: str) -> ModuleType:
    """Import a source file as a module (solution folders are not packages)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SUBMISSION_KERNEL = PROJECT_ROOT / ALGOS[SUBMISSION].source_dir / "kernel.py"


def load_submission() -> ModuleType:
    """The submission's kernel.py as a module (for tuning and host timing)."""
    return load_module(SUBMISSION_KERNEL, "gdn_submission")

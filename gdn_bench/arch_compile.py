"""One recorded launch (shared.LaunchRecord) compiled offline for a GPU this machine need not
have, and what the compiler made of it: registers, spills, shared memory, the MMA instruction
class. No GPU and no CUDA driver are needed: Triton's own binder specializes the recorded
arguments for the target (alignment, dtypes, constexprs: what `kernel[grid](...)` does on that
GPU), triton.compile takes it through its bundled ptxas, and ptxas's own report (`-v`, which
Triton passes) gives registers and spills.

Triton interprets kernels under TRITON_INTERPRET=1 (the tests): compile in a process without it.

A result is kept in the cache folder (gdn_bench.paths.cache_dir, `arch-report/`) under the
launch's key: a hash of the kernel's source and everything it calls (Triton's source hash:
its line number included), the specialized signature and constexprs, the compile options, the
target and the ptxas and Triton versions. The same key compiles the same code.
"""

import contextlib
import hashlib
import io
import json
import multiprocessing
import re
from concurrent.futures import ProcessPoolExecutor
from typing import NamedTuple

import triton
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend
from triton.runtime.jit import create_function_from_signature

from gdn_bench.paths import cache_dir

# The MMA instruction classes, as their PTX opcodes begin, in the order a kernel is classed:
# Blackwell's tcgen05, Hopper's warpgroup MMA, then the warp-level MMA of Ampere onwards.
MMA_CLASSES = (("tcgen05.mma", "tcgen05"), ("wgmma.mma_async", "wgmma"), ("mma.sync", "mma.sync"))
_PTXAS_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_REGISTERS = re.compile(r"Used (\d+) registers")
_PTXAS_STATIC_SHARED = re.compile(r"(\d+) bytes smem")
# PTX instructions that write global memory: plain, vector and predicated stores, reductions and
# atomics, and TMA's bulk copies from shared to global memory.
_GLOBAL_WRITES = re.compile(r"\b(?:st|red|atom)(?:\.\w+)*\.global\b|\bcp\.async\.bulk(?:\.tensor\.\dd)?\.global\.")
# Bumped when Compiled gains a field, so that the cache's older results are not read as this one's.
_SCHEMA = "2"


class Compiled(NamedTuple):
    """What ptxas made of one launch: registers per thread, stack frame and spill bytes per
    thread (stores, loads), shared memory per program in bytes (Triton's dynamic allocation
    plus any static), tensor memory columns (Blackwell; 0 elsewhere), the MMA class (tcgen05,
    wgmma, mma.sync or none) and the PTX's instructions that write global memory (none: the
    kernel can have no effect; Triton 3.6 and 3.7.1 have compiled a whole kernel into a bare
    `trap` for sm_100a, docs/perf.md item 31)."""
    regs: int
    stack: int
    spill_stores: int
    spill_loads: int
    smem: int
    tmem: int
    mma: str
    global_writes: int


class Job(NamedTuple):
    """A launch ready to compile for one target: Triton's source object, the target, the
    parsed options and the key (see the module docstring)."""
    src: ASTSource
    target: GPUTarget
    options: object
    key: str


def target_of(capability: tuple[int, int]) -> GPUTarget:
    """The CUDA target of a compute capability (sm_90a, sm_100a, sm_103a: Triton adds the
    `a` from 9.0 on)."""
    return GPUTarget("cuda", capability[0] * 10 + capability[1], 32)


def job(record, capability: tuple[int, int]) -> Job:
    """The compile job of a recorded launch for `capability`: its arguments specialized by
    Triton's own binder and packed as JITFunction.run packs them before it compiles."""
    target = target_of(capability)
    backend = make_backend(target)
    fn = record.fn
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    kwargs = dict(record.constexprs, num_warps=record.num_warps, **dict(record.options))
    bound, specialization, options = binder(*record.args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    src = _source_class(fn)(fn, signature, constexprs, attrs)
    text = f"{triton.__version__}-{src.hash()}-{backend.hash()}-{options.hash()}-{_SCHEMA}"
    return Job(src, target, options, hashlib.sha256(text.encode()).hexdigest())


def _source_class(fn):
    """Triton's source class for `fn`: Gluon's for a Gluon kernel (it sets the module's
    attributes Gluon's layouts need before the kernel's code is generated), else ASTSource."""
    if getattr(fn, "is_gluon", lambda: False)():
        from triton.experimental.gluon._runtime import GluonASTSource
        return GluonASTSource
    return ASTSource


def compile_job(work: Job) -> Compiled:
    """Compile `work` (always: Triton prints ptxas's report only when ptxas runs) and read
    the result from ptxas's report, the metadata and the PTX."""
    log = io.StringIO()
    with knobs.nvidia.scope(), knobs.compilation.scope():
        knobs.nvidia.dump_ptxas_log = True
        knobs.compilation.always_compile = True
        with contextlib.redirect_stdout(log):
            kernel = triton.compile(work.src, target=work.target, options=work.options.__dict__)
    return read_compiled(log.getvalue(), kernel.metadata, kernel.asm["ptx"])


def read_compiled(ptxas_log: str, metadata, ptx: str) -> Compiled:
    """Compiled from ptxas's `-v` report of one kernel, Triton's metadata and the PTX."""
    stack, stores, loads = (int(n) for n in _PTXAS_SPILLS.search(ptxas_log).groups())
    static_shared = sum(int(n) for n in _PTXAS_STATIC_SHARED.findall(ptxas_log))
    mma = next((name for opcode, name in MMA_CLASSES if opcode in ptx), "none")
    return Compiled(regs=int(_PTXAS_REGISTERS.search(ptxas_log).group(1)), stack=stack, spill_stores=stores,
                    spill_loads=loads, smem=metadata.shared + static_shared, tmem=getattr(metadata, "tmem_size", 0) or 0,
                    mma=mma, global_writes=global_writes(ptx))


def global_writes(ptx: str) -> int:
    """How many instructions of `ptx` write global memory (_GLOBAL_WRITES)."""
    return len(_GLOBAL_WRITES.findall(ptx))


def compile_all(jobs: list[Job], workers: int, use_cache: bool = True, progress=None) -> list[Compiled]:
    """Compiled for every job, in order: from the cache where it holds the key (unless
    use_cache is False), else compiled in `workers` processes (forked: a job's source object
    holds the kernel, which does not pickle) and cached. `progress(n)` is told of each one
    done."""
    folder = cache_dir() / "arch-report"
    results = {}
    if use_cache:
        for work in jobs:
            path = folder / f"{work.key}.json"
            if path.is_file():
                results[work.key] = Compiled(**json.loads(path.read_text()))
    todo = list({work.key: work for work in jobs if work.key not in results}.values())
    if progress:
        progress(len(jobs) - len(todo))
    if todo:
        global _PENDING
        _PENDING = todo
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=max(1, min(workers, len(todo))), mp_context=context) as pool:
            for work, compiled in zip(todo, pool.map(_compile_pending, range(len(todo)))):
                results[work.key] = compiled
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"{work.key}.json").write_text(json.dumps(compiled._asdict()))
                if progress:
                    progress(1)
    return [results[work.key] for work in jobs]


_PENDING: list[Job] = []  # the jobs compile_all's forked workers compile, by index


def _compile_pending(index: int) -> Compiled:
    return compile_job(_PENDING[index])

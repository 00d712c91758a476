"""A faster Triton CPU interpreter (the tests and the CPU pass of run_local): its products and
its device-function calls.

The interpreter computes tl.dot(a, b) as numpy.matmul(a, b, dtype=float32) on the operands'
own numpy dtypes, and the prefill kernels make thousands of small products. Measured on the
kit's 2-core CPU machine, a [64, 64] x [64, 128] float16 product: 400 us that way with
OpenBLAS's default threads (which contend with each other and with the other test worker on
so small a product), 40 us with one BLAS thread, 21 us with one thread through BLAS on
float32 copies. use_blas_products() does the last: one BLAS thread (threadpoolctl), and the
interpreter converts float16 and float32 operands to the accumulator's dtype first (exact:
every float16 and float32 value is a float32 or float64 value). The result is the same
products summed in float32 in another order; other operand types (integers, bfloat16 stored
as raw bits, float8) keep the interpreter's own path.

Calls. The interpreter patches triton.language's builtins (inspecting every member of its
modules) when a kernel is launched, and again at every call of a @triton.jit helper from
inside it: 39,000 such calls in one 64-token prefill call took two thirds of its 3 s. The
patches are set on the modules themselves (triton.language, triton.language.core), so during
a launch a helper whose modules are already patched needs nothing: use_blas_products() skips
the patching for such a helper (a helper that sees a module not yet patched in this launch,
as triton.language's own helpers see triton.language.core, still patches it); a launch still
patches, and restores, as before.
"""

import numpy as np
from threadpoolctl import threadpool_limits

_EXACT = (np.float16, np.float32)


def use_blas_products() -> None:
    """Patch the interpreter's dot and limit BLAS to one thread (idempotent). Call after
    TRITON_INTERPRET=1 is set."""
    from triton.runtime import interpreter

    threadpool_limits(limits=1, user_api="blas")
    builder = interpreter.InterpreterBuilder
    if getattr(builder.create_dot, "blas", False):
        return
    own = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        acc = d.data.dtype
        if a.data.dtype.type in _EXACT and b.data.dtype.type in _EXACT and acc.type in (np.float32, np.float64):
            product = np.matmul(a.data.astype(acc), b.data.astype(acc))
            return interpreter.TensorHandle(product + d.data, d.dtype.scalar)
        return own(self, a, b, d, input_precision, max_num_imprecise_acc)

    create_dot.blas = True
    builder.create_dot = create_dot
    _patch_once_per_launch(interpreter)


def _patch_once_per_launch(interpreter) -> None:
    """Make the interpreter patch triton.language once per kernel launch, not again at each
    call of a device function during it (see the module docstring)."""
    own_patch, own_launch = interpreter._patch_lang, interpreter.GridExecutor.__call__
    language = (interpreter.tl, interpreter.tl.core)
    launches = []  # per running launch: the language modules its patches cover so far

    def patch_lang(fn):
        modules = {id(m) for m in fn.__globals__.values() if any(m is lang for lang in language)}
        if launches and modules <= launches[-1]:
            return interpreter._LangPatchScope()  # nothing to undo: the launch's patch holds
        scope = own_patch(fn)
        if launches:
            launches[-1] |= modules
        return scope

    def launch(self, *args, **kwargs):
        launches.append(set())
        try:
            return own_launch(self, *args, **kwargs)
        finally:
            launches.pop()

    interpreter._patch_lang = patch_lang
    interpreter.GridExecutor.__call__ = launch

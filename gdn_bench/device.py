"""The one choice made before triton is imported: compiled kernels on a CUDA GPU, else Triton's
CPU interpreter. Shared by scripts/run_local.py and the Modal job in scripts/run_modal.py."""

import os


def prepare_triton() -> bool:
    """Whether a CUDA GPU is present. Without one, set TRITON_INTERPRET=1 so Triton kernels run on
    CPU tensors (that only takes effect before triton is first imported, so call this first),
    with the interpreter's products through BLAS (gdn_bench.interpreter)."""
    import torch  # importing torch does not import triton

    if torch.cuda.is_available():
        return True
    os.environ["TRITON_INTERPRET"] = "1"
    from gdn_bench.interpreter import use_blas_products

    use_blas_products()
    return False

"""Device helpers every prefill kernel shares: the output scale, a sequence's bounds from
cu_seqlens (clamped: no kernel reads or writes outside its tensors), the check of cu_seqlens and
the NaN marks of a malformed one, row fills, state offsets and even parts of the tokens."""

import triton
import triton.language as tl


@triton.jit
def output_scale(scale, scale_ptr, SCALE_FROM_PTR: tl.constexpr, D: tl.constexpr):
    """The output scale: `scale`, or the value at scale_ptr; 0 means 1/sqrt(D)."""
    if SCALE_FROM_PTR:
        s = tl.load(scale_ptr).to(tl.float32)
        return tl.where(s == 0.0, 1.0 / tl.sqrt(float(D)), s)
    else:
        return scale


@triton.jit
def sequence_bounds(cu_ptr, seq, T, SINGLE: tl.constexpr):
    """(bos, eos): sequence seq holds the tokens bos <= t < eos, its cu_seqlens entries clamped
    so that 0 <= bos <= eos <= T whatever they hold: no kernel reads or writes outside its
    tensors. For a well-formed cu_seqlens (cu_seqlens_ok) the clamp changes nothing. SINGLE
    (one sequence): 0 and T, with no load to wait for (well formed, cu_seqlens is [0, T])."""
    if SINGLE:
        bos = (T * 0).to(tl.int64)
        eos = bos + T
        return bos, eos
    else:
        return clamped_bounds(tl.load(cu_ptr + seq), tl.load(cu_ptr + seq + 1), T)


@triton.jit
def clamped_bounds(start, end, T):
    """(bos, eos) from the cu_seqlens entries of a sequence (scalars or vectors), clamped so
    that 0 <= bos <= eos <= T (sequence_bounds)."""
    bos = tl.minimum(tl.maximum(start, 0), T)
    return bos, tl.minimum(tl.maximum(end, bos), T)


@triton.jit
def cu_seqlens_load(cu_ptr, N, BN: tl.constexpr):
    """The loads cu_seqlens_ok reads (its first BN steps, cu[0] and cu[N]), issued where this is
    called (a kernel's start) and waited for only where that is called (its end)."""
    offs = tl.arange(0, BN)
    return (tl.load(cu_ptr + offs, mask=offs < N, other=0), tl.load(cu_ptr + offs + 1, mask=offs < N, other=0),
            tl.load(cu_ptr), tl.load(cu_ptr + N))


@triton.jit
def cu_seqlens_ok(lower, upper, first, last, cu_ptr, N, T, BN: tl.constexpr):
    """Whether cu_seqlens [N + 1] is well formed: cu[0] = 0, cu[N] = T, nondecreasing; from
    cu_seqlens_load's values, and the steps past the first BN. Every kernel that writes
    outputs asks, and if not, writes NaN everywhere it could have written (see kernel())."""
    lowest = tl.min(upper - lower, axis=0)
    offs = tl.arange(0, BN)
    for start in range(BN, N, BN):
        inside = start + offs < N
        steps = (tl.load(cu_ptr + start + offs + 1, mask=inside, other=0)
                 - tl.load(cu_ptr + start + offs, mask=inside, other=0))
        lowest = tl.minimum(lowest, tl.min(steps, axis=0))
    return (first == 0) & (last == T) & (lowest >= 0)


@triton.jit
def mark_rows(out_ptr, lo, hi, head, cols, HV: tl.constexpr, D: tl.constexpr):
    """NaN into the output rows lo <= t < hi, value head `head`, columns `cols`: how the
    kernels mark the rows no sequence of a malformed cu_seqlens would write (see kernel()).
    The token walk marks the rows it wrote (after writing them, so its NaN comes last) and,
    as program p of P by grid position, the p-th of P even parts of the T tokens
    (even_part); the prep marks its block's rows before the walks write any."""
    fill_rows(out_ptr, lo, hi, head, cols, float("nan"), HV, D)


@triton.jit
def fill_rows(out_ptr, lo, hi, head, cols, value, HV: tl.constexpr, D: tl.constexpr):
    """`value` into the output rows lo <= t < hi, value head `head`, columns `cols`."""
    fill = tl.where(cols >= 0, value, 0.0).to(out_ptr.dtype.element_ty)
    for t in range(lo, hi):
        tl.store(out_ptr + (t * HV + head) * D + cols, fill)


@triton.jit
def state_offsets(row, head, v_offs, k_offs, HV: tl.constexpr, D: tl.constexpr):
    """Element offsets of state[row, head][v_offs, k_offs] in a [rows, HV, D, D] tensor of K-last
    states (v_offs and k_offs broadcast against each other), in int64."""
    return ((row * HV + head) * D + v_offs).to(tl.int64) * D + k_offs


@triton.jit
def even_part(p, P, T):
    """(lo, hi): the p-th of P parts of 0..T-1, the first T % P one token longer."""
    size = T // P
    longer = T % P
    lo = (p * size + tl.minimum(p, longer)).to(tl.int64)
    return lo, lo + size + (p < longer)

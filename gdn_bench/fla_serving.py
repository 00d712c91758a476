"""FLA (flash-linear-attention 0.6) over a state pool, as the serving bench calls it
(gdn_bench/serving_bench.py): the calls built once from the bench's tensors, each returned as a
function of no arguments that runs one call, so that the bench checks and times it as it does
ours.

What FLA 0.6.0 offers (read from the fla_core-0.6.0 wheel):

- Its GDN kernels, `fla.ops.gated_delta_rule.fused_recurrent_gated_delta_rule` (token loop)
  and `chunk_gated_delta_rule` (chunked), take no pool indices. Their states are dense:
  initial_state `[N, HV, K, V]`, or `[N, HV, V, K]` (the definition's K-last, the pool's
  layout) with `state_v_first=True`; it is only read, and the final state comes back as a new
  float32 tensor. The baselines call them so (baselines/decode/fla_lib, baselines/prefill/
  fla_chunk: raw gates fused in-kernel with use_gate_in_kernel, A_log and dt_bias, and
  use_beta_sigmoid_in_kernel).
- Its one recurrent kernel over a pool is KDA's, `fla.ops.kda.fused_recurrent.
  fused_recurrent_kda_fwd` (FLA says it modified it from vLLM's GDN/KDA decode kernel; not in
  `fla.ops.kda`'s public names, whose `fused_recurrent_kda` passes no indices):
  `ssm_state_indices` `[N]` or `[N, T]`, `inplace_final_state=True` (the pool is
  initial_state and is written), `num_accepted_tokens`, `state_v_first`, `out`. Row n reads
  pool[indices[n, 0]] and writes the state after its token t to pool[indices[n, t]] (`[N]`
  indices are for T = 1: the kernel adds t to the row's offset without a token stride). With
  inplace_final_state=False it writes the state after token t of row n to row n·T + t of a new
  `[N, HV, ...]` tensor, past its end when T > 1: there is no buffer beside the pool. Its decay
  is per key channel (g `[B, T, HV, K]`, dt_bias `[HV, K]`, A_log `[HV]`: exp(-exp(A_log) *
  softplus(g + dt_bias)) per channel); GDN's is one per head, so the same value in every
  channel is GDN's step exactly. Its state is float32 and its arithmetic float32; q, k, v, a,
  b are read as they are (bf16) and the output is written in v's dtype.
- No chunked kernel takes indices (`chunk_gated_delta_rule`, `chunk_kda`).

What engines call (their own kernels, derived from FLA's): vLLM's GDN layer decodes and
verifies drafts with `fused_sigmoid_gating_delta_rule_update(A_log, a, b, dt_bias, q, k, v,
initial_state=pool, inplace_final_state=True, cu_seqlens, ssm_state_indices,
num_accepted_tokens)`, and prefills by gathering `pool[indices]`, calling
`chunk_gated_delta_rule(initial_state=..., output_final_state=True, cu_seqlens=...)` and
writing `pool[indices] = final state`; SGLang's decode passes `initial_state_source=pool,
initial_state_indices` to its fused kernel. So the bench runs FLA 0.6.0 as:

- `indexed_recurrent`: decode and MTP, KDA's kernel with the pool and indices, in place (the
  form of the engines' decode); the gates broadcast over K beforehand, outside the timed call.
- `gathered`: a dense-state baseline (fla-lib for decode, fla-chunk for prefill) between a
  gather of the rows' states and their write back, all three timed (vLLM's prefill form).
"""

from importlib.metadata import version
from typing import Callable, NamedTuple

import torch

from gdn_bench.algos import load_module
from gdn_bench.definitions.decode.definition import DECODE
from gdn_bench.definitions.decode.definition import LIBRARY as DECODE_LIBRARY
from gdn_bench.definitions.prefill.definition import LIBRARY as PREFILL_LIBRARY
from gdn_bench.definitions.prefill.definition import PREFILL
from gdn_bench.shapes import output_scale


class Fla(NamedTuple):
    """FLA's calls the bench makes: `pooled` is fused_recurrent_kda_fwd; `recurrent` and `chunk`
    are the `run` of baselines/decode/fla_lib and baselines/prefill/fla_chunk ((q, k, v,
    state, ...) -> (output, final state))."""

    version: str
    pooled: Callable
    recurrent: Callable
    chunk: Callable


def load_fla() -> tuple[Fla | None, str | None]:
    """(FLA's calls, None), or (None, why they are absent) where fla cannot be imported."""
    try:
        from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd

        recurrent = load_module(DECODE.algos_by_name[DECODE_LIBRARY].entry_file(), "fla_lib_baseline").run
        chunk = load_module(PREFILL.algos_by_name[PREFILL_LIBRARY].entry_file(), "fla_chunk_baseline").run
        release = version("fla-core")
    except Exception as e:  # noqa: BLE001 - missing, or installed without what it needs to import
        return None, f"{type(e).__name__}: {e}".splitlines()[0]
    return Fla(release, fused_recurrent_kda_fwd, recurrent, chunk), None


def indexed_recurrent(fla: Fla, q, k, v, pool, indices, A_log, a, dt_bias, b, scale,
                      out) -> Callable[[], torch.Tensor]:
    """FLA's pooled token loop, in place: row n of q, k [B, T, 4, 128], v, out [B, T, 8, 128]
    and a, b [B, T, 8] starts from pool[indices[n, 0]] (pool [P, 8, 128, 128] f32, K-last) and
    the state after its token t is written to pool[indices[n, t]]; indices [B] (T = 1) or
    [B, T]. The function returns `out`, which holds the output. Computes the definition's
    step: decay exp(-exp(A_log) * softplus(a + dt_bias)), beta sigmoid(b), both in-kernel. a
    and dt_bias are copied, each value repeated over the 128 key channels (KDA's per-channel
    gate), here, once."""
    key_size = k.shape[-1]
    gate = a.unsqueeze(-1).expand(*a.shape, key_size).contiguous()
    bias = dt_bias.unsqueeze(-1).expand(-1, key_size).contiguous()
    scale = output_scale(scale)

    def call():
        fla.pooled(q=q, k=k, v=v, g=gate, beta=b, A_log=A_log, dt_bias=bias, initial_state=pool, scale=scale,
                   inplace_final_state=True, state_v_first=True, ssm_state_indices=indices, use_gate_in_kernel=True,
                   use_beta_sigmoid_in_kernel=True, out=out)
        return out

    return call


def gathered(run: Callable, q, k, v, pool, rows, *rest) -> Callable[[], torch.Tensor]:
    """A dense-state FLA call over the pool: the rows' states gathered (pool[rows], a copy),
    `run(q, k, v, states, *rest)` (Fla.recurrent or Fla.chunk), its final states written back
    to pool[rows]; the function returns the output. rows: int64 slots, one per row or
    sequence."""

    def call():
        output, final = run(q, k, v, pool[rows], *rest)
        pool[rows] = final
        return output

    return call


def draft_slots(slots: torch.Tensor, steps: int, pool_size: int) -> torch.Tensor:
    """The [B, T] indices of FLA's pooled MTP (vLLM's layout of a draft's states): row b reads
    slots[b] and writes the state after token t to column t: slots[b] itself for t = 0 (the
    state read is overwritten), slots from pool_size on for the others, B (T - 1) slots past
    the bench's pool that FLA's copy of it adds."""
    batch = slots.shape[0]
    later = torch.arange(batch * (steps - 1), device=slots.device, dtype=slots.dtype).view(batch, steps - 1)
    return torch.cat([slots[:, None], pool_size + later], dim=1)

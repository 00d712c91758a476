"""What scripts/profile_call.py profiles: one call of one algorithm of either definition (or of a
variant of the prefill submission) on inputs of one shape, on the GPU.

Shapes: decode takes the batch size B; prefill the sequence lengths, either T tokens split
evenly over N sequences (gdn_bench.prefill_bench.even_lengths) or an explicit list (say
1,8191). Inputs are drawn from the seed: decode as flashinfer-bench draws `random` ones
(gdn_bench.decode_bench.decode_inputs), prefill model-like (unit-norm keys,
gdn_bench.definitions.prefill.mix.model_like_inputs), as bench_kernel and bench_prefill draw them.

An algorithm is packed and built as the harness builds it and called as the evaluator calls
it (gdn_bench.checking.SolutionCall). A variant is prefill.py loaded afresh with some of its
settings changed (gdn_bench.prefill_variants), its entry point called on outputs
allocated once, as a destination-passing call.
"""

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from flashinfer_bench.bench.evaluators.utils import allocate_outputs
from flashinfer_bench.compile import BuilderRegistry

from gdn_bench.checking import SolutionCall
from gdn_bench.definitions import DefinitionSpec, resolve
from gdn_bench.decode_bench import decode_inputs
from gdn_bench.prefill_bench import even_lengths
from gdn_bench.definitions.prefill.mix import model_like_inputs
from gdn_bench.prefill_variants import load_variant

MAX_LENGTHS_IN_NAME = 8  # more sequence lengths than this: a file name carries their hash


@dataclass(frozen=True)
class Target:
    """One profiled call. `definition` is a short name (decode, prefill); `batch_size` is set
    for decode, `lengths` (sequence lengths, zeros allowed) for prefill; `config` names the
    module-level settings of a variant of the prefill submission (empty: the algorithm as
    packed)."""

    definition: str
    algo: str
    batch_size: int | None = None
    lengths: tuple[int, ...] | None = None
    config: dict = field(default_factory=dict)

    @property
    def spec(self) -> DefinitionSpec:
        return resolve(self.definition)

    def shape(self) -> str:
        """'B=64', 'T=8192 N=1', or for uneven lengths 'T=8192 N=2 lengths=1,8191'."""
        if self.lengths is None:
            return f"B={self.batch_size}"
        total, count = sum(self.lengths), len(self.lengths)
        even = list(self.lengths) == even_lengths(total, count)
        return f"T={total} N={count}" + ("" if even else f" lengths={','.join(map(str, self.lengths))}")

    def variant(self) -> str:
        """The algorithm's name, with the variant's settings in brackets."""
        settings = ",".join(f"{k}={v}" for k, v in self.config.items())
        return self.algo + (f"[{settings}]" if settings else "")

    def label(self) -> str:
        """In words: 'prefill triton-chunked T=8192 N=1'."""
        return f"{self.definition} {self.variant()} {self.shape()}"

    def file_stem(self) -> str:
        """The label as a file name without dots: 'prefill-triton-chunked-T8192-N1' (uneven
        lengths add them, or their hash when there are many)."""
        if self.lengths is None:
            shape = f"B{self.batch_size}"
        else:
            shape = f"T{sum(self.lengths)}-N{len(self.lengths)}"
            if list(self.lengths) != even_lengths(sum(self.lengths), len(self.lengths)):
                text = "_".join(map(str, self.lengths))
                shape += "-L" + (text if len(self.lengths) <= MAX_LENGTHS_IN_NAME
                                 else hashlib.sha1(text.encode()).hexdigest()[:10])
        name = re.sub(r"[^A-Za-z0-9_-]+", "_", f"{self.definition}-{self.variant()}").strip("_")
        return f"{name}-{shape}"


def inputs(target: Target, seed: int) -> dict:
    """The call's inputs on the GPU, in the definition's order (see the module docstring)."""
    if target.lengths is None:
        return decode_inputs(target.batch_size, seed)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return model_like_inputs(target.lengths, gen, "cuda")


def build_call(target: Target, seed: int) -> Callable[[], object]:
    """One call of the target on its inputs, ready to repeat (GPU). Building packs and
    compiles what the algorithm needs; a variant's unknown name raises ValueError."""
    spec = target.spec
    definition = spec.build_definition()
    args = list(inputs(target, seed).values())
    if not target.config:
        runnable = BuilderRegistry.get_instance().build(definition, spec.algos_by_name[target.algo].solution())
        return SolutionCall(definition, runnable, args, "cuda")
    module = load_variant(target.config, 0)
    config = spec.algos_by_name[target.algo].resolved_config()
    entry = getattr(module, config.entry_point.partition("::")[2])
    if config.destination_passing_style:
        args += allocate_outputs(definition, args, "cuda")
    return lambda: entry(*args)

"""A definition's call signature, read from its flashinfer-bench Definition: the one place the
harness and the tests take input and output names from.

A destination-passing call takes the inputs, then the outputs, in the Definition's order; a
value-returning one takes the inputs and returns the outputs in that order.
"""

import torch
from flashinfer_bench import Definition


def tensor_inputs(definition: Definition) -> list[str]:
    """The names of the definition's tensor inputs, in call order (its scalars left out)."""
    return [name for name, spec in definition.inputs.items() if spec.shape is not None]


def dps_arguments(definition: Definition) -> list[str]:
    """The names of a destination-passing call's arguments: inputs, then outputs."""
    return [*definition.inputs, *definition.outputs]


def random_inputs(definition: Definition, axes: dict, gen: torch.Generator, scalars: dict) -> dict:
    """Inputs as flashinfer-bench draws `random` ones, but from `gen` (on its device): each
    tensor N(0, 1) in float32, then cast to its dtype, in call order; each scalar from `scalars`."""
    shapes = dict(zip(definition.inputs, definition.get_input_shapes(axes)))
    dtypes = dict(zip(definition.inputs, definition.torch_input_dtypes))
    return {name: scalars[name] if shapes[name] is None else
            torch.randn(*shapes[name], generator=gen, device=gen.device).to(dtypes[name])
            for name in definition.inputs}


def empty_outputs(definition: Definition, axes: dict, device: str) -> list[torch.Tensor]:
    """Uninitialized output tensors for a destination-passing call, in call order."""
    return [torch.empty(*shape, dtype=dtype, device=device)
            for shape, dtype in zip(definition.get_output_shapes(axes), definition.torch_output_dtypes)]

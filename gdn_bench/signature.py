"""A definition's call signature, read from its flashinfer-bench Definition: the one place the
harness and the tests take input and output names from.

A destination-passing call takes the inputs, then the outputs, in the Definition's order; a
value-returning one takes the inputs and returns the outputs in that order.
"""

from flashinfer_bench import Definition


def tensor_inputs(definition: Definition) -> list[str]:
    """The names of the definition's tensor inputs, in call order (its scalars left out)."""
    return [name for name, spec in definition.inputs.items() if spec.shape is not None]


def dps_arguments(definition: Definition) -> list[str]:
    """The names of a destination-passing call's arguments: inputs, then outputs."""
    return [*definition.inputs, *definition.outputs]

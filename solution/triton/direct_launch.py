"""A compiled Triton kernel's C launcher, called without Triton's Python wrapper around it: the
last step of shared.Launcher's direct path.

Triton launches a compiled kernel through its launcher object's __call__ (Python). That wrapper
allocates the kernel's global and profile scratch where it has any and, for a kernel with
tensor-descriptor parameters, encodes every descriptor again on every launch
(cuTensorMapEncodeTiled) in a Python loop over all the arguments; then it calls the launcher
Triton compiled in C, which parses the arguments and calls cuLaunchKernelEx. On an H200's host
the wrapper cost 0.3-2 µs a launch of a plain kernel and 7-14 µs a launch of the prefill's
Gluon kernels, which take three descriptors each (docs/serving.md, host cost).

`ways_to_launch` gives the ways to launch a compiled kernel without Triton's per-call binding,
the C launcher first where the wrapper does nothing this one needs; `launch_arguments` lays
out a launch's arguments for one of them (`argument_layout`: the same as a function of the
stream and the kernel's arguments, kept by a caller that launches one grid again), each
descriptor encoded by Triton's own function once and kept with the descriptor object
(descriptors are kept by their makers: prefill.py).

The C launcher's arguments differ between Triton releases; two layouts are known (read from the
wheels of 3.6, 3.7.1 and 3.9; other releases are probed like any):

    3.6 (a C module compiled per signature; the kernel's arguments spread):
        launch(gx, gy, gz, stream, function, cooperative, pdl, global_scratch, profile_scratch,
               packed_metadata, launch_metadata, enter_hook, exit_hook, *kernel_args)
    3.7.1 and 3.9 (one C function for every kernel, told the signature):
        launch(gx, gy, gz, stream, function, cooperative, pdl, packed_metadata, launch_metadata,
               enter_hook, exit_hook, global_scratch, profile_scratch, arg_annotations,
               kernel_signature, kernel_args)

where a descriptor among the kernel's arguments is replaced by what Triton's
make_tensordesc_arg makes of it (the encoded map, then its shape and strides). A kernel with
scratch, a launcher of another shape or a sanitizer keeps the wrapper. The caller probes a way
with an empty grid (every argument parsed, nothing launched) before it uses it.
"""

import inspect
import operator
from typing import NamedTuple

_KEPT_EXPANSIONS = 64  # descriptors' encodings kept (launch_arguments' `kept`); more forget them all


class LaunchWay(NamedTuple):
    """How to launch one compiled kernel directly: run(gx, gy, gz, stream, *head, *kernel_args)
    where `spread`, else run(gx, gy, gz, stream, *head, kernel_args) (one sequence); the kernel's
    arguments in parameter order (constexprs included, tensors as addresses), each at a position
    in `descriptors` expanded by its function (launch_arguments)."""
    run: object
    head: tuple
    spread: bool
    descriptors: tuple  # (position among the kernel's arguments, a function of the descriptor)


def ways_to_launch(compiled):
    """The LaunchWays of `compiled` (a CompiledKernel of triton.compile), in the order to try
    them: its C launcher where the layout is known and the wrapper has nothing to do for it,
    then the wrapper (Triton's launcher object, descriptors passed as they are)."""
    wrapper = compiled.run
    ways = [LaunchWay(wrapper, (compiled.function, compiled.packed_metadata, None, None, None), True, ())]
    c_launch = _c_launch(getattr(wrapper, "launch", None))
    if (c_launch is None or getattr(wrapper, "global_scratch_size", 1) or getattr(wrapper, "profile_scratch_size", 1)
            or getattr(wrapper, "gsan_enabled", False)):
        return ways
    flags = (compiled.function, wrapper.launch_cooperative_grid, wrapper.launch_pdl)
    hooks = (compiled.packed_metadata, None, None, None)  # the metadata, then no launch metadata and no hooks
    if hasattr(wrapper, "arg_annotations"):
        direct = LaunchWay(c_launch, (*flags, *hooks, None, None, wrapper.arg_annotations, wrapper.kernel_signature),
                           False, _descriptors(compiled))
    else:
        direct = LaunchWay(c_launch, (*flags, None, None, *hooks), True, _descriptors(compiled))
    return [direct, *ways]


def launch_arguments(grid, stream, way, args, kept, constants=()):
    """The arguments of way.run for a launch of `grid` (three sizes) on `stream` with the
    kernel's arguments `args` then `constants` (its constexprs' values, kept apart so that the
    sequence is made once); `kept`: a dict of the caller's (one per compiled kernel) that keeps
    the descriptors' encodings."""
    return argument_layout(grid, way, constants, kept)(stream, args)


def argument_layout(grid, way, constants, kept):
    """launch_arguments as a function of (stream, args) alone, the rest fixed: what a caller that
    launches one configuration on one grid again and again keeps (shared.Launcher), so that a
    launch builds one sequence and calls nothing else where the kernel takes no descriptor."""
    gx, gy, gz = grid
    head = way.head
    if way.descriptors:
        expanded = _expander(way.descriptors, kept)
        if way.spread:
            return lambda stream, args: (gx, gy, gz, stream, *head, *expanded(args), *constants)
        return lambda stream, args: (gx, gy, gz, stream, *head, (*expanded(args), *constants))
    if way.spread:
        return lambda stream, args: (gx, gy, gz, stream, *head, *args, *constants)
    return lambda stream, args: (gx, gy, gz, stream, *head, (*args, *constants))


def _expander(descriptors, kept):
    """A function of a launch's arguments that gives them with each descriptor expanded
    (_expanded). Where the descriptors are the kernel's first arguments (the prefill's Gluon
    kernels), the expansion of the last descriptor objects it saw is kept with them, so that a
    launch with the same ones lays out one sequence (0.5 µs against 1.2 for three descriptors on
    the CI's CPU)."""
    count = len(descriptors)
    if tuple(position for position, _ in descriptors) != tuple(range(count)):
        return lambda args: _expanded(args, descriptors, kept)
    last = [((_UNSEEN,) * count, ())]  # (the descriptors, their expansion), replaced as one

    def expanded(args):
        seen, flat = last[0]
        chosen = args[:count]
        if not all(map(operator.is_, chosen, seen)):
            flat = tuple(_expanded(chosen, descriptors, kept))
            last[0] = chosen, flat
        return (*flat, *args[count:])
    return expanded


_UNSEEN = object()  # no descriptor: what _expander has seen before its first launch


def _expanded(args, descriptors, kept):
    """`args` with the descriptor at each position of `descriptors` replaced by its expansion,
    kept by the descriptor object's identity (the object is kept with it, so its id stays its)."""
    flat, start = [], 0
    for position, expand in descriptors:
        descriptor = args[position]
        entry = kept.get(id(descriptor))
        if entry is None or entry[0] is not descriptor:
            if len(kept) >= _KEPT_EXPANSIONS:
                kept.clear()
            entry = kept[id(descriptor)] = (descriptor, expand(descriptor))
        flat += args[start:position]
        flat += entry[1]
        start = position + 1
    flat += args[start:]
    return flat


def _c_launch(launch):
    """The C function under a launcher object's `launch`: itself where it is one, the function
    Triton's descriptor wrapper closes over as `launcher` where it is that wrapper, else None."""
    if launch is None or inspect.isbuiltin(launch):
        return launch
    cells = dict(zip(getattr(getattr(launch, "__code__", None), "co_freevars", ()), getattr(launch, "__closure__", None)
                     or ()))
    inner = cells.get("launcher")
    inner = inner.cell_contents if inner is not None else None
    return inner if inspect.isbuiltin(inner) else None


def _descriptors(compiled):
    """(position, expand) of each tensor-descriptor parameter of `compiled`, expand(descriptor)
    giving what Triton's launcher passes for it (make_tensordesc_arg, with the compiled
    kernel's metadata for that descriptor)."""
    kinds = tuple(compiled.src.signature.values())
    positions = [i for i, kind in enumerate(kinds) if isinstance(kind, str) and kind.startswith("tensordesc")]
    if not positions:
        return ()
    from triton.backends.nvidia import driver  # only where a kernel takes descriptors (NVIDIA's Gluon kernels)

    make = driver.make_tensordesc_arg
    extra = (None,) * (len(inspect.signature(make).parameters) - 2)  # 3.9 takes a third, unused argument
    metas = getattr(compiled.metadata, "tensordesc_meta", None) or [None] * len(positions)
    return tuple((position, lambda d, meta=meta: list(make(d, meta, *extra))) for position, meta in zip(positions, metas))

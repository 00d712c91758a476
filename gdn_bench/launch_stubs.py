"""Launches made no-ops, for what measures or checks a submission's host path alone on a machine
without a GPU (gdn_bench.host_cost's CPU proxy, tests/test_prefill_host.py).

Inside stubbed_launches, every Launcher (solution/triton/shared.py) of a loaded submission
takes its direct path, the one a warmed-up call takes on a GPU: everything a launch does
(argument checks, plan, scratch, arguments ordered and lowered to raw pointers, the cache
lookup) but the final call of the compiled kernel's launcher, which is a no-op that counts the
launch. Nothing is compiled and no kernel runs (not even in Triton's interpreter).
"""

import contextlib
import importlib

COMPILED_HEAD = ("function", "packed_metadata", None, None, None)  # the compiled kernel's own arguments


@contextlib.contextmanager
def stubbed_launches(launcher_class):
    """Context manager: inside it, a launch by a Launcher of `launcher_class` (a submission's
    shared.Launcher) calls a no-op instead of the compiled kernel, after the first launch of a
    configuration as it would on a GPU. Yields the list of launches made (one grid per launch);
    each Launcher's cache of compiled kernels is as it was after."""
    launches = []
    saved = {}
    package = launcher_class.__module__.rpartition(".")[0]
    way = importlib.import_module(f"{package}.direct_launch").LaunchWay(lambda *args: launches.append(args[:3]),
                                                                         COMPILED_HEAD, True, ())
    entry = getattr(importlib.import_module(f"{package}.shared"), "DirectEntry", None) or (
        lambda *fields: fields[:4])  # a copy of the submission from before DirectEntry kept 4-tuples (host_ab)

    def first_launch(self, grid, args, constexprs, num_warps, options, key, raw, aligned):
        """In place of Launcher._through_triton: the configuration's stand-in compiled kernel kept
        (where the direct path is valid), then the launch made through it."""
        saved.setdefault(self, dict(self.compiled))
        values = tuple(value for _, value in constexprs)
        if aligned and not self.compiled.get(key):  # a compiled kernel kept before stays
            self.compiled[key] = entry(way, _no_stream, values, {}, {})
        way.run(*grid)

    original = launcher_class.__dict__["_through_triton"]
    launcher_class._through_triton = first_launch
    try:
        yield launches
    finally:
        launcher_class._through_triton = original
        for launcher, compiled in saved.items():
            launcher.compiled = compiled


def _no_stream(device_index):
    """The stream a stubbed launch goes to: none."""
    return None

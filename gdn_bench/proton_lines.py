"""The proton mode of scripts/profile_call.py: Triton's Proton profiler in PC-sampling mode (CUPTI
samples each warp's program counter at a fixed interval) over repeated calls, and the hot
source lines of the chosen kernels with their share of the samples.

`sample` starts one session with proton.start(..., backend="cupti", mode="pcsampling") and
runs the call `warmup` times in a scope named WARMUP, then `repeats` times in a scope named
SAMPLED, and writes Proton's tree (a .hatchet JSON file). The warm-up runs inside the session
because Proton maps a sample to its source line through the kernel's binary, which it only
sees when the module is loaded while it profiles; its own scope keeps compilation and
autotuning runs out of the table. In the tree, a sampled instruction with line information
sits under a node named "<folder>/<file>:<line>@<kernel>" whose metrics count its samples
(num_samples) and, per stall reason, those taken while the warp was stalled
(stalled_<reason>). `hot_lines` adds, under the SAMPLED scope, the samples of each (file,
line, kernel) whose kernel matches a regex; a line's share is its samples over those of every
matching line. Samples without line information are not counted. Source text is read from
the file where it still exists (the harness builds solutions from a copy of their folder, so
the path may be that copy's).
"""

import inspect
import linecache
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

WARMUP, SAMPLED = "warm-up", "sampled"  # the session's two scopes
LINE = re.compile(r"^(?P<path>.*):(?P<line>\d+)@(?P<function>.+)$")
NOT_STALLS = ("stalled_selected",)  # the sample's warp was issuing


class ProtonError(RuntimeError):
    """Proton is unavailable here, could not sample, or sampled nothing usable."""


@dataclass(frozen=True)
class HotLine:
    """Samples of one source line of one kernel: its share of all counted samples, and the
    stall reason most of them were taken in (None when none was recorded)."""

    path: str
    line: int
    function: str
    samples: float
    share: float
    top_stall: str | None
    source: str


def proton():
    """triton.profiler, if this triton has it with PC sampling; ProtonError otherwise."""
    import triton

    try:
        import triton.profiler as module
    except Exception as e:  # noqa: BLE001 - any import failure means: not usable here
        raise ProtonError(f"Triton's Proton profiler cannot be imported in triton {triton.__version__} "
                          f"({type(e).__name__}: {e}); install a triton wheel built with Proton "
                          f"(the PyPI wheels are)") from None
    if "mode" not in inspect.signature(module.start).parameters:
        raise ProtonError(f"triton {triton.__version__}'s Proton has no PC-sampling mode "
                          f"(proton.start(mode=...)); install triton >= 3.4")
    return module


def _reason(error: Exception) -> str:
    text = str(error)
    if "INSUFFICIENT_PRIVILEGES" in text or "ERR_NVGPUCTRPERM" in text:
        return ("no permission for CUPTI's PC sampling: run as root, or let every user profile (driver option "
                "NVreg_RestrictProfilingToAdminUsers=0; https://developer.nvidia.com/ERR_NVGPUCTRPERM)")
    return f"Proton's PC sampling failed ({type(error).__name__}: {text.strip().splitlines()[-1] if text else ''})"


def sample(fn: Callable[[], object], stem: Path, repeats: int, warmup: int = 3) -> Path:
    """PC-sample `repeats` calls of fn after `warmup` (see the module docstring); returns the
    .hatchet file written at `stem`.hatchet."""
    import torch

    module = proton()
    try:
        session = module.start(str(stem), backend="cupti", mode="pcsampling", hook="triton")
        if session is None:
            raise ProtonError("Proton is switched off in this process (TRITON_PROTON_DISABLE or a "
                              "`proton` command line around it)")
        for scope, calls in ((WARMUP, warmup), (SAMPLED, repeats)):
            with module.scope(scope):
                for _ in range(calls):
                    fn()
                torch.cuda.synchronize()
        module.finalize()
    except ProtonError:
        raise
    except Exception as e:  # noqa: BLE001 - libproton raises plain RuntimeErrors
        raise ProtonError(_reason(e)) from None
    path = stem.with_name(stem.name + ".hatchet")
    if not path.is_file():
        raise ProtonError(f"Proton wrote no profile at {path}")
    return path


def _source_path(path: str) -> str:
    """CUPTI joins a line's folder and file name with '/'; a file name that is already absolute
    then follows '//': keep it."""
    return "/" + path.rsplit("//", 1)[1] if "//" in path else path


def _samples(node: dict) -> float:
    return float(node.get("metrics", {}).get("num_samples", 0) or 0)


def _line_nodes(node: dict):
    """(node, exclusive samples) for every line node under `node`: its samples less those of
    line nodes right under it."""
    for child in node.get("children", []):
        yield from _line_nodes(child)
    if LINE.match(node.get("frame", {}).get("name", "")):
        below = sum(_samples(c) for c in node.get("children", []) if LINE.match(c.get("frame", {}).get("name", "")))
        yield node, _samples(node) - below


def _scopes(node: dict, name: str):
    """The nodes named `name` at or under `node`, outermost only."""
    if node.get("frame", {}).get("name") == name:
        yield node
        return
    for child in node.get("children", []):
        yield from _scopes(child, name)


def hot_lines(tree: list | dict, kernel_regex: str, scope: str | None = SAMPLED) -> list[HotLine]:
    """The source lines of the kernels matching `kernel_regex` (re.search on the kernel's
    name) under the nodes named `scope` (None: the whole tree), most samples first;
    ProtonError when the scope is missing or nothing was sampled there."""
    roots = tree if isinstance(tree, list) else [tree]
    if scope is not None:
        roots = [node for root in roots for node in _scopes(root, scope)]
        if not roots:
            raise ProtonError(f"Proton's profile has no scope {scope!r}: not written by this tool's sample()")
    pattern = re.compile(kernel_regex)
    totals: dict[tuple[str, int, str], float] = {}
    stalls: dict[tuple[str, int, str], dict[str, float]] = {}
    kernels = set()
    for root in roots:
        for node, samples in _line_nodes(root):
            match = LINE.match(node["frame"]["name"])
            kernels.add(match["function"])
            if not pattern.search(match["function"]) or samples <= 0:
                continue
            key = (_source_path(match["path"]), int(match["line"]), match["function"])
            totals[key] = totals.get(key, 0.0) + samples
            for name, value in node.get("metrics", {}).items():
                if name.startswith("stalled_") and name not in NOT_STALLS and isinstance(value, int | float):
                    stalls.setdefault(key, {})[name] = stalls.get(key, {}).get(name, 0.0) + value
    if not totals:
        seen = ", ".join(sorted(kernels)) or "none (no sample carries a source line)"
        raise ProtonError(f"no PC samples with a source line in a kernel matching --kernel {kernel_regex!r}; "
                          f"kernels sampled: {seen}")
    total = sum(totals.values())
    lines = []
    for (path, line, function), samples in sorted(totals.items(), key=lambda kv: -kv[1]):
        reasons = {k: v for k, v in stalls.get((path, line, function), {}).items() if v > 0}
        top = max(reasons, key=reasons.get).removeprefix("stalled_") if reasons else None
        lines.append(HotLine(path, line, function, samples, samples / total, top,
                             linecache.getline(path, line).strip()))
    return lines


def format_lines(lines: list[HotLine], top: int, source_width: int = 72) -> str:
    """The `top` hottest lines: share, samples, file:line, kernel, main stall, source text."""
    head = ("share", "samples", "line", "kernel", "main stall", "source")
    cells = [(f"{h.share:.1%}", f"{h.samples:.0f}", f"{Path(h.path).name}:{h.line}", h.function, h.top_stall or "-",
              h.source if len(h.source) <= source_width else h.source[:source_width - 1] + "…") for h in lines[:top]]
    widths = [max(len(row[i]) for row in [head, *cells]) for i in range(len(head))]

    def line(row):
        return "  ".join(c.rjust(w) if i < 2 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    shown = sum(h.share for h in lines[:top])
    footer = f"{min(top, len(lines))} of {len(lines)} lines shown, {shown:.1%} of the samples"
    return "\n".join([line(head), *map(line, cells), "", footer])

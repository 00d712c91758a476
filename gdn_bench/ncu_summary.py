"""The ncu mode of scripts/profile_call.py: Nsight Compute over one call, and a short summary of its
report.

`profile_command` re-runs the script under `ncu` with --profile-from-start off: the target
process warms the call up, then makes one call between cudaProfilerStart and
cudaProfilerStop, so only that call's kernels whose name matches the regex are profiled, with
DEFAULT_SECTIONS (speed of light, memory workload, warp states, launch statistics, occupancy,
compute workload). ncu keeps the full report (.ncu-rep); `export_command` writes every metric
of every profiled kernel as CSV (`--page raw`, base units), and `summarize` takes from it per
kernel: duration, DRAM and L2 throughput (% of peak, over the elapsed time), achieved
occupancy, the warp-stall reasons with the largest shares of all stalls, and the tensor
pipes' utilization (the highest tensor-pipe metric present, % of peak while active).

`parse_csv` reads both of ncu's CSV pages: `--page raw` (a row per kernel, a column per
metric, a units row under the header) and `--page details` (a row per kernel, section and
metric, display names such as "Duration"; it has no stall breakdown and no tensor pipes).
Numbers may carry thousands separators; ncu's own lines (==PROF==, ==WARNING==) are skipped;
a metric the report lacks shows as "-".
"""

import csv
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "WarpStateStats", "LaunchStats", "Occupancy",
                    "ComputeWorkloadAnalysis")
PERMISSION = ("no permission to read the GPU's performance counters (ncu: ERR_NVGPUCTRPERM): run as root, or "
              "let every user profile (driver option NVreg_RestrictProfilingToAdminUsers=0; "
              "https://developer.nvidia.com/ERR_NVGPUCTRPERM)")
# Columns of both pages that identify a kernel rather than measure it.
IDENTITY = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
            "Grid Size", "Device", "CC")
# Summary metrics: raw-page names first, then the details page's "Section/Metric" names.
DURATION = ("gpu__time_duration.sum", "GPU Speed Of Light Throughput/Duration")
DRAM = ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "GPU Speed Of Light Throughput/DRAM Throughput")
L2 = ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "GPU Speed Of Light Throughput/L2 Cache Throughput")
OCCUPANCY = ("sm__warps_active.avg.pct_of_peak_sustained_active", "Occupancy/Achieved Occupancy")
REGISTERS = ("launch__registers_per_thread", "Launch Statistics/Registers Per Thread")
TENSOR = re.compile(r"^(?:sm|smsp)__(pipe_tensor\w*_cycles_active|inst_executed_pipe_tensor\w*)"
                    r"\.avg\.pct_of_peak_sustained_active$")
# Warp-stall metric families, preferred first: <prefix>_<reason><suffix>.
STALL_FAMILIES = ("average_warps_issue_stalled", "average_warp_latency_issue_stalled", "warps_issue_stalled",
                  "warp_issue_stalled", "pcsamp_warps_issue_stalled")
STALL = re.compile(r"^smsp__(?P<family>" + "|".join(STALL_FAMILIES) + r")_(?P<reason>[a-z_]+?)"
                   r"(?P<suffix>_per_issue_active|_per_warp_active)?(?P<kind>\.[a-z_]+)?$")
NOT_STALLS = ("selected",)  # "selected" is the cycle a warp issues, not a stall
TIME_TO_US = {"": 1e-3, "ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "µs": 1.0, "ms": 1e3,
              "msecond": 1e3, "s": 1e6, "second": 1e6}
TOP_STALLS = 3


class NcuError(RuntimeError):
    """ncu is missing, could not profile, or wrote a report this module cannot read."""


@dataclass
class NcuKernel:
    """One profiled kernel launch: its metrics by name as (value text, unit)."""

    id: str
    name: str
    grid: str = ""
    block: str = ""
    metrics: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass
class KernelSummary:
    """What the summary table shows of one kernel; None where the report lacks it."""

    id: str
    name: str
    grid: str
    block: str
    registers: float | None
    duration_us: float | None
    dram_pct: float | None
    l2_pct: float | None
    occupancy_pct: float | None
    tensor_pct: float | None
    stalls: list[tuple[str, float]]  # (reason, share of all stalls), largest first


def find_ncu() -> str:
    """The ncu executable on PATH; NcuError saying how to get it otherwise."""
    ncu = shutil.which("ncu")
    if ncu is None:
        raise NcuError("ncu (Nsight Compute) is not on PATH: install Nsight Compute (it comes with the CUDA toolkit, "
                       "e.g. /usr/local/cuda/bin/ncu) and put its folder on PATH")
    return ncu


def profile_command(ncu: str, report: Path, kernel_regex: str, sections, extra, target: list[str]) -> list[str]:
    """ncu over `target` (a command that brackets one call with cudaProfilerStart/Stop),
    writing `report` (.ncu-rep); `extra` are further ncu options, before the target."""
    command = [ncu, "--target-processes", "all", "--profile-from-start", "off", "--kernel-name",
               f"regex:{kernel_regex}", "--export", str(report), "--force-overwrite"]
    for section in sections:
        command += ["--section", section]
    return command + list(extra) + target


def bracketed_call(fn: Callable[[], object], warmup: int = 3) -> None:
    """The target side of profile_command: `warmup` calls (compiling, autotuning), then one
    call between cudaProfilerStart and cudaProfilerStop."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def export_command(ncu: str, report: Path) -> list[str]:
    """ncu printing a report's raw page as CSV, values in base units."""
    return [ncu, "--import", str(report), "--page", "raw", "--csv", "--print-units", "base"]


def failure(output: str, returncode: int, kernel_regex: str) -> str | None:
    """One line saying why an ncu run failed, from its output, or None if it did not."""
    if "ERR_NVGPUCTRPERM" in output:
        return PERMISSION
    if "No kernels were profiled" in output:
        return f"ncu profiled no kernel: none of the call's kernels matched --kernel {kernel_regex!r}"
    errors = [line.removeprefix("==ERROR==").strip() for line in output.splitlines() if line.startswith("==ERROR==")]
    if errors:
        return f"ncu: {errors[-1]}"
    if returncode != 0:
        last = [line for line in output.splitlines() if line.strip()][-1:] or ["no output"]
        return f"the profiled command failed with status {returncode}: {last[0].strip()}"
    return None


def _table(text: str) -> list[list[str]]:
    """The CSV rows of ncu's output, from the header on (ncu's own ==...== lines left out)."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("==")]
    rows = list(csv.reader(lines))
    for index, row in enumerate(rows):
        if "ID" in row and "Kernel Name" in row:
            return rows[index:]
    raise NcuError("not an ncu CSV export: no header row with 'ID' and 'Kernel Name'")


def parse_csv(text: str) -> list[NcuKernel]:
    """The kernels of an ncu CSV export (raw or details page, see the module docstring), in
    report order."""
    header, *rows = _table(text)
    column = {name: i for i, name in enumerate(header)}
    rows = [row for row in rows if len(row) == len(header)]

    def cell(row, name):
        return row[column[name]] if name in column else ""

    kernels: dict[str, NcuKernel] = {}
    if "Metric Name" in column:  # details page: one row per metric
        for row in rows:
            if not cell(row, "Metric Name"):
                continue  # a rule's row
            kernel = kernels.setdefault(cell(row, "ID"), NcuKernel(cell(row, "ID"), cell(row, "Kernel Name"),
                                                                   cell(row, "Grid Size"), cell(row, "Block Size")))
            key = f"{cell(row, 'Section Name')}/{cell(row, 'Metric Name')}"
            kernel.metrics[key] = (cell(row, "Metric Value"), cell(row, "Metric Unit"))
        return list(kernels.values())
    units = rows.pop(0) if rows and not cell(rows[0], "ID") else [""] * len(header)
    measured = [name for name in header if name not in IDENTITY]
    return [NcuKernel(cell(row, "ID"), cell(row, "Kernel Name"), cell(row, "Grid Size"), cell(row, "Block Size"),
                      {name: (row[column[name]], units[column[name]]) for name in measured}) for row in rows]


def number(text: str) -> float | None:
    """A metric value as a float ('1,234.5' -> 1234.5); None for 'n/a', empty or text."""
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


def _first(kernel: NcuKernel, names) -> tuple[float | None, str]:
    for name in names:
        if name in kernel.metrics:
            value, unit = kernel.metrics[name]
            return number(value), unit
    return None, ""


def _duration_us(kernel: NcuKernel) -> float | None:
    value, unit = _first(kernel, DURATION)
    if value is None:
        return None
    if unit.strip() not in TIME_TO_US:
        raise NcuError(f"kernel {kernel.id}: duration in an unknown unit {unit!r}")
    return value * TIME_TO_US[unit.strip()]


def stall_shares(kernel: NcuKernel) -> list[tuple[str, float]]:
    """(reason, share of the stalls) for every stall reason, largest first, from the first
    family of STALL_FAMILIES the kernel has (one suffix: its most complete set)."""
    families: dict[tuple[str, str], dict[str, float]] = {}
    for name, (value, _) in kernel.metrics.items():
        match = STALL.match(name)
        amount = number(value)
        if not match or amount is None or match["reason"] in NOT_STALLS or match["reason"].endswith("_not_issued"):
            continue
        key = (match["family"], (match["suffix"] or "") + (match["kind"] or ""))
        families.setdefault(key, {})[match["reason"]] = amount
    if not families:
        return []
    best = min(families, key=lambda k: (STALL_FAMILIES.index(k[0]), -len(families[k])))
    total = sum(families[best].values())
    if total <= 0:
        return []
    return sorted(((reason, v / total) for reason, v in families[best].items()), key=lambda rv: -rv[1])


def summarize(kernel: NcuKernel) -> KernelSummary:
    """The summary of one kernel (see the module docstring)."""
    tensor = [number(v) for name, (v, _) in kernel.metrics.items() if TENSOR.match(name)]
    tensor = [v for v in tensor if v is not None]
    return KernelSummary(
        kernel.id, kernel.name, kernel.grid, kernel.block, _first(kernel, REGISTERS)[0], _duration_us(kernel),
        _first(kernel, DRAM)[0], _first(kernel, L2)[0], _first(kernel, OCCUPANCY)[0], max(tensor, default=None),
        stall_shares(kernel),
    )


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _compact(dims: str) -> str:
    """'(256, 8, 1)' -> '256×8×1'."""
    parts = re.findall(r"\d+", dims)
    return "×".join(parts) if parts else (dims or "-")


def format_summary(summaries: list[KernelSummary], name_width: int = 40) -> str:
    """The summary table: one line per profiled kernel."""
    head = ("ID", "kernel", "grid", "block", "regs", "µs", "DRAM %", "L2 %", "occ %", "tensor %",
            f"top {TOP_STALLS} stalls (share of stalls)")
    cells = [(s.id, s.name if len(s.name) <= name_width else s.name[:name_width - 1] + "…", _compact(s.grid),
              _compact(s.block), _fmt(s.registers, ".0f"), _fmt(s.duration_us, ".2f"), _fmt(s.dram_pct, ".1f"),
              _fmt(s.l2_pct, ".1f"), _fmt(s.occupancy_pct, ".1f"), _fmt(s.tensor_pct, ".1f"),
              ", ".join(f"{reason} {share:.0%}" for reason, share in s.stalls[:TOP_STALLS]) or "-")
             for s in summaries]
    widths = [max(len(row[i]) for row in [head, *cells]) for i in range(len(head))]

    def line(row):
        return "  ".join(c.ljust(w) if i in (1, len(row) - 1) else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    return "\n".join([line(head), *map(line, cells)])

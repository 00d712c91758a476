"""The architecture report (scripts/arch_report.py): every production launch of the Triton
submissions (gdn_bench.arch_launches) compiled offline for each architecture of ARCHITECTURES
(gdn_bench.arch_compile), with its registers, spills, shared memory, MMA instruction class and
the setting that chose it; the checks every launch must pass; the table, the JSON and a summary.

The checks (`problems`): no spill beyond TOLERATED_SPILLS (stores or loads), shared memory
within SHARED_MEMORY_LIMIT and tensor memory within TENSOR_MEMORY_LIMIT, the MMA class
EXPECTED_MMA asks of a kernel, some instruction that writes global memory (every production
kernel writes its outputs), every kernel named in arch_launches.SETTINGS and every table row
reached by a call. The report of the landed code is committed (COMMITTED); `check_committed`
tells whether it is the current code's (the same launches, by key) and compiles a sample again to
confirm its numbers: what CI runs (tests/test_arch_report.py).

Nothing here imports triton at module level: run_modal reads the committed summary without it.
"""

import json
from pathlib import Path

from gdn_bench.paths import project_root

# The architectures compiled for, by ptxas's name, with the compute capability the
# submissions plan for (shared.planning_for): H100 and H200, B200, B300.
ARCHITECTURES = {"sm_90a": (9, 0), "sm_100a": (10, 0), "sm_103a": (10, 3)}
# Modal's GPU names (run_modal --gpu) and the architecture of each.
GPU_ARCHITECTURES = {"H100": "sm_90a", "H200": "sm_90a", "B200": "sm_100a", "B300": "sm_103a"}
# Shared memory a program may use, in bytes: the opt-in maximum per block of H100, H200, B200 and
# B300 (cudaDevAttrMaxSharedMemoryPerBlockOptin, 227 KiB), above which Triton refuses to load the
# kernel (OutOfResources, as it reads the device's max_shared_mem).
SHARED_MEMORY_LIMIT = 232448
# Tensor memory a program may use, in columns: what a Blackwell multiprocessor has (128 lanes of 512
# 32-bit columns). Triton 3.6 and 3.7.1 compile a kernel that needs more into a bare trap, with no
# error (a fused prefill kernel needing 640 columns, docs/sm100.md section 7); 3.9 fits it.
TENSOR_MEMORY_LIMIT = 512
# The MMA class each kernel's launches must use, per shared.arch_key: the allowance as data. The
# chunked path's products run wgmma on sm90 and tcgen05 on sm100 (4 or 8 warps there, one stage:
# docs/sm100.md).
_CHUNKED = ("chunk_prep_kernel", "span_summary_kernel", "span_fixup_kernel", "span_pass_kernel")
EXPECTED_MMA = {"sm90": dict.fromkeys(_CHUNKED, "wgmma"), "sm100": dict.fromkeys(_CHUNKED, "tcgen05")}
# Spills tolerated, per shared.arch_key and kernel: at most this many bytes per thread stored and
# loaded, today's as this report finds them (Triton 3.9.0, ptxas 13.4; Triton 3.6's compiles of
# docs/perf.md item 20 agree in kind). Each is the fastest launch measured: the span pass at 64
# columns and 4 warps (8 warps, spill-free: 20-45 % slower; 32 columns: computes wrongly on
# Hopper). The prep uncapped spills nothing since item 22 (its k and q copies stored before the
# gates' sums); on sm90 from 33 blocks it runs capped at 168 registers (three programs per
# multiprocessor, measured faster: item 25). Since item 28 (the inverse kept in float16, the
# decay tile made twice) it needs at most 168 registers uncapped under Triton 3.9, so the cap
# spills nothing; under 3.7.1 one launch spills 12 bytes (under 3.6, the lent GPUs', nothing).
# A larger spill, or one anywhere else, is a problem.
# The Hopper pass (Gluon) spills nothing under Triton 3.6 (the lent GPUs': one sequence with
# spans, several, pooled; docs/perf.md item 27); Triton 3.9 spills up to 192 bytes (one
# sequence), the report under 3.7.1 (triton_3.7.1/) says what the contest's Triton does.
TOLERATED_SPILLS = {"sm90": {"span_pass_kernel": 196, "chunk_prep_kernel": 12, "hopper_pass_kernel": 200},
                    "sm100": {"span_pass_kernel": 120}}
COMMITTED = Path("docs") / "data" / "arch"  # under the checkout: arch_report.json and .txt
JSON_NAME, TEXT_NAME = "arch_report.json", "arch_report.txt"
_IDENTITY = ("arch", "plan", "kernel", "warps", "constexprs", "options", "key", "settings", "calls")  # a row before compiling
_FIELDS = ("regs", "stack", "spill_stores", "spill_loads", "smem", "tmem", "mma", "global_writes")  # what compiling adds


def collect(root: Path, architectures: list[str], workers: int, use_cache: bool = True, progress=None) -> dict:
    """The report of checkout `root` for `architectures` (names of ARCHITECTURES): one row per
    distinct launch and architecture, with its problems, and the table rows no call reached."""
    import triton

    from gdn_bench.arch_compile import compile_all

    rows, jobs, unreached = _launch_rows(root, architectures)
    for row, compiled in zip(rows, compile_all(jobs, workers, use_cache, progress)):
        row.update(compiled._asdict())
        row["problems"] = problems(row)
    return {"triton": triton.__version__, "ptxas": _ptxas_versions(architectures),
            "shared_memory_limit": SHARED_MEMORY_LIMIT, "tensor_memory_limit": TENSOR_MEMORY_LIMIT,
            "expected_mma": EXPECTED_MMA, "tolerated_spills": TOLERATED_SPILLS, "unreached_rows": unreached,
            "launches": rows}


def _launch_rows(root: Path, architectures: list[str]) -> tuple[list[dict], list, dict]:
    """(a row per distinct launch and architecture, without what the compiler made of it; their
    compile jobs, in the same order; per architecture, the table rows no call reached)."""
    from gdn_bench import arch_compile, arch_launches

    modules = arch_launches.load_submissions(root)
    rows, jobs, unreached = {}, [], {}
    for name in architectures:
        capability = ARCHITECTURES[name]
        found, unreached[name] = arch_launches.launches(modules, capability)
        for launch in found:
            work = arch_compile.job(launch.record, capability)
            row = rows.get((name, work.key))
            if row is None:
                row = rows[name, work.key] = _row(name, modules["shared"].capability_arch(capability), launch, work.key)
                jobs.append(work)
            row["settings"] = sorted({*row["settings"], launch.setting})
            row["calls"].append(launch.call)
    return list(rows.values()), jobs, unreached


def _row(architecture: str, plan: str, launch, key: str) -> dict:
    """A report row's identity: the architecture, the launch tables it plans with, the kernel,
    its warps, constexprs and compile options, its key; the settings and calls are added as
    calls make it."""
    record = launch.record
    constexprs = {name: value if value is None or isinstance(value, (bool, int, float)) else str(value)
                  for name, value in record.constexprs}
    return {"arch": architecture, "plan": plan, "kernel": record.fn.__name__, "warps": record.num_warps,
            "constexprs": constexprs, "options": dict(record.options), "key": key, "settings": [], "calls": []}


def _ptxas_versions(architectures: list[str]) -> dict:
    """The ptxas release (its version line) that compiles for each architecture."""
    from triton.backends.nvidia.compiler import get_ptxas_version

    from gdn_bench.arch_compile import target_of

    return {name: next(line for line in get_ptxas_version(target_of(ARCHITECTURES[name]).arch).splitlines()
                       if "release" in line) for name in architectures}


def problems(row: dict) -> list[str]:
    """What is wrong with a report row, in words (nothing: an empty list)."""
    found = []
    tolerated = TOLERATED_SPILLS.get(row["plan"], {}).get(row["kernel"], 0)
    if max(row["spill_stores"], row["spill_loads"]) > tolerated:
        found.append(f"spills {row['spill_stores']} B stored, {row['spill_loads']} B loaded per thread"
                     + (f" (TOLERATED_SPILLS: {tolerated})" if tolerated else ""))
    if row["smem"] > SHARED_MEMORY_LIMIT:
        found.append(f"shared memory {row['smem']} B > {SHARED_MEMORY_LIMIT} B")
    if row["tmem"] > TENSOR_MEMORY_LIMIT:
        found.append(f"tensor memory {row['tmem']} columns > {TENSOR_MEMORY_LIMIT}")
    expected = EXPECTED_MMA.get(row["plan"], {}).get(row["kernel"])
    if expected and row["mma"] != expected:
        found.append(f"MMA {row['mma']}, expected {expected} (EXPECTED_MMA)")
    if row["global_writes"] == 0:
        found.append("no instruction writes global memory: the compiled kernel has no effect (a body compiled "
                     "away, as into a bare trap)")
    if row["kernel"] not in _settings():
        found.append("a kernel gdn_bench.arch_launches.SETTINGS does not name")
    return found


def _settings() -> dict:
    """arch_launches.SETTINGS, imported when asked: arch_launches imports torch (scripts parse
    their flags before)."""
    from gdn_bench.arch_launches import SETTINGS

    return SETTINGS


def all_problems(report: dict) -> list[str]:
    """Every problem of a report, one line each: its launches' and the rows no call reached."""
    lines = [f"{row['arch']} {row['kernel']} {_launch_text(row, _varying(report))}: {problem}"
             for row in report["launches"] for problem in row["problems"]]
    lines += [f"{arch} {row}: reached by no call (add a shape to gdn_bench.arch_launches.SHAPES)"
              for arch, rows in report["unreached_rows"].items() for row in rows]
    return lines


def _varying(report: dict) -> dict:
    """Per kernel, the constexprs whose value differs between its launches (what tells them apart)."""
    values = {}
    for row in report["launches"]:
        for name, value in row["constexprs"].items():
            values.setdefault(row["kernel"], {}).setdefault(name, set()).add(json.dumps(value))
    return {kernel: [name for name, seen in names.items() if len(seen) > 1] for kernel, names in values.items()}


def _launch_text(row: dict, varying: dict) -> str:
    """A launch in words: warps, compile options and the constexprs that tell it from the
    kernel's other launches."""
    return " ".join([f"w{row['warps']}", *(f"{name}={value}" for name, value in row.get("options", {}).items()),
                     *(f"{name}={_short(row['constexprs'][name])}" for name in varying.get(row["kernel"], ()))])


def _short(value) -> str:
    return str(int(value)) if isinstance(value, bool) else str(value)


def format_table(report: dict) -> str:
    """The report as a text table, one line per launch and architecture, then each
    architecture's summary and every problem."""
    varying = _varying(report)
    head = ("arch", "kernel", "launch", "regs", "spill st/ld", "smem B", "MMA", "setting", "calls (first)")
    lines = [(row["arch"], row["kernel"], _launch_text(row, varying), str(row["regs"]),
              f"{row['spill_stores']}/{row['spill_loads']}", str(row["smem"]), row["mma"], ", ".join(row["settings"]),
              f"{len(row['calls'])} ({row['calls'][0]})") for row in report["launches"]]
    widths = [max(len(cells[i]) for cells in [head, *lines]) for i in range(len(head))]
    text = [f"Triton {report['triton']}; " + "; ".join(f"{a}: {v}" for a, v in report["ptxas"].items()),
            "  ".join(h.ljust(w) for h, w in zip(head, widths))]
    text += ["  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip() for cells in lines]
    text += ["", *(line for arch in dict.fromkeys(row["arch"] for row in report["launches"])
                   for line in summary_lines(report, arch))]
    found = all_problems(report)
    text += ["", f"problems: {len(found)}", *(f"  {line}" for line in found)]
    return "\n".join(text) + "\n"


def summary_lines(report: dict, architecture: str) -> list[str]:
    """A few lines on one architecture's launches: how many, registers, shared memory, spills
    per kernel, each kernel's MMA class, the problems."""
    rows = [row for row in report["launches"] if row["arch"] == architecture]
    if not rows:
        return [f"{architecture}: not in the report"]
    mma, spills = {}, {}
    for row in rows:
        mma.setdefault(row["kernel"], set()).add(row["mma"])
        if row["spill_stores"] or row["spill_loads"]:
            spills.setdefault((row["plan"], row["kernel"]), []).append(max(row["spill_stores"], row["spill_loads"]))
    found = [line for line in all_problems(report) if line.startswith(f"{architecture} ")]
    spilled = [f"{kernel} in {len(sizes)} launches, up to {max(sizes)} B (tolerated: "
               f"{report['tolerated_spills'].get(plan, {}).get(kernel, 0)} B)" for (plan, kernel), sizes in spills.items()]
    return [f"{architecture}: {len(rows)} launches; registers up to {max(r['regs'] for r in rows)}; shared memory up "
            f"to {max(r['smem'] for r in rows)} B (limit {report['shared_memory_limit']} B)",
            "  spills: " + ("; ".join(spilled) or "none"),
            "  MMA: " + ", ".join(f"{kernel} {'/'.join(sorted(classes))}" for kernel, classes in mma.items()),
            f"  problems: {len(found)}", *(f"    {line}" for line in found)]


def committed_summary(gpu: str) -> list[str]:
    """The committed report's summary for Modal's GPU `gpu` (run_modal --gpu: B200, H100, ...; a
    count after a colon ignored), headed by where it comes from; nothing for a GPU that
    GPU_ARCHITECTURES does not name or without a committed report."""
    architecture = GPU_ARCHITECTURES.get(gpu.split(":")[0].upper())
    path = committed_path()
    if architecture is None or not path.is_file():
        return []
    report = json.loads(path.read_text(encoding="utf-8"))
    return [f"architecture report of {gpu} ({architecture}), compiled offline with Triton {report['triton']} "
            f"({path.relative_to(project_root())}; scripts/arch_report.py --check: is it this code's?):",
            *(f"  {line}" for line in summary_lines(report, architecture))]


def committed_path(name: str = JSON_NAME) -> Path:
    """The committed report file of the project checkout."""
    return project_root() / COMMITTED / name


def write(report: dict, folder: Path) -> list[Path]:
    """The report as JSON and as its table into `folder`; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / JSON_NAME, folder / TEXT_NAME]
    paths[0].write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    paths[1].write_text(format_table(report), encoding="utf-8")
    return paths


def check_committed(root: Path, workers: int) -> list[str]:
    """Whether the committed report is the code's: the launches the code makes now (on the
    committed architectures) are its launches, with their keys, settings and calls, and the
    same table rows go unreached; its launches pass the checks; and a sample (per architecture,
    the launch that spills most, else the one with the most registers: the numbers nearest a
    limit) compiled again, without the cache, gives the committed numbers. Returns what is
    wrong, one line each (nothing: an empty list)."""
    from gdn_bench.arch_compile import compile_all

    committed = json.loads(committed_path().read_text(encoding="utf-8"))
    rows, jobs, unreached = _launch_rows(root, list(dict.fromkeys(row["arch"] for row in committed["launches"])))
    identity = [{name: row[name] for name in _IDENTITY} for row in committed["launches"]]
    if rows != identity or unreached != committed["unreached_rows"]:
        known = {(row["arch"], row["key"]) for row in identity}
        new = [f"{row['arch']} {row['kernel']} ({row['calls'][0]}): not in it"
               for row in rows if (row["arch"], row["key"]) not in known]
        return new + [f"{committed_path()} is not the code's report: run python scripts/arch_report.py --write"]
    wrong = all_problems(committed)
    sample = {}
    for row, work in zip(committed["launches"], jobs):
        if row["arch"] not in sample or _pressure(row) > _pressure(sample[row["arch"]][0]):
            sample[row["arch"]] = row, work
    compiled_now = compile_all([work for _, work in sample.values()], workers, use_cache=False)
    for (row, _), compiled in zip(sample.values(), compiled_now):
        if {field: row[field] for field in _FIELDS} != compiled._asdict():
            wrong.append(f"{row['arch']} {row['kernel']} ({row['calls'][0]}): compiles to {compiled._asdict()}, "
                         f"the committed report says {({field: row[field] for field in _FIELDS})}")
    return wrong


def _pressure(row: dict) -> tuple[int, int]:
    """How near a launch is to spilling more: its spill bytes, then its registers."""
    return max(row["spill_stores"], row["spill_loads"]), row["regs"]

"""scripts/profile_call.py's command line: see inside one call of any algorithm of either definition,
on one shape (gdn_bench.profile_target), in one of three modes. Needs a CUDA GPU.

    python scripts/profile_call.py --definition decode -B 64                      # breakdown (default)
    python scripts/profile_call.py --definition prefill -T 8192 -N 1 --mode ncu --kernel chunk
    python scripts/profile_call.py --definition prefill --lengths 1,8191 --mode proton
    python scripts/profile_call.py --definition prefill -T 64 --config WALK_MAX_TOKENS=-1

breakdown  every kernel of the call in launch order: name, grid, block, registers, shared memory
           (as CUPTI reports them), median time over --repeats cold-L2 calls; the call's CUPTI
           span and its CUDA-graph replay span (gdn_bench.kernel_breakdown).
ncu        Nsight Compute over one call, for the kernels matching --kernel, with a default
           section set; keeps the .ncu-rep and a CSV, prints a summary per kernel: duration,
           DRAM and L2 throughput, achieved occupancy, top warp stalls, tensor pipes
           (gdn_bench.ncu_summary).
proton     Triton's Proton profiler, PC sampling over --repeats calls: the hottest source lines
           of the kernels matching --kernel, with their share of the samples
           (gdn_bench.proton_lines).

Files go under --out (default results/profile), named after the target, e.g.
prefill-triton-chunked-T8192-N1_breakdown.txt. Exit status 0, or 2 with one line naming what
is wrong: a flag, a missing tool (no GPU, ncu not on PATH, Proton unavailable), no permission
for the GPU's performance counters, or a profile that came back empty.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from gdn_bench import ncu_summary, proton_lines
from gdn_bench.arguments import (ScriptParser, add_root_argument, chosen_project, definition_name, output_folder,
                                 positive_int, seed, sequence_lengths)
from gdn_bench.definitions import TRACK, resolve
from gdn_bench.paths import checkout_of
from gdn_bench.prefill_variants import parse_config

if TYPE_CHECKING:  # what needs torch is imported once the flags are parsed
    from gdn_bench.profile_target import Target

MODES = ("breakdown", "ncu", "proton")
DEFAULT_BATCH, DEFAULT_TOKENS, DEFAULT_SEQS = 64, 8192, 1
VARIANT_DEFINITION = "prefill"  # --config loads prefill.py (gdn_bench.prefill_variants)


def _config(text: str) -> dict:
    try:
        return parse_config(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"not a regular expression ({e}): {text!r}") from None
    return text


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(","))
    if not all(n.isidentifier() for n in names):
        raise argparse.ArgumentTypeError(f"expected comma-separated ncu section names, got {text!r}")
    return names


def build_parser(checkout: Path) -> argparse.ArgumentParser:
    parser = ScriptParser("profile_call", description=__doc__)
    choices = ", ".join(f"{s.short} ({s.name})" for s in TRACK)
    parser.add_argument("--definition", type=definition_name, default="decode", help=f"{choices}; default decode")
    defaults = ", ".join(f"{s.submission} for {s.short}" for s in TRACK)
    parser.add_argument("--algo", help=f"one algorithm of the definition (default the submission: {defaults})")
    parser.add_argument("--config", type=_config, action="append", default=[],
                        help="a variant of the prefill submission: module-level NAME=VALUE[,NAME=VALUE...] of "
                             "prefill.py (repeatable)")
    parser.add_argument("-B", "--batch-size", type=positive_int, help=f"decode: batch size (default {DEFAULT_BATCH})")
    parser.add_argument("-T", "--seq-len", type=positive_int,
                        help=f"prefill: total tokens, split evenly over --num-seqs (default {DEFAULT_TOKENS})")
    parser.add_argument("-N", "--num-seqs", type=positive_int, help=f"prefill: sequences (default {DEFAULT_SEQS})")
    parser.add_argument("--lengths", type=sequence_lengths,
                        help="prefill: explicit sequence lengths instead, e.g. 1,8191")
    parser.add_argument("--mode", choices=MODES, default="breakdown", help="default breakdown")
    parser.add_argument("--repeats", type=positive_int, default=20,
                        help="calls profiled (breakdown: per measurement; proton: sampled); default 20")
    parser.add_argument("--kernel", type=_regex, default=".",
                        help="ncu, proton: only kernels whose name matches this regex (default: all)")
    parser.add_argument("--sections", type=_names, default=ncu_summary.DEFAULT_SECTIONS,
                        help=f"ncu: sections to collect (default {','.join(ncu_summary.DEFAULT_SECTIONS)})")
    parser.add_argument("--ncu-args", type=shlex.split, default=[],
                        help="ncu: further ncu options, e.g. '--clock-control none' (ncu locks clocks to base "
                             "by default)")
    parser.add_argument("--top", type=positive_int, default=20, help="proton: lines shown (default 20)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the random inputs; default 0")
    parser.add_argument("--out", type=output_folder, default="results/profile",
                        help="output folder (default results/profile)")
    add_root_argument(parser, checkout)
    parser.add_argument("--under-ncu", action="store_true", help=argparse.SUPPRESS)  # the target of --mode ncu
    return parser


def target_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Target:
    """The Target the flags name; a flag that does not fit is the parser's one-line error,
    given before torch is imported (profile_target and prefill_bench import it)."""
    spec = resolve(args.definition)
    if spec not in TRACK:
        parser.error(f"argument --definition: profile_call takes {' or '.join(s.short for s in TRACK)}; "
                     f"{spec.short} is timed by scripts/bench_serving.py")
    algo = args.algo if args.algo is not None else spec.submission
    if algo not in spec.algos_by_name:
        parser.error(f"argument --algo: {spec.short} has no algorithm {algo!r}; valid: {', '.join(spec.algos_by_name)}")
    config = {}
    for item in args.config:
        twice = sorted(config.keys() & item.keys())
        if twice:
            parser.error(f"argument --config: {twice[0]} given twice")
        config.update(item)
    if config and (spec.short != VARIANT_DEFINITION or algo != spec.submission):
        submission = resolve(VARIANT_DEFINITION).submission
        parser.error(f"argument --config: variants are of the {VARIANT_DEFINITION} submission ({submission}) only")
    prefill_flags = {"--seq-len": args.seq_len, "--num-seqs": args.num_seqs, "--lengths": args.lengths}
    batch_size, lengths, split = None, args.lengths, None
    if spec.short == "decode":
        given = [flag for flag, value in prefill_flags.items() if value is not None]
        if given:
            parser.error(f"argument {given[0]}: applies to --definition prefill; decode takes --batch-size")
        batch_size = args.batch_size or DEFAULT_BATCH
    elif args.batch_size is not None:
        parser.error("argument --batch-size: applies to --definition decode; prefill takes --seq-len and "
                     "--num-seqs, or --lengths")
    elif lengths is not None and (args.seq_len is not None or args.num_seqs is not None):
        parser.error("argument --lengths: give either --lengths or --seq-len/--num-seqs")
    elif lengths is None:
        split = args.seq_len or DEFAULT_TOKENS, args.num_seqs or DEFAULT_SEQS
        if split[1] > split[0]:
            parser.error(f"argument --num-seqs: {split[1]} sequences need at least {split[1]} tokens "
                         f"(--seq-len {split[0]})")
    from gdn_bench.prefill_bench import even_lengths
    from gdn_bench.profile_target import Target

    if split:
        lengths = tuple(even_lengths(*split))
    return Target(spec.short, algo, batch_size=batch_size, lengths=lengths, config=config)


def target_argv(target: Target, args: argparse.Namespace) -> list[str]:
    """The flags that name `target` again (with --seed and --root): what --mode ncu passes to
    the script it runs under ncu."""
    argv = ["--definition", target.definition, "--algo", target.algo]
    if target.lengths is None:
        argv += ["--batch-size", str(target.batch_size)]
    else:
        argv += ["--lengths", ",".join(map(str, target.lengths))]
    for name, value in target.config.items():
        argv += ["--config", f"{name}={value!r}"]
    return argv + ["--seed", str(args.seed), "--root", str(args.root)]


def _check_tools(mode: str) -> None:
    """NcuError or ProtonError (one line each) unless the mode's tool and a GPU are here."""
    import torch

    if mode == "ncu":
        ncu_summary.find_ncu()
    if mode == "proton":
        proton_lines.proton()
    if not torch.cuda.is_available():
        raise ValueError("needs a CUDA GPU")


def _gpu() -> str:
    import torch

    return torch.cuda.get_device_name()


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def run_breakdown(target: Target, args) -> list[Path]:
    from gdn_bench import kernel_breakdown
    from gdn_bench.profile_target import build_call

    b = kernel_breakdown.measure(build_call(target, args.seed), args.repeats)
    header = (f"{target.label()} | GPU: {_gpu()} | seed {args.seed} | {args.repeats} calls per measurement, "
              f"each after a 256 MB L2 flush (CUPTI via torch.profiler)")
    text = f"{header}\n{kernel_breakdown.format_breakdown(b)}\n"
    print(text, end="")
    stem = args.out / f"{target.file_stem()}_breakdown"
    record = {"target": target.label(), "gpu": _gpu(), "seed": args.seed, "repeats": args.repeats, **asdict(b),
              "kernel_sum_us": b.kernel_sum_us}
    return [_write(stem.with_suffix(".txt"), text), _write(stem.with_suffix(".json"), json.dumps(record, indent=2))]


def run_ncu(target: Target, args, script: Path) -> list[Path]:
    ncu = ncu_summary.find_ncu()
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"{target.file_stem()}_ncu"
    child = [sys.executable, str(script.resolve()), *target_argv(target, args), "--under-ncu"]
    command = ncu_summary.profile_command(ncu, stem, args.kernel, args.sections, args.ncu_args, child)
    print(f"running: {shlex.join(command)}", flush=True)
    result = subprocess.run(command, capture_output=True, text=True)
    log = _write(stem.with_suffix(".log"), result.stdout + result.stderr)
    problem = ncu_summary.failure(result.stdout + result.stderr, result.returncode, args.kernel)
    report = stem.with_suffix(".ncu-rep")
    if problem is None and not report.is_file():
        problem = f"ncu wrote no report at {report}"
    if problem:
        raise ncu_summary.NcuError(f"{problem} (ncu's output: {log})")
    export = subprocess.run(ncu_summary.export_command(ncu, report), capture_output=True, text=True,
                            env={**os.environ, "LC_ALL": "C"})
    if export.returncode != 0:
        last = export.stderr.strip().splitlines()[-1:] or [f"status {export.returncode}"]
        raise ncu_summary.NcuError(f"ncu could not export {report}: {last[0]}")
    csv_path = _write(stem.with_suffix(".csv"), export.stdout)
    summaries = [ncu_summary.summarize(k) for k in ncu_summary.parse_csv(export.stdout)]
    options = f", options {shlex.join(args.ncu_args)}" if args.ncu_args else ""
    header = (f"{target.label()} | GPU: {_gpu()} | seed {args.seed} | ncu, kernels matching {args.kernel!r}, "
              f"sections {','.join(args.sections)}{options}")
    text = f"{header}\n{ncu_summary.format_summary(summaries)}\n"
    print(text, end="")
    return [report, csv_path, _write(stem.with_suffix(".txt"), text), log]


def run_proton(target: Target, args) -> list[Path]:
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"{target.file_stem()}_proton"
    from gdn_bench.profile_target import build_call

    hatchet = proton_lines.sample(build_call(target, args.seed), stem, args.repeats)
    lines = proton_lines.hot_lines(json.loads(hatchet.read_text()), args.kernel)
    header = (f"{target.label()} | GPU: {_gpu()} | seed {args.seed} | Proton PC sampling over {args.repeats} calls, "
              f"kernels matching {args.kernel!r}")
    text = f"{header}\n{proton_lines.format_lines(lines, args.top)}\n"
    print(text, end="")
    return [hatchet, _write(stem.with_suffix(".txt"), text)]


def main(argv=None, *, script: Path) -> int:
    """profile_call.py with `argv` (default sys.argv[1:]); `script` is the calling script (--mode ncu
    runs it again under ncu)."""
    parser = build_parser(checkout_of(script))
    args = parser.parse_args(argv)
    chosen_project(parser, args)
    target = target_from_args(parser, args)
    if args.under_ncu:
        from gdn_bench.profile_target import build_call

        ncu_summary.bracketed_call(build_call(target, args.seed))
        return 0
    try:
        _check_tools(args.mode)
        unavailable = target.spec.algos_by_name[target.algo].unavailable()
        if unavailable:
            raise ValueError(f"{target.algo} cannot run here: {unavailable}")
        if args.mode == "breakdown":
            written = run_breakdown(target, args)
        elif args.mode == "ncu":
            written = run_ncu(target, args, script)
        else:
            written = run_proton(target, args)
    except (ValueError, ncu_summary.NcuError, proton_lines.ProtonError) as e:
        print(f"profile_call: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {', '.join(map(str, written))}")
    return 0

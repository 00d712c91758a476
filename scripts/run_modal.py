"""Run GDN algorithms (decode or prefill) on Modal's GPUs (B200 by default) and report as
run_local does.

    modal run scripts/run_modal.py                          # decode: the submission on the embedded trace set
    modal run scripts/run_modal.py --definition prefill --algo all
    modal run scripts/run_modal.py --algo all --gpu H100
    modal run scripts/run_modal.py --volume mlsys26-contest --volume-path /mlsys26-contest -n 20
    modal run scripts/run_modal.py --definition both        # the track: both definitions' jobs at once
    python scripts/run_modal.py [same flags]                # checks them before contacting Modal

Flags: run_local's (--definition, --algo, -n, --batch-sizes / --seq-lens, --workload-id,
--warmup, --iterations, --trials, --seed, --reference, --reference-cache, --out) except
--dataset, plus the Modal ones below. The trace set is the definition's own (decode: embedded;
prefill: the generated mix), or the one at --volume-path inside the Modal Volume --volume.
Each (algorithm, size group) is one job: gdn_bench.runner.run in a container of the contest's
evaluation image, on up to --max-containers GPUs at once. Their partial results merge into one
report per definition, written locally under --out as run_local writes it (results.json,
report.txt and the plots; with --definition both, under --out/<definition> and track.json),
then the committed architecture report's summary for the GPU (docs/data/arch: registers,
spills, shared memory and MMA class of every launch, scripts/arch_report.py).
The reference times live in the local cache file, as for run_local: the jobs of the first
algorithm get its entries, measure those missing, and what they measured is written into it.
The Volume gdn-contest-kit-triton-cache holds Triton's cache, so kernels compile once, and the
generated prefill trace set (written by one container before the jobs start).
Needs Modal credentials (`modal setup`) and Modal's server answering within
CONNECT_TIMEOUT_S (both checked before the app starts). Exit status: 0 when every (algorithm,
workload) passed, 1 when any failed, 2 for bad arguments, missing credentials or no answer
from Modal, 130 when Ctrl-C stopped it.
"""

import argparse
import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path

import modal

from gdn_bench.arch_report import committed_summary
from gdn_bench.arguments import ScriptParser, positive_int
from gdn_bench.cli import add_run_arguments, algorithms_epilog, report, report_track, settings_from_args
from gdn_bench.device import prepare_triton
from gdn_bench.interrupts import EXIT_STATUS
from gdn_bench.paths import checkout_of, use_project
from gdn_bench.reference_times import ReferenceTimes, as_cached, default_file

EVAL_IMAGE = "flashinfer/flashinfer-ci-cu132:latest"  # the contest's evaluation image
DEFAULT_GPU = "B200"
DEFAULT_MAX_CONTAINERS = 8
JOB_TIMEOUT_S = 30 * 60
PROJECT_ROOT = checkout_of(__file__)  # this checkout: its sources go into the image
REMOTE_ROOT = "/root/gdn-contest-kit"
REMOTE_DIRS = ("gdn_bench", "solution", "baselines")
EXTRA_PACKAGES = ("tomlkit>=0.13,<0.16",)  # what gdn_bench needs beyond the evaluation image  # with config.toml, all that the runner reads
CACHE_MOUNT = "/cache"
DATASET_MOUNT = Path("/dataset")
NO_CREDENTIALS = (
    "run_modal: error: no Modal credentials found. Run `modal setup` once (it stores a token in "
    "~/.modal.toml), or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET, then try again."
)
# The GPU types Modal's documentation lists (modal.com/docs/guide/gpu); its client sends any
# name, and only the server, once the app runs, refuses one it does not know.
MODAL_GPUS = ("T4", "L4", "A10", "A10G", "L40S", "A100", "A100-40GB", "A100-80GB", "RTX-PRO-6000", "H100", "H100!",
              "H200", "B200", "B200+")
# Modal's client retries a server that does not answer for about a minute and has no setting
# to shorten that; the hello that checks the server before anything starts waits this long.
CONNECT_TIMEOUT_S = 10.0


def has_credentials() -> bool:
    """Whether Modal can authenticate, by its own config (MODAL_TOKEN_ID/MODAL_TOKEN_SECRET, else
    the active profile of ~/.modal.toml), or an OAuth token in the environment. Nothing is sent."""
    from modal.config import config

    return bool(config.get("token_id") and config.get("token_secret")) or "MODAL_OAUTH_REFRESH_TOKEN" in os.environ


def require_credentials() -> None:
    """Exit with status 2 and NO_CREDENTIALS when Modal could not authenticate."""
    if not has_credentials():
        _fail(NO_CREDENTIALS)


def _fail(line: str) -> None:
    print(line, file=sys.stderr)
    raise SystemExit(2)


def gpu_type(text: str) -> str:
    """One of MODAL_GPUS, in any case; else an argparse error listing them."""
    if text.upper() not in MODAL_GPUS:
        raise argparse.ArgumentTypeError(f"expected one of Modal's GPU types ({', '.join(MODAL_GPUS)}), got {text!r}")
    return text.upper()


def _server() -> str:
    """Modal's server URL and where it came from, in words."""
    from modal.config import config

    source = "$MODAL_SERVER_URL" if os.environ.get("MODAL_SERVER_URL") else "Modal's config"
    return f"{config.get('server_url')} (from {source})"


def require_server(timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Exit with status 2 and one line unless Modal's server answers Modal's own hello
    (Client.hello: connects and checks the credentials) within `timeout_s`."""
    from modal.exception import AuthError, Error

    async def hello():
        client = await modal.Client.from_env.aio()
        await client.hello.aio()

    try:
        asyncio.run(asyncio.wait_for(hello(), timeout_s))
    except TimeoutError:
        _fail(f"run_modal: error: no answer from Modal's server {_server()} within {timeout_s:g} s; check the "
              "network connection (and MODAL_SERVER_URL, if set), then try again")
    except AuthError as e:
        _fail(f"run_modal: error: Modal refused the credentials ({_first_line(e)}); run `modal setup` again, or "
              "set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET")
    except (Error, OSError) as e:
        _fail(f"run_modal: error: cannot reach Modal's server {_server()}: {_first_line(e)}")


def _first_line(error: BaseException) -> str:
    return next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)


def with_sources(base: modal.Image) -> modal.Image:
    """`base` plus config.toml and REMOTE_DIRS under REMOTE_ROOT (bytecode caches left out),
    added at container start, so editing a kernel needs no image rebuild."""
    sourced = base.add_local_file(PROJECT_ROOT / "config.toml", f"{REMOTE_ROOT}/config.toml")
    for name in REMOTE_DIRS:
        sourced = sourced.add_local_dir(PROJECT_ROOT / name, f"{REMOTE_ROOT}/{name}", ignore=["**/__pycache__"])
    return sourced


triton_cache = modal.Volume.from_name("gdn-contest-kit-triton-cache", create_if_missing=True)
image = with_sources(
    modal.Image.from_registry(EVAL_IMAGE)
    .pip_install(*EXTRA_PACKAGES)
    .env({"PYTHONPATH": REMOTE_ROOT, "TRITON_CACHE_DIR": f"{CACHE_MOUNT}/triton",
          "GDN_BENCH_CACHE": f"{CACHE_MOUNT}/gdn-bench"})
)
app = modal.App("gdn-contest-kit", image=image)


@app.function(gpu=DEFAULT_GPU, volumes={CACHE_MOUNT: triton_cache}, timeout=JOB_TIMEOUT_S, scaledown_window=10)
def run_job(settings) -> dict:
    """One job (a gdn_bench.runner.RunSettings) through the runner run_local uses; returns
    Results.to_json(). Modal commits the cache Volume when the container exits. With .local()
    on a machine without a GPU, it is run_local's CPU correctness pass."""
    use_project(PROJECT_ROOT if modal.is_local() else REMOTE_ROOT)
    prepare_triton()
    from gdn_bench.runner import run

    return run(settings).to_json()


@app.function(volumes={CACHE_MOUNT: triton_cache}, timeout=JOB_TIMEOUT_S)
def prepare_dataset(definition: str) -> str:
    """The definition's own GPU trace set, generated on the cache Volume if it is not there
    yet (prefill's mix; decode's is embedded), in a CPU container; committed so that the jobs
    started after it find it."""
    from gdn_bench.definitions import resolve

    root = resolve(definition).default_dataset(True)
    if not modal.is_local():  # in a container (not .local())
        triton_cache.commit()
    return str(root)


def build_parser() -> argparse.ArgumentParser:
    """run_local's flags but --dataset, and the Modal ones."""
    parser = ScriptParser("run_modal", description=__doc__, epilog=algorithms_epilog())
    add_run_arguments(parser)
    parser.add_argument("--gpu", type=gpu_type, default=DEFAULT_GPU,
                        help=f"Modal GPU type: {', '.join(MODAL_GPUS)} (default {DEFAULT_GPU})")
    parser.add_argument("--max-containers", type=positive_int, default=DEFAULT_MAX_CONTAINERS,
                        help=f"at most this many GPUs at once (default {DEFAULT_MAX_CONTAINERS})")
    parser.add_argument("--volume", help="Modal Volume holding the trace set (default: the definition's own)")
    parser.add_argument("--volume-path", default="", help="the trace set's folder inside --volume (default: its root)")
    return parser


def jobs(settings, own_dataset: bool) -> list:
    """The (algorithm, size group) jobs: the definition's job_groups per algorithm, no more
    than the selected workloads (counted here for the definition's own trace set; else -n
    per group selects at least -n). Raises ValueError when the filters select nothing of the
    definition's own trace set."""
    from gdn_bench.runner import select_workloads, split

    groups = settings.spec.job_groups
    selected = settings.num_workloads or groups
    if own_dataset:
        selected = len(select_workloads(settings.spec.planned_workloads(), settings, cpu=False))
    return split(settings, min(groups, selected))


def plan(argv: list[str] | None) -> tuple[list, argparse.Namespace]:
    """The jobs and the parsed flags from the command line (args.reference_cache: the file of
    reference times, read here). Bad flags, or a file that is not one of reference times, exit
    with status 2 here, before anything is sent to Modal."""
    parser = build_parser()
    args = parser.parse_args(argv)
    use_project(PROJECT_ROOT)
    if args.volume_path and not args.volume:
        parser.error("--volume-path needs --volume")
    args.dataset = DATASET_MOUNT / args.volume_path.lstrip("/") if args.volume else None
    try:
        todo = [job for settings in settings_from_args(args) for job in jobs(settings, own_dataset=args.volume is None)]
        args.reference_cache = args.reference_cache or default_file()
        known = ReferenceTimes.load(args.reference_cache).entries
    except ValueError as e:
        parser.error(str(e))
    # The jobs that get reference times get the cached ones (they cannot read this machine's file).
    return [replace(job, reference_known=known if job.reference else None) for job in todo], args


def configured_job(gpu: str, max_containers: int, volume: str | None) -> modal.Function:
    """run_job on `gpu`, at most `max_containers` at once, with the dataset Volume if any."""
    volumes = {CACHE_MOUNT: triton_cache}
    if volume:
        volumes[str(DATASET_MOUNT)] = modal.Volume.from_name(volume)
    return run_job.with_options(gpu=gpu, max_containers=max_containers, volumes=volumes)


def launch(todo: list, args: argparse.Namespace) -> int:
    """Run the jobs on the running app, merge their results per definition, write each report
    (and the track score when both ran) and keep the reference times they measured in the
    local cache file. Each definition's own trace set is prepared first, by one container,
    when it is generated. Ctrl-C keeps the jobs that finished: their reports, marked partial
    (status 130)."""
    from gdn_bench.results import Results, merge

    print(f"run_modal: {len(todo)} jobs on up to {args.max_containers} {args.gpu} GPUs")
    outs = {job.spec.name: job.out for job in todo}  # each definition's folder, in the order they run
    times = ReferenceTimes(args.reference_cache)
    parts, partial = [], None
    try:
        if args.volume is None:
            for name in outs:
                print(f"run_modal: trace set {prepare_dataset.remote(name)}")
        for part in configured_job(args.gpu, args.max_containers, args.volume).map(todo):
            parts.append(Results.from_json(part))
    except (ValueError, FileNotFoundError, modal.exception.NotFoundError) as e:
        print(f"run_modal: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if not parts:
            print("run_modal: interrupted by Ctrl-C before any job finished; nothing written", file=sys.stderr)
            return EXIT_STATUS
        partial = f"interrupted by Ctrl-C: {len(parts)} of {len(todo)} jobs finished"
    statuses, runs = [], []
    for name, out in outs.items():
        mine = [part for part in parts if part.meta["definition"] == name]
        if not mine:
            continue
        results = merge(mine)
        if partial:
            results.meta["partial"] = partial
        # The checkout whose sources the jobs ran, and the file that keeps their reference times.
        results.meta.update(root=str(PROJECT_ROOT), package=None)
        results.meta["reference"]["file"] = str(times.path)
        if as_cached(results.reference):
            times.save(as_cached(results.reference))
        runs.append(results)
        statuses.append(report(results, out, "run_modal"))
    if not partial and len(runs) > 1 and any(r.meta["mode"] == "gpu" for r in runs):  # .local() on CPU: nothing timed
        statuses.append(report_track(runs, args.out, "run_modal"))
    for line in committed_summary(args.gpu):  # beside the times: what the GPU's compiler makes of every launch
        print(line)
    return max(statuses)


@app.local_entrypoint()
def modal_main(*arglist: str) -> None:
    """Takes run_modal.py's flags (python scripts/run_modal.py --help lists them)."""
    status = launch(*plan(list(arglist)))
    if status:
        raise SystemExit(status)


def main(argv: list[str] | None = None) -> int:
    """`python scripts/run_modal.py`: flags, credentials and the server are checked before the
    app starts."""
    todo, args = plan(argv)
    require_credentials()
    require_server()
    from modal.exception import AuthError, ConnectionError as ModalConnectionError

    try:
        with modal.enable_output(), app.run():
            return launch(todo, args)
    except (ModalConnectionError, AuthError) as e:
        print(f"run_modal: error: lost Modal's server {_server()}: {_first_line(e)}; nothing written; try again",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("run_modal: interrupted by Ctrl-C before any job ran; Modal stops the app; nothing written",
              file=sys.stderr)
        return EXIT_STATUS


def _before_modal_run() -> None:
    """When `modal run` imports this file (it starts the app next): --help prints this
    script's flags; else the flags given after this file, then credentials, then the server
    are checked, each failing in one line."""
    if {"-h", "--help"} & set(sys.argv[1:]):
        build_parser().print_help()
        raise SystemExit(0)
    flags = own_flags(sys.argv)
    if flags is not None:
        plan(flags)
    require_credentials()
    require_server()


def own_flags(argv: list[str]) -> list[str] | None:
    """The arguments after this file (optionally ::function) in `modal run`'s command line,
    or None where it is not there."""
    here = Path(__file__).resolve()
    return next((argv[i + 1:] for i, arg in enumerate(argv) if Path(arg.partition("::")[0]).resolve() == here), None)


if modal.is_local() and "modal.cli.run" in sys.modules:
    _before_modal_run()

if __name__ == "__main__":
    raise SystemExit(main())

"""Ctrl-C during a run: the stage it stopped, and worker processes that leave it to this one.

A run stopped by Ctrl-C keeps what finished: the runner catches the KeyboardInterrupt, marks
its Results partial and returns them, and the command line writes that report and exits
with EXIT_STATUS, as a shell reports a command stopped by SIGINT. flashinfer-bench's
Benchmark evaluates in worker processes; started inside `workers_ignore_ctrl_c`, they never
see the terminal's SIGINT (no traceback of theirs on the screen): this process stops them
itself when it closes the Benchmark.
"""

import signal
import threading
from contextlib import contextmanager
from multiprocessing.process import BaseProcess

EXIT_STATUS = 128 + signal.SIGINT  # 130


class Interrupted(KeyboardInterrupt):
    """A KeyboardInterrupt that knows the stage of the run it stopped (`stage`, in words)."""

    def __init__(self, stage: str):
        super().__init__(stage)
        self.stage = stage


@contextmanager
def stage(name: str):
    """Turns a KeyboardInterrupt inside into Interrupted(name) (an inner stage's is kept)."""
    try:
        yield
    except Interrupted:
        raise
    except KeyboardInterrupt:
        raise Interrupted(name) from None


@contextmanager
def workers_ignore_ctrl_c():
    """Processes started inside (multiprocessing, any start method) ignore SIGINT for good: it
    is ignored here while one starts, a disposition a child keeps through fork and exec (and
    a Python child then installs no KeyboardInterrupt handler). Outside a start, Ctrl-C
    reaches this process as usual."""
    start = BaseProcess.start

    def start_ignoring(process: BaseProcess) -> None:
        if threading.current_thread() is not threading.main_thread():
            return start(process)  # signal handlers belong to the main thread
        handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            start(process)
        finally:
            signal.signal(signal.SIGINT, handler)

    BaseProcess.start = start_ignoring
    try:
        yield
    finally:
        BaseProcess.start = start

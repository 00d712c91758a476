"""gdn_bench.interrupts: worker processes started inside workers_ignore_ctrl_c survive the
terminal's SIGINT (flashinfer-bench's evaluation workers, on a GPU), while this process still
gets its KeyboardInterrupt; a stage names where Ctrl-C stopped a run."""

import multiprocessing
import os
import signal
import time

import pytest

from gdn_bench.interrupts import Interrupted, stage, workers_ignore_ctrl_c


def test_a_worker_started_inside_ignores_sigint_and_this_process_does_not():
    handler = signal.getsignal(signal.SIGINT)
    with workers_ignore_ctrl_c():
        worker = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(60,), daemon=True)
        worker.start()
    try:
        assert signal.getsignal(signal.SIGINT) is handler  # restored at once
        os.kill(worker.pid, signal.SIGINT)  # ignored from its start: its disposition came with it
        worker.join(1.0)
        assert worker.is_alive()
    finally:
        worker.terminate()
        worker.join()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)


def test_the_innermost_stage_names_the_interruption():
    with pytest.raises(Interrupted) as e, stage("outer"), stage("inner"):
        raise KeyboardInterrupt
    assert e.value.stage == "inner" and isinstance(e.value, KeyboardInterrupt)

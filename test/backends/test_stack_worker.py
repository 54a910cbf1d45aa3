"""The simulated backend's worker thread: calls run in order; a call not started when the
worker shuts down is dropped (its ``drop`` runs instead), the running one finishes."""

from __future__ import annotations

import threading

import pytest

from erobs_bt.backends.stack.workers import Worker as _Worker


def test_calls_run_in_order_on_one_thread_and_shutdown_drops_the_queued_ones() -> None:
    worker = _Worker("test-worker")
    release = threading.Event()
    started = threading.Event()
    ran: list[str] = []
    dropped: list[str] = []
    threads: set[str] = set()

    def blocking() -> None:
        started.set()
        release.wait(10)
        ran.append("first")
        threads.add(threading.current_thread().name)

    worker.submit(blocking, lambda: dropped.append("first"))
    assert started.wait(10)
    worker.submit(lambda: ran.append("second"), lambda: dropped.append("second"))
    stopper = threading.Thread(target=worker.shutdown)
    stopper.start()
    release.set()
    stopper.join(10)
    assert not stopper.is_alive()
    assert ran == ["first"] and dropped == ["second"] and threads == {"test-worker"}
    with pytest.raises(RuntimeError, match="shut down"):
        worker.submit(lambda: None, lambda: None)
    worker.shutdown()  # idempotent


def test_a_worker_that_never_ran_shuts_down_at_once() -> None:
    worker = _Worker("idle")
    worker.shutdown()
    with pytest.raises(RuntimeError):
        worker.submit(lambda: None, lambda: None)

"""The motion stack's worker threads (planning, actions) and how a job is handed to one.

Threads: the tree's tick thread only ever receives futures. Planning runs in one worker
thread (``<name>-plan``), executions and single steps in another (``<name>-action``), and
the arm driver in its own (:mod:`erobs_bt.backends.stack`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from erobs_bt.backends.base import ErrorCode, MotionError, as_motion_error

_T = TypeVar("_T")

#: A call for a :class:`Worker` and what to call instead when it is dropped.
_Call = tuple[Callable[[], None], Callable[[], None]]


class Worker:
    """One thread that runs the calls submitted to it, in order (the stack's planning
    worker and its action worker).

    What a one-worker ``ThreadPoolExecutor`` does here, with less per call: a submit is a
    put on a ``SimpleQueue`` (no work item, no executor future, no idle semaphore), which is
    most of the hand-over of a replayed solution to its execution (BENCHMARKS.md, "Plan
    cache"). The thread starts with the first call.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, call: Callable[[], None], drop: Callable[[], None]) -> None:
        """Queue ``call``; ``drop`` is called instead when the worker shuts down before it starts.

        Raises:
            RuntimeError: the worker was shut down.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name}: the worker is shut down")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._queue.put((call, drop))

    def shutdown(self) -> None:
        """Start no more calls (the queued ones are dropped), wait for the running one. Idempotent."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._queue.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                break
            call, drop = item
            if self._closed:
                drop()
            else:
                call()
        while True:  # calls queued behind the shutdown
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                item[1]()


def submit(
    pool: Worker,
    job: Callable[[], _T],
    default: ErrorCode,
    *,
    label: str,
    cancellable: bool = False,
    into: Future[_T] | None = None,
) -> Future[_T]:
    """Run ``job`` on ``pool``; any exception becomes a :class:`MotionError` (``default`` code).

    ``cancellable``: the future stays pending until the job starts, so cancelling it
    before then skips the job (a dropped plan-ahead); otherwise it is running at once.
    A job the worker never starts (the stack closed first) fails its future with
    ``EXECUTION_FAILED: the <label> is closed`` (or is cancelled when still pending).
    ``into``: a pending future to resolve (one handed out before the job could be
    submitted), else a new one.

    Raises:
        RuntimeError: the worker was shut down.
    """
    future: Future[_T] = into if into is not None else Future()
    if not cancellable:
        future.set_running_or_notify_cancel()

    def run() -> None:
        if cancellable and not future.set_running_or_notify_cancel():
            return
        try:
            result = job()
        except BaseException as exc:
            future.set_exception(as_motion_error(exc, default=default))
        else:
            future.set_result(result)

    def drop() -> None:
        if not future.cancel() and not future.done():
            future.set_exception(MotionError(ErrorCode.EXECUTION_FAILED, f"the {label} is closed"))

    pool.submit(run, drop)
    return future


def wait(seconds: float) -> None:
    """Block this thread for ``seconds`` [s] (an injected fault's simulated delay); 0: not at all."""
    if seconds > 0.0:
        threading.Event().wait(seconds)

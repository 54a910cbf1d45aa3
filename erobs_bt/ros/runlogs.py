"""Run logs of the node: one JSON Lines file per goal, in the CLI's format.

``erobs-bt run`` writes every orchestrator event of a run to a
:class:`~erobs_bt.viz.runlog.RunLogWriter`; the node does the same for every goal it
accepts, into ``<folder>/<UTC start>_<goal id>_<script>.jsonl`` where ``<script>`` is the
script's ``run_name`` (EROBS scripts carry one; it is not part of the cache key) or, when
there is none, ``script-`` and the first 8 hex digits of the SHA-256 of its text. Read one
with ``erobs-bt log FILE``. Beside each log, the goal is recorded as a ROS 2 bag
(:class:`~erobs_bt.viz.mcap_record.McapRecorder`): ``<same name>.mcap`` with the node's
joint states, state, action feedback and status, and tree snapshots on the node's
resolved topic names, so ``ros2 bag play`` and Foxglove open a goal. Its tree snapshots
are the node's own (:meth:`NodeRunLogs.snapshot`: the bytes the node publishes, taken
whether or not a viewer watches); it is closed by the writer thread below after the
goal's final snapshot, so the result does not wait for the bag's summary.

:class:`NodeRunLogs` is an orchestrator listener: the node tells it the script text
before submitting (:meth:`expect`), and the first event of a new goal id opens that
goal's file, so the records emitted while the goal is being accepted (its ``RUNNING``
state, a rejected script) are in it too. The file is closed when the goal finishes. The
writer's replay records (tree, statuses, tool, previews, and joint states once
:meth:`NodeRunLogs.attach` is called) go into the goal's file as well: they
are written at once from the thread that reports them (they read the live tree), the
orchestrator's events through the writer thread below, so lines of the two kinds can be up to
one batch out of order in the file; readers order records by their ``t``.

Cost: a goal thread that encoded and flushed every record itself (about six per unit)
spent a sizeable part of a quick unit on its run log. The goal thread now only opens the
file (first record) and queues the records (O(1)); a writer thread encodes them and
flushes once per batch (every :data:`BATCH_PERIOD`), and :meth:`NodeRunLogs.finished`
waits until the goal's records are written and its file is closed, so a log is complete
when the goal's result is sent.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from erobs_bt.orchestrator import Feedback, OrchestratorListener, Result
from erobs_bt.viz.runlog import DEFAULT_JOINT_RATE, RunLogWriter

if TYPE_CHECKING:
    import py_trees

    from erobs_bt.backends.base import MotionBackend, Solution

#: Longest a record waits in the queue before the writer thread writes it [s].
BATCH_PERIOD = 0.1


class _BagSnapshot(NamedTuple):
    """The queue's "record this serialised tree snapshot (taken at ``stamp`` [s])" record."""

    data: bytes
    stamp: float


class _CloseBag:
    """The queue's "close this bag" record."""


_CLOSE_BAG = _CloseBag()

#: What the writer thread's queue holds after the writer (a run log or a bag) and goal id:
#: a record to write, ``None`` (close the run log), a bag snapshot, or :data:`_CLOSE_BAG`.
_Item = Mapping[str, Any] | _BagSnapshot | _CloseBag | None

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def script_label(full_json: str) -> str:
    """The ``<script>`` part of a run-log name: a safe ``run_name``, else ``script-<sha8>``.

    The text is parsed only when it mentions ``run_name`` (parsing a 1 MiB script on the
    goal thread to learn that it has none took tens of milliseconds)."""
    document = None
    if "run_name" in full_json:
        try:
            document = json.loads(full_json)
        except (ValueError, TypeError):
            document = None
    name = document.get("run_name") if isinstance(document, dict) else None
    if isinstance(name, str):
        safe = _UNSAFE.sub("_", name).strip("._")[:60]
        if safe:
            return safe
    digest = hashlib.sha256(full_json.encode("utf-8", errors="replace")).hexdigest()[:8]
    return f"script-{digest}"


class NodeRunLogs(OrchestratorListener):
    """Writes each goal's events to its own run log (see the module docstring).

    Thread-safe. A log that cannot be opened or written is reported through ``on_error``
    once and skipped: a run log never fails a goal.

    Args:
        folder: where the logs go (created when the first one is opened).
        on_error: receives a message when a log cannot be written.
        mcap: also record each goal to ``<log name>.mcap`` (joint states once
            :meth:`attach` gave the backend).
        snapshot_rate: [Hz] most tree snapshots per second in the MCAP (the node's
            ``snapshot_rate``).
    """

    def __init__(
        self, folder: Path, *, on_error: Any = None, mcap: bool = True, snapshot_rate: float = 10.0
    ) -> None:
        self.folder = folder
        self._on_error = on_error
        self._lock = threading.Lock()
        self._expected = ""
        self._writers: dict[str, RunLogWriter] = {}
        self._closed: set[str] = set()
        self.paths: dict[str, Path] = {}
        self._queue: deque[tuple[Any, str, _Item]] = deque()
        self._cond = threading.Condition()
        self._written = 0  # records (and closes) handled by the writer thread
        self._queued = 0
        self._stopping = False
        self._waiting = 0
        self._thread = threading.Thread(target=self._write, name="erobs_bt-run-logs", daemon=True)
        self._thread.start()
        self._backend: MotionBackend | None = None
        self._mcap = mcap
        self._snapshot_rate = snapshot_rate
        self._bags: dict[str, Any] = {}
        self._ending: dict[str, Any] = {}  # bags of finished goals, until their final snapshot
        self._resolve: Any = None
        self.bag_paths: dict[str, Path] = {}

    def expect(self, full_json: str) -> None:
        """The next new goal is for this script text (call before ``submit``)."""
        with self._lock:
            self._expected = full_json

    def path_of(self, goal_id: str) -> Path | None:
        """The log file of ``goal_id``, once it was opened."""
        with self._lock:
            return self.paths.get(goal_id)

    def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
        if not goal_id:
            return
        with self._lock:
            writer = self._writers.get(goal_id)
            if writer is None and goal_id not in self._closed:
                writer = self._open(goal_id)
        if writer is not None:
            self._put(writer, goal_id, dict(record))
        bag = self._bags.get(goal_id)
        if bag is not None:
            bag.event(goal_id, record)
        if record.get("event") == "rejected_script":
            self._end_rejected(goal_id)

    def _end_rejected(self, goal_id: str) -> None:
        """A rejected script's goal ends with its ``rejected_script`` record (the orchestrator
        reports no ``finished`` for it): close its log and its bag now, and wait for both (the
        bag would otherwise record joint states until the node stops)."""
        with self._lock:
            writer = self._writers.pop(goal_id, None)
            bag = self._bags.pop(goal_id, None)
        if writer is not None:
            self._wait_written(self._put(writer, goal_id, None))
        if bag is not None:
            self._wait_written(self._put(bag, goal_id, _CLOSE_BAG))

    def _put(self, writer: Any, goal_id: str, record: _Item) -> int:
        """Queue a record for ``writer`` (see :data:`_Item`); the count to wait for."""
        with self._cond:
            self._queue.append((writer, goal_id, record))
            self._queued += 1
            return self._queued

    def _write(self) -> None:
        while True:
            with self._cond:
                # Batches: woken by a waiter (finished, close) with records queued, else
                # every BATCH_PERIOD. (Not woken by a waiter alone: its records may be
                # written already, and it holds on until it runs again; waking on it spun
                # this loop, holding the GIL from the goal thread.)
                self._cond.wait_for(
                    lambda: self._stopping or (self._waiting > 0 and bool(self._queue)), BATCH_PERIOD
                )
                if not self._queue:
                    if self._stopping:
                        return
                    continue
                batch = list(self._queue)
                self._queue.clear()
            touched: dict[int, RunLogWriter] = {}
            for writer, goal_id, record in batch:
                if isinstance(record, _BagSnapshot):
                    writer.record_snapshot(record.data, record.stamp)
                elif record is _CLOSE_BAG:
                    writer.close()
                    if writer.error and self._on_error is not None:
                        self._on_error(f"ROS 2 bag {writer.path}: {writer.error}")
                elif record is None:
                    writer.close()
                    touched.pop(id(writer), None)
                    if writer.error and writer.error != "closed" and self._on_error is not None:
                        self._on_error(f"run log {writer.path}: {writer.error}")
                else:
                    writer.event(goal_id, record, flush=False)
                    touched[id(writer)] = writer
            for writer in touched.values():
                writer.flush()
            with self._cond:
                self._written += len(batch)
                self._cond.notify_all()

    def _wait_written(self, count: int, timeout: float = 10.0) -> None:
        with self._cond:
            self._waiting += 1
            self._cond.notify_all()
            try:
                self._cond.wait_for(lambda: self._written >= count, timeout)
            finally:
                self._waiting -= 1

    def _writer(self, goal_id: str) -> RunLogWriter | None:
        with self._lock:
            return self._writers.get(goal_id)

    def ticked(self, goal_id: str, root: py_trees.behaviour.Behaviour) -> None:
        writer = self._writer(goal_id)
        if writer is not None:
            writer.ticked(goal_id, root)
        bag = self._bags.get(goal_id)
        if bag is not None:
            bag.ticked(goal_id, root)

    def feedback(self, goal_id: str, feedback: Feedback) -> None:
        writer = self._writer(goal_id)
        if writer is not None:
            writer.feedback(goal_id, feedback)
        bag = self._bags.get(goal_id)
        if bag is not None:
            bag.feedback(goal_id, feedback)

    def preview(self, goal_id: str, solution: Solution) -> None:
        writer = self._writer(goal_id)
        if writer is not None:
            writer.preview(goal_id, solution)

    def joint_state(
        self, names: tuple[str, ...], positions: tuple[float, ...], velocities: tuple[float, ...]
    ) -> None:
        """A joint-state listener: passed on to the logs and bags of running goals (each log
        throttles its own ``joint_state`` records, see :class:`RunLogWriter`)."""
        with self._lock:
            writers = list(self._writers.values())
            bags = list(self._bags.values())
        for writer in writers:
            writer.joint_state(names, positions, velocities)
        for bag in bags:
            bag.joint_state(names, positions, velocities)

    def attach(
        self, backend: MotionBackend, *, rate: float = DEFAULT_JOINT_RATE, resolve: Any = None
    ) -> bool:
        """Record ``backend``'s joint states in the running goals' logs and bags (until :meth:`close`).

        Args:
            backend: the engine's motion backend (its ``joint_positions()`` also gives each
                log the arm state at its goal's start).
            rate: [Hz] joint-state notifications asked of the backend (the node's
                ``joint_state_rate``; the logs keep at most their own ``joint_rate``).
            resolve: the node's topic-name resolver (``~/execution_state`` →
                ``/<ns>/erobs_bt/execution_state``), so the bags use the node's real names.

        Returns:
            False when the backend has no joint-state stream (each log then still gets the
            arm state at its goal's start).
        """
        self._resolve = resolve
        self._backend = backend
        return bool(backend.add_joint_state_listener(self.joint_state, rate=rate))

    def bag_path_of(self, goal_id: str) -> Path | None:
        """The MCAP file of ``goal_id``, once it was opened."""
        with self._lock:
            return self.bag_paths.get(goal_id)

    def _open_bag(self, goal_id: str, path: Path) -> None:
        from erobs_bt.viz.mcap_record import McapRecorder, mcap_path_for, topic_names

        bag_path = mcap_path_for(path)
        try:
            bag = McapRecorder(
                bag_path,
                topics=topic_names(self._resolve),
                snapshot_rate=self._snapshot_rate,
                snapshots=False,
            )
        except (OSError, ValueError, ImportError) as exc:
            if self._on_error is not None:
                self._on_error(f"ROS 2 bag {bag_path}: {exc}")
            return
        self._bags[goal_id] = bag
        self.bag_paths[goal_id] = bag_path

    def _open(self, goal_id: str) -> RunLogWriter | None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        path = self.folder / f"{stamp}_{goal_id}_{script_label(self._expected)}.jsonl"
        self._closed.add(goal_id)  # one attempt per goal
        backend = self._backend
        try:
            writer = RunLogWriter(
                path, joint_positions=backend.joint_positions if backend is not None else None
            )
        except OSError as exc:
            if self._on_error is not None:
                self._on_error(f"run log {path}: {exc}")
            return None
        self._writers[goal_id] = writer
        self.paths[goal_id] = path
        # A bag whose goal got no final snapshot from the node (a goal not sent through
        # ROS) is closed when the next goal starts.
        for ended_id, ended in list(self._ending.items()):
            del self._ending[ended_id]
            self._put(ended, ended_id, _CLOSE_BAG)
        if self._mcap:
            self._open_bag(goal_id, path)
        return writer

    def finished(self, goal_id: str, result: Result) -> None:
        """The goal ended: write its remaining records, close its file (waits for both)."""
        with self._lock:
            writer = self._writers.pop(goal_id, None)
            bag = self._bags.pop(goal_id, None)
        if writer is not None:
            writer.finished(goal_id, result)  # the final statuses, read from the live tree now
            self._wait_written(self._put(writer, goal_id, None))
        if bag is not None:
            bag.finished(goal_id, result)  # its queued feedback
            with self._lock:
                self._ending[goal_id] = bag  # closed after the node's final snapshot

    def recording(self, goal_id: str) -> bool:
        """A bag of ``goal_id`` is open (it takes the node's tree snapshots)."""
        with self._lock:
            return goal_id in self._bags or goal_id in self._ending

    def snapshot(self, goal_id: str, data: bytes, stamp: float, *, final: bool) -> None:
        """Record a serialised ``TreeSnapshot`` the node sent (``stamp`` [s]) in the goal's
        bag, from the writer thread (O(1) here); after the ``final`` one that thread closes
        the bag (the goal's result waits for neither)."""
        with self._lock:
            bag = self._bags.get(goal_id) or self._ending.get(goal_id)
            if final:
                self._ending.pop(goal_id, None)
        if bag is None:
            return
        self._put(bag, goal_id, _BagSnapshot(data, stamp))
        if final and goal_id not in self._bags:
            self._put(bag, goal_id, _CLOSE_BAG)

    def close(self) -> None:
        """Stop following the backend's joint states, write what is queued, close every open
        log and stop the writer thread."""
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.remove_joint_state_listener(self.joint_state)
        with self._lock:
            writers, self._writers = list(self._writers.values()), {}
            bags, self._bags = [*self._bags.values(), *self._ending.values()], {}
            self._ending = {}
        for bag in bags:
            bag.close()
        with self._cond:
            count = self._queued
        for writer in writers:
            count = self._put(writer, "", None)
        self._wait_written(count)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(5.0)

"""Run logs of the node: one JSON Lines file per goal, in the CLI's format.

``erobs-bt run`` writes every orchestrator event of a run to a
:class:`~erobs_bt.viz.runlog.RunLogWriter`; the node does the same for every goal it
accepts, into ``<folder>/<UTC start>_<goal id>_<script>.jsonl`` where ``<script>`` is the
script's ``run_name`` (EROBS scripts carry one; it is not part of the cache key) or, when
there is none, ``script-`` and the first 8 hex digits of the SHA-256 of its text. Read one
with ``erobs-bt log FILE``. Beside each log, the goal is recorded as a ROS 2 bag
(:class:`~erobs_bt.ros.record.mcap_record.McapRecorder`): ``<same name>.mcap`` with the node's
joint states, state, action feedback and status, and tree snapshots on the node's
resolved topic names, so ``ros2 bag play`` and Foxglove open a goal. Its tree snapshots
are the node's own (:meth:`NodeRunLogs.snapshot`: the bytes the node publishes, taken
whether or not a viewer watches); it is closed by the writer thread below after the
goal's final snapshot, so the result does not wait for the bag's summary.

:class:`NodeRunLogs` is an orchestrator listener: the node tells it the script text
before submitting (:meth:`expect`), and the first event of a new goal id starts that
goal's log, so the records emitted while the goal is being accepted (its ``RUNNING``
state, a rejected script) are in it too. The log is closed when the goal finishes. The
writer's replay records (tree, statuses, tool, previews, and joint states once
:meth:`NodeRunLogs.attach` is called) go into the goal's file as well. Lines are in the
order they were queued, except that the tree's statuses are compared once per batch (see
below); readers order records by their ``t``.

A fault reset (``fault_reset``: when, the fault cleared, who asked) comes when no goal runs;
it is appended to the run log of the goal that faulted, after that goal's ``goal_finished``
record, so the log that tells of a fault also tells when and by whom it was cleared. A
simulation reset (``simulation_reset``: when, who asked, what the cell is now) is appended
the same way to the run log of the latest goal before it (its ``previous_goal_id``).

Memory. A node runs for months: what is kept per goal after it ended (the names of its run
log and bag, for :meth:`NodeRunLogs.path_of` and :meth:`NodeRunLogs.bag_path_of`) is kept
for the latest :data:`KEPT_GOALS` goals only; older goals' files stay on disk, their names
are forgotten. Everything else a goal needs goes when its log and its bag are closed.

Cost. A goal of quick units reports about ten records per unit, and every microsecond
the node spends on them holds the GIL away from the goal thread. So:

* each line is encoded where it happens, with orjson (under a microsecond; ``json.dumps``
  took ~15 µs here), and queued as bytes (a dict waiting in a queue is work for the
  garbage collector; bytes are not); the goal thread does no I/O;
* a writer thread writes the queued lines every :data:`BATCH_PERIOD`, one write and one
  flush per file, opens the files (the run log at its first line, the bag at its first
  call) and compares the tree's statuses against the last batch's (``tree_status``
  records at most once per batch, each behaviour's latest status, instead of one per tick);
* :meth:`NodeRunLogs.finished` writes what is left of the goal's run log itself, with
  its final statuses, and closes it, so the log is complete when the goal's result is
  sent and the goal's end waits for no other thread; the bag is the writer thread's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from erobs_bt.orchestrator import Feedback, OrchestratorListener, Result
from erobs_bt.ros.record.mcap_record import RECORDED_EVENTS
from erobs_bt.viz.runlog import DEFAULT_JOINT_RATE, RunLogWriter

if TYPE_CHECKING:
    import py_trees

    from erobs_bt.backends.base import MotionBackend, Solution
    from erobs_bt.ros.record.mcap_record import McapRecorder

_LOG = logging.getLogger(__name__)

#: Longest a record waits in the queue before the writer thread writes it [s].
BATCH_PERIOD = 0.1

#: Ended goals whose run-log and bag names :class:`NodeRunLogs` keeps (the latest ones;
#: ~0.75 KB each): a client can still ask for the files of the last this many goals.
KEPT_GOALS = 1000


class _BagCall(NamedTuple):
    """The queue's "call this method of the goal's bag" record. The writer thread makes
    the goal's :class:`~erobs_bt.ros.record.mcap_record.McapRecorder` at the goal's first one."""

    method: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


class _CloseBag:
    """The queue's "close the goal's bag" record."""


_CLOSE_BAG = _CloseBag()

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


def _keep_latest(kept: dict[str, Any], keep: int) -> None:
    """Drop the oldest entries of ``kept`` (insertion order) beyond the latest ``keep``."""
    while len(kept) > keep:
        del kept[next(iter(kept))]


class NodeRunLogs(OrchestratorListener):
    """Writes each goal's events to its own run log (see the module docstring).

    Why this class has more than 25 methods: it is an orchestrator listener (one method per event it
    records) and each goal's log and bag are written by one writer thread that the methods feed; the bag
    format itself is ros/record/.

    Thread-safe. A log that cannot be opened or written is reported through ``on_error``
    once and skipped: a run log never fails a goal.

    Args:
        folder: where the logs go (created when the first one is opened).
        on_error: receives a message when a log cannot be written.
        mcap: also record each goal to ``<log name>.mcap`` (joint states once
            :meth:`attach` gave the backend).
        snapshot_rate: [Hz] most tree snapshots per second in the MCAP (the node's
            ``snapshot_rate``).
        keep: how many of the latest goals' file names are kept (:data:`KEPT_GOALS`), >= 1.
    """

    def __init__(
        self,
        folder: Path,
        *,
        on_error: Any = None,
        mcap: bool = True,
        snapshot_rate: float = 10.0,
        keep: int = KEPT_GOALS,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep: at least 1 goal, got {keep}")
        self.folder = folder
        self._on_error = on_error
        self._keep = keep
        self._lock = threading.Lock()
        self._expected = ""
        self._writers: dict[str, RunLogWriter] = {}
        #: Run-log file of each of the latest ``keep`` goals, oldest first (a goal is here from
        #: its first record on: its log is opened once).
        self.paths: dict[str, Path] = {}
        # Appended to by any thread without a lock (deque.append is atomic); drained under
        # _drain_lock, in order, by the writer thread every BATCH_PERIOD, and by a thread
        # that ends a goal (so a goal's end waits for no other thread).
        self._queue: deque[tuple[RunLogWriter, str, bytes | None]] = deque()
        self._drain_lock = threading.Lock()
        # The bags' calls: a queue of their own, drained by the writer thread only (a goal's
        # end waits for its run log, not for its bag: that is closed after the final snapshot).
        self._bag_queue: deque[tuple[str, _BagCall | _CloseBag]] = deque()
        self._bag_lock = threading.Lock()
        self._stopping = threading.Event()
        self._backend: MotionBackend | None = None
        self._mcap = mcap
        self._snapshot_rate = snapshot_rate
        self._trees: dict[str, tuple[RunLogWriter, py_trees.behaviour.Behaviour]] = {}  # ticked goals
        self._bags: set[str] = set()  # goals whose bag records (until it is closed)
        self._ending: set[str] = set()  # of those, the finished ones, until their final snapshot
        self._open_bags: dict[str, McapRecorder | None] = {}  # the writer thread's (None: failed)
        self._resolve: Any = None
        #: ROS 2 bag of each of the latest ``keep`` goals, oldest first.
        self.bag_paths: dict[str, Path] = {}
        self._bag_files: dict[str, Path] = {}  # the bags not closed yet (the writer thread's to make)
        self._thread = threading.Thread(target=self._write, name="erobs_bt-run-logs", daemon=True)
        self._thread.start()

    def expect(self, full_json: str) -> None:
        """The next new goal is for this script text (call before ``submit``)."""
        with self._lock:
            self._expected = full_json

    def path_of(self, goal_id: str) -> Path | None:
        """The log file of ``goal_id``, once it was opened."""
        with self._lock:
            return self.paths.get(goal_id)

    # -- the orchestrator's callbacks: O(1) queue appends ----------------------------------
    def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
        if not goal_id:
            if record.get("event") == "fault_reset":
                self._append_after(str(record.get("faulted_goal_id", "")), record, "fault reset")
            elif record.get("event") == "simulation_reset":
                self._append_after(str(record.get("previous_goal_id", "")), record, "simulation reset")
            return
        writer = self._writers.get(goal_id)
        if writer is None:
            with self._lock:
                writer = self._writers.get(goal_id)
                if writer is None and goal_id not in self.paths:
                    writer = self._open(goal_id)
        kind = record.get("event")
        if writer is not None:
            writer.note(goal_id, record)  # as it happens; the line is written by the writer thread
            self._queue.append((writer, goal_id, writer.event_line(goal_id, record)))
        if goal_id in self._bags and kind in RECORDED_EVENTS:
            self._bag_call(goal_id, "event", goal_id, record, received=time.time())
        if kind == "rejected_script":
            self._end_rejected(goal_id)

    def ticked(self, goal_id: str, root: py_trees.behaviour.Behaviour) -> None:
        """The goal's first tick: from now on the writer thread compares its statuses at
        every batch (``tree_status`` records at most every :data:`BATCH_PERIOD`, each
        behaviour's latest status; the last ones when the goal finishes). The bag takes
        the node's own snapshots (:meth:`snapshot`), not the ticks."""
        if goal_id in self._trees:
            return
        writer = self._writers.get(goal_id)
        if writer is not None:
            with self._lock:
                self._trees[goal_id] = (writer, root)

    def feedback(self, goal_id: str, feedback: Feedback) -> None:
        """The tool record of the run log; the bag's feedback (the bag thins it)."""
        writer = self._writers.get(goal_id)
        if writer is not None:
            writer.feedback(goal_id, feedback)
        if goal_id in self._bags:
            self._bag_call(goal_id, "feedback", goal_id, feedback, received=time.time())

    def preview(self, goal_id: str, solution: Solution) -> None:
        writer = self._writers.get(goal_id)
        if writer is not None:
            writer.preview(goal_id, solution)

    def joint_state(
        self, names: tuple[str, ...], positions: tuple[float, ...], velocities: tuple[float, ...]
    ) -> None:
        """A joint-state listener: passed on to the logs and bags of running goals (each log
        throttles its own ``joint_state`` records, see :class:`RunLogWriter`)."""
        with self._lock:
            writers = list(self._writers.values())
            bags = list(self._bags)
        for writer in writers:
            writer.joint_state(names, positions, velocities)
        if bags:
            received = time.time()
            for goal_id in bags:
                self._bag_call(goal_id, "joint_state", names, positions, velocities, received=received)

    def finished(self, goal_id: str, result: Result) -> None:
        """The goal ended: write its remaining records and close its file, in this thread
        (so the log is complete when the goal's result is sent)."""
        with self._lock:
            writer = self._writers.pop(goal_id, None)
            tree = self._trees.pop(goal_id, None)
            bagged = goal_id in self._bags
            if bagged:
                self._ending.add(goal_id)  # closed after the node's final snapshot
        if writer is not None:
            with self._drain_lock:
                if tree is not None:
                    writer.ticked(goal_id, tree[1])  # the tree, if the writer thread did not write it yet
                writer.finished(goal_id, result)  # the final statuses, read from the live tree now
            self._queue.append((writer, goal_id, None))
        if bagged:
            self._bag_call(goal_id, "finished", goal_id, result)  # its queued feedback
        self._drain()

    def _append_after(self, faulted: str, record: Mapping[str, Any], what: str) -> None:
        """A goal-less record (a fault reset, a simulation reset) appended to the run log of
        the goal it follows (``faulted``: the goal that faulted, the latest goal), after its
        last record; nothing when that goal has no log."""
        line = RunLogWriter.event_line("", record)
        with self._lock:
            writer = self._writers.get(faulted)
            path = self.paths.get(faulted)
        if writer is not None:  # its log is still open (the reset came before its end was written)
            self._queue.append((writer, "", line))
            return
        if path is None:
            return
        with self._drain_lock:  # after the goal's own lines (its end wrote and closed them)
            try:
                if not path.exists():
                    return  # its log could not be written (reported then)
                with path.open("ab") as file:
                    file.write(line)
            except OSError as exc:
                if self._on_error is not None:
                    self._on_error(f"run log {path}: {what} not recorded: {exc}")

    def _end_rejected(self, goal_id: str) -> None:
        """A rejected script's goal ends with its ``rejected_script`` record (the orchestrator
        reports no ``finished`` for it): close its log and its bag now (the bag would
        otherwise record joint states until the node stops)."""
        with self._lock:
            writer = self._writers.pop(goal_id, None)
            self._trees.pop(goal_id, None)
            bagged = goal_id in self._bags
            self._bags.discard(goal_id)
        if writer is not None:
            self._queue.append((writer, goal_id, None))
        if bagged:
            self._bag_queue.append((goal_id, _CLOSE_BAG))
        self._drain()
        self._drain_bags()

    # -- the node's snapshots ---------------------------------------------------------------
    def recording(self, goal_id: str) -> bool:
        """A bag of ``goal_id`` is open (it takes the node's tree snapshots)."""
        return goal_id in self._bags

    def snapshot(self, goal_id: str, data: bytes, stamp: float, *, final: bool) -> None:
        """Record a serialised ``TreeSnapshot`` the node sent (``stamp`` [s]) in the goal's
        bag, from the writer thread (O(1) here); after the ``final`` one of a finished goal
        that thread closes the bag (the goal's result waits for neither)."""
        with self._lock:
            if goal_id not in self._bags:
                return
            closing = final and goal_id in self._ending
            if final:
                self._ending.discard(goal_id)
            if closing:
                self._bags.discard(goal_id)
        self._bag_call(goal_id, "record_snapshot", data, stamp)
        if closing:
            self._bag_queue.append((goal_id, _CLOSE_BAG))

    def scene(self, goal_id: str, message: Any, stamp: float) -> None:
        """Record a ``moveit_msgs/PlanningScene`` the node published on
        ``monitored_planning_scene`` (``stamp`` [s]) in the goal's bag (O(1) here)."""
        with self._lock:
            if goal_id not in self._bags:
                return
        self._bag_call(goal_id, "record_scene", message, stamp)

    # -- opening ------------------------------------------------------------------------------
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

    def _open(self, goal_id: str) -> RunLogWriter:
        """The first record of ``goal_id``: its run log (the file is opened by its first line,
        on the writer thread) and the name of its bag (made there too). Lock held."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        path = self.folder / f"{stamp}_{goal_id}_{script_label(self._expected)}.jsonl"
        backend = self._backend
        writer = RunLogWriter(
            path,
            joint_positions=backend.joint_positions if backend is not None else None,
            sink=self._sink,
            lazy=True,
        )
        self._writers[goal_id] = writer
        self.paths[goal_id] = path  # one attempt per goal
        _keep_latest(self.paths, self._keep)
        # A bag whose goal got no final snapshot from the node (a goal not sent through
        # ROS) is closed when the next goal starts.
        for ended in self._ending:
            self._bags.discard(ended)
            self._bag_queue.append((ended, _CLOSE_BAG))
        self._ending.clear()
        if self._mcap:
            from erobs_bt.viz.bag import mcap_path_for

            self.bag_paths[goal_id] = self._bag_files[goal_id] = mcap_path_for(path)
            _keep_latest(self.bag_paths, self._keep)
            self._bags.add(goal_id)
        return writer

    def _make_bag(self, goal_id: str) -> McapRecorder | None:
        """The goal's bag, made on the writer thread at its first call (None: cannot be made)."""
        from erobs_bt.ros.record.mcap_record import McapRecorder, topic_names

        with self._lock:
            bag_path = self._bag_files.get(goal_id)
        if bag_path is None:
            return None
        try:
            return McapRecorder(
                bag_path,
                topics=topic_names(self._resolve),
                snapshot_rate=self._snapshot_rate,
                snapshots=False,
            )
        except (OSError, ValueError, ImportError) as exc:
            if self._on_error is not None:
                self._on_error(f"ROS 2 bag {bag_path}: {exc}")
            return None

    # -- the queue --------------------------------------------------------------------------
    def _sink(self, writer: RunLogWriter, line: bytes) -> None:
        """A writer's replay-record line (from the goal's or the controller's thread): queued."""
        self._queue.append((writer, "", line))

    def _bag_call(self, goal_id: str, method: str, *args: Any, **kwargs: Any) -> None:
        self._bag_queue.append((goal_id, _BagCall(method, args, kwargs)))

    def _write(self) -> None:
        """The writer thread: every :data:`BATCH_PERIOD`, write what is queued."""
        while not self._stopping.wait(BATCH_PERIOD):
            self._drain()
            self._drain_bags()
        self._drain()
        self._drain_bags()

    def _drain(self) -> None:
        """Write everything queued so far, in order, then flush each file written to."""
        queue = self._queue
        with self._drain_lock:
            with self._lock:
                trees = list(self._trees.items())
            for goal_id, (tracked, root) in trees:  # the statuses since the last batch
                tracked.ticked(goal_id, root)
            lines: dict[RunLogWriter, list[bytes]] = {}
            while queue:
                writer, goal_id, record = queue.popleft()
                try:
                    if isinstance(record, bytes):
                        lines.setdefault(writer, []).append(record)
                    elif record is None:
                        self._write_lines(writer, lines.pop(writer, []))
                        writer.close()
                        if writer.error and writer.error != "closed" and self._on_error is not None:
                            self._on_error(f"run log {writer.path}: {writer.error}")
                except Exception:  # a record that cannot be written never stops the others
                    _LOG.exception("run log of %s", goal_id)
            for writer, chunk in lines.items():
                self._write_lines(writer, chunk)

    @staticmethod
    def _write_lines(writer: RunLogWriter, chunk: list[bytes]) -> None:
        if chunk:
            writer.write_bytes(b"".join(chunk))  # one write and one flush per file and batch

    def _drain_bags(self) -> None:
        """Make every call queued for the bags, in order."""
        queue = self._bag_queue
        with self._bag_lock:
            while queue:
                goal_id, record = queue.popleft()
                try:
                    self._to_bag(goal_id, record)
                except Exception:  # a call that fails never stops the others
                    _LOG.exception("ROS 2 bag of %s", goal_id)

    def _to_bag(self, goal_id: str, record: _BagCall | _CloseBag) -> None:
        """A bag call of ``goal_id`` (bag lock held). A goal's file is known (``_bag_files``)
        from its start until its bag is closed; a call after that is dropped."""
        with self._lock:
            named = goal_id in self._bag_files
        if record is _CLOSE_BAG:  # (a goal's bag is made even when nothing came for it)
            bag = self._open_bags.pop(goal_id) if goal_id in self._open_bags else None
            if bag is None and named:
                bag = self._make_bag(goal_id)
            with self._lock:
                self._bag_files.pop(goal_id, None)
            if bag is not None:
                bag.close()
                if bag.error and self._on_error is not None:
                    self._on_error(f"ROS 2 bag {bag.path}: {bag.error}")
            return
        if goal_id not in self._open_bags:
            if not named:
                return  # its bag is closed
            self._open_bags[goal_id] = self._make_bag(goal_id)
        bag = self._open_bags[goal_id]
        if bag is not None and isinstance(record, _BagCall):
            getattr(bag, record.method)(*record.args, **record.kwargs)

    def close(self) -> None:
        """Stop following the backend's joint states, write what is queued, close every open
        log and bag and stop the writer thread."""
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.remove_joint_state_listener(self.joint_state)
        with self._lock:
            writers, self._writers = list(self._writers.values()), {}
            self._trees = {}
            bags, self._bags = list(self._bags), set()
            self._ending = set()
        for writer in writers:
            self._queue.append((writer, "", None))
        for goal_id in bags:
            self._bag_queue.append((goal_id, _CLOSE_BAG))
        self._stopping.set()
        self._thread.join(5.0)
        self._drain()
        self._drain_bags()
        with self._bag_lock:
            for goal_id in list(self._open_bags):  # bags closed before their goal's last call
                self._to_bag(goal_id, _CLOSE_BAG)

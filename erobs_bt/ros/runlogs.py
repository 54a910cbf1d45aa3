"""Run logs of the node: one JSON Lines file per goal, in the CLI's format.

``erobs-bt run`` writes every orchestrator event of a run to a
:class:`~erobs_bt.viz.runlog.RunLogWriter`; the node does the same for every goal it
accepts, into ``<folder>/<UTC start>_<goal id>_<script>.jsonl`` where ``<script>`` is the
script's ``run_name`` (EROBS scripts carry one; it is not part of the cache key) or, when
there is none, ``script-`` and the first 8 hex digits of the SHA-256 of its text. Read one
with ``erobs-bt log FILE``. Beside each log, the goal is recorded as a ROS 2 bag
(:class:`~erobs_bt.viz.mcap_record.McapRecorder`): ``<same name>.mcap`` with the node's
joint states, state, action feedback and status, and tree snapshots on the node's
resolved topic names, so ``ros2 bag play`` and Foxglove open a goal.

:class:`NodeRunLogs` is an orchestrator listener: the node tells it the script text
before submitting (:meth:`expect`), and the first event of a new goal id opens that
goal's file, so the records emitted while the goal is being accepted (its ``RUNNING``
state, a rejected script) are in it too. The file is closed when the goal finishes.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from erobs_bt.orchestrator import Feedback, OrchestratorListener, Result
from erobs_bt.viz.runlog import RunLogWriter

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def script_label(full_json: str) -> str:
    """The ``<script>`` part of a run-log name: a safe ``run_name``, else ``script-<sha8>``."""
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
        self._mcap = mcap
        self._snapshot_rate = snapshot_rate
        self._bags: dict[str, Any] = {}
        self._resolve: Any = None
        self._backend: Any = None
        self.bag_paths: dict[str, Path] = {}

    def attach(self, backend: Any, *, rate: float, resolve: Any = None) -> None:
        """Record ``backend``'s joint states into the open goals' MCAP files.

        Args:
            backend: the engine's motion backend.
            rate: [Hz] joint states per second while moving (the node's ``joint_state_rate``).
            resolve: the node's topic-name resolver (``~/execution_state`` →
                ``/<ns>/erobs_bt/execution_state``), so the bags use the node's real names.
        """
        self._resolve = resolve
        if self._mcap and backend.add_joint_state_listener(self._joint_state, rate=rate):
            self._backend = backend

    def _joint_state(self, names: Any, positions: Any, velocities: Any) -> None:
        with self._lock:
            bags = list(self._bags.values())
        for bag in bags:
            bag.joint_state(names, positions, velocities)

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
            writer.event(goal_id, record)
        bag = self._bags.get(goal_id)
        if bag is not None:
            bag.event(goal_id, record)

    def feedback(self, goal_id: str, feedback: Feedback) -> None:
        bag = self._bags.get(goal_id)
        if bag is not None:
            bag.feedback(goal_id, feedback)

    def ticked(self, goal_id: str, root: Any) -> None:
        bag = self._bags.get(goal_id)
        if bag is not None:
            bag.ticked(goal_id, root)

    def bag_path_of(self, goal_id: str) -> Path | None:
        """The MCAP file of ``goal_id``, once it was opened."""
        with self._lock:
            return self.bag_paths.get(goal_id)

    def _open_bag(self, goal_id: str, path: Path) -> None:
        from erobs_bt.viz.mcap_record import McapRecorder, mcap_path_for, topic_names

        bag_path = mcap_path_for(path)
        try:
            bag = McapRecorder(bag_path, topics=topic_names(self._resolve), snapshot_rate=self._snapshot_rate)
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
        try:
            writer = RunLogWriter(path)
        except OSError as exc:
            if self._on_error is not None:
                self._on_error(f"run log {path}: {exc}")
            return None
        self._writers[goal_id] = writer
        self.paths[goal_id] = path
        if self._mcap:
            self._open_bag(goal_id, path)
        return writer

    def finished(self, goal_id: str, result: Result) -> None:
        with self._lock:
            writer = self._writers.pop(goal_id, None)
            bag = self._bags.pop(goal_id, None)
        if writer is not None:
            writer.close()
            if writer.error and writer.error != "closed" and self._on_error is not None:
                self._on_error(f"run log {writer.path}: {writer.error}")
        if bag is not None:
            bag.finished(goal_id, result)
            bag.close()
            if bag.error and self._on_error is not None:
                self._on_error(f"ROS 2 bag {bag.path}: {bag.error}")

    def close(self) -> None:
        """Close every open log and bag, and stop recording joint states."""
        if self._backend is not None:
            self._backend.remove_joint_state_listener(self._joint_state)
            self._backend = None
        with self._lock:
            writers, self._writers = list(self._writers.values()), {}
            bags, self._bags = list(self._bags.values()), {}
        for writer in writers:
            writer.close()
        for bag in bags:
            bag.close()

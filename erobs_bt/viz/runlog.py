"""The run log: every orchestrator event as one JSON line, and a readable timeline.

The orchestrator already reports everything worth keeping through
:meth:`~erobs_bt.orchestrator.OrchestratorListener.event` — state changes, goals
starting and finishing, unit starts and completions, cache decisions, the start and
end of each plan/execute/replay/run phase with its duration, errors with their prefix
(``PLANNING_FAILED:``, ``TIMEOUT:`` …). :class:`RunLogWriter` appends those records to
a JSON Lines file, flushed after each line, so the log survives a crash up to the last
event and can be followed with ``tail -f``. :func:`timeline` turns a log back into a
table with times relative to the first record, per-unit durations and errors in red.

A record is ``{"t": epoch s, "goal_id": "goal-3", "event": "plan_finished", ...fields}``;
the fields are those of the event (``unit`` is 1-based, ``seconds`` in seconds).

Besides the orchestrator's events, the writer keeps what a replay of the run needs (the
history page of the operator's console, :mod:`erobs_bt.viz.history`), in records of its own
(:data:`REPLAY_EVENTS`; logs without them still read, they just replay no motion or tree):

* ``tree`` — once per goal, at its first tick: the compiled tree, pre-order, as
  ``"nodes": [[parent index (-1 for the root), name, behaviour type], ...]``;
* ``tree_status`` — whenever statuses changed during a tick: ``"changes": [[node index,
  status], ...]`` (py_trees statuses; the first one lists every node that is not INVALID).
  Only the subtrees of the units the tick touched are compared, so a record costs
  O(unit size), not O(script size);
* ``joint_state`` — the arm state while a goal runs: ``"name": [UR joint names],
  "position": [rad]``, at most ``joint_rate`` per second while moving, plus the state at
  rest after each motion and one at the goal's start (:meth:`RunLogWriter.follow_joint_states`);
* ``tool`` — the attached gripper when it changes: ``"gripper": name``;
* ``trajectory`` — a previewed unit's solution (dry run): ``"unit"`` and ``"trajectory"``,
  the console's trajectory JSON (:func:`erobs_bt.viz.model.trajectory_json`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import orjson
from rich.table import Table
from rich.text import Text

from erobs_bt.orchestrator import Feedback, OrchestratorListener, Result
from erobs_bt.tree.compile import collector_paused

if TYPE_CHECKING:
    import py_trees

    from erobs_bt.backends.base import MotionBackend, Solution

_LOG = logging.getLogger(__name__)

#: The record kinds the writer adds for replays (see the module docstring).
REPLAY_EVENTS = frozenset({"tree", "tree_status", "joint_state", "tool", "trajectory"})
#: Default most ``joint_state`` records per second while the arm moves [Hz].
DEFAULT_JOINT_RATE = 20.0
#: A joint state closer than this to the last one written is not written again [rad].
_JOINT_EPSILON = 1e-6
#: orjson's options for a run-log line: numpy numbers as numbers, keys of any type as
#: strings, the line's newline.
_LINE_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE


def _line_bytes(line: Mapping[str, Any]) -> bytes:
    """``line`` as one JSON line, UTF-8 (values JSON has no type for as their ``str``).

    orjson encodes a record in well under a microsecond where ``json.dumps`` took ~15 µs
    here, and a goal writes several records per unit. What orjson refuses (a lone surrogate
    from a script's ``\\ud800`` escape, an integer beyond 64 bits) goes through the
    standard encoder, the surrogate written as its backslash escape, so such a line still
    reads back as what was logged. (NaN and infinities become ``null``: JSON has no such numbers.)
    """
    try:
        return orjson.dumps(line, default=str, option=_LINE_OPTIONS)
    except orjson.JSONEncodeError:
        text = json.dumps(line, default=str, ensure_ascii=False) + "\n"
        return text.encode("utf-8", "backslashreplace")


#: Where a writer made with a ``sink`` hands the lines of its replay records: called with
#: the writer and the encoded line; the sink's owner later writes it with
#: :meth:`RunLogWriter.write_bytes`.
LineSink = Callable[["RunLogWriter", bytes], None]


def default_log_dir() -> Path:
    """Where run logs go by default: ``$EROBS_BT_LOG_DIR``, else ``~/.local/state/erobs_bt/runs``."""
    configured = os.environ.get("EROBS_BT_LOG_DIR")
    return Path(configured) if configured else Path.home() / ".local" / "state" / "erobs_bt" / "runs"


class _TreeTrack:
    """The compiled tree of one goal as the writer last recorded it (for status diffs)."""

    def __init__(self, root: py_trees.behaviour.Behaviour) -> None:
        self.root = root
        self.nodes: list[py_trees.behaviour.Behaviour] = []
        self.parents: list[int] = []
        self.child_start: list[int] = []  # pre-order index of each child of the root
        self.unit_child: dict[int, int] = {}  # 1-based unit number -> child of the root
        stack: list[tuple[py_trees.behaviour.Behaviour, int]] = [(root, -1)]
        while stack:
            node, parent = stack.pop()
            index = len(self.nodes)
            self.nodes.append(node)
            self.parents.append(parent)
            if parent == 0:
                self.child_start.append(index)
            stack.extend((child, index) for child in reversed(node.children))
        for position, index in enumerate(self.child_start):
            name = self.nodes[index].name
            if name.startswith("unit ") and ":" in name:
                number = name[5 : name.index(":")]
                if number.isdigit():
                    self.unit_child[int(number)] = position
        self.statuses = ["INVALID"] * len(self.nodes)
        self.hot: set[int] = set(range(len(self.child_start)))  # the first diff sees everything

    def structure(self) -> list[list[Any]]:
        return [
            [parent, node.name, type(node).__name__]
            for node, parent in zip(self.nodes, self.parents, strict=True)
        ]

    def touch_unit(self, unit: int) -> None:
        """Mark the unit and the boundaries on either side of it for the next diff."""
        position = self.unit_child.get(unit)
        if position is not None:
            self.hot.update(
                p for p in (position - 1, position, position + 1) if 0 <= p < len(self.child_start)
            )

    def changes(self) -> list[list[Any]]:
        """``[[index, status], ...]`` of the root and the hot subtrees since the last call."""
        out: list[list[Any]] = []
        spans = [(-1, 0, 1)]
        for position in sorted(self.hot):
            first = self.child_start[position]
            last = self.child_start[position + 1] if position + 1 < len(self.child_start) else len(self.nodes)
            spans.append((position, first, last))
        still_running: set[int] = set()
        for position, first, last in spans:
            for index in range(first, last):
                status = self.nodes[index].status.value
                if status != self.statuses[index]:
                    self.statuses[index] = status
                    out.append([index, status])
            if position >= 0 and self.statuses[first] == "RUNNING":
                still_running.add(position)
        self.hot = still_running
        return out


class RunLogWriter(OrchestratorListener):
    """An orchestrator listener that appends every event record to ``path`` as JSON Lines.

    Thread-safe; each line is written whole and flushed. Writing never raises into the
    orchestrator (a viewer must not fail a goal): after an ``OSError`` (disk full, file
    removed) or :meth:`close`, records are dropped and :attr:`error` says why.

    Text that UTF-8 cannot encode (a lone surrogate from a script's ``\\ud800`` escape) is
    written as its backslash escape, so such a script is logged like any other.

    With ``replay`` (the default) it also writes the records of :data:`REPLAY_EVENTS` (the
    module docstring): the tree and its status changes from :meth:`ticked`, the tool from
    :meth:`feedback`, previews from :meth:`preview`, and joint states once
    :meth:`follow_joint_states` connected it to a backend.

    Args:
        path: the log file; created with its parent directory, appended to when it
            exists (several goals and runs share one log; every line names its goal).
        replay: write the replay records.
        joint_rate: most ``joint_state`` records per second while moving [Hz], > 0.
        joint_positions: gives the arm state [rad] for the ``joint_state`` record at each
            goal's start (:meth:`follow_joint_states` sets the backend's).
        sink: when given, the replay records (the tree, statuses, tool, previews, joint
            states: what :meth:`ticked`, :meth:`feedback`, :meth:`preview`,
            :meth:`finished` and :meth:`joint_state` write, from the goal's or the
            controller's thread) are encoded there and handed to it instead of being
            written; its owner writes them later with :meth:`write_bytes` (the node's
            writer thread, :class:`~erobs_bt.ros.node.runlogs.NodeRunLogs`). :meth:`event`
            always writes its line itself, on the caller's thread.
        lazy: create the folder and open the file at the first line written (on the
            writing thread), not here; a file that cannot be opened then disables the log
            (:attr:`error` says why) instead of raising.

    Raises:
        OSError: the file cannot be opened (not with ``lazy``).
        ValueError: ``joint_rate`` is not positive.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        replay: bool = True,
        joint_rate: float = DEFAULT_JOINT_RATE,
        joint_positions: Callable[[], Sequence[float] | None] | None = None,
        sink: LineSink | None = None,
        lazy: bool = False,
    ) -> None:
        if not joint_rate > 0:
            raise ValueError(f"joint_rate must be > 0 Hz (got {joint_rate})")
        self.path = Path(path)
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._unopened = lazy  # the file is still to be opened by the first line
        if not lazy:
            self._file = self._open_file()
        self.error = ""
        self.lines = 0
        self.replay = replay
        self._joint_period = 1.0 / joint_rate
        self._goal = ""
        self._unit = 0
        self._trees: dict[str, _TreeTrack] = {}
        self._gripper = ""
        self._joints_written: tuple[float, ...] = ()
        self._joints_at = 0.0
        self._joints_moving = False
        self._joint_positions = joint_positions
        self._followed: MotionBackend | None = None
        self._sink = sink

    def event(self, goal_id: str, record: Mapping[str, Any], *, flush: bool = True) -> None:
        """Append ``{"t", "goal_id", "event", ...}`` as one line (and flush the file,
        unless ``flush`` is false: a writer of many lines calls :meth:`flush` after them),
        then :meth:`note` it."""
        self.write_bytes(self.event_line(goal_id, record), flush=flush)
        self.note(goal_id, record)

    @staticmethod
    def event_line(goal_id: str, record: Mapping[str, Any]) -> bytes:
        """The line of an orchestrator event record, encoded (what :meth:`event` writes;
        a caller that :meth:`note` s records as they happen and writes their lines later,
        from another thread, with :meth:`write_bytes`)."""
        return _line_bytes({"t": None, "goal_id": goal_id, **record})

    def note(self, goal_id: str, record: Mapping[str, Any]) -> None:
        """What the replay records need of an orchestrator event: a goal's start (the arm
        state then, as a ``joint_state`` record) and each unit's start (its subtree is
        compared at the next status check). Call in event order, as the events happen."""
        if not self.replay or not goal_id:
            return
        event = record.get("event")
        if event == "goal_started":
            with self._lock:
                self._goal = goal_id
                self._gripper = ""
                self._joints_written = ()
            positions = self._joint_positions() if self._joint_positions is not None else None
            if positions is not None:
                from erobs_bt.script.model import JOINT_NAMES

                self.joint_state(JOINT_NAMES, tuple(positions), (0.0,) * len(positions))
        elif event == "unit_started":
            unit = record.get("unit")
            if isinstance(unit, int):
                with self._lock:
                    self._unit = unit
                    track = self._trees.get(goal_id)
                    if track is not None:
                        track.touch_unit(unit)

    def _write(self, line: dict[str, Any]) -> None:
        """A replay record's line: to the sink when there is one, else written now."""
        if self._sink is not None:
            self._sink(self, _line_bytes(line))
        else:
            self.write_line(line)

    def _open_file(self) -> IO[bytes]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return self.path.open("ab")

    def write_line(self, line: Mapping[str, Any], *, flush: bool = True) -> None:
        """Encode ``line`` as one JSON line and append it (and flush, unless ``flush`` is
        false). Dropped after :meth:`close` or a write error (:attr:`error` says which)."""
        self.write_bytes(_line_bytes(line), flush=flush)

    def write_bytes(self, data: bytes, *, flush: bool = True) -> None:
        """Append lines already encoded (whole lines, each ending in a newline), as
        :meth:`write_line` does."""
        with self._lock:
            if self._unopened:
                self._unopened = False
                try:
                    self._file = self._open_file()
                except OSError as exc:
                    self.error = f"{self.path}: {exc}"
                    _LOG.warning("run log disabled: %s", self.error)
            if self._file is None:
                return
            try:
                self._file.write(data)
                if flush:
                    self._file.flush()
                self.lines += data.count(b"\n")
            except OSError as exc:
                self.error = f"{self.path}: {exc}"
                _LOG.warning("run log disabled: %s", self.error)
                self._close_locked()

    def flush(self) -> None:
        """Flush the lines written so far to the file."""
        with self._lock:
            if self._file is None:
                return
            try:
                self._file.flush()
            except OSError as exc:
                self.error = f"{self.path}: {exc}"
                _LOG.warning("run log disabled: %s", self.error)
                self._close_locked()

    # -- replay records ---------------------------------------------------------------
    def ticked(self, goal_id: str, root: py_trees.behaviour.Behaviour) -> None:
        """Write the tree at a goal's first tick, then the statuses that changed since the
        last call (a caller that does not call it after every tick, as the node's writer
        thread, gets each behaviour's latest status)."""
        if not self.replay:
            return
        with self._lock:
            track = self._trees.get(goal_id)
            fresh = track is None or track.root is not root
            if fresh:
                track = self._trees[goal_id] = _TreeTrack(root)
            assert track is not None
            changes = track.changes()
        now = time.time()
        if fresh:
            # A list per behaviour, freed once encoded: a collection meanwhile would walk
            # the whole heap for nothing.
            with collector_paused():
                self._write({"t": now, "goal_id": goal_id, "event": "tree", "nodes": track.structure()})
        if changes:
            self._write({"t": now, "goal_id": goal_id, "event": "tree_status", "changes": changes})

    def feedback(self, goal_id: str, feedback: Feedback) -> None:
        """Write a ``tool`` record when the attached gripper changed."""
        # An unlocked look first (the gripper rarely changes; several feedbacks a unit).
        if not self.replay or not goal_id or feedback.current_gripper == self._gripper:
            return
        with self._lock:
            if feedback.current_gripper == self._gripper:
                return
            self._gripper = feedback.current_gripper
        self._write(
            {"t": time.time(), "goal_id": goal_id, "event": "tool", "gripper": feedback.current_gripper}
        )

    def preview(self, goal_id: str, solution: Solution) -> None:
        """Write a previewed solution as a ``trajectory`` record."""
        if not self.replay:
            return
        from erobs_bt.viz.model import trajectory_json

        unit = self._unit
        record = {"t": time.time(), "goal_id": goal_id, "event": "trajectory", "unit": unit}
        self._write({**record, "trajectory": trajectory_json(solution, unit=unit)})

    def finished(self, goal_id: str, result: Result) -> None:
        """Write the statuses the end of the goal changed; the goal's joint states end."""
        if not self.replay:
            return
        with self._lock:
            track = self._trees.pop(goal_id, None)
            changes = track.changes() if track is not None else []
            if self._goal == goal_id:
                self._goal = ""
        if changes:
            self._write({"t": time.time(), "goal_id": goal_id, "event": "tree_status", "changes": changes})

    def joint_state(
        self, names: Sequence[str], positions: Sequence[float], velocities: Sequence[float] = ()
    ) -> None:
        """A :data:`~erobs_bt.backends.base.JointStateListener`: write ``joint_state`` records.

        Only while a goal runs; at most ``joint_rate`` per second while moving, always the
        first sample at rest after a motion, never a sample equal to the last one written.
        """
        now = time.time()
        moving = any(abs(v) > 1e-9 for v in velocities)
        values = tuple(round(float(v), 6) for v in positions)
        with self._lock:
            goal = self._goal
            if not goal or not self.replay:
                return
            last = self._joints_written
            same = len(last) == len(values) and all(
                abs(a - b) < _JOINT_EPSILON for a, b in zip(last, values, strict=True)
            )
            stopped = self._joints_moving and not moving
            due = now - self._joints_at >= 0.99 * self._joint_period  # 1 % slack: clock jitter
            self._joints_moving = moving
            if same or not (due or stopped or not last):
                return
            self._joints_written, self._joints_at = values, now
        self._write(
            {"t": now, "goal_id": goal, "event": "joint_state", "name": list(names), "position": list(values)}
        )

    def follow_joint_states(self, backend: MotionBackend, *, rate: float | None = None) -> bool:
        """Record ``backend``'s joint states while goals run (until :meth:`close`).

        Args:
            backend: its joint-state stream is followed, and its ``joint_positions()`` gives
                the state at each goal's start.
            rate: notification rate asked of the backend [Hz] (default: ``joint_rate``).

        Returns:
            False when the backend has no joint-state stream (then only the state at each
            goal's start is recorded).
        """
        self._joint_positions = backend.joint_positions
        self._followed = backend
        return bool(backend.add_joint_state_listener(self.joint_state, rate=rate or 1.0 / self._joint_period))

    def close(self) -> None:
        """Close the file; later records are dropped. Safe to call twice."""
        backend, self._followed = self._followed, None
        if backend is not None:
            backend.remove_joint_state_listener(self.joint_state)
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._unopened:  # closed before its first line: never created
            self._unopened = False
            self.error = self.error or "closed"
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:
                self.error = self.error or f"{self.path}: {exc}"
            self._file = None
            if not self.error:
                self.error = "closed"

    def __enter__(self) -> RunLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_run_log(path: str | Path) -> list[dict[str, Any]]:
    """Read a run log.

    A last line without its newline (the process died while writing it) is ignored.

    Args:
        path: a file written by :class:`RunLogWriter`.

    Returns:
        The records in file order.

    Raises:
        ValueError: the file is not UTF-8 text, or a line is not a JSON object with ``t``
            (number) and ``event`` (string); the message names the file and line, e.g.
            ``run.jsonl:7: not JSON``.
        OSError: the file cannot be read.
    """
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        at_line = raw.count(b"\n", 0, exc.start) + 1
        raise ValueError(
            f"{path}:{at_line}: not a run log (a run log is JSON Lines text; byte 0x{raw[exc.start]:02x} "
            f"at offset {exc.start} is not UTF-8)"
        ) from None
    lines = text.split("\n")
    if lines and lines[-1] != "":
        lines = lines[:-1]
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object")
        if not isinstance(record.get("t"), (int, float)) or not isinstance(record.get("event"), str):
            raise ValueError(f"{path}:{number}: a record needs a numeric 't' and a string 'event'")
        records.append(record)
    return records


_SKIP_DETAILS = frozenset({"t", "goal_id", "event", "unit", "seconds"})


def _is_error(record: Mapping[str, Any]) -> bool:
    event = record.get("event", "")
    if record.get("status") == "CANCELED":
        return False
    if record.get("error"):
        return True
    if event == "state" and record.get("state") == "FAULTED":
        return True
    if event == "goal_finished" and record.get("status") == "ABORTED":
        return True
    return str(record.get("detail", "")).startswith("failed")


def _details(record: Mapping[str, Any]) -> str:
    event = record.get("event", "")
    if event == "state":
        message = record.get("message", "")
        return f"{record.get('state', '')}" + (f" — {message}" if message else "")
    if event == "cache":
        return str(record.get("status", ""))
    parts = []
    for key, value in record.items():
        if key in _SKIP_DETAILS or value in ("", None):
            continue
        parts.append(str(value) if key in ("detail", "error", "label") else f"{key}={value}")
    return ", ".join(parts)


def timeline(records: Iterable[Mapping[str, Any]], *, goal_id: str | None = None) -> Table:
    """The records as a rich table: relative time, goal, unit, event, details, duration.

    Durations: a phase's ``seconds`` for ``*_finished``; for ``unit_succeeded`` the time
    since that unit's ``unit_started``; for ``goal_finished`` the time since
    ``goal_started``. Errors (an ``error`` field, a ``failed…`` detail, FAULTED, an
    ABORTED goal) are red; cancellations (whose ``error`` is the cancel reason) and
    pauses yellow; cache hits green. The replay records (:data:`REPLAY_EVENTS`) are left out.

    Args:
        records: from :func:`read_run_log`.
        goal_id: show only this goal.

    Returns:
        The table (print it with a ``rich.console.Console``).
    """
    table = Table(
        "time", "goal", "unit", "event", "details", "duration", title="run log", title_justify="left"
    )
    chosen = [
        r
        for r in records
        if (goal_id is None or r.get("goal_id") == goal_id) and r.get("event") not in REPLAY_EVENTS
    ]
    if not chosen:
        return table
    origin = float(chosen[0]["t"])
    unit_start: dict[tuple[str, Any], float] = {}
    goal_start: dict[str, float] = {}
    for record in chosen:
        t = float(record["t"])
        goal = str(record.get("goal_id", ""))
        event = str(record.get("event", ""))
        unit = record.get("unit")
        duration = ""
        if event.endswith("_finished") and isinstance(record.get("seconds"), (int, float)):
            duration = f"{record['seconds']:.3f} s"
        elif event == "unit_started":
            unit_start[(goal, unit)] = t
        elif event == "unit_succeeded" and (goal, unit) in unit_start:
            duration = f"{t - unit_start[(goal, unit)]:.3f} s"
        elif event == "goal_started":
            goal_start[goal] = t
        if event == "goal_finished" and goal in goal_start:
            duration = f"{t - goal_start[goal]:.3f} s"
        style = ""
        if _is_error(record):
            style = "bold red"
        elif record.get("status") == "CANCELED" or record.get("state") in ("CANCELING", "PAUSED"):
            style = "yellow"
        elif event == "cache" and record.get("status") == "HIT":
            style = "green"
        table.add_row(
            f"+{t - origin:.3f}",
            goal,
            "" if unit is None else str(unit),
            Text(event, style=style or "bold"),
            Text(_details(record), style=style),
            duration,
        )
    return table

"""Value types of the orchestrator's API: states, replies, feedback, results, goal handles
and listeners (docs/design.md §3). :mod:`erobs_bt.orchestrator` re-exports all of them."""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import py_trees

from erobs_bt.backends.base import DetectedPose, Solution
from erobs_bt.batching import Unit
from erobs_bt.script.model import Script

if TYPE_CHECKING:
    from erobs_bt.tree.context import GoalContext

_LOG = logging.getLogger(__name__)


class State(enum.Enum):
    """Orchestrator state, as published on the ``execution_state`` topic."""

    IDLE = "IDLE"
    RUNNING = "RUNNING"
    COMPLETING_TASK = "COMPLETING_TASK"
    PAUSED = "PAUSED"
    CANCELING = "CANCELING"
    FAULTED = "FAULTED"


@dataclass(frozen=True, slots=True)
class TickTimes:
    """A goal's tick timing so far (what py_trees_ros's ``Statistics`` message carries).

    Attributes:
        count: ticks of the goal's tree so far.
        stamp: when the last tick began [s since the epoch]; 0.0 before the first.
        duration: the last tick's duration [s].
        duration_mean, duration_variance: mean [s] and population variance [s²] of every
            tick's duration.
        interval: time from the previous tick's start to the last one's [s] (0.0 with
            fewer than two ticks).
        interval_mean, interval_variance: mean [s] and population variance [s²] of the
            intervals.
    """

    count: int = 0
    stamp: float = 0.0
    duration: float = 0.0
    duration_mean: float = 0.0
    duration_variance: float = 0.0
    interval: float = 0.0
    interval_mean: float = 0.0
    interval_variance: float = 0.0


class _Running:
    """Running mean and population variance (Welford's update: one pass, no sum of squares)."""

    __slots__ = ("m2", "mean", "n")

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, value: float) -> None:
        self.n += 1
        delta = value - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (value - self.mean)

    @property
    def variance(self) -> float:
        return self.m2 / self.n if self.n else 0.0


class TickStatistics:
    """Times one goal's ticks: the goal thread calls :meth:`started` and :meth:`ended`
    around each tick; any thread reads :attr:`times` (replaced whole after each tick, so a
    reader never sees half an update).

    Args:
        wall: wall clock [s since the epoch] (the ``stamp``); injectable for tests.
        clock: monotonic clock [s] (durations and intervals); injectable for tests.
    """

    def __init__(
        self, *, wall: Callable[[], float] = time.time, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._wall, self._clock = wall, clock
        self._durations, self._intervals = _Running(), _Running()
        self._began = self._previous = -1.0
        self._stamp = 0.0
        self.times = TickTimes()

    def started(self) -> None:
        """A tick begins."""
        self._began = self._clock()
        self._stamp = self._wall()

    def ended(self) -> None:
        """The tick begun at the last :meth:`started` ended."""
        duration = self._clock() - self._began
        self._durations.add(duration)
        interval = 0.0
        if self._previous >= 0.0:
            interval = self._began - self._previous
            self._intervals.add(interval)
        self._previous = self._began
        d, i = self._durations, self._intervals
        self.times = TickTimes(d.n, self._stamp, duration, d.mean, d.variance, interval, i.mean, i.variance)


class GoalStatus(enum.Enum):
    """Terminal status of a goal (as ROS action goal statuses)."""

    SUCCEEDED = "SUCCEEDED"
    ABORTED = "ABORTED"
    CANCELED = "CANCELED"


class GoalRejected(RuntimeError):
    """A goal was refused before it existed (:meth:`erobs_bt.orchestrator.Orchestrator.admission`
    states the rule): another goal is running or starting, the orchestrator is FAULTED, or
    it no longer admits goals (the node is shutting down).

    Args:
        message: the refusal, for people (``busy: goal-3 is RUNNING``).
        error_code: the result code a goal refused this way reports: ``REJECTED``, or
            ``SHUTDOWN`` when the orchestrator no longer admits goals.
    """

    def __init__(self, message: str, *, error_code: str = "REJECTED") -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True)
class Reply:
    """Answer to pause/resume/cancel/stop/reset_fault (``std_srvs/Trigger`` shaped)."""

    success: bool
    message: str


#: How the orchestrator's answer to an accepted cancel begins (``cancel accepted: the goal ends
#: after unit 3 (its motion runs to its end); ...``, made by ``Orchestrator.cancel``): its
#: reply, the CANCELING state's message and, until the goal ends, the feedback's status message.
CANCEL_ACCEPTED = "cancel accepted"
#: The end of that answer while a unit runs: the cancel does not interrupt it, ``stop`` does.
HALT_NOW = "to halt now: stop (erobs-bt stop, ~/stop)"
#: The end of the answer to a cancel of a paused goal, and of its result: nothing moves then.
AT_REST = "the arm is at rest"

#: How the notice of a cache hit replayed without a scene check although it was planned in
#: another planning-scene revision begins (:func:`unchecked_replay_notice`).
UNCHECKED_REPLAY = "replayed unchecked"


def unchecked_replay_notice(planned_in: str | None, now: str, *, checkable: bool) -> str:
    """The notice of a cache hit replayed unchecked although it was planned in another
    planning-scene revision (``replay_scene_check`` off, the specification's replay): the two
    revisions, that no collision check ran, and what would check it.

    It holds no parenthesis, so it can be found in a status message that carries it as
    ``… (<notice>)`` (:func:`unchecked_replay_in`).

    Args:
        planned_in: the revision the solution was planned in (``None``: not recorded).
        now: the planning scene's revision now (``MotionBackend.scene_revision``).
        checkable: the backend can check a replay (``MotionBackend.checks_replay``): the
            notice names ``replay_scene_check``; else it names the cache clear.
    """
    how = (
        "replay_scene_check is false; replay_scene_check:=true, or erobs-bt run --replay-scene-check, "
        "checks such a replay against the scene first"
        if checkable
        else "this backend cannot check a cached trajectory, replay_scene_check needs the embedded "
        "planner of backend sim or ros2_control; clearing the plan cache, ~/clear_cache or erobs-bt "
        "clear-cache, makes the next run plan afresh"
    )
    return (
        f"{UNCHECKED_REPLAY}: planned in planning-scene revision {planned_in or 'unknown'}, the scene "
        f"is now {now}; sent without a collision check, as {how}"
    )


def unchecked_replay_in(status_message: str) -> str:
    """The :func:`unchecked_replay_notice` a feedback's status message carries, ``""`` when none
    (a client of the node sees the notice only in the feedback)."""
    start = status_message.find(f"({UNCHECKED_REPLAY}: ")
    if start < 0:
        return ""
    end = status_message.find(")", start)
    return status_message[start + 1 : end if end >= 0 else len(status_message)]


@dataclass(frozen=True)
class Feedback:
    """Progress of the running goal.

    Attributes:
        current_step: 1-based index of the first step of the running unit (0 before any).
        total_steps: steps after macro expansion.
        current_action: the unit label, e.g. ``batch[3]: moveto, moveto, end_effector``.
        progress_percentage: completed steps / total steps × 100.
        status_message: what is happening, for people.
        current_gripper: the attached gripper.
        unit_index: 1-based index of the running unit (0 before any).
        cache_status: ``HIT``, ``MISS``, ``INELIGIBLE`` for motion units, ``""`` otherwise.
    """

    current_step: int
    total_steps: int
    current_action: str
    progress_percentage: float
    status_message: str
    current_gripper: str
    unit_index: int
    cache_status: str


@dataclass(frozen=True)
class Result:
    """Outcome of a goal.

    Attributes:
        status: SUCCEEDED, ABORTED or CANCELED.
        success: ``status is SUCCEEDED``.
        error_message: empty on success; otherwise the error with its prefix, the
            path-specific validation error, or the cancel reason.
        error_code: ``""`` exactly when SUCCEEDED; ``CANCELED`` exactly when CANCELED;
            for ABORTED one of ``INVALID_SCRIPT``, ``NOT_PREVIEWABLE``, ``STOPPED``
            (:meth:`Orchestrator.stop`), ``SHUTDOWN`` (the node is shutting down), or the
            motion error code (``PLANNING_FAILED``, ``EXECUTION_FAILED``, ``TIMEOUT``,
            ``REPLAY_TIMEOUT``). ``error_message`` starts with ``<error_code>:`` for
            motion errors, stop and shutdown.
        completed_steps: steps of units that completed (a failed batch counts none).
        total_steps: steps after macro expansion (0 when the script did not parse).
        detected: on success, the pose the goal's last ``detect_only`` vision step
            detected (``base_link``), else ``None`` (EROBS's ``detected_position`` and
            ``detected_orientation``).
    """

    status: GoalStatus
    error_message: str
    error_code: str
    completed_steps: int
    total_steps: int
    detected: DetectedPose | None = None

    @property
    def success(self) -> bool:
        return self.status is GoalStatus.SUCCEEDED


class OrchestratorListener:
    """Observer of an orchestrator (ROS node, CLI, run log). Methods are no-ops by default.

    Methods are called from the goal thread or from the caller of a request, never while
    the orchestrator holds its lock (a listener may call the orchestrator back). State
    changes arrive one at a time, in the order they happened. Keep them short and
    thread-safe.
    """

    def state_changed(self, state: State, message: str) -> None:
        """The orchestrator entered ``state``."""

    def feedback(self, goal_id: str, feedback: Feedback) -> None:
        """New feedback for the running goal."""

    def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
        """A run-log record: ``{"t": epoch s, "event": name, ...fields}``."""

    def preview(self, goal_id: str, solution: Solution) -> None:
        """A preview trajectory was planned."""

    def ticked(self, goal_id: str, root: py_trees.behaviour.Behaviour) -> None:
        """The tree of the running goal was ticked (snapshot opportunity)."""

    def finished(self, goal_id: str, result: Result) -> None:
        """The goal ended."""


class ListenerGroup(OrchestratorListener):
    """Forward every callback to several listeners, in order (console, run log, live view).

    A listener that raises is logged and skipped: an observer never fails a goal.
    """

    def __init__(self, *listeners: OrchestratorListener) -> None:
        self.listeners = list(listeners)

    def add(self, listener: OrchestratorListener) -> None:
        """Append ``listener``."""
        self.listeners.append(listener)

    def remove(self, listener: OrchestratorListener) -> None:
        """Remove ``listener`` if present."""
        self.listeners = [item for item in self.listeners if item is not listener]

    def _each(self, method: str, *args: Any) -> None:
        for listener in list(self.listeners):
            try:
                getattr(listener, method)(*args)
            except Exception:
                _LOG.exception("listener %r failed in %s()", listener, method)

    def state_changed(self, state: State, message: str) -> None:
        self._each("state_changed", state, message)

    def feedback(self, goal_id: str, feedback: Feedback) -> None:
        self._each("feedback", goal_id, feedback)

    def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
        self._each("event", goal_id, record)

    def preview(self, goal_id: str, solution: Solution) -> None:
        self._each("preview", goal_id, solution)

    def ticked(self, goal_id: str, root: py_trees.behaviour.Behaviour) -> None:
        self._each("ticked", goal_id, root)

    def finished(self, goal_id: str, result: Result) -> None:
        self._each("finished", goal_id, result)


class GoalHandle:
    """A submitted goal: wait for its :class:`Result`.

    Attributes:
        goal_id: ``goal-<n>``.
        dry_run: preview instead of execution.
        script: the parsed script, or ``None`` when it did not parse.
        units: its units ([] when it did not parse).
        root: the compiled tree, or ``None``.
    """

    def __init__(self, goal_id: str, *, dry_run: bool) -> None:
        self.goal_id = goal_id
        self.dry_run = dry_run
        self.script: Script | None = None
        self.units: list[Unit] = []
        self.root: py_trees.behaviour.Behaviour | None = None
        self.context: GoalContext | None = None
        self._done = threading.Event()
        self._result: Result | None = None
        self._callbacks: list[Callable[[Result], None]] = []
        self._lock = threading.Lock()

    @property
    def result(self) -> Result | None:
        """The result, or ``None`` while the goal runs."""
        return self._result

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> Result:
        """Block until the goal ends.

        Raises:
            TimeoutError: the goal did not end within ``timeout`` seconds.
        """
        if not self._done.wait(timeout):
            raise TimeoutError(f"{self.goal_id} did not finish within {timeout} s")
        assert self._result is not None
        return self._result

    def add_done_callback(self, callback: Callable[[Result], None]) -> None:
        """Call ``callback(result)`` when the goal ends (at once if it has)."""
        with self._lock:
            if self._result is None:
                self._callbacks.append(callback)
                return
        callback(self._result)

    def _finish(self, result: Result) -> None:
        with self._lock:
            self._result = result
            callbacks, self._callbacks = self._callbacks, []
        self._done.set()
        for callback in callbacks:
            callback(result)

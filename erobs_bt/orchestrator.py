"""The orchestrator: one goal at a time, its state machine, and the tick loop.

States (erobs-semantics.md §3): ``IDLE``, ``RUNNING``, ``COMPLETING_TASK`` (a pause
was requested, the unit is still running), ``PAUSED``, ``CANCELING``, ``FAULTED``.

A goal is parsed, grouped and compiled when it is submitted (so a bad script is
answered at once, moves nothing and reports ``completed_steps = 0``), then run on a
goal thread that ticks the root of the compiled tree. Ticking is event-driven: the
thread sleeps until a backend future completes or a request (pause, resume, cancel)
arrives, with a slow safety timer to notice timeouts, and a tick visits only the
active path of the tree (:class:`erobs_bt.tree.compile.UnitSequence`).

Pause and cancel take effect only at unit boundaries (nodes of the tree). A fatal
error (``TIMEOUT:``/``REPLAY_TIMEOUT:``) faults the orchestrator: the goal aborts,
nothing more is dispatched and every later goal is rejected until the process is
restarted, as in EROBS (Resume does not clear it). A unit that fails while a cancel
is pending also faults it.
"""

from __future__ import annotations

import enum
import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import py_trees
from py_trees.common import Status

from erobs_bt.backends.base import MotionBackend, MotionError, Solution
from erobs_bt.batching import Unit, group_into_batches
from erobs_bt.cache import PlanCache, is_eligible
from erobs_bt.script.errors import ScriptError
from erobs_bt.script.model import Script
from erobs_bt.tree.compile import NotPreviewableError, compile_tree
from erobs_bt.tree.context import (
    DEFAULT_TIMEOUTS,
    CacheStatus,
    Controls,
    FinishReason,
    GoalContext,
    GoalEvents,
    Mode,
)

_LOG = logging.getLogger(__name__)


class State(enum.Enum):
    """Orchestrator state, as published on the ``execution_state`` topic."""

    IDLE = "IDLE"
    RUNNING = "RUNNING"
    COMPLETING_TASK = "COMPLETING_TASK"
    PAUSED = "PAUSED"
    CANCELING = "CANCELING"
    FAULTED = "FAULTED"


class GoalStatus(enum.Enum):
    """Terminal status of a goal (as ROS action goal statuses)."""

    SUCCEEDED = "SUCCEEDED"
    ABORTED = "ABORTED"
    CANCELED = "CANCELED"


class GoalRejected(RuntimeError):
    """A goal was refused: another goal is running or the orchestrator is FAULTED."""


@dataclass(frozen=True)
class Reply:
    """Answer to pause/resume/cancel (``std_srvs/Trigger`` shaped)."""

    success: bool
    message: str


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
        error_code: ``""``, ``INVALID_SCRIPT``, ``NOT_PREVIEWABLE``, ``CANCELED``, or
            the motion error prefix (``PLANNING_FAILED``, ``EXECUTION_FAILED``,
            ``TIMEOUT``, ``REPLAY_TIMEOUT``).
        completed_steps: steps of units that completed (a failed batch counts none).
        total_steps: steps after macro expansion (0 when the script did not parse).
    """

    status: GoalStatus
    error_message: str
    error_code: str
    completed_steps: int
    total_steps: int

    @property
    def success(self) -> bool:
        return self.status is GoalStatus.SUCCEEDED


class OrchestratorListener:
    """Observer of an orchestrator (ROS node, CLI, run log). Methods are no-ops by default.

    Methods are called from the goal thread or from the caller of a request; keep them
    short and thread-safe.
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


class Orchestrator:
    """Runs one goal at a time on a :class:`MotionBackend`.

    Args:
        backend: what moves the robot.
        parser: turns the goal's ``full_json`` into a :class:`Script`; raises
            :class:`ScriptError` (a configured :func:`erobs_bt.script.parse.parse_script`).
        enable_batching: group consecutive moveto/end_effector steps into one unit.
        cache: the plan cache (a new one of capacity 64 when ``None``).
        timeouts: per-type timeouts [s], see :data:`DEFAULT_TIMEOUTS`.
        listener: receives state changes, feedback, run-log records and results; it is
            held in a :class:`ListenerGroup` (``orchestrator.listener``) that more
            listeners can join.
        safety_period: [s] longest sleep between ticks when nothing happens.
    """

    def __init__(
        self,
        backend: MotionBackend,
        *,
        parser: Callable[[str], Script],
        enable_batching: bool,
        cache: PlanCache | None = None,
        timeouts: Mapping[str, float] = DEFAULT_TIMEOUTS,
        listener: OrchestratorListener | None = None,
        safety_period: float = 0.5,
    ) -> None:
        self.backend = backend
        self.parser = parser
        self.enable_batching = enable_batching
        self.cache = cache if cache is not None else PlanCache()
        self.timeouts = {**DEFAULT_TIMEOUTS, **timeouts}
        self.listener: ListenerGroup = (
            listener
            if isinstance(listener, ListenerGroup)
            else ListenerGroup(*([listener] if listener else []))
        )
        self.safety_period = safety_period
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._state = State.IDLE
        self._fault_reason = ""
        self._goal: GoalHandle | None = None
        self._controls: Controls | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)
        self.last_tick_visits = 0
        self.ticks = 0

    # -- queries -------------------------------------------------------------------
    @property
    def state(self) -> State:
        """The current state."""
        return self._state

    @property
    def fault_reason(self) -> str:
        """The fatal error that faulted the orchestrator (``""`` when not faulted)."""
        return self._fault_reason

    @property
    def active_goal(self) -> GoalHandle | None:
        """The running goal, if any."""
        return self._goal

    # -- goals ---------------------------------------------------------------------
    def submit(self, full_json: str, *, dry_run: bool) -> GoalHandle:
        """Accept a goal and start it.

        A script that fails validation (or a preview of a non-previewable script) is
        accepted and aborted at once with the path-specific error; nothing moves.

        Args:
            full_json: the script as JSON text.
            dry_run: preview (plan only) instead of execute.

        Returns:
            The goal's handle.

        Raises:
            GoalRejected: a goal is running, or the orchestrator is FAULTED.
        """
        with self._lock:
            if self._state is State.FAULTED:
                raise GoalRejected(f"orchestrator is FAULTED ({self._fault_reason}); restart required")
            if self._goal is not None:
                raise GoalRejected(f"busy: {self._goal.goal_id} is {self._state.value}")
            handle = GoalHandle(f"goal-{next(self._ids)}", dry_run=dry_run)
            try:
                script = self.parser(full_json)
            except ScriptError as exc:
                handle._finish(Result(GoalStatus.ABORTED, str(exc), "INVALID_SCRIPT", 0, 0))
                self._emit(handle.goal_id, "rejected_script", error=str(exc))
                return handle
            units = group_into_batches(script.steps, enabled=self.enable_batching)
            controls = Controls(on_change=self._wake.set)
            context = GoalContext(
                script=script,
                units=units,
                mode=Mode.PREVIEW if dry_run else Mode.EXECUTE,
                backend=self.backend,
                cache=self.cache,
                eligible=is_eligible(units),
                controls=controls,
                timeouts=self.timeouts,
                wake=self._wake.set,
            )
            try:
                root = compile_tree(context)
            except NotPreviewableError as exc:
                total = len(script.steps)
                handle._finish(Result(GoalStatus.ABORTED, str(exc), "NOT_PREVIEWABLE", 0, total))
                self._emit(handle.goal_id, "rejected_script", error=str(exc))
                return handle
            handle.script, handle.units, handle.root, handle.context = script, units, root, context
            context.events = _GoalEventsAdapter(self, handle)
            self._goal = handle
            self._controls = controls
            self._set_state(State.RUNNING, f"{handle.goal_id}: {len(script.steps)} steps, {len(units)} units")
            self._thread = threading.Thread(
                target=self._run, args=(handle,), name=handle.goal_id, daemon=True
            )
            self._thread.start()
            return handle

    def pause(self) -> Reply:
        """Request a pause at the next unit boundary (EROBS reply messages)."""
        with self._lock:
            if self._goal is None or self._controls is None:
                return Reply(False, "No task is currently executing")
            if self._state is State.PAUSED:
                return Reply(False, "Already paused")
            if self._state is State.COMPLETING_TASK:
                return Reply(False, "Pause already requested; completing the current unit")
            if self._state is State.CANCELING:
                return Reply(False, "Goal is being cancelled")
            self._controls.request_pause()
            self._set_state(State.COMPLETING_TASK, "pause requested; completing the current unit")
            return Reply(True, "Pause requested; pausing after the current unit completes")

    def resume(self) -> Reply:
        """Resume a paused goal (paused at a boundary or at a ``pause`` step)."""
        with self._lock:
            if self._goal is None or self._controls is None or self._state is not State.PAUSED:
                return Reply(False, "Not paused")
            self._controls.request_resume()
            self._set_state(State.RUNNING, "resumed")
            return Reply(True, "Resumed")

    def cancel(self) -> Reply:
        """Request cancellation; always accepted. Takes effect at the next unit boundary,
        or at once while paused."""
        with self._lock:
            if self._goal is None or self._controls is None:
                return Reply(True, "No task is currently executing; nothing to cancel")
            paused = self._state is State.PAUSED
            self._controls.request_cancel()
            if self._state is not State.FAULTED:
                self._set_state(State.CANCELING, "cancel requested")
            if paused:
                return Reply(True, "Cancelling the paused goal")
            return Reply(True, "Cancel requested; stopping at the next unit boundary")

    def clear_cache(self) -> Reply:
        """Drop every cached solution."""
        count = self.cache.clear()
        return Reply(True, f"cleared {count} cached solution(s)")

    def shutdown(self, timeout: float = 10.0) -> None:
        """Cancel the running goal, stop the backend's motion and join the goal thread."""
        with self._lock:
            if self._controls is not None:
                self._controls.request_cancel()
            thread = self._thread
        self.backend.stop()
        if thread is not None:
            thread.join(timeout)

    # -- the goal thread -----------------------------------------------------------
    def _run(self, handle: GoalHandle) -> None:
        ctx = handle.context
        root = handle.root
        assert ctx is not None and root is not None and handle.script is not None
        try:
            self.backend.prepare_goal(handle.script.start_gripper)
            self._emit(
                handle.goal_id,
                "goal_started",
                mode=ctx.mode.value,
                total_steps=len(handle.script.steps),
                units=len(handle.units),
                eligible=ctx.eligible,
            )
            while True:
                self._wake.clear()
                visits = 0
                for _node in root.tick():
                    visits += 1
                self.last_tick_visits = visits
                self.ticks += 1
                self.listener.ticked(handle.goal_id, root)
                if root.status != Status.RUNNING:
                    break
                self._wake.wait(self.safety_period)
        except MotionError as exc:
            ctx.fail(exc)
            ctx.faulted = ctx.faulted or exc.fatal
        except Exception as exc:
            ctx.fail(f"EXECUTION_FAILED: {type(exc).__name__}: {exc}")
        finally:
            if root.status == Status.RUNNING:
                # The loop ended abnormally with work in flight: stop the robot first.
                self.backend.stop()
                root.stop(Status.INVALID)
            self._finish(handle)

    def _finish(self, handle: GoalHandle) -> None:
        ctx = handle.context
        assert ctx is not None and handle.script is not None
        events = ctx.events
        assert isinstance(events, _GoalEventsAdapter)
        total = len(handle.script.steps)
        completed = events.completed_steps
        root_ok = handle.root is not None and handle.root.status == Status.SUCCESS
        with self._lock:
            if root_ok:
                result = Result(GoalStatus.SUCCEEDED, "", "", completed, total)
                next_state, message = State.IDLE, f"{handle.goal_id} succeeded"
            elif ctx.finish_reason is FinishReason.CANCELED:
                result = Result(GoalStatus.CANCELED, ctx.cancel_message, "CANCELED", completed, total)
                next_state, message = State.IDLE, f"{handle.goal_id} {ctx.cancel_message}"
            else:
                error = ctx.error or "EXECUTION_FAILED: goal stopped without a recorded error"
                code = error.split(":", 1)[0] if ":" in error else "EXECUTION_FAILED"
                result = Result(GoalStatus.ABORTED, error, code, completed, total)
                if ctx.faulted or ctx.fatal_error is not None or ctx.failed_while_canceling:
                    self._fault_reason = ctx.fatal_error or f"unit failed while a cancel was pending: {error}"
                    next_state, message = State.FAULTED, self._fault_reason
                else:
                    next_state, message = State.IDLE, f"{handle.goal_id} aborted: {error}"
            self._goal = None
            self._controls = None
            self._thread = None
            self._set_state(next_state, message)
        self._emit(
            handle.goal_id,
            "goal_finished",
            status=result.status.value,
            error=result.error_message,
            completed_steps=completed,
            total_steps=total,
        )
        self.listener.finished(handle.goal_id, result)
        handle._finish(result)

    # -- helpers ---------------------------------------------------------------------
    def _set_state(self, state: State, message: str) -> None:
        # Listeners are told under the lock, so published states arrive in the order the
        # state changed (the goal thread and request threads both change it).
        with self._lock:
            if self._state is State.FAULTED and state is not State.FAULTED:
                return
            self._state = state
            self.listener.state_changed(state, message)
            goal = self._goal
            self._emit(goal.goal_id if goal else "", "state", state=state.value, message=message)

    def _emit(self, goal_id: str, event: str, **fields: Any) -> None:
        self.listener.event(goal_id, {"t": time.time(), "event": event, **fields})


class _GoalEventsAdapter(GoalEvents):
    """Turns tree events into orchestrator state changes, feedback and run-log records."""

    def __init__(self, orchestrator: Orchestrator, handle: GoalHandle) -> None:
        self.orchestrator = orchestrator
        self.handle = handle
        assert handle.script is not None
        self.total = len(handle.script.steps)
        self.completed_steps = 0
        self.current: Unit | None = None
        self.cache_status = ""
        self.message = ""

    def _publish(self) -> None:
        unit = self.current
        feedback = Feedback(
            current_step=unit.first_step + 1 if unit else 0,
            total_steps=self.total,
            current_action=unit.label if unit else "",
            progress_percentage=100.0 * self.completed_steps / self.total if self.total else 100.0,
            status_message=self.message,
            current_gripper=self.orchestrator.backend.current_gripper(),
            unit_index=unit.index + 1 if unit else 0,
            cache_status=self.cache_status,
        )
        self.orchestrator.listener.feedback(self.handle.goal_id, feedback)

    def _emit(self, event: str, **fields: Any) -> None:
        self.orchestrator._emit(self.handle.goal_id, event, **fields)

    def unit_started(self, unit: Unit) -> None:
        self.current = unit
        self.cache_status = ""
        self.message = f"unit {unit.index + 1}/{len(self.handle.units)}: {unit.label}"
        self._emit("unit_started", unit=unit.index + 1, label=unit.label, first_step=unit.first_step + 1)
        self._publish()

    def unit_succeeded(self, unit: Unit) -> None:
        self.completed_steps += len(unit.steps)
        self.message = f"unit {unit.index + 1} done"
        self._emit("unit_succeeded", unit=unit.index + 1, completed_steps=self.completed_steps)
        self._publish()

    def cache_decision(self, unit: Unit, status: CacheStatus, digest: str = "") -> None:
        self.cache_status = status.value
        self._emit("cache", unit=unit.index + 1, status=status.value, key=digest)
        self._publish()

    def phase(self, unit: Unit, phase: str, seconds: float | None = None, detail: str = "") -> None:
        if seconds is None:
            self.message = f"unit {unit.index + 1}: {phase}"
            self._emit(f"{phase}_started", unit=unit.index + 1, detail=detail)
        else:
            self.message = f"unit {unit.index + 1}: {phase} {detail}".strip()
            self._emit(f"{phase}_finished", unit=unit.index + 1, seconds=round(seconds, 6), detail=detail)
        self._publish()

    def paused(self, reason: str) -> None:
        self.message = reason
        self.orchestrator._set_state(State.PAUSED, reason)
        self._publish()

    def resumed(self) -> None:
        self.message = "resumed"
        with self.orchestrator._lock:
            if self.orchestrator.state is State.PAUSED:
                self.orchestrator._set_state(State.RUNNING, "resumed")
        self._publish()

    def preview(self, unit: Unit, solution: Solution) -> None:
        self.orchestrator.listener.preview(self.handle.goal_id, solution)

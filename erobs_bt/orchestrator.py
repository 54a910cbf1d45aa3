"""The orchestrator: one goal at a time, its state machine, and the tick loop.

States (docs/behaviour.md §3): ``IDLE``, ``RUNNING``, ``COMPLETING_TASK`` (a pause
was requested, the unit is still running), ``PAUSED``, ``CANCELING``, ``FAULTED``.
The orchestrator is the only thing that changes its state: the tree reports what it
does (a unit started, the goal is parked at a boundary or a ``pause`` step) and the
orchestrator decides the state after each tick. Listeners hear of every change, in
order, outside the orchestrator's lock.

Admission is decided here and nowhere else (:meth:`Orchestrator.admission`): one goal at a
time, none while FAULTED, none once the process shuts down (:meth:`Orchestrator.stop_admitting`).
A front end that accepts a goal before it can submit it (the node's action server: a goal
callback, then an execute callback) holds its place with :meth:`Orchestrator.reserve`, so the
web console or a second action goal cannot start in between; every front end reports the
refusal it is given (:class:`~erobs_bt.goal.GoalRejected`). A simulation reset
(:meth:`Orchestrator.reset_simulation`) obeys the busy part of the same rule and holds the
goal's place while it runs.

A goal is parsed, grouped and compiled when it is submitted (so a bad script is
answered at once, moves nothing and reports ``completed_steps = 0``), then run on a
goal thread that ticks the root of the compiled tree. Ticking is event-driven: the
thread sleeps until a backend future completes or a request (pause, resume, cancel,
stop) arrives, with a slow safety timer to notice timeouts, and a tick visits only the
active path of the tree (:class:`erobs_bt.tree.compile.UnitSequence`).

Pause and cancel take effect only at unit boundaries (nodes of the tree); a cancel
accepted before the goal finishes ends it CANCELED. :meth:`Orchestrator.stop` and
:meth:`Orchestrator.shutdown` halt the goal at once: the robot decelerates to rest
(controlled stop), the tree is halted (every running leaf stops what it started), and
the goal aborts with ``STOPPED``/``SHUTDOWN``; the orchestrator ends IDLE.

A fatal error (``TIMEOUT:``/``REPLAY_TIMEOUT:``), or a unit failing while a cancel is
pending, faults the orchestrator (the rule: :func:`erobs_bt.tree.decorators.fault_of`):
the goal aborts, nothing more is dispatched and every later goal is rejected until
:meth:`Orchestrator.reset_fault` (after the operator has checked the cell) or a restart.
Resume does not clear it.

Plan-ahead (``plan_ahead``, on by default): while a unit executes, the next motion unit
is planned from the state the running unit is planned to end in, so the robot does not
wait for the planner between units (the rules: :mod:`erobs_bt.tree.context`). It changes
nothing a client sees but the gaps: pause, cancel, preview, the cache and the results
are as without it, and a goal drops its pending plan-ahead when it ends, however it ends.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from py_trees.common import Status

from erobs_bt.backends.base import (
    ErrorCode,
    MotionBackend,
    MotionError,
    ReportsPlanProgress,
    ResetsSimulation,
    Solution,
)
from erobs_bt.batching import Unit
from erobs_bt.cache import PlanCache
from erobs_bt.goal import (
    AT_REST,
    CANCEL_ACCEPTED,
    HALT_NOW,
    Feedback,
    GoalHandle,
    GoalRejected,
    GoalStatus,
    ListenerGroup,
    OrchestratorListener,
    Reply,
    Result,
    State,
    TickStatistics,
    TickTimes,
)
from erobs_bt.plan import NotPreviewableError, plan_goal
from erobs_bt.script.errors import ScriptError
from erobs_bt.script.model import Script
from erobs_bt.script.parse import dock_problem
from erobs_bt.script.vocabulary import dock_conflict
from erobs_bt.settings import EngineSettings
from erobs_bt.tree.compile import compile_tree
from erobs_bt.tree.context import (
    CacheStatus,
    Controls,
    FinishReason,
    GoalContext,
    GoalEvents,
    Halt,
    HaltReason,
    Mode,
)
from erobs_bt.tree.decorators import fault_of
from erobs_bt.wording import count

__all__ = [
    "Feedback",
    "GoalHandle",
    "GoalRejected",
    "GoalStatus",
    "ListenerGroup",
    "Orchestrator",
    "OrchestratorListener",
    "Reply",
    "Reservation",
    "Result",
    "State",
    "TickStatistics",
    "TickTimes",
]

_LOG = logging.getLogger(__name__)

#: Default reason given by :meth:`Orchestrator.shutdown`.
SHUTDOWN_REASON = "node shutting down"


class Orchestrator:
    """Runs one goal at a time on a :class:`MotionBackend`.

    Why this class has more than 25 methods: it is the engine's one state machine (docs/behaviour.md) and
    each public method is one transition request of its API (submit, pause, resume, cancel, stop, reset,
    clear) taken under one lock; the tree, the goal context and the plan-ahead policy live elsewhere
    (tree/).

    Every public method is thread-safe and may be called from any thread (a ROS
    service or action callback, a CLI signal handler); none blocks on the goal thread
    except :meth:`shutdown`, which joins it.

    Args:
        backend: what moves the robot.
        parser: turns the goal's ``full_json`` into a :class:`Script`; raises
            :class:`ScriptError` (the cell-configured :class:`erobs_bt.plan.ScriptParser`);
            :func:`erobs_bt.plan.plan_goal` uses it to make the goal plan.
        settings: the engine's options (:class:`~erobs_bt.settings.EngineSettings`: batching,
            timeouts, plan-ahead, the replay's scene check), handed whole to each goal's
            context; the defaults when ``None``.
        cache: the plan cache (a new one of capacity 64 when ``None``).
        listener: receives state changes, feedback, run-log records and results; it is
            held in a :class:`ListenerGroup` (``orchestrator.listener``) that more
            listeners can join.
        safety_period: [s] longest sleep between ticks when nothing happens.
        stated_docks: what the operator said the docks hold at start (``--docks``, the
            node's ``docks``), dock number → tool; the first goal since the start or a reset
            whose ``start_gripper`` they hold in a dock is refused before anything moves
            (:func:`~erobs_bt.script.vocabulary.dock_conflict`). ``None``: not stated.

    Raises:
        ValueError: ``settings.replay_scene_check`` with a backend that cannot check a trajectory
            (its ``checks_replay`` is false: MoveIt's scene lives in move_group).
    """

    def __init__(
        self,
        backend: MotionBackend,
        *,
        parser: Callable[[str | bytes], Script],
        settings: EngineSettings | None = None,
        cache: PlanCache | None = None,
        listener: OrchestratorListener | None = None,
        safety_period: float = 0.5,
        stated_docks: Mapping[int, str | None] | None = None,
    ) -> None:
        settings = settings if settings is not None else EngineSettings()
        if settings.replay_scene_check and not backend.checks_replay:
            raise ValueError(
                "replay_scene_check: this backend cannot check a cached trajectory against the "
                "planning scene (it needs the embedded planner: backend sim or ros2_control)"
            )
        self.backend = backend
        self.parser = parser
        self.settings = settings
        self.cache = cache if cache is not None else PlanCache()
        self.listener: ListenerGroup = (
            listener
            if isinstance(listener, ListenerGroup)
            else ListenerGroup(*([listener] if listener else []))
        )
        self.safety_period = safety_period
        # What the operator said the docks hold at start (--docks, the node's docks), checked
        # against the start tool of the first goal since the start or a reset (_check_stated_docks).
        self._stated_docks = dict(stated_docks) if stated_docks else None
        self._docks_as_stated = True
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._state = State.IDLE
        self._fault_reason = ""
        self._fault_goal_id = ""  # the goal that faulted the orchestrator (while FAULTED)
        self._goal: GoalHandle | None = None
        self._last_goal_id = ""  # the latest goal submitted (the run log a reset is told in)
        self._reservation: Reservation | None = None  # a goal admitted, not yet submitted
        self._closed = ""  # why no goal is admitted any more (stop_admitting); "" admits
        self._controls: Controls | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)
        # State changes waiting to reach the listeners (filled under the lock, delivered
        # outside it, in order, by one thread at a time).
        self._outbox: deque[tuple[State, str, str]] = deque()
        self._delivering = False
        self.last_tick_visits = 0
        self.ticks = 0
        #: The running (or last) goal's tick timing (py_trees_ros ``Statistics``).
        self.tick_statistics = TickStatistics()
        # A backend that reports a unit's plan move by move: the feedback then says how far the
        # plan is (a MoveIt unit plans one request per move).
        if isinstance(backend, ReportsPlanProgress):
            backend.add_plan_listener(self._plan_progress)

    def _plan_progress(self, steps: tuple[Any, ...], planned: int, moves: int) -> None:
        """The backend's plan progress (a planning thread): the running goal's feedback says
        it while those steps are the unit it is planning (:meth:`_GoalEventsAdapter.plan_progress`)."""
        goal = self._goal
        events = goal.context.events if goal is not None and goal.context is not None else None
        if isinstance(events, _GoalEventsAdapter):
            events.plan_progress(steps, planned, moves)

    # -- queries -------------------------------------------------------------------
    @property
    def state(self) -> State:
        """The current state."""
        return self._state

    @property
    def fault_reason(self) -> str:
        """The error that faulted the orchestrator (``""`` when not faulted)."""
        return self._fault_reason

    @property
    def active_goal(self) -> GoalHandle | None:
        """The running goal, if any."""
        return self._goal

    # -- goals ---------------------------------------------------------------------
    def admission(self, reservation: Reservation | None = None) -> GoalRejected | None:
        """The admission rule, the one place it is decided: why a goal would be refused
        now, or ``None`` when it would be admitted.

        In this order: the orchestrator no longer admits goals (:meth:`stop_admitting`:
        ``SHUTDOWN: <reason>``); it is FAULTED (``orchestrator is FAULTED (<fault>); check
        the cell, then reset the fault ...``); another goal runs (``busy: goal-3 is
        RUNNING``); another caller holds a :class:`Reservation` (``busy: a goal is
        starting``).

        Args:
            reservation: the caller's own reservation (it does not count against it).
        """
        with self._lock:
            if self._closed:
                return GoalRejected(f"SHUTDOWN: {self._closed}", error_code="SHUTDOWN")
            if self._state is State.FAULTED:
                return GoalRejected(
                    f"orchestrator is FAULTED ({self._fault_reason}); check the cell, then reset the fault "
                    "(~/reset_fault, `erobs-bt reset-fault`) or restart"
                )
            return self._busy(reservation)

    def _busy(self, reservation: Reservation | None = None) -> GoalRejected | None:
        """The part of :meth:`admission` that a simulation reset obeys too: another goal
        runs (``busy: goal-3 is RUNNING``), or another caller holds a :class:`Reservation`
        (``busy: a goal is starting``, ``busy: the simulation is being reset``)."""
        with self._lock:
            if self._goal is not None:
                return GoalRejected(f"busy: {self._goal.goal_id} is {self._state.value}")
            if self._reservation is not None and self._reservation is not reservation:
                return GoalRejected(f"busy: {self._reservation.what}")
            return None

    def reserve(self) -> Reservation:
        """Admit a goal now and hold its place until it is submitted (a ROS action server
        accepts a goal in one callback and submits it in another; nothing else may start
        in between). Pass the reservation to :meth:`submit`; :meth:`Reservation.release`
        gives the place up without submitting.

        Returns:
            The reservation.

        Raises:
            GoalRejected: :meth:`admission` refuses a goal now.
        """
        with self._lock:
            refusal = self.admission()
            if refusal is None:
                self._reservation = Reservation(self)
                return self._reservation
        self._refused(refusal)
        raise refusal

    def stop_admitting(self, reason: str) -> None:
        """Refuse every later goal, and every reservation not yet submitted, with
        ``SHUTDOWN: <reason>`` (error code ``SHUTDOWN``): the process is about to exit.
        The running goal is not touched (:meth:`shutdown` halts it). Idempotent."""
        with self._lock:
            self._closed = self._closed or reason

    def _release(self, reservation: Reservation) -> None:
        with self._lock:
            if self._reservation is reservation:
                self._reservation = None

    def _refused(self, refusal: GoalRejected) -> None:
        # No goal id: the goal never existed. Listeners (the console) still see the refusal.
        self._emit("", "goal_rejected", error=str(refusal), state=self._state.value)

    def submit(
        self,
        full_json: str,
        *,
        dry_run: bool,
        paused: bool = False,
        reservation: Reservation | None = None,
    ) -> GoalHandle:
        """Accept a goal and start it.

        A script that fails validation (or a preview of a non-previewable script) is
        accepted and aborted at once with the path-specific error; nothing moves.

        Args:
            full_json: the script as JSON text.
            dry_run: preview (plan only) instead of execute.
            paused: start with a pause pending, so the goal parks ``PAUSED`` at the
                boundary before its first unit (nothing moves) until :meth:`resume`
                (``erobs-bt run --start-paused``).
            reservation: the place :meth:`reserve` holds for this goal; it is used up
                (released) whatever the outcome.

        Returns:
            The goal's handle.

        Raises:
            GoalRejected: :meth:`admission` refuses the goal (a goal is running or
                starting, the orchestrator is FAULTED or no longer admits goals).
        """
        refusal: GoalRejected | None = None
        thread: threading.Thread | None = None
        try:
            with self._lock:
                refusal = self.admission(reservation)
                if reservation is not None:
                    self._release(reservation)
                if refusal is None:
                    handle = self._submit(full_json, dry_run=dry_run, paused=paused)
                    thread = self._thread if self._goal is handle else None
        finally:
            self._deliver()
        if refusal is not None:
            self._refused(refusal)
            raise refusal
        # Started once RUNNING has reached the listeners, so it comes before the goal's events.
        if thread is not None:
            thread.start()
        return handle

    def _submit(self, full_json: str, *, dry_run: bool, paused: bool = False) -> GoalHandle:
        handle = GoalHandle(f"goal-{next(self._ids)}", dry_run=dry_run)
        try:
            plan = plan_goal(
                full_json, parser=self.parser, enable_batching=self.settings.enable_batching, preview=dry_run
            )
        except ScriptError as exc:
            handle._finish(Result(GoalStatus.ABORTED, str(exc), "INVALID_SCRIPT", 0, 0))
            self._emit(handle.goal_id, "rejected_script", error=str(exc))
            return handle
        except NotPreviewableError as exc:
            handle._finish(Result(GoalStatus.ABORTED, str(exc), "NOT_PREVIEWABLE", 0, exc.total_steps))
            self._emit(handle.goal_id, "rejected_script", error=str(exc))
            return handle
        script = plan.script
        controls = Controls(on_change=self._wake.set)
        if paused:
            controls.request_pause()  # before the goal thread starts: seen at the first boundary
        context = GoalContext.for_plan(
            plan,
            mode=Mode.PREVIEW if dry_run else Mode.EXECUTE,
            backend=self.backend,
            cache=self.cache,
            controls=controls,
            settings=self.settings,
            wake=self._wake.set,
        )
        root = compile_tree(context)
        handle.script, handle.units, handle.root, handle.context = script, context.units, root, context
        context.events = _GoalEventsAdapter(self, handle)
        self._goal = handle
        self._last_goal_id = handle.goal_id
        self._controls = controls
        self._transition(
            State.RUNNING,
            f"{handle.goal_id}: {count(len(script.steps), 'step')}, {count(len(handle.units), 'unit')}",
        )
        for warning in script.warnings:  # valid but suspicious (radians for degrees): say so, run it
            self._emit(handle.goal_id, "script_warning", message=warning)
        self._thread = threading.Thread(target=self._run, args=(handle,), name=handle.goal_id, daemon=True)
        return handle

    def pause(self) -> Reply:
        """Request a pause at the next unit boundary (EROBS reply messages).

        Refused only when nothing is executing or the goal is already paused (or a pause
        is already pending); accepted otherwise, also while a cancel is pending (the
        cancel still wins at the next boundary, and the state stays CANCELING).
        """
        try:
            with self._lock:
                if self._goal is None or self._controls is None:
                    return Reply(False, "No task is currently executing")
                if self._state is State.PAUSED:
                    return Reply(False, "Already paused")
                if self._state is State.COMPLETING_TASK or self._controls.pause_requested:
                    return Reply(False, "Pause already requested; completing the current unit")
                self._controls.request_pause()
                if self._state is State.RUNNING:
                    self._transition(State.COMPLETING_TASK, "pause requested; completing the current unit")
                return Reply(True, "Pause requested; pausing after the current unit completes")
        finally:
            self._deliver()

    def resume(self) -> Reply:
        """Resume a paused goal (paused at a boundary or at a ``pause`` step)."""
        try:
            with self._lock:
                if self._goal is None or self._controls is None or self._state is not State.PAUSED:
                    return Reply(False, "Not paused")
                self._controls.request_resume()
                self._transition(State.RUNNING, "resumed")
                return Reply(True, "Resumed")
        finally:
            self._deliver()

    def cancel(self, goal_id: str | None = None) -> Reply:
        """Request cancellation; takes effect at the next unit boundary, or at once while paused.

        Thread-safe and non-blocking: call it directly from a ROS cancel callback. A
        cancel accepted here before the goal finishes ends the goal CANCELED, even when
        it arrives during (or just after) the final unit; the running unit is never
        interrupted (use :meth:`stop` for that).

        This is the one place a cancel is accepted, so the one place that says what it will
        do (:meth:`_cancel_notice`: ``cancel accepted: the goal ends after unit 3 (its motion
        runs to its end); to halt now: stop (erobs-bt stop, ~/stop)``, or ``… the goal is
        paused, so it ends at once``). That text is the reply, the message of the CANCELING
        state (the node's ``~/execution_state``, which ``erobs-bt cancel`` and MADSci's cancel
        print) and, from the goal thread at once and in every later feedback of the goal, part
        of the feedback's status message (the front ends show it from there).

        Args:
            goal_id: cancel only this goal; ``None``: whatever goal is running.

        Returns:
            ``success`` True when a running goal will end CANCELED (or, with no
            ``goal_id``, when nothing runs: EROBS always accepts a cancel); False when
            ``goal_id`` is not the running goal (it has already finished).
        """
        try:
            with self._lock:
                goal, controls = self._goal, self._controls
                if goal is None or controls is None or (goal_id is not None and goal.goal_id != goal_id):
                    if goal_id is not None:
                        return Reply(False, f"{goal_id} is not running; nothing to cancel")
                    return Reply(True, "No task is currently executing; nothing to cancel")
                notice = self._cancel_notice(goal, paused=self._state is State.PAUSED)
                events = goal.context.events if goal.context is not None else None
                if isinstance(events, _GoalEventsAdapter):  # before the goal thread is woken
                    events.cancel_accepted(notice)
                controls.request_cancel()
                self._transition(State.CANCELING, notice)
                return Reply(True, notice)
        finally:
            self._deliver()

    @staticmethod
    def _cancel_notice(goal: GoalHandle, *, paused: bool) -> str:
        """What an accepted cancel of ``goal`` will do, for people: ``cancel accepted: …``
        (:data:`~erobs_bt.goal.CANCEL_ACCEPTED`). Paused: it ends at once, where it is paused
        (:meth:`_GoalEventsAdapter.paused_at`), the arm at rest. A unit running (or
        planning, or finishing before a requested pause): the goal ends after it, 1-based
        number as in the feedback, and ``stop`` halts now. Before the first unit, or between
        units: it ends before the next one starts."""
        events = goal.context.events if goal.context is not None else None
        unit = events.current if isinstance(events, _GoalEventsAdapter) else None
        if paused:
            where = events.paused_at() if isinstance(events, _GoalEventsAdapter) else "before its first unit"
            return f"{CANCEL_ACCEPTED}: the goal is paused {where}, so it ends there at once; {AT_REST}"
        if unit is None:
            return f"{CANCEL_ACCEPTED}: the goal ends before its first unit starts"
        number = unit.index + 1
        assert isinstance(events, _GoalEventsAdapter)
        if events.unit_done:
            if number == len(goal.units):
                return f"{CANCEL_ACCEPTED}: the goal ends now, its last unit done"
            return f"{CANCEL_ACCEPTED}: the goal ends before unit {number + 1} starts"
        work = "planning" if goal.dry_run else "motion"
        return (
            f"{CANCEL_ACCEPTED}: the goal ends after unit {number} (its {work} runs to its end); {HALT_NOW}"
        )

    def stop(self) -> Reply:
        """Stop now: halt the motion at once (controlled deceleration) and abort the goal.

        Unlike :meth:`cancel`, this does not wait for the unit boundary: the backend is
        told to stop in the caller's thread (so it happens even while the goal thread is
        busy planning), the tree is halted (its running leaves stop what they started,
        nothing more is dispatched) and the goal ends ABORTED with ``error_code``
        ``STOPPED``. The orchestrator ends IDLE, not FAULTED. Works while paused and
        during planning. Idempotent; with no goal running it still stops the arm.

        Returns:
            Always ``success`` True: the arm has been told to stop.
        """
        goal = self._halt(Halt(HaltReason.STOPPED, "stopped by operator request"))
        if goal is None:
            return Reply(True, "No task is currently executing; motion stopped")
        return Reply(True, f"Stopping {goal.goal_id}: motion halted, the goal is aborted")

    def reset_fault(self, by: str = "") -> Reply:
        """Clear FAULTED after the operator has checked the cell (EROBS needs a restart).

        Refused when the orchestrator is not faulted. A reset is reported to the listeners
        as a ``fault_reset`` event (goal id ``""``: no goal runs) with ``t`` (when),
        ``fault`` (the fault that was cleared), ``faulted_goal_id`` (the goal that faulted)
        and ``by`` (who asked): the run logs record it (the CLI's run log; the node's, in
        the faulted goal's log, :class:`erobs_bt.ros.node.runlogs.NodeRunLogs`) and the node
        logs it.

        Args:
            by: who asked, as a person reads it (``service /erobs_bt/reset_fault``, ``web
                console (127.0.0.1:51234)``); default ``in-process call``.
        """
        try:
            with self._lock:
                if self._state is not State.FAULTED:
                    return Reply(False, f"Not faulted (state {self._state.value}); nothing to reset")
                reason, self._fault_reason = self._fault_reason, ""
                faulted, self._fault_goal_id = self._fault_goal_id, ""
                self._state = State.IDLE
                self._outbox.append((State.IDLE, f"fault reset (was: {reason})", ""))
        finally:
            self._deliver()
        self._emit("", "fault_reset", fault=reason, faulted_goal_id=faulted, by=by or "in-process call")
        return Reply(True, f"Fault cleared: {reason}")

    def reset_simulation(self, by: str = "") -> Reply:
        """Put the simulated cell back in its initial state (``~/reset_simulation``,
        ``erobs-bt reset-sim``, the web console, ``erobs-bt run --repeat``).

        Refused, and nothing changes, when :meth:`admission` would refuse a goal for being
        busy (a goal runs or is starting: ``busy: goal-3 is RUNNING``) or the orchestrator
        no longer admits goals; refused when the backend is not a simulation this process
        runs (its message says so). While the reset runs, its place is held like a goal's
        (:class:`Reservation`): a goal arriving then is refused ``busy: the simulation is
        being reset``. A FAULTED orchestrator stays FAULTED (the fault is the operator's to
        clear, :meth:`reset_fault`).

        What the backend restores is its own (:meth:`MotionStack.reset_simulation
        <erobs_bt.backends.stack.MotionStack.reset_simulation>`): arm, tools, docks, held part,
        pipettor. The plan cache is kept: a cached solution is keyed by its start joints and
        model revision, and a replay that does not start at the live state fails before
        anything moves and is planned afresh (the replay rule, docs/behaviour.md).

        A reset is reported to the listeners as a ``simulation_reset`` event (goal id ``""``)
        with ``t``, ``by`` (who asked), ``cell`` (what the cell is now) and
        ``previous_goal_id`` (the latest goal, ``""`` when none); the node's run logs append it
        to that goal's log and the node logs it. The state does not change (no state message:
        EROBS's state text says IDLE once after every goal, and a reset is no goal).

        Args:
            by: who asked, as a person reads it; default ``in-process call``.

        Returns:
            ``success`` True with what the cell is now; False with why not.
        """
        by = by or "in-process call"
        backend = self.backend
        reset = backend.reset_simulation if isinstance(backend, ResetsSimulation) else None
        try:
            with self._lock:
                refusal: GoalRejected | None = (
                    GoalRejected(f"SHUTDOWN: {self._closed}", error_code="SHUTDOWN") if self._closed else None
                ) or self._busy()
                if refusal is not None:
                    return Reply(False, f"reset refused: {refusal}")
                if reset is None:
                    return Reply(
                        False,
                        f"reset refused: the {type(self.backend).__name__} backend has no simulation "
                        "to reset",
                    )
                reservation = self._reservation = Reservation(self, "the simulation is being reset")
                previous = self._last_goal_id
        finally:
            self._deliver()
        try:
            cell = str(reset())
        except MotionError as exc:
            return Reply(False, f"reset refused: {exc.detail}")
        finally:
            reservation.release()
        self._docks_as_stated = True  # the docks hold what was stated again
        self._emit("", "simulation_reset", by=by, cell=cell, previous_goal_id=previous)
        return Reply(True, f"simulation reset: {cell}")

    def clear_cache(self) -> Reply:
        """Drop every cached solution."""
        cleared = self.cache.clear()
        return Reply(True, f"cleared {count(cleared, 'cached solution')}")

    def shutdown(self, timeout: float = 10.0, *, reason: str = SHUTDOWN_REASON) -> None:
        """Halt the running goal (it aborts with ``SHUTDOWN: <reason>``), stop the backend's
        motion and join the goal thread (at most ``timeout`` seconds)."""
        self._halt(Halt(HaltReason.SHUTDOWN, reason))
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread() and thread.ident is not None:
            thread.join(timeout)

    def _halt(self, halt: Halt) -> GoalHandle | None:
        """Mark the goal halted, then stop the backend from this thread; the goal thread
        halts the tree before its next tick."""
        with self._lock:
            goal, controls = self._goal, self._controls
            if controls is not None:
                controls.request_halt(halt)
        # Outside the lock and after the halt is recorded: a future failing because of this
        # stop is seen by the goal thread only after it knows the goal is being halted.
        self.backend.stop()
        return goal

    # -- the goal thread -----------------------------------------------------------
    def _check_stated_docks(self, start_gripper: str) -> None:
        """Refuse the first goal since the start or a reset whose ``start_gripper`` the stated
        dock contents hold in a dock (:func:`~erobs_bt.script.vocabulary.dock_conflict`),
        before anything moves; once a goal passes, later goals swap tools by hand.

        Raises:
            MotionError: ``EXECUTION_FAILED: dock 1 holds the hande, but …``.
        """
        if self._stated_docks is None or not self._docks_as_stated:
            return
        conflict = dock_conflict(self._stated_docks, start_gripper)
        if conflict is not None:
            raise MotionError(ErrorCode.EXECUTION_FAILED, conflict)
        self._docks_as_stated = False

    def _run(self, handle: GoalHandle) -> None:
        ctx = handle.context
        root = handle.root
        assert ctx is not None and root is not None and handle.script is not None
        events = ctx.events
        assert isinstance(events, _GoalEventsAdapter)
        statistics = self.tick_statistics = TickStatistics()
        try:
            if ctx.controls.halt is None:
                self._check_stated_docks(handle.script.start_gripper)
                self.backend.prepare_goal(handle.script.start_gripper)
                docks = self.backend.dock_contents()
                problem = dock_problem(handle.script.steps, docks) if docks is not None else ""
                if problem:  # before anything moves: the tool changer as it is now
                    raise MotionError(ErrorCode.EXECUTION_FAILED, problem)
            self._emit(
                handle.goal_id,
                "goal_started",
                mode=ctx.mode.value,
                total_steps=len(handle.script.steps),
                units=len(handle.units),
                eligible=ctx.eligible,
            )
            while ctx.controls.halt is None:
                self._wake.clear()
                events.announce()  # a cancel accepted since the last tick: its feedback, now
                visits = 0
                statistics.started()
                for _node in root.tick():
                    visits += 1
                statistics.ended()
                self.last_tick_visits = visits
                self.ticks += 1
                self._after_tick(events)
                self.listener.ticked(handle.goal_id, root)
                if root.status != Status.RUNNING:
                    break
                self._wake.wait(self.safety_period)
        except MotionError as exc:
            ctx.fail(exc)
            ctx.fault = ctx.fault or fault_of(ctx)
        except Exception as exc:
            ctx.fail(MotionError(ErrorCode.EXECUTION_FAILED, f"{type(exc).__name__}: {exc}"))
        finally:
            if root.status == Status.RUNNING:
                # Halted, or the loop ended abnormally with work in flight: stop the robot
                # first, then halt the tree (each running leaf stops what it started).
                self.backend.stop()
                root.stop(Status.INVALID)
            # However the goal ended, a plan made ahead for a unit that will not run now is
            # dropped (it never reaches the cache: only a unit that uses a plan stores it).
            ctx.drop_plan_ahead("the goal ended")
            self._finish(handle)

    def _after_tick(self, events: _GoalEventsAdapter) -> None:
        """Decide the state from what the tree reported during the tick."""
        try:
            with self._lock:
                controls = self._controls
                if (
                    events.parked is not None
                    and self._state in (State.RUNNING, State.COMPLETING_TASK)
                    and controls is not None
                    and not controls.resume_requested
                ):
                    self._transition(State.PAUSED, events.parked)
        finally:
            self._deliver()

    def _finish(self, handle: GoalHandle) -> None:
        ctx = handle.context
        assert ctx is not None and handle.script is not None
        events = ctx.events
        assert isinstance(events, _GoalEventsAdapter)
        events.announce()  # a cancel accepted during the last tick: its feedback before the result
        total = len(handle.script.steps)
        completed = events.completed_steps
        root_ok = handle.root is not None and handle.root.status == Status.SUCCESS
        try:
            with self._lock:
                halt = ctx.controls.halt
                failure = ctx.failure
                if ctx.fault is not None:
                    error = str(failure) if failure is not None else ctx.fault
                    code = failure.code.value if failure is not None else ErrorCode.EXECUTION_FAILED.value
                    result = Result(GoalStatus.ABORTED, error, code, completed, total)
                    self._fault_reason = ctx.fault
                    self._fault_goal_id = handle.goal_id
                    next_state, message = State.FAULTED, ctx.fault
                elif halt is not None:
                    where = f" during {events.where()}" if events.current is not None else ""
                    error = f"{halt.reason.value}: {halt.message}{where}"
                    result = Result(GoalStatus.ABORTED, error, halt.reason.value, completed, total)
                    next_state, message = State.IDLE, f"{handle.goal_id} aborted: {error}"
                elif ctx.finish_reason is FinishReason.CANCELED or (
                    root_ok and ctx.controls.cancel_requested
                ):
                    # A cancel accepted before the goal finished wins over success, even one
                    # that arrived after the last boundary was passed.
                    cancel_message = ctx.cancel_message or "cancelled"
                    if cancel_message == "cancelled while paused":  # where it ended, for the result
                        cancel_message = f"{cancel_message} {events.paused_at()}; {AT_REST}"
                    result = Result(GoalStatus.CANCELED, cancel_message, "CANCELED", completed, total)
                    next_state, message = State.IDLE, f"{handle.goal_id} {cancel_message}"
                elif root_ok:
                    result = Result(GoalStatus.SUCCEEDED, "", "", completed, total, detected=ctx.detected)
                    next_state, message = State.IDLE, f"{handle.goal_id} succeeded"
                else:
                    why = failure or MotionError(
                        ErrorCode.EXECUTION_FAILED, "goal ended without a recorded error"
                    )
                    result = Result(GoalStatus.ABORTED, str(why), why.code.value, completed, total)
                    next_state, message = State.IDLE, f"{handle.goal_id} aborted: {why}"
                self._goal = None
                self._controls = None
                self._thread = None
                self._transition(next_state, message, goal_id=handle.goal_id)
        finally:
            self._deliver()
        self._emit(
            handle.goal_id,
            "goal_finished",
            status=result.status.value,
            error=result.error_message,
            error_code=result.error_code,
            completed_steps=completed,
            total_steps=total,
        )
        self.listener.finished(handle.goal_id, result)
        handle._finish(result)

    # -- helpers ---------------------------------------------------------------------
    def _transition(self, state: State, message: str, *, goal_id: str | None = None) -> None:
        """Change the state (caller holds the lock); listeners hear of it in :meth:`_deliver`.

        FAULTED is left only through :meth:`reset_fault`.
        """
        if self._state is State.FAULTED and state is not State.FAULTED:
            return
        self._state = state
        if goal_id is None:
            goal_id = self._goal.goal_id if self._goal is not None else ""
        self._outbox.append((state, message, goal_id))

    def _deliver(self) -> None:
        """Tell the listeners of queued state changes, in order, outside the lock.

        One thread delivers at a time; a change queued meanwhile by another thread is
        delivered by the one already delivering, so the order is the order of change.
        Must not be called with the lock held.
        """
        while True:
            with self._lock:
                if self._delivering or not self._outbox:
                    return
                self._delivering = True
                state, message, goal_id = self._outbox.popleft()
            try:
                self.listener.state_changed(state, message)
                self._emit(goal_id, "state", state=state.value, message=message)
            finally:
                with self._lock:
                    self._delivering = False

    def _emit(self, goal_id: str, event: str, **fields: Any) -> None:
        self.listener.event(goal_id, {"t": time.time(), "event": event, **fields})


class Reservation:
    """A goal's place, held from its admission (:meth:`Orchestrator.reserve`) until it is
    submitted (:meth:`Orchestrator.submit` with ``reservation=``) or released; while it is
    held, no other goal is admitted (``busy: a goal is starting``)."""

    def __init__(self, orchestrator: Orchestrator, what: str = "a goal is starting") -> None:
        self._orchestrator = orchestrator
        #: What holds the place, for the refusal of others (``busy: <what>``).
        self.what = what

    def release(self) -> None:
        """Give the place up without submitting (the goal was cancelled before it started).
        Idempotent; a no-op once submitted."""
        self._orchestrator._release(self)


class _GoalEventsAdapter(GoalEvents):
    """Turns tree events into feedback and run-log records, and keeps what the
    orchestrator reads after each tick (the running unit, whether the goal is parked)."""

    def __init__(self, orchestrator: Orchestrator, handle: GoalHandle) -> None:
        self.orchestrator = orchestrator
        self.handle = handle
        assert handle.script is not None
        self.total = len(handle.script.steps)
        self.completed_steps = 0
        self.current: Unit | None = None
        self.cache_status = ""
        self.message = ""
        # What the running unit's replay did beside the plain replay (refused by the scene
        # check's SCENE_CHANGED, or sent unchecked from another planning-scene revision), kept
        # in its status messages until the unit ends: feedback is published at a bounded rate,
        # so a message of its own could be skipped.
        self.replay_note = ""
        # The running unit has succeeded (the next one has not started).
        self.unit_done = False
        # What an accepted cancel will do (Orchestrator.cancel), kept in every later status
        # message of the goal; ``_announce``: not yet published (the goal thread does it).
        self.cancel_notice = ""
        self._announce = False
        self.parked: str | None = None
        self.planning: Unit | None = None  # the unit whose plan phase has started, not ended

    def paused_at(self) -> str:
        """Where a paused goal stands, for the notice and the result of its cancel:
        ``after unit 2 of 5 (3 of 9 steps done)``, ``at unit 3 of 5, pause (…)`` (a ``pause``
        step holds it) or ``before its first unit (0 of 9 steps done)``."""
        unit = self.current
        done = f"{self.completed_steps} of {self.total} steps done"
        if unit is None:
            return f"before its first unit ({done})"
        number = f"unit {unit.index + 1} of {len(self.handle.units)}"
        if self.unit_done:
            return f"after {number} ({done})"
        return f"at {number}, {unit.label} ({done})"

    def where(self) -> str:
        """``unit 2/5 (batch[2]: moveto, end_effector)`` for the running unit."""
        unit = self.current
        if unit is None:
            return "no unit"
        return f"unit {unit.index + 1}/{len(self.handle.units)} ({unit.label})"

    def _publish(self) -> None:
        unit = self.current
        feedback = Feedback(
            current_step=unit.first_step + 1 if unit else 0,
            total_steps=self.total,
            current_action=unit.label if unit else "",
            progress_percentage=100.0 * self.completed_steps / self.total if self.total else 100.0,
            status_message=self._status_message(),
            current_gripper=self.orchestrator.backend.current_gripper(),
            unit_index=unit.index + 1 if unit else 0,
            cache_status=self.cache_status,
        )
        self.orchestrator.listener.feedback(self.handle.goal_id, feedback)

    def _status_message(self) -> str:
        """The message, then what must not be lost to the feedback's rate bound: the unit's
        replay note and the accepted cancel's notice, each once, in parentheses."""
        text = self.message
        for note in (self.replay_note, self.cancel_notice):
            if note and note not in text:
                text = f"{text} ({note})"
        return text

    def _emit(self, event: str, **fields: Any) -> None:
        self.orchestrator._emit(self.handle.goal_id, event, **fields)

    def cancel_accepted(self, notice: str) -> None:
        """A cancel was accepted (:meth:`Orchestrator.cancel`, any thread): keep its notice
        for every later feedback; the goal thread publishes one at once (:meth:`announce`)."""
        self.cancel_notice = notice
        self._announce = True

    def announce(self) -> None:
        """On the goal thread: publish a feedback when a cancel was accepted since the last one
        (feedback comes from the goal thread only: the ROS cancel callback accepts a cancel
        while holding the lock the action's feedback needs)."""
        if self._announce:
            self._announce = False
            self._publish()

    def unit_started(self, unit: Unit) -> None:
        self.current = unit
        self.unit_done = False
        self.cache_status = ""
        self.replay_note = ""
        self.message = f"unit {unit.index + 1}/{len(self.handle.units)}: {unit.label}"
        self._emit("unit_started", unit=unit.index + 1, label=unit.label, first_step=unit.first_step + 1)
        self._publish()

    def unit_succeeded(self, unit: Unit) -> None:
        self.completed_steps += len(unit.steps)
        self.unit_done = True
        self.message = f"unit {unit.index + 1} done"
        self._emit("unit_succeeded", unit=unit.index + 1, completed_steps=self.completed_steps)
        self._publish()

    def cache_decision(self, unit: Unit, status: CacheStatus, digest: str = "") -> None:
        self.cache_status = status.value
        self._emit("cache", unit=unit.index + 1, status=status.value, key=digest)
        self._publish()

    def phase(self, unit: Unit, phase: str, seconds: float | None = None, detail: str = "") -> None:
        if phase == "plan":
            self.planning = unit if seconds is None else None
        if seconds is None:
            self.message = f"unit {unit.index + 1}: {phase}"
            self._emit(f"{phase}_started", unit=unit.index + 1, detail=detail)
        else:
            self.message = f"unit {unit.index + 1}: {phase} {detail}".strip()
            if phase == "replay" and detail.startswith("refused"):
                self.replay_note = f"replay {detail}"
            self._emit(f"{phase}_finished", unit=unit.index + 1, seconds=round(seconds, 6), detail=detail)
        self._publish()

    def replay_unchecked(self, unit: Unit, notice: str) -> None:
        self.replay_note = notice
        self._emit("replay_unchecked", unit=unit.index + 1, message=notice)
        self._publish()

    def plan_progress(self, steps: tuple[Any, ...], planned: int, moves: int) -> None:
        """``unit 2: plan, 3/16 moves planned`` while ``steps`` are the unit being planned (a
        plan ahead of a later unit, or a tool exchange's own moves, says nothing here).
        Called from the planning thread, before the plan's future completes, so the plan's
        end (:meth:`phase`, on the goal thread) always comes after it."""
        unit = self.planning
        if (
            unit is None
            or len(unit.steps) != len(steps)
            or any(a is not b for a, b in zip(unit.steps, steps, strict=True))
        ):
            return
        self.message = f"unit {unit.index + 1}: plan, {planned}/{count(moves, 'move')} planned"
        self._publish()

    def paused(self, reason: str) -> None:
        # The orchestrator turns this into PAUSED after the tick (_after_tick).
        self.parked = reason
        self.message = reason
        self._publish()

    def resumed(self) -> None:
        self.parked = None
        self.message = "resumed"
        self._publish()

    def preview(self, unit: Unit, solution: Solution) -> None:
        self.orchestrator.listener.preview(self.handle.goal_id, solution)

    def plan_ahead(self, unit: Unit, status: str, detail: str = "") -> None:
        self._emit("plan_ahead", unit=unit.index + 1, status=status, detail=detail)

"""The leaves of a compiled tree.

Every leaf that waits for the robot follows the same non-blocking pattern
(:class:`FutureBehaviour`): ``initialise()`` starts the work and gets a
:class:`concurrent.futures.Future` from the backend, ``update()`` polls it and returns
RUNNING until it is done, ``terminate()`` is idempotent and, when the behaviour is
halted (``terminate(INVALID)``: a parent's preemption, ``root.stop()``, the
orchestrator's stop) with work in flight, **stops the motion it started**
(:meth:`MotionBackend.stop`, a controlled deceleration) and cancels the future: a
preemption is a stop, not a detach (docs/design.md §2). A leaf whose goal is being halted
starts nothing. A future's completion calls the context's ``wake`` so the orchestrator
ticks again at once instead of on a timer. Per-type execution timeouts are enforced here: past them
the backend is stopped and the unit fails with ``TIMEOUT:`` (``REPLAY_TIMEOUT:`` for a
replay), which faults the orchestrator.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Any

import py_trees
from py_trees.common import Status

from erobs_bt.backends.base import ErrorCode, MotionError, ReportsFinalPlan, Solution, as_motion_error
from erobs_bt.batching import Unit
from erobs_bt.goal import unchecked_replay_notice
from erobs_bt.timeouts import PLANNING_STEPS_PER_TIMEOUT
from erobs_bt.tree.context import (
    CacheStatus,
    FinishReason,
    GoalContext,
    Mode,
)
from erobs_bt.tree.plan_ahead import FinalPlanAhead


class FutureBehaviour(py_trees.behaviour.Behaviour):
    """Base of the leaves that start backend work and poll its future.

    Subclasses implement :meth:`start` (return a future, or a final status when no
    work is needed), :meth:`on_success` and :meth:`on_error`.

    Args:
        name: behaviour name shown in the tree.
        context: the goal context.
        unit: the unit this leaf works for.
        timeout: [s] after which the work is stopped and reported as ``timeout_code``;
            ``None`` for no timeout.
        timeout_code: error code reported on timeout.

    Class attribute ``moves``: the work dispatches arm or tool motion, so halting the
    behaviour (or its timeout) must stop the robot. Planning does not move anything.
    """

    moves = True

    def __init__(
        self,
        name: str,
        context: GoalContext,
        unit: Unit,
        *,
        timeout: float | None,
        timeout_code: ErrorCode = ErrorCode.TIMEOUT,
    ) -> None:
        super().__init__(name)
        self.context = context
        self.unit = unit
        self.timeout = timeout
        self.timeout_code = timeout_code
        self._future: Future[Any] | None = None
        self._immediate: Status | None = None
        self._started = 0.0

    def start(self) -> Future[Any] | Status:
        """Start the work. Raising is the same as returning a failed future."""
        raise NotImplementedError

    def on_success(self, result: Any, seconds: float) -> Status:
        """The future completed with ``result`` after ``seconds``."""
        raise NotImplementedError

    def on_error(self, error: MotionError, seconds: float) -> Status:
        """The work failed (error from the future, an exception from :meth:`start`, a timeout)."""
        raise NotImplementedError

    def initialise(self) -> None:
        """Start the work (:meth:`start`); nothing starts while the goal is being halted."""
        self._future = None
        self._immediate = None
        self._started = time.monotonic()
        if self.context.controls.halt is not None:
            self.feedback_message = f"not started: {self.context.controls.halt.message}"
            self._immediate = Status.FAILURE
            return
        try:
            started = self.start()
        except Exception as exc:
            self._immediate = self.on_error(as_motion_error(exc, default=ErrorCode.EXECUTION_FAILED), 0.0)
            return
        if isinstance(started, Status):
            self._immediate = started
        else:
            self._future = started
            started.add_done_callback(lambda _f: self.context.wake())

    def timeout_source(self) -> str:
        """Where :attr:`timeout` comes from and which parameter raises it, for the timeout's
        message. The default: the sum of the unit's steps' per-type execution timeouts."""
        kinds = sorted({step.task_type for step in self.unit.steps})
        names = ", ".join(f"timeout.{kind}" for kind in kinds)
        return f"the sum of its steps' execution timeouts; raise {names}"

    def update(self) -> Status:
        """Poll the future: RUNNING until done, then :meth:`on_success`/:meth:`on_error`."""
        if self._immediate is not None:
            return self._immediate
        assert self._future is not None
        elapsed = time.monotonic() - self._started
        if not self._future.done():
            if self.timeout is not None and elapsed > self.timeout:
                if self.moves:
                    self.context.backend.stop()
                self._future.cancel()
                self._immediate = self.on_error(
                    MotionError(
                        self.timeout_code,
                        f"{self.name} exceeded its {self.timeout:.1f} s timeout ({self.timeout_source()})",
                    ),
                    elapsed,
                )
                return self._immediate
            return Status.RUNNING
        exc = self._future.exception()
        if exc is not None:
            self._immediate = self.on_error(as_motion_error(exc, default=ErrorCode.EXECUTION_FAILED), elapsed)
        else:
            self._immediate = self.on_success(self._future.result(), elapsed)
        return self._immediate

    def terminate(self, new_status: Status) -> None:
        """Halted with work in flight: stop the motion it started, then drop the future.

        Idempotent: the future is forgotten, so a second call does nothing. A behaviour
        that finished (SUCCESS/FAILURE) has nothing in flight and stops nothing.
        """
        future, self._future = self._future, None
        if new_status == Status.INVALID and future is not None and not future.done():
            if self.moves:
                self.context.backend.stop()
            future.cancel()
            self.feedback_message = "halted"


class ReplayCached(FutureBehaviour):
    """Replay the cached solution of an eligible goal.

    FAILURE at once, with no dispatch, when the goal is ineligible or the cache has no
    entry under the unit's key (the selector then plans afresh). On a hit, the stored
    solution is executed with ``replay=True``. A fatal error (``REPLAY_TIMEOUT:``/
    ``TIMEOUT:``) is recorded as the goal's failure so that the fresh branch is never
    entered; any other error (server unavailable, goal rejected, an unsuccessful result,
    a caught exception) is logged and the selector plans the whole unit afresh, once.

    With the opt-in scene check (``replay_scene_check``) a hit planned in another
    planning-scene revision than the present one is first checked densely against the
    scene as it is now (:meth:`MotionBackend.check_replay`, before anything is sent); a
    problem refuses the replay with the non-fatal ``SCENE_CHANGED:`` error, so the unit is
    planned afresh once, as the specification's replay table treats any non-fatal error.
    A hit planned in the present revision is sent unchecked: its plan was checked in this
    very scene. Without the check (the default, the specification's replay), a hit planned
    in another revision is sent unchecked all the same, and the goal's events say so
    (:meth:`GoalEvents.replay_unchecked`: feedback, run log, console), naming the parameter
    that would check it.
    """

    def __init__(self, context: GoalContext, unit: Unit) -> None:
        super().__init__(
            "ReplayCached",
            context,
            unit,
            timeout=context.timeout_for(unit),
            timeout_code=ErrorCode.REPLAY_TIMEOUT,
        )

    def start(self) -> Future[None] | Status:
        ctx = self.context
        if ctx.mode is not Mode.EXECUTE or not ctx.eligible:
            ctx.events.cache_decision(self.unit, CacheStatus.INELIGIBLE)
            self.feedback_message = "ineligible"
            return Status.FAILURE
        # The key was taken when the unit started (after its boundary, where the goal may
        # have been paused), from the robot as it was then; it is also the store key.
        key = ctx.unit_key
        if key is None:
            ctx.begin_unit(self.unit)
            key = ctx.unit_key
        assert key is not None
        entry = ctx.cache.lookup(key)
        if entry is None:
            ctx.events.cache_decision(self.unit, CacheStatus.MISS, key.digest())
            self.feedback_message = "miss"
            return Status.FAILURE
        # The entry carries the key's digest and the motion time (computed when it was
        # stored): a hit encodes and hashes nothing.
        ctx.events.cache_decision(self.unit, CacheStatus.HIT, entry.digest)
        if ctx.settings.replay_scene_check:
            refusal = self._scene_refusal(entry.solution)
            if refusal is not None:
                self.feedback_message = str(refusal)
                ctx.events.phase(self.unit, "replay", 0.0, f"refused, planning afresh: {refusal}")
                return Status.FAILURE
        else:
            self._tell_unchecked(entry.solution)
        ctx.start_plan_ahead(self.unit, entry.solution)
        ctx.events.phase(self.unit, "replay", detail=f"{entry.duration:.2f} s of motion")
        self.feedback_message = "replaying"
        return ctx.backend.execute(entry.solution, replay=True)

    def _scene_refusal(self, solution: Solution) -> MotionError | None:
        """The ``SCENE_CHANGED`` error refusing ``solution``'s replay, or ``None`` to send it.

        Unchecked when it was planned in the present scene revision; else checked now, in
        the tick thread (a dense collision check, a few ms per segment: bench/).
        """
        backend = self.context.backend
        now = self._scene_changed(solution)
        if now is None:
            return None
        planned_in = solution.scene_revision
        problem = backend.check_replay(solution, self.unit.steps)
        if problem is None:
            return None
        was = planned_in if planned_in is not None else "unknown"
        return MotionError(
            ErrorCode.SCENE_CHANGED,
            f"the planning scene changed since this trajectory was planned (revision {was}, "
            f"now {now}); {problem}",
        )

    def _scene_changed(self, solution: Solution) -> str | None:
        """The planning scene's revision now when ``solution`` was planned in another one (or
        in one it did not record); ``None`` when it was planned in this very scene."""
        now = self.context.backend.scene_revision()
        planned_in = solution.scene_revision
        return None if planned_in is not None and planned_in == now else now

    def _tell_unchecked(self, solution: Solution) -> None:
        """Without the scene check, a hit planned in another planning-scene revision (or one
        not recorded) is sent as the specification's replay is, unchecked: say so
        (:meth:`GoalEvents.replay_unchecked`), naming what would check it. One revision read,
        no collision check."""
        now = self._scene_changed(solution)
        if now is None:
            return
        backend = self.context.backend
        notice = unchecked_replay_notice(solution.scene_revision, now, checkable=backend.checks_replay)
        self.context.events.replay_unchecked(self.unit, notice)

    def on_success(self, result: Any, seconds: float) -> Status:
        self.context.events.phase(self.unit, "replay", seconds, "done")
        self.feedback_message = "replayed"
        return Status.SUCCESS

    def on_error(self, error: MotionError, seconds: float) -> Status:
        self.feedback_message = str(error)
        if error.fatal:
            self.context.fail(error)
            self.context.events.phase(self.unit, "replay", seconds, f"failed: {error}")
        else:
            self.context.events.phase(self.unit, "replay", seconds, f"failed, planning afresh: {error}")
        return Status.FAILURE


class ReplayNotFatal(py_trees.behaviour.Behaviour):
    """Guard at the head of the ``fresh`` branch: FAILURE when the replay failed fatally.

    This is what guarantees "exactly one dispatch, then FAULTED": after a fatal replay
    error the selector's next child fails here, before anything is planned or sent.
    """

    def __init__(self, context: GoalContext) -> None:
        super().__init__("ReplayNotFatal?")
        self.context = context

    def update(self) -> Status:
        """FAILURE when the goal's failure is fatal, else SUCCESS."""
        return Status.FAILURE if self.context.fatal else Status.SUCCESS


class PlanUnit(FutureBehaviour):
    """Plan the unit's steps as one connected sequence from the live robot state.

    On success the solution is kept in the context for :class:`ExecuteSolution`; in
    preview mode it is published as the preview and, for an eligible goal, stored in
    the plan cache (replacing an older entry). A failed plan fails the unit and leaves
    the cache untouched.

    In preview mode it also reports the unit's cache decision (the interface's
    ``cache_status`` for motion units): ``INELIGIBLE``, or for an eligible goal ``HIT``
    when the cache already holds an entry under the unit's key (the preview plans
    afresh anyway and replaces it) and ``MISS`` when it does not.

    In execute mode it first takes the unit's plan-ahead
    (:meth:`GoalContext.take_plan_ahead`): when it may be used, its future is this
    behaviour's work (possibly still planning). Should that plan-ahead fail, or have been
    planned in another planning-scene revision than the present one (an object was added,
    moved or removed since: the change applies to the next plan, so a plan made before it
    is not used), the unit plans afresh from the live state once, and reports that plan's
    outcome: a discarded plan-ahead never fails a unit by itself.
    """

    moves = False
    _ahead = False

    def __init__(self, context: GoalContext, unit: Unit) -> None:
        super().__init__(
            "PlanUnit",
            context,
            unit,
            timeout=context.planning_timeout_for(unit),
            timeout_code=ErrorCode.PLANNING_FAILED,
        )

    def timeout_source(self) -> str:
        """The planning timeout's source: ``timeout.planning`` per started block of
        :data:`~erobs_bt.timeouts.PLANNING_STEPS_PER_TIMEOUT` steps."""
        per = self.context.timeouts["planning"]
        return (
            f"timeout.planning {per:g} s per {PLANNING_STEPS_PER_TIMEOUT} steps, {len(self.unit.steps)} "
            "steps; raise the timeout.planning parameter"
        )

    def start(self) -> Future[Solution]:
        ctx = self.context
        if ctx.mode is Mode.PREVIEW:
            key = ctx.unit_key
            if key is None:
                ctx.events.cache_decision(self.unit, CacheStatus.INELIGIBLE)
            else:
                status = CacheStatus.HIT if key in ctx.cache else CacheStatus.MISS
                ctx.events.cache_decision(self.unit, status, key.digest())
        self._ahead = False
        if ctx.mode is Mode.EXECUTE:
            ahead = ctx.take_plan_ahead(self.unit)
            if ahead is not None:
                self._ahead = True
                ctx.events.phase(self.unit, "plan", detail="planned ahead")
                self.feedback_message = "planned ahead"
                return ahead
        ctx.events.phase(self.unit, "plan")
        self.feedback_message = "planning"
        return ctx.backend.plan(self.unit.steps, start=None)

    def update(self) -> Status:
        """As :meth:`FutureBehaviour.update`; a failed or stale plan-ahead is replaced by a
        fresh plan."""
        future = self._future
        reason = self._discard_reason(future) if self._ahead and future is not None and future.done() else ""
        if reason:
            self._ahead = False
            ctx = self.context
            ctx.events.plan_ahead(self.unit, "discarded", f"{reason}; planning afresh")
            self.feedback_message = "planning"
            try:
                fresh = ctx.backend.plan(self.unit.steps, start=None)
            except Exception as exc:
                self._future = None
                self._immediate = self.on_error(as_motion_error(exc, default=ErrorCode.PLANNING_FAILED), 0.0)
                return self._immediate
            self._future = fresh
            fresh.add_done_callback(lambda _f: ctx.wake())
        return super().update()

    def _discard_reason(self, future: Future[Solution]) -> str:
        """Why a finished plan-ahead may not be used (``""``: it may): it failed, or the
        planning scene changed since it was planned."""
        if future.cancelled():
            return "failed: cancelled"
        if future.exception() is not None:
            return f"failed: {future.exception()}"
        planned_in = future.result().scene_revision
        if planned_in is None:
            return ""
        now = self.context.backend.scene_revision()
        if planned_in != now:
            return f"planned in planning-scene revision {planned_in}, the scene is now {now}"
        return ""

    def on_success(self, result: Any, seconds: float) -> Status:
        ctx = self.context
        solution: Solution = result
        ctx.solutions[self.unit.index] = solution
        ctx.events.phase(self.unit, "plan", seconds, f"{solution.duration:.2f} s of motion")
        if ctx.mode is Mode.PREVIEW:
            ctx.events.preview(self.unit, solution)
            ctx.store(solution)
        self.feedback_message = "planned"
        return Status.SUCCESS

    def on_error(self, error: MotionError, seconds: float) -> Status:
        self.context.fail(error)
        self.context.events.phase(self.unit, "plan", seconds, f"failed: {error}")
        self.feedback_message = str(error)
        return Status.FAILURE


class ExecuteSolution(FutureBehaviour):
    """Execute the solution :class:`PlanUnit` produced; store it when the goal is eligible.

    Just before dispatching it, it starts the plan-ahead of the next motion unit from the
    solution's end state (:meth:`GoalContext.start_plan_ahead`).
    """

    def __init__(self, context: GoalContext, unit: Unit) -> None:
        super().__init__("ExecuteSolution", context, unit, timeout=context.timeout_for(unit))

    def start(self) -> Future[None]:
        ctx = self.context
        solution = ctx.solutions[self.unit.index]
        # Before the dispatch: the backend takes the tool state now as the one it starts in.
        ctx.start_plan_ahead(self.unit, solution)
        ctx.events.phase(self.unit, "execute")
        self.feedback_message = "executing"
        return ctx.backend.execute(solution, replay=False)

    def on_success(self, result: Any, seconds: float) -> Status:
        ctx = self.context
        ctx.store(ctx.solutions[self.unit.index])
        ctx.events.phase(self.unit, "execute", seconds, "done")
        self.feedback_message = "executed"
        return Status.SUCCESS

    def on_error(self, error: MotionError, seconds: float) -> Status:
        self.context.fail(error)
        self.context.events.phase(self.unit, "execute", seconds, f"failed: {error}")
        self.feedback_message = str(error)
        return Status.FAILURE


class RunSingleStep(FutureBehaviour):
    """Run a non-batched step on the backend (tool exchange, pipettor, vision, …).

    A vision step whose backend reports its final motion's plan lets the next motion unit be
    planned from that plan while the motion executes (:class:`FinalPlanAhead`): the plans are
    requested on the backend's thread and adopted as the goal's plan-ahead at the next tick.
    """

    def __init__(self, context: GoalContext, unit: Unit) -> None:
        super().__init__(f"Run {unit.label}", context, unit, timeout=context.timeout_for(unit))
        self._final: FinalPlanAhead | None = None

    def start(self) -> Future[str]:
        ctx = self.context
        ctx.events.phase(self.unit, "run")
        self.feedback_message = "running"
        # A step that does not move the arm (pipettor) lets the next motion unit be planned
        # meanwhile; for any other step start_plan_ahead finds nothing to plan.
        ctx.start_plan_ahead(self.unit, None)
        step = self.unit.steps[0]
        self._final = ctx.plan_ahead_from_final_plan(self.unit)
        if self._final is not None:
            backend = ctx.backend
            assert isinstance(backend, ReportsFinalPlan)
            return backend.run_step_reporting(step, on_final_plan=self._final)
        return ctx.backend.run_step(step)

    def update(self) -> Status:
        """Adopt a plan-ahead requested from the step's final motion (:class:`FinalPlanAhead`),
        then poll the step's future as :meth:`FutureBehaviour.update`."""
        if self._final is not None:
            self._final.adopt()
        return super().update()

    def terminate(self, new_status: Status) -> None:
        """Drop a plan-ahead requested but not adopted, then as :meth:`FutureBehaviour.terminate`."""
        final, self._final = self._final, None
        if final is not None:
            if new_status == Status.SUCCESS:
                final.adopt()
            else:
                final.discard()
        super().terminate(new_status)

    def on_success(self, result: Any, seconds: float) -> Status:
        """Report the step's message; keep what a ``detect_only`` step detected (the
        goal's result reports the last detection, as EROBS's does)."""
        detected = getattr(result, "detected", None)
        if detected is not None:
            self.context.detected = detected
        self.context.events.phase(self.unit, "run", seconds, str(result))
        self.feedback_message = str(result)
        return Status.SUCCESS

    def on_error(self, error: MotionError, seconds: float) -> Status:
        self.context.fail(error)
        self.context.events.phase(self.unit, "run", seconds, f"failed: {error}")
        self.feedback_message = str(error)
        return Status.FAILURE


class PauseStep(py_trees.behaviour.Behaviour):
    """A script ``pause`` step: RUNNING until Resume; a cancel ends the goal.

    There is no timer. The orchestrator reports PAUSED while this leaf runs.
    """

    def __init__(self, context: GoalContext, unit: Unit) -> None:
        super().__init__("PauseStep")
        self.context = context
        self.unit = unit

    def initialise(self) -> None:
        # The goal pauses here anyway: a pending pause request is satisfied by this pause
        # (it must not pause again at the next boundary), a stale resume is dropped.
        self.context.controls.take_pause()
        self.context.controls.take_resume()
        self.context.events.paused(f"pause step {self.unit.first_step + 1}: waiting for Resume")
        self.feedback_message = "waiting for Resume"
        # The arm is still while the operator decides: plan the next motion unit meanwhile
        # (checked against the live state when that unit starts).
        self.context.start_plan_ahead(self.unit, None)

    def update(self) -> Status:
        ctx = self.context
        if ctx.controls.cancel_requested:
            ctx.finish_reason = FinishReason.CANCELED
            ctx.cancel_message = "cancelled while paused"
            return Status.FAILURE
        if ctx.controls.take_resume():
            ctx.events.resumed()
            self.feedback_message = "resumed"
            return Status.SUCCESS
        return Status.RUNNING

"""Plan-ahead (issue 13): the policy a goal plans its next motion unit ahead by.

While unit ``k`` executes, the next motion unit is planned from
the state unit ``k`` is planned to end in (its solution's final joints and the tool state
its tool commands leave), with the same model revision, so that the robot does not wait
for the planner at the boundary. The rules, all in :func:`start_plan_ahead` and
:func:`take_plan_ahead`:

* only in execute mode (a preview plans every unit from the live state, unchanged);
* the planned-ahead unit is the next motion unit; only units that neither move the arm
  nor change the robot model may lie between (``pipettor``, ``pause``), and tool exchanges
  (:data:`PLAN_AHEAD_ACROSS`) when the backend can forecast them
  (:class:`~erobs_bt.backends.base.PlansAcross`:
  the script names the tool, the cell the dock, so the backend plans the exchange's own
  motions from the planned end state and then the unit with the model the exchange will
  leave); never across a vision step (its target is known only at run time): the unit
  after one is planned only once the step has detected its marker and planned its final
  motion, from that plan's end, while the motion executes (:class:`FinalPlanAhead`, with a
  backend that reports that plan, :class:`~erobs_bt.backends.base.ReportsFinalPlan`);
* with a slow planner (:class:`~erobs_bt.backends.base.PlansChained`, ``plan_ahead_depth`` 2:
  MoveIt) the motion unit
  after the planned-ahead one is planned too, from its planned end, as soon as its plan is
  made, so a short unit in between does not leave too little time (:func:`_chain`);
* a unit whose cache key already has an entry (it will replay) is not planned ahead;
* at the unit's start the plan is used only when the model revision is the live one and
  every live joint is within :data:`PLAN_AHEAD_TOLERANCE` of the plan's start (and, for
  an eligible goal, the start gives the same cache key as the live state); otherwise it
  is discarded and the unit plans afresh from the live state, exactly as without
  plan-ahead. A plan-ahead that failed is discarded the same way: the fresh plan's
  result, success or failure, is what the unit reports;
* the cache sees a plan-ahead only through the unit that uses it (stored where that plan
  would have been, under the unit's key), and a goal that ends for any reason (success,
  cancel, failure, stop, shutdown) drops its pending plan-ahead (:func:`drop_plan_ahead`).

The goal's state stays in its :class:`~erobs_bt.tree.context.GoalContext` (its pending
:attr:`~erobs_bt.tree.context.GoalContext.ahead`, its controls, events and backend); the
functions here take that context and are called through its methods of the same names.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from erobs_bt.backends.base import (
    ErrorCode,
    MotionError,
    PlansAcross,
    PlansChained,
    ReportsFinalPlan,
    Solution,
)
from erobs_bt.batching import Unit
from erobs_bt.motion import START_TOLERANCE
from erobs_bt.script.model import JointPositions, Step

if TYPE_CHECKING:
    from erobs_bt.tree.context import GoalContext

#: [rad] Largest live-state deviation (any joint) from a plan-ahead's start at which the
#: plan is still used (issue 13): the controllers' start tolerance
#: (:data:`erobs_bt.motion.START_TOLERANCE`): a trajectory that starts further away would be
#: rejected anyway.
PLAN_AHEAD_TOLERANCE = START_TOLERANCE

#: Task types of units a plan-ahead may look across: they neither move the arm nor change
#: the robot model (a ``pause`` waits for the operator; the live-state check at the next
#: unit's start catches an arm jogged meanwhile).
PLAN_AHEAD_TRANSPARENT = frozenset({"pipettor", "pause"})

#: Task types of units a plan-ahead may plan across when the backend forecasts them
#: (:class:`~erobs_bt.backends.base.PlansAcross`): a tool exchange ends with the tool the
#: script names attached and
#: the arm out of the dock the cell describes. A vision step never: its end depends on a
#: detection made when it runs.
PLAN_AHEAD_ACROSS = frozenset({"tool_exchange"})


@dataclass
class PlannedAhead:
    """The one pending plan-ahead of a goal.

    Attributes:
        unit: the motion unit being planned ahead.
        future: the backend's planning future.
        start: the arm state the plan starts from [rad] (the previous unit's planned end);
            ``None`` across tool exchanges: the solution's ``start_positions`` then.
        model_revision: the model revision it is planned with; ``None`` across tool
            exchanges: the solution's.
        after: index of the unit during whose execution it was started.
        started: ``time.monotonic()`` when it was requested.
        crossed: how many tool exchanges lie between (0: none).
        then: the plan-ahead of the motion unit after this one, planned from this one's
            planned end (depth 2, :class:`PlansChained`), or ``None``; its ``start`` and
            ``model_revision`` are ``None`` (the solution's, checked when it is taken).
    """

    unit: Unit
    future: Future[Solution]
    start: JointPositions | None
    model_revision: str | None
    after: int
    started: float
    crossed: int = 0
    then: PlannedAhead | None = None

    def cancel(self) -> None:
        """Cancel this plan-ahead's future and those chained after it (:attr:`then`)."""
        ahead: PlannedAhead | None = self
        while ahead is not None:
            ahead.future.cancel()
            ahead = ahead.then


def start_plan_ahead(ctx: GoalContext, unit: Unit, solution: Solution | None) -> None:
    """Start planning the next motion unit while ``unit`` executes (module docstring).

    Args:
        unit: the unit that is about to execute.
        solution: its solution, about to be dispatched (the plan-ahead starts from its
            end state); ``None`` for a unit that does not move the arm, or a tool exchange
            (the plan-ahead starts from the live state). Call it *before* dispatching
            ``solution`` or the step: the backend takes the tool state at this call as the
            one the unit starts in.

    Nothing is started when plan-ahead is off, in preview mode, while the goal is being
    cancelled or halted, with no known arm state, when the next motion unit is already
    being planned ahead, or when it would replay a cached solution.
    """
    if not ctx.plan_ahead_enabled or not ctx.executes:
        return
    if ctx.controls.cancel_requested or ctx.controls.halt is not None:
        return
    across = isinstance(ctx.backend, PlansAcross)
    own: tuple[Step, ...] = ()
    if solution is None and not all(step.task_type in PLAN_AHEAD_TRANSPARENT for step in unit.steps):
        if not (across and all(step.task_type in PLAN_AHEAD_ACROSS for step in unit.steps)):
            return  # a vision step: its end state is known only when it ends
        own = tuple(unit.steps)  # a tool exchange about to run: plan across it
    found = ctx.next_motion_across(unit) if across else None
    if found is not None:
        target, between = found
        crossed = own + between
    else:
        next_unit = ctx.next_motion_unit(unit)
        if next_unit is None:
            return
        target, crossed = next_unit, own
    if ctx.ahead is not None:
        if ctx.ahead.unit is target:
            _chain(ctx, ctx.ahead, unit, solution)
            return
        drop_plan_ahead(ctx, "superseded")
    revision = ctx.backend.model_revision()
    if solution is not None:
        if solution.model_revision != revision:
            return
        planned_end: tuple[float, ...] | None = solution.final_positions()
    else:
        planned_end = ctx.backend.joint_positions()
    if planned_end is None or len(planned_end) != 6 or ctx.backend.joint_positions() is None:
        return  # no known start: the unit's start could not check the live state against it
    a, b, c, d, e, f = (float(x) for x in planned_end)
    start: JointPositions = (a, b, c, d, e, f)
    if ctx.eligible:
        if crossed:
            return  # an eligible goal is one unit: nothing to cross (never reached)
        key = ctx.cache_key(model_revision=revision, start=start)
        if key in ctx.cache:
            return  # the unit will replay: a plan-ahead would be wasted work
    try:
        if crossed:
            assert isinstance(ctx.backend, PlansAcross)
            future = ctx.backend.plan_across(crossed, target.steps, start=start, after=solution)
        else:
            future = ctx.backend.plan(target.steps, start=start, after=solution)
    except Exception as exc:  # the unit plans afresh at its start and reports its own result
        ctx.events.plan_ahead(target, "discarded", f"could not start: {exc}")
        return
    if crossed:
        ctx.ahead = PlannedAhead(target, future, None, None, unit.index, time.monotonic(), len(crossed))
        exchanges = f"{len(crossed)} tool exchange{'s' if len(crossed) > 1 else ''}"
        ctx.events.plan_ahead(target, "started", f"during unit {unit.index + 1}, across {exchanges}")
    else:
        ctx.ahead = PlannedAhead(target, future, start, revision, unit.index, time.monotonic())
        ctx.events.plan_ahead(target, "started", f"during unit {unit.index + 1}")
        _chain(ctx, ctx.ahead, unit, solution)


def _chain(ctx: GoalContext, ahead: PlannedAhead, unit: Unit, solution: Solution | None) -> None:
    """Plan-ahead depth 2 (:class:`PlansChained`): also plan the motion unit after
    ``ahead``'s, from ``ahead``'s planned end, while ``unit`` executes, so a short unit
    between does not leave a slow planner too little time.

    Only with a backend that asks for it, for a plan-ahead not planned across tool
    exchanges, when only :data:`PLAN_AHEAD_TRANSPARENT` units lie between, never for an
    eligible goal (one unit). The chained plan is checked like any plan-ahead when its
    unit starts (:meth:`take_plan_ahead`).
    """
    backend = ctx.backend
    if ahead.then is not None or ahead.crossed or ctx.eligible:
        return
    if not isinstance(backend, PlansChained) or backend.plan_ahead_depth < 2:
        return
    target = ctx.next_motion_unit(ahead.unit)
    if target is None:
        return
    try:
        future = backend.plan_chained(ahead.future, target.steps, after=solution)
    except Exception as exc:  # its unit plans afresh at its start
        ctx.events.plan_ahead(target, "discarded", f"could not start: {exc}")
        return
    ahead.then = PlannedAhead(target, future, None, None, unit.index, time.monotonic())
    ctx.events.plan_ahead(
        target, "started", f"during unit {unit.index + 1}, after unit {ahead.unit.index + 1}'s plan"
    )


def plan_ahead_from_final_plan(ctx: GoalContext, unit: Unit) -> FinalPlanAhead | None:
    """The plan-ahead a vision step starts from its final motion's plan, or ``None``.

    A vision step's end is known only when it runs: once its detection is made and its
    final motion (the approach over the detection and its tail) is planned, the next
    motion unit is planned from that plan's end while the motion executes, with the same
    rules as any plan-ahead (checked against the live state when its unit starts). Only
    with a backend that reports that plan (:class:`ReportsFinalPlan`), in execute mode
    with plan-ahead on, for a unit of one step that is neither transparent nor a tool
    exchange, with only :data:`PLAN_AHEAD_TRANSPARENT` units up to the next motion unit,
    and never for an eligible goal. With :class:`PlansChained` depth 2 the unit after
    that one is planned too. Call on the tick thread, before the step starts.
    """
    if not ctx.plan_ahead_enabled or not ctx.executes or ctx.eligible:
        return None
    if ctx.controls.cancel_requested or ctx.controls.halt is not None:
        return None
    if not isinstance(ctx.backend, ReportsFinalPlan) or len(unit.steps) != 1:
        return None
    if unit.steps[0].task_type in PLAN_AHEAD_TRANSPARENT | PLAN_AHEAD_ACROSS or unit.is_motion:
        return None
    target = ctx.next_motion_unit(unit)
    if target is None:
        return None
    then = None
    backend = ctx.backend
    if isinstance(backend, PlansChained) and backend.plan_ahead_depth >= 2:
        then = ctx.next_motion_unit(target)
    return FinalPlanAhead(ctx, unit, target, then)


def adopt_plan_ahead(ctx: GoalContext, made: PlannedAhead, unit: Unit, how: str) -> None:
    """Make ``made`` (started on a backend thread, see :class:`FinalPlanAhead`) the goal's
    pending plan-ahead; dropped at once while the goal is being cancelled or halted.
    Tick thread only."""
    if ctx.controls.cancel_requested or ctx.controls.halt is not None or not ctx.plan_ahead_enabled:
        made.cancel()
        return
    if ctx.ahead is not None:
        drop_plan_ahead(ctx, "superseded")
    ctx.ahead = made
    ctx.events.plan_ahead(made.unit, "started", f"during unit {unit.index + 1}, {how}")
    if made.then is not None:
        ctx.events.plan_ahead(
            made.then.unit,
            "started",
            f"during unit {unit.index + 1}, after unit {made.unit.index + 1}'s plan",
        )


def take_plan_ahead(ctx: GoalContext, unit: Unit) -> Future[Solution] | None:
    """The plan-ahead of ``unit`` if it may be used now, else ``None`` (plan afresh).

    Used only when it is for ``unit``, has not failed, was planned with the live model
    revision, starts within :data:`PLAN_AHEAD_TOLERANCE` of the live arm state on every
    joint and, for an eligible goal, gives the unit's own cache key. Anything else is
    discarded (a plan-ahead for another unit is dropped). The future may still be
    running: the unit then waits only for the rest of it.
    """
    ahead, ctx.ahead = ctx.ahead, None
    if ahead is None:
        return None
    if ahead.unit is not unit:
        ctx.ahead = ahead
        drop_plan_ahead(ctx, f"unit {unit.index + 1} plans first")
        return None
    # The plan-ahead of the unit after this one (depth 2) stays pending, whatever becomes
    # of this one: it is checked against the live state when its own unit starts.
    ctx.ahead, ahead.then = ahead.then, None
    future = ahead.future
    if ahead.start is None and not future.done():
        # Planned across tool exchanges and still planning: its start and model are known
        # when it ends; check them then (a failure makes the unit plan afresh).
        checked: Future[Solution] = Future()
        checked.set_running_or_notify_cancel()

        def check(done: Future[Solution]) -> None:
            if done.cancelled():
                checked.set_exception(MotionError(ErrorCode.PLANNING_FAILED, "cancelled"))
            elif done.exception() is not None:
                checked.set_exception(done.exception())  # type: ignore[arg-type]
            else:
                solution = done.result()
                problem = _unusable(ctx, solution.model_revision, solution.start_positions)
                if problem:
                    checked.set_exception(MotionError(ErrorCode.PLANNING_FAILED, problem))
                else:
                    checked.set_result(solution)

        future.add_done_callback(check)
        ctx.events.plan_ahead(
            unit,
            "used",
            f"requested {time.monotonic() - ahead.started:.3f} s before it was needed, "
            "still planning (checked when done)",
        )
        return checked
    reason = ""
    if future.done() and (future.cancelled() or future.exception() is not None):
        reason = "failed: " + (str(future.exception()) if not future.cancelled() else "cancelled")
    else:
        revision, start = ahead.model_revision, ahead.start
        if start is None:
            solution = future.result()
            revision, start = solution.model_revision, solution.start_positions
        reason = _unusable(ctx, revision, start)
    if reason:
        if not future.done():
            future.cancel()
        ctx.events.plan_ahead(unit, "discarded", f"{reason}; planning afresh")
        return None
    waited = "" if future.done() else ", still planning"
    ctx.events.plan_ahead(
        unit, "used", f"requested {time.monotonic() - ahead.started:.3f} s before it was needed{waited}"
    )
    return future


def _unusable(ctx: GoalContext, revision: str | None, start: Sequence[float] | None) -> str:
    """Why a plan-ahead planned with ``revision`` from ``start`` [rad] may not be used now
    (``""``: it may): another model revision, a live arm state further than
    :data:`PLAN_AHEAD_TOLERANCE` from ``start``, or another cache key."""
    live_revision = ctx.backend.model_revision()
    if revision != live_revision:
        return f"model revision is now {live_revision}, planned for {revision}"
    live = ctx.backend.joint_positions()
    if live is None or len(live) != 6:
        return "the live arm state is unknown"
    if start is None or len(start) != 6:
        return "its start state is unknown"
    deviation = max(abs(float(a) - b) for a, b in zip(live, start, strict=True))
    if deviation > PLAN_AHEAD_TOLERANCE:
        return (
            f"the live arm state is {deviation:.4f} rad from its start (tolerance {PLAN_AHEAD_TOLERANCE} rad)"
        )
    if ctx.unit_key is not None:
        a, b, c, d, e, f = (float(x) for x in start)
        key = ctx.cache_key(model_revision=revision, start=(a, b, c, d, e, f))
        if key != ctx.unit_key:
            return "its start gives another cache key than the live state"
    return ""


def drop_plan_ahead(ctx: GoalContext, reason: str) -> None:
    """Drop the pending plan-ahead, if any: its future is cancelled (a plan not yet
    started never runs; one that is running finishes on the backend's planner and its
    result is ignored). Idempotent."""
    ahead, ctx.ahead = ctx.ahead, None
    while ahead is not None:
        ahead.future.cancel()
        ctx.events.plan_ahead(ahead.unit, "dropped", reason)
        following, ahead.then = ahead.then, None
        ahead = following


class FinalPlanAhead:
    """The plan-ahead a vision step starts from its final motion's plan
    (:meth:`GoalContext.plan_ahead_from_final_plan`).

    The backend calls it (:class:`ReportsFinalPlan`, on its own thread) with that plan before
    the motion is dispatched: the next motion unit's plan is requested then, from the plan's
    end and with the tool state executing it will leave (and, at depth 2, the unit after it,
    :meth:`PlansChained.plan_chained`). The tick thread then adopts it as the goal's pending
    plan-ahead (:meth:`adopt`), or drops it when the step is halted (:meth:`discard`).
    """

    def __init__(self, context: GoalContext, unit: Unit, target: Unit, then: Unit | None) -> None:
        self._context = context
        self._unit = unit
        self._target = target
        self._then = then
        self._lock = threading.Lock()
        self._made: PlannedAhead | None = None

    def __call__(self, solution: Solution) -> None:
        """The step's final motion is planned (``solution``): request the plans (backend thread)."""
        end = solution.final_positions()
        if end is None or len(end) != 6:
            return
        a, b, c, d, e, f = (float(x) for x in end)
        start: JointPositions = (a, b, c, d, e, f)
        backend = self._context.backend
        future = backend.plan(self._target.steps, start=start, after=solution)
        made = PlannedAhead(
            self._target, future, start, solution.model_revision, self._unit.index, time.monotonic()
        )
        if self._then is not None and isinstance(backend, PlansChained):
            chained = backend.plan_chained(future, self._then.steps, after=solution)
            made.then = PlannedAhead(self._then, chained, None, None, self._unit.index, time.monotonic())
        with self._lock:
            self._made = made
        self._context.wake()

    def adopt(self) -> None:
        """Hand a requested plan-ahead to the goal (tick thread; nothing when none is requested)."""
        with self._lock:
            made, self._made = self._made, None
        if made is not None:
            self._context.adopt_plan_ahead(made, self._unit, "from its final motion's plan")

    def discard(self) -> None:
        """Cancel a requested plan-ahead the goal has not adopted (the step was halted)."""
        with self._lock:
            made, self._made = self._made, None
        if made is not None:
            made.cancel()


def next_motion_across(units: Sequence[Unit]) -> list[tuple[Unit, tuple[Step, ...]] | None]:
    """:meth:`~erobs_bt.tree.context.GoalContext.next_motion_across` of every unit, by unit
    index (one backward pass)."""
    answers: list[tuple[Unit, tuple[Step, ...]] | None] = [None] * len(units)
    following: tuple[Unit, tuple[Step, ...]] | None = None
    for index in range(len(units) - 1, -1, -1):
        answers[index] = following
        later = units[index]
        if later.is_motion:
            following = (later, ())
        elif following is not None and all(step.task_type in PLAN_AHEAD_ACROSS for step in later.steps):
            following = (following[0], tuple(later.steps) + following[1])
        elif not all(step.task_type in PLAN_AHEAD_TRANSPARENT for step in later.steps):
            following = None
    return answers


def next_motion_units(units: Sequence[Unit]) -> list[Unit | None]:
    """:meth:`~erobs_bt.tree.context.GoalContext.next_motion_unit` of every unit, by unit
    index, in one backward pass over the units (asking each unit to scan the ones after it was
    quadratic in the script's length: minutes for 10,000 units of ``SET_LED``)."""
    answers: list[Unit | None] = [None] * len(units)
    following: Unit | None = None  # the answer for the unit before the one looked at
    for index in range(len(units) - 1, -1, -1):
        answers[index] = following
        later = units[index]
        if later.is_motion:
            following = later
        elif not all(step.task_type in PLAN_AHEAD_TRANSPARENT for step in later.steps):
            following = None
    return answers

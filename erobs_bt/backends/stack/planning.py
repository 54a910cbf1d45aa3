"""Planning a motion unit: one connected sequence of ``moveto``/``end_effector`` steps from a
start state, with the tool state carried forward; plans ahead of a solution about to run,
across the tool exchanges before a unit, and chained after a plan still being made.

Planning a unit (:meth:`UnitPlanner.plan`): ``moveto`` and ``end_effector`` steps are
planned as ONE connected sequence from ``start`` (or the live state), carrying the planned
joint and tool state forward from step to step (docs/script-format.md, "Preview start
states"). A plan ahead (``after=``) starts from the tool state that executing ``after`` from
the tool state at the call leaves (:meth:`StackCore.predict_tools
<erobs_bt.backends.stack.core.StackCore.predict_tools>`). The solution records the model
revision it was planned with.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from erobs_bt.backends.base import ErrorCode, MotionError, PlanListener, Segment, Solution
from erobs_bt.backends.parts import FaultInjection
from erobs_bt.backends.stack.core import StackCore
from erobs_bt.backends.stack.speculation import Speculation
from erobs_bt.backends.stack.state import LiveState
from erobs_bt.backends.stack.workers import Worker, submit, wait
from erobs_bt.planning.base import RemotePlanner
from erobs_bt.planning.forecast import forecast_exchanges
from erobs_bt.script.model import EndEffector, JointPositions, MoveTo, Step
from erobs_bt.world.scene import World
from erobs_bt.world.tools import ToolState, resolve_end_effector

_LOG = logging.getLogger(__name__)


class UnitPlanner:
    """Plans motion units on the stack's planning worker.

    Args:
        core: the stack's shared parts.
        state: the live tool state and world (a plan starts from them).
        speculation: side-by-side requests and forecast plans.
        faults: fault injection (a plan is a cut point), or ``None``.
        pool: the planning worker (``<name>-plan``).
        check_open: raises when the stack is closed.
    """

    def __init__(
        self,
        core: StackCore,
        state: LiveState,
        speculation: Speculation,
        *,
        faults: FaultInjection | None,
        pool: Worker,
        check_open: Callable[[], None],
    ) -> None:
        self._core = core
        self._state = state
        self._speculation = speculation
        self._faults = faults
        self._pool = pool
        self._check_open = check_open
        self._plan_listeners: list[PlanListener] = []

    def add_plan_listener(self, listener: PlanListener) -> None:
        """Call ``listener(steps, planned, moves)`` as a unit's plan progresses: after each of
        its moves is planned (in step order; moves planned side by side are reported as they
        are joined), from the planning thread, before the plan's future completes. ``steps``
        is the tuple given to :meth:`plan` (its elements are the unit's own steps). A slow
        planner (move_group: one request per move) is then seen move by move."""
        with self._core.lock:
            self._plan_listeners.append(listener)

    def plan(
        self,
        steps: Sequence[Step],
        *,
        start: JointPositions | None = None,
        after: Solution | None = None,
        crossed: Sequence[Step] = (),
    ) -> Future[Solution]:
        """Plan a unit's ``moveto``/``end_effector`` steps as one connected sequence.

        Args:
            steps: the unit's steps, in order.
            start: the arm state to plan from [rad]; ``None``: the live state.
            after: plan ahead of this solution's execution: the tool state starts as
                :meth:`StackCore.predict_tools <erobs_bt.backends.stack.core.StackCore.predict_tools>`
                says executing it from the tool state *now* leaves it (call before dispatching
                it). ``None``: from the live tool state.
            crossed: ``tool_exchange`` steps that run before ``steps`` (:meth:`MotionStack.plan_across
                <erobs_bt.backends.stack.MotionStack.plan_across>`).

        Returns:
            A future resolving to the :class:`Solution` (arm segments and tool segments
            in step order), or failing with ``PLANNING_FAILED:``. Cancelled before the
            planner thread reaches it, it never runs.
        """
        self._check_open()
        core = self._core
        steps = tuple(steps)
        crossed = tuple(crossed)
        fault = self._faults.on_plan(steps) if self._faults is not None else None
        base, world = self._state.snapshot()  # the plan keeps the world of this call
        if after is not None:
            revision = core.planner.model_revision(base)
            if after.model_revision != revision:
                failed: Future[Solution] = Future()
                failed.set_exception(
                    MotionError(
                        ErrorCode.PLANNING_FAILED,
                        f"cannot plan ahead of a solution for model revision {after.model_revision} "
                        f"with {revision} attached",
                    )
                )
                return failed

        def job() -> Solution:
            if fault is not None:
                wait(fault.delay)
                raise fault.error
            tools = core.predict_tools(base, after) if after is not None else None
            if crossed:
                q, tools = forecast_exchanges(
                    core.cell,
                    core.planner,
                    crossed,
                    start if start is not None else core.arm.joint_positions(),
                    tools if tools is not None else base,
                    cup_profile_for=self._state.cup_profile_for,
                    contact_tolerance=core.contact_tolerance,
                    world=world,
                    on_plan=functools.partial(self._speculation.keep_forecast, world),
                )
                a, b, c, d, e, f = q
                return self.plan_now(steps, (a, b, c, d, e, f), tools=tools, world=world)
            return self.plan_now(steps, start, tools=tools, world=world)

        return submit(self._pool, job, ErrorCode.PLANNING_FAILED, label=core.label, cancellable=True)

    @property
    def plan_ahead_depth(self) -> int:
        """How many motion units the engine plans ahead while one executes: the planner's
        :attr:`~erobs_bt.planning.base.RemotePlanner.plan_ahead_depth` for a slow remote
        planner, else 1 (the embedded planner plans a unit in milliseconds)."""
        planner = self._core.planner
        return max(1, int(planner.plan_ahead_depth)) if isinstance(planner, RemotePlanner) else 1

    def plan_chained(
        self, first: Future[Solution], steps: Sequence[Step], *, after: Solution | None = None
    ) -> Future[Solution]:
        """Plan a unit ahead of a unit that is itself still being planned ahead (plan-ahead
        depth 2, :class:`erobs_bt.tree.plan_ahead.PlansChained`).

        Args:
            first: the future of the earlier unit's plan; ``steps`` are planned from the end of
                the solution it resolves to, once it does.
            steps: the later unit's steps.
            after: the solution about to be dispatched now, before the earlier unit (``None``:
                none). The tool state is the live one now, then what executing ``after`` and
                the earlier unit's solution leave (:meth:`StackCore.predict_tools
                <erobs_bt.backends.stack.core.StackCore.predict_tools>`).

        Returns:
            A future of the later unit's solution, pending until its plan starts (cancelling it
            before then skips the plan); it fails with ``PLANNING_FAILED`` when ``first``
            fails or is cancelled.
        """
        self._check_open()
        core = self._core
        steps = tuple(steps)
        base = self._state.tools()
        chained: Future[Solution] = Future()

        def when_planned(done: Future[Solution]) -> None:
            if chained.done():
                return  # dropped meanwhile
            if done.cancelled() or done.exception() is not None:
                reason = "cancelled" if done.cancelled() else str(done.exception())
                if chained.set_running_or_notify_cancel():
                    chained.set_exception(
                        MotionError(
                            ErrorCode.PLANNING_FAILED, f"the unit before it was not planned: {reason}"
                        )
                    )
                return
            before = done.result()
            fault = self._faults.on_plan(steps) if self._faults is not None else None

            def job() -> Solution:
                if fault is not None:
                    wait(fault.delay)
                    raise fault.error
                tools = core.predict_tools(base, after) if after is not None else base
                tools = core.predict_tools(tools, before)
                end = before.final_positions()
                a, b, c, d, e, f = (
                    float(x) for x in (end if end is not None else core.arm.joint_positions())
                )
                return self.plan_now(steps, (a, b, c, d, e, f), tools=tools)

            try:
                submit(
                    self._pool,
                    job,
                    ErrorCode.PLANNING_FAILED,
                    label=core.label,
                    cancellable=True,
                    into=chained,
                )
            except RuntimeError as exc:  # closed meanwhile
                if chained.set_running_or_notify_cancel():
                    chained.set_exception(MotionError(ErrorCode.PLANNING_FAILED, str(exc)))

        first.add_done_callback(when_planned)
        return chained

    def plan_now(
        self,
        steps: Sequence[Step],
        start: JointPositions | None,
        *,
        tools: ToolState | None = None,
        world: World | None = None,
    ) -> Solution:
        """Plan ``steps`` in this thread (the planning core of :meth:`plan` and of single steps).

        ``tools``: the tool state to start from (a plan ahead); ``None``: the live one.
        ``world``: the planning scene's world for every step; ``None``: the current one.
        """
        began = time.monotonic()
        core = self._core
        speculation = self._speculation
        live_tools, live_world = self._state.snapshot()
        state = tools if tools is not None else live_tools
        world = world if world is not None else live_world
        planner = core.planner
        revision = planner.model_revision(state)
        scene = self._state.remember_world(world)
        q0 = tuple(float(x) for x in (start if start is not None else core.arm.joint_positions()))
        q: tuple[float, ...] = q0
        segments: list[Segment] = []
        ahead = speculation.plan_concurrently(steps, q0, state, world)
        with core.lock:
            listeners = tuple(self._plan_listeners)
        steps = tuple(steps)
        moves = sum(1 for step in steps if isinstance(step, MoveTo))
        planned = 0
        try:
            for index, step in enumerate(steps):
                if isinstance(step, MoveTo):
                    pending = ahead.pop(index, None)
                    segment = speculation.forecast_plan(step, q, state, world)
                    if segment is not None and pending is not None:
                        pending[2].cancel()
                    elif segment is None:
                        segment = speculation.joined(pending, q, state)
                    if segment is None:
                        segment = planner.plan_move(step, q, tools=state, world=world)
                    segments.append(segment)
                    q = segment.points[-1].positions
                    state = core.after_move(state, q)
                    planned += 1
                    _tell_plan_listeners(listeners, steps, planned, moves)
                elif isinstance(step, EndEffector):
                    tool = resolve_end_effector(core.cell, state, step)
                    if tool is None:
                        continue
                    segments.append(tool)
                    state = core.after_tool(state, tool, q, step.path)
                else:
                    raise MotionError(
                        ErrorCode.PLANNING_FAILED,
                        f"{step.path}: a {step.script_type} step cannot be planned in a motion unit",
                    )
        except MotionError as exc:
            if exc.code is ErrorCode.PLANNING_FAILED:
                raise
            raise MotionError(ErrorCode.PLANNING_FAILED, exc.detail) from exc
        finally:
            for _, _, future in ahead.values():  # a failure ended the unit: the rest is not needed
                future.cancel()
            planner.follow(self._state.tools())
        return Solution(
            segments=tuple(segments),
            model_revision=revision,
            start_positions=q0,  # type: ignore[arg-type]
            planning_time=time.monotonic() - began,
            scene_revision=scene,
        )


def _tell_plan_listeners(
    listeners: tuple[PlanListener, ...], steps: tuple[Step, ...], planned: int, moves: int
) -> None:
    for listener in listeners:
        try:
            listener(steps, planned, moves)
        except Exception:  # a listener's bug never fails a plan
            _LOG.exception("plan listener failed")

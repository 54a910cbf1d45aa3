"""The speculation of plans: a unit's moves sent to a remote planner side by side, each from
the end the move before it is predicted to reach, joined when the prediction held; and the
motions of tool-exchange forecasts kept for the exchanges to play when they run."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from erobs_bt.backends.base import ArmSegment, MotionError
from erobs_bt.backends.stack.core import StackCore
from erobs_bt.motion import START_TOLERANCE
from erobs_bt.planning.base import RemotePlanner
from erobs_bt.script.model import EndEffector, MoveTo, Step
from erobs_bt.world.scene import World
from erobs_bt.world.tools import ToolState, resolve_end_effector

_LOG = logging.getLogger(__name__)

#: How many motions of tool-exchange forecasts the stack keeps for the exchanges to use when
#: they run (:meth:`MotionStack.plan_across <erobs_bt.backends.stack.MotionStack.plan_across>`);
#: a forecast of two exchanges plans about 16.
FORECAST_PLANS = 64

#: [rad] Largest gap (any joint) between where a move's plan really ends and where the next
#: move, planned concurrently from a prediction (:class:`~erobs_bt.planning.base.RemotePlanner`),
#: starts, at which the two are kept as one connected sequence: a hundredth of the
#: controllers' start tolerance (0.01 rad, MoveIt's ``allowed_start_tolerance``), about
#: 0.05 mm at the tool of a UR5e. A larger gap plans the move again from the real end.
JOIN_TOLERANCE = 1e-4

#: A move planned side by side: ``(start [rad], tool state, future of its plan)``.
Ahead = tuple[tuple[float, ...], ToolState, Future[ArmSegment]]


class Speculation:
    """Plans made before they are known to be needed, and whether they were.

    Attributes:
        counts: moves of concurrently planned units: ``joined`` (kept), ``replanned`` (their
            predicted start missed the previous move's real end; planned again in order).
        forecast_plans_used: motions a running step took from a tool-exchange forecast
            instead of planning them.
    """

    def __init__(self, core: StackCore) -> None:
        self._core = core
        # Motions the tool-exchange forecasts planned: (step, start, tool state, world
        # revision, segment), newest last (see MotionStack.plan_across).
        self._forecast_plans: deque[tuple[MoveTo, tuple[float, ...], ToolState, str, ArmSegment]] = deque(
            maxlen=FORECAST_PLANS
        )
        self.counts = {"joined": 0, "replanned": 0}
        self.forecast_plans_used = 0

    # -- forecast plans (tool exchanges) -------------------------------------------------------
    def keep_forecast(
        self, world: World, step: MoveTo, q: tuple[float, ...], state: ToolState, segment: ArmSegment
    ) -> None:
        """Keep a motion a tool-exchange forecast planned (``on_plan`` of
        :func:`erobs_bt.planning.forecast.forecast_exchanges`)."""
        with self._core.lock:
            self._forecast_plans.append((step, q, state, world.revision, segment))

    def forecast_plan(
        self, step: MoveTo, q: Sequence[float], state: ToolState, world: World
    ) -> ArmSegment | None:
        """A forecast's plan of ``step`` with ``state`` in ``world`` from within
        :data:`~erobs_bt.motion.START_TOLERANCE` of ``q`` [rad] (the nearest, the newest of
        equals), or ``None``: plan it.

        The tolerance is a plan-ahead's (:data:`~erobs_bt.tree.plan_ahead.PLAN_AHEAD_TOLERANCE`):
        an exchange's first motion starts where the arm really stopped, which on real hardware is
        never bit for bit the previous trajectory's last point the forecast planned from. The
        plan played is the forecast's, from its own start: the one the step would plan from there.
        """
        start = tuple(float(x) for x in q)
        best: tuple[float, ArmSegment] | None = None
        with self._core.lock:
            for kept, kept_q, kept_state, kept_world, segment in reversed(self._forecast_plans):
                if kept_world != world.revision:
                    continue
                gap = max(abs(a - b) for a, b in zip(kept_q, start, strict=True))
                if gap > START_TOLERANCE or (best is not None and gap >= best[0]):
                    continue
                try:
                    same = bool(kept == step and kept_state == state)
                except (TypeError, ValueError):  # a field without a plain equality: plan it
                    same = False
                if same:
                    best = (gap, segment)
            if best is not None:
                self.forecast_plans_used += 1
                return best[1]
        return None

    # -- side-by-side requests ---------------------------------------------------------------
    def plan_concurrently(
        self, steps: Sequence[Step], q0: tuple[float, ...], state: ToolState, world: World
    ) -> dict[int, Ahead]:
        """Send a unit's moves to a :class:`~erobs_bt.planning.base.RemotePlanner` side by
        side, each from the end the previous move is predicted to reach, with the tool state
        the steps before it are predicted to leave; ``{step index: (start [rad], tool state,
        future of the move's plan)}``. Empty for any other planner, or a unit of one move.

        Predicting stops at the first move whose end cannot be told or the first tool command
        that fails: those moves and the ones after them are planned in order by the caller,
        which also reports the failure.
        """
        planner = self._core.planner
        if not isinstance(planner, RemotePlanner) or planner.concurrent_requests < 2:
            return {}
        if sum(1 for step in steps if isinstance(step, MoveTo)) < 2:
            return {}
        # A pool per unit: the planning thread (a plan-ahead, a forecast) and the action thread
        # (a tool exchange's or a vision step's own motions) each get their own requests in.
        pool = ThreadPoolExecutor(
            planner.concurrent_requests, thread_name_prefix=f"{self._core.name}-plan-move"
        )
        ahead: dict[int, Ahead] = {}
        q = q0
        try:
            for index, step in enumerate(steps):
                if isinstance(step, MoveTo):
                    ahead[index] = (
                        q,
                        state,
                        pool.submit(planner.plan_move, step, q, tools=state, world=world),
                    )
                    end = planner.predict_end(step, q, tools=state)
                    if end is None:
                        break
                    q = tuple(float(x) for x in end)
                    state = self._core.after_move(state, q)
                elif isinstance(step, EndEffector):
                    tool = resolve_end_effector(self._core.cell, state, step)
                    if tool is not None:
                        state = self._core.after_tool(state, tool, q, step.path)
        except MotionError:  # the ordered plan reports it
            pass
        finally:
            pool.shutdown(wait=False)  # its threads end when their requests are answered
        return ahead

    def joined(self, ahead: Ahead | None, q: Sequence[float], state: ToolState) -> ArmSegment | None:
        """The concurrently planned move ``ahead`` if it continues the sequence: planned with the
        tool state ``state`` from within :data:`JOIN_TOLERANCE` of ``q`` [rad], where the
        previous move really ends (waits for it); ``None``: plan it again from ``q``.

        Raises:
            MotionError: the move's own planning failed (from the right start: the error is
                the unit's).
        """
        if ahead is None:
            return None
        start, planned_state, future = ahead
        gap = max(abs(float(a) - float(b)) for a, b in zip(start, q, strict=True))
        if planned_state != state or gap > JOIN_TOLERANCE:
            future.cancel()
            with self._core.lock:
                self.counts["replanned"] += 1
            _LOG.info(
                "a move planned side by side starts %.2e rad from where the one before ends "
                "(tolerance %g rad)%s: planned again from there",
                gap,
                JOIN_TOLERANCE,
                "" if planned_state == state else " with another tool state",
            )
            return None
        segment = future.result()
        with self._core.lock:
            self.counts["joined"] += 1
        return segment

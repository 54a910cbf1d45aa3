"""Forecast where tool exchanges leave the robot, without moving it (plan-ahead across them).

A ``tool_exchange`` step's end follows from the script (which tool, which dock, the approach
pose) and the cell (the dock's geometry): :func:`forecast_exchanges` runs the same exchange
sequence as execution (:func:`erobs_bt.world.tools.run_tool_exchange`) through a port that
only *plans* each motion with the stack's planner from the state the previous one was planned
to end in, and applies the tool bookkeeping the exchange applies (the tool leaves the flange in
the dock, the new one is loaded with the cup the stack would fit). The result is the arm state
and the tool state the exchanges will leave: the start of the next motion unit's plan-ahead
(:class:`erobs_bt.backends.base.PlansAcross`). When the exchange then runs, its motions are
planned again from the live state; the plan-ahead is used only when the live state is within
the plan-ahead tolerance of the forecast and the model revision is the forecast's. The
exchange's own motions can use the forecast's plans (``on_plan``; the motion stack keeps them,
:meth:`erobs_bt.backends.stack.MotionStack.plan_across`) where the exchange reaches each motion
from exactly the forecast's start with the forecast's tool state in the same world: the planner
would plan the same motion again there.

Joint positions in radians, :data:`~erobs_bt.script.model.JOINT_NAMES` order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from erobs_bt.motion import ArmSegment
from erobs_bt.planning.base import Planner
from erobs_bt.script.model import MoveTo, Step, ToolExchange
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.scene import World
from erobs_bt.world.tools import DEFAULT_CONTACT_TOLERANCE, ToolState, after_motion, run_tool_exchange

#: Told of every motion a forecast plans: ``(step, start [rad], tool state, segment)``.
PlanListener = Callable[[MoveTo, tuple[float, ...], ToolState, ArmSegment], None]


class _ForecastPort:
    """A :class:`~erobs_bt.world.tools.ToolPort` whose moves are planned, never executed."""

    def __init__(
        self,
        cell: CellConfig,
        planner: Planner,
        joints: Sequence[float],
        tools: ToolState,
        cup_profile_for: Callable[[str], str | None],
        contact_tolerance: float,
        world: World | None,
        on_plan: PlanListener | None = None,
    ) -> None:
        self._on_plan = on_plan
        self._cell = cell
        self._planner = planner
        self._world = world
        self.joints = tuple(float(q) for q in joints)
        self.tools = tools
        self._cup_profile_for = cup_profile_for
        self._contact_tolerance = contact_tolerance

    def joint_positions(self) -> tuple[float, ...]:
        return self.joints

    def tool_state(self) -> ToolState:
        return self.tools

    def move(self, steps: Sequence[Step]) -> None:
        for step in steps:
            assert isinstance(step, MoveTo), "a tool exchange only moves the arm"
            segment = self._planner.plan_move(step, self.joints, tools=self.tools, world=self._world)
            if self._on_plan is not None:
                self._on_plan(step, self.joints, self.tools, segment)
            self.joints = segment.points[-1].positions
            self.tools = after_motion(
                self._cell, self.tools, self.joints, contact_tolerance=self._contact_tolerance
            )

    def set_tool_state(self, state: ToolState) -> None:
        self.tools = state

    def cup_profile_for(self, gripper: str) -> str | None:
        return self._cup_profile_for(gripper)


def forecast_exchanges(
    cell: CellConfig,
    planner: Planner,
    exchanges: Sequence[Step],
    joints: Sequence[float],
    tools: ToolState,
    *,
    cup_profile_for: Callable[[str], str | None],
    contact_tolerance: float = DEFAULT_CONTACT_TOLERANCE,
    world: World | None = None,
    on_plan: PlanListener | None = None,
) -> tuple[tuple[float, ...], ToolState]:
    """The arm state [rad] and tool state that running ``exchanges`` from ``joints`` with
    ``tools`` will leave (module docstring). Nothing moves; the planner plans every motion.

    Args:
        cell: the cell (docks, tools).
        planner: the stack's planner.
        exchanges: ``tool_exchange`` steps, in the order they run.
        joints: the arm state [rad] the first exchange starts from.
        tools: the tool state then.
        cup_profile_for: the cup the stack fits on a loaded vacuum gripper (``None``: its default).
        contact_tolerance: [m] TCP-to-part distance that counts as touching.
        world: the planning scene's world to plan in (``None``: the planner's current one).
        on_plan: told of every motion planned, in order, with the start and tool state it
            was planned from (``None``: nobody).

    Raises:
        MotionError: a step that is no tool exchange, an exchange the bookkeeping refuses
            (``EXECUTION_FAILED``), or a motion that cannot be planned (``PLANNING_FAILED``).
    """
    from erobs_bt.motion import ErrorCode, MotionError

    port = _ForecastPort(cell, planner, joints, tools, cup_profile_for, contact_tolerance, world, on_plan)
    for step in exchanges:
        if not isinstance(step, ToolExchange):
            raise MotionError(
                ErrorCode.PLANNING_FAILED, f"{step.path}: a {step.script_type} step cannot be forecast"
            )
        run_tool_exchange(cell, step, port)
    return port.joints, port.tools

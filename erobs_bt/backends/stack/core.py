"""What every part of a motion stack shares: the cell, the planner, the arm driver, one lock,
and the tool bookkeeping with the stack's contact tolerance (how executing a solution changes
the tool state, :meth:`StackCore.predict_tools`)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from erobs_bt.backends.base import ArmSegment, Solution, ToolSegment
from erobs_bt.backends.parts import ArmDriver
from erobs_bt.planning.base import Planner
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.tools import ToolState, after_motion, gripper_command


@dataclass(eq=False)
class StackCore:
    """The parts of a :class:`~erobs_bt.backends.stack.MotionStack` every one of its own parts uses.

    Attributes:
        cell: the cell description.
        planner: plans the ``moveto`` steps (replaceable: the stack's parts read it here on
            every use).
        arm: plays the trajectories and reports the arm's state.
        contact_tolerance: [m] TCP-to-part distance that counts as touching.
        name: prefix of the worker threads' names (``sim`` -> ``sim-plan``).
        label: what the stack is, for messages (``simulated cell``).
        lock: the stack's state lock (the live tool state, the world, the bookkeeping of its
            parts); held only for reads and assignments, never across a call out.
    """

    cell: CellConfig
    planner: Planner
    arm: ArmDriver
    contact_tolerance: float
    name: str
    label: str
    lock: threading.Lock = field(default_factory=threading.Lock)

    def after_move(self, state: ToolState, q: Sequence[float]) -> ToolState:
        """The tool state once the arm reaches ``q`` [rad] (:func:`~erobs_bt.world.tools.after_motion`
        with the stack's contact tolerance: a pipettor picks up a tip it touches)."""
        return after_motion(self.cell, state, q, contact_tolerance=self.contact_tolerance)

    def after_tool(self, state: ToolState, tool: ToolSegment, q: Sequence[float], where: str) -> ToolState:
        """The tool state after ``tool``'s command with the arm at ``q`` [rad]
        (:func:`~erobs_bt.world.tools.gripper_command` with the stack's contact tolerance).

        Raises:
            MotionError: the bookkeeping refuses the command (``where`` names the step).
        """
        state, _ = gripper_command(
            self.cell,
            state,
            tool.gripper,
            tool.command,
            q,
            contact_tolerance=self.contact_tolerance,
            where=where,
        )
        return state

    def predict_tools(self, state: ToolState, solution: Solution) -> ToolState:
        """The tool state that executing ``solution`` from ``state`` leaves (nothing moves).

        The effects execution applies, in order: an arm segment's end
        (:func:`~erobs_bt.world.tools.after_motion`: a pipettor picks up a tip it
        touches) and a tool segment's command (a ``vacuum_on`` picks up the part under
        the cup). The same functions as planning and execution, so the three agree.

        Raises:
            MotionError: a tool command the bookkeeping refuses (the plan then fails and the
                unit plans afresh when it starts).
        """
        start = solution.start_positions
        q: tuple[float, ...] = tuple(start if start is not None else self.arm.joint_positions())
        for segment in solution.segments:
            if isinstance(segment, ArmSegment):
                if segment.points:
                    q = segment.points[-1].positions
                    state = self.after_move(state, q)
            else:
                state = self.after_tool(state, segment, q, f"step {segment.step_index}")
        return state

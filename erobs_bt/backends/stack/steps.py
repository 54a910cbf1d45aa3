"""The single steps a motion stack runs outside motion units: ``tool_exchange``
(:func:`erobs_bt.world.tools.run_tool_exchange`), the vision family
(:func:`erobs_bt.backends.vision.run_vision`), ``pipettor``, and a lone ``moveto`` or
``end_effector``; and the :class:`Port` through which the exchange and vision move the arm."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from erobs_bt.backends.base import ErrorCode, MotionError, Solution
from erobs_bt.backends.parts import Detector
from erobs_bt.backends.stack.core import StackCore
from erobs_bt.backends.stack.execution import Dispatch, Execution, Play
from erobs_bt.backends.stack.state import LiveState
from erobs_bt.backends.vision import run_vision
from erobs_bt.script.model import (
    EndEffector,
    JointPositions,
    MoveTo,
    Pause,
    Pipettor,
    Step,
    ToolExchange,
    Vision,
)
from erobs_bt.world.tools import ToolState, pipettor_command, planning_tip, run_tool_exchange
from erobs_bt.world.vision import detector_markers

_LOG = logging.getLogger(__name__)

#: Plans steps in the calling thread from a start (``None``: the live state)
#: (:meth:`erobs_bt.backends.stack.planning.UnitPlanner.plan_now`).
PlanNow = Callable[[Sequence[Step], JointPositions | None], Solution]


class StepRunner:
    """Runs one non-batched step on the stack's action thread.

    Args:
        core: the stack's shared parts.
        state: the live tool state and world (vision puts tag objects into it).
        execution: the stack's execution (tool drivers, changer order, stop checks).
        plan_now: plans a step's motions in this thread.
        play: plays a dispatch's segments (the stack's one place of playing).
        detector: finds markers for vision steps.
    """

    def __init__(
        self,
        core: StackCore,
        state: LiveState,
        execution: Execution,
        *,
        plan_now: PlanNow,
        play: Play,
        detector: Detector,
    ) -> None:
        self._core = core
        self._state = state
        self._execution = execution
        self._plan_now = plan_now
        self._play = play
        self._detector = detector
        self._detectors = detector_markers(core.cell)
        self._tag_cache: dict[int, NDArray[np.float64]] = {}

    def run(self, step: Step, dispatch: Dispatch) -> str:
        """Run ``step`` in this thread as ``dispatch``; returns its status message.

        Raises:
            MotionError: the step failed (``EXECUTION_FAILED`` for a step type that cannot
                run here).
        """
        port = Port(
            self._core, self._state, self._execution, dispatch, plan_now=self._plan_now, play=self._play
        )
        if isinstance(step, ToolExchange):
            with self._execution.exchange(step.operation):
                return run_tool_exchange(self._core.cell, step, port)
        if isinstance(step, Vision):
            return run_vision(
                self._core.cell,
                step,
                port,
                detector=self._detector,
                tag_cache=self._tag_cache,
                detectors=self._detectors,
                on_detected=self._state.detected if self._state.tag_objects else None,
            )
        if isinstance(step, Pipettor):
            return self._pipettor(step)
        if isinstance(step, MoveTo | EndEffector):
            port.move([step])
            return f"{step.task_type}: done"
        if isinstance(step, Pause):
            return "pause: nothing to run (the tree waits for Resume)"
        raise MotionError(ErrorCode.EXECUTION_FAILED, f"{step.path}: cannot run a {step.script_type} step")

    def _pipettor(self, step: Pipettor) -> str:
        state = self._state.tools()
        if state.gripper != "pipettor":
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{step.path}: pipettor {step.operation}: the pipettor is not attached "
                f"(attached: {state.gripper})",
            )
        # The bookkeeping's rules first: nothing is sent for a command they refuse.
        pipettor, message = pipettor_command(
            state.pipettor,
            step.operation,
            volume_pct=step.volume_pct,
            led_color=step.led_color,
            where=step.path,
        )
        sent = self._execution.tool_driver("pipettor", step.path).run(step)
        if sent is not None:
            _LOG.info("%s: %s", step.path, sent)
        self._execution.set_tool_state(replace(state, pipettor=pipettor))
        return f"pipettor {step.operation}: {message}"


class Port:
    """The stack as seen by the tool changer and vision: blocking moves from the live state."""

    def __init__(
        self,
        core: StackCore,
        state: LiveState,
        execution: Execution,
        dispatch: Dispatch,
        *,
        plan_now: PlanNow,
        play: Play,
    ) -> None:
        self._core = core
        self._state = state
        self._execution = execution
        self._dispatch = dispatch
        self._plan_now = plan_now
        self._play = play

    def joint_positions(self) -> tuple[float, ...]:
        """The live arm state [rad]."""
        return self._core.arm.joint_positions()

    def tool_state(self) -> ToolState:
        """The live tool state."""
        return self._state.tools()

    def planning_tip(self) -> NDArray[np.float64]:
        """The planning tip of the live tool state (:func:`~erobs_bt.world.tools.planning_tip`)."""
        return planning_tip(self._core.cell, self._state.tools())

    def move(self, steps: Sequence[Step], *, last: bool = False) -> None:
        """Plan ``steps`` from the live state and play them (``last``: the step's final motion,
        whose plan is reported first when the dispatch asks for it)."""
        self._execution.check_stopped(self._dispatch)
        solution = self._plan_now(steps, None)
        report = self._dispatch.on_final_plan
        if last and report is not None:
            self._dispatch.on_final_plan = None
            try:
                report(solution)
            except Exception:  # a plan-ahead that cannot start never fails the step
                _LOG.exception("reporting the final motion's plan failed")
        self._play(solution.segments, self._dispatch)

    def set_tool_state(self, state: ToolState) -> None:
        """Replace the live tool state (the changer switched first in a tool exchange)."""
        self._execution.set_tool_state(state)

    def cup_profile_for(self, gripper: str) -> str | None:
        """The cup the override asks for on ``gripper``, or ``None``."""
        return self._state.cup_profile_for(gripper)

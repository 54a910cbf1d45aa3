"""The parts a :class:`~erobs_bt.backends.stack.MotionStack` is assembled from.

A motion backend (:class:`~erobs_bt.backends.base.MotionBackend`) is one stack of:

* a :class:`~erobs_bt.planning.base.Planner` (the embedded planner; MoveIt, issue 24);
* an :class:`ArmDriver`, which plays arm trajectories (the simulated controller
  :class:`erobs_bt.backends.sim.controller.SimController` |
  ``control_msgs/action/FollowJointTrajectory``,
  :class:`erobs_bt.backends.ros2_control.arm.FollowJointTrajectoryArm`);
* one :class:`ToolDriver` per tool, which commands the tool's hardware (the simulated
  tools: nothing to command, the tool bookkeeping of :mod:`erobs_bt.world.tools` is the
  whole effect | ``control_msgs/action/ParallelGripperCommand`` or ``GripperCommand``, a
  ``ur_msgs/srv/SetIO`` tool output, the ``erobs_bt_interfaces/action/PipettorCommand``
  action), and a :class:`ToolChanger` (tool voltage and changer lock: simulated | the tool
  voltage over SetIO, EROBS's changer having no lock output);
* a :class:`Detector`, which finds markers for vision steps (the simulated markers of
  the cell | a camera pipeline);
* optionally a :class:`FaultInjection` (the simulated cell's fault injection), which the
  stack consults at its cut points: a plan, a dispatch's acceptance, part-way through its
  motion, at its end.

The stack keeps the tool bookkeeping (what is mounted, held, pipetted) on every backend;
the parts only move and command hardware. All calls except :meth:`ArmDriver.execute` block
the calling thread (one of the stack's worker threads), never the tree's tick thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from erobs_bt.backends.base import ArmSegment, JointStateListener, MotionError
from erobs_bt.script.model import JointPositions, Pipettor, Step


class ArmDriver(Protocol):
    """Plays arm trajectories and reports the arm's state.

    Joint positions are in radians, :data:`~erobs_bt.script.model.JOINT_NAMES` order.
    """

    def joint_positions(self) -> JointPositions:
        """The live arm state [rad].

        Raises:
            RuntimeError: no live state is known (a stale or missing joint-state stream).
        """
        ...

    def is_busy(self) -> bool:
        """True while a trajectory is executing."""
        ...

    def check_start(self, positions: Sequence[float], step_index: int) -> None:
        """Refuse a trajectory that does not start here.

        Raises:
            MotionError: ``EXECUTION_FAILED`` unless ``positions`` [rad] is within the start
                tolerance of the live state.
        """
        ...

    def execute(self, segment: ArmSegment, *, fault: tuple[float, MotionError] | None = None) -> Future[None]:
        """Execute one arm trajectory.

        Args:
            segment: the trajectory.
            fault: an injected fault ``(t [s] into the segment, error)``: stop there and fail
                with ``error`` (drivers of real hardware receive none).

        Returns:
            A future done when the trajectory finished, or failing with a :class:`MotionError`.
        """
        ...

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no trajectory executes; False on timeout [s]."""
        ...

    def stop(self) -> None:
        """Decelerate within the acceleration limits and drop the trajectory. Idempotent."""
        ...

    def add_listener(self, listener: JointStateListener, *, rate: float | None = None) -> None:
        """Call ``listener(names, positions, velocities)`` with joint-state updates
        (``rate`` [Hz] per wall second while moving, where the driver sets the pace)."""
        ...

    def remove_listener(self, listener: JointStateListener) -> None:
        """Stop notifying ``listener``."""
        ...

    def shutdown(self) -> None:
        """Drop any trajectory and release the driver's resources. Idempotent."""
        ...


class ToolDriver(Protocol):
    """Commands one tool's hardware (a gripper, the vacuum gripper, the pipettor).

    The stack applies the bookkeeping's rules first (:mod:`erobs_bt.world.tools`: a command
    they refuse is never sent) and records the effect after the driver returned.
    """

    def command(self, state: str, *, what: str) -> str | None:
        """Bring the tool to a gripper state (an ``end_effector_action``, e.g. ``vacuum_on``).

        Args:
            state: the state to reach.
            what: the step, for messages (``step 3``).

        Returns:
            A status text of the hardware, or ``None`` when there is nothing to command.

        Raises:
            MotionError: ``EXECUTION_FAILED`` (refused, not reached), ``TIMEOUT`` (no answer).
        """
        ...

    def run(self, step: Pipettor) -> str | None:
        """Run a pipettor operation (``aspirate``, ``dispense``, ``eject_tip``, ``led``, ...).

        Returns:
            The driver's message, or ``None`` when there is nothing to command.

        Raises:
            MotionError: as :meth:`command`; ``EXECUTION_FAILED`` for a tool that is no pipettor.
        """
        ...

    def stop(self) -> None:
        """Cancel the tool's command in flight, if any. Idempotent."""
        ...


class ToolChanger(Protocol):
    """The tool changer's outputs that a ``tool_exchange`` switches (EROBS's order: the tool
    voltage off before docking, unlock in the dock; lock, then voltage on after a load)."""

    def set_power(self, on: bool, *, what: str) -> None:
        """Switch the tool voltage on (the configured volts) or off (0 V).

        Raises:
            MotionError: ``EXECUTION_FAILED`` or ``TIMEOUT`` from the hardware.
        """
        ...

    def set_locked(self, locked: bool, *, what: str) -> None:
        """Lock or unlock the changer.

        Raises:
            MotionError: ``EXECUTION_FAILED`` or ``TIMEOUT`` from the hardware.
        """
        ...

    def stop(self) -> None:
        """Interrupt what the changer is doing for an exchange (a relaunch of the cell's
        bringup in progress fails "stopped by request"); a stop calls it."""
        ...

    def exchanged(self, gripper: str, *, what: str) -> None:
        """A tool exchange has ended, ``gripper`` fitted (``none``: the bare flange), the arm at
        rest: the cell's drivers follow the new tool (on EROBS's cell its bringup is relaunched
        for it), returning once they are back.

        Raises:
            MotionError: ``EXECUTION_FAILED`` naming what did not come back.
        """
        ...


class Detector(Protocol):
    """Finds fiducial markers for vision steps.

    Marker poses are ``T_base_link_marker`` (4, 4) [m]; ``joints`` is the arm state [rad]
    the detection is made from (the wrist camera's pose follows from it).
    """

    def find(self, marker_id: int, joints: Sequence[float]) -> NDArray[np.float64] | str:
        """Detect one marker from ``joints``.

        Returns:
            Its pose, or why it is not seen (e.g. ``"outside the camera's view cone (52° off axis)"``).
        """
        ...

    def scan(self, joints: Sequence[float]) -> Mapping[int, NDArray[np.float64]]:
        """Every marker seen from ``joints``: marker id -> pose."""
        ...


@dataclass(frozen=True)
class InjectedFault:
    """A fault an injector decided to fire on one call (the simulated cell's fault injection).

    Attributes:
        error: what the call fails with.
        delay: wall seconds before the failure is reported.
        after_fraction: the share of the dispatch's arm motion played before the failure,
            in [0, 1]; ``None``: the call fails before anything moves.
    """

    error: MotionError
    delay: float = 0.0
    after_fraction: float | None = None


class FaultInjection(Protocol):
    """Decides, call by call, whether an injected fault fires (a stack without one has none).

    ``kind`` of a dispatch: ``execute`` (a fresh solution), ``replay`` (a cached one) or
    ``run_step``; ``step_types`` are the script task types involved (a single step gives its
    task type and its script type), ``step_indices`` the steps' indices.
    """

    @property
    def active(self) -> bool:
        """False when no fault is configured (the stack then skips the per-call bookkeeping)."""
        ...

    def on_plan(self, steps: Sequence[Step]) -> InjectedFault | None:
        """Count a plan of ``steps``; the fault that fires on it, if any."""
        ...

    def on_dispatch(
        self, kind: str, *, replay: bool, step_types: Sequence[str], step_indices: Sequence[int]
    ) -> InjectedFault | None:
        """Count a dispatch (its goal acceptance first, then its own kind); the fault that fires."""
        ...

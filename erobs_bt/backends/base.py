"""The contract between the engine and whatever moves the robot.

:class:`MotionBackend` is the protocol the tree's leaves call. Every call that may take
time returns a :class:`concurrent.futures.Future`, so behaviours start work in
``initialise()`` and poll in ``update()`` without blocking a tick. The values it takes and
returns (:class:`Solution`, its segments, :class:`MotionError` and :class:`ErrorCode`) are
defined in :mod:`erobs_bt.motion` and re-exported here, so ``from erobs_bt.backends.base
import Solution`` keeps working.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Protocol, runtime_checkable

from erobs_bt.motion import (
    ArmSegment,
    DetectedPose,
    ErrorCode,
    MotionError,
    Segment,
    Solution,
    StepReport,
    ToolSegment,
    TrajectoryPoint,
    as_motion_error,
)
from erobs_bt.script.model import JOINT_NAMES, JointPositions, Step
from erobs_bt.world.cell import Obstacle

__all__ = [
    "JOINT_NAMES",
    "ArmSegment",
    "DetectedPose",
    "ErrorCode",
    "JointPositions",
    "JointStateListener",
    "MotionBackend",
    "MotionError",
    "Segment",
    "Solution",
    "StepReport",
    "ToolSegment",
    "TrajectoryPoint",
    "as_motion_error",
]


#: A joint-state listener: ``(joint names, positions [rad], velocities [rad/s])``, the
#: ``sensor_msgs/JointState`` fields (unprefixed UR joint names, :data:`JOINT_NAMES` order).
JointStateListener = Callable[[tuple[str, ...], tuple[float, ...], tuple[float, ...]], None]


@runtime_checkable
class MotionBackend(Protocol):
    """What the tree needs from a robot (simulated cell, MoveIt, scripted test double).

    Error contract: futures fail with :class:`MotionError`; any other exception from
    a backend is treated as a caught execution exception (``EXECUTION_FAILED``).
    Implementations must be thread-safe: the orchestrator's tick thread and a ROS
    node's service threads call them concurrently.
    """

    def joint_positions(self) -> JointPositions | None:
        """The live arm state [rad], or ``None`` when no complete six-joint state is known."""
        ...

    def current_gripper(self) -> str:
        """The name of the attached gripper (``none``, ``epick``, ``hande``, ``2fg7``, ``pipettor``)."""
        ...

    def model_revision(self) -> str:
        """The revision of the robot model in use, ``<prefix>__<gripper>[__<cup_profile>]``."""
        ...

    def world_obstacles(self) -> tuple[Obstacle, ...]:
        """The obstacles the next plan avoids (the planning scene's world): the cell's plus
        those added at run time, in ``base_link``, sorted by name."""
        ...

    def set_world_obstacles(self, obstacles: Sequence[Obstacle]) -> str:
        """Replace the planning scene's world from the next plan on; a plan or motion in
        flight keeps the world it started with.

        Args:
            obstacles: the whole new world (the cell's obstacles too, when they are to stay),
                in ``base_link`` or ``base``.

        Returns:
            The new scene revision (:meth:`scene_revision`).

        Raises:
            ValueError: the backend cannot change its world (``backend: moveit``: the scene
                is move_group's), or malformed obstacles (the message says which); nothing
                changes.
        """
        ...

    def scene_revision(self) -> str:
        """A short digest of :meth:`world_obstacles` (12 hex digits of SHA-256 over a canonical
        JSON document, :func:`erobs_bt.world.scene.scene_revision`): the same obstacles, in
        any order, give the same revision."""
        ...

    def prepare_goal(self, start_gripper: str) -> None:
        """Declare the tool attached at the start of a goal (the script's ``start_gripper``).

        Raises:
            MotionError: the backend cannot use that gripper.
        """
        ...

    def dock_contents(self) -> Mapping[int, str | None] | None:
        """What each tool-changer dock holds now: dock number → tool (``None``: empty); ``None``
        when the backend does not know (a test double). The orchestrator checks a goal's tool
        exchanges against it before anything moves."""
        ...

    def plan(
        self, steps: Sequence[Step], *, start: JointPositions | None, after: Solution | None = None
    ) -> Future[Solution]:
        """Plan ``steps`` (``moveto``/``end_effector`` only) as one connected sequence.

        Args:
            steps: the unit's steps, in order.
            start: the arm state to plan from [rad]; ``None`` plans from the live state.
            after: plan ahead (issue 13): a solution of this backend about to be executed
                (not yet dispatched at this call). The tool state then starts as executing
                ``after`` from the present tool state would leave it (a part picked up by
                its ``vacuum_on`` is held); ``start`` is normally its final joints. ``None``:
                the gripper state starts from the live gripper state.

        Returns:
            A future resolving to the solution, or failing with ``PLANNING_FAILED:``.
            Cancelling it before planning has begun means it never runs (a plan-ahead
            that is dropped); once begun it finishes and its result is ignored.
        """
        ...

    def execute(self, solution: Solution, *, replay: bool) -> Future[None]:
        """Execute a solution on the robot.

        Args:
            solution: from :meth:`plan` or from the plan cache.
            replay: ``True`` when the solution comes from the cache; timeouts are then
                reported as ``REPLAY_TIMEOUT:``.

        Returns:
            A future that completes when the motion has finished, or fails with
            ``EXECUTION_FAILED:``, ``TIMEOUT:`` or ``REPLAY_TIMEOUT:``.
        """
        ...

    @property
    def checks_replay(self) -> bool:
        """True when :meth:`check_replay` can check a trajectory (the planner holds the
        planning scene: the embedded planner; not MoveIt's move_group)."""
        ...

    def check_replay(self, solution: Solution, steps: Sequence[Step]) -> str | None:
        """Check a cached solution densely against the planning scene as it is now, before a
        replay sends it (the opt-in ``replay_scene_check``); nothing moves.

        Args:
            solution: the cached solution.
            steps: the unit's steps (each arm segment's ``step_index`` names one).

        Returns:
            ``None`` when it is valid now, else what is wrong, naming the step
            (``tasks[3]: sample 12 at t = 0.480 s in collision (...)``).

        Raises:
            ValueError: :attr:`checks_replay` is false.
        """
        ...

    def run_step(self, step: Step) -> Future[str]:
        """Run one non-batched step (``tool_exchange``, ``pipettor``, the vision family).

        Returns:
            A future resolving to a short status message (a :class:`StepReport`, carrying
            the detected pose, for a ``detect_only`` vision step), or failing with a
            :class:`MotionError`.
        """
        ...

    def stop(self) -> None:
        """Stop any motion safely (decelerate, then drop the trajectory). Idempotent."""
        ...

    def close(self) -> None:
        """Stop any motion and release the backend's threads, processes and connections.

        Idempotent; after it, calls fail with ``EXECUTION_FAILED``.
        """
        ...

    def add_joint_state_listener(self, listener: JointStateListener, *, rate: float | None = None) -> bool:
        """Call ``listener`` with the live arm state as it changes (for ``/joint_states``).

        Args:
            listener: the callback.
            rate: [Hz] wanted notifications per wall second while moving (``None``: the
                backend's own rate); a robot's stream comes at the driver's rate.

        Returns:
            True when the backend will call it; False when it has no joint-state stream
            (a caller then polls :meth:`joint_positions`).
        """
        ...

    def remove_joint_state_listener(self, listener: JointStateListener) -> None:
        """Stop calling ``listener`` (no error when it was not added)."""
        ...

    @property
    def publishes_joint_states(self) -> bool:
        """True when the robot's own driver already publishes ``/joint_states`` (ros2_control).

        A ROS front end then must not republish them on the same topic.
        """
        ...

"""The contract between the engine and whatever moves the robot.

:class:`MotionBackend` is the protocol the tree's leaves call; every ability a backend may
have beyond it is a named protocol here too (:data:`ABILITIES`), checked with ``isinstance``
where it is used. Which backend has which is stated in :mod:`erobs_bt.backends.factory`
(proved there by mypy; test/backends/test_backend_abilities.py checks it at run time). Every call that may
take time returns a :class:`concurrent.futures.Future`, so behaviours start work in
``initialise()`` and poll in ``update()`` without blocking a tick. The values it takes and
returns (:class:`Solution`, its segments, :class:`MotionError` and :class:`ErrorCode`) are
defined in :mod:`erobs_bt.motion` and re-exported here, so ``from erobs_bt.backends.base
import Solution`` keeps working.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Protocol, runtime_checkable

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

if TYPE_CHECKING:
    from erobs_bt.backends.parts import ArmDriver
    from erobs_bt.backends.sim.controller import Playback
    from erobs_bt.world.cell import CellConfig
    from erobs_bt.world.scene import World
    from erobs_bt.world.tools import ToolState

__all__ = [
    "ABILITIES",
    "JOINT_NAMES",
    "ArmSegment",
    "DetectedPose",
    "ErrorCode",
    "FitsCups",
    "HasArm",
    "HasCell",
    "JointPositions",
    "JointStateListener",
    "KnowsIfResettable",
    "KnowsSceneOwner",
    "MeasuresPlayback",
    "MotionBackend",
    "MotionError",
    "PlanListener",
    "PlansAcross",
    "PlansChained",
    "ReportsFinalPlan",
    "ReportsPlanProgress",
    "ResetsSimulation",
    "Segment",
    "Solution",
    "StepReport",
    "ToolSegment",
    "TracksTools",
    "TrajectoryPoint",
    "WatchesWorld",
    "WorldListener",
    "as_motion_error",
]


#: A joint-state listener: ``(joint names, positions [rad], velocities [rad/s])``, the
#: ``sensor_msgs/JointState`` fields (unprefixed UR joint names, :data:`JOINT_NAMES` order).
JointStateListener = Callable[[tuple[str, ...], tuple[float, ...], tuple[float, ...]], None]

#: A world listener: ``(the new world, what changed it)`` (:meth:`WatchesWorld.add_world_listener`).
WorldListener = Callable[["World", str], None]

#: ``listener(steps, planned, moves)``: of the unit ``steps`` being planned, ``planned`` of its
#: ``moves`` (``moveto`` steps, one planning request each) are planned
#: (:meth:`ReportsPlanProgress.add_plan_listener`).
PlanListener = Callable[[tuple[Step, ...], int, int], None]


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


# -- optional abilities ----------------------------------------------------------------------
# Each is a protocol of its own: a caller checks ``isinstance(backend, Ability)`` before using
# it (never ``getattr``: test/backends/test_backend_abilities.py keeps it so). The motion stack
# (erobs_bt.backends.stack) has them all; the scripted test double none.


@runtime_checkable
class PlansAcross(Protocol):
    """A backend that can plan a motion unit ahead of the tool exchanges before it (plan-ahead,
    issue 13: :mod:`erobs_bt.tree.context`)."""

    def plan_across(
        self,
        crossed: Sequence[Step],
        steps: Sequence[Step],
        *,
        start: JointPositions,
        after: Solution | None,
    ) -> Future[Solution]:
        """Plan ``steps`` from the state the ``crossed`` tool exchanges will leave.

        Args:
            crossed: the ``tool_exchange`` steps that run before ``steps``, in order.
            steps: the motion unit's steps.
            start: the arm state [rad] the first exchange starts from.
            after: a solution about to be executed before the exchanges (its tool effects
                apply first, as for :meth:`MotionBackend.plan`), or ``None``.

        Returns:
            A future of the unit's solution: its ``start_positions`` is where the
            exchanges are planned to leave the arm, its ``model_revision`` the model they
            leave; it fails with ``PLANNING_FAILED`` when an exchange cannot be forecast.
        """
        ...


@runtime_checkable
class PlansChained(Protocol):
    """A backend whose planner is slow enough that the engine plans two motion units ahead."""

    @property
    def plan_ahead_depth(self) -> int:
        """How many motion units to plan ahead while one executes (1: the next one only)."""
        ...

    def plan_chained(
        self, first: Future[Solution], steps: Sequence[Step], *, after: Solution | None = None
    ) -> Future[Solution]:
        """Plan ``steps`` from the end of the solution ``first`` resolves to.

        Args:
            first: the earlier unit's plan-ahead.
            steps: the later unit's steps.
            after: the solution about to be dispatched now (its tool effects, then the earlier
                unit's, apply to the live tool state), or ``None``.

        Returns:
            A future of the later unit's solution (fails with ``PLANNING_FAILED`` when
            ``first`` does; cancelling it before its plan starts skips the plan).
        """
        ...


@runtime_checkable
class ReportsFinalPlan(Protocol):
    """A backend that reports the plan of a single step's final motion before executing it:
    the end of a vision step is known only once its detection is made and its last motion
    planned."""

    def run_step_reporting(
        self, step: Step, *, on_final_plan: Callable[[Solution], None] | None
    ) -> Future[str]:
        """As :meth:`MotionBackend.run_step`; ``on_final_plan`` is called on the backend's
        thread with the plan of the step's final motion, before that motion is dispatched."""
        ...


@runtime_checkable
class ReportsPlanProgress(Protocol):
    """A backend that reports a unit's plan move by move (the goal's feedback then says how far
    the plan is: a MoveIt unit plans one request per move)."""

    def add_plan_listener(self, listener: PlanListener) -> None:
        """Call ``listener(steps, planned, moves)`` after each move of a unit is planned, from
        the planning thread, before the plan's future completes (:data:`PlanListener`)."""
        ...


@runtime_checkable
class WatchesWorld(Protocol):
    """A backend that tells when its planning scene's world changes (a
    :meth:`MotionBackend.set_world_obstacles`, a detected tag's collision object)."""

    def add_world_listener(self, listener: WorldListener) -> None:
        """Call ``listener(world, source)`` after every change of the world, from the thread
        that made it (``source``: ``set_world_obstacles`` or ``tag <id>``)."""
        ...

    def remove_world_listener(self, listener: WorldListener) -> None:
        """Stop calling ``listener`` (no error when it was not added)."""
        ...


@runtime_checkable
class HasCell(Protocol):
    """A backend built from a cell description (its tools, docks, parts, obstacles)."""

    @property
    def cell(self) -> CellConfig:
        """The cell description (:func:`erobs_bt.world.config.load_cell`)."""
        ...


@runtime_checkable
class TracksTools(Protocol):
    """A backend that keeps the cell's tool bookkeeping (:mod:`erobs_bt.world.tools`)."""

    def tool_state(self) -> ToolState:
        """The live tool state (attached tool and its cup, held part, parts, pipettor, docks)."""
        ...


@runtime_checkable
class FitsCups(Protocol):
    """A backend that fits suction cups on its vacuum grippers (EROBS's ``cup_profile``)."""

    def cup_profiles(self) -> tuple[str, ...]:
        """Every suction-cup profile of the cell's vacuum grippers, sorted."""
        ...

    def set_cup_override(self, cup_profile: str) -> None:
        """The cup to fit on a vacuum gripper from the next goal's start on (``""``: the
        gripper's default).

        Raises:
            ValueError: ``Unknown cup profile: <name> (available: …)``.
        """
        ...


@runtime_checkable
class ResetsSimulation(Protocol):
    """A backend that can put a simulated cell back as it started (``~/reset_simulation``,
    :meth:`erobs_bt.orchestrator.Orchestrator.reset_simulation`)."""

    def reset_simulation(self) -> str:
        """Put the cell back in its initial state; the caller makes sure no goal runs.

        Returns:
            What the cell is now, for people (``epick attached; docks 1: hande, ...``).

        Raises:
            MotionError: ``EXECUTION_FAILED`` when it cannot (no simulation to reset, the arm
                moving, closed); the message says why.
        """
        ...


@runtime_checkable
class KnowsIfResettable(ResetsSimulation, Protocol):
    """A backend with the reset of :class:`ResetsSimulation` that knows beforehand whether it
    has a simulation to reset (the motion stack: only the ``sim`` assembly has)."""

    @property
    def resettable(self) -> bool:
        """True when :meth:`reset_simulation` can reset this backend."""
        ...


@runtime_checkable
class KnowsSceneOwner(Protocol):
    """A backend that says which ROS node owns its planning scene's names (``collision_object``,
    ``planning_scene``, ``apply_planning_scene``, ``get_planning_scene``,
    ``monitored_planning_scene``): the erobs_bt node serves them only when nobody else does
    (:class:`erobs_bt.ros.node.scene.NodeScene`)."""

    @property
    def scene_owner(self) -> str | None:
        """The fully qualified name of the node that serves the planning scene (``/move_group``
        when the backend plans through MoveIt, whose world is move_group's), or ``None`` when the
        backend's world is its own (:meth:`MotionBackend.set_world_obstacles`)."""
        ...


@runtime_checkable
class HasArm(Protocol):
    """A backend that drives the arm through an arm driver (:class:`erobs_bt.backends.parts.ArmDriver`)."""

    @property
    def arm(self) -> ArmDriver:
        """The arm driver."""
        ...


@runtime_checkable
class MeasuresPlayback(Protocol):
    """An arm driver (:attr:`HasArm.arm`) that measures the simulated time it delivers against
    wall time (the simulated arm's controller)."""

    def playback(self) -> Playback:
        """What the driver has delivered since it started
        (:class:`erobs_bt.backends.sim.controller.Playback`)."""
        ...


#: Every optional ability of a backend (the protocols above, beyond :class:`MotionBackend`).
ABILITIES: tuple[type, ...] = (
    PlansAcross,
    PlansChained,
    ReportsFinalPlan,
    ReportsPlanProgress,
    WatchesWorld,
    HasCell,
    TracksTools,
    FitsCups,
    ResetsSimulation,
    KnowsIfResettable,
    KnowsSceneOwner,
    HasArm,
)

"""The :class:`Planner` protocol: what a motion stack needs from a motion planner.

A planner plans one ``moveto`` step at a time in the world model; the motion stack
(:class:`erobs_bt.backends.stack.MotionStack`) carries the planned joint and tool state
forward from step to step, so a unit is one connected sequence. Two implementations:
the embedded planner (:class:`erobs_bt.planning.planner.CellPlanner`: OMPL and the
cell's collision model) and MoveIt's ``move_group`` (issue 24), which sends the same
inputs as a ``moveit_msgs/MotionPlanRequest`` or ``GetCartesianPath`` request: the start
joint state, and the attached tool and held part as the start state's attached objects.

Conventions: joint positions in radians, :data:`erobs_bt.script.model.JOINT_NAMES` order;
poses in ``base_link`` in metres. Only engine types cross this protocol (script steps,
:class:`~erobs_bt.world.tools.ToolState`, :class:`~erobs_bt.motion.ArmSegment`);
no planner library's types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from erobs_bt.motion import ArmSegment, TrajectoryPoint
    from erobs_bt.script.model import MoveTo
    from erobs_bt.world.cell import Obstacle
    from erobs_bt.world.scene import World
    from erobs_bt.world.tools import ToolState


class Planner(Protocol):
    """Plans single ``moveto`` steps for the robot with a given tool state.

    Implementations are called from the stack's planning thread and its action thread
    (the motions of a tool exchange or a vision step) concurrently, and must be
    thread-safe.
    """

    @property
    def named_states(self) -> Mapping[str, tuple[float, ...]]:
        """The robot's named states (e.g. ``moveit_home``): name -> six joint positions [rad]."""
        ...

    def model_revision(self, tools: ToolState) -> str:
        """The robot-model revision planning with ``tools`` uses,
        ``<prefix>__<gripper>[__<cup_profile>]`` (from configuration only; no model is loaded).

        A solution records it; executing it with another revision attached is refused.
        """
        ...

    @property
    def scene_owner(self) -> str | None:
        """``None`` when the planner plans in the world :meth:`plan_move` is given (the motion
        stack's); otherwise who keeps the planning scene instead (e.g. ``move_group``), and the
        ``world`` argument is ignored."""
        ...

    def plan_move(
        self, step: MoveTo, start: Sequence[float], *, tools: ToolState, world: World | None = None
    ) -> ArmSegment:
        """Plan one ``moveto`` step.

        Args:
            step: the step (its target, ``planning_type`` and ``constraints``).
            start: six joint positions [rad] the motion starts from.
            tools: the tool state at the start: the attached tool (its tip frame is what
                ``cartesian_target`` goals and straight lines place) and the held part
                (checked for collisions with the arm).
            world: the planning scene's obstacles to avoid (:class:`~erobs_bt.world.scene.World`,
                in ``base_link``); ``None``: the world of the previous plan (the cell's at first).

        Returns:
            The time-parameterised trajectory, ``step_index = step.index``, whose first
            point is ``start``.

        Raises:
            MotionError: ``PLANNING_FAILED: <step.path>: <reason>``.
        """
        ...

    def follow(self, tools: ToolState) -> None:
        """The live tool state changed (a part picked up or released, a tool mounted).

        A planner that keeps a planning scene may bring its held part along; it must not
        wait for a plan in progress (every :meth:`plan_move` brings the scene to its own
        ``tools`` anyway) and may leave a new tool's model to the next plan.
        """
        ...

    @property
    def model_reloads(self) -> int:
        """How often the planner loaded another robot model (tool) since it was built."""
        ...


@runtime_checkable
class TrajectoryChecker(Protocol):
    """A planner that can check a stored trajectory against its world as it is now: what the
    opt-in scene check of a replay needs (``replay_scene_check``, docs/behaviour.md §3).

    The embedded planner (:class:`erobs_bt.planning.planner.CellPlanner`) is one; MoveIt's
    move_group client is not (its scene lives in move_group).
    """

    def check_trajectory(
        self,
        step: MoveTo,
        points: Sequence[TrajectoryPoint],
        *,
        tools: ToolState,
        world: World | None = None,
        only: Sequence[Obstacle] | None = None,
    ) -> str | None:
        """Check a trajectory planned earlier for ``step`` (a cache entry's segment) densely
        against the world, the joint limits and the step's path constraints as they are now,
        with the same rules as planning (the same check spacing, the same allowed tool
        contact for a straight line along the tool axis).

        Args:
            step: the step the trajectory implements.
            points: its samples (``points[0]`` is where it starts), joint positions [rad].
            tools: the tool state at its start (the attached tool and the held part).
            world: the planning scene's world as it is now (``None``: the planner's current one).
            only: the obstacles added or moved since it was planned: only the robot against
                these is checked (everything else it was checked against is unchanged);
                ``None``: every check of planning, against the whole world.

        Returns:
            ``None`` when the whole trajectory is valid, else what is wrong and where
            (``tasks[3]: sample 12 at t = 0.480 s in collision (wrist_3_link with box1) ...``).
        """
        ...


@runtime_checkable
class RemotePlanner(Protocol):
    """A planner whose requests take long (a remote ``move_group``: up to seconds each) and may
    run side by side. The motion stack then plans a unit's moves concurrently, each from the
    start the previous move is predicted to end in (:meth:`predict_end`), and keeps a move's
    plan only when it starts where the previous move's plan really ends (within
    :data:`erobs_bt.backends.stack.speculation.JOIN_TOLERANCE`); otherwise that move is planned again from
    the real end, so a unit stays one connected sequence. The engine also plans
    :attr:`plan_ahead_depth` motion units ahead. The embedded planner is not one (its plans
    take milliseconds of CPU that threads would only share).
    """

    @property
    def concurrent_requests(self) -> int:
        """How many :meth:`Planner.plan_move` calls may run at once (1: one after the other)."""
        ...

    @property
    def plan_ahead_depth(self) -> int:
        """How many motion units the engine plans ahead while one executes (1 or 2,
        :func:`erobs_bt.tree.plan_ahead.start_plan_ahead`)."""
        ...

    def predict_end(
        self, step: MoveTo, start: Sequence[float], *, tools: ToolState
    ) -> tuple[float, ...] | None:
        """Where :meth:`Planner.plan_move` of ``step`` from ``start`` [rad] would end, without
        planning: a joint goal's joints, the inverse kinematics of a Cartesian goal seeded
        with ``start``; ``None`` when it cannot be told (the unit then plans that move and the
        ones after it in order). Never raises for a goal that cannot be reached: planning
        reports that."""
        ...


@runtime_checkable
class SceneKeeper(Protocol):
    """A planner that keeps its own planning scene (:attr:`Planner.scene_owner` is not
    ``None``, e.g. move_group) and takes objects into it: how the motion stack puts a detected
    tag's collision object (:func:`erobs_bt.world.scene.tag_objects`) where the planner will
    avoid it, as EROBS adds it to MoveIt's planning scene."""

    def put_object(self, obstacle: Obstacle, *, where: str) -> None:
        """Add ``obstacle`` (in ``base_link``) to the planning scene, replacing an object of the
        same name; the next plan avoids it.

        Raises:
            MotionError: ``EXECUTION_FAILED: <where>: …`` when the scene refuses it or does not
                answer (the object is then not in the scene).
        """
        ...

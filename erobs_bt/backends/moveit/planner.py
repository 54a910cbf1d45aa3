"""The MoveIt planner part: plans ``moveto`` steps with a running ``move_group``.

:class:`MoveItPlanner` implements :class:`erobs_bt.planning.base.Planner` by sending each
step to move_group's standard services (names in the move_group's namespace, MoveIt's
defaults):

========================  ===========================================  ==========================
step                      request                                      service
========================  ===========================================  ==========================
joint / named target      ``MotionPlanRequest``, joint goal; the       ``plan_kinematic_path``
                          pipelines in order (Pilz ``PTP``, then       (``GetMotionPlan``)
                          OMPL), the first success wins
``cartesian_target``      IK of the tip goal (``compute_ik``), then    ``compute_ik``,
(``auto``/``pilz_ptp``)   the joint goal as above                      ``plan_kinematic_path``
straight line (relative,  waypoint of the flange, ``fraction`` at      ``compute_fk``,
``cartesian``/``pilz``)   least ``min_cartesian_fraction`` (0.9)       ``compute_cartesian_path``
========================  ===========================================  ==========================

Every request carries its own full start state: the joints the previous segment of the
unit was planned to end in and the tool attached then (its collision geometry as an
``AttachedCollisionObject`` on the flange, the fitted cup included, with ``touch_links`` the
links rigidly fixed to the flange in move_group's URDF: :func:`.model.rigid_links`), so a
unit is planned as one connected sequence whatever the live planning scene shows. Tip goals are solved for
the flange with the tool's ``T_flange_tip`` from the cell (the tip frame is the IK frame:
the flange goal is the tip goal moved by the tool's own transform). MoveIt
time-parameterises every trajectory (the speed scaling is EROBS's 0.2).

The live tool is attached in the planning scene too (:meth:`MoveItPlanner.follow`, through
``apply_planning_scene``): a tool exchange detaches the old tool and attaches the new one;
move_group is never restarted. ApplyPlanningScene's ``success`` covers world objects only (an
attach or detach move_group cannot do is only logged there: docs/conformance/moveit.md, row
5), so the scene is read back (``get_planning_scene``) and an attach or detach that did not
happen fails naming the object and the link. A detected tag's collision object goes into the same scene
(:meth:`MoveItPlanner.put_object`, a world object in ``base_link``). Named states are the
SRDF's ``group_state`` entries of the arm group (``robot_description_semantic`` of the
move_group node, or its latched topic) and the model revision includes a digest of the URDF
and SRDF move_group loaded (:func:`.model.model_revision`; the parameter, or the topic when
the parameter is empty, as move_group reads them).

Why the interfaces directly and not pymoveit2: pymoveit2's ``MoveIt2`` plans from the live
``/joint_states`` or one start state it keeps, executes what it planned itself, and waits
with its own executor; the engine needs a connected sequence planned from states that do
not exist yet (plan-ahead), trajectories kept in the plan cache and replayed later, and
every wait on its own worker threads. The messages are the same ones pymoveit2 sends.

Errors: MoveIt's error codes become ``PLANNING_FAILED: tasks[3]: GetMotionPlan
/plan_kinematic_path: GOAL_IN_COLLISION (-12): …`` (:func:`.model.moveit_error`); a
service that does not appear or answer in time fails planning the same way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from moveit_msgs.msg import (
    AttachedCollisionObject,
    CollisionObject,
    MotionPlanRequest,
    PlanningScene,
    PlanningSceneComponents,
)
from moveit_msgs.srv import (
    ApplyPlanningScene,
    GetCartesianPath,
    GetMotionPlan,
    GetPlanningScene,
    GetPositionFK,
    GetPositionIK,
)
from numpy.typing import NDArray
from rcl_interfaces.srv import GetParameters
from std_msgs.msg import String

from erobs_bt.backends.base import ArmSegment, ErrorCode, MotionError
from erobs_bt.backends.moveit.local import LocalPlanning, check_robot
from erobs_bt.backends.moveit.model import (
    MoveItConfig,
    attached_tool,
    description_digest,
    error_name,
    joint_goal,
    matrix_of,
    model_revision,
    moveit_error,
    named_states_from_srdf,
    obstacle_msg,
    path_constraints,
    pose_msg,
    positions_of,
    rigid_links,
    robot_state,
    segment_from_trajectory,
    succeeded,
    tool_object_id,
)
from erobs_bt.backends.ros2_control.link import RosLink, wait_future, wait_ready
from erobs_bt.planning.cartesian import distance_from_segment
from erobs_bt.rosqos import latched_qos
from erobs_bt.script.model import JointPositions, MoveTo
from erobs_bt.world.cell import CellConfig, Obstacle
from erobs_bt.world.collision import CollisionModel
from erobs_bt.world.kinematics import (
    T_BASE_LINK_BASE,
    fk,
    fk_batch,
    flange_goal_from_tip_goal,
    ik_nearest,
    pose_from_xyz_rpy,
)
from erobs_bt.world.scene import World
from erobs_bt.world.tools import ToolState, planning_tip

_LOG = logging.getLogger(__name__)


class MoveItPlanner:
    """Plans with move_group (module docstring); one instance per stack, thread-safe.

    Why this class is long: it is the one client of move_group's planning interfaces (plan_kinematic_path,
    compute_cartesian_path, compute_ik/fk, the planning scene services and topics, the robot description
    parameters), and every request shares its state: the model revision, the attached tool, the scene it
    mirrored into move_group and the in-flight bound. Each method is one request or one conversion of its
    answer; the message conversions live in moveit/planning_scene.py and moveit/model.py.

    Args:
        cell: the cell (tool geometry and tip frames, marker and obstacle frames, the
            revision's prefix).
        link: the ROS node the clients live on (started by the caller after construction,
            see :meth:`RosLink.start`).
        config: names and planning settings.

    The robot description is read from move_group at the first call that needs it
    (:meth:`load_description`).
    """

    def __init__(self, cell: CellConfig, link: RosLink, config: MoveItConfig | None = None) -> None:
        self._cell = cell
        self._link = link
        self._config = config if config is not None else MoveItConfig()
        self._validation_lock = threading.Lock()
        self._validation_models: dict[tuple[str, str | None], CollisionModel] = {}
        c = self._config
        node, group = link.node, link.group
        self._plan: Any = node.create_client(
            GetMotionPlan, c.name("plan_kinematic_path"), callback_group=group
        )
        self._cartesian: Any = node.create_client(
            GetCartesianPath, c.name("compute_cartesian_path"), callback_group=group
        )
        self._ik: Any = node.create_client(GetPositionIK, c.name("compute_ik"), callback_group=group)
        self._fk: Any = node.create_client(GetPositionFK, c.name("compute_fk"), callback_group=group)
        self._scene: Any = node.create_client(
            ApplyPlanningScene, c.name("apply_planning_scene"), callback_group=group
        )
        self._get_scene: Any = node.create_client(
            GetPlanningScene, c.name("get_planning_scene"), callback_group=group
        )
        self._parameters: Any = node.create_client(
            GetParameters, c.name(f"{c.node_name}/get_parameters"), callback_group=group
        )
        self._lock = threading.Lock()
        self._description: tuple[str, dict[str, JointPositions]] | None = None  # digest, named states
        self._touch_links: tuple[str, ...] = ()  # the links fixed to flange_link in the URDF
        self._attached: tuple[str, str | None] | None = (
            None  # (tool, cup) attached in move_group's scene by follow()
        )
        self._scene_lock = threading.Lock()
        self._in_flight = threading.BoundedSemaphore(self._config.max_in_flight)
        self._reloads = 0
        self.requests = 0  # planning requests sent (GetMotionPlan + GetCartesianPath)
        self._local = LocalPlanning(cell, self._config) if self._config.planning == "local" else None

    @property
    def config(self) -> MoveItConfig:
        """Names and planning settings."""
        return self._config

    # -- the robot model -----------------------------------------------------------------------
    def load_description(self) -> tuple[str, Mapping[str, JointPositions]]:
        """Read ``robot_description`` and ``robot_description_semantic`` (once), as move_group
        itself does (docs/conformance/moveit.md, row 4): the move_group node's parameter when it
        is set, else the latched ``std_msgs/String`` topic of the same name in move_group's
        namespace (UR's Jazzy launch publishes the URDF there only). Returns the digest of the
        two and the arm group's named states.

        Raises:
            MotionError: ``PLANNING_FAILED`` when a text is neither a parameter nor on its topic
                within ``server_timeout``, or the URDF/SRDF is invalid (names the node, the
                parameter and the topic).
        """
        with self._lock:
            if self._description is not None:
                return self._description
            node = self._config.name(self._config.node_name)
            texts = []
            for name in ("robot_description", "robot_description_semantic"):
                # One name per request: a parameter that is declared but unset may be left out
                # of the answer (rclpy) or come as PARAMETER_NOT_SET (rclcpp).
                values = self._call(
                    self._parameters,
                    GetParameters.Request(names=[name]),
                    what=f"GetParameters {node}",
                    where="robot description",
                ).values
                text = values[0].string_value if len(values) == 1 else ""
                if not text:
                    text = self._latched_text(name)
                if not text:
                    raise MotionError(
                        ErrorCode.PLANNING_FAILED,
                        f"robot description: {node} has no {name} parameter, and nothing came on "
                        f"{self._config.name(name)} within {self._config.server_timeout:g} s",
                    )
                texts.append(text)
            urdf, srdf = texts
            try:
                states = named_states_from_srdf(
                    srdf, group=self._config.group, joint_prefix=self._config.joint_prefix
                )
                self._touch_links = rigid_links(urdf, self._config.flange_link)
                if self._local is not None:
                    check_robot(urdf, self._config)
            except ValueError as exc:
                raise MotionError(ErrorCode.PLANNING_FAILED, f"{node}: {exc}") from None
            self._description = (description_digest(urdf, srdf), states)
            _LOG.info(
                "move_group %s: description %s, named states %s",
                node,
                self._description[0],
                ", ".join(sorted(states)) or "none",
            )
            if self._local is not None:
                # On the node's own log too (the ROS console and /rosout), where an operator looks.
                self._link.node.get_logger().info(
                    f"planning: local: {node}'s robot_description checked (UR5e's kinematics and joint "
                    "limits, collision geometry on UR's links only, base_link at the root); plans are "
                    "made here in move_group's planning scene, move_group executes them"
                )
            return self._description

    def _latched_text(self, name: str) -> str:
        """The text on the latched ``std_msgs/String`` topic ``name`` in move_group's namespace
        (transient local, as robot_state_publisher and move_group publish it), waiting up to
        ``server_timeout``; ``""`` when none came."""
        topic = self._config.name(name)
        got: list[str] = []
        arrived = threading.Event()

        def take(message: String) -> None:
            if not got:
                got.append(message.data)
            arrived.set()

        latched = latched_qos(1)
        node = self._link.node
        subscription = node.create_subscription(String, topic, take, latched, callback_group=self._link.group)
        try:
            arrived.wait(self._config.server_timeout)
        finally:
            node.destroy_subscription(subscription)
        return got[0] if got else ""

    @property
    def named_states(self) -> Mapping[str, JointPositions]:
        """The SRDF's named states of the arm group: name -> joints [rad].

        Raises:
            MotionError: as :meth:`load_description`.
        """
        return self.load_description()[1]

    def attached_tool(self, tools: ToolState) -> AttachedCollisionObject | None:
        """``tools``' attached collision object, touching the links fixed to the flange in
        move_group's URDF (:func:`.model.attached_tool`; ``None`` for the bare flange).

        Raises:
            MotionError: as :meth:`load_description`.
        """
        if tools.gripper == "none":
            return None
        self.load_description()
        return attached_tool(self._cell, tools, self._config, touch_links=self._touch_links)

    def model_revision(self, tools: ToolState) -> str:
        """``<prefix>-<digest>__<gripper>[__<cup_profile>]`` (:func:`.model.model_revision`)."""
        return model_revision(self._cell, tools, self.load_description()[0])

    @property
    def model_reloads(self) -> int:
        """How often another tool was attached in move_group's planning scene."""
        return self._reloads

    def follow(self, tools: ToolState) -> None:
        """Attach the live tool in move_group's planning scene when it changed (detaching the
        one before), through ``apply_planning_scene``; move_group is not restarted.

        Every plan sends its own start state with its tool, so this keeps the scene other
        clients (RViz, a MoveIt user) see truthful.

        Raises:
            MotionError: ``EXECUTION_FAILED`` when the scene service refuses or is missing, or
                the scene read back does not show the change (names the object and the link).
        """
        with self._scene_lock:
            wanted = (tools.gripper, tools.cup_profile)
            if self._attached == wanted:
                return
            where = f"attach {tools.gripper}"
            if self._attached is not None and self._attached[0] != "none":
                # Detached, MoveIt puts the object back into the world where the flange leaves
                # it: remove it from there too (the tool stays in its dock, the cell models it).
                old = AttachedCollisionObject()
                old.link_name = self._config.flange_link
                old.object.id = tool_object_id(self._attached[0])
                old.object.operation = CollisionObject.REMOVE
                detach = PlanningScene(is_diff=True)
                detach.robot_state.is_diff = True
                detach.robot_state.attached_collision_objects.append(old)
                self._apply(detach, where)
                remove = PlanningScene(is_diff=True)
                remove.robot_state.is_diff = True
                remove.world.collision_objects.append(
                    CollisionObject(id=tool_object_id(self._attached[0]), operation=CollisionObject.REMOVE)
                )
                self._apply(remove, where)
                gone = tool_object_id(self._attached[0])
                attached, world = self._read_scene(where)
                if gone in attached or gone in world:
                    raise MotionError(
                        ErrorCode.EXECUTION_FAILED,
                        f"{where}: move_group's planning scene still has {gone} "
                        f"({'attached to ' + attached[gone] if gone in attached else 'in the world'}) "
                        "after ApplyPlanningScene answered success",
                    )
            try:
                new = self.attached_tool(tools)
            except MotionError as exc:
                raise MotionError(ErrorCode.EXECUTION_FAILED, f"{where}: {exc.detail}") from None
            if new is not None:
                attach = PlanningScene(is_diff=True)
                attach.robot_state.is_diff = True
                attach.robot_state.attached_collision_objects.append(new)
                self._apply(attach, where)
                attached, _world = self._read_scene(where)
                if attached.get(new.object.id) != new.link_name:
                    raise MotionError(
                        ErrorCode.EXECUTION_FAILED,
                        f"{where}: ApplyPlanningScene answered success but move_group's planning scene "
                        f"has no {new.object.id} attached to {new.link_name!r} (attached: "
                        f"{', '.join(f'{k} on {v}' for k, v in sorted(attached.items())) or 'none'}): "
                        "is flange_link (and joint_prefix) the robot description's?",
                    )
            _LOG.info(
                "planning scene: %s attached (was %s)",
                tools.gripper,
                self._attached[0] if self._attached is not None else "unknown",
            )
            self._attached = wanted
            self._reloads += 1

    def _apply(self, scene: PlanningScene, where: str) -> None:
        """Send one planning-scene diff through ``apply_planning_scene``.

        Raises:
            MotionError: ``EXECUTION_FAILED`` when the service is missing or refuses the diff.
        """
        what = f"ApplyPlanningScene {self._config.name('apply_planning_scene')}"
        try:
            answer = self._call(self._scene, ApplyPlanningScene.Request(scene=scene), what=what, where=where)
        except MotionError as exc:
            raise MotionError(ErrorCode.EXECUTION_FAILED, exc.detail) from None
        if not answer.success:
            raise MotionError(ErrorCode.EXECUTION_FAILED, f"{where}: {what} refused the change")

    def _read_scene(self, where: str) -> tuple[dict[str, str], set[str]]:
        """move_group's planning scene as read back through ``get_planning_scene``: the attached
        objects (id -> link) and the world objects' ids.

        Raises:
            MotionError: ``EXECUTION_FAILED`` when the service is missing or does not answer.
        """
        try:
            scene = self._get_planning_scene(PlanningSceneComponents.WORLD_OBJECT_NAMES, where)
        except MotionError as exc:
            raise MotionError(ErrorCode.EXECUTION_FAILED, exc.detail) from None
        attached = {a.object.id: a.link_name for a in scene.robot_state.attached_collision_objects}
        return attached, {o.id for o in scene.world.collision_objects}

    def _get_planning_scene(self, world: int, where: str) -> PlanningScene:
        """move_group's planning scene through ``get_planning_scene``: the attached objects and
        the ``world`` components (``WORLD_OBJECT_NAMES``, or what local planning reads: the
        world geometry, the allowed-collision matrix, the octomap, the links' padding and scale).

        Raises:
            MotionError: ``PLANNING_FAILED`` when the service is missing or does not answer.
        """
        request = GetPlanningScene.Request()
        request.components.components = PlanningSceneComponents.ROBOT_STATE_ATTACHED_OBJECTS | world
        what = f"GetPlanningScene {self._config.name('get_planning_scene')}"
        scene: PlanningScene = self._call(self._get_scene, request, what=what, where=where).scene
        return scene

    def put_object(self, obstacle: Obstacle, *, where: str) -> None:
        """Add (or move) ``obstacle`` in move_group's planning scene: a world ``CollisionObject``
        (``ADD``, frame ``base_link``, id = the obstacle's name) through ``apply_planning_scene``
        (:class:`~erobs_bt.planning.base.SceneKeeper`).

        Raises:
            MotionError: ``EXECUTION_FAILED`` when the scene service refuses or is missing.
        """
        diff = PlanningScene(is_diff=True)
        diff.robot_state.is_diff = True
        diff.world.collision_objects.append(obstacle_msg(obstacle))
        with self._scene_lock:
            self._apply(diff, where)

    # -- planning ----------------------------------------------------------------------------
    @property
    def scene_owner(self) -> str:
        """``move_group``: its planning scene is the world (``world`` of :meth:`plan_move` is
        not used; clients change it through move_group's ``collision_object``,
        ``planning_scene`` and ``apply_planning_scene``)."""
        return "move_group"

    def plan_move(
        self, step: MoveTo, start: Sequence[float], *, tools: ToolState, world: World | None = None
    ) -> ArmSegment:
        """Plan one ``moveto`` step from ``start`` [rad] with ``tools`` attached (module docstring),
        in move_group's planning scene (``world`` is not used: :attr:`scene_owner`).

        With ``planning: local`` the embedded planner plans it instead, on move_group's robot (checked
        when the description is loaded) and in its planning scene as read now
        (:mod:`erobs_bt.backends.moveit.local`).

        Raises:
            MotionError: ``PLANNING_FAILED: <step.path>: <reason>``.
        """
        if self._local is not None:
            self.load_description()
            components = PlanningSceneComponents
            scene = self._get_planning_scene(
                components.WORLD_OBJECT_GEOMETRY
                | components.ALLOWED_COLLISION_MATRIX
                | components.OCTOMAP
                | components.LINK_PADDING_AND_SCALING,
                step.path,
            )
            snapshot = self._local.snapshot(scene, where=step.path)
            return self._local.plan_move(step, start, tools=tools, scene=snapshot)
        attached = self.attached_tool(tools)
        kind, goal = self._goal(step, start, tools, attached)
        if kind == "line":
            return self._plan_line(step, start, goal, attached)
        return self._plan_joints(step, start, goal, attached, tools, world)

    def _validate_ptp(self, segment: ArmSegment, tools: ToolState, world: World | None, where: str) -> None:
        """Check a Pilz PTP trajectory against the cell before it runs: every point, and the
        motion between them every 0.01 rad, with ``tools``' geometry and the obstacles of
        ``world`` (the cell's when ``None``), in the cell's collision model.

        Pilz checks no path itself; only a ``ValidateSolution`` response adapter in the cell's
        Pilz pipeline does, at the trajectory's points (docs/conformance/moveit.md, row 6), and
        moveit_msgs here has no ``GetStateValidity`` to ask move_group: the backend checks.

        Raises:
            MotionError: ``PLANNING_FAILED`` naming the point and the bodies in contact.
        """
        if not self._config.validate_ptp:
            return
        key = (tools.gripper, tools.cup_profile)
        with self._validation_lock:
            model = self._validation_models.get(key)
            if model is None:
                model = CollisionModel(self._cell, gripper=tools.gripper, cup_profile=tools.cup_profile)
                self._validation_models[key] = model
            obstacles = world.obstacles if world is not None else self._cell.obstacles
            if model.obstacles != obstacles:
                model.set_obstacles(obstacles)
            q = np.asarray([p.positions for p in segment.points], dtype=float)
            bad = model.check_path(q, max_step=0.01)
            if bad is None:
                return
            contact = model.first_contact(q[bad]) or model.first_contact(q[max(0, bad - 1)])
        bodies = f" ({contact[0]} touches {contact[1]})" if contact else ""
        raise MotionError(
            ErrorCode.PLANNING_FAILED,
            f"{where}: Pilz PTP's trajectory collides in the cell's model at or before point {bad} "
            f"of {len(q)}{bodies}: move_group's Pilz pipeline did not validate it (no ValidateSolution "
            "adapter?); not executed",
        )

    @property
    def concurrent_requests(self) -> int:
        """How many planning requests one unit sends to move_group at once
        (:class:`~erobs_bt.planning.base.RemotePlanner`; ``concurrent_requests`` of the
        configuration, 1: one after the other; always 1 with ``planning: local``, whose plans take
        milliseconds in this process and would only wait for each other on the planner's model)."""
        return 1 if self._local is not None else self._config.concurrent_requests

    @property
    def plan_ahead_depth(self) -> int:
        """How many motion units the engine plans ahead (``plan_ahead_depth`` of the
        configuration; :class:`~erobs_bt.planning.base.RemotePlanner`)."""
        return self._config.plan_ahead_depth

    def predict_end(self, step: MoveTo, start: Sequence[float], *, tools: ToolState) -> JointPositions | None:
        """Where :meth:`plan_move` would end without planning: a joint goal's joints (Pilz PTP
        and OMPL end a trajectory at the goal state), the ``compute_ik`` answer for the flange
        goal of a straight line or a Cartesian goal, seeded with ``start`` [rad] (a straight
        line ends in the IK branch it starts in); ``None`` when FK or IK does not answer with a
        solution (planning the step reports why)."""
        try:
            attached = self.attached_tool(tools)
            kind, goal = self._goal(step, start, tools, attached)
            if kind == "line":
                return self._inverse(goal, start, attached, step.path, avoid_collisions=False)
        except MotionError:
            return None
        a, b, c, d, e, f = (float(x) for x in goal)
        return (a, b, c, d, e, f)

    def _goal(self, step: MoveTo, start: Sequence[float], tools: ToolState, attached: Any) -> tuple[str, Any]:
        """What ``step`` asks for from ``start``: ``("joints", six joints [rad])`` or
        ``("line", T_base_link_flange (4, 4))`` for a straight line of the flange.

        Raises:
            MotionError: ``PLANNING_FAILED`` for an unknown named target, a malformed
                ``cartesian_target``, an unknown frame, or FK/IK without an answer.
        """
        where = step.path
        if step.target is not None:
            goal = step.target_joints
            if goal is None:
                goal = self.named_states.get(step.target)
            if goal is None:
                known = ", ".join(sorted(self.named_states)) or "none"
                raise MotionError(
                    ErrorCode.PLANNING_FAILED,
                    f"{where}: target {step.target!r} is neither a pose nor a named state of "
                    f"{self._config.group} (known: {known})",
                )
            return "joints", goal
        if step.direction_vector is not None and step.distance is not None:
            T_start = self._forward(start, attached, where)
            T_goal = T_start.copy()
            T_goal[:3, 3] += T_start[:3, :3] @ np.asarray(step.direction_vector, dtype=float) * step.distance
            return "line", T_goal
        if step.cartesian_target is not None:
            T_flange_tip = planning_tip(self._cell, tools)
            values = [float(v) for v in step.cartesian_target]
            if len(values) not in (3, 6):
                raise MotionError(
                    ErrorCode.PLANNING_FAILED,
                    f"{where}: cartesian_target must be 3 or 6 numbers, got {values}",
                )
            T_frame = self._frame(step.frame_id, where)
            if len(values) == 6:
                T_tip_goal = T_frame @ pose_from_xyz_rpy(values[:3], values[3:], degrees=False)
            else:
                T_tip_goal = np.eye(4)
                T_tip_goal[:3, :3] = (self._forward(start, attached, where) @ T_flange_tip)[:3, :3]
                T_tip_goal[:3, 3] = (T_frame @ np.append(values, 1.0))[:3]
            T_goal = flange_goal_from_tip_goal(T_tip_goal, T_flange_tip)
            if step.planning_type in ("cartesian", "pilz"):
                return "line", T_goal
            return "joints", self._inverse(T_goal, start, attached, where)
        raise MotionError(
            ErrorCode.PLANNING_FAILED,
            f"{where}: moveto has no target, direction/distance or cartesian_target",
        )

    def _pipelines(self, planning_type: str) -> tuple[tuple[str, str], ...]:
        if planning_type in ("pilz", "pilz_ptp"):
            return (
                tuple(p for p in self._config.pipelines if p[0].startswith("pilz")) or self._config.pipelines
            )
        return self._config.pipelines

    def _plan_joints(
        self,
        step: MoveTo,
        start: Sequence[float],
        goal: Sequence[float],
        attached: Any,
        tools: ToolState,
        world: World | None,
    ) -> ArmSegment:
        c = self._config
        failures: list[str] = []
        last: MotionError | None = None
        for pipeline, planner in self._pipelines(step.planning_type):
            request = MotionPlanRequest()
            request.start_state = robot_state(start, c, attached)
            request.goal_constraints = [joint_goal(goal, c)]
            request.path_constraints = path_constraints(step.constraints, c)
            request.pipeline_id, request.planner_id = pipeline, planner
            request.group_name = c.group
            request.num_planning_attempts = c.planning_attempts
            request.allowed_planning_time = c.planning_time
            request.max_velocity_scaling_factor = c.speed_scaling
            request.max_acceleration_scaling_factor = c.speed_scaling
            chosen = f"{pipeline}/{planner}" if planner else pipeline
            what = f"GetMotionPlan {c.name('plan_kinematic_path')} ({chosen})"
            self.requests += 1
            response = self._call(
                self._plan, GetMotionPlan.Request(motion_plan_request=request), what=what, where=step.path
            ).motion_plan_response
            if succeeded(response.error_code):
                segment = self._segment(response.trajectory, start, step)
                if not pipeline.startswith("pilz"):
                    return segment
                try:
                    self._validate_ptp(segment, tools, world, step.path)
                except MotionError as exc:
                    last = exc
                    failures.append(f"{pipeline}: its trajectory collides in the cell's model")
                    continue
                return segment
            last = moveit_error(response.error_code, planning=True, where=step.path, what=what)
            failures.append(f"{pipeline}: {error_name(response.error_code.val)}")
        assert last is not None
        if len(failures) > 1:
            raise MotionError(ErrorCode.PLANNING_FAILED, f"{last.detail} (tried {'; '.join(failures)})")
        raise last

    def _plan_line(
        self, step: MoveTo, start: Sequence[float], T_goal: NDArray[np.float64], attached: Any
    ) -> ArmSegment:
        c = self._config
        request = GetCartesianPath.Request()
        request.header.frame_id = "base_link"
        request.start_state = robot_state(start, c, attached)
        request.group_name = c.group
        request.link_name = c.flange_link
        request.waypoints = [pose_msg(T_goal)]
        request.max_step = c.cartesian_step
        request.jump_threshold = c.jump_threshold
        request.avoid_collisions = True
        request.path_constraints = path_constraints(step.constraints, c)
        request.max_velocity_scaling_factor = c.speed_scaling
        request.max_acceleration_scaling_factor = c.speed_scaling
        what = f"GetCartesianPath {c.name('compute_cartesian_path')}"
        self.requests += 1
        response = self._call(self._cartesian, request, what=what, where=step.path)
        if not succeeded(response.error_code):
            raise moveit_error(response.error_code, planning=True, where=step.path, what=what)
        if response.fraction < c.min_cartesian_fraction:
            raise MotionError(
                ErrorCode.PLANNING_FAILED,
                f"{step.path}: {what}: only {response.fraction:.1%} of the straight line is possible "
                f"(at least {c.min_cartesian_fraction:.0%} needed)"
                + (f": {response.error_code.message}" if response.error_code.message else ""),
            )
        segment = self._segment(response.solution, start, step)
        self._check_line(segment, start, T_goal, step.path, what)
        return segment

    def _check_line(
        self,
        segment: ArmSegment,
        start: Sequence[float],
        T_goal: NDArray[np.float64],
        where: str,
        what: str,
    ) -> None:
        """Refuse a Cartesian path whose flange leaves the straight line from ``start``'s flange
        to ``T_goal`` (``T_base_link_flange``) by more than ``line_tolerance`` [m] at any point
        (the cell's analytic FK).

        move_group checks no joint jump (row 10), and its answer is not the IK waypoints but
        TOTG samples every 0.1 s (``time_optimal_trajectory_generation.cpp`` 1245-1266; the
        service times it, ``cartesian_path_service_capability.cpp`` 194-197), so MoveIt's own
        jump test between consecutive waypoints (``cartesian_interpolator.cpp`` 111-184) cannot
        be applied to it: a flip is spread over several samples at the wrist's speed limit. Its
        trace is the flange leaving the line between the waypoints on each side of the jump.

        Raises:
            MotionError: ``PLANNING_FAILED`` naming the point, its time and the distance.
        """
        q = np.asarray([p.positions for p in segment.points], dtype=float)
        tips = fk_batch(q)[:, :3, 3]
        off = distance_from_segment(tips, fk(start)[:3, 3], T_goal[:3, 3])
        worst = int(np.argmax(off))
        limit = self._config.line_tolerance
        if off[worst] > limit:
            t = segment.points[worst].time_from_start
            raise MotionError(
                ErrorCode.PLANNING_FAILED,
                f"{where}: {what}: the flange leaves the straight line by {off[worst] * 1000:.1f} mm "
                f"at point {worst} of {len(q)} (t = {t:.2f} s; line_tolerance {limit * 1000:g} mm): "
                "a joint jump (a wrist flip near a singularity), which move_group does not refuse; "
                "not executed",
            )

    def _segment(self, trajectory: Any, start: Sequence[float], step: MoveTo) -> ArmSegment:
        try:
            segment = segment_from_trajectory(trajectory, self._config, step.index)
        except MotionError as exc:
            raise MotionError(ErrorCode.PLANNING_FAILED, f"{step.path}: {exc.detail}") from None
        deviation = float(
            np.max(np.abs(np.asarray(segment.points[0].positions) - np.asarray(start, dtype=float)))
        )
        if deviation > self._config.start_tolerance:
            raise MotionError(
                ErrorCode.PLANNING_FAILED,
                f"{step.path}: MoveIt's trajectory starts {deviation:.4f} rad from the requested start state",
            )
        return segment

    def _forward(self, joints: Sequence[float], attached: Any, where: str) -> NDArray[np.float64]:
        """``T_base_link_flange`` at ``joints`` from move_group's ``compute_fk``."""
        c = self._config
        request = GetPositionFK.Request()
        request.header.frame_id = "base_link"
        request.fk_link_names = [c.flange_link]
        request.robot_state = robot_state(joints, c, attached)
        what = f"GetPositionFK {c.name('compute_fk')}"
        response = self._call(self._fk, request, what=what, where=where)
        if not succeeded(response.error_code) or not response.pose_stamped:
            raise moveit_error(response.error_code, planning=True, where=where, what=what)
        return matrix_of(response.pose_stamped[0].pose)

    def _inverse(
        self,
        T_flange: NDArray[np.float64],
        seed: Sequence[float],
        attached: Any,
        where: str,
        *,
        avoid_collisions: bool = True,
    ) -> JointPositions:
        """Joints [rad] that put the flange at ``T_flange``, from move_group's ``compute_ik``
        seeded with ``seed`` and checked for collisions (unless ``avoid_collisions`` is off:
        a prediction of where a straight line ends, which may press onto a part), on the IK
        branch nearest the seed.

        KDL answers whichever branch its iteration from the seed or a random restart lands on
        (docs/conformance/moveit.md, row 7), so an answer farther from the seed than the cell's
        analytic nearest branch (:func:`~erobs_bt.world.kinematics.ik_nearest`, + 1e-3 rad) is
        asked again, seeded with that branch (KDL converges at once from an exact solution);
        if move_group still answers another branch (the nearest one is in collision), the
        goal is refused rather than reached on another branch.

        Raises:
            MotionError: ``PLANNING_FAILED``: no answer, no solution, or only another branch.
        """
        joints = self._ask_ik(T_flange, seed, attached, where, avoid_collisions)
        nearest = ik_nearest(T_flange, seed=seed)
        if nearest is None or _farther(joints, nearest, seed) <= _BRANCH_TOLERANCE:
            return joints
        again = self._ask_ik(T_flange, tuple(float(v) for v in nearest), attached, where, avoid_collisions)
        if _farther(again, nearest, seed) <= _BRANCH_TOLERANCE:
            return again
        raise MotionError(
            ErrorCode.PLANNING_FAILED,
            f"{where}: GetPositionIK {self._config.name('compute_ik')}: the solution is on another IK "
            f"branch ({_rounded(again)}, {_distance(again, seed):.3f} rad from the start) than the "
            f"nearest one ({_rounded(nearest)}, {_distance(nearest, seed):.3f} rad), which move_group "
            "does not accept (in collision?); refused rather than change branches",
        )

    def _ask_ik(
        self,
        T_flange: NDArray[np.float64],
        seed: Sequence[float],
        attached: Any,
        where: str,
        avoid_collisions: bool,
    ) -> JointPositions:
        """One ``compute_ik`` request (see :meth:`_inverse`)."""
        c = self._config
        request = GetPositionIK.Request()
        ik = request.ik_request
        ik.group_name = c.group
        ik.robot_state = robot_state(seed, c, attached)
        ik.avoid_collisions = avoid_collisions
        ik.ik_link_name = c.flange_link
        ik.pose_stamped.header.frame_id = "base_link"
        ik.pose_stamped.pose = pose_msg(T_flange)
        ik.timeout.sec = 1
        what = f"GetPositionIK {c.name('compute_ik')}"
        response = self._call(self._ik, request, what=what, where=where)
        if not succeeded(response.error_code):
            raise moveit_error(response.error_code, planning=True, where=where, what=what)
        joints = positions_of(response.solution, c)
        if joints is None:
            raise MotionError(ErrorCode.PLANNING_FAILED, f"{where}: {what}: the solution lacks an arm joint")
        return joints

    def _frame(self, frame_id: str, where: str) -> NDArray[np.float64]:
        """``T_base_link_frame`` of a goal's frame: ``base_link``, ``base``, ``marker_<id>`` or an
        obstacle of the cell (the frames a script may name)."""
        try:
            if frame_id in ("", "base_link"):
                return np.eye(4)
            if frame_id == "base":
                return T_BASE_LINK_BASE.copy()
            if frame_id.startswith("marker_") and frame_id[7:].isdigit():
                return self._cell.marker(int(frame_id[7:])).pose.matrix()
            return self._cell.obstacle(frame_id).T_base_link_obstacle()
        except ValueError as exc:
            raise MotionError(ErrorCode.PLANNING_FAILED, f"{where}: frame_id {frame_id!r}: {exc}") from None

    def _call(self, client: Any, request: Any, *, what: str, where: str) -> Any:
        """Call a service and wait for the answer (in the calling thread), paced: at most
        ``max_in_flight`` requests of this planner are at move_group at once; a request waits
        for its turn here, and its timeout starts when it is sent (docs/conformance/moveit.md,
        row 3).

        Raises:
            MotionError: ``PLANNING_FAILED`` when the service does not appear within
                ``server_timeout`` or does not answer within ``planning_time + call_timeout``
                of being sent.
        """
        c = self._config
        if not wait_ready(client.service_is_ready, c.server_timeout):
            raise MotionError(
                ErrorCode.PLANNING_FAILED,
                f"{where}: {what}: service unavailable (waited {c.server_timeout:g} s)",
            )
        timeout = c.planning_time + c.call_timeout
        with self._in_flight:
            future = client.call_async(request)
            if not wait_future(future, timeout):
                # Not answered: move_group may still be working on it; the next request waits
                # behind it there, so its own timeout covers that wait (at most one late answer).
                raise MotionError(
                    ErrorCode.PLANNING_FAILED,
                    f"{where}: {what}: no answer within {timeout:g} s of sending it",
                )
        return future.result()

    def forget_scene(self) -> None:
        """Forget which tool :meth:`follow` attached (move_group was restarted: attach again)."""
        with self._scene_lock:
            self._attached = None

    @staticmethod
    def object_id(gripper: str) -> str:
        """The planning-scene id of ``gripper``'s attached collision object."""
        return tool_object_id(gripper)


#: [rad] how much farther from the seed than the nearest analytic branch an IK answer may be
#: and still count as that branch (KDL's answers are within 1e-5 of the pose).
_BRANCH_TOLERANCE = 1e-3


def _distance(q: Sequence[float] | NDArray[np.float64], seed: Sequence[float] | NDArray[np.float64]) -> float:
    """Euclidean joint distance [rad]."""
    return float(np.linalg.norm(np.asarray(q, dtype=float) - np.asarray(seed, dtype=float)))


def _farther(
    q: Sequence[float] | NDArray[np.float64],
    nearest: Sequence[float] | NDArray[np.float64],
    seed: Sequence[float] | NDArray[np.float64],
) -> float:
    """How much farther from ``seed`` ``q`` is than ``nearest`` [rad]."""
    return _distance(q, seed) - _distance(nearest, seed)


def _rounded(q: Sequence[float] | NDArray[np.float64]) -> list[float]:
    return [round(float(v), 3) for v in q]

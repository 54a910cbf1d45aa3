"""Local planning for the ``moveit`` backend: plan in erobs_bt's process on move_group's robot
and planning scene, and let move_group execute (``planning: local`` of the configuration).

Why: a stock move_group answers one planning request at a time (docs/conformance/moveit.md,
row 3), so a goal of about 45 moves at 2 s a request keeps the robot waiting for move_group
longer than it moves (BENCHMARKS.md, issue 39). EROBS's own cell does not plan through
move_group either: its orchestrator builds MoveIt Task Constructor pipelines in its own process
on the robot model it loads, and move_group only executes the solution (bondada-a/erobs @
739cc0c ``src/beambot/beambot/stages/base_stages.py`` 207-228, 451-457, 460-528, 728). Here the
embedded planner (:class:`~erobs_bt.planning.planner.CellPlanner`: OMPL and straight lines on
UR's collision meshes with pinocchio + coal) plans, and the ``moveit`` backend sends the result
through ExecuteTrajectory as it sends move_group's own plans.

What makes a plan made here safe to run through move_group (:class:`LocalPlanning`):

* **The robot is move_group's** (:func:`check_robot`, once per description): its URDF's chain
  from ``base_link`` to ``flange_link`` must put the flange where the planner's kinematics
  do (:func:`~erobs_bt.world.kinematics.fk`) within :data:`KINEMATICS_TOLERANCE` at seeded
  configurations (a calibrated arm whose URDF carries its own kinematics is refused), and
  every link of the URDF with collision geometry must be one the planner models with UR's
  collision meshes (:data:`~erobs_bt.world.cell.ROBOT_LINKS`, with ``joint_prefix``), and its
  joint limits must hold the planner's (the position range, and the velocity the planner uses
  at ``speed_scaling``): MoveIt times with them, and ExecuteTrajectory checks neither. A
  wrist extension, a tool changer's robot side or a camera mount in the URDF (EROBS's cms
  descriptions have all three) is geometry the planner does not have: refused, naming the links.
* **The world is move_group's monitored scene, as of the plan**: every plan reads the scene's
  world objects (``get_planning_scene``, ``WORLD_OBJECT_GEOMETRY``) and plans around exactly
  those (the cell's obstacles are not added: what move_group does not hold, it would not
  avoid either), each exempt only from the arm links the scene's allowed-collision matrix lets
  it touch; objects of meshes or planes, an octomap, and arm links padded more than the local
  model's ``collision.padding`` or scaled up are refused (the planner models none of them).
  Objects come in move_group's planning frame, the URDF's root, so ``base_link`` must be
  that root or sit on it unmoved (checked with the robot).
* **The attached objects are the backend's tools**: the tool of the step is modelled from the
  cell (the geometry :meth:`~.planner.MoveItPlanner.follow` attaches in move_group's scene);
  any other object attached in move_group's scene is refused, naming it.

The planner is more conservative than move_group's collision checking, never less: convex
hulls contain UR's meshes and ``collision.padding`` keeps the arm links off obstacles (MoveIt's
default padding is 0). The self-collision matrix is the planner's own (the Setup Assistant's
recipe on the same meshes), not the SRDF's ``disabled_collisions``.
"""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pinocchio as pin

from erobs_bt.backends.base import ArmSegment, ErrorCode, MotionError
from erobs_bt.backends.moveit.model import MoveItConfig, tool_object_id
from erobs_bt.backends.moveit.planning_scene import (
    SceneError,
    allowed_touches,
    object_id,
    obstacles_from_collision_object,
)
from erobs_bt.planning.planner import CellPlanner, PlannerConfig
from erobs_bt.script.model import MoveTo
from erobs_bt.world.cell import ROBOT_LINKS, CellConfig, Obstacle
from erobs_bt.world.kinematics import JOINT_LIMITS, VELOCITY_LIMITS, fk
from erobs_bt.world.scene import World
from erobs_bt.world.tools import ToolState

#: [m] and [rad]: how far move_group's flange may be from the planner's at any sampled
#: configuration (a tenth of a millimetre: below any collision padding, above float noise).
KINEMATICS_TOLERANCE = 1e-4
#: Seeded configurations the kinematic chain is compared at (within the joint limits).
KINEMATICS_SAMPLES = 32
#: The links of UR's arm the planner models with UR's collision meshes (the URDF's
#: ``base_link`` carries no geometry in ``ur_description``; ``base_link_inertia`` does).
MODELLED_LINKS: frozenset[str] = frozenset(ROBOT_LINKS)


#: What every refusal tells the user to do instead.
USE_MOVE_GROUP = (
    "plan with move_group instead: set planning: move_group in the moveit configuration (moveit_config)"
)


class DescriptionMismatch(ValueError):
    """move_group's robot is not the robot the local planner models (the message names how)."""


def collision_links(urdf: str) -> tuple[str, ...]:
    """The links of a URDF that carry at least one ``<collision>`` element, in file order.

    Raises:
        DescriptionMismatch: the text is not XML with a ``<robot>`` root.
    """
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as exc:
        raise DescriptionMismatch(f"robot_description is not XML: {exc}") from None
    if root.tag != "robot":
        raise DescriptionMismatch(f"robot_description's root element is <{root.tag}>, not <robot>")
    return tuple(str(link.get("name")) for link in root.findall("link") if link.find("collision") is not None)


def check_robot(urdf: str, config: MoveItConfig, *, seed: int = 11) -> None:
    """Check that move_group's URDF is the robot :class:`LocalPlanning` plans for (module docstring).

    Args:
        urdf: move_group's ``robot_description``.
        config: the joint prefix and ``flange_link``.
        seed: of the sampled configurations (deterministic).

    Raises:
        DescriptionMismatch: links with collision geometry the planner does not model (named),
            a missing joint or link, joint limits narrower than the planner's (named), or a
            flange farther than :data:`KINEMATICS_TOLERANCE` from the planner's at a sampled
            configuration (names it and the deviation).
    """
    prefix = config.joint_prefix
    unknown = [
        name
        for name in collision_links(urdf)
        if not (name.startswith(prefix) and name[len(prefix) :] in MODELLED_LINKS)
    ]
    if unknown:
        raise DescriptionMismatch(
            f"robot_description has collision geometry on {', '.join(unknown)}, which the local planner "
            f"does not model (it models UR's own links: {', '.join(sorted(MODELLED_LINKS))}); "
            f"{USE_MOVE_GROUP}"
        )
    try:
        model = pin.buildModelFromXML(urdf)
    except (RuntimeError, ValueError) as exc:
        raise DescriptionMismatch(f"robot_description: pinocchio cannot read it: {exc}") from None
    base, flange = f"{prefix}base_link", config.flange_link
    for frame in (base, flange):
        if not model.existFrame(frame):
            raise DescriptionMismatch(f"robot_description has no link {frame!r}")
    indices = []
    for name in config.joint_names:
        if not model.existJointName(name):
            raise DescriptionMismatch(f"robot_description has no joint {name!r}")
        joint = model.joints[model.getJointId(name)]
        if joint.nq != 1:
            raise DescriptionMismatch(f"robot_description: {name} is not a revolute joint")
        indices.append(joint.idx_q)
    low, high = np.asarray(JOINT_LIMITS, dtype=float).T
    fastest = np.asarray(VELOCITY_LIMITS, dtype=float) * config.speed_scaling
    for i, (name, q_index) in enumerate(zip(config.joint_names, indices, strict=True)):
        v_index = model.joints[model.getJointId(name)].idx_v
        lower, upper = float(model.lowerPositionLimit[q_index]), float(model.upperPositionLimit[q_index])
        speed = float(model.velocityLimit[v_index])
        if lower > low[i] + 1e-9 or upper < high[i] - 1e-9 or speed < fastest[i] - 1e-9:
            raise DescriptionMismatch(
                f"robot_description limits {name} to [{lower:.4f}, {upper:.4f}] rad and {speed:.4f} rad/s; "
                f"the local planner moves it in [{low[i]:.4f}, {high[i]:.4f}] rad at up to {fastest[i]:.4f} "
                f"rad/s (speed_scaling applied); {USE_MOVE_GROUP}"
            )
    data = model.createData()
    base_id, flange_id = model.getFrameId(base), model.getFrameId(flange)
    pin.framesForwardKinematics(model, data, pin.neutral(model))
    T_root_base = data.oMf[base_id].homogeneous
    if not np.allclose(T_root_base, np.eye(4), atol=KINEMATICS_TOLERANCE):
        raise DescriptionMismatch(
            f"robot_description places {base} at {np.round(T_root_base[:3, 3], 4).tolist()} m (and turned) "
            "from its root link: move_group reports scene objects in that root frame, which the local "
            f"planner takes to be {base}; {USE_MOVE_GROUP}"
        )
    rng = np.random.default_rng(seed)
    for q6 in rng.uniform(low, high, (KINEMATICS_SAMPLES, 6)):
        q = pin.neutral(model)
        q[indices] = q6
        pin.framesForwardKinematics(model, data, q)
        T = np.linalg.inv(data.oMf[base_id].homogeneous) @ data.oMf[flange_id].homogeneous
        T_planner = fk(q6)
        offset = float(np.linalg.norm(T[:3, 3] - T_planner[:3, 3]))
        cos = (float(np.trace(T[:3, :3].T @ T_planner[:3, :3])) - 1.0) / 2.0
        angle = float(np.arccos(np.clip(cos, -1.0, 1.0)))
        if offset > KINEMATICS_TOLERANCE or angle > KINEMATICS_TOLERANCE:
            raise DescriptionMismatch(
                f"robot_description's {flange} is {offset * 1e3:.3f} mm and {angle:.2e} rad from the "
                f"local planner's at joints {np.round(q6, 4).tolist()} rad (calibrated kinematics?); "
                f"{USE_MOVE_GROUP}"
            )


@dataclass(frozen=True)
class SceneSnapshot:
    """What a local plan needs of move_group's planning scene at the moment it plans.

    Attributes:
        world: the world objects as obstacles in ``base_link``.
        attached: the attached objects' ids -> their link.
    """

    world: World
    attached: dict[str, str]


def snapshot_of(scene: Any, *, where: str, joint_prefix: str = "", padding: float = 0.0) -> SceneSnapshot:
    """The :class:`SceneSnapshot` of a ``moveit_msgs/PlanningScene`` read with world geometry,
    the allowed-collision matrix, the octomap and the links' padding and scale: a world object
    may touch the arm links the matrix allows it (the pedestal under ``base_link_inertia``);
    every other pair is checked.

    Args:
        scene: the scene as ``get_planning_scene`` answered it.
        where: the step, for messages.
        joint_prefix: of the arm's link names in move_group's robot.
        padding: [m] the local model's padding of the arm links (``collision.padding``).

    Raises:
        MotionError: ``PLANNING_FAILED`` naming what the planner cannot model: an object of
            meshes or planes or in an unknown frame
            (:func:`.planning_scene.obstacles_from_collision_object`), a malformed matrix, an
            octomap (sensor occupancy), or an arm link padded or scaled beyond the local model.
    """
    problem = ""
    if len(scene.world.octomap.octomap.data):
        problem = (
            f"it holds an octomap ({scene.world.octomap.octomap.id or 'sensor occupancy'}, frame "
            f"{scene.world.octomap.header.frame_id or '?'}), which the local planner cannot model"
        )
    links = {joint_prefix + link: link for link in ROBOT_LINKS}
    for entry in scene.link_padding:
        if entry.link_name in links and entry.padding > padding + 1e-9:
            problem = (
                f"{entry.link_name} is padded {entry.padding:g} m, more than the local model's {padding:g} m "
                "(collision.padding)"
            )
    for entry in scene.link_scale:
        if entry.link_name in links and entry.scale > 1.0 + 1e-9:
            problem = f"{entry.link_name} is scaled {entry.scale:g}, the local model does not scale links"
    obstacles: list[Obstacle] = []
    try:
        for obj in scene.world.collision_objects:
            obstacles.extend(obstacles_from_collision_object(obj))
        touches = allowed_touches(
            scene.allowed_collision_matrix, (o.id for o in scene.world.collision_objects), links
        )
    except SceneError as exc:
        problem = f"{exc} (the local planner models box, sphere and cylinder primitives)"
    if problem:
        raise MotionError(
            ErrorCode.PLANNING_FAILED,
            f"{where}: move_group's planning scene: {problem}; {USE_MOVE_GROUP}",
        )
    obstacles = [
        replace(o, touch_links=tuple(links[k] for k in touches.get(object_id(o.name), ()))) for o in obstacles
    ]
    try:
        world = World.of(obstacles, where="move_group's planning scene")
    except ValueError as exc:
        raise MotionError(ErrorCode.PLANNING_FAILED, f"{where}: {exc}") from None
    attached = {a.object.id: a.link_name for a in scene.robot_state.attached_collision_objects}
    return SceneSnapshot(world=world, attached=attached)


class LocalPlanning:
    """The embedded planner working for the ``moveit`` backend (module docstring); thread-safe.

    Args:
        cell: the cell (tool geometry, tip frames, named states, marker frames).
        config: the backend's configuration: ``speed_scaling``, ``planning_time``,
            ``cartesian_step`` and ``min_cartesian_fraction`` become the planner's
            (:class:`~erobs_bt.planning.planner.PlannerConfig`), as move_group would apply them.
        seed: OMPL's seed (:class:`~erobs_bt.planning.planner.CellPlanner`).
    """

    def __init__(self, cell: CellConfig, config: MoveItConfig, *, seed: int | None = None) -> None:
        self._cell = cell
        self._config = config
        self._settings = PlannerConfig(
            speed_scaling=config.speed_scaling,
            planning_time=config.planning_time,
            cartesian_step=config.cartesian_step,
            min_cartesian_fraction=config.min_cartesian_fraction,
        )
        self._seed = seed
        self._lock = threading.Lock()
        self._planner: CellPlanner | None = None
        self._tools = frozenset(tool_object_id(name) for name in cell.grippers)

    def snapshot(self, scene: Any, *, where: str) -> SceneSnapshot:
        """:func:`snapshot_of` with this backend's joint prefix and the cell's arm-link padding."""
        return snapshot_of(
            scene, where=where, joint_prefix=self._config.joint_prefix, padding=self._cell.collision.padding
        )

    def planner(self, tools: ToolState) -> CellPlanner:
        """The embedded planner (built at the first plan, for ``tools``)."""
        with self._lock:
            if self._planner is None:
                self._planner = CellPlanner(self._cell, tools, config=self._settings, seed=self._seed)
            return self._planner

    def plan_move(
        self, step: MoveTo, start: Sequence[float], *, tools: ToolState, scene: SceneSnapshot
    ) -> ArmSegment:
        """Plan ``step`` from ``start`` [rad] with ``tools`` in ``scene``'s world.

        Raises:
            MotionError: ``PLANNING_FAILED: <step.path>: ...``: an object attached in move_group's
                scene that is not one of the cell's tools (named), or no plan.
        """
        foreign = sorted(
            f"{key} on {link}"
            for key, link in scene.attached.items()
            if key not in self._tools or link != self._config.flange_link
        )
        if foreign:
            raise MotionError(
                ErrorCode.PLANNING_FAILED,
                f"{step.path}: move_group's planning scene has {', '.join(foreign)} attached, which the "
                "local planner does not model (it models the cell's tools on "
                f"{self._config.flange_link!r}); {USE_MOVE_GROUP}",
            )
        return self.planner(tools).plan_move(step, start, tools=tools, world=scene.world)

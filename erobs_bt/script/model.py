"""The validated, expanded form of an EROBS script.

:func:`erobs_bt.script.parse.parse_script` turns the JSON text into a :class:`Script`:
macros (``pickup_tip``, ``pickup_vial``) are already expanded, every pose name that a
step uses is resolved (inline ``poses`` first, then the pose registry) and every angle
is converted from degrees to radians, here and nowhere else. Everything downstream
(batching, the cache key, the tree, the backends) works on these frozen values.

Units in this module: joint angles and tolerances in radians, distances and positions
in metres, quaternions ``(x, y, z, w)``. Joint order is the UR order of
:data:`JOINT_NAMES`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

#: UR joint names in pose order (docs/behaviour.md §2).
JOINT_NAMES: tuple[str, ...] = (
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
)

#: UR5e joint position limits [deg], ``(lower, upper)`` in :data:`JOINT_NAMES` order: ±360°,
#: elbow ±180° (``config/ur5e/joint_limits.yaml`` of Universal Robots' ROS 2 description).
#: The one table of them: the parser checks poses against it and the simulated cell's
#: kinematics converts it to radians.
JOINT_LIMITS_DEG: tuple[tuple[float, float], ...] = (
    (-360.0, 360.0),
    (-360.0, 360.0),
    (-180.0, 180.0),
    (-360.0, 360.0),
    (-360.0, 360.0),
    (-360.0, 360.0),
)

#: UR5e reach [m]: the largest distance from the base axis to the tool flange (UR5e data
#: sheet, 850 mm). The parser bounds lengths in scripts by it (a straight move cannot be
#: longer than the workspace sphere's diameter, ``2 * UR5E_REACH``).
UR5E_REACH = 0.85

#: Six joint positions [rad] in :data:`JOINT_NAMES` order.
JointPositions = tuple[float, float, float, float, float, float]

#: Task types that batching groups into one unit (docs/script-format.md).
MOTION_TASK_TYPES: frozenset[str] = frozenset({"moveto", "end_effector"})

#: The vision family: detect a marker or sample, then move relative to it.
VISION_TASK_TYPES: frozenset[str] = frozenset(
    {
        "vision_task",
        "vision_moveto",
        "vision_scan",
        "pick_sample",
        "place_sample",
        "pick_spincoater",
        "place_spincoater",
    }
)


@dataclass(frozen=True, kw_only=True)
class Step:
    """One step of the expanded script.

    Attributes:
        index: 0-based position in the expanded step list.
        path: where the step came from in the submitted JSON, e.g. ``tasks[3]`` or,
            for a macro-generated step, ``tasks[6] (pickup_vial step 3)``.
        spec: the step as a JSON-able mapping, after macro expansion, exactly as it
            enters the plan-cache key (no resolved values, no defaults added).
    """

    task_type: ClassVar[str] = ""
    index: int
    path: str
    spec: Mapping[str, Any] = field(compare=False, repr=False)

    @property
    def is_motion(self) -> bool:
        """True for the step types batching groups (``moveto``, ``end_effector``)."""
        return self.task_type in MOTION_TASK_TYPES

    @property
    def script_type(self) -> str:
        """The ``task_type`` the script gave the step: :attr:`task_type`, or for the vision
        family the specific type (``pick_sample``, ``vision_moveto``, …). The one place this
        name is derived (unit labels, preview refusals, fault selection)."""
        return self.task_type


@dataclass(frozen=True)
class JointConstraint:
    """Keep one joint within ``[position - tolerance_below, position + tolerance_above]`` [rad]."""

    joint_name: str
    position: float
    tolerance_above: float
    tolerance_below: float


@dataclass(frozen=True)
class OrientationConstraint:
    """Keep ``link_name``'s orientation within absolute per-axis tolerances [rad].

    ``orientation`` is a quaternion ``(x, y, z, w)`` in ``frame_id``; when it is
    ``None`` the orientation at the start of the move is kept.
    """

    link_name: str
    frame_id: str
    orientation: tuple[float, float, float, float] | None
    absolute_tolerance: tuple[float, float, float]


@dataclass(frozen=True)
class Constraints:
    """Path constraints of a ``moveto`` (MoveIt ``moveit_msgs/Constraints`` subset)."""

    joint: tuple[JointConstraint, ...] = ()
    orientation: tuple[OrientationConstraint, ...] = ()


@dataclass(frozen=True, kw_only=True)
class MoveTo(Step):
    """Move the arm. Exactly one mode is set.

    Modes:
        * ``target``: a pose name (``target_joints`` holds its resolved joints [rad])
          or a named robot state of the cell (``target_joints`` is ``None``).
        * ``direction_vector`` + ``distance``: a straight relative move of
          ``distance`` [m] along the unit vector given in the **flange** frame.
        * ``cartesian_target``: ``(x, y, z)`` [m] or ``(x, y, z, roll, pitch, yaw)``
          [m, rad] of the tool tip in ``frame_id``.

    ``planning_type`` is canonical: ``auto`` (for ``""``/``auto``/``joint``),
    ``cartesian``, ``pilz`` or ``pilz_ptp``.
    """

    task_type: ClassVar[str] = "moveto"
    target: str | None = None
    target_joints: JointPositions | None = None
    direction: str | None = None
    direction_vector: tuple[float, float, float] | None = None
    distance: float | None = None
    cartesian_target: tuple[float, ...] | None = None
    frame_id: str = "base_link"
    planning_type: str = "auto"
    constraints: Constraints | None = None


@dataclass(frozen=True, kw_only=True)
class EndEffector(Step):
    """Set a gripper state (``vacuum_on``, ``hande_open``, ``2fg7_closed``, …).

    ``gripper`` is the ``end_effector_type`` given in the script, or ``None`` for
    "the gripper attached when the step runs".
    """

    task_type: ClassVar[str] = "end_effector"
    action: str
    gripper: str | None = None


@dataclass(frozen=True, kw_only=True)
class ToolExchange(Step):
    """Dock the current tool (``operation == "dock"``) or load one (``"load"``)."""

    task_type: ClassVar[str] = "tool_exchange"
    operation: str
    gripper: str
    dock_number: int
    approach_pose: str | None = None
    approach_joints: JointPositions | None = None


@dataclass(frozen=True, kw_only=True)
class Pipettor(Step):
    """A pipettor command: ``SUCK``, ``EXPEL``, ``EJECT_TIP`` or ``SET_LED``.

    ``volume_pct`` is a fraction of the pipettor's stroke in ``[0, 1]``;
    ``led_color`` is ``(r, g, b)`` in ``[0, 1]``.
    """

    task_type: ClassVar[str] = "pipettor"
    operation: str
    volume_pct: float | None = None
    led_color: tuple[float, float, float] | None = None


@dataclass(frozen=True, kw_only=True)
class Pause(Step):
    """Wait for Resume (or cancel). No timer."""

    task_type: ClassVar[str] = "pause"


@dataclass(frozen=True, kw_only=True)
class Vision(Step):
    """A vision-family step (``vision_task``, ``vision_moveto``, ``pick_sample``, …).

    ``kind`` is the script's ``task_type``; ``scan_joints`` are the resolved scan
    poses [rad] in the order they are tried; ``marker_offset`` is ``(x, y, z)`` [m]
    in the marker frame; ``params`` keeps the remaining validated fields.

    The typed fields hold the values the step runs with: the script's fields with
    the task type's preset defaults under them (EROBS ``VISION_PRESETS``), e.g.
    ``pick_sample`` → ``detector="marker"``, terminal action ``grasp``,
    ``pre_open=True``, retreat to the scan pose; ``place_spincoater`` →
    ``detector="spincoater_pocket"``, ``goal_computer="j6_snap"``, scan pose
    ``spincoater_scan``, target pose ``spincoater_place``, ``forward_distance=0.003``.
    ``spec`` stays as written.

    Additional attributes:
        goal_computer: how the goal is computed from the detection
            (``approach_pose``, ``j6_snap``, …).
        gripper: the script's ``gripper`` field (``None``: the attached one).
        use_vision: ``False`` for a hard-coded ``pick_sample``/``place_sample``
            (approach → target, no detection).
        pre_open: open the gripper before scanning.
        detect_only: detect and report, no motion.
        target_pose, target_joints: the fixed target pose (``target_pose``,
            ``place_pose`` or ``pickup_pose``, or the preset's) and its joints [rad].
        approach_pose, approach_joints: the approach pose of a hard-coded pick/place.
        retreat_pose, retreat_joints: where to retreat after the terminal action.
        offset_direction, offset_vector, offset_distance: an extra straight offset
            after the marker offset, ``offset_distance`` [m] along the unit vector
            ``offset_vector`` in the tool frame (same direction names as ``moveto``).
        forward_distance: final approach along the tool's forward axis [m].
        constraints: path constraints of the arm motion.

    ``terminal_action`` is the gripper state to command last: a role (``grasp``,
    ``release``) is resolved to the attached gripper's state (``vacuum_on`` for the
    ePick); on a gripper without states (``none``, ``pipettor``) it stays as written
    and the runtime makes it a no-op.
    """

    task_type: ClassVar[str] = "vision"
    kind: str

    @property
    def script_type(self) -> str:
        """The vision task type as written (``pick_sample``, ``vision_moveto``, …)."""
        return self.kind

    detector: str | None = None
    tag_id: int | None = None
    scan_poses: tuple[str, ...] = ()
    scan_joints: tuple[JointPositions, ...] = ()
    marker_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    z_offset: float = 0.0
    terminal_action: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict, compare=False)
    goal_computer: str = "approach_pose"
    gripper: str | None = None
    use_vision: bool = True
    pre_open: bool = False
    detect_only: bool = False
    target_pose: str | None = None
    target_joints: JointPositions | None = None
    approach_pose: str | None = None
    approach_joints: JointPositions | None = None
    retreat_pose: str | None = None
    retreat_joints: JointPositions | None = None
    offset_direction: str | None = None
    offset_vector: tuple[float, float, float] | None = None
    offset_distance: float = 0.0
    forward_distance: float = 0.0
    constraints: Constraints | None = None


@dataclass(frozen=True)
class Script:
    """A validated, expanded script.

    Attributes:
        start_gripper: the tool attached when the script starts (a cell gripper name).
        steps: the expanded steps, ``steps[i].index == i``.
        poses: every pose name the steps use, resolved to the values it had in the
            script or the registry (degrees, exactly as given); this is the
            "resolved poses" part of the plan-cache key.
        task_count: number of entries in ``tasks`` before macro expansion.
        warnings: what looks wrong but is valid (a pose that looks like radians), one
            message each starting with its path; every front end shows them, none is an
            error. Not part of the cache key.
    """

    start_gripper: str
    steps: tuple[Step, ...]
    poses: Mapping[str, tuple[float, ...]]
    task_count: int
    warnings: tuple[str, ...] = ()

    def key_document(self) -> str:
        """The normalised JSON of expanded steps and resolved poses (cache-key input).

        Whitespace and object-key order are normalised; step order and pose values
        are preserved (docs/script-format.md, "Cache eligibility").
        """
        document = {
            "steps": [dict(step.spec) for step in self.steps],
            "poses": {name: list(values) for name, values in self.poses.items()},
        }
        return json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False)

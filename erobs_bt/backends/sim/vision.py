"""Simulated vision for the vision task family (``vision_moveto``, ``pick_sample``, …).

Why geometry instead of images: the engine needs the *behaviour* of EROBS's vision
tasks (move to scan poses, find a fiducial, move relative to it, fail with a clear
reason when it is not seen), deterministically and fast. The cell config places the
fiducial markers; a marker is "detected" when it lies in the view cone of the wrist
camera at a scan pose and faces the camera. Its detected pose is its configured pose
(the simulation has no detection noise).

The camera (:class:`CameraModel`, optional ``camera:`` section of the cell YAML): a
pinhole-like cone with its optical axis along the camera frame's z, mounted on the
flange. Default: at the flange origin looking along flange x (the tool axis), 40° half
angle, 0.05–1.0 m range, markers seen up to 75° off their face normal. The half angle
is wide enough for what the real cell's camera does in ``FULL_EXPERIMENT_RUN.json``: it
finds the vial-rack marker from ``pipettor_scan``, 32° off the tool axis in the packaged
cell.

The goal computation follows EROBS's documented vision geometry (``beambot`` vision
engine, ``compute_approach_pose`` and ``snap_j6``):

* ``approach_pose``: the tool point goes to the marker position plus ``marker_offset``
  rotated into the marker frame, plus ``z_offset`` along ``base_link`` z (``z_offset``
  0 means the gripper's default ``z_offset`` from the cell config), pointing straight
  down (roll π, pitch 0) with the marker's yaw turned by π. The tool point is the IK
  frame of the tool (:func:`~erobs_bt.world.tools.planning_tip`). An
  ``offset_direction``/``offset_distance`` then shifts it along that direction of the
  goal's flange frame.
* ``j6_snap`` (spin-coater detectors): the target pose's joints with joint 6 turned by
  ``(angle + k_offset) mod 90°`` folded into (−45°, 45°], where ``angle`` is the detected
  feature's yaw; the feature of a detector is a marker named in the ``vision:`` section
  (``vision: {detectors: {spincoater_pocket: <marker id>, …}}``).

Then, in one connected motion: ``forward_distance`` along the tool axis, the
``terminal_action`` (``grasp``/``release`` roles or a gripper state), and the retreat
(``retreat_pose``, or the scan pose with ``retreat_from_scan``). ``vision_scan`` visits
every scan pose and records every visible marker in a tag cache that later
``vision_moveto`` steps without scan poses fall back to. ``pre_open`` opens the gripper
before scanning. A hard-coded ``pick_sample``/``place_sample`` (``use_vision: false``)
moves approach → target → terminal action → retreat without detection.

Failures are ``EXECUTION_FAILED`` naming the step and the tag id; a marker that is not seen
carries EROBS's ``DETECTION_FAILED:`` too, e.g.
``tasks[4]: vision_moveto: DETECTION_FAILED: marker 7 not visible from scan pose 1 (…)``.

``detect_only`` moves to the scan poses, detects, and moves no further: its status
message is a :class:`~erobs_bt.backends.base.StepReport` carrying the pose EROBS's
result reports (``detected_position``/``detected_orientation``): the ``approach_pose``
goal of the tool point in ``base_link`` (for other goal computers: the detected
feature's pose).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from erobs_bt.backends.base import DetectedPose, ErrorCode, MotionError, StepReport
from erobs_bt.script.model import EndEffector, JointPositions, MoveTo, Step, Vision
from erobs_bt.world.cell import CellConfig, Marker, read_pose
from erobs_bt.world.kinematics import (
    fk,
    pose_from_xyz_rpy,
    quat_from_matrix,
    rpy_from_matrix,
    rpy_matrix,
    xyz_rpy_from_pose,
)
from erobs_bt.world.tools import ToolState, gripper_roles

#: EROBS's vision servers' prefix of a detection that found nothing.
DETECTION_FAILED = "DETECTION_FAILED"

#: Detectors that find a fiducial marker by ``tag_id``.
MARKER_DETECTORS: frozenset[str] = frozenset({"marker", "aruco", "apriltag"})


@dataclass(frozen=True)
class CameraModel:
    """The wrist camera: a view cone along the camera frame's z axis.

    Attributes:
        T_flange_camera: (4, 4) camera frame in ``flange`` as a tuple of rows
            (z = optical axis).
        half_angle: half the cone's opening angle [rad].
        min_range: nearest visible distance [m].
        max_range: farthest visible distance [m].
        max_incidence: largest angle between a marker's face normal and the direction
            to the camera [rad] at which it is still readable.
    """

    T_flange_camera: tuple[tuple[float, ...], ...] = tuple(
        tuple(float(v) for v in row)
        for row in pose_from_xyz_rpy((0.0, 0.0, 0.0), (0.0, 90.0, 0.0), degrees=True)
    )
    half_angle: float = math.radians(40.0)
    min_range: float = 0.05
    max_range: float = 1.0
    max_incidence: float = math.radians(75.0)

    def camera_pose(self, q: Sequence[float]) -> NDArray[np.float64]:
        """(4, 4) camera frame in ``base_link`` at joints ``q`` [rad]."""
        return fk(q) @ np.array(self.T_flange_camera)

    def why_not_visible(self, marker: Marker, q: Sequence[float]) -> str | None:
        """Why ``marker`` is not seen at joints ``q`` [rad], or ``None`` when it is."""
        T_camera = self.camera_pose(q)
        T_marker = marker.pose.matrix()
        ray = T_marker[:3, 3] - T_camera[:3, 3]
        distance = float(np.linalg.norm(ray))
        if distance < self.min_range or distance > self.max_range:
            return f"{distance:.3f} m away (range {self.min_range:g}–{self.max_range:g} m)"
        off_axis = math.acos(max(-1.0, min(1.0, float(np.dot(ray / distance, T_camera[:3, 2])))))
        if off_axis > self.half_angle:
            limit = math.degrees(self.half_angle)
            return f"{math.degrees(off_axis):.1f}° off the camera axis (half angle {limit:g}°)"
        incidence = math.acos(max(-1.0, min(1.0, float(np.dot(-ray / distance, T_marker[:3, 2])))))
        if incidence > self.max_incidence:
            limit = math.degrees(self.max_incidence)
            return f"seen {math.degrees(incidence):.1f}° off its face normal (limit {limit:g}°)"
        return None


def camera_from_cell(cell: CellConfig) -> CameraModel:
    """The camera from the optional ``camera:`` section of the cell YAML.

    Schema: ``camera: {pose: {xyz: [3], rpy: [3] | rpy_deg: [3]} (in flange, z = optical
    axis), half_angle_deg: <(0, 90)>, min_range: <m >= 0>, max_range: <m>,
    max_incidence_deg: <(0, 90]>}``; every key optional.

    Raises:
        ValueError: ``<file>: camera.<key>: <reason>``.
    """
    raw = cell.extra.get("camera", {}) or {}
    where = f"{cell.source or 'cell'}: camera"
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {type(raw).__name__}")
    allowed = ("pose", "half_angle_deg", "min_range", "max_range", "max_incidence_deg")
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: unknown key (allowed: {', '.join(allowed)})")
    default = CameraModel()
    T = default.T_flange_camera
    if "pose" in raw:
        T = tuple(
            tuple(float(v) for v in row)
            for row in read_pose(raw["pose"], "camera.pose", file=cell.source or "cell").matrix()
        )

    def number(key: str, fallback: float, low: float, high: float) -> float:
        value = raw.get(key, fallback)
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            raise ValueError(f"{where}.{key}: expected a number in [{low:g}, {high:g}], got {value!r}")
        return float(value)

    camera = CameraModel(
        T_flange_camera=T,
        half_angle=math.radians(number("half_angle_deg", math.degrees(default.half_angle), 1e-3, 89.999)),
        min_range=number("min_range", default.min_range, 0.0, 100.0),
        max_range=number("max_range", default.max_range, 1e-3, 100.0),
        max_incidence=math.radians(
            number("max_incidence_deg", math.degrees(default.max_incidence), 1e-3, 90.0)
        ),
    )
    if camera.min_range >= camera.max_range:
        raise ValueError(f"{where}.max_range: must be greater than min_range ({camera.min_range:g} m)")
    return camera


def detector_markers(cell: CellConfig) -> Mapping[str, int]:
    """Detector name -> the marker id standing for its feature (``vision.detectors`` of the cell YAML).

    Raises:
        ValueError: ``<file>: vision.<key>: <reason>`` (including an unknown marker id).
    """
    raw = cell.extra.get("vision", {}) or {}
    where = f"{cell.source or 'cell'}: vision"
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - {"detectors"})
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: unknown key (allowed: detectors)")
    detectors = raw.get("detectors", {}) or {}
    if not isinstance(detectors, Mapping):
        raise ValueError(f"{where}.detectors: expected a mapping detector -> marker id")
    out: dict[str, int] = {}
    ids = {m.id for m in cell.markers}
    for name, marker_id in detectors.items():
        if isinstance(marker_id, bool) or not isinstance(marker_id, int) or marker_id not in ids:
            raise ValueError(
                f"{where}.detectors.{name}: expected a marker id of the cell {sorted(ids)}, got {marker_id!r}"
            )
        out[str(name)] = marker_id
    return out


def approach_tip_pose(
    T_base_marker: NDArray[np.float64],
    marker_offset: Sequence[float],
    z_offset: float,
) -> NDArray[np.float64]:
    """The tool point's goal over a detected marker (EROBS ``compute_approach_pose``).

    Args:
        T_base_marker: (4, 4) detected marker pose in ``base_link``.
        marker_offset: ``(x, y, z)`` [m] in the marker frame.
        z_offset: [m] along ``base_link`` z.

    Returns:
        (4, 4) goal of the tool's IK frame in ``base_link``: position marker + R·offset +
        z_offset·ẑ; orientation roll π, pitch 0, yaw = yaw of ``R_marker·Rz(π)`` (tool
        pointing straight down, turned with the marker).
    """
    R_marker = T_base_marker[:3, :3]
    position = T_base_marker[:3, 3] + R_marker @ np.asarray(marker_offset, dtype=float)
    position[2] += z_offset
    yaw = float(rpy_from_matrix(R_marker @ rpy_matrix((0.0, 0.0, math.pi)))[2])
    return pose_from_xyz_rpy(position, (math.pi, 0.0, yaw), degrees=False)


def snap_j6(base_j6: float, angle: float, k_offset: float = 0.0) -> float:
    """Joint 6 [rad] turned by the feature angle folded into (−π/4, π/4] (EROBS ``snap_j6``).

    Args:
        base_j6: joint 6 of the target pose [rad].
        angle: detected feature angle [rad].
        k_offset: calibrated offset [rad].
    """
    quarter = math.pi / 2
    correction = math.fmod(angle + k_offset, quarter)
    if correction < 0.0:
        correction += quarter
    if correction > quarter / 2:
        correction -= quarter
    return base_j6 + correction


class VisionPort(Protocol):
    """What :func:`run_vision` needs from the backend."""

    def joint_positions(self) -> tuple[float, ...]:
        """The live arm state [rad]."""
        ...

    def tool_state(self) -> ToolState:
        """The live tool state."""
        ...

    def planning_tip(self) -> NDArray[np.float64]:
        """(4, 4) IK frame of the attached tool in ``flange`` (what cartesian targets place)."""
        ...

    def move(self, steps: Sequence[Step]) -> None:
        """Plan ``steps`` from the live state as one sequence and execute them (blocking).

        Raises:
            MotionError: planning or execution failed.
        """
        ...


@dataclass(frozen=True)
class Detection:
    """A detected marker.

    Attributes:
        marker_id: the marker.
        pose: (4, 4) in ``base_link``.
        scan_index: the 0-based scan pose it was seen from, or ``None`` (current pose / cache).
        scan_joints: that scan pose [rad], if any.
    """

    marker_id: int
    pose: NDArray[np.float64]
    scan_index: int | None
    scan_joints: JointPositions | None


def _fail(step: Vision, reason: str) -> MotionError:
    return MotionError(ErrorCode.EXECUTION_FAILED, f"{step.path}: {step.kind}: {reason}")


def _not_detected(step: Vision, reason: str) -> MotionError:
    """A detection that found nothing: EROBS's ``DETECTION_FAILED:`` (its agent's error
    table matches it) before the reason."""
    return _fail(step, f"{DETECTION_FAILED}: {reason}")


def _moveto(step: Vision, label: str, **fields: Any) -> MoveTo:
    return MoveTo(index=step.index, path=f"{step.path} ({label})", spec={}, **fields)


def _scan_to(step: Vision, k: int, joints: JointPositions) -> MoveTo:
    name = step.scan_poses[k] if k < len(step.scan_poses) else f"scan pose {k + 1}"
    return _moveto(
        step, f"scan pose {k + 1}", target=name, target_joints=joints, constraints=step.constraints
    )


def run_vision(
    cell: CellConfig,
    step: Vision,
    port: VisionPort,
    *,
    camera: CameraModel,
    tag_cache: MutableMapping[int, NDArray[np.float64]],
    detectors: Mapping[str, int] | None = None,
) -> str:
    """Run one vision-family step (behaviour in the module docstring).

    Args:
        cell: the cell (markers, grippers).
        step: the step.
        port: the backend (motions, live state).
        camera: the wrist camera.
        tag_cache: marker id -> pose [base_link] from earlier ``vision_scan`` steps; updated.
        detectors: detector name -> marker id for non-marker detectors
            (default: :func:`detector_markers` of the cell).

    Returns:
        A status message.

    Raises:
        MotionError: ``EXECUTION_FAILED`` (marker not seen, missing fields), or the
            planning/execution error of a motion.
    """
    if detectors is None:
        detectors = detector_markers(cell)
    if step.kind == "vision_scan":
        return _scan_all(cell, step, port, camera, tag_cache)
    state = port.tool_state()
    roles = gripper_roles(cell, state.gripper)
    if step.gripper is not None and step.gripper != state.gripper:
        raise _fail(step, f"gripper {step.gripper} is not attached (attached: {state.gripper})")
    terminal = _terminal_state(cell, step, state, roles)
    if step.pre_open and terminal is not None and "release" in roles:
        port.move([_end_effector(step, state.gripper, roles["release"], "pre-open")])
    if not step.use_vision:
        return _hard_coded(step, port, state, terminal)
    detection = _detect(cell, step, port, camera, tag_cache, detectors)
    seen = f"marker {detection.marker_id} at {np.round(detection.pose[:3, 3], 4).tolist()} m"
    if step.detect_only:
        T_found = (
            _approach_goal(cell, step, port, state, detection)
            if step.goal_computer == "approach_pose"
            else detection.pose
        )
        found = DetectedPose(
            position=tuple(float(v) for v in T_found[:3, 3]),  # type: ignore[arg-type]
            orientation=tuple(float(v) for v in quat_from_matrix(T_found[:3, :3])),  # type: ignore[arg-type]
        )
        return StepReport(f"{step.kind}: detected {seen}", detected=found)
    motions: list[Step] = []
    if step.goal_computer == "j6_snap":
        if step.target_joints is None:
            raise _fail(step, "j6_snap needs a target pose")
        angle = float(rpy_from_matrix(detection.pose[:3, :3])[2])
        k_offset = math.radians(float(step.params.get("k_offset", 0.0)))
        goal = list(step.target_joints)
        goal[5] = snap_j6(goal[5], angle, k_offset)
        motions.append(
            _moveto(step, "snapped target", target=step.target_pose or "target", target_joints=tuple(goal))
        )
    elif step.goal_computer == "approach_pose":
        T_goal = _approach_goal(cell, step, port, state, detection)
        xyz, rpy = xyz_rpy_from_pose(T_goal, degrees=False)
        motions.append(
            _moveto(
                step,
                f"approach marker {detection.marker_id}",
                cartesian_target=(*(float(v) for v in xyz), *(float(v) for v in rpy)),
                constraints=step.constraints,
            )
        )
    else:
        raise _fail(step, f"unknown goal_computer {step.goal_computer!r} (approach_pose, j6_snap)")
    motions.extend(_tail(step, state.gripper, terminal, detection.scan_joints))
    port.move(motions)
    return f"{step.kind}: {seen}; moved relative to it" + (f", {terminal}" if terminal else "")


def _approach_goal(
    cell: CellConfig, step: Vision, port: VisionPort, state: ToolState, detection: Detection
) -> NDArray[np.float64]:
    """(4, 4) ``base_link`` goal of the tool point over ``detection`` (``approach_pose``:
    marker offset, ``z_offset`` or the gripper's default, then the ``offset_direction``)."""
    gripper = cell.gripper(state.gripper)
    z_offset = step.z_offset if step.z_offset != 0.0 else gripper.z_offset
    T_goal = approach_tip_pose(detection.pose, step.marker_offset, z_offset)
    if step.offset_vector is not None and step.offset_distance > 0.0:
        T_goal_flange = T_goal @ np.linalg.inv(port.planning_tip())
        T_goal[:3, 3] += T_goal_flange[:3, :3] @ (np.asarray(step.offset_vector) * step.offset_distance)
    return T_goal


def _terminal_state(cell: CellConfig, step: Vision, state: ToolState, roles: Mapping[str, str]) -> str | None:
    """The gripper state of ``terminal_action`` (a role or a state), or ``None``."""
    action = step.terminal_action
    if not action:
        return None
    if action in roles:
        return roles[action]
    actions = cell.gripper(state.gripper).actions
    if action in actions:
        return action
    if not actions:
        return None  # a gripper without a group: the terminal action is a no-op
    raise _fail(
        step,
        f"terminal_action {action!r} is neither a role ({', '.join(roles) or 'none'}) nor a state "
        f"of the {state.gripper} ({', '.join(actions)})",
    )


def _end_effector(step: Vision, gripper: str, action: str, label: str) -> EndEffector:
    return EndEffector(
        index=step.index, path=f"{step.path} ({label})", spec={}, action=action, gripper=gripper
    )


def _tail(step: Vision, gripper: str, terminal: str | None, scan_joints: JointPositions | None) -> list[Step]:
    """Forward approach, terminal action and retreat."""
    out: list[Step] = []
    if step.forward_distance > 0.0:
        out.append(
            _moveto(
                step,
                "forward",
                direction="forward",
                direction_vector=(1.0, 0.0, 0.0),
                distance=step.forward_distance,
                planning_type="cartesian",
            )
        )
    if terminal is not None:
        out.append(_end_effector(step, gripper, terminal, step.terminal_action or terminal))
    if step.retreat_joints is not None:
        out.append(
            _moveto(step, "retreat", target=step.retreat_pose or "retreat", target_joints=step.retreat_joints)
        )
    elif step.params.get("retreat_from_scan") and scan_joints is not None:
        out.append(_moveto(step, "retreat to scan pose", target="scan pose", target_joints=scan_joints))
    return out


def _hard_coded(step: Vision, port: VisionPort, state: ToolState, terminal: str | None) -> str:
    if step.target_joints is None:
        raise _fail(step, "use_vision false needs a target pose (target_pose, place_pose or pickup_pose)")
    motions: list[Step] = []
    if step.approach_joints is not None:
        motions.append(
            _moveto(
                step, "approach", target=step.approach_pose or "approach", target_joints=step.approach_joints
            )
        )
    motions.append(
        _moveto(step, "target", target=step.target_pose or "target", target_joints=step.target_joints)
    )
    motions.extend(_tail(step, state.gripper, terminal, step.approach_joints))
    port.move(motions)
    return f"{step.kind}: hard-coded {'approach, ' if step.approach_joints else ''}target" + (
        f", {terminal}" if terminal else ""
    )


def _feature_marker(cell: CellConfig, step: Vision, detectors: Mapping[str, int]) -> int:
    detector = step.detector or "marker"
    if detector in MARKER_DETECTORS:
        if step.tag_id is None:
            raise _fail(step, f"detector {detector} needs tag_id")
        return step.tag_id
    if detector not in detectors:
        raise _fail(
            step,
            f"detector {detector!r} has no feature in the simulated cell "
            f"(set vision.detectors.{detector} to a marker id in the cell YAML)",
        )
    return detectors[detector]


def _detect(
    cell: CellConfig,
    step: Vision,
    port: VisionPort,
    camera: CameraModel,
    tag_cache: MutableMapping[int, NDArray[np.float64]],
    detectors: Mapping[str, int],
) -> Detection:
    marker_id = _feature_marker(cell, step, detectors)
    try:
        marker = cell.marker(marker_id)
    except ValueError:
        marker = None
    reasons: list[str] = []
    if step.scan_joints:
        for k, joints in enumerate(step.scan_joints):
            port.move([_scan_to(step, k, joints)])
            if marker is None:
                reasons.append(f"scan pose {k + 1}: no such marker in the cell")
                continue
            why = camera.why_not_visible(marker, port.joint_positions())
            if why is None:
                return Detection(marker_id, marker.pose.matrix(), k, joints)
            reasons.append(f"scan pose {k + 1}: {why}")
        raise _not_detected(
            step,
            f"marker {marker_id} not visible from any of {len(step.scan_joints)} scan pose(s) "
            f"({'; '.join(reasons)})",
        )
    if marker is not None:
        why = camera.why_not_visible(marker, port.joint_positions())
        if why is None:
            return Detection(marker_id, marker.pose.matrix(), None, None)
        reasons.append(f"current pose: {why}")
    else:
        reasons.append("no such marker in the cell")
    if marker_id in tag_cache:
        return Detection(marker_id, tag_cache[marker_id].copy(), None, None)
    raise _not_detected(
        step, f"marker {marker_id} not visible ({'; '.join(reasons)}) and not in the vision_scan cache"
    )


def _scan_all(
    cell: CellConfig,
    step: Vision,
    port: VisionPort,
    camera: CameraModel,
    tag_cache: MutableMapping[int, NDArray[np.float64]],
) -> str:
    poses: Sequence[JointPositions | None] = step.scan_joints or (None,)
    seen: dict[int, int] = {}
    for k, joints in enumerate(poses):
        if joints is not None:
            port.move([_scan_to(step, k, joints)])
        q = port.joint_positions()
        for marker in cell.markers:
            if camera.why_not_visible(marker, q) is None:
                tag_cache[marker.id] = marker.pose.matrix()
                seen[marker.id] = seen.get(marker.id, 0) + 1
    if step.tag_id is not None and step.tag_id not in seen:
        raise _not_detected(step, f"marker {step.tag_id} not visible from any of {len(poses)} scan pose(s)")
    if not seen:
        raise _not_detected(step, f"no marker visible from any of {len(poses)} scan pose(s)")
    listing = ", ".join(f"{marker_id} ({count}×)" for marker_id, count in sorted(seen.items()))
    return f"vision_scan: detected markers {listing}"

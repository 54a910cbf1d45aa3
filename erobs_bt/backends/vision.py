"""Vision-family steps (``vision_moveto``, ``pick_sample``, ``vision_scan``, …) on any motion stack.

A step moves to its scan poses, asks the stack's :class:`~erobs_bt.backends.parts.Detector`
for the fiducial marker (the cell's calibrated markers as the camera sees them,
:class:`~erobs_bt.world.vision.CalibratedMarkerDetector`, or a camera pipeline), computes
its goal over the detection with the cell's vision geometry (:mod:`erobs_bt.world.vision`:
``approach_pose``, ``j6_snap``) and moves relative to it;
it fails with a clear reason when the marker is not seen.

``approach_pose``: the tool point is the IK frame of the tool
(:func:`~erobs_bt.world.tools.planning_tip`); ``z_offset`` 0 means the gripper's default
``z_offset`` from the cell config. An ``offset_direction``/``offset_distance`` then shifts
the goal along that direction of the goal's flange frame. ``j6_snap``: the target pose's
joints with joint 6 snapped to the detected feature's yaw.

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
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from erobs_bt.backends.base import DetectedPose, ErrorCode, MotionError, StepReport
from erobs_bt.backends.parts import Detector
from erobs_bt.script.model import EndEffector, JointPositions, MoveTo, Step, Vision
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.kinematics import quat_from_matrix, rpy_from_matrix, xyz_rpy_from_pose
from erobs_bt.world.tools import ToolState, gripper_roles
from erobs_bt.world.vision import MARKER_DETECTORS, approach_tip_pose, detector_markers, snap_j6

#: EROBS's vision servers' prefix of a detection that found nothing.
DETECTION_FAILED = "DETECTION_FAILED"


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

    def move(self, steps: Sequence[Step], *, last: bool = False) -> None:
        """Plan ``steps`` from the live state as one sequence and execute them (blocking).

        ``last``: the step's final motion (nothing moves after it): the stack may report its
        plan before executing it, so that the motion unit after the step can be planned from
        its end while it executes (plan-ahead, :meth:`erobs_bt.backends.stack.MotionStack.run_step`).

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
    detector: Detector,
    tag_cache: MutableMapping[int, NDArray[np.float64]],
    detectors: Mapping[str, int] | None = None,
    on_detected: Callable[[int, NDArray[np.float64]], None] | None = None,
) -> str:
    """Run one vision-family step (behaviour in the module docstring).

    Args:
        cell: the cell (markers, grippers).
        step: the step.
        port: the backend (motions, live state).
        detector: finds the markers.
        tag_cache: marker id -> pose [base_link] from earlier ``vision_scan`` steps; updated.
        detectors: detector name -> marker id for non-marker detectors
            (default: :func:`detector_markers` of the cell).
        on_detected: called with each marker id and pose [base_link] the camera saw (the
            stack adds the tag's collision object, :func:`erobs_bt.world.scene.tag_objects`).

    Returns:
        A status message.

    Raises:
        MotionError: ``EXECUTION_FAILED`` (marker not seen, missing fields), or the
            planning/execution error of a motion.
    """
    if detectors is None:
        detectors = detector_markers(cell)
    if on_detected is not None:
        detector = _Reporting(detector, on_detected, step)
    if step.kind == "vision_scan":
        return _scan_all(step, port, detector, tag_cache)
    state = port.tool_state()
    roles = gripper_roles(cell, state.gripper)
    if step.gripper is not None and step.gripper != state.gripper:
        raise _fail(step, f"gripper {step.gripper} is not attached (attached: {state.gripper})")
    terminal = _terminal_state(cell, step, state, roles)
    if step.pre_open and terminal is not None and "release" in roles:
        port.move([_end_effector(step, state.gripper, roles["release"], "pre-open")])
    if not step.use_vision:
        return _hard_coded(step, port, state, terminal)
    detection = _detect(cell, step, port, detector, tag_cache, detectors)
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
    port.move(motions, last=True)
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
    port.move(motions, last=True)
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


class _Reporting:
    """A detector that reports every marker it finds (``on_detected`` of :func:`run_vision`);
    a report's ``MotionError`` fails ``step``, its path and kind put before the reason."""

    def __init__(
        self, detector: Detector, report: Callable[[int, NDArray[np.float64]], None], step: Vision
    ) -> None:
        self._detector = detector
        self._report = report
        self._step = step

    def _tell(self, marker_id: int, pose: NDArray[np.float64]) -> None:
        try:
            self._report(marker_id, pose)
        except MotionError as exc:
            raise _fail(self._step, exc.detail) from None

    def find(self, marker_id: int, joints: Sequence[float]) -> NDArray[np.float64] | str:
        found = self._detector.find(marker_id, joints)
        if not isinstance(found, str):
            self._tell(marker_id, found)
        return found

    def scan(self, joints: Sequence[float]) -> Mapping[int, NDArray[np.float64]]:
        seen = self._detector.scan(joints)
        for marker_id, pose in seen.items():
            self._tell(marker_id, pose)
        return seen


def _detect(
    cell: CellConfig,
    step: Vision,
    port: VisionPort,
    detector: Detector,
    tag_cache: MutableMapping[int, NDArray[np.float64]],
    detectors: Mapping[str, int],
) -> Detection:
    marker_id = _feature_marker(cell, step, detectors)
    reasons: list[str] = []
    if step.scan_joints:
        for k, joints in enumerate(step.scan_joints):
            port.move([_scan_to(step, k, joints)])
            found = detector.find(marker_id, port.joint_positions())
            if not isinstance(found, str):
                return Detection(marker_id, found, k, joints)
            reasons.append(f"scan pose {k + 1}: {found}")
        raise _not_detected(
            step,
            f"marker {marker_id} not visible from any of {len(step.scan_joints)} scan pose(s) "
            f"({'; '.join(reasons)})",
        )
    found = detector.find(marker_id, port.joint_positions())
    if not isinstance(found, str):
        return Detection(marker_id, found, None, None)
    reasons.append(f"current pose: {found}")
    if marker_id in tag_cache:
        return Detection(marker_id, tag_cache[marker_id].copy(), None, None)
    raise _not_detected(
        step, f"marker {marker_id} not visible ({'; '.join(reasons)}) and not in the vision_scan cache"
    )


def _scan_all(
    step: Vision,
    port: VisionPort,
    detector: Detector,
    tag_cache: MutableMapping[int, NDArray[np.float64]],
) -> str:
    poses: Sequence[JointPositions | None] = step.scan_joints or (None,)
    seen: dict[int, int] = {}
    for k, joints in enumerate(poses):
        if joints is not None:
            port.move([_scan_to(step, k, joints)])
        for marker_id, pose in detector.scan(port.joint_positions()).items():
            tag_cache[marker_id] = pose
            seen[marker_id] = seen.get(marker_id, 0) + 1
    if step.tag_id is not None and step.tag_id not in seen:
        raise _not_detected(step, f"marker {step.tag_id} not visible from any of {len(poses)} scan pose(s)")
    if not seen:
        raise _not_detected(step, f"no marker visible from any of {len(poses)} scan pose(s)")
    listing = ", ".join(f"{marker_id} ({count}×)" for marker_id, count in sorted(seen.items()))
    return f"vision_scan: detected markers {listing}"

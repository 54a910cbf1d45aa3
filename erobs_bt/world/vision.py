"""Vision geometry of the cell: the wrist camera, the detectors' features, and the goals
computed over a detected marker.

The camera (:class:`CameraModel`, optional ``camera:`` section of the cell YAML): a
pinhole-like cone with its optical axis along the camera frame's z, mounted on the
flange. Default: at the flange origin looking along flange x (the tool axis), 40° half
angle, 0.05–1.0 m range, markers seen up to 75° off their face normal. The half angle
is wide enough for what the real cell's camera does in ``FULL_EXPERIMENT_RUN.json``: it
finds the vial-rack marker from ``pipettor_scan``, 32° off the tool axis in the packaged
cell.

The goal computation follows EROBS's documented vision geometry (``beambot`` vision
engine, ``compute_approach_pose`` and ``snap_j6``):

* ``approach_pose`` (:func:`approach_tip_pose`): the tool point goes to the marker
  position plus ``marker_offset`` rotated into the marker frame, plus ``z_offset`` along
  ``base_link`` z, pointing straight down (roll π, pitch 0) with the marker's yaw turned
  by π.
* ``j6_snap`` (:func:`snap_j6`, spin-coater detectors): joint 6 turned by
  ``(angle + k_offset) mod 90°`` folded into (−45°, 45°], where ``angle`` is the detected
  feature's yaw; the feature of a detector is a marker named in the ``vision:`` section
  (:func:`detector_markers`).

Detection from the model (:class:`CalibratedMarkerDetector`): a marker is "detected" when
it lies in the view cone of the wrist camera at the arm's pose and faces the camera; its
detected pose is its configured (calibrated) pose. Why geometry instead of images: the
engine needs the *behaviour* of EROBS's vision tasks (move to scan poses, find a fiducial,
fail with a clear reason when it is not seen), deterministically and fast. It is the
simulated cell's detector, and the ``ros2_control`` backend's while that has no camera
pipeline. How vision steps use a detector: :mod:`erobs_bt.backends.vision`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from erobs_bt.world.cell import CellConfig, Marker, read_pose
from erobs_bt.world.kinematics import fk, pose_from_xyz_rpy, rpy_from_matrix, rpy_matrix

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


class CalibratedMarkerDetector:
    """A :class:`~erobs_bt.backends.parts.Detector` answering from the cell model: the cell's
    calibrated markers as the wrist camera would see them (no detection noise).

    Args:
        cell: the cell (its markers, and the optional ``camera:`` section).
        camera: the wrist camera; ``None``: :func:`camera_from_cell`.

    Raises:
        ValueError: an invalid ``camera:`` section (``<file>: camera.<key>: <reason>``).
    """

    def __init__(self, cell: CellConfig, camera: CameraModel | None = None) -> None:
        self._cell = cell
        self._camera = camera if camera is not None else camera_from_cell(cell)

    @property
    def camera(self) -> CameraModel:
        """The wrist camera."""
        return self._camera

    def find(self, marker_id: int, joints: Sequence[float]) -> NDArray[np.float64] | str:
        """``T_base_link_marker`` (4, 4) [m] of the marker when the camera sees it at ``joints``
        [rad], else why not (``no such marker in the cell``, out of range, off axis, ...)."""
        try:
            marker = self._cell.marker(marker_id)
        except ValueError:
            return "no such marker in the cell"
        why = self._camera.why_not_visible(marker, joints)
        return why if why is not None else marker.pose.matrix()

    def scan(self, joints: Sequence[float]) -> Mapping[int, NDArray[np.float64]]:
        """Every marker of the cell the camera sees at ``joints`` [rad]: id -> pose [m]."""
        return {
            marker.id: marker.pose.matrix()
            for marker in self._cell.markers
            if self._camera.why_not_visible(marker, joints) is None
        }

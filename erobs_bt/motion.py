"""Motion values: what the planner, the drivers, the plan cache and the tree exchange.

Backend-neutral and free of ROS, simulator and viewer, so the world model, the planning
package, every backend and the core can all use them (the import contracts in
pyproject.toml keep this module at the bottom of the motion side):

* :class:`Solution`, the serialisable result of planning one unit: an ordered list of
  segments, each an :class:`ArmSegment` (a time-parameterised joint trajectory of
  :class:`TrajectoryPoint`) or a :class:`ToolSegment` (a tool command). It is what the
  plan cache stores and what replay sends back to a backend's ``execute``.
* The error taxonomy. Failures travel as :class:`MotionError` whose message keeps the
  EROBS prefixes (``PLANNING_FAILED:``, ``EXECUTION_FAILED:``, ``TIMEOUT:``,
  ``REPLAY_TIMEOUT:``) and erobs_bt's ``SCENE_CHANGED:`` (a replay refused by the opt-in
  scene check). Fatal means ``TIMEOUT:`` or ``REPLAY_TIMEOUT:``
  (docs/behaviour.md §3, "Replay and fault").
* :class:`DetectedPose` and :class:`StepReport`, what a vision or tool step reports.

:mod:`erobs_bt.backends.base` re-exports all of them beside the ``MotionBackend`` protocol.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

from erobs_bt.script.model import JOINT_NAMES, JointPositions

#: [rad] Largest deviation (any joint) of the arm's state from a trajectory's first point at
#: which the trajectory may start: the controllers' start tolerance (ur_robot_driver's cell as
#: erobs_bt checks it, the hardware YAML's ``start_tolerance``; MoveIt's
#: ``trajectory_execution.allowed_start_tolerance`` default is the same 0.01). A plan made from a
#: predicted start (a plan-ahead, a tool exchange's forecast) is used while the live state is
#: within it.
START_TOLERANCE = 0.01


class ErrorCode(enum.Enum):
    """The prefixes of motion errors; ``value`` is the prefix without the colon."""

    PLANNING_FAILED = "PLANNING_FAILED"
    EXECUTION_FAILED = "EXECUTION_FAILED"
    TIMEOUT = "TIMEOUT"
    REPLAY_TIMEOUT = "REPLAY_TIMEOUT"
    #: A cached trajectory collides with the planning scene as it is now (the opt-in
    #: ``replay_scene_check``); non-fatal: the unit is planned afresh, once.
    SCENE_CHANGED = "SCENE_CHANGED"

    @property
    def fatal(self) -> bool:
        """True for the codes that fault the orchestrator (``TIMEOUT``, ``REPLAY_TIMEOUT``)."""
        return self in (ErrorCode.TIMEOUT, ErrorCode.REPLAY_TIMEOUT)


class MotionError(RuntimeError):
    """A planning, execution or tool failure reported by a backend.

    ``str(error)`` is ``"<CODE>: <detail>"``, e.g. ``"TIMEOUT: goal acceptance over 10.0 s"``.

    Args:
        code: the error class; decides whether the failure is fatal.
        detail: what happened, for people.
    """

    def __init__(self, code: ErrorCode, detail: str) -> None:
        self.code = code
        self.detail = detail
        super().__init__(f"{code.value}: {detail}")

    @property
    def fatal(self) -> bool:
        """True when this error must fault the orchestrator (no further dispatch)."""
        return self.code.fatal


def as_motion_error(exc: BaseException, *, default: ErrorCode) -> MotionError:
    """Wrap any exception raised by a backend call as a :class:`MotionError`.

    A :class:`MotionError` is returned unchanged; an error whose text already carries
    a known prefix keeps that code; anything else becomes ``default`` with the
    exception's type and text as detail (a "caught execution exception").
    """
    if isinstance(exc, MotionError):
        return exc
    text = str(exc)
    for code in ErrorCode:
        prefix = f"{code.value}:"
        if text.startswith(prefix):
            return MotionError(code, text[len(prefix) :].strip())
    return MotionError(default, f"{type(exc).__name__}: {text}")


@dataclass(frozen=True)
class DetectedPose:
    """What a ``detect_only`` vision step reports: a pose in ``base_link``.

    As EROBS's ``MTCExecution`` result reports it: the pose the tool tip would be moved to
    over the detection (the goal computer's approach pose, marker offsets and
    ``z_offset`` applied), not the marker's own pose.

    Attributes:
        position: ``(x, y, z)`` [m] in ``base_link``.
        orientation: unit quaternion ``(x, y, z, w)`` of the tool tip (EROBS's ``ik_frame``)
            in ``base_link``.
    """

    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float]


class StepReport(str):
    """The status message of a single step (what :meth:`MotionBackend.run_step` resolves
    to: a ``str``) that also carries what the step detected.

    Args:
        message: the status message (the string's value).
        detected: the pose a ``detect_only`` vision step detected, else ``None``.
    """

    detected: DetectedPose | None

    def __new__(cls, message: str, *, detected: DetectedPose | None = None) -> StepReport:
        report = super().__new__(cls, message)
        report.detected = detected
        return report


@dataclass(frozen=True)
class TrajectoryPoint:
    """One sample of an arm trajectory.

    Attributes:
        positions: joint positions [rad], :data:`JOINT_NAMES` order.
        velocities: joint velocities [rad/s].
        accelerations: joint accelerations [rad/s²].
        time_from_start: [s] since the start of the segment.
    """

    positions: tuple[float, ...]
    velocities: tuple[float, ...]
    accelerations: tuple[float, ...]
    time_from_start: float


@dataclass(frozen=True)
class ArmSegment:
    """A time-parameterised arm trajectory (``trajectory_msgs/JointTrajectory`` shaped).

    Attributes:
        step_index: the script step this segment implements.
        points: at least one point; ``points[0]`` is the state the segment starts from.
        joint_names: joint order of the point vectors.
    """

    step_index: int
    points: tuple[TrajectoryPoint, ...]
    joint_names: tuple[str, ...] = JOINT_NAMES

    @property
    def duration(self) -> float:
        """Length of the segment [s]."""
        return self.points[-1].time_from_start if self.points else 0.0


@dataclass(frozen=True)
class ToolSegment:
    """A tool command inside a solution (e.g. ``vacuum_on`` on the ``epick``).

    Attributes:
        step_index: the script step this segment implements.
        gripper: the gripper the command is for.
        command: the gripper state to reach (an ``end_effector_action``).
    """

    step_index: int
    gripper: str
    command: str


Segment = ArmSegment | ToolSegment


@dataclass(frozen=True)
class Solution:
    """The planned motion of one unit, backend-neutral and serialisable.

    Attributes:
        segments: in execution order.
        model_revision: the robot-model revision it was planned with
            (``<prefix>__<gripper>[__<cup_profile>]``).
        start_positions: the arm state planning started from [rad], or ``None``.
        planning_time: wall time spent planning [s] (0 for a solution that was not
            planned in this process).
        scene_revision: the planning-scene revision it was planned in
            (``MotionBackend.scene_revision()`` when planning began), or ``None`` when the
            backend does not track one. Not part of any cache key (the specification keeps
            the scene out of it); the plan cache keeps it with the entry, so a replay and a
            plan-ahead can tell that the scene changed since.
    """

    segments: tuple[Segment, ...]
    model_revision: str
    start_positions: JointPositions | None = None
    planning_time: float = 0.0
    scene_revision: str | None = None

    @property
    def duration(self) -> float:
        """Total arm-motion time [s] (tool commands count as zero)."""
        return sum(s.duration for s in self.segments if isinstance(s, ArmSegment))

    def final_positions(self) -> tuple[float, ...] | None:
        """Joint positions [rad] at the end of the last arm segment, or the start."""
        for segment in reversed(self.segments):
            if isinstance(segment, ArmSegment) and segment.points:
                return segment.points[-1].positions
        return self.start_positions

    def to_bytes(self) -> bytes:
        """Serialise to compact UTF-8 JSON (what the plan cache stores)."""
        return json.dumps(_solution_to_json(self), separators=(",", ":")).encode()

    @staticmethod
    def from_bytes(data: bytes) -> Solution:
        """Inverse of :meth:`to_bytes`.

        Raises:
            ValueError: the bytes are not a serialised solution.
        """
        try:
            return _solution_from_json(json.loads(data))
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a serialised Solution: {exc}") from exc


def _solution_to_json(solution: Solution) -> dict[str, Any]:
    segments: list[dict[str, Any]] = []
    for segment in solution.segments:
        if isinstance(segment, ArmSegment):
            segments.append(
                {
                    "arm": segment.step_index,
                    "joints": list(segment.joint_names),
                    "t": [p.time_from_start for p in segment.points],
                    "q": [list(p.positions) for p in segment.points],
                    "qd": [list(p.velocities) for p in segment.points],
                    "qdd": [list(p.accelerations) for p in segment.points],
                }
            )
        else:
            segments.append(
                {"tool": segment.step_index, "gripper": segment.gripper, "command": segment.command}
            )
    document: dict[str, Any] = {
        "model_revision": solution.model_revision,
        "start": list(solution.start_positions) if solution.start_positions is not None else None,
        "segments": segments,
    }
    if solution.scene_revision is not None:
        document["scene_revision"] = solution.scene_revision
    return document


def _solution_from_json(data: dict[str, Any]) -> Solution:
    segments: list[Segment] = []
    for item in data["segments"]:
        if "arm" in item:
            points = tuple(
                TrajectoryPoint(tuple(q), tuple(qd), tuple(qdd), float(t))
                for t, q, qd, qdd in zip(item["t"], item["q"], item["qd"], item["qdd"], strict=True)
            )
            segments.append(ArmSegment(int(item["arm"]), points, tuple(item["joints"])))
        else:
            segments.append(ToolSegment(int(item["tool"]), item["gripper"], item["command"]))
    start = data["start"]
    return Solution(
        segments=tuple(segments),
        model_revision=data["model_revision"],
        start_positions=tuple(start) if start is not None else None,  # type: ignore[arg-type]
        scene_revision=data.get("scene_revision"),
    )

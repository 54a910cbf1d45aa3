"""The tools of the simulated cell: grippers, the pipettor, parts, the tool changer, the model.

Why the tool state is one frozen value (:class:`ToolState`): a batch is planned as one
connected sequence, so planning must carry the *planned* gripper state forward from step
to step (a ``vacuum_on`` that picks a part up changes what the next move carries) without
touching the live cell. Every tool command is therefore a pure function
``(state, command, joints) -> (new state, message)``; planning applies it to a copy,
execution applies it to the live state, and both use the same rules.

Rules chosen for the simulation (docs/behaviour.md §1 gives the commands; the physics
are ours):

* **Grippers.** ``end_effector_action`` must be one of the attached gripper's actions in
  the cell config (``PLANNING_FAILED`` otherwise, as MoveIt cannot plan a state of a
  group the model lacks). A gripper without actions (``none``, ``pipettor``) makes the
  step a successful no-op. The *grasp* state of a gripper (``vacuum_on``,
  ``hande_closed``, ``2fg7_closed``; roles from the cell configuration)
  picks up the part whose surface is within ``contact_tolerance`` (default 3 mm) of the
  tool centre point (the compressed cup lip of the ePick, the finger centre of a parallel
  gripper), and picks up nothing otherwise; the command still succeeds, as a real vacuum
  gripper's does. The *release* state puts the held part down exactly where it is.
* **Parts** are the movable objects of the cell, listed in an optional ``parts:`` section
  of the cell YAML (schema in :func:`parse_parts`). A held part is a collision object of
  the robot (:meth:`CollisionModel.attach_object`), allowed to touch the obstacles it
  touched when it was picked up; a part lying in the cell is not a collision object
  (parts are millimetre-thin samples and tips on surfaces that are obstacles).
* **Pipettor** (:func:`pipettor_command`): the pipettor must be attached; volumes are
  fractions of the stroke. ``SUCK v`` needs a tip and room (held + v ≤ 1); ``EXPEL v``
  needs a tip and dispenses min(v, held): past the aspirated liquid the plunger pushes
  air, which the status message reports (``EXPEL`` without ``volume_pct`` expels
  everything); ``EJECT_TIP`` needs a tip and discards
  any liquid with it; ``SET_LED`` needs ``led_color``; a ``led_color`` on any command sets
  the LED. Failures are ``EXECUTION_FAILED`` with the reason. A tip is picked up when a
  motion of the pipettor ends with its tool centre point within ``contact_tolerance`` of
  a part of kind ``pipette_tip``. The pipettor starts with a tip and an empty stroke
  unless the ``pipettor:`` section of the cell YAML says otherwise.
* **Tool changer** (:func:`run_tool_exchange`): ``dock`` needs ``gripper`` == the attached
  tool, a dock that is empty and no held part; ``load`` needs the bare flange (``none``)
  and the dock to hold ``gripper``. The arm moves as EROBS moves it by the cell's
  ``tool_exchange`` block (:func:`exchange_moves`): to the step's ``approach_pose``, a
  lateral shift to the dock, then the load or dock sequence; the tool changes hands at the
  dock's seat. Every motion is planned by the planner with the collision model of the
  tool attached at that moment. The model revision changes with the tool, and
  :class:`RobotModel` reloads the collision model only when the revision changes.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Protocol, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from erobs_bt.motion import ErrorCode, MotionError, ToolSegment
from erobs_bt.script.model import EndEffector, MoveTo, Step, ToolExchange
from erobs_bt.script.vocabulary import start_docks
from erobs_bt.world.cell import CellConfig, Shape, ShapeKind, read_pose
from erobs_bt.world.collision import CollisionModel
from erobs_bt.world.kinematics import fk, invert_pose
from erobs_bt.world.scene import World

_LOG = logging.getLogger(__name__)

#: Default distance [m] between the tool centre point and a part surface that counts as touching.
DEFAULT_CONTACT_TOLERANCE = 0.003
#: Part kinds: ``sample`` (picked by grippers), ``pipette_tip`` (picked up by the pipettor cone).
PART_KINDS: tuple[str, ...] = ("sample", "pipette_tip")
#: Pipettor operations (EROBS pipettor action).
PIPETTOR_OPERATIONS: tuple[str, ...] = ("SUCK", "EXPEL", "EJECT_TIP", "SET_LED")
#: Volumes closer than this (fraction of the stroke) are equal.
_VOLUME_EPS = 1e-9


# ---------------------------------------------------------------------------------------------
# Parts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """A movable object of the cell.

    Attributes:
        name: unique among parts and obstacles.
        kind: ``sample`` or ``pipette_tip``.
        shape: the primitive (``shape_msgs/SolidPrimitive`` dimensions).
        pose: (4, 4) centre in ``base_link`` as a tuple of rows (immutable).
    """

    name: str
    kind: str
    shape: Shape
    pose: tuple[tuple[float, ...], ...]

    def matrix(self) -> NDArray[np.float64]:
        """(4, 4) pose of the part centre in ``base_link``."""
        return np.array(self.pose, dtype=float)


def _rows(T: ArrayLike) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(float(v) for v in row) for row in np.asarray(T, dtype=float))


def parse_parts(cell: CellConfig) -> tuple[Part, ...]:
    """Read the ``parts:`` section of the cell YAML (kept in ``cell.extra``).

    Schema::

        parts:
          - name: <str>                     unique among parts and obstacles
            kind: sample | pipette_tip      optional, default sample
            shape: box | cylinder | sphere
            size: [...]                     box [x, y, z]; cylinder [height, radius]; sphere [radius]
            pose: {xyz: [3], rpy: [3] | rpy_deg: [3]}   centre in base_link

    Raises:
        ValueError: ``<file>: parts[<i>].<key>: <reason>``.
    """
    raw = cell.extra.get("parts", [])
    source = cell.source or "cell"
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError(f"{source}: parts: expected a list, got {type(raw).__name__}")
    obstacles = {o.name for o in cell.obstacles}
    parts: list[Part] = []
    for i, entry in enumerate(raw):
        where = f"{source}: parts[{i}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: expected a mapping, got {type(entry).__name__}")
        unknown = sorted(set(entry) - {"name", "kind", "shape", "size", "pose"})
        if unknown:
            raise ValueError(f"{where}.{unknown[0]}: unknown key (allowed: name, kind, shape, size, pose)")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.name: expected a non-empty string, got {name!r}")
        if name in obstacles or any(p.name == name for p in parts):
            raise ValueError(f"{where}.name: {name!r} is already an obstacle or part name")
        kind = entry.get("kind", "sample")
        if kind not in PART_KINDS:
            raise ValueError(f"{where}.kind: expected one of {', '.join(PART_KINDS)}, got {kind!r}")
        kind_of_shape = entry.get("shape")
        if kind_of_shape not in ("box", "cylinder", "sphere"):
            raise ValueError(f"{where}.shape: expected box, cylinder or sphere, got {kind_of_shape!r}")
        try:
            shape = Shape(
                kind=cast(ShapeKind, kind_of_shape), size=tuple(_numbers(entry.get("size"), "size"))
            )
        except ValueError as exc:
            raise ValueError(f"{where}.{exc}") from None
        pose = read_pose(entry.get("pose"), f"parts[{i}].pose", file=source)
        parts.append(Part(name=name, kind=kind, shape=shape, pose=_rows(pose.matrix())))
    return tuple(parts)


def _numbers(value: Any, key: str) -> list[float]:
    if not isinstance(value, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value
    ):
        raise ValueError(f"{key}: expected a list of finite numbers, got {value!r}")
    return [float(v) for v in value]


def signed_distance(shape: Shape, T_base_shape: ArrayLike, point: ArrayLike) -> float:
    """Signed distance [m] from a point to the surface of a primitive (negative inside).

    Args:
        shape: box ``(x, y, z)`` edges, cylinder ``(height, radius)`` about local z,
            or sphere ``(radius,)``; centred at the shape frame.
        T_base_shape: (4, 4) pose of the shape centre in the point's frame.
        point: (3,) [m].

    Returns:
        The exact Euclidean signed distance.
    """
    local = invert_pose(T_base_shape) @ np.append(np.asarray(point, dtype=float), 1.0)
    p = local[:3]
    if shape.kind == "sphere":
        return float(np.linalg.norm(p) - shape.size[0])
    if shape.kind == "box":
        d = np.abs(p) - 0.5 * np.asarray(shape.size)
    else:
        height, radius = shape.size
        d = np.array([math.hypot(p[0], p[1]) - radius, abs(p[2]) - 0.5 * height])
    outside = float(np.linalg.norm(np.maximum(d, 0.0)))
    inside = min(float(np.max(d)), 0.0)
    return outside + inside


# ---------------------------------------------------------------------------------------------
# Pipettor
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PipettorState:
    """The pipettor's bookkeeping.

    Attributes:
        tip: a tip is on the cone.
        volume: aspirated liquid as a fraction of the stroke, in [0, 1].
        led: LED colour ``(r, g, b)`` in [0, 1], or ``None`` when never set.
        stroke_ul: the full stroke [µL], for messages.
    """

    tip: bool = True
    volume: float = 0.0
    led: tuple[float, float, float] | None = None
    stroke_ul: float = 1000.0


def pipettor_state_from_cell(cell: CellConfig) -> PipettorState:
    """The pipettor's initial state from the optional ``pipettor:`` section of the cell YAML.

    Schema: ``pipettor: {stroke_ul: <µL > 0, default 1000>, tip: <bool, default true>,
    volume_pct: <[0, 1], default 0>}``.

    Raises:
        ValueError: ``<file>: pipettor.<key>: <reason>``.
    """
    raw = cell.extra.get("pipettor", {}) or {}
    where = f"{cell.source or 'cell'}: pipettor"
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - {"stroke_ul", "tip", "volume_pct"})
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: unknown key (allowed: stroke_ul, tip, volume_pct)")
    stroke = raw.get("stroke_ul", 1000.0)
    if (
        isinstance(stroke, bool)
        or not isinstance(stroke, int | float)
        or not (math.isfinite(stroke) and stroke > 0)
    ):
        raise ValueError(f"{where}.stroke_ul: expected a number > 0, got {stroke!r}")
    tip = raw.get("tip", True)
    if not isinstance(tip, bool):
        raise ValueError(f"{where}.tip: expected true or false, got {tip!r}")
    volume = raw.get("volume_pct", 0.0)
    if isinstance(volume, bool) or not isinstance(volume, int | float) or not 0.0 <= volume <= 1.0:
        raise ValueError(f"{where}.volume_pct: expected a number in [0, 1], got {volume!r}")
    if volume > 0 and not tip:
        raise ValueError(f"{where}.volume_pct: liquid needs a tip (tip is false)")
    return PipettorState(tip=tip, volume=float(volume), stroke_ul=float(stroke))


def pipettor_command(
    state: PipettorState,
    operation: str,
    *,
    volume_pct: float | None = None,
    led_color: tuple[float, float, float] | None = None,
    where: str = "pipettor",
) -> tuple[PipettorState, str]:
    """Apply one pipettor command to the bookkeeping (rules in the module docstring).

    Args:
        state: before the command.
        operation: ``SUCK``, ``EXPEL``, ``EJECT_TIP`` or ``SET_LED``.
        volume_pct: fraction of the stroke in [0, 1] (``SUCK``/``EXPEL``).
        led_color: ``(r, g, b)`` in [0, 1]; sets the LED with any operation.
        where: the step's path, for messages.

    Returns:
        ``(new state, status message)``.

    Raises:
        MotionError: ``EXECUTION_FAILED: <where>: <reason>``.
    """

    def fail(reason: str) -> MotionError:
        return MotionError(ErrorCode.EXECUTION_FAILED, f"{where}: pipettor {operation}: {reason}")

    def ul(fraction: float) -> str:
        return f"{fraction:.3g} of the stroke ({fraction * state.stroke_ul:.0f} µL)"

    if operation not in PIPETTOR_OPERATIONS:
        raise fail(f"unknown operation (expected one of {', '.join(PIPETTOR_OPERATIONS)})")
    if volume_pct is not None and not (math.isfinite(volume_pct) and 0.0 <= volume_pct <= 1.0):
        raise fail(f"volume_pct must be in [0, 1], got {volume_pct}")
    new = state if led_color is None else replace(state, led=tuple(float(c) for c in led_color))  # type: ignore[arg-type]
    if operation == "SET_LED":
        if led_color is None:
            raise fail("needs led_color")
        return new, f"LED set to {new.led}"
    if operation == "EJECT_TIP":
        if not state.tip:
            raise fail("no tip to eject")
        discarded = f", discarding {ul(state.volume)}" if state.volume > _VOLUME_EPS else ""
        return replace(new, tip=False, volume=0.0), f"tip ejected{discarded}"
    if not state.tip:
        raise fail("no tip on the cone")
    if operation == "SUCK":
        if volume_pct is None:
            raise fail("needs volume_pct")
        if state.volume + volume_pct > 1.0 + _VOLUME_EPS:
            raise fail(f"would overfill: holds {ul(state.volume)}, asked for {ul(volume_pct)} more")
        volume = min(1.0, state.volume + volume_pct)
        return replace(new, volume=volume), f"aspirated {ul(volume_pct)}, holds {ul(volume)}"
    asked = state.volume if volume_pct is None else volume_pct
    amount = min(asked, state.volume)
    volume = max(0.0, state.volume - amount)
    shortfall = ""
    if asked > amount + _VOLUME_EPS:
        # The plunger travels the whole way; past the aspirated liquid it pushes air.
        shortfall = f" (asked for {ul(asked)}; only {ul(amount)} was aspirated, the rest was air)"
    return replace(new, volume=volume), f"dispensed {ul(amount)}, holds {ul(volume)}{shortfall}"


# ---------------------------------------------------------------------------------------------
# The tool state
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeldPart:
    """A part held by the gripper.

    Attributes:
        part: the part (its ``pose`` is where it was picked up).
        T_tcp_part: (4, 4) part centre in the tool-centre-point frame, tuple of rows.
        touch_obstacles: obstacles it touched when picked up (allowed contacts).
    """

    part: Part
    T_tcp_part: tuple[tuple[float, ...], ...]
    touch_obstacles: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolState:
    """Everything about the tools that planning carries forward and execution changes.

    Attributes:
        gripper: the attached tool (``none`` for the bare flange).
        cup_profile: the fitted cup of a vacuum gripper, else ``None``.
        gripper_states: last commanded state per gripper (``epick -> vacuum_on``).
        held: the held part, if any.
        parts: parts lying in the cell, by name.
        pipettor: the pipettor's bookkeeping (kept while it is docked).
        docks: dock number -> the tool stored there (``None``: empty).
    """

    gripper: str
    cup_profile: str | None
    gripper_states: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    held: HeldPart | None = None
    parts: Mapping[str, Part] = field(default_factory=lambda: MappingProxyType({}))
    pipettor: PipettorState = PipettorState()
    docks: Mapping[int, str | None] = field(default_factory=lambda: MappingProxyType({}))


def initial_tool_state(cell: CellConfig, gripper: str, cup_profile: str | None = None) -> ToolState:
    """The tool state of a freshly started cell with ``gripper`` attached.

    The docks hold what the cell config says, except the attached tool (an operator
    mounted it): :func:`erobs_bt.script.vocabulary.start_docks`. Parts and the pipettor come
    from the ``parts:`` and ``pipettor:`` sections.

    Raises:
        ValueError: unknown gripper or cup profile, or invalid ``parts``/``pipettor`` sections.
    """
    cup = cell.gripper(gripper).cup(cup_profile)
    docks = start_docks({d.number: d.gripper for d in cell.docks}, gripper)
    return ToolState(
        gripper=gripper,
        cup_profile=cup.name if cup is not None else None,
        parts=MappingProxyType({p.name: p for p in parse_parts(cell)}),
        pipettor=pipettor_state_from_cell(cell),
        docks=MappingProxyType(docks),
    )


def mounted_at_start(cell: CellConfig) -> str:
    """The tool on the arm when the cell starts: the one tool stored in no dock, else ``none``."""
    docked = {d.gripper for d in cell.docks if d.gripper is not None}
    loose = [name for name in cell.grippers if name != "none" and name not in docked]
    return loose[0] if len(loose) == 1 else "none"


def mount_tool(cell: CellConfig, state: ToolState, gripper: str, cup_profile: str | None = None) -> ToolState:
    """An operator swaps the attached tool by hand (``prepare_goal`` with another ``start_gripper``).

    The new tool leaves the dock it was stored in (if any); the old tool goes back to its
    home dock from the cell config when that dock is empty, else into the lowest-numbered
    empty dock that the cell config assigns to no tool, else into any empty dock (it stays
    off the rack when every dock is full).

    Raises:
        MotionError: ``EXECUTION_FAILED`` when a part is held or the gripper is unknown.
    """
    try:
        cup = cell.gripper(gripper).cup(cup_profile)
    except ValueError as exc:
        raise MotionError(ErrorCode.EXECUTION_FAILED, str(exc)) from None
    if state.held is not None:
        raise MotionError(
            ErrorCode.EXECUTION_FAILED,
            f"cannot mount {gripper}: the {state.gripper} holds part {state.held.part.name}",
        )
    docks = dict(state.docks)
    for number, stored in docks.items():
        if stored == gripper:
            docks[number] = None
    if state.gripper != "none":
        empty = [d for d in cell.docks if docks.get(d.number) is None]
        choices = (
            [d.number for d in empty if d.gripper == state.gripper]
            + [d.number for d in empty if d.gripper is None]
            + [d.number for d in empty]
        )
        if choices:
            docks[choices[0]] = state.gripper
    return replace(
        state,
        gripper=gripper,
        cup_profile=cup.name if cup is not None else None,
        docks=MappingProxyType(docks),
    )


#: The ePick's object-detection codes (``epick_msgs/msg/ObjectDetectionStatus``, the values
#: of the Robotiq ePick driver's ``status`` field).
EPICK_UNKNOWN = 0
EPICK_OBJECT_DETECTED_AT_MAX_PRESSURE = 2
EPICK_NO_OBJECT_DETECTED = 3
#: [Hz] how often the ePick driver publishes ``object_detection_status``: once per update of
#: its controller_manager (``update_rate: 30`` in the driver's controllers.yaml).
EPICK_STATUS_RATE = 30.0


def epick_object_status(state: ToolState) -> int | None:
    """What the simulated ePick reports on ``object_detection_status``, or ``None`` when no
    ePick is attached (the driver's status controller runs only while it is loaded).

    ``OBJECT_DETECTED_AT_MAX_PRESSURE`` while it holds a part (the simulation has no leak:
    a sealed part reaches the full vacuum); ``NO_OBJECT_DETECTED`` when it holds nothing
    after a vacuum command (nothing was gripped, or the part was released); ``UNKNOWN``
    before its first command.
    """
    if state.gripper != "epick":
        return None
    if state.held is not None:
        return EPICK_OBJECT_DETECTED_AT_MAX_PRESSURE
    if "epick" not in state.gripper_states:
        return EPICK_UNKNOWN
    return EPICK_NO_OBJECT_DETECTED


def gripper_roles(cell: CellConfig, gripper: str) -> Mapping[str, str]:
    """``role -> state`` (``grasp``, ``release``) of a gripper, limited to its configured actions."""
    return cell.gripper(gripper).roles


def resolve_end_effector(cell: CellConfig, state: ToolState, step: EndEffector) -> ToolSegment | None:
    """Check an ``end_effector`` step against the planned tool state.

    Returns:
        The tool segment, or ``None`` for a successful no-op (a gripper with no
        actions: ``none``, ``pipettor``).

    Raises:
        MotionError: ``PLANNING_FAILED`` when ``end_effector_type`` is not the attached
            tool or the action is not one of its states.
    """
    gripper = step.gripper or state.gripper
    if gripper != state.gripper:
        raise MotionError(
            ErrorCode.PLANNING_FAILED,
            f"{step.path}: end_effector_type {gripper} is not attached (attached: {state.gripper})",
        )
    actions = cell.gripper(gripper).actions
    if not actions:
        return None
    if step.action not in actions:
        raise MotionError(
            ErrorCode.PLANNING_FAILED,
            f"{step.path}: {step.action} is not a state of the {gripper} gripper "
            f"(states: {', '.join(actions)})",
        )
    return ToolSegment(step.index, gripper, step.action)


def tcp_pose(cell: CellConfig, state: ToolState, q: ArrayLike) -> NDArray[np.float64]:
    """(4, 4) tool centre point of the attached tool in ``base_link`` at joints ``q`` [rad]."""
    return fk(q) @ cell.gripper(state.gripper).T_flange_tcp(state.cup_profile)


def _touched_obstacles(cell: CellConfig, part: Part, tolerance: float) -> tuple[str, ...]:
    """Obstacles within ``tolerance`` of the part's surface (sampled at its support corners)."""
    T = part.matrix()
    out = []
    for obstacle in cell.obstacles:
        T_obstacle = obstacle.T_base_link_obstacle()
        # The part's lowest point along base z and its centre are what rests on a surface.
        probes = [T[:3, 3], T[:3, 3] - np.array([0.0, 0.0, _half_height(part.shape)])]
        if any(signed_distance(obstacle.shape, T_obstacle, p) <= tolerance for p in probes):
            out.append(obstacle.name)
    return tuple(out)


def _half_height(shape: Shape) -> float:
    if shape.kind == "box":
        return 0.5 * shape.size[2]
    if shape.kind == "cylinder":
        return 0.5 * shape.size[0]
    return shape.size[0]


def gripper_command(
    cell: CellConfig,
    state: ToolState,
    gripper: str,
    command: str,
    q: ArrayLike,
    *,
    contact_tolerance: float = DEFAULT_CONTACT_TOLERANCE,
    where: str = "end_effector",
) -> tuple[ToolState, str]:
    """Apply a gripper state at joints ``q`` [rad] (rules in the module docstring).

    Args:
        cell: the cell.
        state: before the command.
        gripper: the gripper the command is for (must be attached).
        command: the gripper state (``vacuum_on``, ``hande_open``, …).
        q: the arm state when the command runs [rad].
        contact_tolerance: [m] TCP-to-part-surface distance that counts as touching.
        where: the step's path, for messages.

    Returns:
        ``(new state, status message)``.

    Raises:
        MotionError: ``EXECUTION_FAILED`` when ``gripper`` is not attached or the command
            is not one of its states.
    """
    if gripper != state.gripper:
        raise MotionError(
            ErrorCode.EXECUTION_FAILED,
            f"{where}: command {command} is for {gripper}, attached is {state.gripper}",
        )
    actions = cell.gripper(gripper).actions
    if not actions:
        return state, f"{command}: {gripper} has no gripper group (no-op)"
    if command not in actions:
        raise MotionError(
            ErrorCode.EXECUTION_FAILED,
            f"{where}: {command} is not a state of the {gripper} gripper (states: {', '.join(actions)})",
        )
    states = dict(state.gripper_states)
    states[gripper] = command
    new = replace(state, gripper_states=MappingProxyType(states))
    roles = gripper_roles(cell, gripper)
    if command == roles.get("grasp"):
        if state.held is not None:
            return new, f"{command}: already holding {state.held.part.name}"
        T_tcp = tcp_pose(cell, state, q)
        touching = [
            (signed_distance(p.shape, p.matrix(), T_tcp[:3, 3]), name)
            for name, p in state.parts.items()
            if p.kind == "sample"
        ]
        touching = [(d, name) for d, name in touching if d <= contact_tolerance]
        if not touching:
            return new, f"{command}: no part at the tool"
        _, name = min(touching)
        part = state.parts[name]
        parts = {k: v for k, v in state.parts.items() if k != name}
        held = HeldPart(
            part=part,
            T_tcp_part=_rows(invert_pose(T_tcp) @ part.matrix()),
            touch_obstacles=_touched_obstacles(cell, part, contact_tolerance),
        )
        return replace(new, held=held, parts=MappingProxyType(parts)), f"{command}: holding {name}"
    if command == roles.get("release") and state.held is not None:
        T_part = tcp_pose(cell, state, q) @ np.array(state.held.T_tcp_part)
        placed = replace(state.held.part, pose=_rows(T_part))
        parts = dict(state.parts)
        parts[placed.name] = placed
        return (
            replace(new, held=None, parts=MappingProxyType(parts)),
            f"{command}: released {placed.name} at {np.round(T_part[:3, 3], 4).tolist()} m",
        )
    return new, f"{command}: done"


def after_motion(
    cell: CellConfig, state: ToolState, q: ArrayLike, *, contact_tolerance: float = DEFAULT_CONTACT_TOLERANCE
) -> ToolState:
    """Effects of the arm coming to rest at ``q``: a tipless pipettor picks up a pipette tip it touches."""
    if state.gripper != "pipettor" or state.pipettor.tip:
        return state
    T_tcp = tcp_pose(cell, state, q)
    for name, part in state.parts.items():
        if (
            part.kind == "pipette_tip"
            and signed_distance(part.shape, part.matrix(), T_tcp[:3, 3]) <= contact_tolerance
        ):
            parts = {k: v for k, v in state.parts.items() if k != name}
            _LOG.info("pipettor picked up tip %s", name)
            return replace(state, parts=MappingProxyType(parts), pipettor=replace(state.pipettor, tip=True))
    return state


# ---------------------------------------------------------------------------------------------
# The robot model (collision model + revision)
# ---------------------------------------------------------------------------------------------


class RobotModel:
    """The collision model of the robot with its tool, kept in step with a :class:`ToolState`.

    The model is reloaded (:meth:`CollisionModel.set_gripper`) only when the model
    revision ``<prefix>__<gripper>[__<cup_profile>]`` changes; :attr:`reloads` counts
    reloads after construction. Held parts are attached and detached without a reload.

    Args:
        cell: the cell.
        state: the initial tool state.
        collision: an existing collision model to adopt (it is brought to ``state``),
            or ``None`` to build one.
    """

    def __init__(
        self, cell: CellConfig, state: ToolState, *, collision: CollisionModel | None = None
    ) -> None:
        self._cell = cell
        self._lock = threading.RLock()
        self.reloads = 0
        if collision is None:
            collision = CollisionModel(cell, gripper=state.gripper, cup_profile=state.cup_profile)
        self._collision = collision
        self._world = World.of(collision.obstacles, where="cell obstacles")
        self._held: str | None = None
        if collision.model_revision != cell.model_revision(state.gripper, state.cup_profile):
            collision.set_gripper(state.gripper, cup_profile=state.cup_profile)
        self.sync(state)

    @property
    def lock(self) -> threading.RLock:
        """Held while the model must not change (planning holds it for a whole unit)."""
        return self._lock

    @property
    def collision(self) -> CollisionModel:
        """The collision model (the same object for the model's lifetime)."""
        return self._collision

    @property
    def revision(self) -> str:
        """The current model revision."""
        return self._collision.model_revision

    def sync(self, state: ToolState) -> bool:
        """Bring the model to ``state``: its tool (reload on a revision change) and held part.

        Returns:
            True when the model was reloaded.
        """
        with self._lock:
            reloaded = False
            wanted = self._cell.model_revision(state.gripper, state.cup_profile)
            if wanted != self._collision.model_revision:
                _LOG.info("robot model reload: %s -> %s", self._collision.model_revision, wanted)
                self._collision.set_gripper(state.gripper, cup_profile=state.cup_profile)
                self.reloads += 1
                self._held = None
                reloaded = True
            held = state.held.part.name if state.held is not None else None
            if held != self._held:
                if state.held is None:
                    self._collision.detach_object()
                else:
                    present = {o.name for o in self._collision.obstacles}
                    self._collision.attach_object(
                        state.held.part.name,
                        state.held.part.shape,
                        np.array(state.held.T_tcp_part),
                        # the surface it lay on may have left the world since
                        touch_obstacles=tuple(n for n in state.held.touch_obstacles if n in present),
                    )
                self._held = held
            return reloaded

    @property
    def world(self) -> World:
        """The planning-scene world the model checks against (the cell's obstacles at first)."""
        return self._world

    def set_world(self, world: World) -> bool:
        """Bring the model to ``world`` (rebuilt only when its revision differs).

        Returns:
            True when the model's obstacles changed.

        Raises:
            ValueError: an obstacle named like a body of the robot model (nothing changes).
        """
        with self._lock:
            if world.revision == self._world.revision:
                return False
            self._collision.set_obstacles(world.obstacles)
            self._world = world
            return True


# ---------------------------------------------------------------------------------------------
# Tool changer
# ---------------------------------------------------------------------------------------------


class ToolPort(Protocol):
    """What :func:`run_tool_exchange` needs from the backend."""

    def joint_positions(self) -> tuple[float, ...]:
        """The live arm state [rad]."""
        ...

    def tool_state(self) -> ToolState:
        """The live tool state."""
        ...

    def move(self, steps: Sequence[Step]) -> None:
        """Plan ``steps`` from the live state as one sequence and execute them (blocking).

        Raises:
            MotionError: planning or execution failed.
        """
        ...

    def set_tool_state(self, state: ToolState) -> None:
        """Replace the live tool state (the model follows it)."""
        ...

    def cup_profile_for(self, gripper: str) -> str | None:
        """The suction cup to fit on ``gripper`` when it is loaded (``None``: its default)."""
        ...


def planning_tip(cell: CellConfig, state: ToolState) -> NDArray[np.float64]:
    """(4, 4) ``T_flange_tip`` that motions of ``state``'s tool are planned for (its IK frame).

    EROBS plans ``cartesian_target`` goals for the tool's tip link (``epick_tip``,
    ``pipette_tip_link``, …), which for the ePick is the end of the (uncompressed) cup.
    In the cell config the tip frame of a vacuum gripper is the cup's base and the cup
    profile gives its length, so the IK frame is ``T_flange_tip · Tz(cup length)``; for
    other tools it is the tip frame. The ``z_offset`` (cup compression) is not part of
    it: vision goals add it, as EROBS's approach computation does, which puts the tool
    centre point (:meth:`GripperConfig.T_flange_tcp`) on the marker.
    """
    gripper = cell.gripper(state.gripper)
    cup = gripper.cup(state.cup_profile)
    T = gripper.T_flange_tip
    if cup is None:
        return T
    shift = np.eye(4)
    shift[2, 3] = cup.length
    return T @ shift


def exchange_moves(cell: CellConfig, step: ToolExchange) -> tuple[tuple[Step, ...], tuple[Step, ...]]:
    """The motions of a ``tool_exchange`` step, as EROBS makes them from the cell's
    ``tool_exchange`` block (:class:`~erobs_bt.world.cell.ToolChanger`), split where the tool
    changes hands.

    The one place these motions are computed: the simulated cell, the ``ros2_control`` and
    ``moveit`` backends (all through :func:`run_tool_exchange`) and planning ahead
    (:mod:`erobs_bt.planning.forecast`) run them; the console shows what they run. The moves:

    1. the step's ``approach_pose`` (joint space, ``auto``; without one the arm starts from
       where it is);
    2. the lateral shift to the dock's line (:meth:`ToolChanger.shift`), a straight
       ``cartesian`` move in the flange frame;
    3. the ``load_sequence`` or ``dock_sequence``, each a straight ``cartesian`` move in the
       flange frame (EROBS's Cartesian planner with ``min_fraction`` 1).

    The tool changes hands at the dock's seat: a load takes hold of it after the load
    sequence's first move (EROBS's CMS block: "attach to magnet"), a dock leaves it before the
    dock sequence's last move (after "set tool into holder"); the moves after that are planned
    with the tool as it is after the exchange (EROBS plans them all with the model of the tool
    before it and restarts MoveIt afterwards). The simulated hardware node locks and unlocks
    the changer only there (:meth:`~erobs_bt.world.cell.CellConfig.dock_seat`).

    Returns:
        ``(moves before the tool changes hands, moves after)``.

    Raises:
        MotionError: ``EXECUTION_FAILED`` when the cell has no ``tool_exchange`` block.
    """
    changer = cell.tool_changer
    if changer is None:
        raise MotionError(
            ErrorCode.EXECUTION_FAILED,
            f"{step.path}: tool_exchange {step.operation}: the cell has no tool_exchange block "
            f"(dock_spacing_m, reference_dock, load_sequence, dock_sequence) in {cell.source or 'the cell'}",
        )
    moves: list[Step] = []
    if step.approach_joints is not None:
        moves.append(
            MoveTo(
                index=step.index,
                path=f"{step.path} (approach {step.approach_pose or 'pose'})",
                spec={},
                target=step.approach_pose or "approach_pose",
                target_joints=step.approach_joints,
            )
        )
    relative = []
    shift = changer.shift(step.dock_number)
    if shift is not None:
        relative.append((f"shift to dock {step.dock_number}", shift))
    for i, move in enumerate(changer.sequence(step.operation), start=1):
        relative.append((f"{step.operation} step {i}", move))
    for label, move in relative:
        moves.append(
            MoveTo(
                index=step.index,
                path=f"{step.path} ({label}: {move.direction} {move.distance:.3f} m)",
                spec={},
                direction=move.direction,
                direction_vector=move.vector,
                distance=move.distance,
                planning_type="cartesian",
            )
        )
    sequence_start = len(moves) - len(changer.sequence(step.operation))
    split = sequence_start + 1 if step.operation == "load" else len(moves) - 1
    return tuple(moves[:split]), tuple(moves[split:])


def run_tool_exchange(
    cell: CellConfig,
    step: ToolExchange,
    port: ToolPort,
) -> str:
    """Dock or load a tool by the cell's tool-changer geometry (:func:`exchange_moves`).

    Each motion is planned by the backend's planner from the live state, with the collision
    model of the tool attached at that moment.

    Args:
        cell: the cell (docks, ``tool_exchange``).
        step: the ``tool_exchange`` step.
        port: the backend.

    Returns:
        A status message.

    Raises:
        MotionError: ``EXECUTION_FAILED`` for a violated precondition (the arm does not
            move), or the planning/execution error of a motion.
    """
    state = port.tool_state()
    where = step.path

    def fail(reason: str) -> MotionError:
        return MotionError(ErrorCode.EXECUTION_FAILED, f"{where}: tool_exchange {step.operation}: {reason}")

    try:
        dock = cell.dock(step.dock_number)
    except ValueError as exc:
        raise fail(str(exc)) from None
    stored = state.docks.get(dock.number)
    if step.operation == "dock":
        if step.gripper != state.gripper:
            raise fail(f"gripper {step.gripper} is not the attached tool ({state.gripper})")
        if state.gripper == "none":
            raise fail("no tool is attached")
        if stored is not None:
            raise fail(f"dock {dock.number} already holds the {stored}")
        if state.held is not None:
            raise fail(f"the {state.gripper} still holds part {state.held.part.name}")
    elif step.operation == "load":
        if state.gripper != "none":
            raise fail(f"the {state.gripper} is attached; load needs the bare flange (dock it first)")
        if stored != step.gripper:
            raise fail(f"dock {dock.number} holds {stored or 'nothing'}, not the {step.gripper}")
        cell.gripper(step.gripper)
    else:
        raise fail("operation must be dock or load")

    inbound, outbound = exchange_moves(cell, step)
    if inbound:
        port.move(list(inbound))

    state = port.tool_state()
    docks = dict(state.docks)
    if step.operation == "dock":
        docks[dock.number] = state.gripper
        new = replace(state, gripper="none", cup_profile=None, docks=MappingProxyType(docks))
    else:
        docks[dock.number] = None
        cup = cell.gripper(step.gripper).cup(port.cup_profile_for(step.gripper))
        new = replace(
            state,
            gripper=step.gripper,
            cup_profile=cup.name if cup is not None else None,
            docks=MappingProxyType(docks),
        )
    port.set_tool_state(new)
    if outbound:
        port.move(list(outbound))
    done = "docked in" if step.operation == "dock" else "loaded from"
    return f"{step.gripper} {done} dock {dock.number}; attached: {new.gripper}"

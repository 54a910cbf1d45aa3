"""The folded, JSON-able picture of a script tree that the live viewers draw.

A compiled tree is ``script`` → (``before unit N``, ``unit N: label``)… → ``after last
unit`` (docs/design.md §2). A 1,000-unit script has about 7,000 behaviours; drawing all of
them on every change is neither fast nor readable. :func:`fold_tree` keeps what matters:

* the *current* unit (running, failed, or the one a paused/cancelled boundary waits
  before) with its subtree, and a few units around it (``keep_done`` finished before it,
  ``lookahead`` pending after it), each with its subtree;
* every other unit as one line, consecutive finished units and the pending remainder
  folded into groups (expandable by the viewer) once the script has more than
  ``max_flat`` units; below that every unit is listed with its subtree.

Its input is a :data:`NodeLike`: a live py_trees behaviour (read without ticking, only
the part that is shown is walked, so a snapshot costs O(units + shown nodes)) or a
nested ``dict`` with ``name``, ``type``, ``status``, ``message``, ``children`` (built
from a ``TreeSnapshot`` message with :func:`nest`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import py_trees

from erobs_bt.backends.base import ArmSegment, Solution, ToolSegment
from erobs_bt.batching import Unit
from erobs_bt.script.model import EndEffector, MoveTo, Pipettor, Script, Step, ToolExchange, Vision

#: A live behaviour or a nested node dict (see the module docstring).
NodeLike: TypeAlias = py_trees.behaviour.Behaviour | Mapping[str, Any]

_UNIT_NAME = re.compile(r"^unit (\d+): (.*)$", re.DOTALL)
_BOUNDARY_NAME = re.compile(r"^before unit (\d+)$")

#: Node statuses, as py_trees spells them.
STATUSES = ("INVALID", "RUNNING", "SUCCESS", "FAILURE")


@dataclass
class UnitNotes:
    """What the event stream adds to a unit: cache decision, phase times, error, notice.

    Attributes:
        cache: ``HIT``, ``MISS``, ``INELIGIBLE`` or ``""``.
        seconds: phase name (``plan``, ``execute``, ``replay``, ``run``) → duration [s].
        error: the error detail of a failed phase, ``""`` when none.
        notice: what an operator must know of a unit that did not fail: its cache hit was
            replayed unchecked although planned in another planning-scene revision (the
            ``replay_unchecked`` record's message), ``""`` when none.
    """

    cache: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    error: str = ""
    notice: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "cache": self.cache,
            "seconds": dict(self.seconds),
            "error": self.error,
            "notice": self.notice,
        }


def _name(node: NodeLike) -> str:
    return str(node["name"]) if isinstance(node, Mapping) else node.name


def _status(node: NodeLike) -> str:
    return str(node["status"]) if isinstance(node, Mapping) else node.status.value


def _children(node: NodeLike) -> Sequence[NodeLike]:
    if isinstance(node, Mapping):
        return list(node.get("children", ()))
    return node.children


def describe(node: NodeLike, *, deep: bool) -> dict[str, Any]:
    """``{"name", "type", "status", "message"}`` plus ``children`` (recursively) when ``deep``."""
    out: dict[str, Any]
    if isinstance(node, Mapping):
        out = {
            "name": str(node.get("name", "")),
            "type": str(node.get("type", "")),
            "status": str(node.get("status", "INVALID")),
            "message": str(node.get("message", "")),
        }
    else:
        out = {
            "name": node.name,
            "type": type(node).__name__,
            "status": node.status.value,
            "message": node.feedback_message,
        }
    if deep:
        out["children"] = [describe(child, deep=True) for child in _children(node)]
    return out


def nest(behaviours: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Nest a flat, pre-order list of behaviours (``id``, ``parent_id``, ``name``,
    ``type``, ``status``, ``message``) into node dicts.

    Returns:
        The root (the entry whose ``parent_id`` is empty), or ``None`` for an empty list.

    Raises:
        ValueError: an entry names a parent that was not listed before it.
    """
    nodes: dict[str, dict[str, Any]] = {}
    root: dict[str, Any] | None = None
    for entry in behaviours:
        node = {
            "name": entry.get("name", ""),
            "type": entry.get("type", ""),
            "status": entry.get("status", "INVALID"),
            "message": entry.get("message", ""),
            "children": [],
        }
        nodes[str(entry["id"])] = node
        parent = str(entry.get("parent_id", ""))
        if not parent:
            root = root or node
            continue
        if parent not in nodes:
            raise ValueError(f"behaviour {entry.get('name', '')!r} names parent {parent!r} before listing it")
        nodes[parent]["children"].append(node)
    return root


@dataclass(frozen=True)
class _Unit:
    number: int
    label: str
    node: NodeLike
    boundary: NodeLike | None


def _split(root: NodeLike) -> tuple[list[_Unit], NodeLike | None]:
    units: list[_Unit] = []
    boundary: NodeLike | None = None
    end: NodeLike | None = None
    for child in _children(root):
        name = _name(child)
        match = _UNIT_NAME.match(name)
        if match:
            units.append(_Unit(int(match.group(1)), match.group(2), child, boundary))
            boundary = None
        elif _BOUNDARY_NAME.match(name):
            boundary = child
        else:
            end = child
    return units, end


def current_unit(units: Sequence[_Unit]) -> int:
    """1-based number of the unit the goal is at (0 when nothing has started).

    The running or failed unit; else the unit whose boundary is running (paused or
    waiting before it); else the last unit that has a status.
    """
    for unit in units:
        if _status(unit.node) in ("RUNNING", "FAILURE"):
            return unit.number
    for unit in units:
        if unit.boundary is not None and _status(unit.boundary) in ("RUNNING", "FAILURE"):
            return unit.number
    reached = [unit.number for unit in units if _status(unit.node) != "INVALID"]
    return reached[-1] if reached else 0


def _row(
    unit: _Unit,
    notes: Mapping[int, UnitNotes],
    *,
    deep: bool,
    current: int,
    steps: Mapping[int, Sequence[Mapping[str, Any]]],
) -> dict[str, Any]:
    status = _status(unit.node)
    note = notes.get(unit.number, UnitNotes())
    row: dict[str, Any] = {
        "kind": "unit",
        "unit": unit.number,
        "name": _name(unit.node),
        "label": unit.label,
        "status": status,
        "current": unit.number == current,
        "open": unit.number == current or status in ("RUNNING", "FAILURE"),
        "boundary": describe(unit.boundary, deep=False) if unit.boundary is not None else None,
        **note.as_json(),
    }
    if deep:
        row["children"] = [describe(child, deep=True) for child in _children(unit.node)]
        if unit.number in steps:
            row["steps"] = [dict(step) for step in steps[unit.number]]
    return row


def _brief(unit: _Unit, notes: Mapping[int, UnitNotes]) -> dict[str, Any]:
    note = notes.get(unit.number, UnitNotes())
    return {
        "unit": unit.number,
        "label": unit.label,
        "status": _status(unit.node),
        "cache": note.cache,
        "seconds": round(sum(note.seconds.values()), 3),
    }


def fold_tree(
    root: NodeLike,
    *,
    notes: Mapping[int, UnitNotes],
    keep_done: int = 3,
    lookahead: int = 2,
    max_flat: int = 40,
    steps: Mapping[int, Sequence[Mapping[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The picture of the tree under ``root`` for a viewer.

    Args:
        root: the compiled tree's root (live or a node dict).
        notes: per-unit annotations from the event stream, by 1-based unit number.
        keep_done: finished units shown in full before the current one.
        lookahead: pending units shown in full after the current one.
        max_flat: up to this many units, nothing is folded.
        steps: per-unit step detail (:func:`unit_steps`), by 1-based unit number; a unit
            shown in full carries its list as ``steps``.

    Returns:
        ``{"root": {...}, "current_unit": n, "total_units": n, "counts": {status: n},
        "entries": [...]}`` where an entry is a unit row (``kind: "unit"``, with
        ``children`` when shown in full, ``open`` when it should be expanded), a fold
        (``kind: "fold"``, ``state: "done" | "pending" | "mixed"``, ``first``/``last``
        unit numbers and one brief line per unit) or the final boundary
        (``kind: "end"``).
    """
    units, end = _split(root)
    current = current_unit(units)
    anchor = current or 1
    counts: dict[str, int] = dict.fromkeys(STATUSES, 0)
    for unit in units:
        counts[_status(unit.node)] = counts.get(_status(unit.node), 0) + 1
    flat = len(units) <= max_flat
    entries: list[dict[str, Any]] = []
    fold: list[_Unit] = []

    def flush() -> None:
        if not fold:
            return
        states = {_status(u.node) for u in fold}
        state = "done" if states == {"SUCCESS"} else "pending" if states == {"INVALID"} else "mixed"
        entries.append(
            {
                "kind": "fold",
                "state": state,
                "first": fold[0].number,
                "last": fold[-1].number,
                "units": [_brief(u, notes) for u in fold],
            }
        )
        fold.clear()

    for unit in units:
        in_window = anchor - keep_done <= unit.number <= anchor + lookahead
        active = _status(unit.node) in ("RUNNING", "FAILURE")
        if flat or in_window or active:
            flush()
            entries.append(_row(unit, notes, deep=True, current=current, steps=steps or {}))
        else:
            if fold and (_status(fold[-1].node) == "SUCCESS") != (_status(unit.node) == "SUCCESS"):
                flush()
            fold.append(unit)
    flush()
    if end is not None:
        entries.append({"kind": "end", **describe(end, deep=False)})
    return {
        "root": describe(root, deep=False),
        "current_unit": current,
        "total_units": len(units),
        "counts": counts,
        "entries": entries,
    }


# -- step detail ---------------------------------------------------------------------------------
#
# What a unit's steps do, resolved: pose names with their joints, directions and distances,
# cartesian targets, planning types and the tool state each step leaves. Pure functions of
# the validated script (no robot, no py_trees), so the live view, the history page and
# ``render`` show the same text.


def _round(values: Iterable[float], digits: int) -> list[float]:
    return [round(float(v), digits) for v in values]


def _joints(radians: Sequence[float]) -> dict[str, list[float]]:
    """``{"rad": [...], "deg": [...]}`` of a six-joint position (rad in, both out)."""
    return {"rad": _round(radians, 5), "deg": _round((math.degrees(a) for a in radians), 2)}


def step_detail(step: Step, *, gripper: str) -> dict[str, Any]:
    """The resolved content of one expanded step, JSON-able.

    Args:
        step: a step of a validated script (:mod:`erobs_bt.script.model`).
        gripper: the tool attached when the step starts (resolves an ``end_effector``
            without a ``gripper``).

    Returns:
        ``{"step": 1-based index, "path": "tasks[3]", "task_type", "summary": one line for
        people (:func:`step_text`), ...}`` plus, by type: ``moveto`` — ``target`` (pose or named state),
        ``joints`` (``{"rad", "deg"}`` of a resolved pose), ``direction``,
        ``direction_vector`` (unit vector in the flange frame), ``distance_m``,
        ``cartesian_target`` (``[x, y, z]`` m or ``[x, y, z, roll, pitch, yaw]`` m/rad in
        ``frame_id``), ``planning_type``, ``constraints`` (counts); ``end_effector`` —
        ``action``, ``gripper``; ``tool_exchange`` — ``operation``, ``gripper``,
        ``dock_number``, ``approach_pose`` (+ ``approach_joints``); ``pipettor`` —
        ``operation``, ``volume_pct``, ``led_color``; vision steps — ``kind`` and their
        named poses.
    """
    out: dict[str, Any] = {"step": step.index + 1, "path": step.path, "task_type": step.script_type}
    if isinstance(step, MoveTo):
        out["planning_type"] = step.planning_type
        if step.target is not None:
            out["target"] = step.target
            if step.target_joints is not None:
                out["joints"] = _joints(step.target_joints)
            else:
                out["named_state"] = True
        elif step.direction_vector is not None and step.distance is not None:
            out["direction"] = step.direction
            out["direction_vector"] = _round(step.direction_vector, 4)
            out["distance_m"] = round(float(step.distance), 4)
        elif step.cartesian_target is not None:
            out["cartesian_target"] = _round(step.cartesian_target, 4)
            out["frame_id"] = step.frame_id
        if step.constraints is not None:
            out["constraints"] = {
                "joint": len(step.constraints.joint),
                "orientation": len(step.constraints.orientation),
            }
    elif isinstance(step, EndEffector):
        out["action"] = step.action
        out["gripper"] = step.gripper or gripper
    elif isinstance(step, ToolExchange):
        out.update(operation=step.operation, gripper=step.gripper, dock_number=step.dock_number)
        if step.approach_pose is not None:
            out["approach_pose"] = step.approach_pose
        if step.approach_joints is not None:
            out["approach_joints"] = _joints(step.approach_joints)
    elif isinstance(step, Pipettor):
        out.update(operation=step.operation, volume_pct=step.volume_pct)
        if step.led_color is not None:
            out["led_color"] = list(step.led_color)
    elif isinstance(step, Vision):
        out["kind"] = step.kind
        for name in ("detector", "tag_id", "target_pose", "approach_pose", "retreat_pose"):
            value = getattr(step, name)
            if value is not None:
                out[name] = value
        if step.scan_poses:
            out["scan_poses"] = list(step.scan_poses)
    out["summary"] = step_text(step, gripper=gripper)
    return out


def tool_after(step: Step, tool: Mapping[str, str]) -> dict[str, str]:
    """The tool state ``{"gripper", "state"}`` expected after ``step`` (from the script alone).

    A ``tool_exchange`` ``dock`` leaves ``none`` attached, any other operation attaches its
    gripper (state ``""``: not commanded yet); an ``end_effector`` step sets the state of
    its gripper (the attached one when it names none).
    """
    if isinstance(step, ToolExchange):
        return {"gripper": "none" if step.operation == "dock" else step.gripper, "state": ""}
    if isinstance(step, EndEffector) and (step.gripper is None or step.gripper == tool["gripper"]):
        return {"gripper": tool["gripper"], "state": step.action}
    return dict(tool)


def unit_steps(script: Script, units: Sequence[Unit]) -> dict[int, list[dict[str, Any]]]:
    """Every unit's steps with their detail (:func:`step_detail`) and ``tool`` (the tool
    state after the step, :func:`tool_after`), by 1-based unit number."""
    tool = {"gripper": script.start_gripper, "state": ""}
    out: dict[int, list[dict[str, Any]]] = {}
    for unit in units:
        rows = []
        for step in unit.steps:
            detail = step_detail(step, gripper=tool["gripper"])
            tool = tool_after(step, tool)
            detail["tool"] = dict(tool)
            rows.append(detail)
        out[unit.index + 1] = rows
    return out


# -- planned trajectories and progress inside a unit ------------------------------------------------

#: Shortest time between two points of a trajectory sent to a viewer [s]: samples in
#: between are dropped (every segment's first and last point is kept). The planner samples
#: at about 16 ms (erobs_bt/planning/timing.py); 50 ms is smooth at 20 frames/s.
VIEW_SAMPLE_PERIOD = 0.05


def trajectory_json(
    solution: Solution, *, unit: int, sample_period: float = VIEW_SAMPLE_PERIOD
) -> dict[str, Any]:
    """The planned motion of one unit as the viewers' JSON (the shape is documented in
    :mod:`erobs_bt.viz.web`, "Trajectories").

    Arm segments are laid end to end on one unit-relative time axis (the point where one
    ends and the next begins is listed once, so times strictly increase); a tool segment
    takes no time (it sits between the arm segments around it).

    Args:
        solution: the unit's solution (planned or from the cache).
        unit: its 1-based unit number.
        sample_period: [s] shortest time between two points kept (> 0).
    """
    names: list[str] = []
    times: list[float] = []
    positions: list[list[float]] = []
    segments: list[dict[str, Any]] = []
    offset = 0.0
    for segment in solution.segments:
        if isinstance(segment, ToolSegment):
            segments.append(
                {
                    "step": segment.step_index + 1,
                    "kind": "tool",
                    "start": round(offset, 4),
                    "end": round(offset, 4),
                    "gripper": segment.gripper,
                    "command": segment.command,
                }
            )
            continue
        names = names or list(segment.joint_names)
        # A segment starts where the one before ended: that point is shared, not repeated
        # (times stay strictly increasing).
        joined = bool(times) and times[-1] == round(offset, 4)
        first = len(times) - 1 if joined else len(times)
        last_kept = -math.inf
        for i, point in enumerate(segment.points):
            keep = i in (0, len(segment.points) - 1) or point.time_from_start - last_kept >= sample_period
            if not keep or (i == 0 and joined):
                last_kept = point.time_from_start if i == 0 else last_kept
                continue
            last_kept = point.time_from_start
            times.append(round(offset + point.time_from_start, 4))
            positions.append(_round(point.positions, 5))
        segments.append(
            {
                "step": segment.step_index + 1,
                "kind": "arm",
                "start": round(offset, 4),
                "end": round(offset + segment.duration, 4),
                "first_point": first,
                "last_point": len(times) - 1,
            }
        )
        offset += segment.duration
    return {
        "unit": unit,
        "joint_names": names,
        "time_from_start": times,
        "positions": positions,
        "segments": segments,
        "duration": round(offset, 4),
        "start_positions": _round(solution.start_positions, 5) if solution.start_positions else None,
    }


@dataclass(frozen=True)
class MotionTimeline:
    """A unit's solution laid out for locating the arm on it (:func:`locate`).

    Attributes:
        steps: 1-based step number of each segment, in order.
        kinds: ``"arm"`` or ``"tool"`` per segment.
        starts, ends: unit-relative times [s] per segment.
        times: every arm sample's unit-relative time [s], (N,).
        positions: the samples [rad], (N, 6).
        duration: total arm-motion time [s].
        unit_steps: the 1-based step numbers of the whole unit (a step without a segment,
            e.g. a gripper command on a tool without a gripper, still counts).
    """

    steps: tuple[int, ...]
    kinds: tuple[str, ...]
    starts: tuple[float, ...]
    ends: tuple[float, ...]
    times: Any
    positions: Any
    duration: float
    unit_steps: tuple[int, ...] = ()

    @classmethod
    def of(cls, solution: Solution, *, unit_steps: Sequence[int] = ()) -> MotionTimeline:
        """The timeline of ``solution`` (every sample kept); ``unit_steps`` as the attribute
        (default: the steps the segments implement)."""
        import numpy as np

        steps, kinds, starts, ends = [], [], [], []
        times: list[float] = []
        positions: list[tuple[float, ...]] = []
        offset = 0.0
        for segment in solution.segments:
            steps.append(segment.step_index + 1)
            starts.append(offset)
            if isinstance(segment, ArmSegment):
                kinds.append("arm")
                for point in segment.points:
                    times.append(offset + point.time_from_start)
                    positions.append(point.positions)
                offset += segment.duration
            else:
                kinds.append("tool")
            ends.append(offset)
        return cls(
            tuple(steps),
            tuple(kinds),
            tuple(starts),
            tuple(ends),
            np.asarray(times, dtype=float),
            np.asarray(positions, dtype=float).reshape(-1, 6),
            offset,
            tuple(unit_steps) or tuple(dict.fromkeys(steps)),
        )


#: [rad] largest distance (Euclidean, six joints) of the live arm state from the planned
#: path at which it counts as being on it (the controller follows the samples exactly; a
#: robot's tracking error is far smaller than this).
ON_PATH_TOLERANCE = 0.02


def locate(
    timeline: MotionTimeline,
    positions: Sequence[float] | None,
    *,
    elapsed: float,
    previous: float = 0.0,
    tolerance: float = ON_PATH_TOLERANCE,
) -> dict[str, Any]:
    """Where the executing unit is on its planned motion.

    The arm state is projected on the planned path (piecewise linear between samples);
    the earliest on-path point at or after ``previous`` is taken, so progress never goes
    back and a path that passes the same place twice is read in order. With no arm state,
    or none on the path, the planned time is the wall time since the execution started
    (``elapsed``, capped at the duration).

    Args:
        timeline: the unit's :class:`MotionTimeline`.
        positions: the live arm state [rad], or ``None``.
        elapsed: wall time since the execution started [s].
        previous: the planned time located last [s] (0 at the start).
        tolerance: see :data:`ON_PATH_TOLERANCE` [rad].

    Returns:
        ``{"tau": planned time reached [s], "duration": [s], "fraction": 0..1,
        "segment": 0-based segment index, "step": 1-based script step, "step_of_unit":
        1-based, "steps": segments in the unit, "kind": "arm" | "tool", "eta": remaining
        wall time [s] (remaining planned time scaled by the rate observed so far),
        "source": "joint_states" | "clock"}``.
    """
    import numpy as np

    tau: float | None = None
    if positions is not None and len(timeline.times) >= 1:
        q = np.asarray(positions, dtype=float)
        p = timeline.positions
        t = timeline.times
        if len(t) == 1:
            if float(np.linalg.norm(q - p[0])) <= tolerance:
                tau = float(t[0])
        else:
            a, b = p[:-1], p[1:]
            d = b - a
            length2 = np.einsum("ij,ij->i", d, d)
            s = np.where(
                length2 > 0, np.einsum("ij,ij->i", q - a, d) / np.where(length2 > 0, length2, 1), 0.0
            )
            s = np.clip(s, 0.0, 1.0)
            distance = np.linalg.norm(a + s[:, None] * d - q, axis=1)
            at = t[:-1] + s * (t[1:] - t[:-1])
            near = (distance <= tolerance) & (at >= previous - 1e-6)
            if near.any():
                tau = float(at[near].min())
    source = "joint_states"
    if tau is None:
        source = "clock"
        tau = min(max(elapsed, 0.0), timeline.duration)
    tau = max(tau, previous)
    segment = 0
    for i, end in enumerate(timeline.ends):
        segment = i
        if end > tau + 1e-6 or (
            timeline.kinds[i] == "tool" and end >= tau - 1e-6 and tau < timeline.duration
        ):
            break
    duration = timeline.duration
    remaining = max(duration - tau, 0.0)
    rate = elapsed / tau if tau > 0.2 and elapsed > 0 else 1.0
    step = timeline.steps[segment] if timeline.steps else 0
    order = timeline.unit_steps or tuple(dict.fromkeys(timeline.steps))
    return {
        "tau": round(tau, 3),
        "duration": round(duration, 3),
        "fraction": round(tau / duration, 4) if duration > 0 else 1.0,
        "segment": segment,
        "step": step,
        "step_of_unit": order.index(step) + 1 if step in order else 0,
        "steps": len(order),
        "kind": timeline.kinds[segment] if timeline.kinds else "",
        "eta": round(remaining * rate, 2),
        "source": source,
    }


# -- static pictures (``erobs-bt render``): runs of like units, step content -------------


@dataclass(frozen=True)
class Run:
    """Consecutive units that repeat one pattern (see :func:`fold_runs`).

    Attributes:
        first: 0-based index of the run's first unit.
        period: units in one repetition of the pattern (1 for ``pause, pause, pause``).
        repeats: repetitions; ``period * repeats`` units in all. ``repeats == 1`` is a
            unit that repeats nothing around it.
    """

    first: int
    period: int
    repeats: int

    @property
    def count(self) -> int:
        """Units covered."""
        return self.period * self.repeats


def fold_runs(keys: Sequence[str], *, max_period: int = 4, min_units: int = 4) -> list[Run]:
    """Split a unit list into runs of like units, left to right.

    Two units are alike when their keys are equal (the unit label: ``batch[2]: moveto,
    end_effector``, ``pipettor``). At each position the pattern of 1 to ``max_period``
    units that repeats over the most units wins (the shorter pattern on a tie); it
    becomes a run when it covers at least ``min_units`` units and repeats at least
    twice, otherwise the unit stands alone. With batching, two batches are never
    neighbours, so a pick-and-place loop is a period-2 run (batch, gripper or pipettor
    step) rather than a period-1 one.

    Args:
        keys: one key per unit, in order.
        max_period: longest pattern looked for (>= 1).
        min_units: fewest units a run covers (>= 2).

    Returns:
        Runs that cover ``keys`` exactly once, in order. Linear in ``len(keys)`` times
        ``max_period`` for scripts that repeat (each unit is compared about
        ``max_period`` times).
    """
    runs: list[Run] = []
    index = 0
    total = len(keys)
    while index < total:
        best_period, best_repeats = 1, 1
        for period in range(1, max_period + 1):
            pattern = keys[index : index + period]
            repeats = 1
            while list(keys[index + repeats * period : index + (repeats + 1) * period]) == list(pattern):
                repeats += 1
            if repeats >= 2 and period * repeats > best_period * best_repeats:
                best_period, best_repeats = period, repeats
        if best_repeats >= 2 and best_period * best_repeats >= min_units:
            runs.append(Run(index, best_period, best_repeats))
            index += best_period * best_repeats
        else:
            runs.append(Run(index, 1, 1))
            index += 1
    return runs


def _numbers(values: Sequence[float], digits: int) -> str:
    return ", ".join(f"{value:.{digits}f}" for value in values)


def step_text(step: Step, *, joints: bool = True, gripper: str | None = None) -> str:
    """One line of a step's content, for people: what it moves to or does. The one step
    formatter: the live view's and the history page's step summaries and ``render``'s
    labels all come from here.

    Examples: ``moveto tray_1 (auto) [0.0, -90.0, 90.0, -90.0, -90.0, 0.0]°``,
    ``moveto moveit_home (auto), named state``, ``moveto -z 0.020 m (cartesian)``,
    ``moveto xyz (0.400, 0.100, 0.300) m in base_link (pilz)``, ``end_effector vacuum_on
    (epick)``, ``pipettor SUCK 50 %``, ``tool_exchange load hande, dock 2 via above_dock_2``,
    ``pause``; other steps: their task type and script fields.

    Args:
        step: an expanded :class:`~erobs_bt.script.model.Step`.
        joints: add a pose target's resolved joints [deg] (one decimal).
        gripper: the tool attached when the step starts; names the gripper of an
            ``end_effector`` step that names none (``None``: only a gripper the step names).

    Returns:
        The line; angles are shown in degrees, distances in metres (3 decimals), a
        pipettor's ``volume_pct`` (a fraction of the stroke) in per cent. A direction is in
        the flange frame, a cartesian target in its ``frame_id``.
    """
    kind = step.script_type
    if isinstance(step, MoveTo):
        how = f" ({step.planning_type})"
        if step.target is not None:
            text = f"{kind} {step.target}{how}"
            if step.target_joints is None:
                text += ", named state"
            elif joints:
                text += f" [{_numbers([math.degrees(a) for a in step.target_joints], 1)}]°"
            return text
        if step.distance is not None:
            direction = step.direction or f"({_numbers(step.direction_vector or (), 3)})"
            return f"{kind} {direction} {step.distance:.3f} m{how}"
        if step.cartesian_target is not None:
            xyz = _numbers(step.cartesian_target[:3], 3)
            rpy = step.cartesian_target[3:]
            angles = f" rpy ({_numbers([math.degrees(a) for a in rpy], 1)})°" if rpy else ""
            return f"{kind} xyz ({xyz}) m{angles} in {step.frame_id}{how}"
        return f"{kind}{how}"
    if isinstance(step, EndEffector):
        named = step.gripper or gripper
        return f"{kind} {step.action}" + (f" ({named})" if named else "")
    if isinstance(step, Pipettor):
        if step.volume_pct is not None:
            return f"{kind} {step.operation} {step.volume_pct * 100:g} %"
        if step.led_color is not None:
            return f"{kind} {step.operation} ({_numbers(step.led_color, 2)})"
        return f"{kind} {step.operation}"
    if isinstance(step, ToolExchange):
        via = f" via {step.approach_pose}" if step.approach_pose is not None else ""
        return f"{kind} {step.operation} {step.gripper}, dock {step.dock_number}{via}"
    fields = [
        f"{key}={value}" for key, value in step.spec.items() if key != "task_type" and value is not None
    ]
    return " ".join([kind, *fields])

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

#: A live behaviour or a nested node dict (see the module docstring).
NodeLike: TypeAlias = py_trees.behaviour.Behaviour | Mapping[str, Any]

_UNIT_NAME = re.compile(r"^unit (\d+): (.*)$", re.DOTALL)
_BOUNDARY_NAME = re.compile(r"^before unit (\d+)$")

#: Node statuses, as py_trees spells them.
STATUSES = ("INVALID", "RUNNING", "SUCCESS", "FAILURE")


@dataclass
class UnitNotes:
    """What the event stream adds to a unit: cache decision, phase times, error.

    Attributes:
        cache: ``HIT``, ``MISS``, ``INELIGIBLE`` or ``""``.
        seconds: phase name (``plan``, ``execute``, ``replay``, ``run``) → duration [s].
        error: the error detail of a failed phase, ``""`` when none.
    """

    cache: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    error: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"cache": self.cache, "seconds": dict(self.seconds), "error": self.error}


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


def _row(unit: _Unit, notes: Mapping[int, UnitNotes], *, deep: bool, current: int) -> dict[str, Any]:
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
) -> dict[str, Any]:
    """The picture of the tree under ``root`` for a viewer.

    Args:
        root: the compiled tree's root (live or a node dict).
        notes: per-unit annotations from the event stream, by 1-based unit number.
        keep_done: finished units shown in full before the current one.
        lookahead: pending units shown in full after the current one.
        max_flat: up to this many units, nothing is folded.

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
            entries.append(_row(unit, notes, deep=True, current=current))
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


def step_text(step: Any, *, joints: bool = True) -> str:
    """One line of a step's content, for people: what it moves to or does.

    Examples: ``moveto tray_1 (auto) [0.0, -90.0, 90.0, -90.0, -90.0, 0.0]°``,
    ``moveto z- 0.050 m (cartesian)``, ``moveto xyz (0.400, 0.100, 0.300) m in base_link
    (pilz)``, ``end_effector vacuum_on``, ``pipettor SUCK 50 %``, ``tool_exchange load
    hande, dock 2``, ``pause``; other steps: their task type and script fields.

    Args:
        step: an expanded :class:`~erobs_bt.script.model.Step`.
        joints: add a pose target's resolved joints [deg] (one decimal).

    Returns:
        The line; angles are shown in degrees, distances in metres (3 decimals).
    """
    from erobs_bt.script import model as script_model

    kind = step.script_type
    if isinstance(step, script_model.MoveTo):
        how = f" ({step.planning_type})"
        if step.target is not None:
            text = f"{kind} {step.target}{how}"
            if joints and step.target_joints is not None:
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
    if isinstance(step, script_model.EndEffector):
        return f"{kind} {step.action}" + (f" ({step.gripper})" if step.gripper else "")
    if isinstance(step, script_model.Pipettor):
        if step.volume_pct is not None:
            return f"{kind} {step.operation} {step.volume_pct * 100:g} %"
        if step.led_color is not None:
            return f"{kind} {step.operation} ({_numbers(step.led_color, 2)})"
        return f"{kind} {step.operation}"
    if isinstance(step, script_model.ToolExchange):
        return f"{kind} {step.operation} {step.gripper}, dock {step.dock_number}"
    fields = [
        f"{key}={value}" for key, value in step.spec.items() if key != "task_type" and value is not None
    ]
    return " ".join([kind, *fields])

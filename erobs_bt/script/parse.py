"""Validate an EROBS JSON task script and turn it into a :class:`~erobs_bt.script.model.Script`.

Everything that can be known about a script before the robot moves is checked here,
once, so that a rejected script moves nothing (docs/behaviour.md §1, "Validation"):

1. the text: size (:class:`Limits`), UTF-8, JSON syntax, no NaN/Infinity tokens and
   no numbers that overflow to infinity (Python's ``json`` accepts both), no
   duplicate keys, bounded nesting;
2. the envelope: ``start_gripper`` (a cell gripper), ``tasks`` (a non-empty list of
   objects with a known ``task_type``; the fields of each type, :data:`TASK_FIELDS`),
   optional ``poses``; the keys EROBS writes and does not read (:data:`EROBS_SCRIPT_KEYS`,
   :data:`EROBS_TASK_FIELDS`) and ``$``-keys (``$schema``) are ignored and are not part
   of the cache key; any other key is ignored too, as EROBS ignores it, with a warning and
   out of the cache key, unless it is a near miss of a known one (``planing_type``), an
   error naming it (:func:`_unknown_fields`, the one place that decides);
3. macro expansion (:mod:`erobs_bt.script.macros`), before anything else, so every
   later rule and limit sees the expanded steps;
4. every step, in order, while tracking the gripper that will be attached at that
   point (``start_gripper``, changed by ``tool_exchange``): field types and ranges,
   the ``moveto`` mode rule, gripper states, dock/load preconditions, pose names.

EROBS's own error texts are kept where users and tools match on them
(``tasks[0]: MoveTo goal must specify exactly one of target, direction/distance, or
cartesian_target``, ``Unknown gripper: foo (available: ...)``, ``tasks must be a
non-empty list``, ``tasks[3].task_type must be one of: ...``, ``Invalid JSON: ...``);
every error is a :class:`ScriptError` whose message starts with the path of the
offending value. Unlike EROBS, errors in steps after a macro keep the index the
step has in the submitted ``tasks`` (EROBS reports the expanded index), and
macro-generated steps are reported as ``tasks[6] (pickup_vial step 3)``.

Stricter than EROBS, on purpose (each would otherwise fail later, mid-script, or
silently do something else): booleans are never numbers; pose names in
``approach_pose``, ``scan_pose``, ``scan_positions`` … must resolve; dock and load
preconditions and the gripper of ``end_effector`` steps are checked against the
tracked gripper; objects with a closed schema (``constraints``, ``led_color``, a
macro's ``config``) reject unknown keys; ``pause`` rejects fields (it has no timer);
a key of a script or a task that is a near miss of a known field (:func:`near_miss`) is
an error (EROBS ignores it, so a misspelled ``planing_type`` silently planned with the
default). The fields EROBS itself writes stay in the task's ``spec``; other unknown
fields are dropped from it. A ``moveto`` with several modes is refused as EROBS's newest
parser refuses it, saying what ``jazzy_dev`` (which ran it) made of it and what to keep.

Warnings (:attr:`Script.warnings <erobs_bt.script.model.Script.warnings>`), not errors:
an unknown field that is no near miss (ignored); a pose the script uses, or the
roll/pitch/yaw of a ``cartesian_target`` or an orientation constraint, whose every angle
is within ±2π and not all zero looks like radians where degrees are expected.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

from erobs_bt.script import _values as v
from erobs_bt.script.errors import ScriptError
from erobs_bt.script.limits import DEFAULT_LIMITS, Limits
from erobs_bt.script.macros import TASK_MACROS, ExpandedTask, VisionTargets, expand_macros
from erobs_bt.script.model import (
    JOINT_NAMES,
    UR5E_REACH,
    VISION_TASK_TYPES,
    Constraints,
    EndEffector,
    JointConstraint,
    MoveTo,
    OrientationConstraint,
    Pause,
    Pipettor,
    Script,
    Step,
    ToolExchange,
    Vision,
)
from erobs_bt.script.poses import (
    PoseRegistry,
    PoseResolver,
    check_joint_angle,
    inline_poses,
    looks_like_radians,
    to_radians,
)
from erobs_bt.script.vocabulary import CellVocabulary

__all__ = [
    "DIRECTION_VECTORS",
    "EMPTY_SCRIPT",
    "EROBS_SCRIPT_KEYS",
    "EROBS_TASK_FIELDS",
    "MAX_FIELD_WARNINGS",
    "MAX_LENGTH",
    "NEAR_MISS_RATIO",
    "PIPETTOR_OPERATIONS",
    "PLANNING_TYPES",
    "SCRIPT_KEYS",
    "SUPPORTED_TASK_TYPES",
    "TASK_FIELDS",
    "TASK_TYPES",
    "VISION_PRESETS",
    "Limits",
    "dock_problem",
    "near_miss",
    "parse_script",
]

#: The longest straight move, offset or Cartesian coordinate a script may give [m]: the
#: diameter of the UR5e's workspace sphere (``2 * UR5E_REACH``); anything longer cannot be
#: reached, so it is rejected before planning (a ``distance`` of 1e308 would otherwise
#: overflow the planner's step count).
MAX_LENGTH = 2.0 * UR5E_REACH

#: The largest magnitude of a roll/pitch/yaw or other angle in a script [deg].
MAX_ANGLE = 360.0

#: The longest ``timeout`` or ``settle_time`` a step may ask for [s] (one day).
MAX_SECONDS = 86_400.0

#: Integer literals longer than this many digits are rejected while decoding (Python's
#: own limit for converting text to ``int`` is 4300 digits, and no field takes more
#: than 10).
MAX_INTEGER_DIGITS = 30

#: Task types a step can have after expansion.
SUPPORTED_TASK_TYPES: frozenset[str] = frozenset(
    {"moveto", "end_effector", "tool_exchange", "pipettor", "pause", *VISION_TASK_TYPES}
)

#: Every ``task_type`` a script may use (steps and macros), sorted as in the error text.
TASK_TYPES: tuple[str, ...] = tuple(sorted(SUPPORTED_TASK_TYPES | set(TASK_MACROS)))

#: ``moveto`` direction -> unit vector in the flange frame. ``right|y`` is -Y and
#: ``left|-y`` is +Y (docs/behaviour.md §1; EROBS's convention, kept as is).
DIRECTION_VECTORS: Mapping[str, tuple[float, float, float]] = MappingProxyType(
    {
        "forward": (1.0, 0.0, 0.0),
        "x": (1.0, 0.0, 0.0),
        "backward": (-1.0, 0.0, 0.0),
        "-x": (-1.0, 0.0, 0.0),
        "right": (0.0, -1.0, 0.0),
        "y": (0.0, -1.0, 0.0),
        "left": (0.0, 1.0, 0.0),
        "-y": (0.0, 1.0, 0.0),
        "up": (0.0, 0.0, 1.0),
        "z": (0.0, 0.0, 1.0),
        "down": (0.0, 0.0, -1.0),
        "-z": (0.0, 0.0, -1.0),
    }
)

#: ``planning_type`` as written -> canonical. ``""``, ``auto`` and ``joint`` all mean
#: EROBS's automatic chain (PTP → Pilz LIN → Cartesian path).
PLANNING_TYPES: Mapping[str, str] = MappingProxyType(
    {
        "": "auto",
        "auto": "auto",
        "joint": "auto",
        "cartesian": "cartesian",
        "pilz": "pilz",
        "pilz_ptp": "pilz_ptp",
    }
)

#: Pipettor operations (uppercase, as EROBS's pipettor action).
PIPETTOR_OPERATIONS: tuple[str, ...] = ("SUCK", "EXPEL", "EJECT_TIP", "SET_LED")

#: Tool-exchange operations.
TOOL_OPERATIONS: tuple[str, ...] = ("dock", "load")

#: Defaults each vision task type runs with, under the fields the step gives
#: (EROBS ``VISION_PRESETS``). ``target_pose`` is EROBS's ``default_target_pose``.
VISION_PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "vision_task": MappingProxyType({}),
        "vision_scan": MappingProxyType({}),
        "vision_moveto": MappingProxyType({"detector": "marker", "goal_computer": "approach_pose"}),
        "pick_sample": MappingProxyType(
            {
                "detector": "marker",
                "goal_computer": "approach_pose",
                "terminal_action": "grasp",
                "pre_open": True,
                "retreat_from_scan": True,
            }
        ),
        "place_sample": MappingProxyType(
            {
                "detector": "marker",
                "goal_computer": "approach_pose",
                "terminal_action": "release",
                "retreat_from_scan": True,
            }
        ),
        "pick_spincoater": MappingProxyType(
            {
                "detector": "spincoater_sample",
                "goal_computer": "j6_snap",
                "terminal_action": "vacuum_on",
                "scan_pose": "spincoater_scan",
                "target_pose": "spincoater_place",
                "forward_distance": 0.003,
            }
        ),
        "place_spincoater": MappingProxyType(
            {
                "detector": "spincoater_pocket",
                "goal_computer": "j6_snap",
                "terminal_action": "vacuum_off",
                "scan_pose": "spincoater_scan",
                "target_pose": "spincoater_place",
                "forward_distance": 0.003,
            }
        ),
    }
)

#: The error for an empty script (a file of nothing but white space, an empty goal).
EMPTY_SCRIPT = (
    "the script is empty: expected a JSON object with 'start_gripper' and 'tasks' "
    '(e.g. {"start_gripper": "none", "tasks": [{"task_type": "pause"}]})'
)

_EXACTLY_ONE = "MoveTo goal must specify exactly one of target, direction/distance, or cartesian_target"
_JOINT_CONSTRAINT_KEYS = ("joint_name", "position", "tolerance_above", "tolerance_below", "weight")
_ORIENTATION_CONSTRAINT_KEYS = ("link_name", "frame_id", "orientation", "tolerance", "weight")
#: EROBS defaults for constraint tolerances [deg].
_DEFAULT_JOINT_TOLERANCE = 1.0
_DEFAULT_ORIENTATION_TOLERANCE = (5.0, 5.0, 5.0)
_VISION_POSE_FIELDS = (
    "scan_pose",
    "target_pose",
    "place_pose",
    "pickup_pose",
    "approach_pose",
    "retreat_pose",
)
_VISION_STRING_FIELDS = ("detector", "detection_type", "goal_computer", "strategy")
_VISION_BOOL_FIELDS = ("use_vision", "pre_open", "detect_only", "retreat_from_scan", "release")
_VISION_FIELDS = (
    *_VISION_STRING_FIELDS,
    "terminal_action",
    *_VISION_BOOL_FIELDS,
    *_VISION_POSE_FIELDS,
    "scan_positions",
    "tag_id",
    "sample_index",
    "scans_per_position",
    "marker_offset_x",
    "marker_offset_y",
    "marker_offset_z",
    "z_offset",
    "k_offset",
    "forward_distance",
    "edge_inset_mm",
    "settle_time",
    "timeout",
    "offset_direction",
    "offset_distance",
    "gripper",
    "constraints",
)
_MACRO_FIELDS = ("row", "col", "element_index", "config")

#: The fields each ``task_type`` reads, besides ``task_type`` itself; a near miss of one is an
#: error naming it (a misspelled ``planing_type`` would otherwise be ignored and the step run
#: with its default), any other field is ignored with a warning (:func:`_unknown_fields`).
#: :func:`erobs_bt.script.schema.script_schema` lists the same fields.
TASK_FIELDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "moveto": (
            "target",
            "direction",
            "distance",
            "cartesian_target",
            "frame_id",
            "planning_type",
            "constraints",
        ),
        "end_effector": ("end_effector_action", "end_effector_type"),
        "tool_exchange": ("operation", "gripper", "dock_number", "approach_pose"),
        "pipettor": ("operation", "volume_pct", "led_color"),
        "pause": (),
        **{kind: _VISION_FIELDS for kind in sorted(VISION_TASK_TYPES)},
        "pickup_tip": _MACRO_FIELDS,
        "pickup_vial": (*_MACRO_FIELDS, "pipettor_operation", "volume_pct", "rinse_count"),
    }
)

#: Fields EROBS's own task editor (``mtc_gui``) writes that erobs_bt does not read; they are
#: accepted and ignored, as EROBS does: ``position`` of the rack macros (the element's name,
#: ``"A1"``, beside its ``row``/``col``) and ``marker_dictionary`` of the vision tasks (the
#: camera's ArUco dictionary; here the cell's markers are known).
EROBS_TASK_FIELDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        **{kind: ("marker_dictionary",) for kind in sorted(VISION_TASK_TYPES)},
        "pickup_tip": ("position",),
        "pickup_vial": ("position",),
    }
)

#: How similar (:class:`difflib.SequenceMatcher` ratio) an unknown field's name must be to a
#: field the script or task reads to be taken for its misspelling, an error, rather than a
#: field of someone else's, ignored with a warning (:func:`near_miss`). ``planing_type`` is
#: 0.96, ``distnace`` 0.88, ``volume`` for ``volume_pct`` 0.75; ``description`` for
#: ``direction`` (0.70) and ``notes`` are no near misses.
NEAR_MISS_RATIO = 0.75

#: The most unknown-field warnings a script gives; the rest are counted in one more.
MAX_FIELD_WARNINGS = 10

#: Longer keys are shown cut in paths and warnings.
_SHOWN_KEY_CHARS = 60

#: The keys of a script itself.
SCRIPT_KEYS: tuple[str, ...] = ("start_gripper", "tasks", "poses")

#: Script keys EROBS writes that erobs_bt does not read (accepted, ignored, not part of the
#: cache key): ``run_name``, the run's label (EROBS's task editor and ``capture_run``). Keys
#: starting with ``$`` (``$schema`` for an editor, ``$comment``) are accepted and ignored too.
EROBS_SCRIPT_KEYS: tuple[str, ...] = ("run_name",)


def parse_script(
    text: str | bytes,
    *,
    registry: PoseRegistry | None = None,
    limits: Limits = DEFAULT_LIMITS,
    vocabulary: CellVocabulary | None = None,
    vision_targets: VisionTargets | None = None,
) -> Script:
    """Validate, expand and resolve a JSON task script.

    Args:
        text: the script (the goal's ``full_json``), UTF-8 when bytes.
        registry: the pose registry; names not in the script's ``poses`` are looked
            up here.
        limits: size limits (script bytes, expanded steps, poses, nesting).
        vocabulary: the cell's grippers and their states, named robot states and docks
            (:class:`CellVocabulary`); ``None`` for the packaged ``config/cell.yaml``. A
            ``moveto`` target that is neither a pose nor a named state is an error.
        vision_targets: defaults for the ``pickup_tip``/``pickup_vial`` macros;
            ``None`` loads ``config/vision_targets.yaml`` when a macro is present.

    Returns:
        The script with macros expanded, poses resolved (joints in radians) and
        ``poses`` holding exactly the pose names the steps use (degrees, as given).

    Raises:
        ScriptError: anything invalid; the message starts with the path
            (``tasks[3].distance: ...``, ``""`` for the whole text).
    """
    document = _decode(text, limits)
    if not isinstance(document, dict):
        raise ScriptError("", "Task script root must be an object")
    if "start_gripper" not in document:
        raise ScriptError("", "Task script missing 'start_gripper'")
    if "tasks" not in document:
        raise ScriptError("", "Task script missing 'tasks'")

    # Unknown fields, ignored with a warning: (path, what they are unknown to).
    ignored = [
        (_shown_key(key), "the script")
        for key in _unknown_fields(
            document,
            "",
            SCRIPT_KEYS,
            owner="the script",
            also=(*EROBS_SCRIPT_KEYS, *(key for key in document if key.startswith("$"))),
            budget=limits.max_unknown_fields,
        )
    ]
    parser = _Parser(vocabulary if vocabulary is not None else CellVocabulary.default(), registry, limits)
    start_gripper = document["start_gripper"]
    if not isinstance(start_gripper, str):
        raise ScriptError("start_gripper", f"must be a string (got {v.shown(start_gripper)})", sep=" ")
    parser.check_gripper(start_gripper, "start_gripper")

    tasks = document["tasks"]
    if not isinstance(tasks, list) or not tasks:
        raise ScriptError("tasks", "must be a non-empty list", sep=" ")
    poses = inline_poses(document["poses"], limits=limits) if document.get("poses") is not None else {}
    tasks = list(tasks)
    for index, task in enumerate(tasks):
        if not isinstance(task, dict):
            raise ScriptError(f"tasks[{index}]", "must be an object", sep=" ")
        task_type = task.get("task_type")
        if not isinstance(task_type, str) or task_type not in TASK_TYPES:
            raise ScriptError(
                f"tasks[{index}].task_type",
                f"must be one of: {', '.join(TASK_TYPES)} "
                f"(got {v.shown(task_type)}{v.did_you_mean(task_type, TASK_TYPES)})",
                sep=" ",
            )
        if task_type != "pause":  # a pause's fields: the step's own message (it has no timer)
            unknown = _unknown_fields(
                task,
                f"tasks[{index}]",
                ("task_type", *TASK_FIELDS[task_type]),
                owner=task_type,
                also=EROBS_TASK_FIELDS.get(task_type, ()),
                budget=limits.max_unknown_fields - len(ignored),
            )
            if unknown:  # ignored: not in the step's spec, so neither in the key nor anywhere else
                dropped = set(unknown)
                tasks[index] = {key: value for key, value in task.items() if key not in dropped}
                ignored.extend((v.join(f"tasks[{index}]", _shown_key(key)), task_type) for key in unknown)

    expanded = expand_macros(
        tasks,
        vision_targets=vision_targets if vision_targets is not None else (lambda: _default_targets(limits)),
        limits=limits,
    )
    parser.begin(start_gripper, poses)
    steps = tuple(parser.step(entry, index) for index, entry in enumerate(expanded))
    used = parser.resolver.used
    warnings = [
        f"{parser.resolver.origin(name)}: every angle is within ±2π ({_angles(values)}); poses are in "
        "degrees and these look like radians"
        for name, values in used.items()
        if looks_like_radians(values)
    ]
    return Script(
        start_gripper=start_gripper,
        steps=steps,
        poses=MappingProxyType(used),
        task_count=len(tasks),
        warnings=(*_ignored_warnings(ignored), *warnings, *parser.warnings),
    )


def _normal_name(name: str) -> str:
    """``planningType``, ``Planning-Type``, ``planning type`` → ``planning_type``."""
    return re.sub(r"[-\s]+", "_", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)).lower()


def near_miss(name: Any, known: Sequence[str]) -> str | None:
    """The known field ``name`` misspells, or ``None`` when it is no near miss.

    A near miss is a name that, lower-cased with ``-``, spaces and camelCase read as ``_``,
    is a known one or has a :class:`difflib.SequenceMatcher` similarity of at least
    :data:`NEAR_MISS_RATIO` to one (``planing_type``, ``planningType``, ``Target``,
    ``distnace``, ``pose`` for ``poses``). A longer name cannot reach that similarity,
    whatever its text, so nothing is compared for it.
    """
    if not isinstance(name, str) or not known:
        return None
    longest = max(len(k) for k in known)
    if len(name) > 2 * longest:
        return None
    normal = _normal_name(name)
    if normal in known:
        return normal
    # The ratio is at most 2·min/(a+b) of the two lengths, so only names whose lengths are
    # within r/(2 - r) of each other can reach r: the others are not compared.
    near = NEAR_MISS_RATIO / (2.0 - NEAR_MISS_RATIO)
    candidates = [k for k in known if min(len(k), len(normal)) >= near * max(len(k), len(normal))]
    found = difflib.get_close_matches(normal, candidates, n=1, cutoff=NEAR_MISS_RATIO)
    return found[0] if found else None


def _unknown_fields(
    value: Mapping[str, Any],
    path: str,
    known: Sequence[str],
    *,
    owner: str,
    also: Sequence[str] = (),
    budget: int,
) -> list[str]:
    """The fields of the script (``path`` ``""``) or of a task that erobs_bt does not read:
    the one place that decides what an unknown field is.

    EROBS ignores every key it does not read, at the top and inside tasks; so does erobs_bt,
    with a warning, unless the key is a near miss of one ``owner`` reads (:func:`near_miss`):
    a misspelled ``planing_type`` would otherwise run the step with its default, so it is an
    error. ``also`` are the keys EROBS itself writes and does not read (``run_name``,
    ``$schema``, ``position``, ``marker_dictionary``): ignored without a word.

    Returns:
        The unknown keys, in order (the caller drops them and warns of them,
        :func:`_ignored_warnings`).

    Raises:
        ScriptError: at ``<path>.<key>`` for the first near miss: ``unknown field of moveto;
            did you mean 'planning_type'? (allowed: ...)``; or for the unknown key past
            ``budget`` (what is left of ``Limits.max_unknown_fields``).
    """
    unknown: list[str] = []
    for key in value:
        if key in known or key in also:
            continue
        if len(unknown) >= budget:
            raise ScriptError(
                v.join(path, _shown_key(key)),
                "the script has more unknown fields than Limits.max_unknown_fields allows; erobs_bt "
                "ignores a few, as EROBS does, not this many",
            )
        match = near_miss(key, known)
        if match is not None:
            raise ScriptError(
                v.join(path, _shown_key(key)),
                f"unknown field of {owner}; did you mean {match!r}? (allowed: {', '.join(sorted(known))})",
            )
        unknown.append(key)
    return unknown


def _shown_key(key: str) -> str:
    """A key for a path or a warning: as written when short and printable, else escaped and
    cut (``'xxxxxxxx…' (100000 characters)``), so hostile text stays one short line."""
    if len(key) <= _SHOWN_KEY_CHARS and key.isprintable() and key.strip() == key and key:
        return key
    text = f"'{_ascii_safe(key[:_SHOWN_KEY_CHARS])}'"
    return f"{text}… ({len(key)} characters)" if len(key) > _SHOWN_KEY_CHARS else text


def _ignored_warnings(ignored: Sequence[tuple[str, str]]) -> list[str]:
    """One warning per ignored unknown field (``(path, owner)``), at most
    :data:`MAX_FIELD_WARNINGS`, then one that counts the rest."""
    warnings = [
        f"{where}: unknown field of {owner}, ignored (EROBS ignores it too; it is not part of the "
        "plan-cache key)"
        for where, owner in ignored[:MAX_FIELD_WARNINGS]
    ]
    if len(ignored) > MAX_FIELD_WARNINGS:
        rest = len(ignored) - MAX_FIELD_WARNINGS
        warnings.append(f"{ignored[MAX_FIELD_WARNINGS][0]}: and {rest} more unknown fields, ignored")
    return warnings


def _angles(values: Sequence[float]) -> str:
    """``[0.5, -1.2, …]`` as written, for a warning."""
    return "[" + ", ".join(f"{a:g}" for a in values) + "]"


def dock_problem(steps: Sequence[Step], docks: Mapping[int, str | None]) -> str:
    """Why the script's tool exchanges cannot run with the docks as they are, or ``""``.

    The parser checks the exchanges against each other (a dock the script filled is not
    docked into again); what the docks hold when the goal starts is known only then
    (earlier goals and the operator change it), so the orchestrator calls this after the
    start gripper is mounted and before anything moves, with the backend's
    :meth:`~erobs_bt.backends.base.MotionBackend.dock_contents`.

    Args:
        steps: the script's expanded steps, in order.
        docks: dock number → the tool it holds now (``None``: empty).

    Returns:
        ``tasks[5].dock_number: dock 3 already holds the pipettor when the goal starts
        (empty docks: 4)``, or ``""`` when every dock and load can be done.
    """
    held = dict(docks)
    for step in steps:
        if not isinstance(step, ToolExchange):
            continue
        number, stored = step.dock_number, held.get(step.dock_number)
        where = f"{step.path}.dock_number"
        if step.operation == "dock":
            if stored is not None:
                empty = ", ".join(str(n) for n, tool in sorted(held.items()) if tool is None) or "none"
                return (
                    f"{where}: dock {number} already holds the {stored} when the goal starts, so the "
                    f"{step.gripper} cannot be docked there (empty docks: {empty})"
                )
            held[number] = step.gripper
        else:
            if stored != step.gripper:
                found = f"the {stored}" if stored is not None else "nothing"
                return f"{where}: dock {number} holds {found} when the goal starts, not the {step.gripper}"
            held[number] = None
    return ""


def _default_targets(limits: Limits) -> VisionTargets:
    from erobs_bt.script.macros import DEFAULT_VISION_TARGETS_PATH

    try:
        return VisionTargets.default(limits=limits)
    except OSError as exc:
        raise ScriptError(
            str(DEFAULT_VISION_TARGETS_PATH), f"cannot read the default vision targets: {exc}"
        ) from None


# -- the text ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _NonFinite:
    """Stands in for a ``NaN``/``Infinity`` token or a number that overflows to ±inf."""

    token: str


@dataclass(frozen=True)
class _HugeInteger:
    """Stands in for an integer literal of more than :data:`MAX_INTEGER_DIGITS` digits."""

    digits: int


@dataclass(frozen=True)
class _DuplicateKeys:
    """Stands in for an object that repeats a key."""

    keys: tuple[str, ...]


def _parse_constant(token: str) -> _NonFinite:
    return _NonFinite(token)


def _parse_float(token: str) -> float | _NonFinite:
    value = float(token)
    return value if math.isfinite(value) else _NonFinite(token)


def _parse_int(token: str) -> int | _HugeInteger:
    digits = len(token) - token.startswith("-")
    return _HugeInteger(digits) if digits > MAX_INTEGER_DIGITS else int(token)


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any] | _DuplicateKeys:
    result = dict(pairs)
    if len(result) == len(pairs):
        return result
    seen: set[str] = set()
    repeated: dict[str, None] = {}
    for key, _ in pairs:
        if key in seen:
            repeated[key] = None
        seen.add(key)
    return _DuplicateKeys(tuple(repeated))


def _decode(text: str | bytes, limits: Limits) -> Any:
    """Decode and JSON-parse the script text, enforcing the size, number, string and depth rules.

    Bytes must be UTF-8; a leading byte-order mark is ignored, in bytes and in text alike.
    """
    if isinstance(text, bytes | bytearray | memoryview):
        raw = bytes(text)
        _check_size(len(raw), limits)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ScriptError(
                "",
                f"Invalid JSON: the script is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                f"{exc.start}: {exc.reason})",
            ) from None
    elif isinstance(text, str):
        if len(text) > limits.max_script_bytes:
            _check_size(len(text), limits)
        _check_size(len(text.encode("utf-8", "surrogatepass")), limits)
    else:
        raise ScriptError("", f"the script must be text or bytes (got {type(text).__name__})")
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise ScriptError("", EMPTY_SCRIPT)
    try:
        document = json.loads(
            text,
            parse_constant=_parse_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
            object_pairs_hook=_object_pairs,
        )
    except RecursionError:
        raise ScriptError(
            _deep_path(text, limits.max_depth),
            f"nesting is deeper than {limits.max_depth} levels (Limits.max_depth)",
        ) from None
    except ValueError as exc:
        raise ScriptError("", f"Invalid JSON: {_ascii_safe(str(exc))}") from None
    _check_tree(document, limits)
    return document


def _ascii_safe(text: str) -> str:
    """``text`` with lone surrogates and control characters escaped (valid UTF-8, one line)."""
    return "".join(
        ch if ch.isprintable() and not 0xD800 <= ord(ch) <= 0xDFFF else ascii(ch)[1:-1] for ch in text
    )


def _check_size(size: int, limits: Limits) -> None:
    if size > limits.max_script_bytes:
        raise ScriptError(
            "",
            f"the script is {size} bytes; the limit is {limits.max_script_bytes} bytes "
            "(Limits.max_script_bytes)",
        )


#: Strings and structural characters of JSON text, for :func:`_deep_path`.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]')

#: A character no script string may hold: NUL, or a UTF-16 surrogate without its pair
#: (``"\ud800"`` in JSON), which is not a character and cannot be sent as UTF-8.
_BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")


def _deep_path(text: str, max_depth: int) -> str:
    """The path of the first array or object nested deeper than ``max_depth`` levels.

    Used when the text is too deep for Python's JSON decoder (a ``RecursionError``), so the
    message can still say where the nesting went wrong; the scan follows the JSON tokens
    and keeps the key or index of each open level.
    """
    # One entry per open level: [is an array, current index or key, expecting a key].
    levels: list[list[Any]] = []
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            if len(levels) >= max_depth:
                break
            levels.append([token == "[", 0 if token == "[" else "", token == "{"])
        elif token in ("]", "}"):
            if levels:
                levels.pop()
        elif token == ",":
            if levels:
                if levels[-1][0]:
                    levels[-1][1] += 1
                else:
                    levels[-1][2] = True
        elif token == ":":
            if levels:
                levels[-1][2] = False
        elif levels and not levels[-1][0] and levels[-1][2]:
            try:
                levels[-1][1] = _ascii_safe(json.loads(token))
            except ValueError:
                levels[-1][1] = _ascii_safe(token[1:-1])
    path = ""
    for _is_array, key, _expecting in levels:
        path = v.join(path, key)
    return path


def _check_tree(document: Any, limits: Limits) -> None:
    """Reject non-finite numbers, huge integers, duplicate keys, NUL and lone surrogates, and
    deep nesting, naming the path."""
    stack: list[tuple[Any, str, int]] = [(document, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            bad = _BAD_CHARACTER.search(value)
            if bad:
                raise ScriptError(path, _bad_character(bad.group(), bad.start()))
        elif isinstance(value, _NonFinite):
            raise ScriptError(path, f"{value.token} is not a finite number (NaN and infinities are rejected)")
        elif isinstance(value, _HugeInteger):
            raise ScriptError(
                path, f"an integer of {value.digits} digits is out of range (at most {MAX_INTEGER_DIGITS})"
            )
        elif isinstance(value, _DuplicateKeys):
            raise ScriptError(path, f"duplicate key {', '.join(_ascii_safe(repr(k)) for k in value.keys)}")
        elif isinstance(value, dict | list):
            if depth >= limits.max_depth:
                raise ScriptError(
                    path, f"nesting is deeper than {limits.max_depth} levels (Limits.max_depth)"
                )
            if isinstance(value, dict):
                for key in value:
                    bad = _BAD_CHARACTER.search(key)
                    if bad:
                        raise ScriptError(
                            v.join(path, _ascii_safe(key)), "key: " + _bad_character(bad.group(), bad.start())
                        )
                stack.extend((item, v.join(path, key), depth + 1) for key, item in value.items())
            else:
                stack.extend((item, v.join(path, index), depth + 1) for index, item in enumerate(value))


def _bad_character(character: str, position: int) -> str:
    if character == "\x00":
        return f"the string holds a NUL character (at character {position}); NUL is not allowed"
    return (
        f"the string holds a lone UTF-16 surrogate \\u{ord(character):04x} (at character {position}); "
        "it is not a character and cannot be encoded as UTF-8"
    )


# -- the steps --------------------------------------------------------------------------
def _quoted(value: Any) -> str:
    """EROBS-style ``{value!r}`` for short strings, a short rendering otherwise."""
    return repr(value) if isinstance(value, str) and len(value) <= 60 else v.shown(value)


def _given(spec: Mapping[str, Any], key: str) -> bool:
    """A field counts as given unless absent, ``null``, ``""`` or ``[]`` (EROBS: truthiness)."""
    value = spec.get(key)
    return value is not None and not (isinstance(value, str | list) and len(value) == 0)


def _finite(value: Any) -> float | None:
    if not v.is_number(value):
        return None
    try:
        result = float(value)
    except OverflowError:
        return None
    return result if math.isfinite(result) else None


def quaternion_from_rpy(roll: float, pitch: float, yaw: float) -> tuple[float, float, float, float]:
    """Quaternion ``(x, y, z, w)`` of fixed-axis roll (X), pitch (Y), yaw (Z) [rad].

    ``R = Rz(yaw) · Ry(pitch) · Rx(roll)``, the ROS ``tf`` convention
    (``quaternion_from_euler(roll, pitch, yaw)``, axes ``sxyz``) that EROBS uses for
    orientation constraints.
    """
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return (
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
        cr * cp * cy + sr * sp * sy,
    )


def _constraints(value: Any, path: str) -> Constraints | None:
    """Parse ``constraints`` (angles in degrees, EROBS format) into radians; ``{}`` → ``None``."""
    if value is None:
        return None
    spec = v.mapping(value, path)
    v.only_keys(spec, path, ("joint_constraints", "orientation_constraints"))
    joints: list[JointConstraint] = []
    for k, item in enumerate(v.array(spec.get("joint_constraints", []), f"{path}.joint_constraints")):
        where = f"{path}.joint_constraints[{k}]"
        item = v.mapping(item, where)
        v.only_keys(item, where, _JOINT_CONSTRAINT_KEYS)
        name = v.choice(item.get("joint_name"), f"{where}.joint_name", JOINT_NAMES, what="joint")
        degrees = (
            v.number(item.get("position"), f"{where}.position", unit="deg"),
            v.number(
                item.get("tolerance_above", _DEFAULT_JOINT_TOLERANCE),
                f"{where}.tolerance_above",
                unit="deg",
                minimum=0.0,
            ),
            v.number(
                item.get("tolerance_below", _DEFAULT_JOINT_TOLERANCE),
                f"{where}.tolerance_below",
                unit="deg",
                minimum=0.0,
            ),
        )
        if "weight" in item:
            v.number(item["weight"], f"{where}.weight", minimum=0.0)
        check_joint_angle(degrees[0], JOINT_NAMES.index(name), f"{where}.position")
        _check_angle(degrees[1], f"{where}.tolerance_above")
        _check_angle(degrees[2], f"{where}.tolerance_below")
        position, above, below = to_radians(degrees)
        joints.append(JointConstraint(name, position, above, below))
    orientations: list[OrientationConstraint] = []
    for k, item in enumerate(
        v.array(spec.get("orientation_constraints", []), f"{path}.orientation_constraints")
    ):
        where = f"{path}.orientation_constraints[{k}]"
        item = v.mapping(item, where)
        v.only_keys(item, where, _ORIENTATION_CONSTRAINT_KEYS)
        link = v.string(item.get("link_name"), f"{where}.link_name")
        frame = v.string(item.get("frame_id", "base_link"), f"{where}.frame_id")
        orientation: tuple[float, float, float, float] | None = None
        if item.get("orientation") is not None:
            roll, pitch, yaw = to_radians(_triple(item["orientation"], f"{where}.orientation", "deg"))
            orientation = quaternion_from_rpy(roll, pitch, yaw)
        tolerance = to_radians(
            _triple(
                item.get("tolerance", list(_DEFAULT_ORIENTATION_TOLERANCE)),
                f"{where}.tolerance",
                "deg",
                minimum=0.0,
            )
        )
        if "weight" in item:
            v.number(item["weight"], f"{where}.weight", minimum=0.0)
        orientations.append(OrientationConstraint(link, frame, orientation, cast(Any, tolerance)))
    if not joints and not orientations:
        return None
    return Constraints(tuple(joints), tuple(orientations))


def _jazzy_dev_mode(spec: Mapping[str, Any]) -> str | None:
    """The mode EROBS ``jazzy_dev`` @ 739cc0c ran a ``moveto`` in, or ``None`` for none.

    That branch had no mode check: ``MoveToStages.add_to_task``
    (``src/beambot/beambot/stages/move_to_stages.py``) took the relative move when
    ``direction`` was set and ``distance`` was not 0, else the Cartesian move when
    ``cartesian_target`` had at least 3 values, else the named move when ``target`` was set,
    and ignored the other fields.
    """
    distance = spec.get("distance")
    if _given(spec, "direction") and v.is_number(distance) and distance != 0:
        return "relative"
    target_xyz = spec.get("cartesian_target")
    if isinstance(target_xyz, list) and len(target_xyz) >= 3:
        return "cartesian"
    return "named" if _given(spec, "target") else None


def _modes_error(spec: Mapping[str, Any], *, named: bool, relative: bool, cartesian: bool) -> str:
    """EROBS's refusal of a ``moveto`` without exactly one mode; when it gives several, what
    to keep and what EROBS ``jazzy_dev`` made of it (:func:`_jazzy_dev_mode`):

    ``MoveTo goal must specify exactly one of target, direction/distance, or
    cartesian_target; this step gives target and direction/distance. EROBS jazzy_dev made
    the relative move of direction and distance with it and ignored target: keep direction
    and distance for that move, or keep only target for a move to 'moveit_home'``.
    """
    given = [mode for mode, on in (("named", named), ("relative", relative), ("cartesian", cartesian)) if on]
    if len(given) < 2:
        return _EXACTLY_ONE
    target = _quoted(spec.get("target"))
    label = {"named": "target", "relative": "direction/distance", "cartesian": "cartesian_target"}
    keep = {
        "named": f"only target for a move to {target}",
        "relative": "only direction and distance for the relative move",
        "cartesian": "only cartesian_target for the Cartesian move",
    }
    text = f"{_EXACTLY_ONE}; this step gives {' and '.join(label[mode] for mode in given)}."
    old = _jazzy_dev_mode(spec)
    if old is None:  # jazzy_dev refused it too ("No valid move target specified")
        return f"{text} Keep {' or '.join(keep[mode] for mode in given)}"
    distance = spec.get("distance")
    present = {
        "target": _given(spec, "target"),
        "direction": _given(spec, "direction"),
        "distance": distance is not None and not (v.is_number(distance) and distance == 0),
        "cartesian_target": _given(spec, "cartesian_target"),
    }
    own = {"named": ("target",), "relative": ("direction", "distance"), "cartesian": ("cartesian_target",)}
    ignored = [key for key, on in present.items() if on and key not in own[old]]
    made = {
        "named": f"the move to {target}",
        "relative": "the relative move of direction and distance",
        "cartesian": "the Cartesian move to cartesian_target",
    }
    others = " or ".join(keep[mode] for mode in given if mode != old)
    return (
        f"{text} EROBS jazzy_dev made {made[old]} with it and ignored {' and '.join(ignored)}: "
        f"keep {' and '.join(own[old])} for that move, or keep {others}"
    )


def _check_length(value: float, path: str) -> float:
    """Reject a length [m] no UR5e move can have (``|value| > MAX_LENGTH``)."""
    if abs(value) > MAX_LENGTH:
        raise ScriptError(
            path,
            f"{value:g} m is beyond the arm's reach (at most {MAX_LENGTH:g} m: the UR5e reaches "
            f"{UR5E_REACH:g} m from its base)",
        )
    return value


def _check_angle(value: float, path: str) -> float:
    """Reject an angle [deg] beyond one turn (``|value| > MAX_ANGLE``)."""
    if abs(value) > MAX_ANGLE:
        raise ScriptError(path, f"{value:g}° is more than one turn (at most ±{MAX_ANGLE:g}°)")
    return value


def _triple(value: Any, path: str, unit: str, *, minimum: float | None = None) -> tuple[float, float, float]:
    if not isinstance(value, list) or len(value) != 3:
        raise ScriptError(path, f"must be a list of 3 numbers ({unit}) (got {v.shown(value)})")
    x, y, z = (
        _check_angle(v.number(item, f"{path}[{i}]", unit=unit, minimum=minimum), f"{path}[{i}]")
        for i, item in enumerate(value)
    )
    return x, y, z


class _Parser:
    """Per-call validation state: the cell's vocabulary, pose resolution, the tracked tool.

    Why this class is long: it holds the state a script is validated in (the cell's vocabulary, the tool
    attached and the docks at each step), and each task type's checks read and change that state in step
    order; the rules themselves are named functions of script/vocabulary.py and script/poses.py where they
    are shared.

    While the steps are read in order, ``current`` is the gripper that will be attached at
    that point (``start_gripper``, changed by ``tool_exchange``) and ``docked`` what the
    script itself has put into or taken out of each dock, so a step the attached tool
    cannot do is rejected before anything moves.
    """

    def __init__(self, vocabulary: CellVocabulary, registry: PoseRegistry | None, limits: Limits) -> None:
        self.vocabulary = vocabulary
        self.registry = registry
        self.limits = limits
        self.current = ""
        self.docked: dict[int, tuple[str | None, str]] = {}  # dock -> (tool, path of the step)
        self.resolver = PoseResolver({}, registry)
        self.warnings: list[str] = []  # Script.warnings found while reading the steps

    def begin(self, start_gripper: str, poses: Mapping[str, tuple[float, ...]]) -> None:
        self.current = start_gripper
        self.docked = {}
        self.warnings = []
        self.resolver = PoseResolver(poses, self.registry)

    # -- units
    def _warn_rpy(self, angles: Sequence[float], where: str) -> None:
        """Warn when a roll/pitch/yaw [deg] looks like radians (:func:`looks_like_radians`)."""
        if looks_like_radians(angles):
            self.warnings.append(
                f"{where}: roll, pitch and yaw are within ±2π ({_angles(angles)}); they are in degrees "
                "and these look like radians"
            )

    def _constraints(self, value: Any, path: str) -> Constraints | None:
        """:func:`_constraints`, warning of an orientation constraint's roll/pitch/yaw that
        looks like radians."""
        constraints = _constraints(value, path)
        if constraints is not None:
            for k, item in enumerate(value.get("orientation_constraints") or []):
                if item.get("orientation") is not None:
                    self._warn_rpy(item["orientation"], f"{path}.orientation_constraints[{k}].orientation")
        return constraints

    # -- grippers
    def check_gripper(self, name: Any, path: str) -> str:
        grippers = self.vocabulary.grippers
        if not isinstance(name, str) or name not in grippers:
            shown = name if isinstance(name, str) else v.shown(name)
            raise ScriptError(path, f"Unknown gripper: {shown} (available: {', '.join(grippers)})")
        return name

    def _check_state(self, state: str, gripper: str, path: str, *, roles: bool, preset_of: str = "") -> str:
        """Check a gripper state against ``gripper``; return the state name it means."""
        states = self.vocabulary.gripper_states(gripper)
        if not states:
            return state
        role_map = self.vocabulary.gripper_roles(gripper)
        if roles and state in role_map:
            return role_map[state]
        if state in states:
            return state
        allowed = sorted(states) + (sorted(role_map) if roles else [])
        if preset_of:
            raise ScriptError(
                path,
                f"{preset_of} ends with {_quoted(state)}, which gripper {gripper!r} does not have "
                f"(set terminal_action to one of: {', '.join(allowed)})",
            )
        raise ScriptError(
            path,
            f"unknown gripper state {_quoted(state)} for {gripper!r} (expected one of: {', '.join(allowed)})",
        )

    def _step_gripper(self, spec: Mapping[str, Any], key: str, path: str) -> str | None:
        """The explicit gripper of a step (``end_effector_type``/``gripper``), which must be attached."""
        if spec.get(key) is None:
            return None
        gripper = self.check_gripper(spec[key], f"{path}.{key}")
        if gripper != self.current:
            raise ScriptError(
                f"{path}.{key}", f"requires gripper {gripper!r}, but the current gripper is {self.current!r}"
            )
        return gripper

    # -- dispatch
    def step(self, entry: ExpandedTask, index: int) -> Step:
        spec, path = entry.spec, entry.path
        task_type = spec["task_type"]
        if task_type == "moveto":
            return self.moveto(spec, path, index)
        if task_type == "end_effector":
            return self.end_effector(spec, path, index)
        if task_type == "tool_exchange":
            return self.tool_exchange(spec, path, index)
        if task_type == "pipettor":
            return self.pipettor(spec, path, index)
        if task_type == "pause":
            for key in spec:
                if key != "task_type":
                    raise ScriptError(
                        f"{path}.{key}", "pause takes no fields; it waits for Resume (there is no timer)"
                    )
            return Pause(index=index, path=path, spec=spec)
        return self.vision(spec, path, index)

    # -- moveto
    def moveto(self, spec: dict[str, Any], path: str, index: int) -> MoveTo:
        planning_type = spec.get("planning_type", "")
        if not isinstance(planning_type, str) or planning_type not in PLANNING_TYPES:
            raise ScriptError(
                f"{path}.planning_type",
                f"Unknown MoveTo planning_type: {_quoted(planning_type)} "
                f"(expected one of: {', '.join(repr(p) for p in PLANNING_TYPES)})",
            )
        distance = spec.get("distance")
        named = _given(spec, "target")
        relative = _given(spec, "direction") or (
            distance is not None and not (v.is_number(distance) and distance == 0)
        )
        cartesian = _given(spec, "cartesian_target")
        if named + relative + cartesian != 1:
            raise ScriptError(path, _modes_error(spec, named=named, relative=relative, cartesian=cartesian))
        common: dict[str, Any] = {
            "index": index,
            "path": path,
            "spec": spec,
            "planning_type": PLANNING_TYPES[planning_type],
            "constraints": self._constraints(spec.get("constraints"), f"{path}.constraints"),
        }
        if named:
            target = spec["target"]
            if not isinstance(target, str) or not target.strip():
                raise ScriptError(f"{path}.target", "MoveTo target must be a non-empty string")
            joints = self.resolver.resolve(target)
            named_states = self.vocabulary.named_states
            if joints is None and target not in named_states:
                known = ", ".join(sorted(named_states)) or "none"
                raise ScriptError(
                    f"{path}.target",
                    # EROBS's "Pose '<name>' not found" (its agent's error table matches it).
                    f"Pose {target!r} not found: not in "
                    + self.resolver.searched(f"the named states [{known}]"),
                )
            return MoveTo(target=target, target_joints=joints, **common)
        if relative:
            direction = spec.get("direction")
            if not isinstance(direction, str) or direction not in DIRECTION_VECTORS:
                raise ScriptError(
                    f"{path}.direction",
                    f"Unknown MoveTo direction: {_quoted(direction)} "
                    f"(expected one of: {', '.join(DIRECTION_VECTORS)})",
                )
            length = _finite(distance)
            if length is None or length <= 0.0:
                raise ScriptError(
                    f"{path}.distance",
                    f"MoveTo distance must be a finite number greater than zero (got {v.shown(distance)})",
                )
            _check_length(length, f"{path}.distance")
            return MoveTo(
                direction=direction, direction_vector=DIRECTION_VECTORS[direction], distance=length, **common
            )
        target_xyz = spec["cartesian_target"]
        if not isinstance(target_xyz, list) or len(target_xyz) not in (3, 6):
            raise ScriptError(
                f"{path}.cartesian_target",
                "MoveTo cartesian_target must contain exactly 3 or 6 finite numbers "
                f"(got {v.shown(target_xyz)})",
            )
        values = [_finite(item) for item in target_xyz]
        for i, value in enumerate(values):
            if value is None:
                raise ScriptError(
                    f"{path}.cartesian_target[{i}]",
                    "MoveTo cartesian_target must contain exactly 3 or 6 finite numbers "
                    f"(got {v.shown(target_xyz[i])})",
                )
        numbers = cast(list[float], values)
        for i, value in enumerate(numbers):
            where = f"{path}.cartesian_target[{i}]"
            if i < 3:
                _check_length(value, where)
            else:
                _check_angle(value, where)
        if len(numbers) == 6:
            self._warn_rpy(numbers[3:], f"{path}.cartesian_target")
        pose = tuple(numbers[:3]) + (to_radians(numbers[3:]) if len(numbers) == 6 else ())
        frame_id = spec.get("frame_id")
        frame = "base_link" if frame_id is None else v.string(frame_id, f"{path}.frame_id")
        return MoveTo(cartesian_target=pose, frame_id=frame, **common)

    # -- end_effector
    def end_effector(self, spec: dict[str, Any], path: str, index: int) -> EndEffector:
        action = spec.get("end_effector_action")
        if not isinstance(action, str) or not action.strip():
            raise ScriptError(
                f"{path}.end_effector_action",
                f"a gripper state is required, e.g. vacuum_on (got {v.shown(action)})",
            )
        gripper = self._step_gripper(spec, "end_effector_type", path)
        self._check_state(action, gripper or self.current, f"{path}.end_effector_action", roles=False)
        return EndEffector(index=index, path=path, spec=spec, action=action, gripper=gripper)

    # -- tool_exchange
    def tool_exchange(self, spec: dict[str, Any], path: str, index: int) -> ToolExchange:
        operation = v.choice(spec.get("operation"), f"{path}.operation", TOOL_OPERATIONS, what="operation")
        gripper = self.check_gripper(spec.get("gripper"), f"{path}.gripper")
        dock_number = v.integer(spec.get("dock_number"), f"{path}.dock_number", minimum=1)
        docks = self.vocabulary.docks
        if dock_number not in docks:
            raise ScriptError(
                f"{path}.dock_number",
                f"Unknown dock: {dock_number} (the cell's docks: {', '.join(map(str, docks)) or 'none'})",
            )
        approach: str | None = None
        joints = None
        if _given(spec, "approach_pose"):
            approach = v.string(spec["approach_pose"], f"{path}.approach_pose")
            joints = self.resolver.require(approach, f"{path}.approach_pose")
        if operation == "dock":
            if self.current == "none":
                raise ScriptError(
                    f"{path}.operation", "cannot dock: no gripper is attached (current gripper 'none')"
                )
            if gripper != self.current:
                raise ScriptError(
                    f"{path}.gripper",
                    f"cannot dock {gripper!r}: the current gripper is {self.current!r} "
                    "(dock requires gripper == current gripper)",
                )
            holding, where = self.docked.get(dock_number, (None, ""))
            if holding is not None:
                raise ScriptError(
                    f"{path}.dock_number",
                    f"dock {dock_number} already holds the {holding} (docked at {where})",
                )
            self.docked[dock_number] = (gripper, path)
            self.current = "none"
        else:
            if gripper == "none":
                raise ScriptError(f"{path}.gripper", "cannot load 'none'; dock the current gripper instead")
            if self.current != "none":
                raise ScriptError(
                    f"{path}.gripper",
                    f"cannot load {gripper!r}: gripper {self.current!r} is still attached "
                    "(load requires current gripper 'none'; dock it first)",
                )
            if dock_number in self.docked:
                holding, where = self.docked[dock_number]
                if holding != gripper:
                    raise ScriptError(
                        f"{path}.dock_number",
                        f"dock {dock_number} holds {'the ' + holding if holding else 'nothing'} "
                        f"at this point (after {where}), not the {gripper}",
                    )
            self.docked[dock_number] = (None, path)
            self.current = gripper
        return ToolExchange(
            index=index,
            path=path,
            spec=spec,
            operation=operation,
            gripper=gripper,
            dock_number=dock_number,
            approach_pose=approach,
            approach_joints=joints,
        )

    # -- pipettor
    def pipettor(self, spec: dict[str, Any], path: str, index: int) -> Pipettor:
        operation = v.choice(
            spec.get("operation"), f"{path}.operation", PIPETTOR_OPERATIONS, what="pipettor operation"
        )
        if self.current != "pipettor":
            raise ScriptError(
                path,
                f"pipettor {operation} needs the pipettor attached, but the current gripper is "
                f"{self.current!r} (load it with a tool_exchange step first)",
            )
        volume = None
        if spec.get("volume_pct") is not None:
            volume = v.number(spec["volume_pct"], f"{path}.volume_pct", minimum=0.0, maximum=1.0)
        color = None
        if spec.get("led_color") is not None:
            led = v.mapping(spec["led_color"], f"{path}.led_color")
            v.only_keys(led, f"{path}.led_color", ("r", "g", "b", "a"))
            r, g, b = (
                v.number(led.get(channel), f"{path}.led_color.{channel}", minimum=0.0, maximum=1.0)
                for channel in ("r", "g", "b")
            )
            if led.get("a") is not None:
                # EROBS reads r, g, b and always sends a = 1.0: an alpha is checked, then unused.
                v.number(led["a"], f"{path}.led_color.a", minimum=0.0, maximum=1.0)
            color = (r, g, b)
        elif operation == "SET_LED":
            raise ScriptError(f"{path}.led_color", "SET_LED needs led_color {r, g, b} (each in [0, 1])")
        return Pipettor(
            index=index, path=path, spec=spec, operation=operation, volume_pct=volume, led_color=color
        )

    # -- vision family
    def vision(self, spec: dict[str, Any], path: str, index: int) -> Vision:
        kind = spec["task_type"]
        preset = VISION_PRESETS[kind]
        given: dict[str, Any] = {}

        def field_path(key: str) -> str:
            return f"{path}.{key}"

        for key in _VISION_STRING_FIELDS:
            if spec.get(key) is not None:
                given[key] = v.string(spec[key], field_path(key))
        if spec.get("terminal_action") is not None:
            given["terminal_action"] = v.string(
                spec["terminal_action"], field_path("terminal_action"), allow_empty=True
            )
        for key in _VISION_BOOL_FIELDS:
            if spec.get(key) is not None:
                given[key] = v.boolean(spec[key], field_path(key))
        for key in _VISION_POSE_FIELDS:
            if _given(spec, key):
                given[key] = v.string(spec[key], field_path(key))
        if _given(spec, "scan_positions"):
            names = v.array(spec["scan_positions"], field_path("scan_positions"))
            given["scan_positions"] = [
                v.string(name, f"{path}.scan_positions[{k}]") for k, name in enumerate(names)
            ]
        for key, minimum in (("tag_id", 0), ("sample_index", 1), ("scans_per_position", 1)):
            if spec.get(key) is not None:
                given[key] = v.integer(spec[key], field_path(key), minimum=minimum)
        for key in ("marker_offset_x", "marker_offset_y", "marker_offset_z", "z_offset"):
            if spec.get(key) is not None:
                given[key] = _check_length(v.number(spec[key], field_path(key), unit="m"), field_path(key))
        if spec.get("k_offset") is not None:
            given["k_offset"] = _check_angle(
                v.number(spec["k_offset"], field_path("k_offset"), unit="deg"), field_path("k_offset")
            )
        if spec.get("forward_distance") is not None:
            given["forward_distance"] = _check_length(
                v.number(spec["forward_distance"], field_path("forward_distance"), unit="m", minimum=0.0),
                field_path("forward_distance"),
            )
        if spec.get("edge_inset_mm") is not None:
            given["edge_inset_mm"] = v.number(
                spec["edge_inset_mm"], field_path("edge_inset_mm"), unit="mm", minimum=0.0, maximum=100.0
            )
        if spec.get("settle_time") is not None:
            given["settle_time"] = v.number(
                spec["settle_time"], field_path("settle_time"), unit="s", minimum=0.0, maximum=MAX_SECONDS
            )
        if spec.get("timeout") is not None:
            timeout = v.number(spec["timeout"], field_path("timeout"), unit="s", positive=True)
            if timeout > MAX_SECONDS:
                raise ScriptError(
                    field_path("timeout"), f"{timeout:g} s is longer than a day ({MAX_SECONDS:g} s)"
                )
            given["timeout"] = timeout
        offset_direction, offset_vector, offset_distance = self._flange_offset(spec, path)
        gripper = self._step_gripper(spec, "gripper", path)
        constraints = self._constraints(spec.get("constraints"), field_path("constraints"))

        config = {**preset, **given}
        detector = given.get("detector") or given.get("detection_type") or preset.get("detector", "marker")
        use_vision = bool(config.get("use_vision", True))

        # Poses: scan positions (or the scan pose), target, approach, retreat.
        scan_names: list[tuple[str, str, str]] = []  # (name, path, default_of)
        if "scan_positions" in given:
            scan_names = [
                (name, f"{path}.scan_positions[{k}]", "") for k, name in enumerate(given["scan_positions"])
            ]
        elif config.get("scan_pose"):
            scan_names = [
                (config["scan_pose"], field_path("scan_pose"), "" if "scan_pose" in given else kind)
            ]
        if kind == "vision_scan" and "scan_positions" not in given:
            raise ScriptError(
                field_path("scan_positions"), "vision_scan needs a non-empty list of pose names"
            )
        scan_joints = tuple(
            self.resolver.require(name, where, default_of=of) for name, where, of in scan_names
        )

        target_key = next((key for key in ("target_pose", "place_pose", "pickup_pose") if key in given), None)
        target_pose = given[target_key] if target_key else preset.get("target_pose")
        target_joints = None
        if target_pose:
            target_joints = self.resolver.require(
                target_pose, field_path(target_key or "target_pose"), default_of="" if target_key else kind
            )
        elif not use_vision and kind in ("pick_sample", "place_sample"):
            raise ScriptError(field_path("target_pose"), f"{kind} with use_vision false needs target_pose")
        approach_pose = given.get("approach_pose")
        approach_joints = (
            self.resolver.require(approach_pose, field_path("approach_pose")) if approach_pose else None
        )
        if config.get("retreat_from_scan"):
            retreat_pose = config.get("scan_pose") or None
            retreat_where, retreat_default = field_path("scan_pose"), "" if "scan_pose" in given else kind
        else:
            retreat_pose = given.get("retreat_pose")
            retreat_where, retreat_default = field_path("retreat_pose"), ""
        retreat_joints = (
            self.resolver.require(retreat_pose, retreat_where, default_of=retreat_default)
            if retreat_pose
            else None
        )

        # Gripper states the step will command.
        acting = gripper or self.current
        terminal = config.get("terminal_action") or None
        if terminal is not None:
            terminal = self._check_state(
                terminal,
                acting,
                field_path("terminal_action") if "terminal_action" in given else path,
                roles=True,
                preset_of="" if "terminal_action" in given else kind,
            )
        pre_open = bool(config.get("pre_open", False))
        if pre_open:
            self._check_state("release", acting, field_path("pre_open"), roles=True)

        typed = {
            "detector",
            "detection_type",
            "goal_computer",
            "terminal_action",
            "use_vision",
            "pre_open",
            "detect_only",
            "tag_id",
            "scan_pose",
            "scan_positions",
            "target_pose",
            "place_pose",
            "pickup_pose",
            "approach_pose",
            "retreat_pose",
            "marker_offset_x",
            "marker_offset_y",
            "marker_offset_z",
            "z_offset",
            "forward_distance",
        }
        return Vision(
            index=index,
            path=path,
            spec=spec,
            kind=kind,
            detector=detector,
            tag_id=given.get("tag_id"),
            scan_poses=tuple(name for name, _, _ in scan_names),
            scan_joints=scan_joints,
            marker_offset=(
                given.get("marker_offset_x", 0.0),
                given.get("marker_offset_y", 0.0),
                given.get("marker_offset_z", 0.0),
            ),
            z_offset=given.get("z_offset", 0.0),
            terminal_action=terminal,
            params=MappingProxyType({key: value for key, value in given.items() if key not in typed}),
            goal_computer=config.get("goal_computer", "approach_pose"),
            gripper=gripper,
            use_vision=use_vision,
            pre_open=pre_open,
            detect_only=bool(config.get("detect_only", False)),
            target_pose=target_pose,
            target_joints=target_joints,
            approach_pose=approach_pose,
            approach_joints=approach_joints,
            retreat_pose=retreat_pose,
            retreat_joints=retreat_joints,
            offset_direction=offset_direction,
            offset_vector=offset_vector,
            offset_distance=offset_distance,
            forward_distance=float(config.get("forward_distance", 0.0)),
            constraints=constraints,
        )

    def _flange_offset(
        self, spec: Mapping[str, Any], path: str
    ) -> tuple[str | None, tuple[float, float, float] | None, float]:
        """``offset_direction`` + ``offset_distance`` (EROBS's flange-offset rules and texts)."""
        direction = spec.get("offset_direction", "")
        distance = spec.get("offset_distance", 0.0)
        if not isinstance(direction, str):
            raise ScriptError(f"{path}.offset_direction", "Flange offset direction must be a string")
        length = _finite(distance)
        if length is None:
            raise ScriptError(
                f"{path}.offset_distance",
                f"Flange offset distance must be a finite number greater than zero (got {v.shown(distance)})",
            )
        if not direction and length == 0.0:
            return None, None, 0.0
        if direction not in DIRECTION_VECTORS:
            raise ScriptError(
                f"{path}.offset_direction",
                f"Unknown flange offset direction: {_quoted(direction)} "
                f"(expected one of: {', '.join(DIRECTION_VECTORS)})",
            )
        if length <= 0.0:
            raise ScriptError(
                f"{path}.offset_distance",
                f"Flange offset distance must be a finite number greater than zero (got {v.shown(distance)})",
            )
        _check_length(length, f"{path}.offset_distance")
        return direction, DIRECTION_VECTORS[direction], length

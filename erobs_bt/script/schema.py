"""The JSON Schema (draft 2020-12) of EROBS task scripts, built from the parser's own tables.

``erobs-bt schema`` prints it; point an editor at it (VS Code: a ``"$schema"`` key in the
script, or ``json.schemas`` in the settings) or run ``check-jsonschema --schemafile`` to
check scripts while they are written.

One source of truth: every name list in the schema is the parser's
(:data:`~erobs_bt.script.parse.TASK_TYPES`, :data:`~erobs_bt.script.parse.DIRECTION_VECTORS`,
:data:`~erobs_bt.script.parse.PLANNING_TYPES`, the pipettor and tool-exchange operations,
the joint names and limits, the length, angle and size bounds), and the cell's names
(grippers, docks) come from the same :class:`~erobs_bt.script.vocabulary.CellVocabulary`
the parser checks against. The schema describes what can be checked one value at a
time; the parser checks more (a pose name must resolve, a step must suit the tool
attached at that point, a ``moveto`` has exactly one mode). The rule the tests hold it to
(test/script/test_script_schema.py): whatever the schema rejects, the parser rejects.

Conventions taken from the parser: a ``null`` optional field counts as absent; the keys
EROBS writes and does not read (``run_name``; ``position``, ``marker_dictionary``) and a
script's ``$``-keys (``$schema``) are ignored; any other key of the script or of a task
(but a ``pause``, which takes none) is valid and marked ``deprecated``
(:data:`UNKNOWN_FIELD`), for the parser ignores it with a warning; the parser refuses it
when it is a near miss of a known field, which the schema cannot express (it is looser
there, never stricter).
"""

from __future__ import annotations

from typing import Any

from erobs_bt.script.limits import DEFAULT_LIMITS, Limits
from erobs_bt.script.macros import VIAL_OPERATIONS
from erobs_bt.script.model import JOINT_LIMITS_DEG, JOINT_NAMES, VISION_TASK_TYPES
from erobs_bt.script.parse import (
    DIRECTION_VECTORS,
    EROBS_SCRIPT_KEYS,
    EROBS_TASK_FIELDS,
    MAX_ANGLE,
    MAX_LENGTH,
    MAX_SECONDS,
    PIPETTOR_OPERATIONS,
    PLANNING_TYPES,
    TASK_FIELDS,
    TASK_TYPES,
    TOOL_OPERATIONS,
)
from erobs_bt.script.vocabulary import CellVocabulary

#: The schema's ``$id``.
SCHEMA_ID = "https://erobs-bt.invalid/schema/erobs-task-script.json"

_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _optional(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or ``null`` (the parser reads a ``null`` optional field as absent)."""
    return {"anyOf": [schema, {"type": "null"}]}


def _absent_or(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema``, or a value the parser reads as "not given": ``null``, ``""`` or ``[]``."""
    return {"anyOf": [schema, {"type": "null"}, {"const": ""}, {"type": "array", "maxItems": 0}]}


def _number(minimum: float | None = None, maximum: float | None = None, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "number", **extra}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


_STRING = {"type": "string", "pattern": "\\S"}
_LENGTH = _number(-MAX_LENGTH, MAX_LENGTH, description="metres")
_ANGLE = _number(-MAX_ANGLE, MAX_ANGLE, description="degrees")
_INT32 = 2**31 - 1


def _pose(description: str) -> dict[str, Any]:
    return {
        "type": "array",
        "description": description,
        "prefixItems": [
            _number(lower, upper, description=f"{name} [deg]")
            for name, (lower, upper) in zip(JOINT_NAMES, JOINT_LIMITS_DEG, strict=True)
        ],
        "minItems": len(JOINT_NAMES),
        "maxItems": len(JOINT_NAMES),
    }


def _constraints() -> dict[str, Any]:
    joint = {
        "type": "object",
        "required": ["joint_name", "position"],
        "additionalProperties": False,
        "properties": {
            "joint_name": {"enum": list(JOINT_NAMES)},
            "position": _number(-360.0, 360.0, description="degrees"),
            "tolerance_above": _number(0.0, MAX_ANGLE, description="degrees, default 1"),
            "tolerance_below": _number(0.0, MAX_ANGLE, description="degrees, default 1"),
            "weight": _number(0.0),
        },
    }
    triple = {"type": "array", "items": _ANGLE, "minItems": 3, "maxItems": 3}
    orientation = {
        "type": "object",
        "required": ["link_name"],
        "additionalProperties": False,
        "properties": {
            "link_name": _STRING,
            "frame_id": _STRING,
            "orientation": _optional({**triple, "description": "roll, pitch, yaw [deg]"}),
            "tolerance": {
                "type": "array",
                "items": _number(0.0, MAX_ANGLE),
                "minItems": 3,
                "maxItems": 3,
                "description": "absolute x, y, z tolerance [deg], default [5, 5, 5]",
            },
            "weight": _number(0.0),
        },
    }
    return _optional(
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "joint_constraints": {"type": "array", "items": joint},
                "orientation_constraints": {"type": "array", "items": orientation},
            },
        }
    )


#: Any other field: valid, but flagged. The parser ignores it with a warning (or refuses
#: it when it is a near miss of a known one, which a schema cannot say); JSON Schema has no
#: warnings, so the field is marked ``deprecated`` (an annotation: the value stays valid),
#: which editors show as a warning (VS Code also reads ``deprecationMessage``).
UNKNOWN_FIELD: dict[str, Any] = {
    "deprecated": True,
    "description": "not a field erobs_bt reads: ignored with a warning, as EROBS ignores it",
    "deprecationMessage": (
        "unknown field: erobs_bt ignores it with a warning, as EROBS does (a misspelling of a "
        "known field is an error)"
    ),
}


def _task(task_type: str, properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The rules of one ``task_type``: its fields' schemas (every field of
    :data:`~erobs_bt.script.parse.TASK_FIELDS` and the ones EROBS writes,
    :data:`~erobs_bt.script.parse.EROBS_TASK_FIELDS`), any other field
    :data:`UNKNOWN_FIELD` unless ``extra`` closes the object."""
    names = ["task_type", *TASK_FIELDS[task_type], *EROBS_TASK_FIELDS.get(task_type, ())]
    return {
        "if": {"properties": {"task_type": {"const": task_type}}, "required": ["task_type"]},
        "then": {
            "properties": {name: properties.get(name, {}) for name in names},
            "additionalProperties": UNKNOWN_FIELD,
            **extra,
        },
    }


def script_schema(
    vocabulary: CellVocabulary | None = None, *, limits: Limits = DEFAULT_LIMITS
) -> dict[str, Any]:
    """The JSON Schema of a task script for one cell.

    Args:
        vocabulary: the cell's names (``None``: the packaged ``config/cell.yaml``).
        limits: the size limits (poses and steps per script).

    Returns:
        A JSON-able draft 2020-12 schema.
    """
    words = vocabulary if vocabulary is not None else CellVocabulary.default()
    grippers = list(words.grippers)
    directions = list(DIRECTION_VECTORS)
    vision_strings = {
        key: _optional(_STRING) for key in ("detector", "detection_type", "goal_computer", "strategy")
    }
    vision_bools = {
        key: _optional({"type": "boolean"})
        for key in ("use_vision", "pre_open", "detect_only", "retreat_from_scan", "release")
    }
    vision_poses = {
        key: _absent_or(_STRING)
        for key in ("scan_pose", "target_pose", "place_pose", "pickup_pose", "approach_pose", "retreat_pose")
    }
    vision = {
        **vision_strings,
        **vision_bools,
        **vision_poses,
        "terminal_action": _optional({"type": "string"}),
        "scan_positions": _absent_or({"type": "array", "items": _STRING}),
        "tag_id": _optional({"type": "integer", "minimum": 0, "maximum": _INT32}),
        "sample_index": _optional({"type": "integer", "minimum": 1, "maximum": _INT32}),
        "scans_per_position": _optional({"type": "integer", "minimum": 1, "maximum": _INT32}),
        **{
            key: _optional(_LENGTH)
            for key in ("marker_offset_x", "marker_offset_y", "marker_offset_z", "z_offset")
        },
        "k_offset": _optional(_ANGLE),
        "forward_distance": _optional(_number(0.0, MAX_LENGTH, description="metres")),
        "edge_inset_mm": _optional(_number(0.0, 100.0, description="millimetres")),
        "settle_time": _optional(_number(0.0, MAX_SECONDS, description="seconds")),
        "timeout": _optional(_number(exclusiveMinimum=0.0, maximum=MAX_SECONDS, description="seconds")),
        "offset_direction": {"enum": ["", *directions]},
        "offset_distance": _number(0.0, MAX_LENGTH, description="metres"),
        "gripper": _optional({"enum": grippers}),
        "constraints": _constraints(),
    }
    moveto_modes = [
        {"required": ["target"], "properties": {"target": {"type": "string", "minLength": 1}}},
        {"required": ["direction"], "properties": {"direction": {"type": "string", "minLength": 1}}},
        {"required": ["distance"], "properties": {"distance": {"type": "number", "not": {"const": 0}}}},
        {
            "required": ["cartesian_target"],
            "properties": {"cartesian_target": {"type": "array", "minItems": 1}},
        },
    ]
    macro_fields = {
        "row": {"type": "integer", "minimum": 0, "maximum": _INT32},
        "col": {"type": "integer", "minimum": 0, "maximum": _INT32},
        "element_index": {"type": "integer", "minimum": 0, "maximum": _INT32},
        "config": {"type": "object"},
    }
    tasks = [
        _task(
            "moveto",
            {
                "target": _absent_or({"type": "string"}),
                "direction": _absent_or({"enum": directions}),
                "distance": _optional(
                    _number(0.0, MAX_LENGTH, description="metres, > 0 for a relative move")
                ),
                "cartesian_target": _absent_or(
                    {
                        "type": "array",
                        "description": "x, y, z [m], optionally roll, pitch, yaw [deg]",
                        "prefixItems": [_LENGTH, _LENGTH, _LENGTH, _ANGLE, _ANGLE, _ANGLE],
                        "maxItems": 6,
                    }
                ),
                "frame_id": {"description": "frame of cartesian_target (default base_link)"},
                "planning_type": {"enum": list(PLANNING_TYPES)},
                "constraints": _constraints(),
            },
            anyOf=moveto_modes,
        ),
        _task(
            "end_effector",
            {"end_effector_action": _STRING, "end_effector_type": _optional({"enum": grippers})},
            required=["end_effector_action"],
        ),
        _task(
            "tool_exchange",
            {
                "operation": {"enum": list(TOOL_OPERATIONS)},
                "gripper": {"enum": grippers},
                "dock_number": {"enum": list(words.docks)},
                "approach_pose": _absent_or(_STRING),
            },
            required=["operation", "gripper", "dock_number"],
        ),
        _task(
            "pipettor",
            {
                "operation": {"enum": list(PIPETTOR_OPERATIONS)},
                "volume_pct": _optional(_number(0.0, 1.0, description="fraction of the stroke")),
                "led_color": _optional(
                    {
                        "type": "object",
                        "required": ["r", "g", "b"],
                        "additionalProperties": False,
                        # ``a`` is accepted and unused: EROBS sends a = 1.0 whatever the script says.
                        "properties": {channel: _number(0.0, 1.0) for channel in ("r", "g", "b", "a")},
                    }
                ),
            },
            required=["operation"],
        ),
        _task("pause", {"task_type": {"const": "pause"}}, additionalProperties=False),
        *(_task(kind, vision) for kind in sorted(VISION_TASK_TYPES)),
        _task("pickup_tip", macro_fields),
        _task(
            "pickup_vial",
            {
                **macro_fields,
                "pipettor_operation": _optional({"enum": ["", *VIAL_OPERATIONS]}),
                "volume_pct": {"description": "with pipettor_operation: fraction of the stroke, default 0.5"},
                "rinse_count": {"description": "with RINSE: number of SUCK/EXPEL pairs, default 2"},
            },
        ),
    ]
    task = {
        "type": "object",
        "required": ["task_type"],
        "properties": {"task_type": {"enum": list(TASK_TYPES)}},
        "allOf": tasks,
    }
    return {
        "$schema": _DRAFT,
        "$id": SCHEMA_ID,
        "title": "EROBS task script",
        "description": (
            "A JSON task script for a UR5e lab cell (erobs_bt, docs/script-format.md). Joint angles and "
            "roll/pitch/yaw in degrees, lengths in metres."
        ),
        "type": "object",
        "required": ["start_gripper", "tasks"],
        "patternProperties": {"^\\$": {"description": "ignored (for editors: $schema, $comment)"}},
        "additionalProperties": UNKNOWN_FIELD,
        "properties": {
            **{key: {"description": "written by EROBS, ignored"} for key in EROBS_SCRIPT_KEYS},
            "start_gripper": {"enum": grippers, "description": "the tool attached when the script starts"},
            "poses": _optional(
                {
                    "type": "object",
                    "maxProperties": limits.max_poses,
                    "propertyNames": {"pattern": "\\S"},
                    "additionalProperties": _pose("six joint angles [deg]"),
                }
            ),
            "tasks": {"type": "array", "minItems": 1, "items": task},
        },
    }

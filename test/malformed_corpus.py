"""A corpus of malformed task scripts, each with where its error must point.

Every case is invalid: wrong types, missing fields, huge and non-finite numbers, deep
nesting, unicode (lone surrogates, NUL), byte-order marks, non-UTF-8 bytes, duplicate
keys, unknown poses, docks and grippers, steps the attached tool cannot do, a 5 MB file.
``test_malformed_scripts.py`` sends each one through ``erobs-bt validate``, ``run``,
``preview`` and the ROS node's action and checks the same rejection everywhere.

The scripts resolve pose names against ``config/poses.yaml`` (``transport``,
``tool_exchange_safe``, ``dock_approach``, …) and run in the packaged cell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

#: Good inline poses the cases may use (degrees).
POSES = {"a": [10.0, -90.0, -90.0, -90.0, 90.0, 0.0], "b": [20.0, -90.0, -90.0, -90.0, 90.0, 0.0]}


@dataclass(frozen=True)
class Case:
    """One malformed script.

    Attributes:
        name: the test id.
        data: the file's bytes.
        path: the path the error must name (``""``: the whole document).
        contains: a fragment the message must hold.
        ros: the text can be a ROS ``string`` (UTF-8 without NUL); ``False`` for the cases
            only a file can hold.
    """

    name: str
    data: bytes
    path: str
    contains: str
    ros: bool = True


def script(tasks: Any, *, start_gripper: Any = "epick", poses: Any = POSES, **extra: Any) -> dict[str, Any]:
    document: dict[str, Any] = {"start_gripper": start_gripper, "tasks": tasks, **extra}
    if poses is not None:
        document["poses"] = poses
    return document


def encode(document: Any) -> bytes:
    return json.dumps(document).encode("utf-8")


def move(**fields: Any) -> dict[str, Any]:
    return {"task_type": "moveto", **fields}


def to(target: str) -> dict[str, Any]:
    return move(target=target, planning_type="joint")


def exchange(operation: str, gripper: Any, dock: Any, **extra: Any) -> dict[str, Any]:
    return {
        "task_type": "tool_exchange",
        "operation": operation,
        "gripper": gripper,
        "dock_number": dock,
        **extra,
    }


def pipettor(operation: Any = "SUCK", **extra: Any) -> dict[str, Any]:
    return {"task_type": "pipettor", "operation": operation, **extra}


def ee(action: Any, gripper: Any = None) -> dict[str, Any]:
    task: dict[str, Any] = {"task_type": "end_effector", "end_effector_action": action}
    if gripper is not None:
        task["end_effector_type"] = gripper
    return task


def deep(levels: int) -> bytes:
    return b'{"start_gripper": "epick", "run_name": ' + b"[" * levels + b"]" * levels + b', "tasks": []}'


GOOD = encode(script([to("a")]))
BOM = b"\xef\xbb\xbf"
SWAP_OUT = [to("tool_exchange_safe"), exchange("dock", "epick", 4, approach_pose="dock_approach")]
PIPETTOR_ON = [*SWAP_OUT, exchange("load", "pipettor", 3, approach_pose="load_approach")]

CASES: list[Case] = [
    # -- the text ----------------------------------------------------------------------------------
    Case("empty file", b"", "", "the script is empty: expected a JSON object"),
    Case("only whitespace", b" \n\t \n", "", "the script is empty: expected a JSON object"),
    Case("only a byte-order mark", BOM, "", "the script is empty: expected a JSON object"),
    Case("truncated JSON", GOOD[:-7], "", "Invalid JSON: "),
    Case("trailing garbage", GOOD + b" x", "", "Invalid JSON: Extra data"),
    Case("single quotes", b"{'start_gripper': 'epick'}", "", "Invalid JSON: "),
    Case("trailing comma", b'{"start_gripper": "epick", "tasks": [],}', "", "Invalid JSON: "),
    Case("comment", b'// my script\n{"start_gripper": "epick"}', "", "Invalid JSON: "),
    Case("non-UTF-8 byte", GOOD.replace(b'"a"', b'"\xff"', 1), "", "not UTF-8 text (byte 0xff", ros=False),
    Case(
        "Latin-1 text",
        encode(script([to("a")], run_name="x")).replace(b'"x"', '"café"'.encode("latin-1")),
        "",
        "not UTF-8 text (byte 0xe9",
        ros=False,
    ),
    Case(
        "UTF-16 file",
        json.dumps(script([to("a")])).encode("utf-16"),
        "",
        "not UTF-8 text (byte 0xff",
        ros=False,
    ),
    Case(
        "overlong UTF-8", GOOD.replace(b'"a"', b'"\xc0\xaf"', 1), "", "not UTF-8 text (byte 0xc0", ros=False
    ),
    Case(
        "raw NUL byte in a string",
        GOOD.replace(b'"a"', b'"a\x00"', 1),
        "",
        "Invalid JSON: Invalid control character",
        ros=False,
    ),
    Case(
        "BOM then a missing field",
        BOM + b'{"tasks": [{"task_type": "pause"}]}',
        "",
        "Task script missing 'start_gripper'",
    ),
    Case("BOM then an unknown pose", BOM + encode(script([to("nowhere")])), "tasks[0].target", "'nowhere'"),
    Case("two byte-order marks", BOM + BOM + GOOD, "", "Invalid JSON: "),
    Case(
        "lone high surrogate",
        encode(script([to("a")], run_name="\ud800")),
        "run_name",
        "lone UTF-16 surrogate \\ud800",
    ),
    Case(
        "lone low surrogate in a pose name",
        encode(script([to("a")], poses={"a\udc00": POSES["a"], **POSES})),
        "poses.a\\udc00",
        "lone UTF-16 surrogate \\udc00",
    ),
    Case(
        "lone surrogate in a target",
        encode(script([to("\udbff")])),
        "tasks[0].target",
        "lone UTF-16 surrogate",
    ),
    Case("NUL in a target", encode(script([to("a\u0000")])), "tasks[0].target", "NUL character"),
    Case(
        "lone surrogate in an unknown key",
        encode(script([{**to("a"), "\ud800note": 1}])),
        "tasks[0].\\ud800note",
        "key: the string holds a lone UTF-16 surrogate",
    ),
    Case(
        "NUL in an unknown key",
        encode(script([{**to("a"), "no\u0000te": 1}])),
        "tasks[0].no\\x00te",
        "key: the string holds a NUL character",
    ),
    Case(
        "NUL in a task type",
        encode(script([{"task_type": "pause\u0000"}])),
        "tasks[0].task_type",
        "NUL character",
    ),
    Case(
        "NUL in an ignored field", encode(script([to("a")], operator="x\u0000y")), "operator", "NUL character"
    ),
    Case("NaN", GOOD.replace(b"10.0", b"NaN", 1), "poses.a[0]", "NaN is not a finite number"),
    Case(
        "Infinity distance",
        encode(script([move(direction="up", distance=0.1)])).replace(b"0.1", b"Infinity"),
        "tasks[0].distance",
        "Infinity is not a finite number",
    ),
    Case(
        "-Infinity in a pose",
        GOOD.replace(b"10.0", b"-Infinity", 1),
        "poses.a[0]",
        "-Infinity is not a finite",
    ),
    Case(
        "1e999",
        encode(script([move(direction="up", distance=0.1)])).replace(b"0.1", b"1e999"),
        "tasks[0].distance",
        "1e999 is not a finite number",
    ),
    Case(
        "5000-digit integer",
        encode(script([move(direction="up", distance=0.1)])).replace(b"0.1", b"9" * 5000),
        "tasks[0].distance",
        "5000 digits",
    ),
    Case(
        "31-digit dock number",
        encode(script([exchange("dock", "epick", 1)])).replace(
            b'"dock_number": 1', b'"dock_number": ' + b"4" * 31
        ),
        "tasks[0].dock_number",
        "31 digits",
    ),
    Case(
        "400-digit integer in an ignored field",
        encode(script([to("a")], run_id=1)).replace(b'"run_id": 1', b'"run_id": ' + b"7" * 400),
        "run_id",
        "400 digits",
    ),
    Case("200,000-deep nesting", deep(200_000), "run_name" + "[0]" * 31, "nesting is deeper than 32 levels"),
    Case("40-deep nesting", deep(40), "run_name" + "[0]" * 31, "nesting is deeper than 32 levels"),
    Case(
        "duplicate key tasks",
        b'{"start_gripper": "epick", "tasks": [], "tasks": [{"task_type": "pause"}]}',
        "",
        "duplicate key 'tasks'",
    ),
    Case(
        "duplicate key in a task",
        encode(script([to("a")])).replace(b'"target": "a"', b'"target": "a", "target": "b"'),
        "tasks[0]",
        "duplicate key 'target'",
    ),
    Case("5 MB file", encode(script([to("a")], notes="x" * (5 << 20))), "", "the limit is 1048576 bytes"),
    # -- the envelope ------------------------------------------------------------------------------
    Case("root is an array", b"[1, 2]", "", "Task script root must be an object"),
    Case("root is a string", b'"moveto"', "", "Task script root must be an object"),
    Case("root is null", b"null", "", "Task script root must be an object"),
    Case("missing start_gripper", encode({"tasks": [to("a")]}), "", "Task script missing 'start_gripper'"),
    Case("missing tasks", encode({"start_gripper": "epick"}), "", "Task script missing 'tasks'"),
    Case(
        "start_gripper is a number",
        encode(script([to("a")], start_gripper=3)),
        "start_gripper",
        "must be a string",
    ),
    Case(
        "unknown start_gripper",
        encode(script([to("a")], start_gripper="vacuum")),
        "start_gripper",
        "Unknown gripper: vacuum (available: none, hande, epick, 2fg7, pipettor)",
    ),
    Case(
        "empty start_gripper", encode(script([to("a")], start_gripper="")), "start_gripper", "Unknown gripper"
    ),
    Case("tasks is empty", encode(script([])), "tasks", "tasks must be a non-empty list"),
    Case("tasks is an object", encode(script({"0": to("a")})), "tasks", "must be a non-empty list"),
    Case("tasks is a string", encode(script("moveto")), "tasks", "must be a non-empty list"),
    Case("a task is a number", encode(script([to("a"), 7])), "tasks[1]", "tasks[1] must be an object"),
    Case("task_type missing", encode(script([{"target": "a"}])), "tasks[0].task_type", "must be one of: "),
    Case(
        "unknown task_type", encode(script([{"task_type": "move"}])), "tasks[0].task_type", "must be one of: "
    ),
    Case(
        "task_type is a number", encode(script([{"task_type": 1}])), "tasks[0].task_type", "must be one of: "
    ),
    Case(
        "task_type in the wrong case",
        encode(script([{"task_type": "MoveTo"}])),
        "tasks[0].task_type",
        "must be one",
    ),
    Case("poses is a list", encode(script([to("a")], poses=[POSES["a"]])), "poses", "must be a mapping"),
    Case(
        "a pose has 5 values",
        encode(script([to("a")], poses={"a": [0, 0, 0, 0, 0]})),
        "poses.a",
        "(got 5 values)",
    ),
    Case(
        "a pose holds a string",
        encode(script([to("a")], poses={"a": [0, "0", 0, 0, 0, 0]})),
        "poses.a[1]",
        "must be a finite number (deg)",
    ),
    Case(
        "a pose holds a boolean",
        encode(script([to("a")], poses={"a": [0, 0, True, 0, 0, 0]})),
        "poses.a[2]",
        "(got true)",
    ),
    Case(
        "a pose beyond the elbow limit",
        encode(script([to("a")], poses={"a": [0, 0, 400, 0, 0, 0]})),
        "poses.a[2]",
        "400° is outside elbow_joint's ±180°",
    ),
    Case(
        "a pose beyond a wrist limit",
        encode(script([to("a")], poses={"a": [0, 0, 0, 0, 0, -361]})),
        "poses.a[5]",
        "-361° is outside wrist_3_joint's ±360°",
    ),
    Case(
        "a blank pose name",
        encode(script([to("a")], poses={" ": POSES["a"], "a": POSES["a"]})),
        "poses",
        "pose names must be non-empty strings",
    ),
    # -- moveto ------------------------------------------------------------------------------------
    Case(
        "moveto without a mode",
        encode(script([move(planning_type="joint")])),
        "tasks[0]",
        "MoveTo goal must specify exactly one of target, direction/distance, or cartesian_target",
    ),
    Case(
        "moveto with two modes",
        encode(script([move(target="a", direction="up", distance=0.1)])),
        "tasks[0]",
        "exactly one of target",
    ),
    # -- fields no one reads: ignored with a warning, unless misspelled or too many (issue 38) -----
    Case(
        "misspelled planning_type",
        encode(script([move(target="a", planing_type="cartesian")])),
        "tasks[0].planing_type",
        "did you mean 'planning_type'?",
    ),
    Case(
        "misspelled script key",
        encode(script([to("a")], start_griper="epick")),
        "start_griper",
        "did you mean 'start_gripper'?",
    ),
    Case(
        "1,001 unknown fields",
        encode(script([{**to("a"), **{f"x{i}": 0 for i in range(1001)}}])),
        "tasks[0].x1000",
        "Limits.max_unknown_fields",
    ),
    Case(
        "the issue's unknown target",
        b'{"start_gripper":"epick","tasks":[{"task_type":"moveto","target":"nowhere_pose"}]}',
        "tasks[0].target",
        "Pose 'nowhere_pose' not found",
    ),
    Case(
        "unknown target after good steps",
        encode(script([to("a"), to("b"), to("c")])),
        "tasks[2].target",
        "Pose 'c' not found",
    ),
    Case("target is a number", encode(script([move(target=5)])), "tasks[0].target", "non-empty string"),
    Case(
        "unknown direction",
        encode(script([move(direction="sideways", distance=0.1)])),
        "tasks[0].direction",
        "Unknown MoveTo direction: 'sideways'",
    ),
    Case(
        "negative distance",
        encode(script([move(direction="up", distance=-0.1)])),
        "tasks[0].distance",
        "MoveTo distance must be a finite number greater than zero",
    ),
    Case(
        "distance zero",
        encode(script([move(direction="up", distance=0)])),
        "tasks[0].distance",
        "greater than zero",
    ),
    Case(
        "distance is a string",
        encode(script([move(direction="up", distance="0.1")])),
        "tasks[0].distance",
        "greater than zero (got '0.1')",
    ),
    Case(
        "distance is a boolean",
        encode(script([move(direction="up", distance=True)])),
        "tasks[0].distance",
        "(got true)",
    ),
    Case(
        "distance 1e308",
        encode(script([move(direction="down", distance=1e308)])),
        "tasks[0].distance",
        "1e+308 m is beyond the arm's reach",
    ),
    Case(
        "distance beyond the reach",
        encode(script([move(direction="down", distance=2.0)])),
        "tasks[0].distance",
        "2 m is beyond the arm's reach (at most 1.7 m",
    ),
    Case(
        "cartesian_target of 2",
        encode(script([move(cartesian_target=[0.3, 0.1])])),
        "tasks[0].cartesian_target",
        "exactly 3 or 6 finite numbers",
    ),
    Case(
        "cartesian_target holds a string",
        encode(script([move(cartesian_target=[0.3, "x", 0.2])])),
        "tasks[0].cartesian_target[1]",
        "exactly 3 or 6 finite numbers",
    ),
    Case(
        "cartesian_target 5 m away",
        encode(script([move(cartesian_target=[5.0, 0.0, 0.2])])),
        "tasks[0].cartesian_target[0]",
        "5 m is beyond the arm's reach",
    ),
    Case(
        "cartesian_target yaw of two turns",
        encode(script([move(cartesian_target=[0.3, 0, 0.2, 0, 0, 720])])),
        "tasks[0].cartesian_target[5]",
        "720° is more than one turn",
    ),
    Case(
        "unknown planning_type",
        encode(script([move(target="a", planning_type="rrt")])),
        "tasks[0].planning_type",
        "Unknown MoveTo planning_type: 'rrt'",
    ),
    Case(
        "planning_type null",
        encode(script([move(target="a", planning_type=None)])),
        "tasks[0].planning_type",
        "Unknown MoveTo planning_type",
    ),
    Case(
        "constraints with an unknown key",
        encode(script([move(target="a", constraints={"joints": []})])),
        "tasks[0].constraints.joints",
        "unknown field",
    ),
    Case(
        "constraint on an unknown joint",
        encode(
            script(
                [
                    move(
                        target="a",
                        constraints={"joint_constraints": [{"joint_name": "elbow", "position": 0}]},
                    )
                ]
            )
        ),
        "tasks[0].constraints.joint_constraints[0].joint_name",
        "unknown joint 'elbow'",
    ),
    Case(
        "constraint beyond the elbow limit",
        encode(
            script(
                [
                    move(
                        target="a",
                        constraints={"joint_constraints": [{"joint_name": "elbow_joint", "position": 500}]},
                    )
                ]
            )
        ),
        "tasks[0].constraints.joint_constraints[0].position",
        "500° is outside elbow_joint's ±180°",
    ),
    Case(
        "negative orientation tolerance",
        encode(
            script(
                [
                    move(
                        target="a",
                        constraints={
                            "orientation_constraints": [{"link_name": "tool0", "tolerance": [5, -1, 5]}]
                        },
                    )
                ]
            )
        ),
        "tasks[0].constraints.orientation_constraints[0].tolerance[1]",
        "must be a finite number >= 0",
    ),
    # -- end_effector ------------------------------------------------------------------------------
    Case(
        "end_effector without an action",
        encode(script([{"task_type": "end_effector"}])),
        "tasks[0].end_effector_action",
        "a gripper state is required",
    ),
    Case(
        "a Hand-E state on the ePick",
        encode(script([ee("hande_closed")])),
        "tasks[0].end_effector_action",
        "unknown gripper state 'hande_closed' for 'epick' (expected one of: vacuum_off, vacuum_on)",
    ),
    Case(
        "a vacuum state on the Hand-E",
        encode(script([ee("vacuum_on")], start_gripper="hande")),
        "tasks[0].end_effector_action",
        "unknown gripper state 'vacuum_on' for 'hande'",
    ),
    Case(
        "vacuum after swapping to the Hand-E",
        encode(script([*SWAP_OUT, exchange("load", "hande", 1), ee("vacuum_on")])),
        "tasks[3].end_effector_action",
        "for 'hande'",
    ),
    Case(
        "end_effector_type not attached",
        encode(script([ee("hande_open", "hande")])),
        "tasks[0].end_effector_type",
        "requires gripper 'hande', but the current gripper is 'epick'",
    ),
    Case(
        "unknown end_effector_type",
        encode(script([ee("x", "suction")])),
        "tasks[0].end_effector_type",
        "Unknown gripper: suction",
    ),
    # -- tool_exchange -----------------------------------------------------------------------------
    Case(
        "the issue's unknown dock",
        encode(script([exchange("dock", "epick", 99)])),
        "tasks[0].dock_number",
        "Unknown dock: 99 (the cell's docks: 1, 2, 3, 4)",
    ),
    Case(
        "dock number 0",
        encode(script([exchange("dock", "epick", 0)])),
        "tasks[0].dock_number",
        "must be an integer >= 1",
    ),
    Case(
        "dock number as a string",
        encode(script([exchange("dock", "epick", "4")])),
        "tasks[0].dock_number",
        "(got '4')",
    ),
    Case(
        "dock number as a float",
        encode(script([exchange("dock", "epick", 4.0)])),
        "tasks[0].dock_number",
        "must be an integer",
    ),
    Case(
        "unknown tool-exchange operation",
        encode(script([exchange("swap", "epick", 4)])),
        "tasks[0].operation",
        "unknown operation 'swap'",
    ),
    Case(
        "unknown tool-exchange gripper",
        encode(script([exchange("dock", "gripper9", 4)])),
        "tasks[0].gripper",
        "Unknown gripper: gripper9",
    ),
    Case(
        "docking a tool that is not attached",
        encode(script([exchange("dock", "hande", 1)])),
        "tasks[0].gripper",
        "cannot dock 'hande': the current gripper is 'epick'",
    ),
    Case(
        "loading while a tool is attached",
        encode(script([exchange("load", "pipettor", 3)])),
        "tasks[0].gripper",
        "gripper 'epick' is still attached",
    ),
    Case(
        "docking with no tool attached",
        encode(script([exchange("dock", "epick", 4)], start_gripper="none")),
        "tasks[0].operation",
        "no gripper is attached",
    ),
    Case(
        "loading 'none'",
        encode(script([*SWAP_OUT, exchange("load", "none", 2)])),
        "tasks[2].gripper",
        "cannot load 'none'",
    ),
    Case(
        "an unknown approach pose",
        encode(script([exchange("dock", "epick", 4, approach_pose="nearby")])),
        "tasks[0].approach_pose",
        "pose 'nearby' is not in the script's poses",
    ),
    Case(
        "docking into a dock the script filled",
        encode(script([*PIPETTOR_ON, exchange("dock", "pipettor", 4)])),
        "tasks[3].dock_number",
        "dock 4 already holds the epick (docked at tasks[1])",
    ),
    Case(
        "loading from a dock the script emptied",
        encode(script([*PIPETTOR_ON, exchange("dock", "pipettor", 2), exchange("load", "hande", 3)])),
        "tasks[4].dock_number",
        "dock 3 holds nothing at this point",
    ),
    # -- pipettor ----------------------------------------------------------------------------------
    Case(
        "the issue's pipettor with the ePick",
        encode(script([to("tool_exchange_safe"), pipettor("SET_LED", led_color={"r": 0, "g": 1, "b": 0})])),
        "tasks[1]",
        "pipettor SET_LED needs the pipettor attached, but the current gripper is 'epick'",
    ),
    Case(
        "a pipettor step as the only step on the ePick",
        encode(script([pipettor("EXPEL", volume_pct=0.5)])),
        "tasks[0]",
        "needs the pipettor attached",
    ),
    Case(
        "a pipettor step after docking it",
        encode(
            script(
                [pipettor("SUCK", volume_pct=0.2), exchange("dock", "pipettor", 3), pipettor("EXPEL")],
                start_gripper="pipettor",
            )
        ),
        "tasks[2]",
        "current gripper is 'none'",
    ),
    Case(
        "unknown pipettor operation",
        encode(script([pipettor("ASPIRATE")], start_gripper="pipettor")),
        "tasks[0].operation",
        "unknown pipettor operation 'ASPIRATE'",
    ),
    Case(
        "SET_LED without a colour",
        encode(script([pipettor("SET_LED")], start_gripper="pipettor")),
        "tasks[0].led_color",
        "SET_LED needs led_color",
    ),
    Case(
        "volume above the stroke",
        encode(script([pipettor("SUCK", volume_pct=1.5)], start_gripper="pipettor")),
        "tasks[0].volume_pct",
        "in [0, 1]",
    ),
    Case(
        "LED colour with an extra channel",
        encode(
            script(
                [pipettor("SET_LED", led_color={"r": 0, "g": 0, "b": 0, "w": 1})], start_gripper="pipettor"
            )
        ),
        "tasks[0].led_color.w",
        "unknown field",
    ),
    Case(
        "LED channel out of range",
        encode(script([pipettor("SET_LED", led_color={"r": 0, "g": 2, "b": 0})], start_gripper="pipettor")),
        "tasks[0].led_color.g",
        "in [0, 1]",
    ),
    # -- pause, vision, macros ---------------------------------------------------------------------
    Case(
        "pause with a timer",
        encode(script([{"task_type": "pause", "seconds": 5}])),
        "tasks[0].seconds",
        "pause takes no fields",
    ),
    Case(
        "vision_scan without scan positions",
        encode(script([{"task_type": "vision_scan", "tag_id": 1}])),
        "tasks[0].scan_positions",
        "vision_scan needs a non-empty list of pose names",
    ),
    Case(
        "negative tag id",
        encode(script([{"task_type": "vision_moveto", "tag_id": -1}])),
        "tasks[0].tag_id",
        "must be an integer >= 0",
    ),
    Case(
        "tag id beyond 32 bits",
        encode(script([{"task_type": "vision_moveto", "tag_id": 2**40}])),
        "tasks[0].tag_id",
        "must be an integer <= 2147483647",
    ),
    Case(
        "unknown scan pose",
        encode(script([{"task_type": "vision_moveto", "tag_id": 1, "scan_pose": "above"}])),
        "tasks[0].scan_pose",
        "pose 'above' is not in the script's poses",
    ),
    Case(
        "marker offset of 10 m",
        encode(script([{"task_type": "vision_moveto", "tag_id": 1, "marker_offset_z": 10}])),
        "tasks[0].marker_offset_z",
        "10 m is beyond the arm's reach",
    ),
    Case(
        "a timeout of 30 years",
        encode(script([{"task_type": "vision_moveto", "tag_id": 1, "timeout": 1e9}])),
        "tasks[0].timeout",
        "longer than a day",
    ),
    Case(
        "pick_sample grasping with the pipettor's role missing",
        encode(script([{"task_type": "pick_sample", "tag_id": 1, "terminal_action": "suck"}])),
        "tasks[0].terminal_action",
        "unknown gripper state 'suck'",
    ),
    Case(
        "pickup_vial with the ePick attached",
        encode(script([{"task_type": "pickup_vial", "row": 0, "col": 0, "pipettor_operation": "SUCK"}])),
        "tasks[0] (pickup_vial step 7)",
        "needs the pipettor attached",
    ),
    Case(
        "pickup_vial row out of range",
        encode(script([{"task_type": "pickup_vial", "row": 7, "col": 0}], start_gripper="pipettor")),
        "tasks[0]",
        "row=7, col=0 out of range",
    ),
    Case(
        "pickup_vial config not an object",
        encode(script([{"task_type": "pickup_vial", "config": [1]}], start_gripper="pipettor")),
        "tasks[0].config",
        "must be an object",
    ),
    Case(
        "pickup_tip row without col",
        encode(script([{"task_type": "pickup_tip", "row": 1}], start_gripper="pipettor")),
        "tasks[0]",
        "must provide both row and col",
    ),
    Case(
        "pickup_vial unknown operation",
        encode(script([{"task_type": "pickup_vial", "pipettor_operation": "MIX"}], start_gripper="pipettor")),
        "tasks[0].pipettor_operation",
        "unknown operation 'MIX'",
    ),
]

"""Script validation: every rule of docs/behaviour.md §1, each with the path it reports.

A rejected script moves nothing, so everything checkable is checked by the parser and
reported as one :class:`ScriptError` whose message starts with the path of the bad value.
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from erobs_bt.script.errors import ScriptError
from erobs_bt.script.limits import Limits
from erobs_bt.script.model import EndEffector, MoveTo, Pause, Pipettor, Script, ToolExchange, Vision
from erobs_bt.script.parse import DIRECTION_VECTORS, TASK_TYPES, parse_script
from erobs_bt.script.vocabulary import CellVocabulary

HOME = [0.0, -90.0, -90.0, -90.0, 90.0, 0.0]
POSES: dict[str, list[float]] = {
    "home": HOME,
    "a": [10.0, -80.0, -90.0, -90.0, 90.0, 0.0],
    "scan": [1, 2, 3, 4, 5, 6],
}


def doc(tasks: list[Any], *, start_gripper: Any = "epick", poses: Any = POSES, **extra: Any) -> str:
    body: dict[str, Any] = {"start_gripper": start_gripper, "tasks": tasks, **extra}
    if poses is not None:
        body["poses"] = poses
    return json.dumps(body, ensure_ascii=False)


def rejects(text: str | bytes, **kwargs: Any) -> ScriptError:
    with pytest.raises(ScriptError) as caught:
        parse_script(text, **kwargs)
    return caught.value


def move(**fields: Any) -> dict[str, Any]:
    return {"task_type": "moveto", **fields}


# -- the text ------------------------------------------------------------------------------
def test_invalid_json_keeps_the_erobs_prefix_and_has_no_path() -> None:
    error = rejects('{"start_gripper": "epick", "tasks": [')
    assert error.path == ""
    assert str(error).startswith("Invalid JSON: ")


def test_bytes_must_be_utf8() -> None:
    error = rejects(b'{"start_gripper": "\xff"}')
    assert str(error).startswith("Invalid JSON: the script is not UTF-8 text")


def test_bytes_with_a_utf8_bom_are_accepted() -> None:
    assert len(parse_script(b"\xef\xbb\xbf" + doc([move(target="home")]).encode()).steps) == 1


def test_an_empty_script_says_so_in_the_users_words() -> None:
    # Issue 27 (8): an empty file said "Goal missing required full_json", the name of a ROS
    # goal field a user of `erobs-bt validate` never sees.
    message = str(rejects("  "))
    assert message.startswith("the script is empty: expected a JSON object with 'start_gripper' and 'tasks'")
    assert "full_json" not in message and "Goal" not in message


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e400", "-2e999"])
def test_nan_and_infinity_are_rejected_inside_json_with_their_path(token: str) -> None:
    text = doc([move(target="home"), move(direction="up", distance=0.1)]).replace("0.1", token)
    error = rejects(text)
    assert error.path == "tasks[1].distance"
    assert "not a finite number" in error.reason


def test_non_finite_values_are_rejected_even_in_ignored_fields() -> None:
    error = rejects(doc([move(target="home")], run_name="x").replace('"x"', "NaN"))
    assert error.path == "run_name"


def test_duplicate_keys_are_rejected_with_the_object_path() -> None:
    text = '{"start_gripper": "epick", "tasks": [{"task_type": "moveto", "target": "a", "target": "b"}]}'
    error = rejects(text)
    assert error.path == "tasks[0]"
    assert "duplicate key 'target'" in error.reason


def test_a_script_over_the_byte_limit_is_rejected_before_parsing() -> None:
    text = doc([move(target="home")], run_name="x" * 2000)
    error = rejects(text, limits=Limits(max_script_bytes=1000))
    assert error.path == ""
    assert "limit is 1000 bytes (Limits.max_script_bytes)" in error.reason
    assert len(parse_script(text, limits=Limits(max_script_bytes=len(text))).steps) == 1


def test_the_byte_limit_counts_utf8_bytes_not_characters() -> None:
    text = doc([move(target="home")], run_name="é" * 600)
    assert len(text) < 1300 < len(text.encode())
    assert "Limits.max_script_bytes" in str(rejects(text, limits=Limits(max_script_bytes=1300)))


def test_the_default_byte_limit_is_one_mebibyte() -> None:
    text = doc([move(target="home")], run_name="x" * (1 << 20))
    assert "limit is 1048576 bytes" in str(rejects(text))


def test_deep_nesting_is_rejected_with_a_path() -> None:
    nested: Any = 0
    for _ in range(40):
        nested = [nested]
    error = rejects(doc([move(target="home")], run_name=nested))
    assert error.path.startswith("run_name[0]")
    assert "Limits.max_depth" in error.reason


def test_pathological_nesting_beyond_the_interpreter_limit_is_a_script_error() -> None:
    text = '{"start_gripper": "epick", "tasks": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert "Limits.max_depth" in str(rejects(text))


def test_integers_too_large_for_json_are_rejected_with_their_path() -> None:
    text = doc([move(direction="up", distance=0.5)]).replace("0.5", "9" * 5000)
    error = rejects(text)
    assert error.path == "tasks[0].distance"
    assert "5000 digits" in error.reason and "4300" not in str(error)


def test_integers_too_large_for_a_float_are_not_distances() -> None:
    text = doc([move(direction="up", distance=0.5)]).replace("0.5", "9" * 400)
    error = rejects(text)
    assert error.path == "tasks[0].distance"


# -- the envelope --------------------------------------------------------------------------
def test_the_root_must_be_an_object() -> None:
    assert str(rejects("[1, 2]")) == "Task script root must be an object"


def test_start_gripper_and_tasks_are_required() -> None:
    assert str(rejects('{"tasks": []}')) == "Task script missing 'start_gripper'"
    assert str(rejects('{"start_gripper": "epick"}')) == "Task script missing 'tasks'"


def test_start_gripper_must_be_a_string() -> None:
    error = rejects(doc([move(target="home")], start_gripper=True))
    assert (error.path, str(error)) == ("start_gripper", "start_gripper must be a string (got true)")


def test_an_unknown_start_gripper_lists_the_available_ones_in_erobs_words() -> None:
    error = rejects(doc([move(target="home")], start_gripper="foo"))
    assert error.path == "start_gripper"
    assert error.reason == "Unknown gripper: foo (available: none, hande, epick, 2fg7, pipettor)"


def vocabulary(grippers: dict[str, Any], **sections: Any) -> CellVocabulary:
    """A cell vocabulary from the cell-YAML sections it reads."""
    return CellVocabulary.from_document({"grippers": grippers, **sections}, source="cell.yaml")


def test_the_cell_gripper_list_is_configurable() -> None:
    error = rejects(doc([move(target="home")]), vocabulary=vocabulary({"none": {}, "hande": {}}))
    assert error.reason == "Unknown gripper: epick (available: none, hande)"


@pytest.mark.parametrize("tasks", [[], {}, "moveto", None])
def test_tasks_must_be_a_non_empty_list(tasks: Any) -> None:
    assert str(rejects(doc(tasks))) == "tasks must be a non-empty list"


def test_each_task_must_be_an_object() -> None:
    assert str(rejects(doc([move(target="home"), "pause"]))) == "tasks[1] must be an object"


@pytest.mark.parametrize("task_type", ["foo", None, 3, ["moveto"], "MoveTo"])
def test_an_unknown_task_type_lists_the_sorted_types(task_type: Any) -> None:
    error = rejects(doc([move(target="home")] * 3 + [{"task_type": task_type}]))
    assert error.path == "tasks[3].task_type"
    assert str(error).startswith(f"tasks[3].task_type must be one of: {', '.join(sorted(TASK_TYPES))} (got ")
    assert "pickup_vial" in str(error) and "pause" in str(error)


def test_the_envelope_keys_erobs_writes_are_ignored_and_not_part_of_the_key() -> None:
    one = parse_script(doc([move(target="home")], run_name="first", **{"$schema": "x.json"}))
    two = parse_script(doc([move(target="home")]))
    assert one.key_document() == two.key_document()
    # Any other key is ignored too, with a warning (issue 38, item 6), and out of the key.
    three = parse_script(doc([move(target="home")], operator={"who": "x"}))
    assert three.key_document() == two.key_document()
    assert three.warnings[0].startswith("operator: unknown field of the script, ignored")


def test_inline_poses_are_validated_with_their_path() -> None:
    bad = {**POSES, "home": [0, -90, True, -90, 90, 0]}
    error = rejects(doc([move(target="home")], poses=bad))
    assert error.path == "poses.home[2]"
    assert "got true" in error.reason
    short = rejects(doc([move(target="home")], poses={"home": [0, 1, 2]}))
    assert short.path == "poses.home" and "got 3 values" in short.reason
    assert short.reason.startswith("Invalid pose format: ")  # EROBS's words (its agent's error table)


def test_the_pose_count_is_limited() -> None:
    poses = {f"p{i}": HOME for i in range(11)}
    error = rejects(doc([move(target="p0")], poses=poses), limits=Limits(max_poses=10))
    assert error.path == "poses" and "Limits.max_poses" in error.reason


# -- moveto --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fields",
    [
        {"target": "moveit_home", "direction": "forward", "distance": 0.05},
        {"target": "home", "cartesian_target": [0.3, 0.0, 0.4]},
        {"direction": "up", "distance": 0.1, "cartesian_target": [0.3, 0.0, 0.4]},
        {},
        {"target": "", "direction": "", "distance": 0, "cartesian_target": []},
    ],
)
def test_moveto_needs_exactly_one_mode(fields: dict[str, Any]) -> None:
    error = rejects(doc([move(**fields)]))
    # EROBS's text first; with several modes, what to keep follows (test_moveto_modes.py).
    assert str(error).startswith(
        "tasks[0]: MoveTo goal must specify exactly one of target, direction/distance, or cartesian_target"
    )
    assert ("; this step gives " in str(error)) == (len([v for v in fields.values() if v]) > 1)


def test_empty_mode_fields_count_as_absent_as_in_erobs() -> None:
    script = parse_script(doc([move(target="", direction="down", distance=0.01, cartesian_target=[])]))
    step = script.steps[0]
    assert isinstance(step, MoveTo) and step.direction_vector == (0.0, 0.0, -1.0)


@pytest.mark.parametrize(
    ("direction", "vector"),
    [
        ("forward", (1, 0, 0)),
        ("x", (1, 0, 0)),
        ("backward", (-1, 0, 0)),
        ("-x", (-1, 0, 0)),
        ("right", (0, -1, 0)),
        ("y", (0, -1, 0)),
        ("left", (0, 1, 0)),
        ("-y", (0, 1, 0)),
        ("up", (0, 0, 1)),
        ("z", (0, 0, 1)),
        ("down", (0, 0, -1)),
        ("-z", (0, 0, -1)),
    ],
)
def test_directions_become_unit_vectors_in_the_flange_frame(direction: str, vector: tuple[int, ...]) -> None:
    step = parse_script(doc([move(direction=direction, distance=0.25)])).steps[0]
    assert isinstance(step, MoveTo)
    assert step.direction == direction
    assert step.direction_vector == tuple(float(c) for c in vector)
    assert step.distance == 0.25 and step.target is None and step.cartesian_target is None


def test_an_unknown_direction_names_the_field() -> None:
    error = rejects(doc([move(direction="sideways", distance=0.1)]))
    assert error.path == "tasks[0].direction"
    assert error.reason.startswith("Unknown MoveTo direction: 'sideways'")
    assert rejects(doc([move(distance=0.1)])).path == "tasks[0].direction"


@pytest.mark.parametrize("distance", [-0.1, True, "0.1", [0.1]])
def test_distance_must_be_a_finite_positive_number(distance: Any) -> None:
    error = rejects(doc([move(target="home"), move(direction="up", distance=distance)]))
    assert error.path == "tasks[1].distance"
    assert error.reason.startswith("MoveTo distance must be a finite number greater than zero")


def test_a_direction_without_distance_is_reported_at_the_distance() -> None:
    assert rejects(doc([move(direction="up")])).path == "tasks[0].distance"


def test_a_boolean_distance_is_not_zero_and_not_a_number() -> None:
    # EROBS treats ``false == 0``; here a boolean is never a number, so it cannot hide.
    assert rejects(doc([move(target="home", distance=False)])).path == "tasks[0]"


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("", "auto"),
        ("auto", "auto"),
        ("joint", "auto"),
        ("cartesian", "cartesian"),
        ("pilz", "pilz"),
        ("pilz_ptp", "pilz_ptp"),
    ],
)
def test_planning_types_are_canonical(given: str, canonical: str) -> None:
    step = parse_script(doc([move(target="home", planning_type=given)])).steps[0]
    assert isinstance(step, MoveTo) and step.planning_type == canonical
    assert step.spec["planning_type"] == given, "spec keeps what was written"


def test_planning_type_defaults_to_auto_without_adding_it_to_the_spec() -> None:
    step = parse_script(doc([move(target="home")])).steps[0]
    assert isinstance(step, MoveTo) and step.planning_type == "auto"
    assert "planning_type" not in step.spec


@pytest.mark.parametrize("planning_type", ["ompl", "JOINT", None, 1])
def test_an_unknown_planning_type_is_rejected(planning_type: Any) -> None:
    error = rejects(doc([move(target="home", planning_type=planning_type)]))
    assert error.path == "tasks[0].planning_type"
    assert error.reason.startswith("Unknown MoveTo planning_type: ")


def test_a_named_target_resolves_to_radians() -> None:
    step = parse_script(doc([move(target="a")])).steps[0]
    assert isinstance(step, MoveTo) and step.target == "a"
    assert step.target_joints == pytest.approx(tuple(math.radians(d) for d in POSES["a"]))


def test_a_target_that_is_no_pose_is_a_named_state_of_the_cell() -> None:
    step = parse_script(doc([move(target="moveit_home")])).steps[0]
    assert isinstance(step, MoveTo) and step.target == "moveit_home" and step.target_joints is None


def test_a_target_that_is_neither_a_pose_nor_a_named_state_is_rejected() -> None:
    cell = vocabulary({"none": {}, "epick": {}}, named_states_deg={"park": [0, -90, 0, 0, 0, 0]})
    ok = parse_script(doc([move(target="park")]), vocabulary=cell)
    assert ok.steps[0].path == "tasks[0]"
    error = rejects(doc([move(target="home"), move(target="moveit_home")]), vocabulary=cell)
    assert error.path == "tasks[1].target"
    assert "'moveit_home'" in error.reason and "park" in error.reason
    packaged = rejects(doc([move(target="nowhere_pose")]))
    assert packaged.path == "tasks[0].target" and "moveit_home" in packaged.reason


def test_a_target_must_be_a_non_empty_string() -> None:
    error = rejects(doc([move(target=5)]))
    assert (error.path, error.reason) == ("tasks[0].target", "MoveTo target must be a non-empty string")
    assert rejects(doc([move(target="   ")])).path == "tasks[0].target"


def test_a_three_number_cartesian_target_is_metres_in_base_link() -> None:
    step = parse_script(doc([move(cartesian_target=[0.3, -0.2, 0.4])])).steps[0]
    assert isinstance(step, MoveTo)
    assert step.cartesian_target == (0.3, -0.2, 0.4) and step.frame_id == "base_link"


def test_a_six_number_cartesian_target_converts_roll_pitch_yaw_to_radians() -> None:
    step = parse_script(doc([move(cartesian_target=[0.3, -0.2, 0.4, 180, 0, -90], frame_id="world")])).steps[
        0
    ]
    assert isinstance(step, MoveTo) and step.frame_id == "world"
    assert step.cartesian_target == pytest.approx((0.3, -0.2, 0.4, math.pi, 0.0, -math.pi / 2))


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ([0.3, 0.2], "tasks[0].cartesian_target"),
        ([0.3, 0.2, 0.1, 0.0], "tasks[0].cartesian_target"),
        ([0.3, True, 0.1], "tasks[0].cartesian_target[1]"),
        ([0.3, 0.2, "0.1"], "tasks[0].cartesian_target[2]"),
        ({"x": 1}, "tasks[0].cartesian_target"),
    ],
)
def test_cartesian_targets_need_three_or_six_finite_numbers(value: Any, path: str) -> None:
    error = rejects(doc([move(cartesian_target=value)]))
    assert error.path == path
    assert error.reason.startswith("MoveTo cartesian_target must contain exactly 3 or 6 finite numbers")


def test_frame_id_must_be_a_non_empty_string() -> None:
    assert rejects(doc([move(cartesian_target=[0, 0, 0.5], frame_id="")])).path == "tasks[0].frame_id"


def test_constraints_are_read_in_degrees_and_stored_in_radians() -> None:
    constraints = {
        "joint_constraints": [
            {"joint_name": "wrist_3_joint", "position": 90.0, "tolerance_above": 5.0, "tolerance_below": 10.0}
        ],
        "orientation_constraints": [
            {"link_name": "flange", "orientation": [180, 0, 90], "tolerance": [5, 5, 360], "weight": 1.0}
        ],
    }
    step = parse_script(doc([move(target="home", constraints=constraints)])).steps[0]
    assert isinstance(step, MoveTo) and step.constraints is not None
    (joint,) = step.constraints.joint
    assert joint.joint_name == "wrist_3_joint"
    assert (joint.position, joint.tolerance_above, joint.tolerance_below) == pytest.approx(
        (math.pi / 2, math.radians(5), math.radians(10))
    )
    (orientation,) = step.constraints.orientation
    assert orientation.frame_id == "base_link"
    assert orientation.absolute_tolerance == pytest.approx((math.radians(5), math.radians(5), 2 * math.pi))
    expected = Rotation.from_euler("xyz", [180, 0, 90], degrees=True).as_quat()
    assert orientation.orientation is not None
    assert abs(
        float(sum(a * b for a, b in zip(orientation.orientation, expected, strict=True)))
    ) == pytest.approx(1.0)


def test_constraint_defaults_follow_erobs() -> None:
    constraints = {
        "joint_constraints": [{"joint_name": "elbow_joint", "position": 0}],
        "orientation_constraints": [{"link_name": "flange"}],
    }
    step = parse_script(doc([move(target="home", constraints=constraints)])).steps[0]
    assert isinstance(step, MoveTo) and step.constraints is not None
    assert step.constraints.joint[0].tolerance_above == pytest.approx(math.radians(1.0))
    assert step.constraints.orientation[0].absolute_tolerance == pytest.approx((math.radians(5),) * 3)
    assert step.constraints.orientation[0].orientation is None, "no orientation: keep the start one"
    empty = parse_script(doc([move(target="home", constraints={})])).steps[0]
    assert isinstance(empty, MoveTo) and empty.constraints is None


@pytest.mark.parametrize(
    ("constraints", "path"),
    [
        ({"position_constraints": []}, "tasks[0].constraints.position_constraints"),
        ({"joint_constraints": {}}, "tasks[0].constraints.joint_constraints"),
        ({"joint_constraints": [{"joint_name": "wrist_4_joint", "position": 0}]}, "joint_name"),
        ({"joint_constraints": [{"joint_name": "elbow_joint", "position": True}]}, "position"),
        (
            {"joint_constraints": [{"joint_name": "elbow_joint", "position": 0, "tolerance_above": -1}]},
            "tolerance_above",
        ),
        ({"orientation_constraints": [{"frame_id": "base_link"}]}, "link_name"),
        ({"orientation_constraints": [{"link_name": "flange", "orientation": [0, 0]}]}, "orientation"),
        ({"orientation_constraints": [{"link_name": "flange", "tolerance": [1, 1, "x"]}]}, "tolerance[2]"),
        ({"orientation_constraints": [{"link_name": "flange", "weight": -2}]}, "weight"),
    ],
)
def test_bad_constraints_name_their_path(constraints: dict[str, Any], path: str) -> None:
    error = rejects(doc([move(target="home", constraints=constraints)]))
    assert error.path.endswith(path), error


# -- end_effector and the tracked gripper ---------------------------------------------------
def ee(action: Any, gripper: Any = None) -> dict[str, Any]:
    task = {"task_type": "end_effector", "end_effector_action": action}
    if gripper is not None:
        task["end_effector_type"] = gripper
    return task


def test_end_effector_actions_must_match_the_attached_gripper() -> None:
    script = parse_script(doc([ee("vacuum_on"), ee("vacuum_off", "epick")]))
    assert [(s.action, s.gripper) for s in script.steps if isinstance(s, EndEffector)] == [
        ("vacuum_on", None),
        ("vacuum_off", "epick"),
    ]
    error = rejects(doc([ee("hande_open")]))
    assert error.path == "tasks[0].end_effector_action"
    assert "'hande_open' for 'epick'" in error.reason and "vacuum_off, vacuum_on" in error.reason


@pytest.mark.parametrize(
    ("gripper", "valid", "invalid"),
    [
        ("hande", "hande_closed", "vacuum_on"),
        ("2fg7", "2fg7_open", "hande_open"),
        ("epick", "vacuum_off", "open"),
    ],
)
def test_each_gripper_has_its_own_states(gripper: str, valid: str, invalid: str) -> None:
    assert parse_script(doc([ee(valid)], start_gripper=gripper)).steps
    assert rejects(doc([ee(invalid)], start_gripper=gripper)).path == "tasks[0].end_effector_action"


@pytest.mark.parametrize("gripper", ["none", "pipettor"])
def test_a_gripper_without_a_group_accepts_any_action_as_a_no_op(gripper: str) -> None:
    step = parse_script(doc([ee("vacuum_on")], start_gripper=gripper)).steps[0]
    assert isinstance(step, EndEffector) and step.action == "vacuum_on"


def test_an_end_effector_without_a_type_is_checked_against_the_gripper_of_that_moment() -> None:
    tasks = [
        ee("vacuum_on"),
        {"task_type": "tool_exchange", "operation": "dock", "gripper": "epick", "dock_number": 4},
        {"task_type": "tool_exchange", "operation": "load", "gripper": "hande", "dock_number": 3},
        ee("hande_closed"),
        ee("vacuum_off"),
    ]
    error = rejects(doc(tasks))
    assert error.path == "tasks[4].end_effector_action"
    assert "for 'hande'" in error.reason
    assert len(parse_script(doc(tasks[:4])).steps) == 4


def test_an_explicit_end_effector_type_must_be_attached_and_known() -> None:
    error = rejects(doc([ee("hande_open", "hande")]))
    assert error.path == "tasks[0].end_effector_type"
    assert "requires gripper 'hande', but the current gripper is 'epick'" in error.reason
    unknown = rejects(doc([ee("x", "suction")]))
    assert unknown.path == "tasks[0].end_effector_type" and unknown.reason.startswith(
        "Unknown gripper: suction"
    )


@pytest.mark.parametrize("action", [None, "", 3, True])
def test_an_end_effector_action_is_required(action: Any) -> None:
    assert rejects(doc([ee(action)])).path == "tasks[0].end_effector_action"


def test_custom_grippers_bring_their_states_from_the_cell() -> None:
    cell = vocabulary(
        {"none": {}, "vacuum2": {"actions": ["suck", "blow"], "roles": {"grasp": "suck", "release": "blow"}}}
    )
    assert parse_script(doc([ee("blow")], start_gripper="vacuum2"), vocabulary=cell).steps
    assert rejects(doc([ee("vacuum_on")], start_gripper="vacuum2"), vocabulary=cell).path.endswith("action")
    grasp = parse_script(
        doc([{"task_type": "pick_sample", "tag_id": 1}], start_gripper="vacuum2"), vocabulary=cell
    )
    assert grasp.steps[0].terminal_action == "suck"  # type: ignore[attr-defined]


# -- tool_exchange ----------------------------------------------------------------------------
def exchange(operation: Any, gripper: Any, dock: Any = 4, **extra: Any) -> dict[str, Any]:
    return {
        "task_type": "tool_exchange",
        "operation": operation,
        "gripper": gripper,
        "dock_number": dock,
        **extra,
    }


def test_a_tool_exchange_resolves_its_approach_pose() -> None:
    step = parse_script(doc([exchange("dock", "epick", approach_pose="a")])).steps[0]
    assert isinstance(step, ToolExchange)
    assert (step.operation, step.gripper, step.dock_number, step.approach_pose) == ("dock", "epick", 4, "a")
    assert step.approach_joints == pytest.approx(tuple(math.radians(d) for d in POSES["a"]))


def test_dock_requires_the_gripper_that_is_attached() -> None:
    error = rejects(doc([exchange("dock", "hande")]))
    assert error.path == "tasks[0].gripper"
    assert "cannot dock 'hande': the current gripper is 'epick'" in error.reason


def test_dock_with_nothing_attached_is_rejected() -> None:
    assert rejects(doc([exchange("dock", "none")], start_gripper="none")).path == "tasks[0].operation"


def test_load_requires_no_gripper_attached_tracked_through_the_script() -> None:
    error = rejects(doc([move(target="home"), exchange("load", "pipettor", 2)]))
    assert error.path == "tasks[1].gripper"
    assert "'epick' is still attached" in error.reason
    tasks = [exchange("dock", "epick"), exchange("load", "pipettor", 2), exchange("load", "hande", 3)]
    late = rejects(doc(tasks))
    assert late.path == "tasks[2].gripper" and "'pipettor' is still attached" in late.reason


def test_loading_none_is_not_a_load() -> None:
    assert rejects(doc([exchange("load", "none")], start_gripper="none")).path == "tasks[0].gripper"


@pytest.mark.parametrize(
    ("task", "path"),
    [
        (exchange("swap", "epick"), "tasks[0].operation"),
        (exchange("dock", "foo"), "tasks[0].gripper"),
        (exchange("dock", "epick", 0), "tasks[0].dock_number"),
        (exchange("dock", "epick", 2.0), "tasks[0].dock_number"),
        (exchange("dock", "epick", True), "tasks[0].dock_number"),
        ({"task_type": "tool_exchange", "operation": "dock", "gripper": "epick"}, "tasks[0].dock_number"),
        (exchange("dock", "epick", approach_pose="nowhere"), "tasks[0].approach_pose"),
        (exchange("dock", "epick", approach_pose=7), "tasks[0].approach_pose"),
    ],
)
def test_bad_tool_exchanges_name_their_field(task: dict[str, Any], path: str) -> None:
    assert rejects(doc([task])).path == path


def test_an_unknown_tool_exchange_gripper_uses_the_erobs_text() -> None:
    assert rejects(doc([exchange("dock", "foo")])).reason.startswith("Unknown gripper: foo (available: ")


# -- pipettor and pause ------------------------------------------------------------------------
def test_pipettor_commands_carry_volume_and_colour() -> None:
    tasks = [
        {"task_type": "pipettor", "operation": "SUCK", "volume_pct": 1},
        {"task_type": "pipettor", "operation": "EJECT_TIP"},
        {"task_type": "pipettor", "operation": "SET_LED", "led_color": {"r": 1, "g": 0.5, "b": 0}},
    ]
    steps = parse_script(doc(tasks, start_gripper="pipettor")).steps
    assert [(s.operation, s.volume_pct, s.led_color) for s in steps if isinstance(s, Pipettor)] == [
        ("SUCK", 1.0, None),
        ("EJECT_TIP", None, None),
        ("SET_LED", None, (1.0, 0.5, 0.0)),
    ]


def test_an_led_alpha_is_accepted_and_unused_as_in_erobs() -> None:
    """EROBS reads r, g, b and always sends a = 1.0; beamtime scripts carry an ``a``."""
    with_alpha = {
        "task_type": "pipettor",
        "operation": "SET_LED",
        "led_color": {"r": 0, "g": 1, "b": 0, "a": 0.5},
    }
    (step,) = parse_script(doc([with_alpha], start_gripper="pipettor")).steps
    assert isinstance(step, Pipettor) and step.led_color == (0.0, 1.0, 0.0)


@pytest.mark.parametrize(
    ("task", "path"),
    [
        ({"operation": "suck"}, "tasks[0].operation"),
        ({"operation": "SUCK", "volume_pct": 1.5}, "tasks[0].volume_pct"),
        ({"operation": "SUCK", "volume_pct": -0.1}, "tasks[0].volume_pct"),
        ({"operation": "SUCK", "volume_pct": True}, "tasks[0].volume_pct"),
        ({"operation": "SET_LED"}, "tasks[0].led_color"),
        ({"operation": "SET_LED", "led_color": {"r": 1, "g": 0}}, "tasks[0].led_color.b"),
        ({"operation": "SET_LED", "led_color": {"r": 1, "g": 0, "b": 2}}, "tasks[0].led_color.b"),
        ({"operation": "SET_LED", "led_color": {"r": 1, "g": 0, "b": 0, "a": 2}}, "tasks[0].led_color.a"),
        ({"operation": "SET_LED", "led_color": {"r": 1, "g": 0, "b": 0, "a": "1"}}, "tasks[0].led_color.a"),
        ({"operation": "SET_LED", "led_color": {"r": 1, "g": 0, "b": 0, "w": 1}}, "tasks[0].led_color.w"),
        ({"operation": "SET_LED", "led_color": [1, 0, 0]}, "tasks[0].led_color"),
    ],
)
def test_bad_pipettor_fields_name_their_path(task: dict[str, Any], path: str) -> None:
    assert rejects(doc([{"task_type": "pipettor", **task}], start_gripper="pipettor")).path == path


def test_pause_has_no_fields_and_no_timer() -> None:
    step = parse_script(doc([{"task_type": "pause"}])).steps[0]
    assert isinstance(step, Pause) and not step.is_motion
    error = rejects(doc([{"task_type": "pause", "duration": 5}]))
    assert error.path == "tasks[0].duration" and "no timer" in error.reason


# -- the vision family -------------------------------------------------------------------------
def test_pick_sample_runs_with_its_preset_under_the_given_fields() -> None:
    task = {
        "task_type": "pick_sample",
        "tag_id": 3,
        "scan_pose": "scan",
        "marker_offset_x": 0.02,
        "z_offset": -0.001,
        "offset_direction": "right",
        "offset_distance": 0.05,
    }
    step = parse_script(doc([task])).steps[0]
    assert isinstance(step, Vision) and step.task_type == "vision" and step.kind == "pick_sample"
    assert (step.detector, step.goal_computer, step.tag_id) == ("marker", "approach_pose", 3)
    assert step.terminal_action == "vacuum_on", "grasp resolves to the attached ePick's state"
    assert step.pre_open and step.retreat_pose == "scan"
    assert step.scan_poses == ("scan",) and step.scan_joints[0] == pytest.approx(to_rad(POSES["scan"]))
    assert step.marker_offset == (0.02, 0.0, 0.0) and step.z_offset == -0.001
    assert step.offset_vector == DIRECTION_VECTORS["right"] and step.offset_distance == 0.05
    assert dict(step.spec) == task


def to_rad(degrees: list[float]) -> tuple[float, ...]:
    return tuple(math.radians(d) for d in degrees)


def test_spincoater_presets_need_their_default_poses() -> None:
    error = rejects(doc([{"task_type": "place_spincoater"}]))
    assert error.path == "tasks[0].scan_pose"
    assert "default pose 'spincoater_scan' of place_spincoater" in error.reason
    poses = {**POSES, "spincoater_scan": HOME, "spincoater_place": HOME}
    step = parse_script(doc([{"task_type": "place_spincoater"}], poses=poses)).steps[0]
    assert isinstance(step, Vision)
    assert (step.detector, step.goal_computer, step.terminal_action) == (
        "spincoater_pocket",
        "j6_snap",
        "vacuum_off",
    )
    assert (step.target_pose, step.forward_distance) == ("spincoater_place", 0.003)
    placed = parse_script(doc([{"task_type": "place_spincoater", "place_pose": "a"}], poses=poses)).steps[0]
    assert isinstance(placed, Vision) and placed.target_pose == "a"


def test_vision_scan_needs_scan_positions_and_resolves_each() -> None:
    assert rejects(doc([{"task_type": "vision_scan"}])).path == "tasks[0].scan_positions"
    error = rejects(doc([{"task_type": "vision_scan", "scan_positions": ["scan", "lost"]}]))
    assert error.path == "tasks[0].scan_positions[1]" and "'lost'" in error.reason
    step = parse_script(
        doc([{"task_type": "vision_scan", "scan_positions": ["scan", "a"], "scans_per_position": 3}])
    )
    vision = step.steps[0]
    assert isinstance(vision, Vision) and vision.scan_poses == ("scan", "a")
    assert vision.params["scans_per_position"] == 3


def test_a_vision_terminal_action_must_suit_the_gripper() -> None:
    hande = parse_script(doc([{"task_type": "pick_sample", "tag_id": 1}], start_gripper="hande")).steps[0]
    assert isinstance(hande, Vision) and hande.terminal_action == "hande_closed", (
        "grasp means the Hand-E's close"
    )
    explicit = rejects(
        doc(
            [{"task_type": "vision_moveto", "tag_id": 1, "terminal_action": "vacuum_on"}],
            start_gripper="hande",
        )
    )
    assert explicit.path == "tasks[0].terminal_action"
    preset = rejects(
        doc(
            [{"task_type": "pick_spincoater", "scan_pose": "scan", "pickup_pose": "a"}], start_gripper="hande"
        )
    )
    assert preset.path == "tasks[0]" and "pick_spincoater ends with 'vacuum_on'" in preset.reason


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"tag_id": -1}, "tasks[0].tag_id"),
        ({"tag_id": True}, "tasks[0].tag_id"),
        ({"marker_offset_x": "0.1"}, "tasks[0].marker_offset_x"),
        ({"z_offset": False}, "tasks[0].z_offset"),
        ({"detect_only": 1}, "tasks[0].detect_only"),
        ({"offset_direction": "sideways", "offset_distance": 0.1}, "tasks[0].offset_direction"),
        ({"offset_direction": "up", "offset_distance": 0}, "tasks[0].offset_distance"),
        ({"offset_direction": 3}, "tasks[0].offset_direction"),
        ({"scan_positions": "scan"}, "tasks[0].scan_positions"),
        ({"timeout": 0}, "tasks[0].timeout"),
        ({"gripper": "hande"}, "tasks[0].gripper"),
        ({"detector": ""}, "tasks[0].detector"),
    ],
)
def test_bad_vision_fields_name_their_path(fields: dict[str, Any], path: str) -> None:
    assert rejects(doc([{"task_type": "vision_moveto", **fields}])).path == path


def test_a_hard_coded_pick_needs_a_target_pose() -> None:
    assert rejects(doc([{"task_type": "pick_sample", "use_vision": False}])).path == "tasks[0].target_pose"
    task = {"task_type": "pick_sample", "use_vision": False, "approach_pose": "a", "target_pose": "home"}
    step = parse_script(doc([task])).steps[0]
    assert isinstance(step, Vision) and not step.use_vision
    assert step.target_joints == pytest.approx(to_rad(HOME)) and step.approach_pose == "a"


# -- limits on the expanded script -------------------------------------------------------------
def test_too_many_steps_are_rejected_at_the_task_that_exceeds_the_limit() -> None:
    tasks = [move(target="home")] * 6
    error = rejects(doc(tasks), limits=Limits(max_steps=5))
    assert error.path == "tasks[5]" and "more than 5 steps (Limits.max_steps)" in error.reason
    assert len(parse_script(doc(tasks[:5]), limits=Limits(max_steps=5)).steps) == 5


def test_the_step_limit_applies_after_macro_expansion() -> None:
    tasks = [move(target="home"), {"task_type": "pickup_tip", "element_index": 0}]
    error = rejects(doc(tasks, start_gripper="pipettor"), limits=Limits(max_steps=6))
    assert error.path == "tasks[1]" and "Limits.max_steps" in error.reason


def test_limits_reject_nonsense_values() -> None:
    with pytest.raises(ValueError, match="max_steps"):
        Limits(max_steps=0)


# -- the spec and the key ---------------------------------------------------------------------
def test_specs_are_the_steps_as_written_and_make_the_key() -> None:
    tasks = [move(target="home", planning_type="joint"), ee("vacuum_on")]
    script = parse_script(doc(tasks))
    assert [dict(s.spec) for s in script.steps] == tasks
    key = json.loads(script.key_document())
    assert key == {"steps": tasks, "poses": {"home": HOME}}


# -- properties --------------------------------------------------------------------------------
coordinate = st.floats(min_value=-1.7, max_value=1.7, allow_nan=False, allow_infinity=False)
angle = st.floats(min_value=-360.0, max_value=360.0, allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=1e-6, max_value=1.7, allow_nan=False)
pose_names = st.sampled_from(sorted(POSES))
moveto_tasks = st.one_of(
    st.builds(
        lambda t, p: move(target=t, planning_type=p),
        pose_names,
        st.sampled_from(["", "auto", "joint", "pilz"]),
    ),
    st.builds(
        lambda d, x: move(direction=d, distance=x), st.sampled_from(sorted(DIRECTION_VECTORS)), positive
    ),
    st.builds(
        lambda xs: move(cartesian_target=xs),
        st.lists(coordinate, min_size=3, max_size=3)
        | st.tuples(coordinate, coordinate, coordinate, angle, angle, angle).map(list),
    ),
)


@given(st.lists(moveto_tasks, min_size=1, max_size=20))
@settings(max_examples=150, deadline=None)
def test_random_valid_moveto_scripts_round_trip(tasks: list[dict[str, Any]]) -> None:
    script = parse_script(doc(tasks))
    assert isinstance(script, Script) and len(script.steps) == len(tasks)
    for step, task in zip(script.steps, tasks, strict=True):
        assert isinstance(step, MoveTo) and dict(step.spec) == task
        if "target" in task:
            assert step.target_joints == pytest.approx(to_rad(POSES[task["target"]]))
        elif "direction" in task:
            assert step.direction_vector == DIRECTION_VECTORS[task["direction"]]
            assert step.distance == task["distance"]
        else:
            xs = task["cartesian_target"]
            assert step.cartesian_target == pytest.approx(tuple(xs[:3]) + to_rad(xs[3:]))
    used = {task["target"] for task in tasks if "target" in task}
    assert set(script.poses) == used
    reordered = json.dumps(
        {"tasks": [dict(reversed(list(t.items()))) for t in tasks], "start_gripper": "epick", "poses": POSES},
        indent=3,
    )
    assert parse_script(reordered).key_document() == script.key_document()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
fields = st.sampled_from(
    [
        "task_type",
        "target",
        "direction",
        "distance",
        "cartesian_target",
        "planning_type",
        "constraints",
        "end_effector_action",
        "end_effector_type",
        "operation",
        "gripper",
        "dock_number",
        "approach_pose",
        "volume_pct",
        "led_color",
        "tag_id",
        "scan_positions",
        "scan_pose",
        "config",
        "row",
        "col",
        "element_index",
        "pipettor_operation",
        "offset_direction",
        "offset_distance",
        "terminal_action",
    ]
)
task_types = st.sampled_from(TASK_TYPES)


def only_script_errors(text: str | bytes) -> None:
    """Parse ``text``; a ScriptError is an acceptable outcome, any other exception fails."""
    with contextlib.suppress(ScriptError):
        parse_script(text)


@given(st.binary(max_size=200) | st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_random_text_never_raises_anything_but_script_error(text: str | bytes) -> None:
    only_script_errors(text)


@given(json_values)
@settings(max_examples=200, deadline=None)
def test_random_json_never_raises_anything_but_script_error(value: Any) -> None:
    only_script_errors(json.dumps(value))


@pytest.mark.slow
@given(
    st.lists(
        st.builds(
            lambda t, extra: {"task_type": t, **extra},
            task_types,
            st.dictionaries(fields, json_values, max_size=5),
        ),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from(["epick", "pipettor", "none", "hande"]),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_tasks_never_raise_anything_but_script_error(
    tasks: list[dict[str, Any]], gripper: str
) -> None:
    only_script_errors(doc(tasks, start_gripper=gripper))


# -- issue 27 (5): mistakes that were accepted silently --------------------------------
def test_a_misspelled_optional_field_is_an_error_naming_the_field_it_resembles() -> None:
    error = rejects(doc([{"task_type": "moveto", "target": "home", "planing_type": "cartesian"}]))
    assert error.path == "tasks[0].planing_type"
    assert "unknown field of moveto; did you mean 'planning_type'?" in str(error)


def test_a_misspelling_lists_the_fields_of_the_task_type() -> None:
    error = rejects(
        doc([{"task_type": "moveto", "target": "home"}, {"task_type": "moveto", "target": "a", "tagret": 2}])
    )
    assert error.path == "tasks[1].tagret"
    assert (
        "did you mean 'target'? (allowed: cartesian_target, constraints, direction, distance, frame_id, "
        "planning_type, target" in str(error)
    )


def test_an_unknown_field_that_is_no_misspelling_is_ignored_with_a_warning() -> None:
    script = parse_script(
        doc([{"task_type": "moveto", "target": "home"}, {"task_type": "moveto", "target": "a", "speed": 2}])
    )
    assert script.warnings[0].startswith("tasks[1].speed: unknown field of moveto, ignored")
    assert "speed" not in script.steps[1].spec


def test_a_misspelled_script_key_is_an_error_but_the_keys_erobs_writes_are_ignored() -> None:
    error = rejects(doc([{"task_type": "pause"}], poses=None, pose={"x": HOME}))
    assert error.path == "pose" and "did you mean 'poses'?" in str(error)
    script = parse_script(
        doc([{"task_type": "pause"}], run_name="oscan", **{"$schema": "./erobs.schema.json", "$comment": "x"})
    )
    assert len(script.steps) == 1


def test_the_task_fields_erobs_writes_are_accepted_and_ignored() -> None:
    # EROBS's task editor writes the rack element's name beside row/col, and the camera's
    # ArUco dictionary into vision steps (EROBS src/mtc_gui/mtc_gui/main_window.py).
    script = parse_script(
        doc(
            [
                {
                    "task_type": "vision_moveto",
                    "tag_id": 0,
                    "scan_pose": "scan",
                    "marker_dictionary": "aruco4x4_50",
                },
                {"task_type": "moveto", "target": "home"},
            ]
        )
    )
    assert [step.script_type for step in script.steps] == ["vision_moveto", "moveto"]
    from erobs_bt.plan import DEFAULT_POSES_PATH
    from erobs_bt.script.poses import PoseRegistry

    registry = PoseRegistry.load(DEFAULT_POSES_PATH)
    with_position = parse_script(
        doc([{"task_type": "pickup_tip", "row": 0, "col": 3, "position": "A4"}], start_gripper="pipettor"),
        registry=registry,
    )
    without = parse_script(
        doc([{"task_type": "pickup_tip", "row": 0, "col": 3}], start_gripper="pipettor"), registry=registry
    )
    assert len(with_position.steps) == len(without.steps)


def test_the_task_type_error_shows_the_bad_value_and_the_closest_type() -> None:
    error = rejects(doc([{"task_type": "movto", "target": "home"}]))
    assert str(error).startswith("tasks[0].task_type must be one of: ")  # EROBS's text, kept
    assert str(error).endswith("(got 'movto'; did you mean 'moveto'?)")
    assert str(rejects(doc([{"task_type": 7}]))).endswith("(got 7)")


def test_a_pose_that_looks_like_radians_is_a_warning() -> None:
    radians = [1.2, -1.57, 0.5, -1.0, -1.57, 0.0]
    script = parse_script(doc([{"task_type": "moveto", "target": "grab"}], poses={"grab": radians}))
    assert script.warnings == (
        "poses.grab: every angle is within ±2π ([1.2, -1.57, 0.5, -1, -1.57, 0]); poses are in degrees and "
        "these look like radians",
    )
    # Degrees, and the all-zero pose (valid in either unit): no warning.
    quiet = parse_script(
        doc(
            [{"task_type": "moveto", "target": "home"}, {"task_type": "moveto", "target": "zero"}],
            poses={"home": HOME, "zero": [0, 0, 0, 0, 0, 0]},
        )
    )
    assert quiet.warnings == ()


def test_a_registry_pose_that_looks_like_radians_is_a_warning_naming_the_registry() -> None:
    from erobs_bt.script.poses import PoseRegistry

    registry = PoseRegistry.from_mapping(
        {"grab": [0.1, -1.5, 1.2, -1.2, -1.57, 0.3]}, source="cms_poses.yaml"
    )
    script = parse_script(doc([{"task_type": "moveto", "target": "grab"}], poses=None), registry=registry)
    assert len(script.warnings) == 1 and script.warnings[0].startswith("cms_poses.yaml: grab: every angle")


def test_radian_roll_pitch_yaw_of_a_cartesian_target_is_a_warning() -> None:
    script = parse_script(
        doc(
            [
                {"task_type": "moveto", "cartesian_target": [0.3, -0.2, 0.4, 180, 0, -90]},
                {"task_type": "moveto", "cartesian_target": [0.3, -0.2, 0.4, 3.14, 0, 1.57]},
                {
                    "task_type": "moveto",
                    "target": "home",
                    "constraints": {
                        "orientation_constraints": [
                            {"link_name": "tool0", "orientation": [180, 0, 0]},
                            {"link_name": "tool0", "orientation": [3.14, 0, 0]},
                        ]
                    },
                },
            ]
        )
    )
    assert script.warnings == (
        "tasks[1].cartesian_target: roll, pitch and yaw are within ±2π ([3.14, 0, 1.57]); they are in "
        "degrees and these look like radians",
        "tasks[2].constraints.orientation_constraints[1].orientation: roll, pitch and yaw are within ±2π "
        "([3.14, 0, 0]); they are in degrees and these look like radians",
    )

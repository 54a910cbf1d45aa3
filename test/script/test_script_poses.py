"""Poses: the registry file, inline-over-registry resolution, degrees→radians once, and
which poses make the cache key's "resolved poses"."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

import erobs_bt.script
from erobs_bt.script.errors import ScriptError
from erobs_bt.script.limits import Limits
from erobs_bt.script.model import MoveTo, ToolExchange, Vision
from erobs_bt.script.parse import parse_script
from erobs_bt.script.poses import PoseRegistry, to_radians

HOME = [0.0, -90.0, -90.0, -90.0, 90.0, 0.0]


def write(tmp_path: Path, text: str, name: str = "cms_poses.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def script(tasks: list[dict[str, Any]], poses: dict[str, list[float]] | None = None) -> str:
    body: dict[str, Any] = {"start_gripper": "epick", "tasks": tasks}
    if poses is not None:
        body["poses"] = poses
    return json.dumps(body)


def to(target: str) -> dict[str, Any]:
    return {"task_type": "moveto", "target": target}


# -- the registry file ----------------------------------------------------------------------
def test_a_registry_is_a_flat_yaml_map_of_six_degrees(tmp_path: Path) -> None:
    registry = PoseRegistry.load(
        write(tmp_path, "home: [0, -90, -90, -90, 90, 0]\nscan: [1, 2, 3, 4, 5, 6.5]\n")
    )
    assert registry.source == "cms_poses.yaml"
    assert len(registry) == 2 and "home" in registry and "nowhere" not in registry
    assert registry.get("scan") == (1.0, 2.0, 3.0, 4.0, 5.0, 6.5)
    assert sorted(registry) == ["home", "scan"]


def test_an_empty_registry_file_is_an_empty_registry(tmp_path: Path) -> None:
    assert len(PoseRegistry.load(write(tmp_path, ""))) == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "home: [0, -90, yes, -90, 90, 0]\n",
            "cms_poses.yaml: home[2]: must be a finite number (deg) (got true)",
        ),
        (
            "home: [0, -90, .nan, -90, 90, 0]\n",
            "cms_poses.yaml: home[2]: must be a finite number (deg) (got NaN)",
        ),
        ("home: [0, -90, .inf, -90, 90, 0]\n", "cms_poses.yaml: home[2]: must be a finite number (deg)"),
        ("home: [0, -90, '3', -90, 90, 0]\n", "cms_poses.yaml: home[2]: must be a finite number (deg)"),
        (
            "home: [0, -90, -90]\n",
            "cms_poses.yaml: home: Invalid pose format: a pose must be a list of 6 joint angles in degrees",
        ),
        ("home: 5\n", "cms_poses.yaml: home: Invalid pose format: a pose must be a list of 6"),
        ("- [0, 0, 0, 0, 0, 0]\n", "cms_poses.yaml: must be a mapping of pose name"),
        ("1: [0, 0, 0, 0, 0, 0]\n", "cms_poses.yaml: pose names must be non-empty strings (got 1)"),
        ("home: [0, 0\n", "cms_poses.yaml: invalid YAML"),
    ],
)
def test_registry_errors_name_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ScriptError) as caught:
        PoseRegistry.load(write(tmp_path, text))
    assert str(caught.value).startswith(message)


def test_registry_yaml_is_loaded_safely(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="invalid YAML"):
        PoseRegistry.load(write(tmp_path, "home: !!python/object/apply:os.system ['true']\n"))


def test_registry_size_and_entry_count_are_limited(tmp_path: Path) -> None:
    path = write(tmp_path, "".join(f"p{i}: [0, 0, 0, 0, 0, 0]\n" for i in range(20)))
    with pytest.raises(ScriptError, match=r"Limits\.max_poses"):
        PoseRegistry.load(path, limits=Limits(max_poses=10))
    with pytest.raises(ScriptError, match=r"Limits\.max_file_bytes"):
        PoseRegistry.load(path, limits=Limits(max_file_bytes=100))


def test_a_missing_registry_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        PoseRegistry.load(tmp_path / "absent.yaml")


# -- degrees to radians, exactly once ----------------------------------------------------------
def test_steps_carry_radians_while_script_poses_keep_the_degrees_given() -> None:
    parsed = parse_script(script([to("home")], {"home": HOME}))
    step = parsed.steps[0]
    assert isinstance(step, MoveTo)
    assert step.target_joints == pytest.approx(
        (0.0, -math.pi / 2, -math.pi / 2, -math.pi / 2, math.pi / 2, 0.0)
    )
    assert parsed.poses["home"] == tuple(HOME)


def test_to_radians_is_math_radians_elementwise() -> None:
    assert to_radians([180.0, -90.0, 0.0, 360.0]) == (math.pi, -math.pi / 2, 0.0, 2 * math.pi)


def test_angles_beyond_half_a_turn_are_not_wrapped() -> None:
    parsed = parse_script(script([to("wound")], {"wound": [0, 0, 0, 0, -270.0, 350.0]}))
    step = parsed.steps[0]
    assert isinstance(step, MoveTo) and step.target_joints is not None
    assert step.target_joints[4:] == pytest.approx((-1.5 * math.pi, math.radians(350.0)))


@pytest.mark.parametrize(
    ("pose", "message"),
    [
        ([0, 0, 400, 0, 0, 0], "poses.a[2]: 400° is outside elbow_joint's ±180°"),
        ([0, 0, -180.5, 0, 0, 0], "poses.a[2]: -180.5° is outside elbow_joint's ±180°"),
        ([0, 0, 0, 0, 0, 360.01], "poses.a[5]: 360.01° is outside wrist_3_joint's ±360°"),
        ([-721, 0, 0, 0, 0, 0], "poses.a[0]: -721° is outside shoulder_pan_joint's ±360°"),
    ],
)
def test_a_pose_outside_the_ur5e_joint_limits_names_the_joint(pose: list[float], message: str) -> None:
    with pytest.raises(ScriptError) as caught:
        parse_script(script([to("a")], {"a": pose}))
    assert str(caught.value) == message


def test_the_limits_hold_at_their_edges_and_in_the_registry() -> None:
    assert parse_script(script([to("edge")], {"edge": [360, -360, 180, -360, 360, -360]})).steps
    with pytest.raises(ScriptError) as caught:
        PoseRegistry.from_mapping({"far": [0, 0, 190, 0, 0, 0]}, source="poses.yaml")
    assert str(caught.value) == "poses.yaml: far[2]: 190° is outside elbow_joint's ±180°"


def test_the_script_package_converts_degrees_only_in_poses_py() -> None:
    package = Path(erobs_bt.script.__file__).parent
    users = sorted(
        path.name
        for path in package.glob("*.py")
        if re.search(r"math\.radians|np\.deg2rad|np\.radians|math\.pi\s*/\s*180", path.read_text())
    )
    assert users == ["poses.py"]


# -- inline poses over the registry ---------------------------------------------------------------
def test_inline_poses_override_the_registry() -> None:
    registry = PoseRegistry.from_mapping({"home": [1, 1, 1, 1, 1, 1], "scan": [2, 2, 2, 2, 2, 2]})
    parsed = parse_script(script([to("home"), to("scan")], {"home": HOME}), registry=registry)
    first, second = parsed.steps
    assert isinstance(first, MoveTo) and isinstance(second, MoveTo)
    assert first.target_joints == pytest.approx(to_radians(HOME))
    assert second.target_joints == pytest.approx(to_radians([2] * 6))
    assert dict(parsed.poses) == {"home": tuple(HOME), "scan": (2.0,) * 6}


def test_unused_and_overridden_registry_entries_are_not_script_poses() -> None:
    lean = PoseRegistry.from_mapping({"scan": [2] * 6})
    rich = PoseRegistry.from_mapping({"scan": [2] * 6, "home": [9] * 6, "other": [5] * 6})
    text = script([to("home"), to("scan")], {"home": HOME, "unused_inline": [3] * 6})
    one, two = parse_script(text, registry=lean), parse_script(text, registry=rich)
    assert set(one.poses) == {"home", "scan"}
    assert one.poses == two.poses
    assert one.key_document() == two.key_document()


def test_a_changed_registry_value_that_is_used_changes_the_key_input() -> None:
    text = script([to("scan")])
    before = parse_script(text, registry=PoseRegistry.from_mapping({"scan": [2] * 6}))
    after = parse_script(text, registry=PoseRegistry.from_mapping({"scan": [2.5, 2, 2, 2, 2, 2]}))
    assert before.key_document() != after.key_document()


def test_every_pose_valued_field_resolves_through_the_registry() -> None:
    registry = PoseRegistry.from_mapping({name: [i, 0, 0, 0, 0, 0] for i, name in enumerate("abcdefg")})
    tasks: list[dict[str, Any]] = [
        {
            "task_type": "tool_exchange",
            "operation": "dock",
            "gripper": "epick",
            "dock_number": 4,
            "approach_pose": "a",
        },
        {"task_type": "tool_exchange", "operation": "load", "gripper": "epick", "dock_number": 4},
        {"task_type": "vision_scan", "scan_positions": ["b", "c"]},
        {"task_type": "place_sample", "tag_id": 1, "scan_pose": "d"},
        {"task_type": "pick_spincoater", "scan_pose": "d", "pickup_pose": "e"},
        {"task_type": "place_spincoater", "scan_pose": "d", "place_pose": "f"},
        {"task_type": "pick_sample", "use_vision": False, "target_pose": "g", "approach_pose": "a"},
    ]
    parsed = parse_script(script(tasks), registry=registry)
    assert set(parsed.poses) == set("abcdefg")
    exchange = parsed.steps[0]
    assert isinstance(exchange, ToolExchange) and exchange.approach_joints == pytest.approx(
        to_radians([0] * 6)
    )
    place = parsed.steps[3]
    assert isinstance(place, Vision) and place.retreat_pose == "d"
    assert place.retreat_joints == pytest.approx(to_radians([3, 0, 0, 0, 0, 0]))


def test_registry_entries_are_read_only() -> None:
    registry = PoseRegistry.from_mapping({"home": HOME})
    with pytest.raises(TypeError):
        registry.poses["x"] = (0.0,) * 6  # type: ignore[index]

"""The ``pickup_tip`` / ``pickup_vial`` macros: expansion order, grid arithmetic,
configuration defaults and overrides, and where their errors point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from erobs_bt.script import macros
from erobs_bt.script.errors import ScriptError
from erobs_bt.script.limits import Limits
from erobs_bt.script.macros import DEFAULT_VISION_TARGETS_PATH, VisionTargets, expand_macros
from erobs_bt.script.model import MoveTo, Pipettor, Vision
from erobs_bt.script.parse import parse_script
from erobs_bt.script.poses import PoseRegistry

VIAL = {
    "mode": "grid",
    "marker_id": 25,
    "scan_pose": "vial_scan",
    "grid": {
        "rows": 2,
        "cols": 5,
        "row_pitch": 0.044,
        "col_pitch": 0.022,
        "row_offset": 0.080,
        "col_offset": 0.003,
        "row_direction": "up",
        "col_direction": "right",
        "row_increasing": "down",
        "col_increasing": "right",
    },
    "moves": [
        {"direction": "backward", "distance": 0.020},
        "column_offset",
        "row_offset",
        {"direction": "forward", "distance": 0.065},
        {"direction": "backward", "distance": 0.065},
    ],
}
TIP = {
    "mode": "grid",
    "marker_id": 10,
    "scan_pose": "pipettor_scan",
    "marker_offset": {"x": 0.0, "y": -0.058},
    "grid": {"rows": 8, "cols": 12, "pitch": 0.009, "row_direction": "up", "col_direction": "left"},
    "moves": [
        {"direction": "forward", "distance": 0.050},
        "column_offset",
        "row_offset",
        {"direction": "forward", "distance": 0.023},
        {"direction": "backward", "distance": 0.150},
    ],
}
TARGETS = VisionTargets.from_mapping({"vial_rack": VIAL, "tip_rack": TIP}, source="vision_targets.yaml")

#: Scan poses the shipped vision targets name (degrees); any pose within the joint limits does.
SCAN_POSES = {
    "vial_scan": [90, -60, -130, -80, -270, -180],
    "pipettor_scan": [110, -65, -140, -65, -270, -230],
}


def expand(task: dict[str, Any], targets: VisionTargets = TARGETS) -> list[dict[str, Any]]:
    return [entry.spec for entry in expand_macros([task], vision_targets=targets)]


def rel(direction: str, distance: float) -> dict[str, Any]:
    return {"task_type": "moveto", "planning_type": "cartesian", "direction": direction, "distance": distance}


def rejects(task: dict[str, Any], targets: VisionTargets = TARGETS) -> ScriptError:
    with pytest.raises(ScriptError) as caught:
        expand_macros([task], vision_targets=targets)
    return caught.value


VIAL_TASK = {"task_type": "pickup_vial", "row": 1, "col": 2, "pipettor_operation": "SUCK", "volume_pct": 0.4}


# -- expansion ------------------------------------------------------------------------------
def test_pickup_vial_scans_aligns_moves_and_sucks_before_the_retreat() -> None:
    # col: 0.003 + 2 * 0.022 to the right; row: 0.080 - 1 * 0.044 (rows increase downwards).
    assert expand(VIAL_TASK) == [
        {"task_type": "moveto", "target": "vial_scan"},
        {"task_type": "vision_moveto", "tag_id": 25},
        rel("backward", 0.02),
        rel("right", 0.047),
        rel("up", 0.036),
        rel("forward", 0.065),
        {"task_type": "pipettor", "operation": "SUCK", "volume_pct": 0.4},
        rel("backward", 0.065),
    ]


def test_an_offset_that_changes_sign_moves_the_opposite_way() -> None:
    task = {**VIAL_TASK, "config": {"grid": {"row_offset": 0.02}}}
    assert expand(task)[4] == rel("down", 0.024)


def test_a_zero_offset_is_skipped() -> None:
    task = {"task_type": "pickup_vial", "row": 0, "col": 0, "config": {"grid": {"col_offset": 0.0}}}
    assert [spec.get("direction") for spec in expand(task)] == [
        None,
        None,
        "backward",
        "up",
        "forward",
        "backward",
    ]


def test_pickup_tip_uses_element_index_row_major_and_marker_offset_defaults() -> None:
    # element 13 of a 12-column rack is row 1, col 1; A1 is |y| = 58 mm up and 0 mm left of the marker.
    assert expand({"task_type": "pickup_tip", "element_index": 13}) == [
        {"task_type": "moveto", "target": "pipettor_scan"},
        {"task_type": "vision_moveto", "tag_id": 10},
        rel("forward", 0.05),
        rel("right", 0.009),
        rel("up", 0.049),
        rel("forward", 0.023),
        rel("backward", 0.15),
    ]


def test_pickup_tip_has_no_pipettor_step_and_defaults_to_the_first_element() -> None:
    specs = expand({"task_type": "pickup_tip", "pipettor_operation": "SUCK"})
    assert [spec["task_type"] for spec in specs] == [
        "moveto",
        "vision_moveto",
        "moveto",
        "moveto",
        "moveto",
        "moveto",
    ]


def test_rinse_alternates_suck_and_expel_and_ends_with_suck() -> None:
    specs = expand({**VIAL_TASK, "pipettor_operation": "RINSE", "rinse_count": 2})
    assert [spec["operation"] for spec in specs if spec["task_type"] == "pipettor"] == [
        "SUCK",
        "EXPEL",
        "SUCK",
        "EXPEL",
        "SUCK",
    ]
    assert specs[-1] == rel("backward", 0.065)


def test_a_huge_rinse_count_is_refused_before_anything_is_built() -> None:
    error = rejects({**VIAL_TASK, "pipettor_operation": "RINSE", "rinse_count": 10**6})
    assert error.path == "tasks[0].rinse_count" and "Limits.max_steps" in error.reason


def test_an_empty_scan_pose_means_no_scan_move() -> None:
    specs = expand({"task_type": "pickup_vial", "config": {"scan_pose": ""}})
    assert specs[0] == {"task_type": "vision_moveto", "tag_id": 25}


def test_a_full_override_works_without_a_default() -> None:
    targets = VisionTargets.from_mapping({}, source="empty.yaml")
    specs = expand({"task_type": "pickup_vial", "config": VIAL}, targets)
    assert len(specs) == 7


def test_a_missing_default_without_override_uses_the_erobs_text() -> None:
    error = rejects({"task_type": "pickup_tip"}, VisionTargets.from_mapping({}, source="empty.yaml"))
    assert str(error) == "tasks[0]: missing or invalid vision_targets.tip_rack configuration"


def test_macro_steps_are_parsed_like_written_steps_with_their_own_paths() -> None:
    text = json.dumps(
        {"start_gripper": "pipettor", "poses": SCAN_POSES, "tasks": [{"task_type": "pause"}, VIAL_TASK]}
    )
    script = parse_script(text, vision_targets=TARGETS)
    assert script.task_count == 2 and len(script.steps) == 9
    assert [step.path for step in script.steps[1:4]] == [
        "tasks[1] (pickup_vial step 1)",
        "tasks[1] (pickup_vial step 2)",
        "tasks[1] (pickup_vial step 3)",
    ]
    assert isinstance(script.steps[1], MoveTo) and script.steps[1].target == "vial_scan"
    assert isinstance(script.steps[2], Vision) and script.steps[2].tag_id == 25
    moves = [s for s in script.steps if isinstance(s, MoveTo) and s.direction is not None]
    assert all(s.planning_type == "cartesian" for s in moves)
    assert isinstance(script.steps[7], Pipettor) and script.steps[7].volume_pct == 0.4
    assert json.loads(script.key_document())["steps"][1:] == expand(VIAL_TASK)


def test_the_script_config_overrides_the_file_default() -> None:
    task = {**VIAL_TASK, "config": {"marker_id": 7, "grid": {"col_pitch": 0.01}}}
    specs = expand(task)
    assert specs[1] == {"task_type": "vision_moveto", "tag_id": 7}
    assert specs[3] == rel("right", 0.023), "only col_pitch changed; the rest of grid is the default"


# -- errors and where they point ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("task", "message"),
    [
        ({"row": 2, "col": 0}, "tasks[0]: row=2, col=0 out of range (max: 1, 4)"),
        ({"row": 0, "col": -1}, "tasks[0]: row=0, col=-1 out of range (max: 1, 4)"),
        ({"element_index": 10}, "tasks[0]: row=2, col=0 out of range (max: 1, 4)"),
        ({"row": 1}, "tasks[0]: must provide both row and col"),
        ({"row": True, "col": 0}, "tasks[0].row: must be an integer (got true)"),
        ({"element_index": 1.0}, "tasks[0].element_index: must be an integer (got 1.0)"),
        ({"pipettor_operation": "BLOW"}, "tasks[0].pipettor_operation: unknown operation 'BLOW'"),
        ({"pipettor_operation": False}, "tasks[0].pipettor_operation: unknown operation false"),
        (
            {"pipettor_operation": "SUCK", "volume_pct": 2},
            "tasks[0].volume_pct: must be a finite number in [0, 1]",
        ),
        ({"pipettor_operation": "RINSE", "rinse_count": 0}, "tasks[0].rinse_count: must be an integer >= 1"),
        ({"config": []}, "tasks[0].config: must be an object"),
        ({"config": {"grid": 3}}, "tasks[0].config.grid: must be an object"),
        ({"config": {"grid": {"rows": 0}}}, "tasks[0].config.grid.rows: must be an integer >= 1 (got 0)"),
        (
            {"config": {"grid": {"row_pitch": -1}}},
            "tasks[0].config.grid.row_pitch: must be a finite number greater",
        ),
        ({"config": {"colour": "red"}}, "tasks[0].config.colour: unknown field"),
        ({"config": {"grid": {"colour": 1}}}, "tasks[0].config.grid.colour: unknown field"),
        ({"config": {"mode": "offset"}}, "tasks[0].config.mode: must be 'grid' (got 'offset')"),
        ({"config": {"marker_id": -3}}, "tasks[0].config.marker_id: must be an integer >= 0"),
        ({"config": {"moves": []}}, "tasks[0].config.moves: must be a non-empty list"),
        ({"config": {"moves": ["sideways"]}}, "tasks[0].config.moves[0]: must be column_offset, row_offset"),
        (
            {"config": {"moves": [{"direction": "x", "distance": 1}]}},
            "tasks[0].config.moves[0].direction: unknown",
        ),
        (
            {"config": {"moves": [{"direction": "up", "distance": 0}]}},
            "tasks[0].config.moves[0].distance: must be",
        ),
        (
            {
                "pipettor_operation": "SUCK",
                "config": {"moves": [{"direction": "up", "distance": 0.1}, "row_offset"]},
            },
            "tasks[0].config.moves: must end with a retreat move",
        ),
    ],
)
def test_bad_macro_fields_name_the_task_or_its_config(task: dict[str, Any], message: str) -> None:
    assert str(rejects({"task_type": "pickup_vial", **task})).startswith(message)


def test_an_inconsistency_caused_by_an_override_points_at_the_default_it_contradicts() -> None:
    # The default col_increasing is "right"; an override col_direction "up" leaves it off-axis.
    error = rejects({"task_type": "pickup_vial", "config": {"grid": {"col_direction": "up"}}})
    assert error.path == "vision_targets.yaml: vial_rack.grid.col_increasing"
    assert "must follow the column axis" in error.reason


def test_macros_expand_before_the_step_limit_is_applied() -> None:
    tasks = [{"task_type": "pickup_vial"}, {"task_type": "pickup_vial"}]
    with pytest.raises(ScriptError) as caught:
        expand_macros(tasks, vision_targets=TARGETS, limits=Limits(max_steps=10))
    assert caught.value.path == "tasks[1]"
    assert len(expand_macros(tasks[:1], vision_targets=TARGETS, limits=Limits(max_steps=7))) == 7


def test_the_default_configuration_is_loaded_only_when_a_macro_needs_it() -> None:
    calls: list[int] = []

    def load() -> VisionTargets:
        calls.append(1)
        return TARGETS

    expand_macros([{"task_type": "pause"}], vision_targets=load)
    assert calls == []
    expand_macros([{"task_type": "pickup_tip"}, {"task_type": "pickup_vial"}], vision_targets=load)
    assert calls == [1]


def test_an_unreadable_default_file_is_a_script_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(macros, "DEFAULT_VISION_TARGETS_PATH", tmp_path / "absent.yaml")
    text = json.dumps({"start_gripper": "pipettor", "tasks": [{"task_type": "pickup_tip"}]})
    with pytest.raises(ScriptError, match="cannot read the default vision targets"):
        parse_script(text)


# -- the configuration file -----------------------------------------------------------------------
def test_the_shipped_vision_targets_are_valid_and_use_registry_scan_poses(samples_dir: Path) -> None:
    targets = VisionTargets.default()
    assert targets.source == "vision_targets.yaml" == DEFAULT_VISION_TARGETS_PATH.name
    assert set(targets.targets) == {"tip_rack", "vial_rack"}
    registry = PoseRegistry.load(samples_dir / "cms_poses.yaml")
    for target in targets.targets.values():
        assert target.scan_pose in registry, target.name
    assert len({target.marker_id for target in targets.targets.values()}) == 2


def test_the_shipped_vial_rack_expands_pickup_vial_to_eight_steps() -> None:
    text = json.dumps(
        {
            "start_gripper": "pipettor",
            "poses": SCAN_POSES,
            "tasks": [{"task_type": "pickup_vial", "row": 1, "col": 4, "pipettor_operation": "SUCK"}],
        }
    )
    script = parse_script(text)
    assert len(script.steps) == 8
    assert [step.task_type for step in script.steps] == ["moveto", "vision"] + ["moveto"] * 4 + [
        "pipettor",
        "moveto",
    ]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "targets.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "vial_rack:\n  mode: grid\n  marker_id: 1\n  grid: {rows: 2, cols: 0}\n  moves: [row_offset]\n",
            "targets.yaml: vial_rack.grid.cols: must be an integer >= 1 (got 0)",
        ),
        (
            "vial_rack:\n  mode: grid\n  marker_id: 1\n  grid: {rows: 2, cols: 2}\n"
            "  moves: [row_offset]\n  speed: 3\n",
            "targets.yaml: vial_rack.speed: unknown field",
        ),
        (
            "vial_rack:\n  mode: grid\n  marker_id: yes\n",
            "targets.yaml: vial_rack.marker_id: must be an integer >= 0 (got true)",
        ),
        ("vial_rack: [1, 2]\n", "targets.yaml: vial_rack: must be a mapping"),
        ("- vial_rack\n", "targets.yaml: must be a mapping of target name to configuration"),
        ("vial_rack: {mode: grid\n", "targets.yaml: invalid YAML"),
        (
            "vial_rack:\n  mode: grid\n  marker_id: 1\n  grid: {rows: 2, cols: 2, pitch: .nan}\n"
            "  moves: [row_offset]\n",
            "targets.yaml: vial_rack.grid.pitch: must be a finite number greater than zero (m) (got NaN)",
        ),
    ],
)
def test_a_bad_configuration_file_names_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ScriptError) as caught:
        VisionTargets.load(write(tmp_path, text))
    assert str(caught.value).startswith(message)


def test_the_configuration_is_read_only() -> None:
    with pytest.raises(TypeError):
        TARGETS.raw["vial_rack"]["marker_id"] = 3  # type: ignore[index]

"""EROBS's beamline configuration as the cell (erobs_bt/world/beamline.py).

The files here are written for the test from the format's facts (the keys EROBS's
``config_loader.py`` and its beamline/scene files use); none is EROBS's own. A workspace
is laid out as EROBS's is: ``<ws>/src/<...>/config/<name>_beamline.yaml`` naming a scene
file and a pose registry relative to the workspace root, and a MoveIt configuration package
with an SRDF xacro taking ``gripper:=<name>``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from erobs_bt.cli import main
from erobs_bt.world.beamline import compiled_cell_path, load_beamline, resolve_cell_file, workspace_root
from erobs_bt.world.cell import CellConfigError
from erobs_bt.world.config import load_cell

BEAMLINE = """\
beamline: "testbl"
poses_file: "src/testbl/poses.yaml"
scene_file: "src/robot/config/scene.yaml"
robot:
  arm_group: "arm"
  ik_frame: "flange"
  velocity_scaling: 0.3
  acceleration_scaling: 0.25
  moveit_config_package: "testbl_moveit_config"
  arm_joints:
    [shoulder_pan_joint, shoulder_lift_joint, elbow_joint, wrist_1_joint, wrist_2_joint, wrist_3_joint]
grippers:
  none:
    states: {}
    tip_frame: "flange"
    z_offset: 0.0
  epick:
    gripper_group: "suction"
    dock_number: 4
    cup_profile: "10mm_dia"
    states: {grasp: "vacuum_on", release: "vacuum_off"}
    tip_frame: "epick_tip"
    z_offset: -0.005
  hande:
    gripper_group: "fingers"
    dock_number: 1
    states: {grasp: "hande_closed", release: "hande_open"}
    tip_frame: "hande_end"
    z_offset: -0.02
vision_targets:
  tip_rack:
    mode: grid
    marker_id: 10
    scan_pose: "look_down"
    grid: {rows: 2, cols: 3, pitch: 0.01}
    moves:
      - {direction: "forward", distance: 0.02}
      - column_offset
      - row_offset
  sample:
    mode: offset
    marker_id: 0
    marker_offset: {x: 0.02, y: 0.0, z: 0.0}
tool_exchange:
  dock_spacing_m: 0.15
  reference_dock: 3
  load_sequence: [{direction: "forward", distance: 0.1}]
  dock_sequence: [{direction: "forward", distance: 0.1}]
collision_objects:
  7: {name: "bar", shape: "box", dimensions: [0.02, 0.01, 0.1], tag_offset: [0.0, 0.0, 0.0]}
"""

SCENE = """\
obstacles:
  - name: "pedestal"
    type: "box"
    frame: "map"
    pose: {x: 0.0, y: 0.0, z: -0.13, roll: 0.0, pitch: 0.0, yaw: 0.0}
    size: [0.2, 0.2, 0.25]
  - name: "post"
    type: "cylinder"
    frame: "base"
    pose: {x: 1.2, y: 0.0, z: 0.2, roll: 0.0, pitch: 0.0, yaw: 0.0}
    height: 0.4
    radius: 0.03
  - name: "lamp"
    type: "sphere"
    frame: "base_link"
    pose: {x: 0.0, y: 1.3, z: 0.5}
    radius: 0.05
"""

POSES = """\
home_pose: [79.72, -69.5, -81.91, -117.92, -268.05, -157.15]
look_down: [13.38, -112.45, -65.22, -90.98, -267.33, -166.94]
"""

PACKAGE_XML = """<?xml version="1.0"?>
<package format="3"><name>testbl_moveit_config</name><version>0.0.1</version>
<description>test</description><maintainer email="a@b.c">t</maintainer><license>MIT</license></package>
"""

SRDF_MAIN = """<?xml version="1.0"?>
<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="testbl">
  <xacro:arg name="gripper" default="none"/>
  <group name="arm"><chain base_link="base_link" tip_link="flange"/></group>
  <group_state name="upright" group="arm">
    <joint name="shoulder_pan_joint" value="0"/>
    <joint name="shoulder_lift_joint" value="-1.5708"/>
    <joint name="elbow_joint" value="0"/>
    <joint name="wrist_1_joint" value="-1.5708"/>
    <joint name="wrist_2_joint" value="0"/>
    <joint name="wrist_3_joint" value="0"/>
  </group_state>
  <disable_collisions link1="wrist_1_link" link2="wrist_2_link" reason="Adjacent"/>
  <xacro:if value="${'$(arg gripper)' == 'hande'}">
    <xacro:include filename="$(find testbl_moveit_config)/srdf/hande.srdf.xacro"/>
  </xacro:if>
</robot>
"""

SRDF_HANDE = """<?xml version="1.0"?>
<robot xmlns:xacro="http://www.ros.org/wiki/xacro">
  <group name="fingers"><link name="hande_link"/></group>
  <group_state name="hande_half" group="fingers"><joint name="finger_joint" value="0.01"/></group_state>
  <disable_collisions link1="hande_link" link2="wrist_3_link" reason="Never"/>
</robot>
"""


def write_workspace(root: Path, *, beamline: str = BEAMLINE, scene: str | None = SCENE) -> Path:
    """A workspace like EROBS's under ``root``; returns the beamline file."""
    config = root / "src" / "robot" / "config"
    config.mkdir(parents=True)
    (config / "testbl_beamline.yaml").write_text(beamline, encoding="utf-8")
    if scene is not None:
        (config / "scene.yaml").write_text(scene, encoding="utf-8")
    (root / "src" / "testbl").mkdir()
    (root / "src" / "testbl" / "poses.yaml").write_text(POSES, encoding="utf-8")
    package = root / "src" / "descriptions" / "testbl_moveit_config"
    (package / "srdf").mkdir(parents=True)
    (package / "package.xml").write_text(PACKAGE_XML, encoding="utf-8")
    (package / "srdf" / "ur.srdf.xacro").write_text(SRDF_MAIN, encoding="utf-8")
    (package / "srdf" / "hande.srdf.xacro").write_text(SRDF_HANDE, encoding="utf-8")
    return config / "testbl_beamline.yaml"


def test_the_beamline_becomes_the_cell(tmp_path: Path) -> None:
    path = write_workspace(tmp_path)
    cell = load_beamline(path)
    assert cell.name == "testbl_beamline" and cell.source == str(path)
    # Grippers: the beamline's names, states, tip frames and offsets; SRDF group states too.
    assert set(cell.grippers) == {"none", "epick", "hande"}
    hande = cell.grippers["hande"]
    assert hande.tip_frame == "hande_end" and hande.z_offset == -0.02
    assert hande.actions == ("hande_closed", "hande_open", "hande_half")
    assert dict(hande.roles) == {"grasp": "hande_closed", "release": "hande_open"}
    epick = cell.grippers["epick"]
    assert epick.default_cup_profile == "10mm_dia" and epick.z_offset == -0.005
    assert cell.grippers["none"].actions == ()
    # Docks 1 .. the highest number named; each gripper's dock_number is where it is stored
    # at start (issue 38 item 3: the ePick's dock_number 4 puts it in dock 4, not on the arm).
    assert {d.number: d.gripper for d in cell.docks} == {1: "hande", 2: None, 3: None, 4: "epick"}
    # The tool_exchange block drives the dock motions (issue 38 item 2).
    assert cell.tool_changer is not None and cell.tool_changer.dock_spacing == 0.15
    assert cell.tool_changer.reference_dock == 3
    # Named states from the SRDF xacro (radians in the model).
    assert cell.named_states["upright"] == pytest.approx((0.0, -1.5708, 0.0, -1.5708, 0.0, 0.0))
    # Scene obstacles: shapes, sizes, frames (map is the root frame, base_link).
    obstacles = {o.name: o for o in cell.obstacles}
    assert obstacles["pedestal"].shape.kind == "box" and obstacles["pedestal"].frame == "base_link"
    assert obstacles["post"].shape.size == (0.4, 0.03) and obstacles["post"].frame == "base"
    assert obstacles["lamp"].shape.size == (0.05,) and obstacles["lamp"].pose.xyz == (0.0, 1.3, 0.5)
    # The rest of the beamline, kept for the engine: scaling, tool exchange, tags, SRDF pairs.
    info = cell.extra["beamline"]
    assert info["velocity_scaling"] == 0.3 and info["acceleration_scaling"] == 0.25
    assert info["tool_exchange"]["dock_spacing_m"] == 0.15
    assert info["collision_objects"][7]["name"] == "bar"
    assert ["hande_link", "wrist_3_link"] in info["disabled_collisions"]
    assert ["wrist_1_link", "wrist_2_link"] in info["disabled_collisions"]
    assert info["vision_targets"]["sample"]["mode"] == "offset"
    assert cell.collision.padding == 0.0


def test_load_cell_detects_the_format(tmp_path: Path) -> None:
    path = write_workspace(tmp_path)
    assert load_cell(path).name == "testbl_beamline"
    assert load_cell().name == "cms_like_beamline_cell"


def test_relative_paths_are_under_the_workspace_root_or_the_given_one(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    path = write_workspace(ws)
    assert workspace_root(path) == ws.resolve()
    # The same file moved out of any workspace: its relative paths need --workspace.
    loose = tmp_path / "elsewhere" / "bl.yaml"
    loose.parent.mkdir()
    loose.write_text(BEAMLINE, encoding="utf-8")
    with pytest.raises(CellConfigError, match="testbl_moveit_config"):
        load_beamline(loose)
    assert load_beamline(loose, workspace=ws).name == "testbl_beamline"


def test_an_unreadable_file_is_an_error_naming_it(tmp_path: Path) -> None:
    path = write_workspace(tmp_path, scene=None)
    with pytest.raises(CellConfigError, match=r"scene_file: cannot read .*scene\.yaml"):
        load_beamline(path)
    (path.parent / "scene.yaml").write_text(SCENE.replace('"box"', '"cone"'), encoding="utf-8")
    with pytest.raises(
        CellConfigError, match=r"scene\.yaml: obstacles\[0\]\.type: expected box, cylinder or sphere"
    ):
        load_beamline(path)


def test_a_broken_srdf_xacro_is_an_error_naming_it(tmp_path: Path) -> None:
    path = write_workspace(tmp_path)
    xacro = tmp_path / "src" / "descriptions" / "testbl_moveit_config" / "srdf" / "hande.srdf.xacro"
    xacro.write_text("<robot><unclosed></robot>", encoding="utf-8")
    with pytest.raises(CellConfigError, match=r"ur\.srdf\.xacro: cannot expand \(gripper:=hande\)"):
        load_beamline(path)


def test_an_invalid_value_names_the_beamline_file_and_key(tmp_path: Path) -> None:
    path = write_workspace(
        tmp_path, beamline=BEAMLINE.replace("velocity_scaling: 0.3", "velocity_scaling: 3")
    )
    with pytest.raises(
        CellConfigError,
        match=r"testbl_beamline\.yaml: robot\.velocity_scaling: expected a number in \(0, 1\]",
    ):
        load_beamline(path)


def test_a_tag_collision_object_is_checked(tmp_path: Path) -> None:
    path = write_workspace(
        tmp_path, beamline=BEAMLINE.replace("dimensions: [0.02, 0.01, 0.1]", "dimensions: [0.02]")
    )
    with pytest.raises(
        CellConfigError, match=r"collision_objects\.7\.dimensions: expected 3 numbers for a box"
    ):
        load_beamline(path)


def test_the_compiled_cell_carries_the_poses_and_grid_targets(tmp_path: Path) -> None:
    path = write_workspace(tmp_path / "ws")
    cell = compiled_cell_path(path, directory=tmp_path / "out")
    assert (tmp_path / "out" / "poses.yaml").read_text(encoding="utf-8") == POSES
    assert "tip_rack" in (tmp_path / "out" / "vision_targets.yaml").read_text(encoding="utf-8")
    assert load_cell(cell).grippers["hande"].actions == ("hande_closed", "hande_open", "hande_half")
    assert resolve_cell_file(tmp_path / "out" / "cell.yaml") == tmp_path / "out" / "cell.yaml"


def test_the_cli_validates_with_the_beamline_vocabulary_poses_and_targets(tmp_path: Path) -> None:
    path = write_workspace(tmp_path / "ws")
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            {
                "start_gripper": "hande",
                "tasks": [
                    {"task_type": "moveto", "target": "home_pose"},
                    {"task_type": "end_effector", "end_effector_action": "hande_half"},
                    {"task_type": "pickup_tip", "row": 1, "col": 2},
                ],
            }
        ),
        encoding="utf-8",
    )
    result = CliRunner().invoke(main, ["validate", str(script), "--cell", str(path), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    # pickup_tip from the beamline's grid target: scan, align, 3 moves = 5 steps.
    assert report["valid"] and report["total_steps"] == 2 + 5
    # The packaged cell knows neither the pose nor the state.
    refused = CliRunner().invoke(main, ["validate", str(script), "--json"])
    assert refused.exit_code != 0


def test_beambot_beamline_config_names_the_cell_when_no_cell_is_given(tmp_path: Path) -> None:
    path = write_workspace(tmp_path / "ws")
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps({"start_gripper": "hande", "tasks": [{"task_type": "moveto", "target": "home_pose"}]}),
        encoding="utf-8",
    )
    result = CliRunner(env={"BEAMBOT_BEAMLINE_CONFIG": str(path)}).invoke(main, ["validate", str(script)])
    assert result.exit_code == 0, result.output
    missing = CliRunner(env={"BEAMBOT_BEAMLINE_CONFIG": str(tmp_path / "nope.yaml")}).invoke(
        main, ["validate", str(script)]
    )
    assert (
        missing.exit_code != 0
        and "BEAMBOT_BEAMLINE_CONFIG names a file that does not exist" in missing.output
    )


def test_a_script_runs_on_the_beamline_cell(tmp_path: Path) -> None:
    path = write_workspace(tmp_path / "ws")
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            {
                "start_gripper": "epick",
                "tasks": [
                    {"task_type": "moveto", "target": "look_down", "planning_type": "joint"},
                    {"task_type": "moveto", "direction": "up", "distance": 0.05},
                    {"task_type": "moveto", "target": "upright"},
                    {"task_type": "moveto", "target": "home_pose", "planning_type": "joint"},
                ],
            }
        ),
        encoding="utf-8",
    )
    log = tmp_path / "run.jsonl"
    result = CliRunner().invoke(
        main, ["run", str(script), "--cell", str(path), "--speed", "100", "--no-mcap", "--log", str(log)]
    )
    finished = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    statuses = [r["status"] for r in finished if r["event"] == "goal_finished"]
    assert statuses == ["SUCCEEDED"], result.output

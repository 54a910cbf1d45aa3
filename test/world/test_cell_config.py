"""The cell description (config/cell.yaml): loading, units, derived values and error messages.

Scenario: the packaged cell loads into frozen values with angles converted to radians; the
model revision follows ``<prefix>__<gripper>[__<cup_profile>]``; unknown sections (the fault
injector's ``faults``) pass through; every mistake names the file and the key.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from erobs_bt.world.cell import DEFAULT_CELL_PATH, CellConfigError
from erobs_bt.world.config import load_cell
from erobs_bt.world.kinematics import fk


@pytest.fixture
def raw_cell() -> dict[str, Any]:
    return yaml.safe_load(DEFAULT_CELL_PATH.read_text(encoding="utf-8"))


def _write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "cell.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def test_packaged_cell_loads_with_angles_in_radians() -> None:
    cell = load_cell()
    assert cell.source == str(DEFAULT_CELL_PATH)
    np.testing.assert_allclose(cell.named_states["moveit_home"], np.radians([0, -90, 0, 0, 0, -180]))
    np.testing.assert_allclose(
        cell.initial_joint_state, np.radians([79.72, -69.5, -81.91, -117.92, -268.05, -157.15])
    )
    assert set(cell.grippers) >= {"none", "epick", "hande", "2fg7", "pipettor"}
    assert {o.name for o in cell.obstacles} >= {"table", "hot_plate", "spin_coater", "sample_bar", "tip_rack"}
    assert [d.number for d in cell.docks] == sorted(d.number for d in cell.docks)
    assert cell.extra["faults"] == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.name = "other"  # type: ignore[misc]


def test_model_revision_names_tool_and_cup_profile() -> None:
    cell = load_cell()
    assert cell.model_revision("epick") == "robot_models__epick__3mm_dia"
    assert cell.model_revision("epick", "10mm_dia") == "robot_models__epick__10mm_dia"
    assert cell.model_revision("pipettor") == "robot_models__pipettor"
    assert cell.model_revision("none") == "robot_models__none"
    with pytest.raises(
        ValueError, match=r"Unknown gripper: foo \(available: 2fg7, epick, hande, none, pipettor\)"
    ):
        cell.model_revision("foo")
    with pytest.raises(ValueError, match="Unknown cup profile for epick: 99mm"):
        cell.model_revision("epick", "99mm")


def test_epick_tool_centre_point_includes_cup_and_z_offset() -> None:
    epick = load_cell().gripper("epick")
    assert epick.tip_frame == "epick_tip"
    assert epick.z_offset == pytest.approx(-0.007)
    tcp = epick.T_flange_tcp("3mm_dia")
    # the tip frame's z is the flange x; TCP = tip + (cup length − 0.007) along it
    expected = epick.T_flange_tip[:3, 3] + (0.017 - 0.007) * epick.T_flange_tip[:3, 2]
    np.testing.assert_allclose(tcp[:3, 3], expected, atol=1e-12)
    np.testing.assert_allclose(epick.T_flange_tip[:3, 2], [1.0, 0.0, 0.0], atol=1e-12)
    assert {s.name for s in epick.collision_shapes("3mm_dia")} == {"body", "extension", "cup"}


def test_rpy_and_rpy_deg_keys_carry_their_units(tmp_path: Path, raw_cell: dict[str, Any]) -> None:
    doc = copy.deepcopy(raw_cell)
    doc["obstacles"][0]["pose"] = {"xyz": [0, 0, -0.3], "rpy": [0, 0, 0.5]}
    doc["obstacles"][1]["pose"] = {"xyz": [0, 0, -0.1], "rpy_deg": [0, 0, 90]}
    cell = load_cell(_write(tmp_path, doc))
    assert cell.obstacles[0].pose.rpy[2] == pytest.approx(0.5)
    assert cell.obstacles[1].pose.rpy[2] == pytest.approx(math.pi / 2)


def test_obstacle_in_base_frame_is_turned_by_pi(tmp_path: Path, raw_cell: dict[str, Any]) -> None:
    doc = copy.deepcopy(raw_cell)
    doc["obstacles"][2]["frame"] = "base"
    doc["obstacles"][2]["pose"] = {"xyz": [0.3, 0.1, 0.0], "rpy": [0, 0, 0]}
    T = load_cell(_write(tmp_path, doc)).obstacles[2].T_base_link_obstacle()
    np.testing.assert_allclose(T[:3, 3], [-0.3, -0.1, 0.0], atol=1e-12)


def test_unknown_top_level_sections_pass_through(tmp_path: Path, raw_cell: dict[str, Any]) -> None:
    doc = copy.deepcopy(raw_cell)
    doc["faults"] = {"planning": [{"step": 3}]}
    doc["lighting"] = {"lux": 300}
    cell = load_cell(_write(tmp_path, doc))
    assert cell.extra["faults"] == {"planning": [{"step": 3}]}
    assert cell.extra["lighting"] == {"lux": 300}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["obstacles"][2].update(size=[1, 2, 3]),
            r"obstacles\[2\]\.size: must be 2 positive numbers \(m\) \(got \[1, 2, 3\]\)",
        ),
        (
            lambda d: d["obstacles"][0].update(size=[1, -2, 3]),
            r"obstacles\[0\]\.size: must be 3 positive numbers \(m\)",
        ),
        (
            lambda d: d["obstacles"][1].update(shape="cone"),
            r"obstacles\[1\]\.shape: unknown shape 'cone' \(expected one of: box, cylinder, sphere\)",
        ),
        (
            lambda d: d["obstacles"][1].update(frame="world"),
            r"obstacles\[1\]\.frame: unknown frame 'world' \(expected one of: base_link, base\)",
        ),
        (
            lambda d: d["obstacles"][1].update(name="table"),
            r"obstacles\[1\]\.name: duplicate obstacle name 'table'",
        ),
        (
            lambda d: d["obstacles"][0].update(touch_links=["elbow"]),
            r"obstacles\[0\]\.touch_links\[0\]: unknown link 'elbow'",
        ),
        (
            lambda d: d["obstacles"][0]["pose"].update(rpy_deg=[0, 0, 0]),
            r"obstacles\[0\]\.pose: expected exactly one of rpy \[rad\] or rpy_deg \[deg\]",
        ),
        (
            lambda d: d["obstacles"][0]["pose"].update(xyz=[0, 0, True]),
            r"obstacles\[0\]\.pose\.xyz: must be 3 numbers \(m\) \(got \[0, 0, true\]\)",
        ),
        (
            lambda d: d.update(initial_joint_state_deg=[0, 0, 0]),
            r"initial_joint_state_deg: must be 6 numbers \(deg\)",
        ),
        (
            lambda d: d["named_states_deg"].update(up=[0, 0, 0, 0, ".", 0]),
            r"named_states_deg\.up: must be 6 numbers",
        ),
        (lambda d: d.pop("model_revision_prefix"), r"model_revision_prefix: missing"),
        (lambda d: d["grippers"].pop("none"), r"grippers\.none: missing"),
        (
            lambda d: d["grippers"]["epick"].update(default_cup_profile="1mm"),
            r"grippers\.epick\.default_cup_profile",
        ),
        (lambda d: d["grippers"]["epick"].update(colour="red"), r"grippers\.epick\.colour: unknown key"),
        (
            lambda d: d["grippers"]["hande"]["collision"][0].update(size=[0.1, 0.1]),
            r"grippers\.hande\.collision\[0\]\.size: must be 3 positive numbers",
        ),
        (lambda d: d["docks"][1].update(number=1), r"docks\[1\]\.number: duplicate dock number 1"),
        (lambda d: d["docks"][0].update(gripper="laser"), r"docks\[0\]\.gripper: unknown gripper 'laser'"),
        (
            lambda d: d["markers"][0].update(size=0),
            r"markers\[0\]\.size: must be a finite number greater than zero \(m\) \(got 0\)",
        ),
        (
            lambda d: d["collision"].update(padding=-0.01),
            r"collision\.padding: must be a finite number >= 0 \(m\)",
        ),
        (
            lambda d: d["collision"].update(link_geometry="capsule"),
            r"collision\.link_geometry: unknown link geometry 'capsule' \(expected one of: convex, mesh\)",
        ),
    ],
)
def test_errors_name_the_file_and_the_key(
    tmp_path: Path, raw_cell: dict[str, Any], mutate: Any, message: str
) -> None:
    doc = copy.deepcopy(raw_cell)
    mutate(doc)
    path = _write(tmp_path, doc)
    with pytest.raises(CellConfigError, match=rf"^{re.escape(str(path))}: {message}") as info:
        load_cell(path)
    assert info.value.file == str(path)


def test_unreadable_and_invalid_yaml_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(CellConfigError, match=rf"^{re.escape(str(missing))}: cannot read"):
        load_cell(missing)
    broken = tmp_path / "broken.yaml"
    broken.write_text("grippers: [unclosed\n", encoding="utf-8")
    with pytest.raises(CellConfigError, match=rf"^{re.escape(str(broken))}: invalid YAML"):
        load_cell(broken)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n", encoding="utf-8")
    with pytest.raises(CellConfigError, match=rf"^{re.escape(str(scalar))}: must be an object \(got 42\)"):
        load_cell(scalar)


def test_lookups_of_docks_markers_and_obstacles() -> None:
    cell = load_cell()
    dock = cell.dock(3)
    assert dock.gripper == "pipettor"
    seat = cell.dock_seat(3)
    assert seat is not None
    # dock 3 is centred on load_approach: its seat is 0.03 m below it (the load's first move)
    T_approach = fk([math.radians(a) for a in (143.73, -129.69, -124.24, -15.92, -270.41, -216.3)])
    np.testing.assert_allclose(seat[:3, 3], T_approach[:3, 3] + seat[:3, 0] * 0.03, atol=1e-9)
    np.testing.assert_allclose(seat[:3, 0], [0.0, 0.0, -1.0], atol=0.01)  # flange x down
    assert cell.marker(25).size > 0
    assert cell.obstacle("table").shape.kind == "box"
    with pytest.raises(ValueError, match=r"Unknown dock: 9 \(available: 1, 2, 3, 4\)"):
        cell.dock(9)
    with pytest.raises(ValueError, match="Unknown marker: 999"):
        cell.marker(999)

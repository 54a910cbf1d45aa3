"""``planning: local`` of the ``moveit`` backend (erobs_bt/backends/moveit/local.py), without
move_group: which robots and scenes the local planner accepts and which it refuses, naming why.
Against the simulated move_group: test_sim_move_group.py (the local plan avoids an object only
move_group's scene holds, and move_group executes it)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import require_samples
from moveit_msgs.msg import AttachedCollisionObject, CollisionObject, PlanningScene
from shape_msgs.msg import Mesh, SolidPrimitive

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.backends.moveit.local import (
    DescriptionMismatch,
    LocalPlanning,
    check_robot,
    collision_links,
    snapshot_of,
)
from erobs_bt.backends.moveit.model import MoveItConfig, parse_moveit_config, pose_msg, tool_object_id
from erobs_bt.paths import config_file
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.validation import ConfigError
from erobs_bt.world import kinematics
from erobs_bt.world.config import load_cell
from erobs_bt.world.description import urdf_text
from erobs_bt.world.tools import initial_tool_state

from helpers import moveto

CELL = load_cell(config_file("cell.yaml"))
CMS_URDF = "src/custom-ur-descriptions/cms_robot_description/urdf/ur_with_zivid_epick.urdf"


def test_the_simulated_move_groups_robot_is_the_local_planners() -> None:
    check_robot(urdf_text(CELL), MoveItConfig())


def test_erobs_cms_robot_is_refused_naming_the_geometry_the_planner_lacks() -> None:
    urdf = (require_samples() / "workspace" / CMS_URDF).read_text()
    with pytest.raises(DescriptionMismatch) as caught:
        check_robot(urdf, MoveItConfig())
    message = str(caught.value)
    for link in ("wrist_extension", "te_robotside", "zivid_arm_mount"):
        assert link in message, message
    assert "planning: move_group" in message
    # UR's own links are modelled and not named.
    assert not re.search(r"\bshoulder_link\b.*which the local", message)
    assert "shoulder_link" in collision_links(urdf)


def test_other_kinematics_are_refused_with_the_deviation() -> None:
    urdf = urdf_text(CELL)
    # The forearm 2 mm longer (a calibrated arm's URDF carries its own joint origins).
    elbow = '<origin xyz="-0.425 0 0"'
    assert urdf.count(elbow) == 1 and kinematics.DH_A[1] == pytest.approx(-0.425), "the elbow's origin"
    longer = urdf.replace(elbow, '<origin xyz="-0.427 0 0"')
    with pytest.raises(DescriptionMismatch, match=r"flange is [0-9.]+ mm .* from the local planner's"):
        check_robot(longer, MoveItConfig())


def test_a_prefixed_robot_is_read_with_its_prefix_and_missing_joints_are_named() -> None:
    urdf = urdf_text(CELL)
    for name in (*JOINT_NAMES, "base_link", "flange"):
        urdf = urdf.replace(f'"{name}"', f'"ur_{name}"')
    with pytest.raises(DescriptionMismatch, match="no link 'base_link'"):
        check_robot(urdf, MoveItConfig())
    check_robot(urdf, MoveItConfig(joint_prefix="ur_", flange_link="ur_flange"))
    with pytest.raises(DescriptionMismatch, match="not XML"):
        check_robot("<robot", MoveItConfig())


def _object(name: str, xyz: tuple[float, float, float]) -> CollisionObject:
    obj = CollisionObject(id=name, operation=CollisionObject.ADD)
    obj.header.frame_id = "base_link"
    T = np.eye(4)
    T[:3, 3] = xyz
    obj.pose = pose_msg(T)
    obj.primitives = [SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.1, 0.2, 0.3])]
    obj.primitive_poses = [pose_msg(np.eye(4))]
    return obj


def test_the_world_is_move_groups_and_what_cannot_be_modelled_is_refused() -> None:
    scene = PlanningScene()
    scene.world.collision_objects = [_object("crate", (0.4, 0.1, 0.2))]
    snapshot = snapshot_of(scene, where="tasks[2]")
    (crate,) = snapshot.world.obstacles
    assert crate.name == "crate" and crate.shape.size == pytest.approx((0.1, 0.2, 0.3))
    np.testing.assert_allclose(crate.T_base_link_obstacle()[:3, 3], (0.4, 0.1, 0.2))
    meshed = _object("scan", (0.0, 0.0, 0.0))
    meshed.primitives, meshed.primitive_poses = [], []
    meshed.meshes, meshed.mesh_poses = [Mesh()], [pose_msg(np.eye(4))]
    scene.world.collision_objects.append(meshed)
    with pytest.raises(MotionError) as caught:
        snapshot_of(scene, where="tasks[2]")
    assert caught.value.code is ErrorCode.PLANNING_FAILED
    assert "tasks[2]" in str(caught.value) and "'scan'" in str(caught.value)


def test_an_attached_object_that_is_not_a_tool_of_the_cell_is_refused() -> None:
    planning = LocalPlanning(CELL, MoveItConfig())
    tools = initial_tool_state(CELL, "epick")
    scene = PlanningScene()
    held = AttachedCollisionObject(link_name="flange", object=_object("sample_holder", (0.0, 0.0, 0.1)))
    ours = AttachedCollisionObject(
        link_name="flange", object=_object(tool_object_id("epick"), (0.0, 0.0, 0.0))
    )
    scene.robot_state.attached_collision_objects = [ours, held]
    step = moveto(3, "home")
    with pytest.raises(MotionError, match=r"tasks\[3\]: .*sample_holder on flange attached"):
        planning.plan_move(step, CELL.initial_joint_state, tools=tools, scene=snapshot_of(scene, where="x"))


def test_planning_is_a_choice_of_the_configuration() -> None:
    assert parse_moveit_config({"planning": "local"}).planning == "local"
    assert parse_moveit_config(None).planning == "move_group"
    with pytest.raises(ConfigError, match="planning"):
        parse_moveit_config({"planning": "anywhere"}, source="moveit.yaml")


def test_the_matrix_round_trips_touch_links_and_a_malformed_one_is_refused() -> None:
    from erobs_bt.backends.moveit.planning_scene import SceneError, allowed_touches, touch_matrix
    from erobs_bt.world.cell import ROBOT_LINKS

    obstacles = [o for o in CELL.obstacles if o.touch_links]
    assert obstacles
    matrix = touch_matrix(CELL.obstacles)
    names = {o.name for o in CELL.obstacles}
    assert allowed_touches(matrix, names, ROBOT_LINKS) == {
        o.name: tuple(sorted(o.touch_links)) for o in obstacles
    }
    assert allowed_touches(matrix, names, ("flange",)) == {}  # only the links asked for
    matrix.entry_values[0].enabled = matrix.entry_values[0].enabled[:-1]
    with pytest.raises(SceneError, match="entry_values do not match"):
        allowed_touches(matrix, names, ROBOT_LINKS)


def test_narrower_joint_limits_are_refused_naming_the_joint() -> None:
    urdf = urdf_text(CELL)
    pan = urdf.index('<joint name="shoulder_pan_joint"')
    limit = urdf.index('lower="-6.28318530718" upper="6.28318530718"', pan)
    narrower = urdf[:limit] + 'lower="-3.14159265359" upper="3.14159265359"' + urdf[limit + 44 :]
    with pytest.raises(DescriptionMismatch, match=r"limits shoulder_pan_joint to \[-3.1416, 3.1416\] rad"):
        check_robot(narrower, MoveItConfig())
    slower = urdf.replace('velocity="3.14159265359"', 'velocity="0.5"')
    with pytest.raises(DescriptionMismatch, match=r"0.5000 rad/s; .* up to 0.6283 rad/s"):
        check_robot(slower, MoveItConfig(speed_scaling=0.2))
    check_robot(slower, MoveItConfig(speed_scaling=0.15))  # 0.47 rad/s fits under 0.5


def test_an_octomap_and_padding_or_scale_beyond_the_local_models_are_refused() -> None:
    from moveit_msgs.msg import LinkPadding, LinkScale

    def refused(scene: PlanningScene) -> str:
        with pytest.raises(MotionError) as caught:
            snapshot_of(scene, where="tasks[1]", padding=0.01)
        return str(caught.value)

    fine = PlanningScene()
    fine.link_padding = [LinkPadding(link_name="wrist_3_link", padding=0.01)]
    fine.link_scale = [
        LinkScale(link_name="wrist_3_link", scale=1.0),
        LinkScale(link_name="tool_x", scale=2.0),
    ]
    assert snapshot_of(fine, where="tasks[1]", padding=0.01).world.obstacles == ()
    padded = PlanningScene(link_padding=[LinkPadding(link_name="forearm_link", padding=0.02)])
    assert "forearm_link is padded 0.02 m, more than the local model's 0.01 m" in refused(padded)
    scaled = PlanningScene(link_scale=[LinkScale(link_name="upper_arm_link", scale=1.1)])
    assert "upper_arm_link is scaled 1.1" in refused(scaled)
    mapped = PlanningScene()
    mapped.world.octomap.octomap.id = "OcTree"
    mapped.world.octomap.octomap.data = [1, 2, 3]
    message = refused(mapped)
    assert message.startswith("PLANNING_FAILED: tasks[1]: move_group's planning scene: it holds an octomap")


def test_a_base_link_away_from_the_urdf_root_is_refused() -> None:
    urdf = urdf_text(CELL)
    assert urdf.count('<link name="base_link"/>') == 1
    mounted = urdf.replace(
        '<link name="base_link"/>',
        '<link name="world"/><joint name="mount" type="fixed"><parent link="world"/><child link="base_link"/>'
        '<origin xyz="0 0 0.8" rpy="0 0 0"/></joint><link name="base_link"/>',
        1,
    )
    with pytest.raises(DescriptionMismatch, match=r"places base_link at \[0.0, 0.0, 0.8\] m"):
        check_robot(mounted, MoveItConfig())
    at_root = mounted.replace(
        '<origin xyz="0 0 0.8" rpy="0 0 0"/></joint>', '<origin xyz="0 0 0" rpy="0 0 0"/></joint>'
    )
    check_robot(at_root, MoveItConfig())

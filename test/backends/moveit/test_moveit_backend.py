"""The ``moveit`` backend's parts (erobs_bt/backends/moveit/).

This module: what needs no move_group (the SRDF's named states, the model revision's
digest, MoveIt's error codes on the specification's table, the trajectory round trip that
replay relies on, the attached tool). Against a running move_group: test_moveit_e2e.py.
"""

from __future__ import annotations

import math

import pytest
from moveit_msgs.msg import CollisionObject, MoveItErrorCodes
from shape_msgs.msg import SolidPrimitive

from erobs_bt.backends.base import ArmSegment, ErrorCode, MotionError, Solution, TrajectoryPoint
from erobs_bt.backends.moveit.model import (
    MoveItConfig,
    attached_tool,
    description_digest,
    error_name,
    load_moveit_config,
    model_revision,
    moveit_error,
    named_states_from_srdf,
    parse_moveit_config,
    robot_state,
    segment_from_trajectory,
    trajectory_of,
)
from erobs_bt.paths import config_file
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.validation import ConfigError
from erobs_bt.world.config import load_cell
from erobs_bt.world.tools import initial_tool_state

SRDF = """<?xml version="1.0"?>
<robot name="ur5e">
  <group name="ur_manipulator"><chain base_link="base_link" tip_link="tool0"/></group>
  <group_state name="home" group="ur_manipulator">
    <joint name="shoulder_pan_joint" value="0"/>
    <joint name="shoulder_lift_joint" value="-1.57"/>
    <joint name="elbow_joint" value="1.57"/>
    <joint name="wrist_1_joint" value="-1.57"/>
    <joint name="wrist_2_joint" value="-1.57"/>
    <joint name="wrist_3_joint" value="0"/>
  </group_state>
  <group_state name="open" group="gripper"><joint name="finger_joint" value="0.02"/></group_state>
</robot>
"""


@pytest.fixture(scope="module")
def cell():  # type: ignore[no-untyped-def]
    return load_cell(config_file("cell.yaml"))


def test_named_states_come_from_the_arm_groups_states_only() -> None:
    states = named_states_from_srdf(SRDF, group="ur_manipulator")
    assert states == {"home": (0.0, -1.57, 1.57, -1.57, -1.57, 0.0)}
    assert named_states_from_srdf(SRDF, group="ur_arm") == {}


def test_a_named_state_missing_a_joint_is_refused_by_name() -> None:
    broken = SRDF.replace('<joint name="elbow_joint" value="1.57"/>', "")
    with pytest.raises(ValueError, match="group_state 'home' of ur_manipulator has no elbow_joint"):
        named_states_from_srdf(broken, group="ur_manipulator")
    with pytest.raises(ValueError, match="not an SRDF"):
        named_states_from_srdf("<robot", group="ur_manipulator")


def test_prefixed_joint_names_are_read_with_the_prefix() -> None:
    prefixed = SRDF.replace('name="shoulder', 'name="ur_shoulder').replace('name="elbow', 'name="ur_elbow')
    prefixed = prefixed.replace('name="wrist', 'name="ur_wrist')
    assert named_states_from_srdf(prefixed, group="ur_manipulator", joint_prefix="ur_")["home"][1] == -1.57


def test_the_revision_changes_with_the_calibration_and_the_tool(cell) -> None:  # type: ignore[no-untyped-def]
    urdf = '<robot name="ur5e"><joint name="shoulder_pan_joint"><origin xyz="0 0 0.1625"/></joint></robot>'
    recalibrated = urdf.replace("0.1625", "0.1627")
    epick = initial_tool_state(cell, "epick")
    none = initial_tool_state(cell, "none")
    first = model_revision(cell, epick, description_digest(urdf, SRDF))
    assert first == model_revision(cell, epick, description_digest(urdf, SRDF))  # stable
    assert first != model_revision(cell, epick, description_digest(recalibrated, SRDF))
    assert first.endswith("__" + "__".join(cell.model_revision("epick").split("__")[1:]))
    assert model_revision(cell, none, description_digest(urdf, SRDF)).split("__")[1] == "none"


def test_moveit_error_codes_follow_the_specifications_table() -> None:
    code = MoveItErrorCodes(val=MoveItErrorCodes.GOAL_IN_COLLISION, message="wrist_3_link - table")
    planning = moveit_error(code, planning=True, where="tasks[3]", what="GetMotionPlan /plan_kinematic_path")
    assert str(planning) == (
        "PLANNING_FAILED: tasks[3]: GetMotionPlan /plan_kinematic_path: GOAL_IN_COLLISION (-12): "
        "the goal state is in collision: wrist_3_link - table"
    )
    # An unsuccessful MoveIt result of an execution plans afresh: never fatal, even MoveIt's TIMED_OUT.
    timed_out = MoveItErrorCodes(val=MoveItErrorCodes.TIMED_OUT)
    execution = moveit_error(timed_out, planning=False, where="step 4", what="ExecuteTrajectory")
    assert execution.code is ErrorCode.EXECUTION_FAILED and not execution.fatal
    assert "TIMED_OUT (-6)" in str(execution)
    assert error_name(12345) == "error code (12345)"


def test_a_stored_trajectory_goes_back_to_moveit_unchanged() -> None:
    config = MoveItConfig(joint_prefix="ur_")
    points = tuple(
        TrajectoryPoint(
            positions=tuple(0.1 * k + j for j in range(6)),
            velocities=tuple(0.01 * k for _ in range(6)),
            accelerations=(0.0,) * 6,
            time_from_start=0.123456789 * k,
        )
        for k in range(4)
    )
    segment = ArmSegment(step_index=7, points=points)
    # Through the plan cache's bytes, as a replay reads it.
    stored = Solution.from_bytes(Solution(segments=(segment,), model_revision="r").to_bytes()).segments[0]
    assert isinstance(stored, ArmSegment)
    message = trajectory_of(stored, config)
    assert list(message.joint_trajectory.joint_names) == ["ur_" + n for n in JOINT_NAMES]
    back = segment_from_trajectory(message, config, 7)
    assert back.step_index == 7
    for a, b in zip(back.points, points, strict=True):
        assert a.positions == pytest.approx(b.positions)
        assert a.time_from_start == pytest.approx(b.time_from_start, abs=1e-9)


def test_a_trajectory_in_another_joint_order_is_reordered_and_a_missing_joint_refused() -> None:
    config = MoveItConfig()
    segment = ArmSegment(
        step_index=1, points=(TrajectoryPoint(tuple(range(6)), (0.0,) * 6, (0.0,) * 6, 0.0),)
    )
    message = trajectory_of(segment, config)
    message.joint_trajectory.joint_names = list(reversed(message.joint_trajectory.joint_names))
    point = message.joint_trajectory.points[0]
    point.positions = list(reversed(point.positions))
    assert segment_from_trajectory(message, config, 1).points[0].positions == tuple(
        float(v) for v in range(6)
    )
    message.joint_trajectory.joint_names[0] = "finger_joint"
    with pytest.raises(MotionError, match="PLANNING_FAILED: step 1: MoveIt's trajectory has joints"):
        segment_from_trajectory(message, config, 1)


def test_the_attached_tool_is_the_cells_geometry_on_the_flange(cell) -> None:  # type: ignore[no-untyped-def]
    config = MoveItConfig()
    touch = ("flange", "tool0", "wrist_3_link")
    assert attached_tool(cell, initial_tool_state(cell, "none"), config, touch_links=touch) is None
    epick = initial_tool_state(cell, "epick")
    attached = attached_tool(cell, epick, config, touch_links=touch)
    assert attached is not None
    assert attached.link_name == "flange" and attached.object.header.frame_id == "flange"
    assert list(attached.touch_links) == list(touch)
    assert attached.object.operation == CollisionObject.ADD
    gripper = cell.gripper("epick")
    cup = gripper.cup(epick.cup_profile)
    expected = len(gripper.collision) + (len(cup.collision) if cup is not None else 0)
    assert expected > 0 and len(attached.object.primitives) == expected
    assert all(
        p.type in (SolidPrimitive.BOX, SolidPrimitive.CYLINDER, SolidPrimitive.SPHERE)
        for p in attached.object.primitives
    )
    state = robot_state((0.0, -math.pi / 2, 0.0, 0.0, 0.0, 0.0), config, attached)
    assert state.attached_collision_objects[0].object.id == "erobs_tool_epick" and not state.is_diff


def test_the_packaged_configuration_is_the_defaults_and_errors_name_the_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert load_moveit_config(config_file("moveit.yaml")) == MoveItConfig()
    bad = tmp_path / "moveit.yaml"
    bad.write_text("pipelines:\n  - {pipeline: ompl, planer: RRTConnect}\n")
    with pytest.raises(
        ConfigError, match=r"moveit.yaml: pipelines\[0\].planer: unknown key.*did you mean 'planner'"
    ):
        load_moveit_config(bad)
    bad.write_text("min_cartesian_fraction: 1.5\n")
    with pytest.raises(ConfigError, match="min_cartesian_fraction: must be a finite number"):
        load_moveit_config(bad)
    config = parse_moveit_config({"namespace": "/cell2", "pipelines": [{"pipeline": "ompl"}]})
    assert config.pipelines == (("ompl", ""),) and config.name("compute_ik") == "/cell2/compute_ik"


def test_row9_moveits_codes_without_a_message_say_what_they_mean() -> None:
    """MoveIt's answers mostly carry no message (docs/conformance/moveit.md, row 9): the
    engine's message says what the code means, for planning and for execution."""
    failure = MoveItErrorCodes(val=MoveItErrorCodes.FAILURE)
    planning = moveit_error(
        failure, planning=True, where="tasks[0]", what="GetMotionPlan /plan_kinematic_path"
    )
    assert str(planning).startswith(
        "PLANNING_FAILED: tasks[0]: GetMotionPlan /plan_kinematic_path: FAILURE (99999): "
        "move_group could not plan and gives no reason"
    )
    timed_out = moveit_error(
        MoveItErrorCodes(val=MoveItErrorCodes.TIMED_OUT),
        planning=False,
        where="step 2",
        what="ExecuteTrajectory",
    )
    assert "TIMED_OUT (-6): the execution took longer than move_group allows" in str(timed_out)
    assert "no plan within allowed_planning_time" in str(
        moveit_error(MoveItErrorCodes(val=MoveItErrorCodes.TIMED_OUT), planning=True, where="t", what="w")
    )
    invalid = moveit_error(
        MoveItErrorCodes(val=MoveItErrorCodes.GOAL_STATE_INVALID), planning=True, where="t", what="w"
    )
    assert str(invalid) == (
        "PLANNING_FAILED: t: w: GOAL_STATE_INVALID (-27): the goal state is invalid "
        "(outside the joint limits, or in collision)"
    )

"""Pressing onto a tip is an allowed contact for that motion only, never a global exemption.

The packaged cell's pipettor declares its cone (``disposable_tip``) as its ``contact`` shape;
the real collision model and planner of the packaged cell decide: a straight move along the
tool axis may press the cone into the tip rack (and retreat from it), while a lateral move, a
joint-space move into the same configuration, or a press deep enough to bring the nozzle into
the rack stays a collision.
"""

from __future__ import annotations

import numpy as np
import pytest

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.planning.planner import MotionPlanner, PlannerConfig
from erobs_bt.world import kinematics
from erobs_bt.world.collision import CollisionModel
from erobs_bt.world.config import load_cell

FORWARD = np.array([1.0, 0.0, 0.0])  # flange x: the pipettor's axis (EROBS "forward")
LEFT = np.array([0.0, 1.0, 0.0])
CONFIG = PlannerConfig(planning_time=1.0, simplify_time=0.2)
#: Above the tip rack (config/cell.yaml: x -0.04..0.04, y -0.37..-0.25, tips' tops z -0.0225).
ABOVE_RACK_TIP = (0.0, -0.30, 0.0)


@pytest.fixture(scope="module")
def setup() -> tuple[CollisionModel, MotionPlanner, np.ndarray, np.ndarray]:
    cell = load_cell()
    collision = CollisionModel(cell, gripper="pipettor")
    T_flange_tip = cell.gripper("pipettor").T_flange_tcp()
    T_tip = np.eye(4)
    T_tip[:3, :3] = kinematics.rpy_matrix([np.pi, 0.0, 0.0])  # tip z (the tool axis) down
    T_tip[:3, 3] = ABOVE_RACK_TIP
    seed = np.radians([112.19, -63.37, -140.83, -65.82, -269.73, -229.5])  # pipettor_scan
    q = kinematics.ik_nearest(kinematics.flange_goal_from_tip_goal(T_tip, T_flange_tip), seed=seed)
    assert q is not None
    planner = MotionPlanner(collision=collision, config=CONFIG)
    return collision, planner, np.asarray(q), T_flange_tip


def test_the_start_above_the_rack_is_free(
    setup: tuple[CollisionModel, MotionPlanner, np.ndarray, np.ndarray],
) -> None:
    collision, _, q, _ = setup
    assert collision.contacts(q) == []


def test_a_press_along_the_tool_axis_touches_the_rack_with_the_cone_only(
    setup: tuple[CollisionModel, MotionPlanner, np.ndarray, np.ndarray],
) -> None:
    collision, planner, q, tip = setup
    press = planner.plan_relative(q, FORWARD, 0.031, step_index=0, T_flange_tip=tip)
    pressed = np.asarray(press.points[-1].positions)
    # A real contact, allowed for this motion only: outside it, the same state collides.
    assert collision.contacts(pressed) == [("pipettor/disposable_tip", "tip_rack")]
    assert collision.in_collision(pressed)
    with collision.allowing_tool_contact():
        assert not collision.in_collision(pressed)
    retreat = planner.plan_relative(pressed, -FORWARD, 0.158, step_index=1, T_flange_tip=tip)
    assert collision.contacts(np.asarray(retreat.points[-1].positions)) == []


def test_the_contact_is_refused_in_every_other_motion(
    setup: tuple[CollisionModel, MotionPlanner, np.ndarray, np.ndarray],
) -> None:
    collision, planner, q, tip = setup
    pressed = np.asarray(
        planner.plan_relative(q, FORWARD, 0.031, step_index=0, T_flange_tip=tip).points[-1].positions
    )
    with pytest.raises(MotionError) as lateral:
        planner.plan_relative(pressed, LEFT, 0.01, step_index=1, T_flange_tip=tip)
    assert lateral.value.code is ErrorCode.PLANNING_FAILED
    assert "pipettor/disposable_tip with tip_rack" in lateral.value.detail
    with pytest.raises(MotionError) as joint:
        planner.plan_to_joints(q, pressed, step_index=1, planning_type="auto", T_flange_tip=tip)
    assert "pipettor/disposable_tip with tip_rack" in joint.value.detail


def test_a_press_too_deep_still_collides_with_the_nozzle(
    setup: tuple[CollisionModel, MotionPlanner, np.ndarray, np.ndarray],
) -> None:
    _, planner, q, tip = setup
    with pytest.raises(MotionError) as deep:
        planner.plan_relative(q, FORWARD, 0.06, step_index=0, T_flange_tip=tip)
    assert "pipettor/nozzle with tip_rack" in deep.value.detail


def test_a_contact_shape_must_be_a_shape_of_the_tool(tmp_path: object) -> None:
    from pathlib import Path

    from erobs_bt.world.cell import DEFAULT_CELL_PATH, CellConfigError

    text = DEFAULT_CELL_PATH.read_text(encoding="utf-8").replace(
        "contact: [disposable_tip]", "contact: [plunger]"
    )
    path = Path(str(tmp_path)) / "cell.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CellConfigError, match=r"grippers\.pipettor\.contact\[0\]: 'plunger' is not a shape"):
        load_cell(path)

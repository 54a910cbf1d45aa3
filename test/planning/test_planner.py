"""Motion planning of the simulated cell: every moveto mode and planning type.

The arm is the real UR5e kinematics (:mod:`erobs_bt.world.kinematics`). Most
scenarios use analytic obstacles with known geometry (a forbidden box in joint space, a
table plane under the tool tip), so each can say exactly where a path must go or stop;
the last ones plan in the packaged cell (``config/cell.yaml``) with the real collision
model and an EROBS sample script.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from erobs_bt.backends.base import ArmSegment, ErrorCode, MotionError
from erobs_bt.planning.planner import MotionPlanner, PlannerConfig
from erobs_bt.script.model import Constraints, JointConstraint, MoveTo, OrientationConstraint
from erobs_bt.script.parse import parse_script
from erobs_bt.world import kinematics
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.collision import CollisionModel

#: EROBS home [0, -90, -90, -90, 90, 0] deg: the flange x axis (EROBS "forward") points down.
HOME = np.radians([0.0, -90.0, -90.0, -90.0, 90.0, 0.0])
#: A less symmetric start, so flange-frame vectors differ from base_link ones.
TILTED = np.radians([20.0, -100.0, -80.0, -70.0, 80.0, 30.0])
#: A tool tip 10 cm out of the flange (along flange x).
TIP = np.eye(4)
TIP[0, 3] = 0.10
SCALING = 0.2
CONFIG = PlannerConfig(planning_time=2.0, simplify_time=0.5)


class JointBox:
    """Collision = inside an axis-aligned box in joint space [rad]."""

    def __init__(self, low: list[float], high: list[float]) -> None:
        self.low = np.array(low)
        self.high = np.array(high)

    def in_collision(self, q: np.ndarray) -> bool:
        return bool(np.all(q > self.low) and np.all(q < self.high))

    def check_path(self, qs: np.ndarray, max_step: float) -> int | None:
        return first_bad_vertex(self, qs, max_step)


class TablePlane:
    """Collision = the tool tip (``T_flange_tip``) below the plane z = ``height`` in base_link."""

    def __init__(self, height: float, T_flange_tip: np.ndarray = TIP) -> None:
        self.height = height
        self.tip = T_flange_tip

    def in_collision(self, q: np.ndarray) -> bool:
        return bool((kinematics.fk(q) @ self.tip)[2, 3] < self.height)

    def check_path(self, qs: np.ndarray, max_step: float) -> int | None:
        return first_bad_vertex(self, qs, max_step)


class NoObstacles:
    def in_collision(self, q: np.ndarray) -> bool:
        return False

    def check_path(self, qs: np.ndarray, max_step: float) -> int | None:
        return None


def first_bad_vertex(model: JointBox | TablePlane, qs: np.ndarray, max_step: float) -> int | None:
    """The ``check_path`` contract: index of the first vertex whose state or incoming motion collides."""
    if model.in_collision(qs[0]):
        return 0
    for k in range(1, len(qs)):
        count = max(1, math.ceil(np.max(np.abs(qs[k] - qs[k - 1])) / max_step))
        for j in range(1, count + 1):
            if model.in_collision(qs[k - 1] + (qs[k] - qs[k - 1]) * j / count):
                return k
    return None


def planner(collision: object, **kwargs: object) -> MotionPlanner:
    return MotionPlanner(collision=collision, config=CONFIG, **kwargs)  # type: ignore[arg-type]


def trajectory(segment: ArmSegment) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    q = np.array([p.positions for p in segment.points])
    qd = np.array([p.velocities for p in segment.points])
    qdd = np.array([p.accelerations for p in segment.points])
    t = np.array([p.time_from_start for p in segment.points])
    return q, qd, qdd, t


def assert_executable(segment: ArmSegment, start: np.ndarray, collision: object) -> None:
    """Every returned trajectory: starts exactly at the start, at rest; continuous; in limits; free."""
    q, qd, qdd, t = trajectory(segment)
    assert np.array_equal(q[0], start) and t[0] == 0.0
    assert np.all(qd[0] == 0.0) and np.all(qd[-1] == 0.0)
    assert np.all(np.diff(t) > 0.0)
    assert np.max(np.abs(np.diff(q, axis=0))) <= 0.01 + 1e-12
    assert np.all(q >= kinematics.JOINT_LIMITS[:, 0]) and np.all(q <= kinematics.JOINT_LIMITS[:, 1])
    assert np.all(np.abs(qd) <= kinematics.VELOCITY_LIMITS * SCALING * (1 + 1e-6))
    assert np.all(np.abs(qdd) <= kinematics.ACCELERATION_LIMITS * SCALING * (1 + 1e-6))
    assert collision.check_path(q, 0.01) is None  # type: ignore[attr-defined]


def tip_positions(segment: ArmSegment, T_flange_tip: np.ndarray) -> np.ndarray:
    return np.array([(kinematics.fk(np.array(p.positions)) @ T_flange_tip)[:3, 3] for p in segment.points])


def max_line_deviation(points: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    d = (b - a) / np.linalg.norm(b - a)
    rel = points - a
    return float(np.max(np.linalg.norm(rel - np.outer(rel @ d, d), axis=1)))


def planning_failed(excinfo: pytest.ExceptionInfo[MotionError]) -> str:
    assert excinfo.value.code is ErrorCode.PLANNING_FAILED
    assert str(excinfo.value).startswith("PLANNING_FAILED: ")
    return str(excinfo.value)


GOAL = HOME + np.array([1.0, 0.25, -0.3, 0.2, 0.4, 0.8])


# --------------------------------------------------------------------------------------
# Joint goals
# --------------------------------------------------------------------------------------


def test_a_free_straight_joint_line_is_a_two_waypoint_path() -> None:
    collision = NoObstacles()
    segment = planner(collision).plan_to_joints(HOME, GOAL, step_index=4)
    assert segment.step_index == 4
    assert_executable(segment, HOME, collision)
    q, qd, _, _ = trajectory(segment)
    assert np.array_equal(q[-1], GOAL)
    delta = GOAL - HOME
    sigma = (q - HOME) @ delta / (delta @ delta)
    assert np.max(np.abs(q - (HOME + sigma[:, None] * delta))) < 1e-12
    # Two waypoints: the arm is at rest only at the two ends.
    at_rest = np.all(qd == 0.0, axis=1)
    assert at_rest[0] and at_rest[-1] and not np.any(at_rest[1:-1])


def blocking_box() -> JointBox:
    """Blocks the straight line HOME → GOAL halfway along shoulder_pan; passable in shoulder_lift."""
    low = [HOME[0] + 0.35, HOME[1] - 0.3] + [-10.0] * 4
    high = [HOME[0] + 0.65, HOME[1] + 0.5] + [10.0] * 4
    return JointBox(low, high)


def test_a_blocked_joint_line_is_planned_around_with_ompl() -> None:
    collision = blocking_box()
    with pytest.raises(MotionError):
        # The straight line really is blocked.
        planner(collision).plan_to_joints(HOME, GOAL, step_index=0, planning_type="pilz_ptp")
    segment = planner(collision).plan_to_joints(HOME, GOAL, step_index=0)
    assert_executable(segment, HOME, collision)
    q, _, _, _ = trajectory(segment)
    assert np.array_equal(q[-1], GOAL)
    delta = GOAL - HOME
    sigma = (q - HOME) @ delta / (delta @ delta)
    assert np.max(np.abs(q - (HOME + sigma[:, None] * delta))) > 0.1  # it left the line
    # Valid at ≤ 0.01 rad spacing everywhere, checked independently of the planner.
    assert first_bad_vertex(collision, q, 0.01) is None


def test_pilz_ptp_fails_with_a_reason_when_the_joint_line_is_blocked() -> None:
    with pytest.raises(MotionError) as excinfo:
        planner(blocking_box()).plan_to_joints(
            HOME, GOAL, step_index=0, planning_type="pilz_ptp", where="tasks[2]"
        )
    message = planning_failed(excinfo)
    assert message.startswith("PLANNING_FAILED: tasks[2]: pilz_ptp: the straight joint line is blocked")
    assert "in collision" in message


def test_planning_works_from_a_worker_thread() -> None:
    collision = blocking_box()
    with ThreadPoolExecutor(max_workers=1) as pool:
        segment = pool.submit(planner(collision).plan_to_joints, HOME, GOAL, step_index=1).result(timeout=60)
    assert_executable(segment, HOME, collision)
    assert np.array_equal(trajectory(segment)[0][-1], GOAL)


@pytest.mark.parametrize(
    ("start", "goal", "expected"),
    [
        # MoveIt's error codes first, as EROBS propagates them (its agent's error table)
        (HOME, HOME + np.array([0.5, 0.05, 0, 0, 0, 0]), "PLANNING_FAILED: GOAL_IN_COLLISION: goal state"),
        (
            HOME + np.array([0.5, 0.05, 0, 0, 0, 0]),
            HOME,
            "PLANNING_FAILED: START_STATE_IN_COLLISION: start state",
        ),
        (HOME, HOME + np.array([0, 0, -2.0, 0, 0, 0]), "outside its limits"),
    ],
)
def test_invalid_start_or_goal_states_fail_planning(
    start: np.ndarray, goal: np.ndarray, expected: str
) -> None:
    with pytest.raises(MotionError) as excinfo:
        planner(blocking_box()).plan_to_joints(start, goal, step_index=0)
    assert expected in planning_failed(excinfo)


def test_an_unknown_planning_type_fails() -> None:
    with pytest.raises(MotionError) as excinfo:
        planner(NoObstacles()).plan_to_joints(HOME, GOAL, step_index=0, planning_type="joint")
    assert "unknown planning_type" in planning_failed(excinfo)


def test_pilz_to_a_joint_goal_moves_the_tip_on_a_straight_line() -> None:
    collision = NoObstacles()
    goal = HOME + np.array([0.1, -0.1, 0.15, -0.05, 0.0, 0.2])
    segment = planner(collision).plan_to_joints(
        HOME, goal, step_index=0, planning_type="pilz", T_flange_tip=TIP
    )
    assert_executable(segment, HOME, collision)
    q, _, _, _ = trajectory(segment)
    assert np.max(np.abs(q[-1] - goal)) < 1e-6
    tips = tip_positions(segment, TIP)
    assert max_line_deviation(tips, tips[0], tips[-1]) < 0.001


# --------------------------------------------------------------------------------------
# Straight Cartesian lines and relative moves
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("planning_type", ["auto", "cartesian", "pilz"])
def test_a_relative_move_is_a_straight_line_by_the_right_vector_in_the_flange_frame(
    planning_type: str,
) -> None:
    collision = NoObstacles()
    direction = np.array([0.0, 0.6, 0.8])  # a unit vector in the flange frame
    segment = planner(collision).plan_relative(
        TILTED, direction, 0.08, step_index=0, planning_type=planning_type, T_flange_tip=TIP
    )
    assert_executable(segment, TILTED, collision)
    q, _, _, _ = trajectory(segment)
    T_start, T_end = kinematics.fk(TILTED), kinematics.fk(q[-1])
    motion = kinematics.invert_pose(T_start) @ T_end
    np.testing.assert_allclose(motion[:3, 3], 0.08 * direction, atol=1e-9)
    np.testing.assert_allclose(motion[:3, :3], np.eye(3), atol=1e-9)
    tips = tip_positions(segment, TIP)
    assert max_line_deviation(tips, tips[0], tips[-1]) < 0.001


def test_pilz_ptp_relative_move_ends_at_the_same_pose_through_joint_space() -> None:
    collision = NoObstacles()
    segment = planner(collision).plan_relative(
        HOME, (1.0, 0.0, 0.0), 0.1, step_index=0, planning_type="pilz_ptp"
    )
    assert_executable(segment, HOME, collision)
    q, _, _, _ = trajectory(segment)
    motion = kinematics.invert_pose(kinematics.fk(HOME)) @ kinematics.fk(q[-1])
    np.testing.assert_allclose(motion[:3, 3], [0.1, 0.0, 0.0], atol=1e-9)
    delta = q[-1] - HOME
    sigma = (q - HOME) @ delta / (delta @ delta)
    assert np.max(np.abs(q - (HOME + sigma[:, None] * delta))) < 1e-12  # a straight joint line


def home_tip_height() -> float:
    return float((kinematics.fk(HOME) @ TIP)[2, 3])


def test_a_cartesian_move_that_achieves_at_least_90_percent_stops_short_at_the_obstacle() -> None:
    # HOME's flange x points down, so "forward" 10 cm moves the tip down 10 cm; the
    # table stops it after 9.5 cm.
    collision = TablePlane(home_tip_height() - 0.095)
    segment = planner(collision).plan_relative(
        HOME, (1.0, 0.0, 0.0), 0.10, step_index=0, planning_type="cartesian", T_flange_tip=TIP
    )
    assert_executable(segment, HOME, collision)
    travelled = home_tip_height() - tip_positions(segment, TIP)[-1, 2]
    assert 0.094 <= travelled <= 0.095


def test_a_cartesian_move_below_90_percent_fails_with_the_fraction_achieved() -> None:
    collision = TablePlane(home_tip_height() - 0.05)
    with pytest.raises(MotionError) as excinfo:
        planner(collision).plan_relative(
            HOME,
            (1.0, 0.0, 0.0),
            0.10,
            step_index=0,
            planning_type="cartesian",
            T_flange_tip=TIP,
            where="tasks[5]",
        )
    message = planning_failed(excinfo)
    assert message.startswith("PLANNING_FAILED: tasks[5]: Cartesian path achieved only 49.")
    assert "in collision" in message


def test_pilz_lin_needs_the_whole_line() -> None:
    collision = TablePlane(home_tip_height() - 0.095)
    with pytest.raises(MotionError) as excinfo:
        planner(collision).plan_relative(
            HOME, (1.0, 0.0, 0.0), 0.10, step_index=0, planning_type="pilz", T_flange_tip=TIP
        )
    assert "pilz (LIN) needs the whole line" in planning_failed(excinfo)


def test_a_line_through_the_wrist_singularity_stops_with_a_joint_jump() -> None:
    # wrist_2 = 0 is the wrist singularity; the tip line between wrist_2 = -0.3 and +0.3
    # (all else equal) crosses it, and the wrist flips there (motion-planning.md §5).
    start = np.array([0.3, -1.8, -1.4, -1.2, -0.3, 0.4])
    goal = start.copy()
    goal[4] = 0.3
    with pytest.raises(MotionError) as excinfo:
        planner(NoObstacles()).plan_to_joints(start, goal, step_index=0, planning_type="cartesian")
    message = planning_failed(excinfo)
    assert "achieved only" in message and "joint jump" in message


# --------------------------------------------------------------------------------------
# Cartesian targets (tool tip) in base_link or a named frame
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("planning_type", ["auto", "pilz_ptp", "cartesian", "pilz"])
def test_a_cartesian_target_with_orientation_puts_the_tool_tip_there(planning_type: str) -> None:
    collision = NoObstacles()
    target = (-0.45, 0.25, 0.30, math.pi, 0.2, 0.3)
    segment = planner(collision).plan_cartesian_target(
        HOME, target, step_index=0, planning_type=planning_type, T_flange_tip=TIP
    )
    assert_executable(segment, HOME, collision)
    T_tip = kinematics.fk(np.array(segment.points[-1].positions)) @ TIP
    expected = kinematics.pose_from_xyz_rpy(target[:3], target[3:], degrees=False)
    translation, rotation = kinematics.pose_distance(T_tip, expected)
    assert translation < 1e-6 and rotation < 1e-6
    if planning_type in ("cartesian", "pilz"):
        tips = tip_positions(segment, TIP)
        assert max_line_deviation(tips, tips[0], np.array(target[:3])) < 0.001


def test_a_cartesian_target_with_three_numbers_keeps_the_tip_orientation() -> None:
    collision = NoObstacles()
    segment = planner(collision).plan_cartesian_target(
        TILTED, (-0.40, 0.30, 0.35), step_index=0, T_flange_tip=TIP
    )
    assert_executable(segment, TILTED, collision)
    T_end = kinematics.fk(np.array(segment.points[-1].positions)) @ TIP
    T_start = kinematics.fk(TILTED) @ TIP
    np.testing.assert_allclose(T_end[:3, 3], [-0.40, 0.30, 0.35], atol=1e-9)
    np.testing.assert_allclose(T_end[:3, :3], T_start[:3, :3], atol=1e-9)


def test_a_cartesian_target_in_a_named_frame_is_resolved_by_the_cell() -> None:
    T_base_table = np.eye(4)
    T_base_table[:3, 3] = [-0.5, 0.0, 0.2]
    frames = {"table": T_base_table}
    p = planner(NoObstacles(), resolve_frame=lambda name: frames[name])
    segment = p.plan_cartesian_target(
        HOME, (0.05, 0.1, 0.1), frame_id="table", step_index=0, T_flange_tip=TIP
    )
    T_end = kinematics.fk(np.array(segment.points[-1].positions)) @ TIP
    np.testing.assert_allclose(T_end[:3, 3], [-0.45, 0.1, 0.3], atol=1e-9)
    with pytest.raises(MotionError) as excinfo:
        p.plan_cartesian_target(HOME, (0.0, 0.0, 0.1), frame_id="shelf", step_index=0)
    assert "unknown frame_id 'shelf'" in planning_failed(excinfo)


@pytest.mark.parametrize("planning_type", ["auto", "pilz_ptp"])
def test_an_unreachable_cartesian_target_fails_planning(planning_type: str) -> None:
    with pytest.raises(MotionError) as excinfo:
        planner(NoObstacles()).plan_cartesian_target(
            HOME, (1.5, 0.0, 0.4), step_index=0, planning_type=planning_type
        )
    message = planning_failed(excinfo)
    assert "unreachable" in message
    if planning_type == "pilz_ptp":
        assert "NO_IK_SOLUTION: goal pose unreachable" in message


def test_an_unreachable_straight_line_fails_planning() -> None:
    with pytest.raises(MotionError) as excinfo:
        planner(NoObstacles()).plan_cartesian_target(
            HOME, (-1.5, 0.13, 0.49), step_index=0, planning_type="cartesian"
        )
    message = planning_failed(excinfo)
    assert "achieved only" in message and "no IK solution" in message


# --------------------------------------------------------------------------------------
# Path constraints
# --------------------------------------------------------------------------------------


def test_a_goal_outside_a_joint_constraint_fails_planning() -> None:
    constraint = Constraints(joint=(JointConstraint("shoulder_pan_joint", 0.0, 0.5, 0.5),))
    with pytest.raises(MotionError) as excinfo:
        planner(NoObstacles()).plan_to_joints(HOME, GOAL, step_index=0, constraints=constraint)
    assert "constraints.joint[0] shoulder_pan_joint" in planning_failed(excinfo)


def test_ompl_keeps_to_the_joint_constraints_when_it_plans_around_an_obstacle() -> None:
    # The box is passable with shoulder_lift below HOME - 0.3 or above HOME + 0.5; the
    # constraint forbids the way below, so the path must go over the top.
    collision = blocking_box()
    low, high = HOME[1] - 0.25, HOME[1] + 1.0
    constraint = Constraints(joint=(JointConstraint("shoulder_lift_joint", (low + high) / 2, 0.625, 0.625),))
    segment = planner(collision).plan_to_joints(HOME, GOAL, step_index=0, constraints=constraint)
    assert_executable(segment, HOME, collision)
    q = trajectory(segment)[0]
    assert np.all(q[:, 1] >= low - 1e-12) and np.all(q[:, 1] <= high + 1e-12)
    in_slab = (q[:, 0] > HOME[0] + 0.35) & (q[:, 0] < HOME[0] + 0.65)
    assert np.any(in_slab) and np.all(q[in_slab, 1] >= HOME[1] + 0.5)


def test_a_straight_line_that_leaves_a_joint_constraint_halfway_fails_planning() -> None:
    # Moving the tip 20 cm sideways turns the shoulder; the constraint allows half of it.
    T_start = kinematics.fk(HOME)
    sideways = T_start[:3, :3].T @ np.array([0.0, 1.0, 0.0])
    free = planner(NoObstacles()).plan_relative(HOME, sideways, 0.2, step_index=0)
    pan_end = trajectory(free)[0][-1, 0]
    halfway = HOME[0] + 0.5 * (pan_end - HOME[0])
    low, high = sorted((HOME[0], halfway))
    constraint = Constraints(
        joint=(JointConstraint("shoulder_pan_joint", (low + high) / 2, (high - low) / 2, (high - low) / 2),)
    )
    with pytest.raises(MotionError) as excinfo:
        planner(NoObstacles()).plan_relative(HOME, sideways, 0.2, step_index=0, constraints=constraint)
    message = planning_failed(excinfo)
    assert "achieved only" in message and "violates path constraint constraints.joint[0]" in message


def test_an_orientation_constraint_allows_a_line_that_keeps_the_orientation() -> None:
    keep_level = Constraints(
        orientation=(OrientationConstraint("epick_tip", "base_link", None, (0.02, 0.02, 0.02)),)
    )
    collision = NoObstacles()
    segment = planner(collision).plan_relative(
        TILTED,
        (0.0, 0.0, 1.0),
        0.1,
        step_index=0,
        constraints=keep_level,
        T_flange_tip=TIP,
        tip_link="epick_tip",
    )
    assert_executable(segment, TILTED, collision)


def test_a_joint_move_that_turns_the_tool_violates_an_orientation_constraint() -> None:
    upright = Constraints(orientation=(OrientationConstraint("tool0", "base_link", None, (0.1, 0.1, 0.1)),))
    goal = HOME + np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1.0])  # turns wrist 3 (the tool) by 1 rad
    with pytest.raises(MotionError) as excinfo:
        planner(NoObstacles()).plan_to_joints(HOME, goal, step_index=0, constraints=upright)
    assert "violates path constraint constraints.orientation[0] (tool0" in planning_failed(excinfo)


def test_a_constraint_on_an_unknown_link_or_joint_fails_with_its_name() -> None:
    bad_link = Constraints(orientation=(OrientationConstraint("camera", "base_link", None, (0.1, 0.1, 0.1)),))
    with pytest.raises(MotionError) as excinfo:
        planner(NoObstacles()).plan_to_joints(HOME, GOAL, step_index=0, constraints=bad_link)
    assert "constraints.orientation[0]: unknown link 'camera'" in planning_failed(excinfo)
    bad_joint = Constraints(joint=(JointConstraint("elbow", 0.0, 0.1, 0.1),))
    with pytest.raises(MotionError) as excinfo:
        planner(NoObstacles()).plan_to_joints(HOME, GOAL, step_index=0, constraints=bad_joint)
    assert "constraints.joint[0]: unknown joint 'elbow'" in planning_failed(excinfo)


# --------------------------------------------------------------------------------------
# Script steps
# --------------------------------------------------------------------------------------


def moveto(index: int, **fields: object) -> MoveTo:
    return MoveTo(index=index, path=f"tasks[{index}]", spec={"task_type": "moveto"}, **fields)  # type: ignore[arg-type]


def test_plan_move_covers_every_moveto_mode_and_chains_from_the_previous_end() -> None:
    collision = NoObstacles()
    p = planner(collision, named_states={"moveit_home": np.radians([0, -90, 0, 0, 0, -180])})
    steps = [
        moveto(0, target="home", target_joints=tuple(TILTED)),
        moveto(1, direction="down", direction_vector=(1.0, 0.0, 0.0), distance=0.05),
        moveto(2, cartesian_target=(-0.45, 0.2, 0.35), planning_type="cartesian"),
        moveto(3, target="moveit_home"),
    ]
    start = HOME
    for step in steps:
        segment = p.plan_move(step, start, T_flange_tip=TIP)
        assert segment.step_index == step.index
        assert_executable(segment, start, collision)
        start = np.array(segment.points[-1].positions)
    np.testing.assert_allclose(start, np.radians([0, -90, 0, 0, 0, -180]), atol=1e-12)


def test_plan_move_names_the_step_when_the_target_is_unknown() -> None:
    with pytest.raises(MotionError) as excinfo:
        planner(NoObstacles()).plan_move(moveto(7, target="nowhere"), HOME)
    message = planning_failed(excinfo)
    assert message.startswith(
        "PLANNING_FAILED: tasks[7]: target 'nowhere' is neither a pose nor a named state"
    )


# --------------------------------------------------------------------------------------
# The packaged cell: real collision model, ePick with its 3 mm cup, EROBS sample poses
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def epick(cell: CellConfig) -> CollisionModel:
    return CollisionModel(cell, gripper="epick")


#: Two poses of the sample scripts (cms_poses.yaml, spincoat_to_hotplate.json) [rad].
DOCK_APPROACH = np.radians([152.33, -135.73, -106.46, -27.73, -270.37, -207.74])
HOTPLATE = np.radians([65.63, -106.82, -73.45, -90.04, -270.12, -206.28])


def test_the_sample_script_plans_collision_free_in_the_cell(
    cell: CellConfig, epick: CollisionModel, samples_dir: Path
) -> None:
    script = parse_script((samples_dir / "spincoat_to_hotplate.json").read_text())
    p = MotionPlanner(collision=epick, config=CONFIG, named_states=cell.named_states)
    tcp = cell.gripper("epick").T_flange_tcp()
    start = np.array(cell.initial_joint_state)
    moves = [step for step in script.steps if isinstance(step, MoveTo)]
    assert len(moves) == 7
    for step in moves:
        segment = p.plan_move(step, start, T_flange_tip=tcp, tip_link="epick_tip")
        assert_executable(segment, start, epick)
        assert np.array_equal(trajectory(segment)[0][-1], np.array(step.target_joints))
        start = trajectory(segment)[0][-1]


def test_a_blocked_move_in_the_cell_is_planned_around_the_obstacles(epick: CollisionModel) -> None:
    assert epick.check_path(np.stack([DOCK_APPROACH, HOTPLATE]), 0.01) is not None
    segment = MotionPlanner(collision=epick, config=CONFIG).plan_to_joints(
        DOCK_APPROACH, HOTPLATE, step_index=0
    )
    assert_executable(segment, DOCK_APPROACH, epick)
    q = trajectory(segment)[0]
    assert np.array_equal(q[-1], HOTPLATE)


def test_a_relative_move_into_the_hot_plate_fails_and_names_the_contact(
    cell: CellConfig, epick: CollisionModel
) -> None:
    p = MotionPlanner(collision=epick, config=CONFIG)
    tcp = cell.gripper("epick").T_flange_tcp()
    # The EROBS script presses 3 mm ("forward 0.003") and retreats 4.7 cm: both plan.
    for direction, distance in (((1.0, 0.0, 0.0), 0.003), ((-1.0, 0.0, 0.0), 0.047)):
        segment = p.plan_relative(HOTPLATE, direction, distance, step_index=0, T_flange_tip=tcp)
        assert_executable(segment, HOTPLATE, epick)
    with pytest.raises(MotionError) as excinfo:
        p.plan_relative(HOTPLATE, (1.0, 0.0, 0.0), 0.05, step_index=0, T_flange_tip=tcp, where="tasks[9]")
    message = planning_failed(excinfo)
    assert message.startswith("PLANNING_FAILED: tasks[9]: Cartesian path achieved only")
    assert "with hot_plate" in message

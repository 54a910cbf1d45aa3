"""Scenarios of the simulated tools: vacuum pick-up, pipettor bookkeeping, tool changer, model reloads."""

from __future__ import annotations

import math
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

from erobs_bt.backends.base import ErrorCode, MotionBackend, MotionError, Solution, ToolSegment
from erobs_bt.backends.sim.backend import SimBackend
from erobs_bt.backends.sim.controller import SimController
from erobs_bt.backends.sim.tools import SimulatedTool
from erobs_bt.backends.stack import MotionStack
from erobs_bt.planning.planner import CellPlanner
from erobs_bt.script.model import EndEffector, MoveTo, ToolExchange
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.config import load_cell
from erobs_bt.world.kinematics import fk
from erobs_bt.world.tools import (
    PipettorState,
    RobotModel,
    gripper_command,
    initial_tool_state,
    mounted_at_start,
    parse_parts,
    pipettor_command,
    resolve_end_effector,
    tcp_pose,
)
from erobs_bt.world.vision import CalibratedMarkerDetector

from helpers import pipettor

# Joint poses of FULL_EXPERIMENT_RUN.json (degrees, as in the script).
SAFE_TOOL_EXCHANGE = (152.33, -110.63, -100.17, -59.12, -270.43, -207.7)
DOCK_APPROACH = (152.33, -135.73, -106.46, -27.73, -270.37, -207.74)
LOAD_APPROACH = (143.73, -129.69, -124.24, -15.92, -270.41, -216.3)


def rad(degrees: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(math.radians(d) for d in degrees)


@pytest.fixture(scope="module")
def packaged_cell() -> CellConfig:
    return load_cell()


def with_extra(cell: CellConfig, **sections: Any) -> CellConfig:
    return replace(cell, extra=MappingProxyType({**cell.extra, **sections}))


def part_under_tcp(cell: CellConfig, q: tuple[float, ...], name: str, *, gap: float) -> dict[str, Any]:
    """A 4 mm thick sample whose top face is ``gap`` metres beyond the ePick's tool centre point."""
    T_tcp = fk(q) @ cell.gripper("epick").T_flange_tcp(None)
    centre = T_tcp[:3, 3] + T_tcp[:3, 2] * (gap + 0.002)  # tip z points into the part
    return {
        "name": name,
        "shape": "box",
        "size": [0.02, 0.02, 0.004],
        "pose": {"xyz": [float(v) for v in centre], "rpy": [0.0, 0.0, 0.0]},
    }


def end_effector(index: int, action: str, gripper: str | None = None) -> EndEffector:
    return EndEffector(index=index, path=f"tasks[{index}]", spec={}, action=action, gripper=gripper)


def moveto(index: int, joints: tuple[float, ...], name: str = "pose") -> MoveTo:
    return MoveTo(index=index, path=f"tasks[{index}]", spec={}, target=name, target_joints=joints)  # type: ignore[arg-type]


def lift(index: int, distance: float) -> MoveTo:
    # The ePick points down at the initial pose; flange "backward" is up there.
    return MoveTo(
        index=index,
        path=f"tasks[{index}]",
        spec={},
        direction="backward",
        direction_vector=(-1.0, 0.0, 0.0),
        distance=distance,
        planning_type="cartesian",
    )


# -- ePick vacuum --------------------------------------------------------------------------------


def test_vacuum_on_picks_up_the_part_the_cup_touches_and_vacuum_off_leaves_it_where_it_is(
    packaged_cell: CellConfig,
) -> None:
    q = packaged_cell.initial_joint_state
    cell = with_extra(packaged_cell, parts=[part_under_tcp(packaged_cell, q, "wafer", gap=0.001)])
    with SimBackend(cell, speed=math.inf) as backend:
        up = 0.05
        solution = backend.plan(
            [end_effector(0, "vacuum_on"), lift(1, up), end_effector(2, "vacuum_off")]
        ).result(timeout=60)
        assert [type(s).__name__ for s in solution.segments] == ["ToolSegment", "ArmSegment", "ToolSegment"]
        assert backend.tool_state().held is None, "planning does not change the live tool state"

        first = replace(solution, segments=solution.segments[:2])
        backend.execute(first, replay=False).result(timeout=60)
        held = backend.tool_state().held
        assert held is not None and held.part.name == "wafer", "the cup touched the wafer: it is held"
        assert "wafer" not in backend.tool_state().parts
        model = backend.planner.model
        assert model.collision.attached_object is not None, "the held part is a collision object"

        backend.execute(replace(solution, segments=solution.segments[2:]), replay=False).result(timeout=60)
        state = backend.tool_state()
        assert state.held is None and model.collision.attached_object is None
        lifted = state.parts["wafer"].matrix()
        original = parse_parts(cell)[0].matrix()
        # The wafer moved rigidly with the tool centre point, 5 cm back along the tool axis.
        T_start, T_end = fk(q), fk(backend.joint_positions())
        np.testing.assert_allclose(lifted, T_end @ np.linalg.inv(T_start) @ original, atol=1e-9)
        assert np.linalg.norm(lifted[:3, 3] - original[:3, 3]) == pytest.approx(up, abs=1e-4)
        assert lifted[2, 3] - original[2, 3] > 0.045, "up, away from where it lay"
        assert state.gripper_states["epick"] == "vacuum_off"


def test_vacuum_on_away_from_any_part_holds_nothing(packaged_cell: CellConfig) -> None:
    q = packaged_cell.initial_joint_state
    cell = with_extra(packaged_cell, parts=[part_under_tcp(packaged_cell, q, "wafer", gap=0.02)])
    state = initial_tool_state(cell, "epick")

    new, message = gripper_command(cell, state, "epick", "vacuum_on", q)

    assert new.held is None and "no part" in message
    assert new.gripper_states["epick"] == "vacuum_on", "the command itself succeeds"
    touching, _ = gripper_command(cell, state, "epick", "vacuum_on", q, contact_tolerance=0.025)
    assert touching.held is not None, "the same part within the tolerance is picked up"


def test_end_effector_on_a_gripper_without_group_is_a_no_op_and_wrong_states_fail(
    packaged_cell: CellConfig,
) -> None:
    epick = initial_tool_state(packaged_cell, "epick")
    pipettor = initial_tool_state(packaged_cell, "pipettor")
    bare = initial_tool_state(packaged_cell, "none")

    assert resolve_end_effector(packaged_cell, pipettor, end_effector(0, "vacuum_on")) is None
    assert resolve_end_effector(packaged_cell, bare, end_effector(0, "hande_open")) is None
    assert resolve_end_effector(packaged_cell, epick, end_effector(3, "vacuum_on")) == ToolSegment(
        3, "epick", "vacuum_on"
    )
    with pytest.raises(
        MotionError, match=r"PLANNING_FAILED: tasks\[1\]: hande_open is not a state of the epick"
    ):
        resolve_end_effector(packaged_cell, epick, end_effector(1, "hande_open"))
    with pytest.raises(MotionError, match=r"end_effector_type hande is not attached \(attached: epick\)"):
        resolve_end_effector(packaged_cell, epick, end_effector(2, "hande_open", gripper="hande"))


def test_parts_section_errors_name_the_file_and_key(packaged_cell: CellConfig) -> None:
    bad = with_extra(packaged_cell, parts=[{"name": "table", "shape": "box", "size": [1, 1, 1], "pose": {}}])
    with pytest.raises(ValueError, match=r"cell.yaml: parts\[0\].name: 'table' is already an obstacle"):
        parse_parts(bad)
    bad = with_extra(
        packaged_cell,
        parts=[{"name": "p", "shape": "box", "size": [1, 1], "pose": {"xyz": [0, 0, 0], "rpy": [0, 0, 0]}}],
    )
    with pytest.raises(ValueError, match=r"parts\[0\].size: expected 3 positive numbers"):
        parse_parts(bad)


# -- pipettor ------------------------------------------------------------------------------------


def test_pipettor_tracks_the_aspirated_volume_and_refuses_impossible_commands() -> None:
    state = PipettorState(tip=True, volume=0.0, stroke_ul=200.0)

    state, message = pipettor_command(state, "EXPEL", volume_pct=0.2, where="tasks[0]")
    assert state.volume == 0.0 and "dispensed 0 of the stroke" in message and "the rest was air" in message
    state, message = pipettor_command(state, "SUCK", volume_pct=0.5, led_color=(0.0, 1.0, 0.0))
    assert state.volume == pytest.approx(0.5) and state.led == (0.0, 1.0, 0.0)
    assert "100 µL" in message
    state, _ = pipettor_command(state, "SUCK", volume_pct=0.3)
    assert state.volume == pytest.approx(0.8)
    with pytest.raises(MotionError, match="would overfill"):
        pipettor_command(state, "SUCK", volume_pct=0.3)
    state, _ = pipettor_command(state, "EXPEL", volume_pct=0.6)
    assert state.volume == pytest.approx(0.2)
    emptied, message = pipettor_command(state, "EXPEL", volume_pct=0.5)
    assert emptied.volume == 0.0 and "only 0.2 of the stroke (40 µL) was aspirated" in message
    state, _ = pipettor_command(state, "EXPEL")
    assert state.volume == 0.0, "EXPEL without volume_pct dispenses everything"

    state, _ = pipettor_command(state, "SUCK", volume_pct=0.1)
    state, message = pipettor_command(state, "EJECT_TIP")
    assert not state.tip and state.volume == 0.0 and "discarding" in message
    with pytest.raises(MotionError, match="no tip on the cone"):
        pipettor_command(state, "SUCK", volume_pct=0.1)
    with pytest.raises(MotionError, match="no tip to eject"):
        pipettor_command(state, "EJECT_TIP")
    with pytest.raises(MotionError, match="needs led_color"):
        pipettor_command(state, "SET_LED")
    state, _ = pipettor_command(state, "SET_LED", led_color=(1.0, 0.0, 0.0))
    assert state.led == (1.0, 0.0, 0.0)


# -- tool changer and model revision -------------------------------------------------------------


def exchange(
    index: int, operation: str, gripper: str, dock: int, approach: tuple[float, ...]
) -> ToolExchange:
    return ToolExchange(
        index=index,
        path=f"tasks[{index}]",
        spec={},
        operation=operation,
        gripper=gripper,
        dock_number=dock,
        approach_pose=f"{operation}_approach",
        approach_joints=rad(approach),  # type: ignore[arg-type]
    )


def test_dock_and_load_change_the_gripper_and_the_revision_through_the_dock(
    packaged_cell: CellConfig,
) -> None:
    with SimBackend(packaged_cell, speed=math.inf) as backend:
        assert backend.current_gripper() == "epick"
        assert backend.model_revision() == "robot_models__epick__3mm_dia"
        solution = backend.plan([moveto(0, rad(SAFE_TOOL_EXCHANGE))]).result(timeout=60)
        backend.execute(solution, replay=False).result(timeout=60)

        refused = backend.run_step(exchange(1, "dock", "hande", 4, DOCK_APPROACH)).exception(timeout=60)
        assert isinstance(refused, MotionError) and refused.code is ErrorCode.EXECUTION_FAILED
        assert "gripper hande is not the attached tool (epick)" in str(refused)
        assert backend.joint_positions() == solution.final_positions(), "a refused exchange moves nothing"

        message = backend.run_step(exchange(1, "dock", "epick", 4, DOCK_APPROACH)).result(timeout=60)
        assert "epick docked in dock 4" in message
        assert backend.current_gripper() == "none"
        assert backend.model_revision() == "robot_models__none"
        assert backend.tool_state().docks[4] == "epick"
        assert backend.model_reloads == 1
        # The dock sequence ends 0.03 m back (up) from dock 4's seat (config/cell.yaml's
        # tool_exchange block; dock_approach and load_approach agree to about a millimetre).
        seat = packaged_cell.dock_seat(4)
        assert seat is not None
        np.testing.assert_allclose(
            fk(backend.joint_positions())[:3, 3], seat[:3, 3] - 0.03 * seat[:3, 0], atol=3e-3
        )

        refused = backend.run_step(exchange(2, "load", "hande", 3, LOAD_APPROACH)).exception(timeout=60)
        assert isinstance(refused, MotionError) and "dock 3 holds pipettor, not the hande" in str(refused)

        backend.run_step(exchange(2, "load", "pipettor", 3, LOAD_APPROACH)).result(timeout=60)
        assert backend.current_gripper() == "pipettor"
        assert backend.model_revision() == "robot_models__pipettor"
        assert backend.tool_state().docks[3] is None
        assert backend.model_reloads == 2

        refused = backend.run_step(exchange(3, "load", "hande", 1, LOAD_APPROACH)).exception(timeout=60)
        assert isinstance(refused, MotionError) and "load needs the bare flange" in str(refused)
        backend.prepare_goal("pipettor")
        assert backend.model_reloads == 2, "the same tool again: no reload"


def test_the_cup_override_is_fitted_at_a_goals_start_and_when_the_epick_is_loaded(
    packaged_cell: CellConfig,
) -> None:
    """EROBS's ``cup_profile`` parameter (the node's ``cup_profile``): the next goal's
    ePick, and an ePick a tool_exchange loads, get that cup; ``""`` is the default again."""
    with SimBackend(packaged_cell, speed=math.inf) as backend:
        with pytest.raises(
            ValueError, match=r"Unknown cup profile: 9mm \(available: 10mm_dia, 20mm_dia, 3mm_dia\)"
        ):
            backend.set_cup_override("9mm")
        backend.set_cup_override("10mm_dia")
        assert backend.model_revision() == "robot_models__epick__3mm_dia", "not before the next goal"
        backend.prepare_goal("epick")
        assert backend.model_revision() == "robot_models__epick__10mm_dia"
        solution = backend.plan([moveto(0, rad(SAFE_TOOL_EXCHANGE))]).result(timeout=60)
        backend.execute(solution, replay=False).result(timeout=60)
        backend.run_step(exchange(1, "dock", "epick", 4, DOCK_APPROACH)).result(timeout=60)
        backend.set_cup_override("20mm_dia")
        backend.run_step(exchange(2, "load", "epick", 4, LOAD_APPROACH)).result(timeout=60)
        assert backend.tool_state().cup_profile == "20mm_dia"
        assert backend.model_revision() == "robot_models__epick__20mm_dia"
        backend.set_cup_override("")
        backend.prepare_goal("epick")
        assert backend.model_revision() == "robot_models__epick__3mm_dia", "the cell's default cup"


def test_robot_model_reloads_only_when_the_revision_changes(packaged_cell: CellConfig) -> None:
    state = initial_tool_state(packaged_cell, "epick")
    model = RobotModel(packaged_cell, state)

    assert model.revision == "robot_models__epick__3mm_dia" and model.reloads == 0
    assert not model.sync(state)
    assert not model.sync(replace(state, gripper_states=MappingProxyType({"epick": "vacuum_on"})))
    assert model.reloads == 0, "gripper states and held parts are not a new model"
    assert model.sync(replace(state, cup_profile="10mm_dia"))
    assert model.revision == "robot_models__epick__10mm_dia" and model.reloads == 1
    assert not model.sync(replace(state, cup_profile="10mm_dia"))
    assert model.sync(replace(state, gripper="hande", cup_profile=None))
    assert model.revision == "robot_models__hande" and model.reloads == 2


def test_operator_mount_changes_the_tool_unless_a_part_is_held(packaged_cell: CellConfig) -> None:
    q = packaged_cell.initial_joint_state
    cell = with_extra(packaged_cell, parts=[part_under_tcp(packaged_cell, q, "wafer", gap=0.0)])
    with SimBackend(cell, speed=math.inf) as backend:
        backend.execute(backend.plan([end_effector(0, "vacuum_on")]).result(timeout=60), replay=False).result(
            60
        )
        assert backend.tool_state().held is not None
        with pytest.raises(MotionError, match="cannot mount pipettor: the epick holds part wafer"):
            backend.prepare_goal("pipettor")
        backend.execute(
            backend.plan([end_effector(0, "vacuum_off")]).result(timeout=60), replay=False
        ).result(60)

        backend.prepare_goal("pipettor")

        assert (
            backend.current_gripper() == "pipettor" and backend.model_revision() == "robot_models__pipettor"
        )
        assert backend.tool_state().docks[3] is None, "the pipettor left its dock"
        assert backend.tool_state().docks[4] == "epick", "the ePick went back to its home dock"
        assert backend.model_reloads == 0, "nothing planned with the pipettor yet: no reload"
        backend.plan([moveto(1, (*q[:5], q[5] + 0.1))]).result(timeout=60)
        assert backend.model_reloads == 1, "the first motion planned with the pipettor reloads the model"
        np.testing.assert_allclose(
            tcp_pose(cell, backend.tool_state(), q)[:3, 3],
            (fk(q) @ cell.gripper("pipettor").T_flange_tcp())[:3, 3],
        )


def test_a_tool_mounted_by_hand_is_loaded_into_the_model_only_when_a_plan_needs_it(
    packaged_cell: CellConfig,
) -> None:
    with SimBackend(packaged_cell, speed=math.inf) as backend:
        assert backend.current_gripper() == "epick"
        backend.prepare_goal("pipettor")
        assert backend.model_revision() == "robot_models__pipettor", "the live revision follows at once"
        assert "pipettor SUCK" in backend.run_step(pipettor(0)).result(timeout=60)
        assert backend.model_reloads == 0, "a pipettor step plans nothing: the model is not reloaded"
        assert backend.planner.model.revision != "robot_models__pipettor"

        q = packaged_cell.initial_joint_state
        solution = backend.plan([moveto(1, (*q[:5], q[5] + 0.1))]).result(timeout=60)
        assert solution.model_revision == "robot_models__pipettor"
        assert backend.model_reloads == 1 and backend.planner.model.revision == "robot_models__pipettor"
        backend.prepare_goal("epick")
        backend.prepare_goal("pipettor")
        assert backend.model_reloads == 1, "mounted and swapped back with nothing planned: no reload"


# -- the tools' drivers and the tool changer as parts of the motion stack ------------------------


class RecordingChanger:
    """A tool changer (the stack's ToolChanger part) that records each switch with the arm's
    joint positions at that moment."""

    def __init__(self, arm: SimController) -> None:
        self._arm = arm
        self.calls: list[tuple[str, bool, tuple[float, ...]]] = []

    def set_power(self, on: bool, *, what: str) -> None:
        self.calls.append(("power", on, self._arm.joint_positions()))

    def set_locked(self, locked: bool, *, what: str) -> None:
        self.calls.append(("locked", locked, self._arm.joint_positions()))

    def stop(self) -> None:
        """Nothing to interrupt."""

    def exchanged(self, gripper: str, *, what: str) -> None:
        """Nothing to relaunch in the simulated cell."""


def stack_of(cell: CellConfig) -> tuple[MotionStack, RecordingChanger, dict[str, SimulatedTool]]:
    """The simulated cell's parts, with a changer that records what a tool exchange switches."""
    tools = initial_tool_state(cell, mounted_at_start(cell))
    arm = SimController(cell.initial_joint_state, speed=math.inf)
    changer = RecordingChanger(arm)
    drivers = {name: SimulatedTool(name) for name in cell.grippers}
    stack = MotionStack(
        cell,
        planner=CellPlanner(cell, tools),
        arm=arm,
        tool_drivers=drivers,
        changer=changer,
        detector=CalibratedMarkerDetector(cell),
        tool_state=tools,
    )
    return stack, changer, drivers


def test_sim_backend_is_an_assembly_of_the_one_motion_stack(packaged_cell: CellConfig) -> None:
    with SimBackend(packaged_cell, speed=math.inf) as backend:
        assert type(backend) is MotionStack and MotionStack.__mro__ == (MotionStack, object)
        assert isinstance(backend, MotionBackend)
        assert isinstance(backend.planner, CellPlanner) and isinstance(backend.arm, SimController)


def test_a_tool_exchange_switches_the_changer_in_erobs_order(packaged_cell: CellConfig) -> None:
    stack, changer, _ = stack_of(packaged_cell)
    with stack:
        to_exchange = stack.plan([moveto(0, rad(SAFE_TOOL_EXCHANGE))]).result(timeout=60)
        stack.execute(to_exchange, replay=False).result(60)
        before = stack.arm.joint_positions()
        stack.run_step(exchange(1, "dock", "epick", 4, DOCK_APPROACH)).result(timeout=60)
        after = stack.arm.joint_positions()
        assert [(kind, value) for kind, value, _ in changer.calls] == [("power", False), ("locked", False)]
        assert changer.calls[0][2] == before, "the tool voltage goes off before the first docking motion"
        assert before != changer.calls[1][2] != after, "the changer unlocks in the dock, between the motions"

        changer.calls.clear()
        stack.run_step(exchange(2, "load", "pipettor", 3, LOAD_APPROACH)).result(timeout=60)
        assert [(kind, value) for kind, value, _ in changer.calls] == [("locked", True), ("power", True)]
        assert changer.calls[0][2] == changer.calls[1][2] != stack.arm.joint_positions(), (
            "locked and powered in the dock, before the arm leaves it"
        )


def test_a_command_the_bookkeeping_refuses_is_not_sent_to_the_tool(packaged_cell: CellConfig) -> None:
    stack, _, drivers = stack_of(packaged_cell)
    with stack:
        wrong = Solution((ToolSegment(0, "hande", "open"),), stack.model_revision())
        refused = stack.execute(wrong, replay=False).exception(timeout=60)
        assert isinstance(refused, MotionError) and refused.code is ErrorCode.EXECUTION_FAILED
        assert drivers["hande"].state is None, "nothing was sent to the hande"

        stack.execute(stack.plan([end_effector(1, "vacuum_on")]).result(timeout=60), replay=False).result(60)
        assert drivers["epick"].state == "vacuum_on"
        not_attached = stack.run_step(pipettor(2)).exception(timeout=60)
        assert isinstance(not_attached, MotionError) and "the pipettor is not attached" in str(not_attached)
        assert drivers["pipettor"].operation is None

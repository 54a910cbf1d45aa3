"""Scenarios of the simulated cell behind the MotionBackend protocol: plan, execute, vision, stop."""

from __future__ import annotations

import math
import threading
from dataclasses import replace

import numpy as np
import pytest

from erobs_bt.backends.base import ArmSegment, ErrorCode, MotionBackend, Solution
from erobs_bt.backends.sim.backend import SimBackend, mounted_at_start
from erobs_bt.script.model import EndEffector, MoveTo, Pause, Pipettor, Step, Vision
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.kinematics import fk
from erobs_bt.world.tools import planning_tip

from helpers import error_of

SAMPLE_SCAN_1 = tuple(math.radians(d) for d in (13.38, -112.45, -65.22, -90.98, -267.33, -166.94))


def test_the_perf_sample_unit_is_planned_as_one_sequence_and_ends_at_the_last_target(
    cell: CellConfig, perf_steps: tuple[Step, ...]
) -> None:
    with SimBackend(cell, speed=math.inf, seed=1) as backend:
        assert isinstance(backend, MotionBackend)
        assert mounted_at_start(cell) == "epick" == backend.current_gripper()
        received: list[tuple[float, ...]] = []
        backend.add_joint_state_listener(lambda names, q, qd: received.append(q))
        live = backend.joint_positions()

        solution = backend.plan(perf_steps, start=None).result(timeout=60)

        arms = [s for s in solution.segments if isinstance(s, ArmSegment)]
        assert [s.step_index for s in arms] == [0, 1]
        assert solution.start_positions == live and arms[0].points[0].positions == live
        assert arms[1].points[0].positions == arms[0].points[-1].positions, "one connected sequence"
        assert solution.model_revision == backend.model_revision() == "robot_models__epick__3mm_dia"
        assert Solution.from_bytes(solution.to_bytes()).segments == solution.segments

        backend.execute(solution, replay=False).result(timeout=60)

        target = perf_steps[-1]
        assert isinstance(target, MoveTo) and target.target_joints is not None
        assert backend.joint_positions() == pytest.approx(target.target_joints, abs=1e-12)
        assert backend.joint_positions() == solution.final_positions()
        assert backend.arm.wait_idle(5)
        assert len(received) >= 2, "joint states were published while the unit ran"


def test_a_plan_from_another_start_is_rejected_by_the_controller_unless_within_tolerance(
    cell: CellConfig,
) -> None:
    home = MoveTo(index=0, path="tasks[0]", spec={}, target="moveit_home")
    with SimBackend(cell, speed=math.inf) as backend:
        live = np.array(backend.joint_positions())
        far = tuple(live + np.array([0.03, 0, 0, 0, 0, 0]))
        near = tuple(live + np.array([0.004, 0, 0, 0, 0, 0]))

        error = error_of(backend.execute(backend.plan([home], start=far).result(timeout=60), replay=True))
        assert error.code is ErrorCode.EXECUTION_FAILED and "start tolerance 0.01 rad" in str(error)
        assert not error.fatal, "a start-state rejection is a non-fatal replay error (fresh attempt follows)"
        assert backend.joint_positions() == tuple(live)

        backend.execute(backend.plan([home], start=near).result(timeout=60), replay=True).result(timeout=60)
        assert backend.joint_positions() == pytest.approx(cell.named_states["moveit_home"], abs=1e-12)


def test_solutions_of_another_model_revision_and_non_motion_steps_are_refused(
    cell: CellConfig, perf_steps: tuple[Step, ...]
) -> None:
    with SimBackend(cell, speed=math.inf) as backend:
        solution = backend.plan(perf_steps).result(timeout=60)

        error = error_of(
            backend.execute(replace(solution, model_revision="robot_models__hande"), replay=True)
        )
        assert "planned for model revision robot_models__hande" in str(error)

        error = error_of(backend.plan([*perf_steps, Pause(index=2, path="tasks[2]", spec={})]))
        assert str(error) == "PLANNING_FAILED: tasks[2]: a pause step cannot be planned in a motion unit"

        error = error_of(backend.plan([MoveTo(index=0, path="tasks[0]", spec={}, target="nowhere")]))
        assert str(error).startswith("PLANNING_FAILED: tasks[0]: target 'nowhere' is neither a pose nor")


def test_stop_ramps_the_arm_down_and_drops_the_rest_of_the_solution(
    cell: CellConfig, perf_steps: tuple[Step, ...]
) -> None:
    with SimBackend(cell, speed=4.0) as backend:
        solution = backend.plan(perf_steps).result(timeout=60)
        stopped = threading.Event()

        def stop_when_moving(names: tuple[str, ...], q: tuple[float, ...], qd: tuple[float, ...]) -> None:
            # Stop from the controller thread at a fixed simulated instant of the motion: a
            # stop from the test thread could come after the end on a loaded machine.
            if max(map(abs, qd)) > 0.1 and not stopped.is_set():
                backend.stop()
                stopped.set()

        backend.add_joint_state_listener(stop_when_moving)

        future = backend.execute(solution, replay=False)
        assert stopped.wait(timeout=60)

        error = error_of(future)
        assert error.code is ErrorCode.EXECUTION_FAILED and "stopped" in str(error)
        assert backend.arm.wait_idle(5)
        assert backend.joint_positions() != solution.final_positions()


def test_pipettor_steps_need_the_pipettor_and_keep_its_volume(cell: CellConfig) -> None:
    suck = Pipettor(index=0, path="tasks[0]", spec={}, operation="SUCK", volume_pct=0.4)
    with SimBackend(cell, speed=math.inf) as backend:
        error = error_of(backend.run_step(suck))
        assert "the pipettor is not attached (attached: epick)" in str(error)

        backend.prepare_goal("pipettor")
        assert "holds 0.4 of the stroke" in backend.run_step(suck).result(timeout=60)
        expel = Pipettor(index=1, path="tasks[1]", spec={}, operation="EXPEL", volume_pct=0.3)
        assert "holds 0.1 of the stroke" in backend.run_step(expel).result(timeout=60)
        assert backend.pipettor_state().volume == pytest.approx(0.1)


# -- vision --------------------------------------------------------------------------------------


def vision(kind: str = "vision_moveto", **fields: object) -> Vision:
    return Vision(index=3, path="tasks[3]", spec={}, kind=kind, detector="marker", **fields)  # type: ignore[arg-type]


def test_vision_moveto_finds_a_configured_marker_and_moves_relative_to_it(cell: CellConfig) -> None:
    marker = cell.marker(1)
    offset = (0.01, -0.005, 0.0)
    step = vision(tag_id=1, scan_poses=("sample_scan_1",), scan_joints=(SAMPLE_SCAN_1,), marker_offset=offset)
    with SimBackend(cell, speed=math.inf) as backend:
        message = backend.run_step(step).result(timeout=120)

        assert "marker 1" in message
        T_tool = fk(backend.joint_positions()) @ planning_tip(cell, backend.tool_state())
        expected = marker.pose.matrix()[:3, 3] + marker.pose.matrix()[:3, :3] @ np.array(offset)
        expected[2] += cell.gripper("epick").z_offset  # z_offset 0 in the step: the gripper's default
        np.testing.assert_allclose(T_tool[:3, 3], expected, atol=2e-4)
        assert T_tool[2, 2] == pytest.approx(-1.0, abs=1e-6), "the tool points straight down"


def test_vision_fails_naming_the_tag_when_the_marker_is_missing_or_out_of_view(cell: CellConfig) -> None:
    with SimBackend(cell, speed=math.inf) as backend:
        missing = error_of(
            backend.run_step(vision(tag_id=99, scan_poses=("s1",), scan_joints=(SAMPLE_SCAN_1,)))
        )
        assert missing.code is ErrorCode.EXECUTION_FAILED
        assert "tasks[3]: vision_moveto: DETECTION_FAILED: marker 99 not visible" in str(missing)
        assert "no such marker in the cell" in str(missing)
        assert backend.joint_positions() == pytest.approx(SAMPLE_SCAN_1, abs=1e-12), (
            "it went to the scan pose"
        )

        hidden = error_of(
            backend.run_step(vision(tag_id=25, scan_poses=("s1",), scan_joints=(SAMPLE_SCAN_1,)))
        )
        assert "marker 25 not visible from any of 1 scan pose(s)" in str(hidden)
        assert "off the camera axis" in str(hidden) or "away" in str(hidden)


def test_vision_scan_caches_what_it_sees_for_later_steps(cell: CellConfig) -> None:
    with SimBackend(cell, speed=math.inf) as backend:
        message = backend.run_step(
            vision("vision_scan", scan_poses=("s1",), scan_joints=(SAMPLE_SCAN_1,))
        ).result(timeout=120)
        assert "1 (1×)" in message

        detect = vision(tag_id=1, detect_only=True)
        backend.prepare_goal("epick")
        home = MoveTo(index=0, path="tasks[0]", spec={}, target="moveit_home")
        backend.execute(backend.plan([home]).result(timeout=60), replay=False).result(timeout=60)
        assert "detected marker 1" in backend.run_step(detect).result(timeout=60), "from the scan cache"


def test_a_replay_from_the_wrong_start_is_refused_before_its_tool_commands_run(cell: CellConfig) -> None:
    on = EndEffector(index=0, path="tasks[0]", spec={}, action="vacuum_on")
    there = MoveTo(index=1, path="tasks[1]", spec={}, target="sample_scan_1", target_joints=SAMPLE_SCAN_1)
    with SimBackend(cell, speed=math.inf) as backend:
        solution = backend.plan([on, there], start=None).result(timeout=60)
        backend.execute(solution, replay=False).result(timeout=60)  # now at the target, vacuum on
        off = backend.plan([EndEffector(index=0, path="tasks[0]", spec={}, action="vacuum_off")], start=None)
        backend.execute(off.result(timeout=60), replay=False).result(timeout=60)
        error = error_of(backend.execute(solution, replay=True))
        assert "starts" in str(error) and str(error).startswith("EXECUTION_FAILED: goal rejected")
        assert backend.tool_state().gripper_states.get("epick") == "vacuum_off", "vacuum_on never ran"

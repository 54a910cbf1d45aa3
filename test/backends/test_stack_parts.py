"""The motion stack's parts, each on its own (issue 35): the speculation's forecast plans and
joins, the live state's scene history, the execution's stop, the core's tool prediction.

Real parts of the simulated cell (its planner and simulated controller, ``speed=inf``); the
parts are built the way :class:`~erobs_bt.backends.stack.MotionStack` builds them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from erobs_bt.backends.base import ArmSegment, ErrorCode, MotionError
from erobs_bt.backends.sim.backend import SimBackend
from erobs_bt.backends.sim.tools import SimulatedChanger
from erobs_bt.backends.stack import MotionStack
from erobs_bt.backends.stack.core import StackCore
from erobs_bt.backends.stack.execution import Execution
from erobs_bt.backends.stack.speculation import JOIN_TOLERANCE, Speculation
from erobs_bt.backends.stack.state import SCENE_HISTORY, LiveState
from erobs_bt.backends.stack.workers import Worker
from erobs_bt.motion import START_TOLERANCE
from erobs_bt.plan import ScriptParser
from erobs_bt.script.model import MoveTo
from erobs_bt.world.cell import CellConfig, Obstacle, Pose, Shape
from erobs_bt.world.scene import World

POSES = Path(__file__).resolve().parents[2] / "config" / "poses.yaml"
SCRIPT = """{"start_gripper": "pipettor", "tasks": [
  {"task_type": "moveto", "target": "transport", "planning_type": "joint"},
  {"task_type": "moveto", "target": "dispense_above", "planning_type": "joint"}
]}"""


@pytest.fixture
def stack(cell: CellConfig) -> Iterator[MotionStack]:
    with SimBackend(cell, speed=math.inf, gripper="pipettor") as made:
        yield made


def _core(stack: MotionStack) -> StackCore:
    return StackCore(
        cell=stack.cell, planner=stack.planner, arm=stack.arm, contact_tolerance=0.0, name="t", label="test"
    )


def _moves(cell: CellConfig) -> list[MoveTo]:
    steps = ScriptParser.from_files(cell=None, poses=POSES)(SCRIPT).steps
    assert all(isinstance(s, MoveTo) for s in steps)
    return [s for s in steps if isinstance(s, MoveTo)]


def _box(name: str, x: float) -> Obstacle:
    return Obstacle(
        name=name, shape=Shape("box", (0.05, 0.05, 0.05)), frame="base_link", pose=Pose(xyz=(x, 0.9, 0.9))
    )


def test_a_forecast_plan_is_taken_only_from_within_the_start_tolerance_with_its_tool_state_and_world(
    stack: MotionStack,
) -> None:
    core = _core(stack)
    speculation = Speculation(core)
    first, _ = _moves(stack.cell)
    q = tuple(float(x) for x in stack.arm.joint_positions())
    tools = stack.tool_state()
    world = stack.world()
    segment = stack.planner.plan_move(first, q, tools=tools, world=world)
    speculation.keep_forecast(world, first, q, tools, segment)

    assert speculation.forecast_plan(first, q, tools, world) is segment
    assert speculation.forecast_plans_used == 1
    # Where a real arm stops: a few microradians from the last point (within START_TOLERANCE).
    settled = (q[0] + 1e-6, *q[1:])
    assert speculation.forecast_plan(first, settled, tools, world) is segment
    assert speculation.forecast_plans_used == 2
    # The nearest of two kept plans is taken.
    near = (q[0] + 0.004, *q[1:])
    closer = stack.planner.plan_move(first, near, tools=tools, world=world)
    speculation.keep_forecast(world, first, near, tools, closer)
    assert speculation.forecast_plan(first, (q[0] + 0.003, *q[1:]), tools, world) is closer
    assert speculation.forecast_plan(first, settled, tools, world) is segment
    moved = (q[0] + START_TOLERANCE + 0.004 + 1e-6, *q[1:])
    assert speculation.forecast_plan(first, moved, tools, world) is None, "another start: plan it"
    other = World.of([_box("crate", 0.5)], where="test")
    assert speculation.forecast_plan(first, q, tools, other) is None, "another world: plan it"
    assert speculation.forecast_plans_used == 4


def test_a_move_planned_side_by_side_is_joined_within_the_tolerance_and_replanned_beyond(
    stack: MotionStack,
) -> None:
    speculation = Speculation(_core(stack))
    first, _ = _moves(stack.cell)
    q = tuple(float(x) for x in stack.arm.joint_positions())
    tools = stack.tool_state()
    segment = stack.planner.plan_move(first, q, tools=tools)
    planned: Future[ArmSegment] = Future()
    planned.set_result(segment)

    near = (q[0] + 0.5 * JOIN_TOLERANCE, *q[1:])
    assert speculation.joined((q, tools, planned), near, tools) is segment
    far = (q[0] + 2.0 * JOIN_TOLERANCE, *q[1:])
    pending: Future[ArmSegment] = Future()
    assert speculation.joined((q, tools, pending), far, tools) is None
    assert pending.cancelled(), "a move that does not continue the sequence is dropped"
    assert speculation.counts == {"joined": 1, "replanned": 1}


def test_the_scene_history_keeps_the_last_worlds_and_tells_what_was_added_since(stack: MotionStack) -> None:
    state = LiveState(_core(stack), stack.tool_state())
    worlds = [World.of([_box("crate", 0.3 + 0.001 * i)], where="test") for i in range(SCENE_HISTORY + 1)]
    for world in worlds:
        state.remember_world(world)
    now = World.of([_box("crate", 0.3 + 0.001 * SCENE_HISTORY), _box("bin", -0.4)], where="test")

    assert state.added_since(worlds[0].revision, now) is None, "the oldest world is forgotten"
    added = state.added_since(worlds[-1].revision, now)
    assert added is not None and [o.name for o in added] == ["bin"]
    moved = state.added_since(worlds[-2].revision, now)
    assert moved is not None and sorted(o.name for o in moved) == ["bin", "crate"], "a moved object is new"


def test_a_stop_fails_every_dispatch_begun_before_it_and_none_after(stack: MotionStack) -> None:
    core = _core(stack)
    pool = Worker("t-action")
    try:
        execution = Execution(
            core,
            LiveState(core, stack.tool_state()),
            tool_drivers={},
            changer=SimulatedChanger(),
            faults=None,
            pool=pool,
            check_open=lambda: None,
        )
        before = execution.dispatch("execute", replay=False, step_types=(), step_indices=[0])
        execution.stop()
        after = execution.dispatch("execute", replay=False, step_types=(), step_indices=[0])
        with pytest.raises(MotionError) as stopped:
            execution.check_stopped(before)
        assert stopped.value.code is ErrorCode.EXECUTION_FAILED and "stopped by request" in str(stopped.value)
        execution.check_stopped(after)
    finally:
        pool.shutdown()


def test_the_core_predicts_the_tool_state_a_solution_leaves_as_executing_it_does(stack: MotionStack) -> None:
    core = _core(stack)
    solution = stack.plan(_moves(stack.cell)).result(120)
    predicted = core.predict_tools(stack.tool_state(), solution)
    stack.execute(solution, replay=False).result(120)
    assert predicted == stack.tool_state()

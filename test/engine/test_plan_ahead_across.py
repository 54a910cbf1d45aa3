"""Plan-ahead across tool exchanges (issue 24): the unit after an exchange is planned while
the robot still works before it, with the model the exchange will leave; never across a
vision step (the unit after one is planned from the vision step's final motion's plan, once it
has seen its marker).

The simulated cell (the real motion stack, planner and bookkeeping) at ``speed=inf``; every
wait is on the goal's completion or a gated outcome.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from erobs_bt.backends.base import PlansAcross, Solution
from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.backends.sim.backend import SimBackend
from erobs_bt.orchestrator import OrchestratorListener, State
from erobs_bt.paths import config_file
from erobs_bt.plan import ScriptParser, plan_goal
from erobs_bt.planning.forecast import forecast_exchanges
from erobs_bt.script.model import JointPositions, Step, ToolExchange
from erobs_bt.session import EngineConfig, build_engine
from erobs_bt.settings import EngineSettings
from erobs_bt.world.config import load_cell

from helpers import Recorder, make_orchestrator, move, script_json, show, wait_for

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "config" / "full_experiment.json"
POSES = REPO / "config" / "poses.yaml"


class _Resume(OrchestratorListener):
    """Keeps the records; resumes every pause step at once."""

    def __init__(self) -> None:
        self.engine: Any = None
        self.records: list[dict[str, Any]] = []

    def state_changed(self, state: State, message: str) -> None:
        if state is State.PAUSED and self.engine is not None:
            self.engine.orchestrator.resume()

    def event(self, goal_id: str, record: Any) -> None:
        self.records.append(dict(record))


def test_the_units_after_the_tool_exchanges_are_planned_ahead_across_them_and_used() -> None:
    units = plan_goal(
        SCRIPT.read_bytes(), parser=ScriptParser.from_files(cell=None, poses=POSES), enable_batching=True
    ).units
    after_exchanges = {
        u.index + 1 for u in units if u.is_motion and units[u.index - 1].steps[0].task_type == "tool_exchange"
    }
    after_vision = {
        u.index + 1
        for u in units
        if u.is_motion
        and not units[u.index - 1].is_motion
        and units[u.index - 1].steps[0].task_type not in ("tool_exchange", "pipettor", "pause")
    }
    assert len(after_exchanges) == 2 and len(after_vision) == 1
    probe = _Resume()
    engine = build_engine(
        EngineConfig(poses=POSES, settings=EngineSettings(speed=math.inf, plan_ahead=True)), listener=probe
    )
    probe.engine = engine
    try:
        assert isinstance(engine.backend, PlansAcross)
        handle = engine.orchestrator.submit(SCRIPT.read_text(), dry_run=False)
        result = handle.wait(600)
        assert result.success, result.error_message
        solutions = dict(handle.context.solutions)
    finally:
        engine.close()
    ahead = [r for r in probe.records if r["event"] == "plan_ahead"]
    for number in after_exchanges:
        events = [(r["status"], r["detail"]) for r in ahead if r["unit"] == number]
        assert [s for s, _ in events] == ["started", "used"], events
        assert "across 2 tool exchanges" in events[0][1]
    # Never across a vision step: the unit after it is planned only once the vision step has
    # detected its marker and planned its final motion, from that plan's end.
    (vision_next,) = after_vision
    events = [(r["status"], r["detail"]) for r in ahead if r["unit"] == vision_next]
    assert [s for s, _ in events] == ["started", "used"], events
    assert events[0][1] == f"during unit {vision_next - 1}, from its final motion's plan", events
    # The unit after the first exchange pair was planned with the pipettor the exchange loads.
    first = min(after_exchanges)
    assert "__pipettor" in solutions[first - 1].model_revision


def test_the_forecast_is_where_the_exchanges_leave_the_arm_and_the_tools() -> None:
    cell = load_cell(config_file("cell.yaml"))
    steps = plan_goal(
        SCRIPT.read_bytes(), parser=ScriptParser.from_files(cell=None, poses=POSES), enable_batching=True
    ).script.steps
    exchanges = [s for s in steps if isinstance(s, ToolExchange)][:2]  # dock the epick, load the pipettor
    assert [(s.operation, s.gripper) for s in exchanges] == [("dock", "epick"), ("load", "pipettor")]
    with SimBackend(cell, speed=math.inf) as backend:
        joints = backend.joint_positions()
        forecast_q, forecast_tools = forecast_exchanges(
            cell,
            backend.planner,
            exchanges,
            joints,
            backend.tool_state(),
            cup_profile_for=backend.cup_profile_for,
        )
        assert backend.joint_positions() == joints, "a forecast moves nothing"
        for step in exchanges:
            backend.run_step(step).result(120)
        live = backend.joint_positions()
        assert max(abs(a - b) for a, b in zip(live, forecast_q, strict=True)) < 1e-6
        state = backend.tool_state()
        assert (forecast_tools.gripper, forecast_tools.cup_profile) == (state.gripper, state.cup_profile)
        assert dict(forecast_tools.docks) == dict(state.docks)
        assert backend.model_revision() == backend.planner.model_revision(forecast_tools)


class _AcrossBackend(ScriptedBackend):
    """The scripted double, able to plan across exchanges: it forecasts that the arm stays
    and that the last exchange leaves its tool (the double's own exchange bookkeeping)."""

    def __init__(self) -> None:
        super().__init__()
        self.across: list[tuple[list[int], list[int]]] = []

    def plan_across(
        self, crossed: Sequence[Step], steps: Sequence[Step], *, start: JointPositions, after: Solution | None
    ) -> Future[Solution]:
        self.across.append(([s.index for s in crossed], [s.index for s in steps]))
        last = crossed[-1]
        assert isinstance(last, ToolExchange)
        revision = f"robot_models__{'none' if last.operation == 'dock' else last.gripper}"
        forecast: Future[Solution] = Future()
        self.plan(steps, start=start, after=after).add_done_callback(
            lambda done: forecast.set_result(replace(done.result(), model_revision=revision))
        )
        return forecast


EXCHANGE = {"task_type": "tool_exchange", "operation": "dock", "gripper": "pipettor", "dock_number": 3}


@pytest.mark.parametrize("jogged", [False, True], ids=["arm-where-forecast", "arm-elsewhere"])
def test_a_plan_across_an_exchange_is_used_only_where_the_exchange_really_left_the_arm(jogged: bool) -> None:
    backend = _AcrossBackend()
    recorder = Recorder()
    gate = threading.Event()
    backend.script("run_step", Outcome.ok(gate=gate))  # the exchange holds until released
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle = orchestrator.submit(script_json([move("a"), EXCHANGE, move("b")]), dry_run=False)
    wait_for(lambda: backend.count("run_step") == 1, message="the exchange")
    assert backend.across == [([1], [2])], "unit 3 planned during unit 1, across the exchange"
    if jogged:
        position = backend.joint_positions()
        assert position is not None
        a, b, c, d, e, f = position
        backend.set_positions((a, b, c, d + 0.05, e, f))  # the exchange ended elsewhere
    gate.set()
    result = handle.wait(10)
    assert result.success, show(handle.root)
    statuses = [(e["unit"], e["status"]) for e in recorder.events if e["event"] == "plan_ahead"]
    if jogged:
        assert statuses[-1] == (3, "discarded") and backend.count("plan") == 3
    else:
        assert statuses == [(3, "started"), (3, "used")] and backend.count("plan") == 2

"""Plan-ahead (issue 13): the next motion unit is planned while the current one executes.

Counted in backend calls, as test_replay_or_plan.py does: a plan-ahead is a ``plan`` call
made with ``after=`` (recorded as ``detail["ahead"]``) before the unit's own start; a used
plan-ahead means the unit makes no plan call of its own. Every wait is on an event the
test controls (a gated :class:`Outcome`) or on the goal's own completion; the simulated
cell runs at ``speed=inf`` (simulated time, no waiting for the arm).
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from erobs_bt.backends.base import Solution
from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.cache import PlanCache
from erobs_bt.orchestrator import GoalStatus, State
from erobs_bt.plan import plan_goal
from erobs_bt.script.parse import parse_script
from erobs_bt.tree.context import Controls, GoalContext, Mode
from erobs_bt.tree.plan_ahead import PLAN_AHEAD_TOLERANCE, PLAN_AHEAD_TRANSPARENT

from helpers import PAUSE, SUCK, Recorder, make_orchestrator, move, script_json, show, wait_for

REPO = Path(__file__).resolve().parents[2]
A_RAD = tuple(math.radians(d) for d in (10.0, -90.0, -90.0, -90.0, 90.0, 0.0))

# unit 1: moveto a; unit 2: pipettor (the arm stays); unit 3: moveto b.
ACROSS_PIPETTOR = script_json([move("a"), SUCK, move("b")])


def plan_calls(backend: ScriptedBackend) -> list[dict[str, Any]]:
    return [c.detail for c in backend.calls if c.kind == "plan"]


def ahead_events(recorder: Recorder) -> list[tuple[int, str]]:
    return [(e["unit"], e["status"]) for e in recorder.events if e["event"] == "plan_ahead"]


def run(orchestrator: Any, text: str) -> Any:
    handle = orchestrator.submit(text, dry_run=False)
    result = handle.wait(10)
    return handle, result


def test_plan_ahead_is_used_when_the_live_state_matches() -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    gate = threading.Event()
    backend.script("execute", Outcome.ok(gate=gate))  # unit 1 keeps executing until released
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle = orchestrator.submit(ACROSS_PIPETTOR, dry_run=False)
    wait_for(lambda: backend.count("plan") == 2, message="the plan-ahead of unit 3")
    # Unit 3 is being planned while unit 1 is still executing, from unit 1's planned end.
    assert backend.count("execute") == 1 and backend.count("run_step") == 0
    first, ahead = plan_calls(backend)
    assert first == {"steps": [0], "start": None, "ahead": False}
    assert ahead["steps"] == [2] and ahead["ahead"] is True
    assert ahead["start"] == pytest.approx(A_RAD)
    gate.set()
    result = handle.wait(10)
    assert result.success, show(handle.root)
    assert backend.count("plan") == 2, "unit 3 used its plan-ahead: no plan of its own"
    assert backend.dispatches() == 2 and backend.count("run_step") == 1
    assert ahead_events(recorder) == [(3, "started"), (3, "used")]
    assert handle.context.ahead is None


def test_plan_ahead_across_an_operator_pause_step() -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle = orchestrator.submit(script_json([move("a"), PAUSE, move("b")]), dry_run=False)
    wait_for(lambda: orchestrator.state is State.PAUSED, message="the pause step")
    assert backend.count("plan") == 2 and plan_calls(backend)[1]["ahead"] is True
    assert backend.dispatches() == 1, "nothing of unit 3 runs before Resume"
    assert orchestrator.resume().success
    result = handle.wait(10)
    assert result.success
    assert backend.count("plan") == 2 and backend.dispatches() == 2
    assert ahead_events(recorder) == [(3, "started"), (3, "used")]


@pytest.mark.parametrize(
    ("offset", "used"),
    [(0.5 * PLAN_AHEAD_TOLERANCE, True), (2.0 * PLAN_AHEAD_TOLERANCE, False)],
    ids=["within-tolerance", "beyond-tolerance"],
)
def test_plan_ahead_is_discarded_when_the_live_state_differs(offset: float, used: bool) -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    gate = threading.Event()
    backend.script("run_step", Outcome.ok(gate=gate))  # the pipettor step holds unit 2
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle = orchestrator.submit(ACROSS_PIPETTOR, dry_run=False)
    wait_for(lambda: backend.count("run_step") == 1, message="unit 2")
    assert backend.count("plan") == 2
    # Someone nudges the arm while the pipettor works (unit 1 really ended elsewhere).
    jogged = tuple(a + (offset if i == 3 else 0.0) for i, a in enumerate(A_RAD))
    backend.set_positions(jogged)
    gate.set()
    result = handle.wait(10)
    assert result.success, show(handle.root)
    if used:
        assert backend.count("plan") == 2
        assert ahead_events(recorder)[-1] == (3, "used")
    else:
        assert backend.count("plan") == 3, "discarded: unit 3 planned afresh"
        assert plan_calls(backend)[2] == {"steps": [2], "start": None, "ahead": False}
        assert ahead_events(recorder)[-1] == (3, "discarded")
        discarded = next(e for e in recorder.events if e.get("status") == "discarded")
        assert "rad from its start" in discarded["detail"]
    assert backend.dispatches() == 2


def test_pause_at_the_boundary_keeps_its_semantics_and_a_jog_discards_the_plan() -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    gate = threading.Event()
    backend.script("execute", Outcome.ok(gate=gate))
    orchestrator = make_orchestrator(backend, listener=recorder)
    text = script_json([move("a"), SUCK, move("b"), SUCK, move("c")])
    handle = orchestrator.submit(text, dry_run=False)
    wait_for(lambda: backend.count("execute") == 1, message="unit 1 executing")
    assert orchestrator.pause().success
    assert orchestrator.state is State.COMPLETING_TASK
    gate.set()
    wait_for(lambda: orchestrator.state is State.PAUSED, message="paused before unit 2")
    # Paused at the boundary: the plan-ahead of unit 3 exists, nothing else was dispatched.
    assert backend.count("plan") == 2 and backend.count("run_step") == 0
    assert backend.dispatches() == 1
    # The operator jogs the arm while paused: the plan-ahead no longer starts where it is.
    backend.set_positions(tuple(a + 0.05 for a in A_RAD))
    assert orchestrator.resume().success
    result = handle.wait(10)
    assert result.success, show(handle.root)
    assert result.completed_steps == result.total_steps == 5
    statuses = ahead_events(recorder)
    assert (3, "discarded") in statuses, statuses
    assert statuses[-2:] == [(5, "started"), (5, "used")]
    # Unit 3 planned afresh from the jogged state; unit 5 ahead from unit 3's end.
    assert backend.count("plan") == 4
    assert backend.dispatches() == 3 and backend.count("run_step") == 2
    assert recorder.states.count("PAUSED") == 1


@pytest.mark.parametrize("halt", ["cancel", "stop", "shutdown"])
def test_cancel_or_halt_drops_the_pending_plan_ahead(halt: str) -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    executing, planning = threading.Event(), threading.Event()
    backend.script("execute", Outcome.ok(gate=executing))
    backend.script("plan", Outcome.ok(), Outcome.ok(gate=planning))  # the plan-ahead hangs
    # Gated outcome threads that other tests of this process left behind are not this test's.
    others = {t for t in threading.enumerate() if t.name == "scripted-outcome"}
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle = orchestrator.submit(ACROSS_PIPETTOR, dry_run=False)
    wait_for(lambda: handle.context.ahead is not None, message="the plan-ahead")
    pending = handle.context.ahead
    assert pending is not None and not pending.future.done()
    if halt == "cancel":
        assert orchestrator.cancel().success
        executing.set()  # unit 1 completes: the cancel takes effect at the boundary
    elif halt == "stop":
        orchestrator.stop()
    else:
        orchestrator.shutdown()
    result = handle.wait(10)
    expected = {"cancel": GoalStatus.CANCELED, "stop": GoalStatus.ABORTED, "shutdown": GoalStatus.ABORTED}
    assert result.status is expected[halt], result
    assert handle.context.ahead is None
    assert pending.future.cancelled(), "the dropped plan-ahead never completes"
    assert ahead_events(recorder)[-1] == (3, "dropped")
    planning.set()  # the gated planner thread ends without delivering anything
    executing.set()
    wait_for(
        lambda: (
            not any(
                t.name == "scripted-outcome" and t.is_alive() and t not in others
                for t in threading.enumerate()
            )
        ),
        message="the planner threads to end",
    )
    assert backend.count("run_step") == 0 and backend.count("execute") == 1
    assert len(orchestrator.cache) == 0
    assert orchestrator.state is State.IDLE


def test_a_failed_plan_ahead_does_not_fail_the_running_unit() -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    backend.script("plan", Outcome.ok(), Outcome.fail("PLANNING_FAILED: planned ahead into a wall"))
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle, result = run(orchestrator, ACROSS_PIPETTOR)
    assert result.success, show(handle.root)
    assert backend.count("plan") == 3, "unit 3 planned afresh at its start"
    assert backend.dispatches() == 2
    assert (3, "discarded") in ahead_events(recorder)


def test_a_plan_ahead_failing_after_the_unit_took_it_plans_afresh_once() -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    gate = threading.Event()
    backend.script(
        "plan",
        Outcome.ok(),
        Outcome.fail("PLANNING_FAILED: ahead", gate=gate),  # still planning when unit 3 starts
        Outcome.fail("PLANNING_FAILED: no path from the live state"),
    )
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle = orchestrator.submit(ACROSS_PIPETTOR, dry_run=False)
    wait_for(
        lambda: backend.count("run_step") == 1 and (3, "used") in ahead_events(recorder), message="unit 3"
    )
    gate.set()
    result = handle.wait(10)
    # The failure reported is the fresh plan's, as without plan-ahead; units 1-2 count.
    assert result.status is GoalStatus.ABORTED
    assert result.error_message == "PLANNING_FAILED: no path from the live state"
    assert result.completed_steps == 2
    assert backend.count("plan") == 3 and backend.dispatches() == 1
    assert orchestrator.state is State.IDLE


def tool_exchange_task() -> dict[str, Any]:
    return {"task_type": "tool_exchange", "operation": "dock", "gripper": "pipettor", "dock_number": 3}


def vision_task() -> dict[str, Any]:
    return {"task_type": "vision_moveto", "tag_id": 1}


@pytest.mark.parametrize("barrier", [tool_exchange_task, vision_task], ids=["tool_exchange", "vision"])
def test_never_plans_ahead_across_a_tool_exchange_or_a_vision_step(barrier: Any) -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle, result = run(orchestrator, script_json([move("a"), SUCK, barrier(), move("b")]))
    assert result.success, show(handle.root)
    assert [c["ahead"] for c in plan_calls(backend)] == [False, False]
    assert ahead_events(recorder) == []
    # Unit 4 was planned only after the barrier step had run, at its own start.
    kinds = [c.kind for c in backend.calls]
    assert kinds == ["prepare", "plan", "execute", "run_step", "run_step", "plan", "execute"]


def goal_context(text: str) -> GoalContext:
    """The goal context of ``text`` (batched, execute mode, a scripted backend), not run."""
    goal = plan_goal(text, parser=parse_script, enable_batching=True, preview=False)
    return GoalContext(
        script=goal.script,
        units=list(goal.units),
        mode=Mode.EXECUTE,
        backend=ScriptedBackend(),
        cache=PlanCache(),
        eligible=goal.eligible,
        controls=Controls(),
    )


def test_the_rule_of_what_may_be_planned_ahead() -> None:
    text = script_json(
        [move("a"), SUCK, PAUSE, move("b"), tool_exchange_task(), move("c"), vision_task(), move("a")]
    )
    context = goal_context(text)
    units = context.units
    assert [u.label for u in units] == [
        "batch[1]: moveto",
        "pipettor",
        "pause",
        "batch[1]: moveto",
        "tool_exchange",
        "batch[1]: moveto",
        "vision_moveto",
        "batch[1]: moveto",
    ]
    following = [context.next_motion_unit(u) for u in units]
    assert [u.index if u is not None else None for u in following] == [3, 3, 3, None, 5, None, 7, None]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["move", "suck", "pause", "exchange", "vision"]), min_size=1, max_size=14))
def test_every_units_next_motion_unit_is_the_first_one_with_only_transparent_units_between(
    kinds: list[str],
) -> None:
    load = {"task_type": "tool_exchange", "operation": "load", "gripper": "pipettor", "dock_number": 3}
    make = {  # an exchange docks the pipettor and loads it again, so a later SUCK stays valid
        "move": [move("a")],
        "suck": [SUCK],
        "pause": [PAUSE],
        "exchange": [tool_exchange_task(), load],
        "vision": [vision_task()],
    }
    text = script_json([task for kind in kinds for task in make[kind]])
    context = goal_context(text)
    units = context.units

    def by_definition(unit: Any) -> Any:  # the rule, unit by unit, as the docstring states it
        for later in units[unit.index + 1 :]:
            if later.is_motion:
                return later
            if not all(step.task_type in PLAN_AHEAD_TRANSPARENT for step in later.steps):
                return None
        return None

    assert [context.next_motion_unit(u) for u in units] == [by_definition(u) for u in units]


def test_unbatched_motion_units_plan_ahead_one_after_the_other() -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, enable_batching=False, listener=recorder)
    handle, result = run(orchestrator, script_json([move("a"), move("b"), move("c")]))
    assert result.success
    assert [c["ahead"] for c in plan_calls(backend)] == [False, True, True]
    assert backend.count("plan") == 3 and backend.dispatches() == 3
    assert ahead_events(recorder) == [(2, "started"), (2, "used"), (3, "started"), (3, "used")]


def test_preview_never_plans_ahead() -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, enable_batching=False, listener=recorder)
    handle, result = run_preview(orchestrator, script_json([move("a"), move("b"), move("c")]))
    assert result.success
    # Each unbatched preview step is planned from the live state, as without plan-ahead.
    assert plan_calls(backend) == [{"steps": [i], "start": None, "ahead": False} for i in range(3)]
    assert ahead_events(recorder) == [] and backend.dispatches() == 0


def run_preview(orchestrator: Any, text: str) -> Any:
    handle = orchestrator.submit(text, dry_run=True)
    return handle, handle.wait(10)


def test_plan_ahead_off_plans_every_unit_at_its_start() -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder, plan_ahead=False)
    handle, result = run(orchestrator, ACROSS_PIPETTOR)
    assert result.success
    assert [c["ahead"] for c in plan_calls(backend)] == [False, False]
    assert ahead_events(recorder) == []


def test_unknown_arm_state_never_plans_ahead() -> None:
    backend = ScriptedBackend(start=None)  # mock hardware: no joint state
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle, result = run(orchestrator, ACROSS_PIPETTOR)
    assert result.success
    assert [c["ahead"] for c in plan_calls(backend)] == [False, False]


def solution_bytes(solution: Solution) -> bytes:
    return solution.to_bytes()


# -- the simulated cell ---------------------------------------------------------------------
FULL_EXAMPLE = REPO / "config" / "full_experiment.json"
POSES = REPO / "config" / "poses.yaml"


class AutoResume(Recorder):
    """Resumes a paused goal at once (the operator is instantaneous)."""

    def __init__(self) -> None:
        super().__init__()
        self.orchestrator: Any = None

    def state_changed(self, state: Any, message: str) -> None:
        super().state_changed(state, message)
        if state is State.PAUSED and self.orchestrator is not None:
            self.orchestrator.resume()


def sim_engine(*, plan_ahead: bool, listener: Any = None) -> Any:
    from erobs_bt.session import EngineConfig, build_engine
    from erobs_bt.settings import EngineSettings

    engine = build_engine(
        EngineConfig(poses=POSES, settings=EngineSettings(speed=math.inf, plan_ahead=plan_ahead)),
        listener=listener,
    )
    if isinstance(listener, AutoResume):
        listener.orchestrator = engine.orchestrator
    return engine


def sim_script(tasks: list[dict[str, Any]]) -> str:
    import json

    return json.dumps({"start_gripper": "epick", "tasks": tasks})


def test_sim_full_example_same_results_and_cache_with_and_without_plan_ahead() -> None:
    """The full example, then an eligible one-batch goal, once with plan-ahead and once without:
    the same results, the same solutions unit by unit and the same cache contents."""
    import json

    eligible = json.dumps(
        {"start_gripper": "epick", "tasks": json.loads(FULL_EXAMPLE.read_text())["tasks"][:10]}
    )
    outcome: dict[bool, Any] = {}
    for plan_ahead in (False, True):
        recorder = AutoResume()
        engine = sim_engine(plan_ahead=plan_ahead, listener=recorder)
        try:
            handle = engine.orchestrator.submit(FULL_EXAMPLE.read_text(), dry_run=False)
            result = handle.wait(600)
            assert result.success, (plan_ahead, result)
            # Back to where the eligible goal was first planned from, then run it.
            stored = engine.orchestrator.submit(eligible, dry_run=False).wait(600)
            assert stored.success, stored
            cache = engine.orchestrator.cache
            entries = {key: cache.get(key) for key in list(cache._entries)}
            solutions = {i: s.to_bytes() for i, s in handle.context.solutions.items()}
            outcome[plan_ahead] = (result, entries, solutions, ahead_events(recorder))
        finally:
            engine.close()
    (off, off_cache, off_solutions, off_events), (on, on_cache, on_solutions, on_events) = (
        outcome[False],
        outcome[True],
    )
    assert off_events == []
    assert on_events and all(status in ("started", "used") for _, status in on_events), on_events
    assert (on.status, on.completed_steps, on.total_steps) == (
        off.status,
        off.completed_steps,
        off.total_steps,
    )
    assert on_solutions.keys() == off_solutions.keys()
    assert on_solutions == off_solutions, "a plan made ahead is the plan the unit would have made"
    assert on_cache.keys() == off_cache.keys() and len(on_cache) == 1
    assert {k: v.to_bytes() for k, v in on_cache.items()} == {k: v.to_bytes() for k, v in off_cache.items()}


def test_sim_cancel_while_a_plan_ahead_is_pending_drops_it_and_leaks_no_thread() -> None:
    recorder = AutoResume()
    engine = sim_engine(plan_ahead=True, listener=recorder)
    recorder.orchestrator = None  # this test resumes (or rather cancels) by hand
    try:
        orchestrator = engine.orchestrator
        # Warm the worker threads up, so that the comparison below sees only new ones.
        warm = orchestrator.submit(
            sim_script([{"task_type": "moveto", "target": "transport"}]), dry_run=False
        )
        assert warm.wait(120).success
        before = {t.ident for t in threading.enumerate()}
        cached = len(orchestrator.cache)  # the warm-up goal's entry
        text = sim_script(
            [
                {"task_type": "moveto", "target": "spin_coater_above"},
                {"task_type": "pause"},
                {"task_type": "moveto", "target": "transport"},
            ]
        )
        handle = orchestrator.submit(text, dry_run=False)
        wait_for(lambda: orchestrator.state is State.PAUSED, timeout=120, message="the pause step")
        pending = handle.context.ahead
        assert pending is not None and pending.unit.index == 2
        assert orchestrator.cancel().success
        result = handle.wait(120)
        assert result.status is GoalStatus.CANCELED
        assert result.error_message.startswith("cancelled while paused at unit 2 of 3")
        assert handle.context.ahead is None
        assert ahead_events(recorder)[-1] == (3, "dropped")
        wait_for(pending.future.done, timeout=120, message="the dropped plan to settle")
        assert len(orchestrator.cache) == cached, "the dropped plan-ahead is not cached"
        assert {t.ident for t in threading.enumerate()} <= before, "no thread outlives the goal"
    finally:
        engine.close()


def test_sim_execution_never_waits_for_a_plan_that_holds_the_model() -> None:
    from erobs_bt.backends.sim.backend import SimBackend
    from erobs_bt.world.config import load_cell

    goal = plan_goal(
        FULL_EXAMPLE.read_bytes(),
        parser=sim_parser(),
        enable_batching=True,
        preview=False,
    )
    first = goal.units[0]
    with SimBackend(load_cell(), speed=math.inf) as backend:
        pickup = tuple(s for s in first.steps if s.index <= 3)  # ... spin_coater_chuck, vacuum_on
        solution = backend.plan(pickup, start=None).result(timeout=120)
        predicted = backend.predict_tools(backend.tool_state(), solution)
        assert predicted.held is not None, "the planned vacuum_on picks the sample up"
        assert backend.tool_state().held is None
        # A plan running ahead holds the model: the execution's vacuum_on must not wait for it.
        held, released = threading.Event(), threading.Event()
        holder = threading.Thread(target=_hold, args=(backend, held, released))
        holder.start()
        assert held.wait(10)
        try:
            backend.execute(solution, replay=False).result(timeout=120)
        finally:
            released.set()
            holder.join()
        assert backend.tool_state().held is not None
        # The plan ahead of it starts from the same tool state the execution left.
        after = tuple(s for s in first.steps if 3 < s.index <= 5)
        ahead = backend.plan(after, start=solution.final_positions(), after=solution)
        ahead.cancel()  # pending plans can be dropped; this one may already be running
        fresh = backend.plan(after, start=None).result(timeout=120)
        assert fresh.start_positions == pytest.approx(solution.final_positions())


def _hold(backend: Any, held: threading.Event, released: threading.Event) -> None:
    with backend.planner.model.lock:  # what a running plan does while it plans a step
        held.set()
        released.wait()


def sim_parser() -> Any:
    from erobs_bt.plan import ScriptParser

    return ScriptParser.from_files(cell=None, poses=POSES)


@pytest.mark.parametrize("flag", [[], ["--no-plan-ahead"]], ids=["default", "no-plan-ahead"])
def test_run_plans_ahead_by_default_and_no_plan_ahead_turns_it_off(flag: list[str], tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from erobs_bt.cli import main

    script = tmp_path / "two_units.json"
    script.write_text(
        sim_script(
            [
                {"task_type": "moveto", "target": "transport"},
                {"task_type": "pause"},
                {"task_type": "moveto", "target": "tool_exchange_safe"},
            ]
        )
    )
    log = tmp_path / "run.jsonl"
    args = [
        "run",
        str(script),
        "--poses",
        str(POSES),
        "--speed",
        "50",
        "--auto-resume",
        "--resume-after",
        "0",
    ]
    result = CliRunner().invoke(main, [*args, "--log", str(log), *flag])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in log.read_text().splitlines()]
    ahead = [(r["unit"], r["status"]) for r in records if r["event"] == "plan_ahead"]
    plans = [r["unit"] for r in records if r["event"] == "plan_finished"]
    assert plans == [1, 3]
    assert ahead == ([] if flag else [(3, "started"), (3, "used")])

"""Goal admission is decided once, by the orchestrator (issue 22 item 4).

Every front end (the node's actions, the web console, the CLI, MADSci) asks the same rule:
no goal while one runs or one is starting (a ROS goal accepted and not yet submitted holds a
:class:`~erobs_bt.orchestrator.Reservation`), none while FAULTED, none once the process is
shutting down (``SHUTDOWN``). The node only reports the orchestrator's answer.
"""

from __future__ import annotations

import threading

import pytest

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.orchestrator import GoalRejected, GoalStatus, State
from erobs_bt.plan import plan_goal
from erobs_bt.script.parse import parse_script
from erobs_bt.settings import EngineSettings
from erobs_bt.timeouts import DEFAULT_TIMEOUTS
from erobs_bt.tree.context import Controls, GoalContext, GoalEvents, Mode

from helpers import Recorder, make_orchestrator, move, script_json, wait_for

ONE_MOVE = script_json([move("a")])


def test_a_reservation_keeps_every_other_goal_out_until_it_is_submitted() -> None:
    recorder = Recorder()
    orchestrator = make_orchestrator(ScriptedBackend(), listener=recorder)
    reservation = orchestrator.reserve()

    with pytest.raises(GoalRejected, match=r"^busy: a goal is starting$") as refused:
        orchestrator.submit(ONE_MOVE, dry_run=False)  # the web console, say, in the gap
    assert refused.value.error_code == "REJECTED"
    with pytest.raises(GoalRejected, match="a goal is starting"):
        orchestrator.reserve()  # a second action goal
    rejected = [e for e in recorder.events if e["event"] == "goal_rejected"]
    assert [e["error"] for e in rejected] == ["busy: a goal is starting"] * 2, "listeners see each refusal"

    handle = orchestrator.submit(ONE_MOVE, dry_run=False, reservation=reservation)
    assert handle.wait(10).success
    assert orchestrator.admission() is None, "the reservation was used up by its goal"
    assert orchestrator.submit(ONE_MOVE, dry_run=False).wait(10).success


def test_a_released_reservation_admits_the_next_goal() -> None:
    orchestrator = make_orchestrator(ScriptedBackend())
    reservation = orchestrator.reserve()
    assert orchestrator.admission() is not None
    reservation.release()  # cancelled before it started
    reservation.release()  # idempotent
    assert orchestrator.admission() is None
    assert orchestrator.submit(ONE_MOVE, dry_run=False).wait(10).success


def test_a_running_goal_and_a_fault_are_refused_in_the_orchestrators_words() -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", Outcome.fail("TIMEOUT: execution over 120 s", gate=gate))
    orchestrator = make_orchestrator(backend)
    handle = orchestrator.submit(ONE_MOVE, dry_run=False)
    wait_for(lambda: backend.count("execute") == 1, message="the unit dispatched")

    with pytest.raises(GoalRejected, match=rf"^busy: {handle.goal_id} is RUNNING$"):
        orchestrator.reserve()
    gate.set()
    assert handle.wait(10).error_code == "TIMEOUT"
    assert orchestrator.state is State.FAULTED

    refusal = orchestrator.admission()
    assert refusal is not None and refusal.error_code == "REJECTED"
    assert str(refusal).startswith("orchestrator is FAULTED (TIMEOUT: execution over 120 s); check the cell")
    assert "reset the fault" in str(refusal)
    with pytest.raises(GoalRejected, match="FAULTED"):
        orchestrator.reserve()


def test_after_stop_admitting_goals_and_held_reservations_are_refused_as_shutdown() -> None:
    orchestrator = make_orchestrator(ScriptedBackend())
    reservation = orchestrator.reserve()  # accepted by the action server just before shutdown
    orchestrator.stop_admitting("node shutting down")

    with pytest.raises(GoalRejected) as held:
        orchestrator.submit(ONE_MOVE, dry_run=False, reservation=reservation)
    assert str(held.value) == "SHUTDOWN: node shutting down" and held.value.error_code == "SHUTDOWN"
    with pytest.raises(GoalRejected, match=r"^SHUTDOWN: node shutting down$"):
        orchestrator.reserve()
    orchestrator.stop_admitting("another reason")  # idempotent: the first reason stays
    refusal = orchestrator.admission()
    assert refusal is not None and str(refusal) == "SHUTDOWN: node shutting down"


def test_a_goal_context_is_made_from_its_plan_in_one_place() -> None:
    plan = plan_goal(ONE_MOVE, parser=parse_script, enable_batching=True, preview=False)
    backend = ScriptedBackend()
    controls = Controls()

    context = GoalContext.for_plan(
        plan,
        mode=Mode.EXECUTE,
        backend=backend,
        cache=make_orchestrator(backend).cache,
        controls=controls,
        settings=EngineSettings(timeouts={"moveto": 7.0}, plan_ahead=True),
    )
    assert context.script is plan.script and context.units == list(plan.units)
    assert context.eligible is plan.eligible and context.controls is controls
    assert context.timeouts == {**DEFAULT_TIMEOUTS, "moveto": 7.0}, "a partial table is completed"
    assert context.plan_ahead_enabled and type(context.events) is GoalEvents
    assert context.key_document is not None, "an eligible goal's key document is built at once"

    preview = GoalContext.for_plan(
        plan,
        mode=Mode.PREVIEW,
        backend=backend,
        cache=context.cache,
        controls=Controls(),
        settings=EngineSettings(plan_ahead=True),
    )
    assert not preview.plan_ahead_enabled, "a preview plans every unit from the live state"


def test_the_orchestrators_goals_get_the_context_of_their_plan() -> None:
    orchestrator = make_orchestrator(ScriptedBackend(), timeouts={"moveto": 9.0}, plan_ahead=False)
    handle = orchestrator.submit(ONE_MOVE, dry_run=False)
    assert handle.wait(10).status is GoalStatus.SUCCEEDED
    context = handle.context
    assert context is not None and context.units is handle.units
    assert context.timeouts["moveto"] == 9.0 and not context.plan_ahead_enabled

"""ReplayOrPlan: the specification's "Replay failure handling" table, counted in dispatches.

Every scenario first executes an eligible one-batch goal (plan + execute, stored in the
cache), then runs the same goal again from the same start so that it replays.
"""

from __future__ import annotations

import threading

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.orchestrator import GoalRejected, GoalStatus, State

from helpers import Recorder, make_orchestrator, move, script_json, show, vacuum, wait_for

ELIGIBLE = script_json([move("a"), vacuum("vacuum_on"), move("b")])
START = (0.0, -1.57, 1.57, -1.57, -1.57, 0.0)


def prime(backend: ScriptedBackend, recorder: Recorder | None = None):
    """Execute ELIGIBLE once (storing its solution) and move back to START."""
    orchestrator = make_orchestrator(backend, listener=recorder)
    first = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
    assert first.success, first
    backend.set_positions(START)
    return orchestrator


def test_first_run_plans_and_stores_second_run_replays_without_planning() -> None:
    backend = ScriptedBackend(start=START)
    recorder = Recorder()
    orchestrator = prime(backend, recorder)
    assert backend.count("plan") == 1 and backend.count("execute") == 1
    handle = orchestrator.submit(ELIGIBLE, dry_run=False)
    result = handle.wait(10)
    assert result.success, show(handle.root)
    assert backend.count("plan") == 1, "a hit must not plan again"
    assert backend.count("replay") == 1
    assert recorder.cache_statuses() == ["MISS", "HIT"]
    assert result.completed_steps == result.total_steps == 3


def test_fatal_replay_error_faults_after_exactly_one_dispatch() -> None:
    backend = ScriptedBackend(start=START)
    orchestrator = prime(backend)
    dispatched_before = backend.dispatches()
    backend.script("replay", Outcome.fail("REPLAY_TIMEOUT: trajectory execution did not finish"))
    handle = orchestrator.submit(ELIGIBLE, dry_run=False)
    result = handle.wait(10)
    assert result.status is GoalStatus.ABORTED
    assert result.error_message.startswith("REPLAY_TIMEOUT:")
    assert result.completed_steps == 0, "a failed batch counts none of its steps"
    assert backend.dispatches() - dispatched_before == 1, "no second dispatch after a fatal replay error"
    assert backend.count("plan") == 1, "the fresh branch was never entered"
    assert orchestrator.state is State.FAULTED, show(handle.root)


def test_plain_timeout_prefix_is_fatal_too() -> None:
    backend = ScriptedBackend(start=START)
    orchestrator = prime(backend)
    backend.script("replay", Outcome.fail("TIMEOUT: execute_trajectory action server unavailable"))
    result = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
    assert result.error_code == "TIMEOUT"
    assert orchestrator.state is State.FAULTED
    assert backend.count("replay") == 1 and backend.count("execute") == 1


def test_faulted_orchestrator_rejects_every_later_goal_and_resume_does_not_clear_it() -> None:
    backend = ScriptedBackend(start=START)
    orchestrator = prime(backend)
    backend.script("replay", Outcome.fail("REPLAY_TIMEOUT: stuck"))
    orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
    assert orchestrator.state is State.FAULTED
    assert not orchestrator.resume().success
    for _ in range(2):
        try:
            orchestrator.submit(ELIGIBLE, dry_run=False)
        except GoalRejected as exc:
            assert "FAULTED" in str(exc)
        else:
            raise AssertionError("a FAULTED orchestrator accepted a goal")


def test_non_fatal_replay_error_plans_and_executes_the_whole_batch_once() -> None:
    for error in (
        "EXECUTION_FAILED: goal rejected by the controller",
        "EXECUTION_FAILED: MoveIt result was not SUCCESS",
        "server unavailable",
    ):
        backend = ScriptedBackend(start=START)
        orchestrator = prime(backend)
        backend.script("replay", Outcome.fail(error))
        result = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
        assert result.success, (error, result)
        assert backend.count("replay") == 1
        assert backend.count("plan") == 2, "exactly one fresh plan after the failed replay"
        assert backend.count("execute") == 2, "exactly one fresh execution after the failed replay"
        assert orchestrator.state is State.IDLE


def test_caught_execution_exception_during_replay_is_treated_as_non_fatal() -> None:
    backend = ScriptedBackend(start=START)
    orchestrator = prime(backend)
    backend.script("replay", Outcome(raises=ConnectionError("controller went away")))
    result = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
    assert result.success
    assert backend.count("plan") == 2 and backend.count("execute") == 2


def test_fresh_attempt_failing_after_a_replay_error_aborts_without_retry_loop() -> None:
    backend = ScriptedBackend(start=START)
    orchestrator = prime(backend)
    backend.script("replay", Outcome.fail("EXECUTION_FAILED: rejected"))
    backend.script("execute", Outcome.fail("EXECUTION_FAILED: path blocked"))
    result = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
    assert result.status is GoalStatus.ABORTED
    assert result.error_message == "EXECUTION_FAILED: path blocked"
    assert backend.count("replay") == 1 and backend.count("execute") == 2 and backend.count("plan") == 2
    assert orchestrator.state is State.IDLE, "a non-fatal failure does not fault"


def test_fresh_planning_failure_aborts_and_keeps_serving() -> None:
    backend = ScriptedBackend(start=START)
    orchestrator = make_orchestrator(backend)
    backend.script("plan", Outcome.fail("PLANNING_FAILED: goal in collision"))
    result = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
    assert result.error_code == "PLANNING_FAILED" and result.completed_steps == 0
    assert backend.dispatches() == 0
    assert orchestrator.submit(ELIGIBLE, dry_run=False).wait(10).success


def test_fatal_timeout_of_a_fresh_execution_faults() -> None:
    backend = ScriptedBackend(start=START)
    orchestrator = make_orchestrator(backend)
    backend.script("execute", Outcome.fail("TIMEOUT: execution over 120 s"))
    result = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
    assert result.error_code == "TIMEOUT"
    assert orchestrator.state is State.FAULTED


def test_a_fresh_plan_after_a_partial_replay_is_not_filed_under_the_units_start() -> None:
    """One key per unit, taken when it starts; a plan that does not begin there is not stored
    under it (it would be replayed from a start it does not begin at)."""
    backend = ScriptedBackend(start=START)
    orchestrator = prime(backend)
    gate = threading.Event()
    backend.script("replay", Outcome.fail("EXECUTION_FAILED: protective stop half way", gate=gate))
    handle = orchestrator.submit(ELIGIBLE, dry_run=False)
    wait_for(lambda: backend.count("replay") == 1)
    moved = (0.5, -1.0, 1.0, -1.0, -1.0, 0.5)
    backend.set_positions(moved)  # the replay stopped somewhere else
    gate.set()
    assert handle.wait(10).success
    starts = [orchestrator.cache.get(key).start_positions for key in list(orchestrator.cache._entries)]  # type: ignore[union-attr]
    assert starts == [START], "the entry under the unit's key still begins at the unit's start"
    backend.set_positions(START)
    recorder = Recorder()
    orchestrator.listener.add(recorder)
    assert orchestrator.submit(ELIGIBLE, dry_run=False).wait(10).success
    assert recorder.cache_statuses() == ["HIT"]
    assert backend.count("replay") == 2 and backend.count("plan") == 2


# -- one cache key per unit, taken when it starts (issue 9, item 2) ----------------------
def test_with_no_complete_joint_state_a_repeated_goal_replays_under_the_start_less_key() -> None:
    """Spec: "If the lifecycle manager lacks a complete six-joint state, the key has no
    known starting position" (mock hardware); the start-less key must still hit."""
    backend = ScriptedBackend(start=None)
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    assert orchestrator.submit(ELIGIBLE, dry_run=False).wait(10).success
    assert [key.start for key in list(orchestrator.cache._entries)] == [None]
    assert orchestrator.submit(ELIGIBLE, dry_run=False).wait(10).success
    assert recorder.cache_statuses() == ["MISS", "HIT"]
    assert backend.count("plan") == 1 and backend.count("replay") == 1


class UnsetStartBackend(ScriptedBackend):
    """A backend whose solutions do not record the state they were planned from."""

    def plan(self, steps, *, start):  # type: ignore[no-untyped-def]
        from dataclasses import replace

        planned = super().plan(steps, start=start)
        solution = planned.result(timeout=5)
        from concurrent.futures import Future

        future: Future = Future()
        future.set_result(replace(solution, start_positions=None))
        return future


def test_a_backend_that_leaves_the_solution_start_unset_still_hits() -> None:
    backend = UnsetStartBackend(start=START)
    recorder = Recorder()
    orchestrator = prime(backend, recorder)
    assert orchestrator.submit(ELIGIBLE, dry_run=False).wait(10).success
    assert recorder.cache_statuses() == ["MISS", "HIT"]
    assert backend.count("plan") == 1 and backend.count("replay") == 1

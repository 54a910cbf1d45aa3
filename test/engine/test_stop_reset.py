"""Stop now, fault reset, shutdown, and the orchestrator's request API from other threads.

``Orchestrator.stop()`` halts the motion at once (controlled deceleration) and aborts the
goal with ``STOPPED``, leaving the orchestrator IDLE; cancel keeps its boundary semantics.
``Orchestrator.reset_fault()`` clears FAULTED (refused otherwise) and is recorded in the
run log. ``Orchestrator.shutdown(reason=)`` aborts with ``SHUTDOWN: node shutting down``.
Status and error code agree for every outcome.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.orchestrator import GoalStatus, OrchestratorListener, Result, State

from helpers import PAUSE, SUCK, Recorder, make_orchestrator, move, script_json, show, vacuum, wait_for

# Four units: batch[2], pipettor, batch[1], pipettor (5 steps).
FOUR_UNITS = script_json([move("a"), vacuum("vacuum_on"), SUCK, move("b"), SUCK])
ELIGIBLE = script_json([move("a"), vacuum("vacuum_on"), move("b")])


def held(kind: str = "execute", text: str = FOUR_UNITS, dry_run: bool = False) -> Any:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script(kind, Outcome.ok(gate=gate))
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle = orchestrator.submit(text, dry_run=dry_run)
    wait_for(lambda: backend.count(kind) == 1, message=f"{kind} dispatched")
    return backend, gate, recorder, orchestrator, handle


def assert_agrees(result: Result) -> None:
    """Status and error code agree (issue 9, item 9)."""
    if result.status is GoalStatus.SUCCEEDED:
        assert result.error_code == "" and result.error_message == ""
    elif result.status is GoalStatus.CANCELED:
        assert result.error_code == "CANCELED"
    else:
        assert result.error_code not in ("", "CANCELED"), result
        if result.error_code not in ("INVALID_SCRIPT", "NOT_PREVIEWABLE"):
            assert result.error_message.startswith(f"{result.error_code}:"), result


# -- stop ------------------------------------------------------------------------------
def test_stop_halts_the_running_unit_at_once_and_aborts_with_stopped_leaving_idle() -> None:
    backend, gate, recorder, orchestrator, handle = held()
    reply = orchestrator.stop()
    assert reply.success, reply
    result = handle.wait(10)  # without releasing the gate: the unit did not have to finish
    assert result.status is GoalStatus.ABORTED and result.error_code == "STOPPED", result
    assert result.error_message.startswith("STOPPED: stopped by operator request during unit 1/4")
    assert result.completed_steps == 0
    assert backend.stops >= 1, "the motion was stopped"
    assert backend.count("run_step") == 0, "nothing more was dispatched"
    assert orchestrator.state is State.IDLE and orchestrator.fault_reason == ""
    assert_agrees(result)
    gate.set()
    assert orchestrator.submit(FOUR_UNITS, dry_run=False).wait(10).success, "the next goal runs"


def test_stop_while_paused_at_a_boundary_aborts_the_goal() -> None:
    backend, gate, recorder, orchestrator, handle = held()
    assert orchestrator.pause().success
    gate.set()
    wait_for(lambda: orchestrator.state is State.PAUSED, message="PAUSED")
    assert orchestrator.stop().success
    result = handle.wait(10)
    assert result.error_code == "STOPPED" and result.completed_steps == 2, result
    assert orchestrator.state is State.IDLE
    assert backend.count("run_step") == 0


def test_stop_at_a_pause_step_aborts_the_goal() -> None:
    backend = ScriptedBackend()
    orchestrator = make_orchestrator(backend)
    handle = orchestrator.submit(script_json([move("a"), PAUSE, move("b")]), dry_run=False)
    wait_for(lambda: orchestrator.state is State.PAUSED, message="waiting at the pause step")
    orchestrator.stop()
    result = handle.wait(10)
    assert result.error_code == "STOPPED" and orchestrator.state is State.IDLE, result
    assert backend.count("execute") == 1


def test_stop_during_planning_aborts_before_anything_is_executed() -> None:
    backend, gate, recorder, orchestrator, handle = held("plan")
    orchestrator.stop()
    result = handle.wait(10)
    assert result.error_code == "STOPPED", result
    gate.set()
    assert backend.dispatches() == 0, "the plan that was in flight is never executed"
    assert orchestrator.state is State.IDLE


def test_stop_with_a_cancel_pending_does_not_fault() -> None:
    backend, gate, recorder, orchestrator, handle = held()
    assert orchestrator.cancel().success
    orchestrator.stop()  # the unit fails because of the stop, while the cancel is pending
    result = handle.wait(10)
    assert result.error_code == "STOPPED", result
    assert orchestrator.state is State.IDLE, "a stop is the operator's doing, not a fault"


def test_stop_with_no_goal_still_stops_the_arm() -> None:
    backend = ScriptedBackend()
    orchestrator = make_orchestrator(backend)
    reply = orchestrator.stop()
    assert reply.success and "No task" in reply.message
    assert backend.stops == 1 and orchestrator.state is State.IDLE


def test_cancel_keeps_its_boundary_semantics_and_stops_nothing() -> None:
    backend, gate, recorder, orchestrator, handle = held()
    assert orchestrator.cancel().success
    assert not handle.done(), "the running unit is never interrupted by a cancel"
    gate.set()
    result = handle.wait(10)
    assert result.status is GoalStatus.CANCELED and result.completed_steps == 2
    assert backend.stops == 0


# -- reset fault -----------------------------------------------------------------------
def test_reset_fault_is_refused_unless_faulted() -> None:
    orchestrator = make_orchestrator(ScriptedBackend())
    reply = orchestrator.reset_fault()
    assert not reply.success and "Not faulted" in reply.message


def test_reset_fault_clears_faulted_and_is_recorded_with_when_and_which_fault() -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    backend.script("execute", Outcome.fail("TIMEOUT: execution over 120 s"))
    assert orchestrator.submit(ELIGIBLE, dry_run=False).wait(10).error_code == "TIMEOUT"
    assert orchestrator.state is State.FAULTED
    assert not orchestrator.resume().success, "resume does not clear the fault"

    reply = orchestrator.reset_fault()

    assert reply.success and "TIMEOUT: execution over 120 s" in reply.message
    assert orchestrator.state is State.IDLE and orchestrator.fault_reason == ""
    resets = [e for e in recorder.events if e["event"] == "fault_reset"]
    assert len(resets) == 1 and resets[0]["fault"] == "TIMEOUT: execution over 120 s"
    assert isinstance(resets[0]["t"], float)
    assert recorder.states[-2:] == ["FAULTED", "IDLE"]
    assert orchestrator.submit(ELIGIBLE, dry_run=False).wait(10).success
    assert not orchestrator.reset_fault().success


# -- shutdown --------------------------------------------------------------------------
def test_shutdown_mid_goal_says_the_node_is_shutting_down() -> None:
    backend, gate, recorder, orchestrator, handle = held()
    orchestrator.shutdown(reason="node shutting down")
    result = handle.wait(0)
    assert result.status is GoalStatus.ABORTED and result.error_code == "SHUTDOWN", result
    assert "node shutting down" in result.error_message
    assert_agrees(result)
    gate.set()


def test_shutdown_while_paused_aborts_with_a_code_that_agrees() -> None:
    backend, gate, recorder, orchestrator, handle = held()
    orchestrator.pause()
    gate.set()
    wait_for(lambda: orchestrator.state is State.PAUSED)
    orchestrator.shutdown(reason="node shutting down")
    result = handle.wait(0)
    assert result.status is GoalStatus.ABORTED and result.error_code == "SHUTDOWN", result
    assert_agrees(result)


# -- pause while a cancel is pending (issue 9, item 4) ---------------------------------
def test_pause_while_a_cancel_is_pending_is_accepted_and_the_cancel_wins() -> None:
    backend, gate, recorder, orchestrator, handle = held()
    assert orchestrator.cancel().success
    reply = orchestrator.pause()
    assert reply.success, reply
    assert reply.message == "Pause requested; pausing after the current unit completes"
    assert orchestrator.state is State.CANCELING
    gate.set()
    assert handle.wait(10).status is GoalStatus.CANCELED
    assert "PAUSED" not in recorder.states


# -- a cancel accepted before the goal finishes ends it CANCELED (issue 9, item 8) -----
class CancelAfterTheLastUnit(OrchestratorListener):
    """Cancels from the goal thread once the tree has succeeded, before the goal finishes."""

    def __init__(self) -> None:
        self.orchestrator: Any = None
        self.reply: Any = None

    def ticked(self, goal_id: str, root: Any) -> None:
        if self.reply is None and root.status.value == "SUCCESS":
            self.reply = self.orchestrator.cancel()


@pytest.mark.parametrize("dry_run", [False, True], ids=["execute", "preview"])
def test_a_cancel_accepted_after_the_last_boundary_still_ends_canceled(dry_run: bool) -> None:
    backend = ScriptedBackend()
    listener = CancelAfterTheLastUnit()
    orchestrator = make_orchestrator(backend, listener=listener)
    listener.orchestrator = orchestrator
    result = orchestrator.submit(ELIGIBLE, dry_run=dry_run).wait(10)
    assert listener.reply is not None and listener.reply.success
    assert result.status is GoalStatus.CANCELED, result
    assert_agrees(result)


def test_cancel_of_a_goal_that_already_finished_is_refused_by_id() -> None:
    orchestrator = make_orchestrator(ScriptedBackend())
    handle = orchestrator.submit(ELIGIBLE, dry_run=True)
    assert handle.wait(10).success
    reply = orchestrator.cancel(handle.goal_id)
    assert not reply.success and handle.goal_id in reply.message


def test_cancel_from_another_thread_while_a_listener_is_being_told_does_not_block() -> None:
    """Listeners are called outside the orchestrator's lock: a listener that waits for
    another thread's request (a ROS callback on another executor thread) cannot deadlock."""

    class Waiting(OrchestratorListener):
        def __init__(self) -> None:
            self.orchestrator: Any = None
            self.replies: list[Any] = []

        def state_changed(self, state: State, message: str) -> None:
            if state is State.RUNNING and not self.replies:
                worker = threading.Thread(target=lambda: self.replies.append(self.orchestrator.cancel()))
                worker.start()
                worker.join(10)
                assert self.replies, "cancel() blocked while a listener was being called"

    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", Outcome.ok(gate=gate))
    listener = Waiting()
    orchestrator = make_orchestrator(backend, listener=listener)
    listener.orchestrator = orchestrator
    handle = orchestrator.submit(FOUR_UNITS, dry_run=False)
    assert listener.replies and listener.replies[0].success
    gate.set()
    assert handle.wait(10).status is GoalStatus.CANCELED, show(handle.root)


def test_state_changes_reach_listeners_in_order() -> None:
    backend, gate, recorder, orchestrator, handle = held()
    orchestrator.pause()
    gate.set()
    wait_for(lambda: orchestrator.state is State.PAUSED)
    orchestrator.cancel()
    handle.wait(10)
    assert recorder.states == ["RUNNING", "COMPLETING_TASK", "PAUSED", "CANCELING", "IDLE"]


# -- status and error code agree for every outcome --------------------------------------
@pytest.mark.parametrize(
    ("text", "kind", "outcome"),
    [
        (ELIGIBLE, None, None),
        ('{"tasks": []}', None, None),
        (ELIGIBLE, "plan", Outcome.fail("PLANNING_FAILED: no IK solution")),
        (ELIGIBLE, "execute", Outcome.fail("EXECUTION_FAILED: protective stop")),
        (ELIGIBLE, "execute", Outcome.fail("protective stop")),
        (ELIGIBLE, "execute", Outcome(fail_with=ValueError("bad value"))),
        (ELIGIBLE, "execute", Outcome.fail("TIMEOUT: execution over 120 s")),
    ],
)
def test_status_and_error_code_agree(text: str, kind: str | None, outcome: Outcome | None) -> None:
    backend = ScriptedBackend()
    if kind is not None and outcome is not None:
        backend.script(kind, outcome)
    result = make_orchestrator(backend).submit(text, dry_run=False).wait(10)
    assert_agrees(result)


def test_a_fault_reset_is_written_to_the_run_log(tmp_path: Any) -> None:
    from erobs_bt.viz.runlog import RunLogWriter, read_run_log

    backend = ScriptedBackend()
    writer = RunLogWriter(tmp_path / "run.jsonl")
    orchestrator = make_orchestrator(backend, listener=writer)
    backend.script("execute", Outcome.fail("TIMEOUT: execution over 120 s"))
    faulted = orchestrator.submit(ELIGIBLE, dry_run=False)
    faulted.wait(10)
    assert orchestrator.reset_fault().success
    writer.close()
    records = read_run_log(tmp_path / "run.jsonl")
    reset = [r for r in records if r["event"] == "fault_reset"]
    assert len(reset) == 1 and reset[0]["fault"] == "TIMEOUT: execution over 120 s"
    # Which goal faulted and who asked (a call in this process: no caller named itself).
    assert reset[0]["faulted_goal_id"] == faulted.goal_id and reset[0]["by"] == "in-process call"
    assert reset[0]["t"] >= records[0]["t"]

"""Pause, resume and cancel take effect only at unit boundaries (EROBS semantics §3)."""

from __future__ import annotations

import threading

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.orchestrator import GoalRejected, GoalStatus, State

from helpers import PAUSE, SUCK, Recorder, make_orchestrator, move, script_json, show, vacuum, wait_for

# Four units: batch[2], pipettor, batch[1], pipettor (5 steps).
FOUR_UNITS = script_json([move("a"), vacuum("vacuum_on"), SUCK, move("b"), SUCK])


def held_first_unit():
    """An orchestrator running FOUR_UNITS with its first unit held by a gate."""
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", Outcome.ok(gate=gate))
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle = orchestrator.submit(FOUR_UNITS, dry_run=False)
    wait_for(lambda: backend.count("execute") == 1, message="unit 1 dispatched")
    return backend, gate, recorder, orchestrator, handle


def test_pause_is_refused_when_no_goal_runs() -> None:
    orchestrator = make_orchestrator(ScriptedBackend())
    reply = orchestrator.pause()
    assert not reply.success and reply.message == "No task is currently executing"
    assert not orchestrator.resume().success


def test_pause_waits_for_the_running_unit_then_pauses_before_the_next() -> None:
    backend, gate, recorder, orchestrator, handle = held_first_unit()
    reply = orchestrator.pause()
    assert reply.success
    assert orchestrator.state is State.COMPLETING_TASK, "the running unit is never interrupted"
    assert not orchestrator.pause().success, "a second pause request is refused"
    gate.set()
    wait_for(lambda: orchestrator.state is State.PAUSED, message="PAUSED at the boundary")
    assert backend.count("run_step") == 0, "unit 2 did not start"
    assert recorder.feedbacks[-1].progress_percentage == 100.0 * 2 / 5
    done = [e for e in recorder.events if e["event"] == "unit_succeeded"]
    assert done[-1]["completed_steps"] == 2
    assert not orchestrator.pause().success, "already paused"
    assert orchestrator.resume().success
    result = handle.wait(10)
    assert result.success, show(handle.root)
    assert result.completed_steps == 5
    assert recorder.states[:4] == ["RUNNING", "COMPLETING_TASK", "PAUSED", "RUNNING"]
    assert recorder.states[-1] == "IDLE"


def test_resume_never_re_pauses_at_later_boundaries() -> None:
    backend, gate, recorder, orchestrator, handle = held_first_unit()
    orchestrator.pause()
    gate.set()
    wait_for(lambda: orchestrator.state is State.PAUSED)
    orchestrator.resume()
    assert handle.wait(10).success
    assert recorder.states.count("PAUSED") == 1


def test_cancel_during_a_unit_stops_at_the_next_boundary() -> None:
    backend, gate, recorder, orchestrator, handle = held_first_unit()
    assert orchestrator.cancel().success
    assert orchestrator.state is State.CANCELING
    gate.set()
    result = handle.wait(10)
    assert result.status is GoalStatus.CANCELED
    assert result.completed_steps == 2, "the running unit completed; nothing after it ran"
    assert backend.count("run_step") == 0
    assert orchestrator.state is State.IDLE


def test_cancel_during_the_last_unit_ends_canceled_not_succeeded() -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("run_step", Outcome.ok(), Outcome.ok(gate=gate))
    orchestrator = make_orchestrator(backend)
    handle = orchestrator.submit(FOUR_UNITS, dry_run=False)
    wait_for(lambda: backend.count("run_step") == 2, message="last unit running")
    orchestrator.cancel()
    gate.set()
    result = handle.wait(10)
    assert result.status is GoalStatus.CANCELED, show(handle.root)
    assert result.completed_steps == 5


def test_pause_during_the_last_unit_lets_the_goal_finish() -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("run_step", Outcome.ok(), Outcome.ok(gate=gate))
    orchestrator = make_orchestrator(backend)
    handle = orchestrator.submit(FOUR_UNITS, dry_run=False)
    wait_for(lambda: backend.count("run_step") == 2)
    assert orchestrator.pause().success
    gate.set()
    assert handle.wait(10).success
    assert orchestrator.state is State.IDLE


def test_cancel_while_paused_ends_the_goal() -> None:
    backend, gate, recorder, orchestrator, handle = held_first_unit()
    orchestrator.pause()
    gate.set()
    wait_for(lambda: orchestrator.state is State.PAUSED)
    assert orchestrator.cancel().success
    result = handle.wait(10)
    assert result.status is GoalStatus.CANCELED
    assert result.error_message.startswith("cancelled while paused after unit 1 of ")
    assert result.error_message.endswith("; the arm is at rest")
    assert result.completed_steps == 2


def test_pause_step_waits_for_resume_and_cancel_ends_it() -> None:
    backend = ScriptedBackend()
    orchestrator = make_orchestrator(backend)
    script = script_json([move("a"), PAUSE, move("b")])
    handle = orchestrator.submit(script, dry_run=False)
    wait_for(lambda: orchestrator.state is State.PAUSED, message="pause step reached")
    assert backend.count("execute") == 1
    assert not orchestrator.pause().success, "already paused at a pause step"
    assert orchestrator.resume().success
    assert handle.wait(10).success
    assert backend.count("execute") == 2

    handle = orchestrator.submit(script, dry_run=False)
    wait_for(lambda: orchestrator.state is State.PAUSED)
    orchestrator.cancel()
    result = handle.wait(10)
    assert result.status is GoalStatus.CANCELED
    # Held by the pause step (unit 2 of 3) after its first step: where it ended, at rest.
    assert result.error_message == (
        "cancelled while paused at unit 2 of 3, pause (1 of 3 steps done); the arm is at rest"
    ), result.error_message
    assert result.completed_steps == 1


def test_second_goal_while_busy_is_rejected_and_the_first_is_unaffected() -> None:
    backend, gate, recorder, orchestrator, handle = held_first_unit()
    try:
        orchestrator.submit(FOUR_UNITS, dry_run=False)
    except GoalRejected as exc:
        assert "busy" in str(exc)
    else:
        raise AssertionError("second goal accepted while busy")
    gate.set()
    assert handle.wait(10).success


def test_unit_failing_while_cancel_is_pending_faults() -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", Outcome.fail("EXECUTION_FAILED: protective stop", gate=gate))
    orchestrator = make_orchestrator(backend)
    handle = orchestrator.submit(FOUR_UNITS, dry_run=False)
    wait_for(lambda: backend.count("execute") == 1)
    orchestrator.cancel()
    gate.set()
    result = handle.wait(10)
    assert result.status is GoalStatus.ABORTED
    assert orchestrator.state is State.FAULTED


def test_a_pause_right_after_a_resume_pauses_at_the_next_boundary_instead_of_sticking() -> None:
    backend, gate, recorder, orchestrator, handle = held_first_unit()
    orchestrator.pause()
    gate.set()
    wait_for(lambda: orchestrator.state is State.PAUSED, message="PAUSED before unit 2")
    # Both requests before the goal thread can act on the resume.
    with orchestrator._lock:
        assert orchestrator.resume().success
        assert orchestrator.pause().success
    wait_for(lambda: backend.count("run_step") == 1, message="the resume released unit 2")
    wait_for(
        lambda: orchestrator.state is State.PAUSED, message="the new pause took effect at the next boundary"
    )
    assert backend.count("execute") == 1, "unit 3 did not start"
    assert orchestrator.resume().success
    assert handle.wait(10).success


def test_a_pause_requested_before_a_pause_step_is_satisfied_by_it() -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", Outcome.ok(gate=gate))
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle = orchestrator.submit(script_json([move("a"), PAUSE, move("b"), SUCK]), dry_run=False)
    wait_for(lambda: backend.count("execute") == 1)
    assert orchestrator.pause().success
    gate.set()
    wait_for(lambda: orchestrator.state is State.PAUSED, message="paused")
    assert orchestrator.resume().success  # releases the boundary before the pause step
    wait_for(
        lambda: any("pause step" in str(e.get("message", "")) for e in recorder.events), message="pause step"
    )
    wait_for(lambda: orchestrator.state is State.PAUSED, message="the pause step waits")
    assert orchestrator.resume().success
    assert handle.wait(10).success, "no second pause after the pause step was resumed"

"""An accepted cancel says at once what it will do (erobs_bt issue 40, item 7).

The semantics stay the specification's (a cancel takes effect at the next unit boundary; the
running unit, planning included, runs to its end; while paused the goal ends at once); what
is new is the one text ``Orchestrator.cancel`` makes when it accepts: its reply, the CANCELING
state's message (run log ``state`` record) and, from the goal thread at once and in every
later feedback of the goal, the feedback's status message. Counted on the scripted backend
with gates, as test_pause_cancel.py does.
"""

from __future__ import annotations

import threading
from typing import Any

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.orchestrator import GoalStatus, State

from helpers import SUCK, Recorder, make_orchestrator, move, script_json, show, vacuum, wait_for

# Four units: batch[2], pipettor, batch[1], pipettor (5 steps).
FOUR_UNITS = script_json([move("a"), vacuum("vacuum_on"), SUCK, move("b"), SUCK])
STOP = "to halt now: stop (erobs-bt stop, ~/stop)"
AFTER = "cancel accepted: the goal ends after unit"


class Messages(Recorder):
    """A recorder that keeps the state messages too."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[tuple[str, str]] = []

    def state_changed(self, state: Any, message: str) -> None:
        super().state_changed(state, message)
        self.messages.append((state.value, message))


def said(recorder: Recorder, text: str) -> list[str]:
    return [f.status_message for f in list(recorder.feedbacks) if text in f.status_message]


def test_a_cancel_while_a_unit_executes_says_after_which_unit_the_goal_ends_and_names_stop() -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", Outcome.ok(gate=gate))
    recorder = Messages()
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle = orchestrator.submit(FOUR_UNITS, dry_run=False)
    wait_for(lambda: backend.count("execute") == 1, message="unit 1 dispatched")

    reply = orchestrator.cancel()

    notice = f"cancel accepted: the goal ends after unit 1 (its motion runs to its end); {STOP}"
    assert reply.success and reply.message == notice
    assert orchestrator.state is State.CANCELING
    assert recorder.messages[-1] == ("CANCELING", notice), "the state says it (~/execution_state)"
    states = [e for e in recorder.events if e["event"] == "state" and e["state"] == "CANCELING"]
    assert states and states[-1]["message"] == notice, "and the run log"
    # At once: the feedback says it while unit 1 still executes.
    wait_for(lambda: said(recorder, notice), message="a feedback saying what the cancel will do")
    assert backend.count("execute") == 1 and not handle.done()
    first = next(i for i, f in enumerate(recorder.feedbacks) if notice in f.status_message)

    gate.set()
    result = handle.wait(10)
    assert result.status is GoalStatus.CANCELED, show(handle.root)
    assert result.completed_steps == 2, "unchanged: unit 1 ran to its end, nothing after it"
    assert backend.count("run_step") == 0
    later = recorder.feedbacks[first:]
    assert all(notice in f.status_message for f in later), (
        "every later feedback keeps it (feedback is rate-bounded: a lone one could be skipped)",
        [f.status_message for f in later],
    )


def test_a_cancel_while_a_unit_plans_ends_the_goal_after_that_unit_plans_and_executes() -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("plan", Outcome.ok(gate=gate))  # unit 1 keeps planning until released
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle = orchestrator.submit(FOUR_UNITS, dry_run=False)
    wait_for(lambda: backend.count("plan") == 1, message="unit 1 planning")

    reply = orchestrator.cancel()

    assert (
        reply.message == f"cancel accepted: the goal ends after unit 1 (its motion runs to its end); {STOP}"
    )
    wait_for(lambda: said(recorder, reply.message), message="the feedback saying it")
    assert backend.dispatches() == 0, "said before anything of unit 1 moved"
    gate.set()
    result = handle.wait(10)
    assert result.status is GoalStatus.CANCELED
    assert backend.count("execute") == 1 and result.completed_steps == 2, "the unit planned, then executed"


def test_a_cancel_names_the_running_unit_by_its_number() -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", Outcome.ok(), Outcome.ok(gate=gate))  # unit 3 (the second batch) held
    orchestrator = make_orchestrator(backend)
    handle = orchestrator.submit(FOUR_UNITS, dry_run=False)
    wait_for(lambda: backend.count("execute") == 2, message="unit 3 dispatched")
    reply = orchestrator.cancel()
    gate.set()
    assert reply.message.startswith(
        "cancel accepted: the goal ends after unit 3 (its motion runs to its end)"
    )
    assert handle.wait(10).completed_steps == 4


def test_a_cancel_while_paused_says_the_goal_ends_at_once() -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", Outcome.ok(gate=gate))
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle = orchestrator.submit(FOUR_UNITS, dry_run=False)
    wait_for(lambda: backend.count("execute") == 1, message="unit 1 dispatched")
    assert orchestrator.pause().success
    gate.set()
    wait_for(lambda: orchestrator.state is State.PAUSED, message="PAUSED at the boundary")

    reply = orchestrator.cancel()

    # Where it ends (after unit 1 of the 4: its 2 steps done) and that nothing moves (issue u41
    # item 4), in the reply, the feedback and the result.
    assert reply.success and reply.message == (
        "cancel accepted: the goal is paused after unit 1 of 4 (2 of 5 steps done), so it ends "
        "there at once; the arm is at rest"
    )
    result = handle.wait(10)
    assert result.status is GoalStatus.CANCELED
    assert (
        result.error_message
        == "cancelled while paused after unit 1 of 4 (2 of 5 steps done); the arm is at rest"
    )
    assert said(recorder, reply.message), "the feedback says it before the result"


def test_a_cancel_of_a_preview_says_the_running_unit_finishes_planning() -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("plan", Outcome.ok(gate=gate))
    orchestrator = make_orchestrator(backend)
    handle = orchestrator.submit(script_json([move("a"), vacuum("vacuum_on"), move("b")]), dry_run=True)
    wait_for(lambda: backend.count("plan") == 1, message="unit 1 planning")
    reply = orchestrator.cancel()
    gate.set()
    assert (
        reply.message == f"cancel accepted: the goal ends after unit 1 (its planning runs to its end); {STOP}"
    )
    assert handle.wait(10).status is GoalStatus.CANCELED


def test_the_web_console_answers_a_cancel_with_what_it_will_do() -> None:
    from viz.test_web_view import CONTROL, get_state, post

    from erobs_bt.viz.web import start_live_view

    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", Outcome.ok(gate=gate))
    orchestrator = make_orchestrator(backend)
    view = start_live_view(orchestrator, rate=50.0)
    try:
        handle = orchestrator.submit(FOUR_UNITS, dry_run=False)
        wait_for(lambda: backend.count("execute") == 1, message="unit 1 dispatched")
        status, body = post(view.url, "cancel", CONTROL)
        notice = f"{AFTER} 1 (its motion runs to its end); {STOP}"
        assert status == 200 and body["success"] and body["message"] == notice, body
        wait_for(lambda: get_state(view.url)["state_message"] == notice, message="the state message")
        wait_for(
            lambda: notice in ((get_state(view.url)["feedback"] or {}).get("status_message") or ""),
            message="the feedback shown",
        )
        gate.set()
        assert handle.wait(10).status is GoalStatus.CANCELED
    finally:
        gate.set()
        view.close()

"""Synchronous tree tests in py_trees style: ``tick_once()`` on a compiled root.

No orchestrator and no goal thread: the scripted backend completes its futures at once
(unless gated), so each tick's outcome is exact. Covers :class:`UnitSequence` against
``py_trees.composites.Sequence(memory=True)`` (hypothesis), :class:`UnitBoundary`, and the
fault path (:class:`FaultOnFatal` is where the fault latches).
"""

from __future__ import annotations

import threading
from typing import Any

import py_trees
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from py_trees.common import Status

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.batching import group_into_batches
from erobs_bt.cache import PlanCache, is_eligible
from erobs_bt.orchestrator import GoalStatus, State
from erobs_bt.script.parse import parse_script
from erobs_bt.tree.compile import UnitSequence, compile_tree
from erobs_bt.tree.context import Controls, FinishReason, GoalContext, GoalEvents, Mode
from erobs_bt.tree.decorators import FaultOnFatal

from helpers import PAUSE, SUCK, make_orchestrator, move, script_json, show, vacuum

ELIGIBLE = script_json([move("a"), vacuum("vacuum_on"), move("b")])
TWO_UNITS = script_json([move("a"), SUCK])


# -- UnitSequence behaves like Sequence(memory=True) ---------------------------------------
class Scripted(py_trees.behaviour.Behaviour):
    """Returns the next status of ``statuses`` on each update (the last one repeats) and
    logs its hooks into the shared ``log``."""

    def __init__(self, name: str, statuses: list[Status], log: list[tuple[str, str, str]]) -> None:
        super().__init__(name)
        self.statuses = statuses
        self.log = log
        self.calls = 0

    def initialise(self) -> None:
        self.log.append((self.name, "initialise", ""))

    def update(self) -> Status:
        status = self.statuses[min(self.calls, len(self.statuses) - 1)]
        self.calls += 1
        return status

    def terminate(self, new_status: Status) -> None:
        self.log.append((self.name, "terminate", new_status.value))


CHILD_STATUSES = st.lists(
    st.lists(st.sampled_from([Status.SUCCESS, Status.FAILURE, Status.RUNNING]), min_size=1, max_size=4),
    min_size=0,
    max_size=5,
)
#: Per tick: tick the root, or halt it (``stop(INVALID)``, as a parent's preemption does).
ACTIONS = st.lists(st.sampled_from(["tick", "tick", "tick", "halt"]), min_size=1, max_size=12)


def _build(kind: str, scripts: list[list[Status]]) -> tuple[Any, list[Any], list[tuple[str, str, str]]]:
    log: list[tuple[str, str, str]] = []
    children = [Scripted(f"child {i}", list(s), log) for i, s in enumerate(scripts)]
    if kind == "unit":
        root: Any = UnitSequence("script", list(children))
    else:
        root = py_trees.composites.Sequence("script", memory=True, children=list(children))
    return root, children, log


@settings(max_examples=300, deadline=None)
@given(scripts=CHILD_STATUSES, actions=ACTIONS)
def test_unit_sequence_behaves_like_a_memory_sequence(
    scripts: list[list[Status]], actions: list[str]
) -> None:
    ours, our_children, our_log = _build("unit", scripts)
    theirs, their_children, their_log = _build("py_trees", scripts)
    for step, action in enumerate(actions):
        if action == "tick":
            ours.tick_once()
            theirs.tick_once()
        else:
            ours.stop(Status.INVALID)
            theirs.stop(Status.INVALID)
        where = f"after action {step} ({action}) of {actions} with {scripts}"
        assert ours.status == theirs.status, where
        assert [c.status for c in our_children] == [c.status for c in their_children], where
        assert [c.calls for c in our_children] == [c.calls for c in their_children], where
        assert our_log == their_log, where


# -- compiled trees, ticked synchronously --------------------------------------------------
def _context(text: str, backend: ScriptedBackend, mode: Mode = Mode.EXECUTE) -> GoalContext:
    script = parse_script(text)
    units = group_into_batches(script.steps, enabled=True)
    return GoalContext(
        script=script,
        units=units,
        mode=mode,
        backend=backend,
        cache=PlanCache(),
        eligible=is_eligible(units),
        controls=Controls(),
        events=GoalEvents(),
    )


def _prime(context: GoalContext) -> None:
    """Run the eligible goal once so that its solution is cached, back at the same start."""
    start = context.backend.joint_positions()
    root = compile_tree(context)
    root.tick_once()
    assert root.status == Status.SUCCESS, show(root)
    assert len(context.cache) == 1
    context.backend.set_positions(start)  # type: ignore[attr-defined]


def test_a_compiled_tree_runs_to_success_in_one_tick_when_the_backend_answers_at_once() -> None:
    backend = ScriptedBackend()
    context = _context(TWO_UNITS, backend)
    root = compile_tree(context)
    root.tick_once()
    assert root.status == Status.SUCCESS, show(root)
    assert [c.kind for c in backend.calls] == ["plan", "execute", "run_step"]


def test_unit_boundary_parks_on_pause_releases_on_resume_and_ends_on_cancel() -> None:
    backend = ScriptedBackend()
    context = _context(script_json([move("a"), SUCK, move("b")]), backend)
    root = compile_tree(context)
    context.controls.request_pause()
    root.tick_once()
    boundary = root.children[0]
    assert root.status == Status.RUNNING and boundary.status == Status.RUNNING, show(root)
    assert backend.calls == [], "a pause before unit 1 parks the goal before anything runs"
    root.tick_once()
    assert backend.calls == [], "still parked without a resume"
    context.controls.request_resume()
    context.controls.request_pause()  # a new pause takes effect at the next boundary
    root.tick_once()
    assert [c.kind for c in backend.calls] == ["plan", "execute"], show(root)
    assert root.children[2].status == Status.RUNNING, "parked before unit 2"
    context.controls.request_cancel()
    root.tick_once()
    assert root.status == Status.FAILURE, show(root)
    assert context.finish_reason is FinishReason.CANCELED
    assert context.cancel_message == "cancelled while paused"
    assert backend.count("run_step") == 0


def test_a_cancel_during_the_last_unit_is_seen_by_the_boundary_after_it() -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", Outcome.ok(gate=gate))
    context = _context(ELIGIBLE, backend)
    root = compile_tree(context)
    root.tick_once()
    context.controls.request_cancel()
    gate.set()
    assert backend.count("execute") == 1
    while root.status == Status.RUNNING:
        root.tick_once()
    assert root.status == Status.FAILURE and context.finish_reason is FinishReason.CANCELED, show(root)
    assert context.cancel_message == "cancelled"


def test_a_fatal_replay_error_latches_the_fault_after_exactly_one_dispatch() -> None:
    backend = ScriptedBackend()
    context = _context(ELIGIBLE, backend)
    _prime(context)
    backend.script("replay", Outcome.fail("REPLAY_TIMEOUT: controller did not answer"))
    dispatches = backend.dispatches()
    root = compile_tree(context)
    root.tick_once()
    assert root.status == Status.FAILURE, show(root)
    assert backend.dispatches() == dispatches + 1 and backend.count("plan") == 1
    assert context.failure is not None and context.failure.fatal
    assert context.fault == "REPLAY_TIMEOUT: controller did not answer"
    decorator = next(b for b in root.iterate() if isinstance(b, FaultOnFatal))
    assert decorator.feedback_message.startswith("FAULTED: REPLAY_TIMEOUT:")


def test_a_non_fatal_replay_error_plans_and_executes_afresh_once_and_is_no_failure() -> None:
    backend = ScriptedBackend()
    context = _context(ELIGIBLE, backend)
    _prime(context)
    backend.script("replay", Outcome.fail("EXECUTION_FAILED: goal rejected by execute_task_solution"))
    root = compile_tree(context)
    root.tick_once()
    assert root.status == Status.SUCCESS, show(root)
    assert backend.count("replay") == 1 and backend.count("plan") == 2 and backend.count("execute") == 2
    assert context.failure is None and context.fault is None


def test_a_unit_failing_while_a_cancel_is_pending_latches_the_fault() -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", Outcome.fail("EXECUTION_FAILED: protective stop", gate=gate))
    context = _context(TWO_UNITS, backend)
    root = compile_tree(context)
    root.tick_once()
    context.controls.request_cancel()
    gate.set()
    while root.status == Status.RUNNING:
        root.tick_once()
    assert root.status == Status.FAILURE, show(root)
    assert context.failed_while_canceling
    assert context.fault == "unit failed while a cancel was pending: EXECUTION_FAILED: protective stop"


def test_a_plain_failure_aborts_without_a_fault() -> None:
    backend = ScriptedBackend()
    backend.script("plan", Outcome.fail("PLANNING_FAILED: no IK solution"))
    context = _context(ELIGIBLE, backend)
    root = compile_tree(context)
    root.tick_once()
    assert root.status == Status.FAILURE
    assert context.failure is not None and context.failure.code.value == "PLANNING_FAILED"
    assert context.fault is None


def test_the_fault_decorator_is_what_faults_the_orchestrator(monkeypatch: pytest.MonkeyPatch) -> None:
    def run() -> State:
        backend = ScriptedBackend()
        backend.script("execute", Outcome.fail("TIMEOUT: execution over 120 s"))
        orchestrator = make_orchestrator(backend)
        result = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
        assert result.status is GoalStatus.ABORTED and result.error_code == "TIMEOUT"
        return orchestrator.state

    assert run() is State.FAULTED
    monkeypatch.setattr(FaultOnFatal, "update", lambda self: self.decorated.status)
    assert run() is State.IDLE, "without the decorator's latch nothing faults: it is the one place"


def test_a_pause_step_runs_until_resume_in_a_synchronous_tree() -> None:
    backend = ScriptedBackend()
    context = _context(script_json([move("a"), PAUSE, move("b")]), backend)
    root = compile_tree(context)
    root.tick_once()
    root.tick_once()
    assert root.status == Status.RUNNING and backend.count("execute") == 1, show(root)
    context.controls.request_resume()
    root.tick_once()
    assert root.status == Status.SUCCESS and backend.count("execute") == 2, show(root)

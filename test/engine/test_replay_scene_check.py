"""The opt-in scene check of a replay (``replay_scene_check``, issue 23) and stale plan-aheads.

The specification's replay runs no collision pass; with ``replay_scene_check`` on, a cache
hit planned in another planning-scene revision is checked against the scene as it is now
before it is sent, and a problem refuses it with the non-fatal ``SCENE_CHANGED:`` error, so
the batch is planned afresh once (the replay table's rule for any non-fatal error). Counted
in backend calls with the scripted backend, as test_replay_or_plan.py does; the real
collision check (the embedded planner's) is in test_scene_replay_sim.py.
"""

from __future__ import annotations

import threading

import pytest

from erobs_bt.backends.base import Solution
from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.orchestrator import GoalStatus, State
from erobs_bt.world.cell import Obstacle, Pose, Shape

from helpers import SUCK, Recorder, make_orchestrator, move, script_json, show, vacuum, wait_for

ELIGIBLE = script_json([move("a"), vacuum("vacuum_on"), move("b")])
START = (0.0, -1.57, 1.57, -1.57, -1.57, 0.0)
BOX = Obstacle("box1", Shape("box", (0.1, 0.1, 0.1)), "base_link", Pose((0.4, 0.0, 0.3)))
BLOCKED = "tasks[2]: sample 4 at t = 0.120 s in collision (wrist_3_link with box1) at [0, 0, 0, 0, 0, 0]"


EMPTY = ScriptedBackend().scene_revision()


def primed(recorder: Recorder | None = None, **options: object) -> tuple[ScriptedBackend, object]:
    """A scripted backend and an orchestrator whose cache holds ELIGIBLE, planned in the
    empty world; the arm is back at START."""
    backend = ScriptedBackend(start=START)
    orchestrator = make_orchestrator(backend, listener=recorder, **options)
    first = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
    assert first.success, first
    backend.set_positions(START)
    return backend, orchestrator


def replay_phases(recorder: Recorder) -> list[str]:
    return [e["detail"] for e in recorder.events if e["event"] == "replay_finished"]


def test_off_by_default_a_hit_replays_unchecked_whatever_the_scene() -> None:
    backend, orchestrator = primed()
    backend.set_world_obstacles([BOX])
    backend.script("scene_check", Outcome.fail(BLOCKED))  # would refuse, were it asked
    result = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
    assert result.success
    assert backend.count("scene_check") == 0, "the specification's replay runs no collision pass"
    assert backend.count("replay") == 1 and backend.count("plan") == 1


def test_a_hit_planned_in_the_present_scene_is_sent_without_a_check() -> None:
    backend, orchestrator = primed(replay_scene_check=True)
    result = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
    assert result.success
    assert backend.count("scene_check") == 0, "planned in this very scene: nothing to check"
    assert backend.count("replay") == 1


def test_after_a_scene_change_a_hit_that_passes_the_check_replays() -> None:
    backend, orchestrator = primed(replay_scene_check=True)
    backend.set_world_obstacles([BOX])
    result = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
    assert result.success
    assert backend.count("scene_check") == 1
    assert backend.count("replay") == 1 and backend.count("plan") == 1, "no fresh plan"


def test_a_refused_replay_is_scene_changed_sends_nothing_and_plans_afresh_once() -> None:
    recorder = Recorder()
    backend, orchestrator = primed(recorder, replay_scene_check=True)
    backend.set_world_obstacles([BOX])
    backend.script("scene_check", Outcome.fail(BLOCKED))
    handle = orchestrator.submit(ELIGIBLE, dry_run=False)
    result = handle.wait(10)
    assert result.success, show(handle.root)
    assert backend.count("replay") == 0, "a refused replay sends nothing"
    assert backend.count("plan") == 2 and backend.count("execute") == 2, (
        "exactly one fresh plan and execution"
    )
    assert orchestrator.state is State.IDLE, "SCENE_CHANGED is not fatal"
    assert recorder.cache_statuses() == ["MISS", "HIT"]
    refused = [d for d in replay_phases(recorder) if d.startswith("refused")]
    assert len(refused) == 1
    assert "SCENE_CHANGED: the planning scene changed since this trajectory was planned" in refused[0]
    assert f"(revision {EMPTY}, now {backend.scene_revision()})" in refused[0] and BLOCKED in refused[0]
    messages = [f.status_message for f in recorder.feedbacks if "SCENE_CHANGED" in f.status_message]
    assert messages, "the feedback says why the replay was refused"
    # The fresh plan replaced the entry; it was planned in the world with the box, so the next
    # run replays it unchecked.
    backend.set_positions(START)
    again = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
    assert again.success
    assert backend.count("scene_check") == 1 and backend.count("replay") == 1 and backend.count("plan") == 2


def test_a_fresh_attempt_failing_after_a_refusal_aborts_without_a_retry_loop() -> None:
    backend, orchestrator = primed(replay_scene_check=True)
    backend.set_world_obstacles([BOX])
    backend.script("scene_check", Outcome.fail(BLOCKED))
    backend.script(
        "plan", Outcome.fail("PLANNING_FAILED: tasks[2]: goal state is invalid: in collision (box1)")
    )
    result = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
    assert result.status is GoalStatus.ABORTED
    assert result.error_message.startswith("PLANNING_FAILED: tasks[2]"), (
        "the fresh plan's error is the result"
    )
    assert backend.dispatches() == 1, "only the priming run moved"
    assert orchestrator.state is State.IDLE
    backend.set_positions(START)
    assert orchestrator.submit(ELIGIBLE, dry_run=False).wait(10).success, "the node keeps serving"


def test_a_backend_that_cannot_check_is_refused_at_construction() -> None:
    class Unchecked(ScriptedBackend):
        @property
        def checks_replay(self) -> bool:
            return False

    with pytest.raises(ValueError, match="replay_scene_check: this backend cannot check"):
        make_orchestrator(Unchecked(start=START), replay_scene_check=True)
    make_orchestrator(Unchecked(start=START))  # off: fine


def test_a_plan_ahead_made_before_a_scene_change_is_discarded_and_planned_afresh() -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    gate = threading.Event()
    backend.script("execute", Outcome.ok(gate=gate))  # unit 1 keeps executing until released
    orchestrator = make_orchestrator(backend, listener=recorder)
    handle = orchestrator.submit(script_json([move("a"), SUCK, move("b")]), dry_run=False)
    wait_for(lambda: backend.count("plan") == 2, message="the plan-ahead of unit 3")
    ahead = handle.context.ahead
    assert ahead is not None
    wait_for(ahead.future.done, message="the plan-ahead's result")
    backend.set_world_obstacles([BOX])  # an object was added while unit 1 executes
    gate.set()
    result = handle.wait(10)
    assert result.success, show(handle.root)
    assert backend.count("plan") == 3, "unit 3 planned afresh in the new scene"
    discarded = [
        e["detail"] for e in recorder.events if e["event"] == "plan_ahead" and e["status"] == "discarded"
    ]
    now = backend.scene_revision()
    assert discarded == [
        f"planned in planning-scene revision {EMPTY}, the scene is now {now}; planning afresh"
    ]


def test_a_solution_keeps_its_scene_revision_through_serialisation() -> None:
    backend = ScriptedBackend(start=START)
    backend.set_world_obstacles([BOX])
    from erobs_bt.script.parse import parse_script

    steps = parse_script(ELIGIBLE).steps
    solution = backend.plan(steps, start=None).result(10)
    assert solution.scene_revision == backend.scene_revision() != EMPTY
    assert Solution.from_bytes(solution.to_bytes()) == solution
    bare = Solution(solution.segments, solution.model_revision, solution.start_positions)
    assert b"scene_revision" not in bare.to_bytes(), "a solution without one serialises as before"
    assert Solution.from_bytes(bare.to_bytes()).scene_revision is None

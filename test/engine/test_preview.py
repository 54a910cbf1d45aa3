"""Preview: plan only, never replay, never execute; batched vs unbatched start states."""

from __future__ import annotations

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.orchestrator import GoalStatus

from helpers import PAUSE, SUCK, Recorder, make_orchestrator, move, script_json, vacuum

TWO_MOVES = script_json([move("a"), vacuum("vacuum_on"), move("b")])


def test_preview_refuses_steps_other_than_moveto_and_end_effector_listing_them() -> None:
    backend = ScriptedBackend()
    orchestrator = make_orchestrator(backend)
    result = orchestrator.submit(script_json([move("a"), PAUSE, SUCK]), dry_run=True).wait(10)
    assert result.status is GoalStatus.ABORTED and result.error_code == "NOT_PREVIEWABLE"
    # EROBS's refusal (its agent's error table matches it), then the script paths.
    assert result.error_message.startswith("Dry-run not supported for: step 2 (pause), step 3 (pipettor). ")
    assert result.error_message.endswith("not previewable: tasks[1], tasks[2]")
    assert backend.calls == [], "nothing was planned or moved"


def test_batched_preview_plans_one_connected_sequence_and_executes_nothing() -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    result = orchestrator.submit(TWO_MOVES, dry_run=True).wait(10)
    assert result.success
    plans = [c for c in backend.calls if c.kind == "plan"]
    assert [c.detail["steps"] for c in plans] == [[0, 1, 2]]
    assert backend.dispatches() == 0
    assert len(recorder.previews) == 1


def test_unbatched_preview_plans_each_step_from_the_live_state() -> None:
    backend = ScriptedBackend()
    orchestrator = make_orchestrator(backend, enable_batching=False)
    result = orchestrator.submit(TWO_MOVES, dry_run=True).wait(10)
    assert result.success
    plans = [c for c in backend.calls if c.kind == "plan"]
    assert [c.detail["steps"] for c in plans] == [[0], [1], [2]]
    assert all(c.detail["start"] is None for c in plans), "every step starts from the live state"
    assert backend.dispatches() == 0


def test_preview_never_replays_even_when_the_cache_holds_the_goal() -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    start = backend.joint_positions()
    assert orchestrator.submit(TWO_MOVES, dry_run=False).wait(10).success
    backend.set_positions(start)
    assert orchestrator.submit(TWO_MOVES, dry_run=True).wait(10).success
    assert backend.count("replay") == 0
    assert backend.count("plan") == 2
    assert recorder.cache_statuses() == ["MISS", "HIT"], (
        "the preview reports that the cache holds the goal, and plans afresh all the same"
    )


def test_successful_eligible_preview_stores_a_solution_that_execution_replays() -> None:
    backend = ScriptedBackend()
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    assert orchestrator.submit(TWO_MOVES, dry_run=True).wait(10).success
    assert len(orchestrator.cache) == 1
    assert orchestrator.submit(TWO_MOVES, dry_run=False).wait(10).success
    assert backend.count("replay") == 1 and backend.count("plan") == 1
    assert recorder.cache_statuses() == ["MISS", "HIT"], "the preview missed and stored; execution replays"


def test_failed_preview_leaves_the_older_entry_in_place() -> None:
    backend = ScriptedBackend()
    orchestrator = make_orchestrator(backend)
    assert orchestrator.submit(TWO_MOVES, dry_run=True).wait(10).success
    (key,) = list(orchestrator.cache._entries)
    stored = orchestrator.cache.get(key)
    backend.script("plan", Outcome.fail("PLANNING_FAILED: obstacle moved into the path"))
    assert not orchestrator.submit(TWO_MOVES, dry_run=True).wait(10).success
    assert orchestrator.cache.get(key) == stored


def test_successful_preview_replaces_the_matching_entry() -> None:
    start = (0.1, -1.5, 1.5, -1.5, -1.5, 0.0)
    backend = ScriptedBackend(start=start)
    orchestrator = make_orchestrator(backend)
    assert orchestrator.submit(TWO_MOVES, dry_run=False).wait(10).success
    (key,) = list(orchestrator.cache._entries)
    # 0.001 rad away: the same rounded start, so the same key, but a different plan.
    backend.set_positions((0.101, -1.5, 1.5, -1.5, -1.5, 0.0))
    assert orchestrator.submit(TWO_MOVES, dry_run=True).wait(10).success
    assert list(orchestrator.cache._entries) == [key]
    stored = orchestrator.cache.get(key)
    assert stored is not None and stored.start_positions == (0.101, -1.5, 1.5, -1.5, -1.5, 0.0)


def test_a_preview_of_a_motion_unit_reports_its_cache_status_in_feedback() -> None:
    """The interface: motion units report HIT/MISS/INELIGIBLE (issue 9, item 9)."""
    backend = ScriptedBackend()
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    assert orchestrator.submit(TWO_MOVES, dry_run=True).wait(10).success
    assert recorder.feedbacks[-1].cache_status == "MISS"
    assert orchestrator.submit(TWO_MOVES, dry_run=True).wait(10).success
    assert recorder.feedbacks[-1].cache_status == "HIT"
    two_units = script_json([move("a"), move("b")])
    unbatched = make_orchestrator(backend, listener=recorder, enable_batching=False)
    assert unbatched.submit(two_units, dry_run=True).wait(10).success
    assert {f.cache_status for f in recorder.feedbacks[-4:] if f.unit_index} == {"INELIGIBLE"}

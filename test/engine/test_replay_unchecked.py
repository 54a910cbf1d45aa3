"""A cache hit replayed without a scene check although it was planned in another planning-scene
revision says so (erobs_bt issue 40, item 2).

``replay_scene_check`` stays off by default (the specification's replay runs no collision
pass: the hit is sent as it is, test_replay_scene_check.py); what is new is the notice, made
once by ``ReplayCached`` (:func:`erobs_bt.goal.unchecked_replay_notice`), naming the two
revisions and the parameter that would check the replay: a ``replay_unchecked`` run-log
record, every later feedback of the unit (feedback is rate-bounded: a lone one could be
dropped), the ``erobs-bt run`` console and summary, the web console's unit row and the MADSci
outcome. Counted on the scripted backend, as test_replay_scene_check.py does.
"""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from test_replay_scene_check import BOX, ELIGIBLE, EMPTY, START, primed

from erobs_bt.backends.scripted import ScriptedBackend
from erobs_bt.console import ConsoleProgress

from helpers import Recorder, make_orchestrator, wait_for


def unchecked(recorder: Recorder) -> list[dict[str, Any]]:
    return [e for e in recorder.events if e["event"] == "replay_unchecked"]


def test_off_by_default_a_hit_from_another_scene_revision_replays_and_says_it_was_not_checked() -> None:
    from erobs_bt.goal import unchecked_replay_in

    recorder = Recorder()
    backend, orchestrator = primed(recorder)
    backend.set_world_obstacles([BOX])
    now = backend.scene_revision()
    before = len(recorder.feedbacks)

    result = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)

    assert result.success
    assert backend.count("scene_check") == 0 and backend.count("replay") == 1, "the replay is unchanged"
    (record,) = unchecked(recorder)
    notice = record["message"]
    assert record["unit"] == 1
    assert notice.startswith(
        f"replayed unchecked: planned in planning-scene revision {EMPTY}, the scene is now {now}; "
        "sent without a collision check"
    ), notice
    assert "replay_scene_check:=true" in notice and "erobs-bt run --replay-scene-check" in notice
    # The feedback: from the notice on, every feedback of the unit carries it, to the unit's end.
    feedback = recorder.feedbacks[before:]
    first = next(i for i, f in enumerate(feedback) if notice in f.status_message)
    assert feedback[first].cache_status == "HIT"
    assert all(unchecked_replay_in(f.status_message) == notice for f in feedback[first:]), [
        f.status_message for f in feedback[first:]
    ]
    assert feedback[-1].status_message.startswith("unit 1 done"), feedback[-1]


def test_a_hit_planned_in_the_present_scene_says_nothing() -> None:
    recorder = Recorder()
    _backend, orchestrator = primed(recorder)
    assert orchestrator.submit(ELIGIBLE, dry_run=False).wait(10).success
    assert recorder.cache_statuses() == ["MISS", "HIT"]
    assert not unchecked(recorder)
    assert not any("replayed unchecked" in f.status_message for f in recorder.feedbacks)


def test_a_backend_that_cannot_check_names_the_cache_clear_instead() -> None:
    class Unchecked(ScriptedBackend):
        @property
        def checks_replay(self) -> bool:
            return False

    recorder = Recorder()
    backend = Unchecked(start=START)
    orchestrator = make_orchestrator(backend, listener=recorder)
    assert orchestrator.submit(ELIGIBLE, dry_run=False).wait(10).success
    backend.set_positions(START)
    backend.set_world_obstacles([BOX])
    assert orchestrator.submit(ELIGIBLE, dry_run=False).wait(10).success
    (record,) = unchecked(recorder)
    assert "this backend cannot check a cached trajectory" in record["message"]
    assert "~/clear_cache" in record["message"] and "replay_scene_check:=true" not in record["message"]


def test_the_run_console_prints_the_notice_and_repeats_it_in_the_summary() -> None:
    out = io.StringIO()
    progress = ConsoleProgress(Console(file=out, width=400, color_system=None))
    backend, orchestrator = primed()
    orchestrator.listener.add(progress)
    backend.set_world_obstacles([BOX])
    progress.begin(1)
    result = orchestrator.submit(ELIGIBLE, dry_run=False).wait(10)
    summary = io.StringIO()
    Console(file=summary, width=400, color_system=None).print(progress.summary(result, title="run"))
    assert "! replayed unchecked: planned in planning-scene revision" in out.getvalue(), out.getvalue()
    assert "notice" in summary.getvalue() and "unit 1: replayed unchecked" in summary.getvalue()


def test_the_web_console_shows_the_notice_on_the_unit() -> None:
    from erobs_bt.viz.web import start_live_view

    backend, orchestrator = primed()
    view = start_live_view(orchestrator, rate=50.0)
    try:
        backend.set_world_obstacles([BOX])
        handle = orchestrator.submit(ELIGIBLE, dry_run=False)
        assert handle.wait(10).success
        wait_for(lambda: view.listener.picture()["result"] is not None, message="the result shown")
        picture = view.listener.picture()
        (unit1,) = [e for e in picture["tree"]["entries"] if e["kind"] == "unit" and e["unit"] == 1]
        assert unit1["notice"].startswith("replayed unchecked: planned in planning-scene revision"), unit1
        assert any(e["event"] == "replay_unchecked" for e in picture["events"])
    finally:
        view.close()


def test_the_madsci_outcome_of_an_embedded_cell_lists_the_notice() -> None:
    from erobs_bt.madsci.cells import EmbeddedCell
    from erobs_bt.session import EngineConfig

    cell = EmbeddedCell(EngineConfig(backend="scripted"))
    try:
        backend = cell.engine.backend
        start = backend.joint_positions()
        first = cell.run(ELIGIBLE)
        assert first.success and first.notices == ()
        backend.set_positions(start)
        backend.set_world_obstacles([BOX])
        second = cell.run(ELIGIBLE)
        assert second.success and second.cache_status == "HIT"
        (notice,) = second.notices
        assert notice.startswith("unit 1: replayed unchecked: planned in planning-scene revision"), notice
        assert "replay_scene_check:=true" in notice
    finally:
        cell.close()

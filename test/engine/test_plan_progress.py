"""A unit's plan is reported move by move (issue 40, item 6: a MoveIt dry run showed only
"unit 1: plan" for 16 s while move_group answered one request per move).

The motion stack tells its plan listeners after each move of a unit is planned
(``MotionStack.add_plan_listener``); the orchestrator turns that into the feedback's status
message of the unit being planned. Here the simulated cell's stack (the embedded planner, one
plan per move as move_group's requests are): a four-move preview's feedback says 1/4 … 4/4
moves planned, in order, before the plan's end; a plan ahead of a later unit says nothing of
the unit that runs.
"""

from __future__ import annotations

from erobs_bt.session import EngineConfig, build_engine
from erobs_bt.settings import EngineSettings

from helpers import LED, Recorder, move, script

MOVES = [move("sample_scan_1"), move("pipettor_scan"), move("vial_scan"), move("safe_sample_transport")]


def plan_messages(recorder: Recorder) -> list[str]:
    with recorder._lock:
        return [f.status_message for f in recorder.feedbacks if ": plan" in f.status_message]


def test_a_preview_reports_each_move_of_its_unit_as_it_is_planned() -> None:
    recorder = Recorder()
    engine = build_engine(EngineConfig(settings=EngineSettings(speed=20.0)), listener=recorder)
    try:
        result = engine.orchestrator.submit(script(MOVES), dry_run=True).wait(120)
    finally:
        engine.close()
    assert result.success, result.error_message
    messages = plan_messages(recorder)
    progress = [m for m in messages if "moves planned" in m]
    assert progress == [f"unit 1: plan, {n}/4 moves planned" for n in range(1, 5)], messages
    # The plan's end comes after its progress.
    assert messages[-1].startswith("unit 1: plan ") and "s of motion" in messages[-1], messages


def test_a_plan_ahead_of_the_next_unit_says_nothing_of_the_running_unit() -> None:
    recorder = Recorder()
    engine = build_engine(EngineConfig(settings=EngineSettings(speed=20.0)), listener=recorder)
    try:
        # unit 1: two moves, unit 2: LED, unit 3: two moves (planned ahead across the LED or
        # when unit 3 starts; either way its progress names unit 3 only).
        text = script([*MOVES[:2], LED, *MOVES[2:]])
        result = engine.orchestrator.submit(text, dry_run=False).wait(120)
    finally:
        engine.close()
    assert result.success, result.error_message
    for message in plan_messages(recorder):
        if "moves planned" in message:
            assert message.startswith(("unit 1: plan, ", "unit 3: plan, ")), message

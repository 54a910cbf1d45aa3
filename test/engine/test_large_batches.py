"""Large batches the limits allow (issue 27, item 6): planned within a timeout that grows with
the batch, named by a short label."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.cli import main
from erobs_bt.viz.runlog import read_run_log

from helpers import make_orchestrator, move, script_json

REPO = Path(__file__).resolve().parents[2]
POSES = REPO / "config" / "poses.yaml"


def test_the_planning_timeout_grows_with_the_batch() -> None:
    # timeout.planning 0.25 s and a planner that takes 0.5 s: a 1,000-step batch gets ten
    # periods (2.5 s) and plans; a fixed 0.25 s per unit failed it (as 60 s failed every
    # 5,000-step batch on the simulated cell).
    backend = ScriptedBackend()
    backend.script("plan", Outcome.ok(delay=0.5))
    # The tree notices a timeout when it ticks: every 50 ms here.
    orchestrator = make_orchestrator(backend, timeouts={"planning": 0.25}, safety_period=0.05)
    try:
        tasks = [move("a" if i % 2 else "b") for i in range(1000)]
        result = orchestrator.submit(script_json(tasks), dry_run=True).wait()
        assert result.success, result.error_message
        assert backend.count("plan") == 1
    finally:
        orchestrator.shutdown()


def test_a_planning_timeout_names_the_parameter_to_raise() -> None:
    backend = ScriptedBackend()
    backend.script("plan", Outcome.ok(delay=1.0))
    orchestrator = make_orchestrator(backend, timeouts={"planning": 0.1}, safety_period=0.05)
    try:
        result = orchestrator.submit(script_json([move("a"), move("b")]), dry_run=True).wait()
        assert not result.success
        assert result.error_message.startswith("PLANNING_FAILED: ")
        assert (
            "PlanUnit exceeded its 0.1 s timeout (timeout.planning 0.1 s per 100 steps, 2 steps; raise the "
            "timeout.planning parameter)" in result.error_message
        )
    finally:
        orchestrator.shutdown()


@pytest.mark.slow
def test_a_large_batch_previews_on_the_simulated_cell_with_a_short_label(tmp_path: Path) -> None:
    # A batch of 300 moves between two registry poses, planned by the simulated cell's
    # planner: it completes, and its unit is named in a few dozen characters everywhere.
    count = 300
    script = tmp_path / "large.json"
    names = ("hot_plate_above", "transport")
    tasks = [{"task_type": "moveto", "target": names[i % 2]} for i in range(count)]
    script.write_text(json.dumps({"start_gripper": "epick", "tasks": tasks}), encoding="utf-8")
    log = tmp_path / "large.jsonl"
    result = CliRunner().invoke(
        main,
        ["preview", str(script), "--poses", str(POSES), "--log", str(log), "--no-mcap", "--speed", "1000"],
    )
    assert result.exit_code == 0, result.output
    records = read_run_log(log)
    started = [r for r in records if r["event"] == "unit_started"]
    assert [r["label"] for r in started] == [f"batch[{count}]: moveto ×{count}"]
    assert all(len(str(r.get("label", ""))) < 100 for r in records)
    finished = [r for r in records if r["event"] == "goal_finished"][-1]
    assert finished["status"] == "SUCCEEDED"

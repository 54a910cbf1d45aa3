"""What the command line prints is true (issue 40, items 5 and 6).

* A reader of the output that goes away (``erobs-bt validate X | head -1``) fails no verb:
  the verb exits with its own status (erobs_bt/stdio.py). The pipe's reader is gone before
  the verb writes (its read end closed), so every write fails, as after ``head`` exits.
* Counts take their number (``1 unit``, not ``1 units``; erobs_bt/wording.py).
* A preview's summary says its steps were planned, not completed.
* A beamline's pose registry is named as the beamline names it, not as the compiled copy in
  the cache directory.
* ``reset-sim``'s refusal says "refused" once (test_reset_simulation_ros.py runs it against
  the node; the web console's answer is checked in test_reset_simulation.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from erobs_bt.cli import main
from erobs_bt.orchestrator import State
from erobs_bt.wording import count, steps_done

from helpers import make_orchestrator, move, script_json

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "config" / "full_experiment.json"


def erobs_bt_into_a_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``erobs-bt ARGS`` with stdout a pipe whose reader has already gone."""
    read, write = os.pipe()
    os.close(read)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    try:
        return subprocess.run(
            [sys.executable, "-m", "erobs_bt", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
            timeout=120,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize(
    "args",
    [
        ("validate", str(SCRIPT)),
        ("validate", "--json", str(SCRIPT)),
        ("schema",),
        ("export", "--format", "btcpp", str(SCRIPT)),
        ("--help",),
    ],
    ids=["validate", "validate-json", "schema", "export", "help"],
)
def test_a_reader_that_goes_away_fails_no_verb(args: tuple[str, ...]) -> None:
    done = erobs_bt_into_a_closed_pipe(*args)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


def test_an_invalid_script_into_a_closed_pipe_still_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tasks": [{"task_type": "moveto", "target": 3}]}), encoding="utf-8")
    done = erobs_bt_into_a_closed_pipe("validate", "--json", str(bad))
    assert done.returncode == 2, done.stderr


def test_counts_take_their_number() -> None:
    assert [count(n, "unit") for n in (0, 1, 2)] == ["0 units", "1 unit", "2 units"]
    assert count(1, "cached solution") == "1 cached solution"
    assert steps_done(16, 16, dry_run=True) == "16/16 planned"
    assert steps_done(3, 16, dry_run=False) == "3/16 completed"


def test_the_engine_says_1_unit_and_1_step(tmp_path: Path) -> None:
    from erobs_bt.backends.scripted import ScriptedBackend
    from erobs_bt.goal import OrchestratorListener

    messages: list[str] = []

    class States(OrchestratorListener):
        def state_changed(self, state: State, message: str) -> None:
            if state is State.RUNNING:
                messages.append(message)

    orchestrator = make_orchestrator(ScriptedBackend(), listener=States())
    try:
        handle = orchestrator.submit(script_json([move("a")]), dry_run=False)
        assert handle.wait(60).success
    finally:
        orchestrator.shutdown()
    assert messages and messages[0] == f"{handle.goal_id}: 1 step, 1 unit", messages


def test_a_preview_says_planned_and_counts_one_unit(tmp_path: Path) -> None:
    script = tmp_path / "one.json"
    script.write_text(script_json([move("a")]), encoding="utf-8")
    done = CliRunner(env={"NO_COLOR": "1", "COLUMNS": "200"}).invoke(
        main,
        ["preview", str(script), "--speed", "20", "--no-mcap", "--log", str(tmp_path / "run.jsonl")],
    )
    assert done.exit_code == 0, done.output
    assert "one.json: 1 step, 1 unit, backend sim" in done.output, done.output
    assert "1/1 planned" in done.output, done.output
    assert "completed" not in done.output, done.output


def test_a_beamline_registry_is_named_as_the_beamline_names_it(tmp_path: Path) -> None:
    from world.test_beamline_config import write_workspace

    beamline = write_workspace(tmp_path / "ws")
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps({"start_gripper": "hande", "tasks": [{"task_type": "moveto", "target": "home_pose"}]}),
        encoding="utf-8",
    )
    own = (tmp_path / "ws" / "src" / "testbl" / "poses.yaml").resolve()
    text = CliRunner(env={"NO_COLOR": "1"}).invoke(main, ["validate", str(script), "--cell", str(beamline)])
    report = CliRunner().invoke(main, ["validate", str(script), "--cell", str(beamline), "--json"])
    assert text.exit_code == 0 and report.exit_code == 0, text.output + report.output
    line = next(line for line in text.stdout.splitlines() if line.startswith("pose registry:"))
    assert (
        line
        == f"pose registry: {own} (poses_file of the beamline {beamline.resolve()}; another with --poses)"
    )
    assert json.loads(report.stdout)["pose_registry"] == str(own)

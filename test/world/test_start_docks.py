"""What the docks hold when a goal starts, said once (issue u41, items 1-3).

* Item 2: ``validate --cell`` and the engine (``run``, the node) compute it by one function,
  :func:`erobs_bt.script.vocabulary.start_docks`; on EROBS's CMS beamline file they agree.
* Item 1: dock contents stated for the start (``--docks``, the node's ``docks``) that hold
  the start tool in a dock, or one tool in two docks, are one problem worded once
  (:func:`erobs_bt.script.vocabulary.dock_conflict`): ``validate`` and ``run`` exit 2 with
  ``configuration error: …``; the engine (the node's) refuses such a goal before anything
  moves and serves the next one.
* Item 3: ``run`` prints the docks it assumed before the first motion, in ``validate``'s words.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import require_samples

from erobs_bt.cli import main
from erobs_bt.goal import GoalStatus
from erobs_bt.script.vocabulary import dock_conflict, dock_contents_text, start_docks
from erobs_bt.session import EngineConfig, build_engine
from erobs_bt.settings import EngineSettings
from erobs_bt.world.beamline import resolve_cell_file, with_dock_contents

REPO = Path(__file__).resolve().parents[2]
POSES = REPO / "config" / "poses.yaml"
HANDE_MOUNTED = (
    "dock 1 holds the hande, but the script's start_gripper puts the hande on the arm: a tool is "
    "in one place; set --docks without it (the node: its docks parameter), e.g. --docks 1=,4=epick"
)
TWICE = (
    "docks 1 and 2 both hold the hande, but a tool is in one place; set --docks without it (the "
    "node: its docks parameter), e.g. --docks 1=hande,2="
)


def _script(start_gripper: str) -> str:
    return json.dumps(
        {"start_gripper": start_gripper, "tasks": [{"task_type": "moveto", "target": "tool_exchange_safe"}]}
    )


def _cms() -> tuple[Path, Path]:
    """EROBS's CMS beamline file and its script that starts with the Hand-E (skips without them)."""
    workspace = require_samples() / "workspace"
    beamline = workspace / "src" / "beambot" / "config" / "cms_beamline.yaml"
    script = workspace / "src" / "cms" / "tasks" / "hande_spincoat_to_hotplate.json"
    if not beamline.is_file() or not script.is_file():
        pytest.fail(f"EROBS's workspace is not at {workspace}")
    return beamline, script


def test_start_docks_are_the_configured_ones_less_the_start_tool() -> None:
    docks = {2: "pipettor", 1: None, 3: "hande", 4: "epick"}
    assert start_docks(docks, "hande") == {1: None, 2: "pipettor", 3: None, 4: "epick"}
    assert start_docks(docks, "2fg7") == {1: None, 2: "pipettor", 3: "hande", 4: "epick"}
    assert list(start_docks(docks, "none")) == [1, 2, 3, 4]


def test_validate_and_the_engine_start_a_cms_goal_with_the_same_docks() -> None:
    beamline, script = _cms()
    done = CliRunner().invoke(main, ["validate", str(script), "--cell", str(beamline), "--json"])
    assert done.exit_code == 0, done.output
    said = json.loads(done.stdout)["docks_at_start"]
    # The engine `run` builds for the same --cell; the orchestrator mounts the script's
    # start_gripper (prepare_goal) before anything moves.
    cell = resolve_cell_file(beamline)
    engine = build_engine(EngineConfig(cell=cell, settings=EngineSettings(speed=math.inf)))
    try:
        assert engine.backend.current_gripper() == "2fg7", "the one tool in no dock: the stack's guess"
        engine.backend.prepare_goal("hande")
        assumed = dock_contents_text(engine.backend.dock_contents() or {})
    finally:
        engine.close()
    # The 2fg7 has no dock in the file: it is not put into the free dock 1.
    assert said == assumed == "1: empty, 2: pipettor, 3: empty, 4: epick"


def test_run_says_the_docks_it_assumed_before_the_first_motion_in_validates_words(tmp_path: Path) -> None:
    beamline, script = _cms()
    runner = CliRunner()
    validated = runner.invoke(main, ["validate", str(script), "--cell", str(beamline)])
    assert validated.exit_code == 0, validated.output
    line = next(t for t in validated.stdout.splitlines() if t.startswith("docks at start: "))
    assert line == "docks at start: 1: empty, 2: pipettor, 3: empty, 4: epick"
    args = ["run", str(script), "--cell", str(beamline), "--speed", "1000", "--no-mcap"]
    done = runner.invoke(main, [*args, "--log", str(tmp_path / "run.jsonl")], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines.count(line) == 1, done.stdout
    first_unit = next(i for i, t in enumerate(lines) if "run 1/1" in t)
    assert lines.index(line) < first_unit, "said before the goal is submitted"


def test_a_dock_conflict_is_one_text() -> None:
    assert dock_conflict({1: "hande", 4: "epick"}, "hande") == HANDE_MOUNTED
    assert dock_conflict({1: "hande", 2: "hande"}) == TWICE
    assert dock_conflict({1: "hande", 2: "hande"}, "epick") == TWICE, "the docks first"
    assert dock_conflict({1: "hande", 4: "epick"}, "none") is None
    assert dock_conflict({1: None, 3: "pipettor"}, "hande") is None


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize(
    ("docks", "message"), [("1=hande,4=epick", HANDE_MOUNTED), ("1=hande,2=hande", TWICE)]
)
def test_validate_and_run_refuse_stated_docks_that_conflict(
    tmp_path: Path, command: str, docks: str, message: str
) -> None:
    script = tmp_path / "hande.json"
    script.write_text(_script("hande"))
    args = [command, str(script), "--poses", str(POSES), "--docks", docks]
    if command == "run":
        args += ["--speed", "1000", "--no-mcap", "--log", str(tmp_path / "run.jsonl")]
    done = CliRunner().invoke(main, args, env={"COLUMNS": "400"})
    assert done.exit_code == 2, done.output
    assert f"configuration error: {message}\n" in done.output, done.output
    assert "run 1/1" not in done.output, "nothing ran"


def test_validate_json_says_the_conflict_with_the_start_tool(tmp_path: Path) -> None:
    script = tmp_path / "hande.json"
    script.write_text(_script("hande"))
    args = ["validate", str(script), "--poses", str(POSES), "--docks", "1=hande,4=epick", "--json"]
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 2
    assert json.loads(done.stdout) == {"valid": False, "error": f"configuration error: {HANDE_MOUNTED}"}


@pytest.mark.parametrize("json_first", [False, True])
def test_validate_json_says_a_tool_in_two_docks_wherever_json_is_given(
    tmp_path: Path, json_first: bool
) -> None:
    """The docks' own conflict (one tool in two docks) is JSON too, whether ``--json`` comes
    before or after ``--docks`` (it used to be printed as text when ``--docks`` came first)."""
    script = tmp_path / "hande.json"
    script.write_text(_script("hande"))
    options = ["--docks", "1=epick,2=epick"]
    options = ["--json", *options] if json_first else [*options, "--json"]
    done = CliRunner().invoke(main, ["validate", str(script), "--poses", str(POSES), *options])
    assert done.exit_code == 2
    assert json.loads(done.stdout) == {
        "valid": False,
        "error": "configuration error: " + dock_conflict({1: "epick", 2: "epick"}, None),
    }


def test_the_engine_refuses_a_goal_whose_start_tool_the_stated_docks_hold() -> None:
    """The node's engine (the docks parameter → EngineConfig.docks): the goal is refused
    before anything moves, with 0 steps done, and the next goal runs."""
    stated = {1: "hande", 4: "epick"}
    cell = with_dock_contents(None, stated)
    config = EngineConfig(cell=cell, poses=POSES, docks=stated, settings=EngineSettings(speed=math.inf))
    engine = build_engine(config)
    try:
        before = engine.backend.joint_positions()
        result = engine.orchestrator.submit(_script("hande"), dry_run=False).wait(timeout=120)
        assert result.status is GoalStatus.ABORTED and result.completed_steps == 0
        assert result.error_message == f"EXECUTION_FAILED: {HANDE_MOUNTED}"
        assert engine.backend.joint_positions() == before, "nothing moved"
        assert dict(engine.backend.dock_contents() or {}) == {1: "hande", 2: None, 3: None, 4: "epick"}
        result = engine.orchestrator.submit(_script("none"), dry_run=False).wait(timeout=120)
        assert result.success, result.error_message
    finally:
        engine.close()


def test_the_nodes_docks_parameter_is_the_engines_stated_docks() -> None:
    pytest.importorskip("rclpy")
    from erobs_bt.ros.node.node import engine_config
    from erobs_bt.ros.params import NodeSettings

    assert engine_config(NodeSettings.from_values({"docks": "1=hande,4=epick"})).docks == {
        1: "hande",
        4: "epick",
    }
    assert engine_config(NodeSettings.from_values({})).docks is None


def test_the_node_refuses_such_a_goal_and_serves_the_next(ros_env: object, tmp_path: Path) -> None:
    """The node with ``docks:=1=hande,4=epick``: a Hand-E goal ends before anything moves with
    the one text, 0 steps done; the node serves the next goal."""
    from ros_fixtures import NodeProcess, ready_client

    node = NodeProcess(ros_env, {"docks": "1=hande,4=epick", "run_log_dir": str(tmp_path)})  # type: ignore[arg-type]
    node.start()
    try:
        with ready_client(node) as client:
            run = client.send(_script("hande"))
            assert run.accepted, run.rejection
            result = run.wait(120.0)
            assert run.status_name == "ABORTED" and result.completed_steps == 0
            assert result.error_code == "EXECUTION_FAILED"
            assert result.error_message == f"EXECUTION_FAILED: {HANDE_MOUNTED}"
            run = client.send(_script("none"))
            assert run.accepted, run.rejection
            run.wait(120.0)
            assert run.status_name == "SUCCEEDED", run.result
    finally:
        node.stop()

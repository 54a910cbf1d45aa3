"""What the docks hold when a goal starts, said once (issue u41, items 1-3).

* Item 2: ``validate --cell`` and the engine (``run``, the node) compute it by one function,
  :func:`erobs_bt.script.vocabulary.start_docks`; on EROBS's CMS beamline file they agree.
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
from erobs_bt.script.vocabulary import dock_contents_text, start_docks
from erobs_bt.session import EngineConfig, build_engine
from erobs_bt.settings import EngineSettings
from erobs_bt.world.beamline import resolve_cell_file


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

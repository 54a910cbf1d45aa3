"""One engine: its options one frozen object passed whole, its cell read once and handed on
as an object (issue 35: no layer copies the options field by field or reads the file again)."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import pytest

from erobs_bt.paths import config_file
from erobs_bt.ros.params import NodeSettings
from erobs_bt.session import EngineConfig, build_engine
from erobs_bt.settings import EngineSettings
from erobs_bt.timeouts import DEFAULT_TIMEOUTS

from helpers import move, script_json

ONE_MOVE = script_json([move("a")])


def test_settings_are_frozen_and_complete_a_partial_timeout_table() -> None:
    settings = EngineSettings(timeouts={"moveto": 7.0})
    assert dict(settings.timeouts) == {**DEFAULT_TIMEOUTS, "moveto": 7.0}
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.plan_ahead = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        settings.timeouts["moveto"] = 1.0  # type: ignore[index]
    with pytest.raises(ValueError, match=r"unknown task type\(s\) \['teleport'\]"):
        EngineSettings(timeouts={"teleport": 1.0})


def test_the_node_parameters_make_the_settings_once() -> None:
    node = NodeSettings.from_values({"plan_ahead": False, "timeout.moveto": 9.0, "speed": 3.0})
    settings = node.engine_settings()
    assert (settings.plan_ahead, settings.timeouts["moveto"], settings.speed) == (False, 9.0, 3.0)
    assert (settings.cache_capacity, settings.cache_max_bytes) == (node.cache_capacity, node.cache_max_bytes)


def test_the_settings_reach_the_goal_whole() -> None:
    settings = EngineSettings(timeouts={"moveto": 9.0}, plan_ahead=False)
    engine = build_engine(EngineConfig(backend="scripted", settings=settings))
    try:
        assert engine.orchestrator.settings is settings
        handle = engine.orchestrator.submit(ONE_MOVE, dry_run=False)
        assert handle.wait(10).success
        assert handle.context is not None and handle.context.settings is settings
        assert handle.context.timeouts["moveto"] == 9.0
    finally:
        engine.close()


def test_the_cell_is_read_once_and_handed_on(tmp_path: Path) -> None:
    cell_file = tmp_path / "cell.yaml"
    shutil.copyfile(config_file("cell.yaml"), cell_file)
    engine = build_engine(EngineConfig(cell=cell_file, settings=EngineSettings(speed=math.inf)))
    try:
        assert engine.cell.source == str(cell_file), "the cell keeps the file it came from"
        assert engine.backend.cell is engine.cell, "the backend got the engine's cell object"
        assert engine.orchestrator.parser.vocabulary is engine.cell.vocabulary, "the parser too"
    finally:
        engine.close()

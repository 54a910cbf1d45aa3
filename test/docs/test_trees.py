"""The example scripts in trees/ are documentation: each validates and runs on the simulated cell."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from erobs_bt.orchestrator import State
from erobs_bt.session import EngineConfig, build_engine
from erobs_bt.settings import EngineSettings

from helpers import wait_for

TREES = Path(__file__).resolve().parents[2] / "trees"


@pytest.fixture
def engine():
    engine = build_engine(EngineConfig(settings=EngineSettings(speed=math.inf)))
    yield engine
    engine.close()


def run(engine, text: str):
    handle = engine.orchestrator.submit(text, dry_run=False)
    while not handle.done():
        if engine.orchestrator.state is State.PAUSED:
            engine.orchestrator.resume()
        wait_for(lambda: handle.done() or engine.orchestrator.state is State.PAUSED, timeout=120)
    return handle.result


@pytest.mark.parametrize("path", sorted(TREES.glob("*.json")), ids=lambda p: p.name)
def test_every_example_runs_to_success(engine, path: Path) -> None:
    result = run(engine, path.read_text())
    assert result.success, result
    assert result.completed_steps == result.total_steps


def test_pick_and_place_carries_the_sample_and_puts_it_back(engine) -> None:
    document = json.loads((TREES / "pick_and_place.json").read_text())
    before = np.array(engine.backend.tool_state().parts["sample_on_hot_plate"].pose)[:3, 3]
    carried = {**document, "tasks": document["tasks"][:6]}
    assert run(engine, json.dumps(carried)).success
    held = engine.backend.tool_state().held
    assert held is not None and held.part.name == "sample_on_hot_plate", "vacuum_on picked the sample up"

    rest = {**document, "tasks": document["tasks"][6:]}
    assert run(engine, json.dumps(rest)).success
    state = engine.backend.tool_state()
    assert state.held is None, "vacuum_off released it"
    after = np.array(state.parts["sample_on_hot_plate"].pose)[:3, 3]
    assert np.linalg.norm(after - before) < 0.005, f"put back within 5 mm (moved {after - before})"

"""A tick visits only the active path: its cost does not grow with the script's size."""

from __future__ import annotations

import threading

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.script.parse import parse_script

from helpers import SUCK, make_orchestrator, move, script_json, wait_for


def visits_per_tick_with_last_unit_running(units: int) -> int:
    """Run a script of ``units`` units (alternating batch[1] and pipettor) with its last
    unit held, and return the number of behaviours a tick visits then."""
    tasks = [move("a") if i % 2 == 0 else SUCK for i in range(units)]
    text = script_json(tasks)
    assert len(parse_script(text).steps) == units
    backend = ScriptedBackend()
    gate = threading.Event()
    pipettor_units = units // 2
    backend.script("run_step", *([Outcome.ok()] * (pipettor_units - 1)), Outcome.ok(gate=gate))
    orchestrator = make_orchestrator(backend, safety_period=0.01)
    handle = orchestrator.submit(text, dry_run=False)
    try:
        wait_for(lambda: backend.count("run_step") == pipettor_units, timeout=60, message="last unit running")
        ticks = orchestrator.ticks
        wait_for(lambda: orchestrator.ticks >= ticks + 3, message="idle ticks")
        visits = orchestrator.last_tick_visits
    finally:
        gate.set()
    assert handle.wait(60).success
    return visits


def test_visited_behaviours_per_tick_are_the_same_for_10_and_1000_units() -> None:
    small = visits_per_tick_with_last_unit_running(10)
    large = visits_per_tick_with_last_unit_running(1000)
    assert small == large, f"10 units: {small} behaviours per tick, 1000 units: {large}"
    assert small <= 5, "root, unit sequence, decorator, leaf (and nothing else) are visited"

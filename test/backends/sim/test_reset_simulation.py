"""A resettable simulation (issue 23, item 5): ``Orchestrator.reset_simulation``, the stack's
reset, ``erobs-bt run --repeat`` and the web console's Run, in this process (no ROS).

Before: FULL_EXPERIMENT_RUN run twice on one engine failed the second time (``pipettor
SUCK: would overfill``): the simulated cell kept the pipettor's volume, the tools and the
arm as the first run left them. A reset puts the cell back as the cell config starts it;
it is refused, and changes nothing, while a goal runs or starts, and on a backend that is
not a simulation.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from erobs_bt.backends.scripted import ScriptedBackend
from erobs_bt.cli import main
from erobs_bt.orchestrator import GoalRejected, Orchestrator, OrchestratorListener, State
from erobs_bt.session import Engine, EngineConfig, build_engine
from erobs_bt.settings import EngineSettings
from erobs_bt.viz.web import LiveView

from helpers import LED, Recorder, make_orchestrator, move, script, script_json

SPEED = 1000.0
GOAL_TIMEOUT = 120.0


class Resumer(OrchestratorListener):
    """Resumes every pause (the samples' ``pause`` steps), as an operator pressing Resume."""

    def __init__(self) -> None:
        self.orchestrator: Orchestrator | None = None

    def state_changed(self, state: State, message: str) -> None:
        if state is State.PAUSED and self.orchestrator is not None:
            threading.Thread(target=self.orchestrator.resume, daemon=True).start()


class Finished(OrchestratorListener):
    """Keeps each goal's result as it ends (the web console's goals have no handle here)."""

    def __init__(self) -> None:
        self.results: dict[str, Any] = {}
        self._changed = threading.Condition()

    def finished(self, goal_id: str, result: Any) -> None:
        with self._changed:
            self.results[goal_id] = result
            self._changed.notify_all()

    def wait(self, goal_id: str, timeout: float) -> Any:
        with self._changed:
            assert self._changed.wait_for(lambda: goal_id in self.results, timeout), goal_id
            return self.results[goal_id]


@pytest.fixture
def engine(samples_dir: Path) -> Iterator[tuple[Engine, Recorder]]:
    recorder = Recorder()
    resumer = Resumer()
    built = build_engine(
        EngineConfig(
            backend="sim", poses=samples_dir / "cms_poses.yaml", settings=EngineSettings(speed=SPEED)
        ),
        listener=recorder,
    )
    built.orchestrator.listener.add(resumer)
    resumer.orchestrator = built.orchestrator
    yield built, recorder
    built.close()


def run(orchestrator: Orchestrator, text: str) -> Any:
    return orchestrator.submit(text, dry_run=False).wait(GOAL_TIMEOUT)


def cell_now(engine: Engine) -> tuple[Any, ...]:
    backend: Any = engine.backend
    tools = backend.tool_state()
    return (
        tuple(round(q, 9) for q in backend.joint_positions()),
        tools.gripper,
        dict(tools.docks),
        tools.held,
        tools.pipettor,
        dict(tools.parts),
    )


def test_full_experiment_run_twice_fails_without_a_reset_and_succeeds_with_one(
    engine: tuple[Engine, Recorder], samples_dir: Path
) -> None:
    built, recorder = engine
    orchestrator = built.orchestrator
    initial = cell_now(built)
    text = (samples_dir / "FULL_EXPERIMENT_RUN.json").read_text(encoding="utf-8")

    first = run(orchestrator, text)
    assert first.success, first.error_message
    assert cell_now(built) != initial  # the run changed the cell (pipettor volume, parts, arm)
    again = run(orchestrator, text)
    assert not again.success and "would overfill" in again.error_message, again.error_message

    reply = orchestrator.reset_simulation(by="the test")
    assert reply.success, reply.message
    assert reply.message.startswith("simulation reset: epick attached; docks 1: hande"), reply.message
    assert cell_now(built) == initial
    third = run(orchestrator, text)
    assert third.success, third.error_message
    resets = [r for r in recorder.events if r["event"] == "simulation_reset"]
    assert [(r["by"], r["previous_goal_id"]) for r in resets] == [("the test", "goal-2")]


def test_a_reset_is_refused_while_a_goal_runs_and_nothing_changes() -> None:
    built = build_engine(EngineConfig(backend="sim", settings=EngineSettings(speed=SPEED)))
    try:
        orchestrator = built.orchestrator
        first = run(orchestrator, script([move("sample_scan_1"), LED]))  # the cell is not as new
        assert first.success, first.error_message
        handle = orchestrator.submit(script([move("vial_scan")]), dry_run=False, paused=True)
        assert handle.context is not None
        before = cell_now(built)
        reply = orchestrator.reset_simulation()  # the goal is parked PAUSED before its first unit
        assert not reply.success
        assert reply.message == f"reset refused: busy: {handle.goal_id} is {orchestrator.state.value}"
        assert cell_now(built) == before
        assert orchestrator.resume().success
        assert handle.wait(GOAL_TIMEOUT).success
    finally:
        built.close()


def test_a_reset_holds_the_goals_place_and_a_held_place_refuses_it() -> None:
    backend = ScriptedBackend()
    orchestrator = make_orchestrator(backend)
    reservation = orchestrator.reserve()  # a goal admitted, not submitted yet
    reply = orchestrator.reset_simulation()
    assert (reply.success, reply.message) == (False, "reset refused: busy: a goal is starting")
    reservation.release()


def test_a_backend_that_is_not_simulated_refuses_the_reset_with_why() -> None:
    orchestrator = make_orchestrator(ScriptedBackend())
    reply = orchestrator.reset_simulation()
    assert not reply.success
    assert reply.message == "reset refused: the ScriptedBackend backend has no simulation to reset"
    assert orchestrator.state is State.IDLE


def test_a_stack_without_a_simulation_refuses_in_its_own_words(samples_dir: Path) -> None:
    from erobs_bt.backends.base import MotionError
    from erobs_bt.backends.sim.backend import SimBackend
    from erobs_bt.paths import config_file
    from erobs_bt.world.config import load_cell

    stack = SimBackend(load_cell(config_file("cell.yaml")), speed=SPEED)
    try:
        assert stack.resettable
        stack._reset = None  # what the ros2_control and moveit assemblies build
        with pytest.raises(MotionError, match="EXECUTION_FAILED: the simulated cell is not a simulation"):
            stack.reset_simulation()
    finally:
        stack.close()


def test_a_goal_arriving_during_a_reset_is_refused_with_why() -> None:
    class SlowReset(ScriptedBackend):
        def __init__(self) -> None:
            super().__init__()
            self.entered = threading.Event()
            self.release = threading.Event()

        def reset_simulation(self) -> str:
            self.entered.set()
            assert self.release.wait(10.0)
            return "as new"

    backend = SlowReset()
    orchestrator = make_orchestrator(backend)
    replies: list[Any] = []
    thread = threading.Thread(target=lambda: replies.append(orchestrator.reset_simulation()))
    thread.start()
    assert backend.entered.wait(10.0)
    with pytest.raises(GoalRejected, match="busy: the simulation is being reset"):
        orchestrator.reserve()
    backend.release.set()
    thread.join(10.0)
    assert replies[0].success and replies[0].message == "simulation reset: as new"
    orchestrator.reserve().release()  # the place is free again


def test_run_repeat_resets_the_simulated_cell_between_runs_of_a_tool_changing_script(
    samples_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "run.jsonl"
    result = CliRunner().invoke(
        main,
        [
            "run",
            str(samples_dir / "FULL_EXPERIMENT_RUN.json"),
            "--poses",
            str(samples_dir / "cms_poses.yaml"),
            "--speed",
            str(SPEED),
            "--auto-resume",
            "--repeat",
            "2",
            "--no-mcap",
            "--log",
            str(log),
        ],
    )
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    assert "simulation reset: epick attached" in output, output
    records = [json.loads(line) for line in log.read_text().splitlines()]
    finished = [r for r in records if r["event"] == "goal_finished"]
    assert [r["status"] for r in finished] == ["SUCCEEDED", "SUCCEEDED"], finished
    assert [r["by"] for r in records if r["event"] == "simulation_reset"] == ["erobs-bt run --repeat"]


def test_run_repeat_on_a_backend_that_is_not_simulated_says_what_is_not_restored(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[3]
    result = CliRunner().invoke(
        main,
        [
            "run",
            str(repo / "trees" / "pick_and_place.json"),
            "--backend",
            "scripted",
            "--repeat",
            "2",
            "--no-mcap",
            "--log",
            str(tmp_path / "run.jsonl"),
        ],
    )
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    assert (
        "reset refused: the ScriptedBackend backend has no simulation to reset: the tools, parts and "
        "pipettor stay as the run left them"
    ) in output, output
    assert "returning to the start state for the next repeat" in output


def test_the_consoles_run_starts_from_the_initial_cell_and_says_why_not(
    engine: tuple[Engine, Recorder], samples_dir: Path
) -> None:
    built, _ = engine
    finished = Finished()
    built.orchestrator.listener.add(finished)
    view = LiveView(built.orchestrator)
    text = (samples_dir / "FULL_EXPERIMENT_RUN.json").read_text(encoding="utf-8")
    for attempt in (1, 2):
        status, answer = view.submit(text, preview=False, reset=True, by="the test")
        assert status == 200, answer
        outcome = finished.wait(answer["goal_id"], GOAL_TIMEOUT)
        assert outcome.success, (attempt, outcome.error_message)
    reply = view.control("reset_simulation", by="the test")
    assert reply.success, reply.message
    # Not simulated: the Run is refused with the reason, nothing is submitted.
    scripted = make_orchestrator(ScriptedBackend())
    status, answer = LiveView(scripted).submit(script_json([move("a")]), preview=False, reset=True)
    assert (status, answer["message"]) == (
        409,
        "reset refused: the ScriptedBackend backend has no simulation to reset",
    )
    assert scripted.active_goal is None

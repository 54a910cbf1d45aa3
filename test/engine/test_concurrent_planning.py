"""A unit's moves planned side by side (:class:`erobs_bt.planning.base.RemotePlanner`).

The motion stack sends every move of a unit at once when its planner says requests may run
concurrently, each from the end the move before it is predicted to reach, and keeps a move's
plan only where it continues the sequence (within ``JOIN_TOLERANCE``). Here the embedded
planner of the simulated cell stands behind a thin adapter that declares itself concurrent
and predicts each end from its own plan (offset by ``miss`` to force wrong predictions):
the stack's joining, not the prediction, is what is under test. The MoveIt planner's own
prediction is exercised through the simulated move_group in test_moveit_e2e.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from erobs_bt.backends.base import ArmSegment, ErrorCode, MotionError
from erobs_bt.backends.sim.backend import SimBackend
from erobs_bt.backends.stack import MotionStack
from erobs_bt.backends.stack.speculation import JOIN_TOLERANCE
from erobs_bt.plan import ScriptParser
from erobs_bt.planning.base import RemotePlanner
from erobs_bt.script.model import MoveTo
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.tools import ToolState

POSES = Path(__file__).resolve().parents[2] / "config" / "poses.yaml"
SCRIPT = """{"start_gripper": "pipettor", "tasks": [
  {"task_type": "moveto", "target": "transport", "planning_type": "joint"},
  {"task_type": "moveto", "target": "dispense_above", "planning_type": "joint"},
  {"task_type": "moveto", "direction": "forward", "distance": 0.02, "planning_type": "cartesian"},
  {"task_type": "moveto", "direction": "backward", "distance": 0.02, "planning_type": "cartesian"},
  {"task_type": "moveto", "target": "transport", "planning_type": "joint"}
]}"""


class SideBySide:
    """The embedded planner presented as a :class:`RemotePlanner` (everything else is the
    planner's own). ``predict_end`` plans the move to learn its end (an oracle) and adds
    ``miss`` [rad] to joint 1; ``meet``: the first two ``plan_move`` calls wait for each other,
    so a stack that planned them one after the other would break the barrier; ``fail``: the
    index of a move whose plan fails (its prediction does not)."""

    def __init__(self, planner: Any, *, miss: float = 0.0, meet: bool = False, fail: int = -1) -> None:
        self._planner = planner
        self.fail = fail
        self.miss = miss
        self.concurrent_requests = 4
        self.plan_ahead_depth = 1
        self.calls: list[tuple[int, tuple[float, ...]]] = []
        self._lock = threading.Lock()
        self._meet = threading.Barrier(2, timeout=60.0) if meet else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._planner, name)

    def plan_move(
        self, step: MoveTo, start: Sequence[float], *, tools: ToolState, world: Any = None
    ) -> ArmSegment:
        with self._lock:
            self.calls.append((step.index, tuple(float(x) for x in start)))
            first_two = len(self.calls) <= 2
        if self._meet is not None and first_two:
            self._meet.wait()
        if step.index == self.fail:
            raise MotionError(ErrorCode.PLANNING_FAILED, f"{step.path}: refused by the test")
        segment: ArmSegment = self._planner.plan_move(step, start, tools=tools, world=world)
        return segment

    def predict_end(
        self, step: MoveTo, start: Sequence[float], *, tools: ToolState
    ) -> tuple[float, ...] | None:
        try:
            end = self._planner.plan_move(step, start, tools=tools).points[-1].positions
        except MotionError:
            return None
        return (float(end[0]) + self.miss, *(float(x) for x in end[1:]))


@pytest.fixture
def stack(cell: CellConfig) -> Iterator[MotionStack]:
    with SimBackend(cell, speed=float("inf"), gripper="pipettor") as made:
        yield made


def _arm_segments(solution: Any) -> list[ArmSegment]:
    return [s for s in solution.segments if isinstance(s, ArmSegment)]


def _assert_connected(solution: Any) -> None:
    q = np.asarray(solution.start_positions)
    for segment in _arm_segments(solution):
        first = np.asarray(segment.points[0].positions)
        assert np.max(np.abs(first - q)) <= JOIN_TOLERANCE, (segment.step_index, first, q)
        q = np.asarray(segment.points[-1].positions)


def test_the_adapter_is_a_concurrent_planner_and_the_embedded_planner_is_not(stack: MotionStack) -> None:
    assert not isinstance(stack._planner, RemotePlanner)
    assert isinstance(SideBySide(stack._planner), RemotePlanner)


def test_moves_planned_side_by_side_are_the_ordered_plan_and_one_connected_sequence(
    stack: MotionStack,
) -> None:
    steps = ScriptParser.from_files(cell=None, poses=POSES)(SCRIPT).steps
    ordered = stack.plan(steps).result(120)
    side = SideBySide(stack._planner, meet=True)
    stack._planner = side  # type: ignore[assignment]
    solution = stack.plan(steps).result(120)
    _assert_connected(solution)
    assert stack.speculation == {"joined": 5, "replanned": 0}
    assert [i for i, _ in side.calls] == [0, 1, 2, 3, 4], "each move planned once"
    for mine, theirs in zip(_arm_segments(solution), _arm_segments(ordered), strict=True):
        assert mine.step_index == theirs.step_index
        assert np.allclose(mine.points[-1].positions, theirs.points[-1].positions, atol=1e-9)


def test_a_missed_prediction_plans_that_move_again_from_the_real_end(stack: MotionStack) -> None:
    steps = ScriptParser.from_files(cell=None, poses=POSES)(SCRIPT).steps
    side = SideBySide(stack._planner, miss=10 * JOIN_TOLERANCE)
    stack._planner = side  # type: ignore[assignment]
    solution = stack.plan(steps).result(120)
    _assert_connected(solution)
    assert stack.speculation == {"joined": 1, "replanned": 4}, "only the first move starts where predicted"
    assert [i for i, _ in side.calls].count(2) == 2, "the line was planned from the guess, then again"


def test_the_first_failing_move_is_the_units_error_though_later_moves_were_planned(
    stack: MotionStack,
) -> None:
    steps = ScriptParser.from_files(cell=None, poses=POSES)(SCRIPT).steps
    side = SideBySide(stack._planner, fail=2)
    stack._planner = side  # type: ignore[assignment]
    with pytest.raises(MotionError) as failed:
        stack.plan(steps).result(120)
    assert failed.value.detail == "tasks[2]: refused by the test", failed.value.detail
    assert {3, 4} <= {i for i, _ in side.calls}, "the moves after it were sent side by side"


def test_the_full_experiment_two_units_ahead_with_moves_side_by_side_plans_what_it_would_in_order() -> None:
    """The full example on the simulated cell, its planner presented as a remote one (moves side
    by side, two units ahead), against the same run without plan-ahead: the same result and the
    same solutions unit by unit; every plan-ahead is used, none discarded, and units after
    short ones were planned two units ahead (``after unit …'s plan``)."""
    from test_plan_ahead import FULL_EXAMPLE, AutoResume

    from erobs_bt.session import EngineConfig, build_engine
    from erobs_bt.settings import EngineSettings

    outcome: dict[bool, Any] = {}
    for remote in (False, True):
        recorder = AutoResume()
        engine = build_engine(
            EngineConfig(poses=POSES, settings=EngineSettings(speed=float("inf"), plan_ahead=remote)),
            listener=recorder,
        )
        recorder.orchestrator = engine.orchestrator
        try:
            stack = engine.backend
            assert isinstance(stack, MotionStack)
            if remote:
                side = SideBySide(stack._planner)
                side.plan_ahead_depth = 2
                stack._planner = side  # type: ignore[assignment]
            handle = engine.orchestrator.submit(FULL_EXAMPLE.read_text(), dry_run=False)
            result = handle.wait(600)
            assert result.success, (remote, result)
            solutions = {i: s.to_bytes() for i, s in handle.context.solutions.items()}
            events = [e for e in recorder.events if e["event"] == "plan_ahead"]
            outcome[remote] = (result.completed_steps, solutions, events, dict(stack.speculation))
        finally:
            engine.close()
    (off_steps, off_solutions, off_events, _), (on_steps, on_solutions, on_events, speculation) = (
        outcome[False],
        outcome[True],
    )
    assert off_events == [] and on_steps == off_steps
    assert on_solutions == off_solutions, "planned side by side and ahead, the same plans"
    assert {e["status"] for e in on_events} == {"started", "used"}, on_events
    chained = [e["unit"] for e in on_events if e["status"] == "started" and "'s plan" in e.get("detail", "")]
    assert chained, on_events
    assert speculation["replanned"] == 0 and speculation["joined"] > 0, speculation

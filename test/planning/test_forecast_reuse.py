"""Tool exchanges play the motions their forecast planned (issue 39), and those are the
motions the exchange would have planned when it ran.

The simulated cell (the real motion stack, planner and exchange bookkeeping) at
``speed=inf``. Each test runs the same exchanges on two fresh cells: one after a forecast
(``plan_across``, as plan-ahead across the exchanges does), one without; the arm segments
each plays are recorded where the stack plays them (``MotionStack._play``, wrapped on the
instance: an instrument, the segments are played as before) and compared point by point
(positions, velocities, accelerations, time from start).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from erobs_bt.backends.base import ArmSegment
from erobs_bt.backends.sim.backend import SimBackend
from erobs_bt.backends.stack import MotionStack
from erobs_bt.paths import config_file
from erobs_bt.plan import ScriptParser, plan_goal
from erobs_bt.script.model import MoveTo, Step, ToolExchange
from erobs_bt.world.config import load_cell

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "config" / "full_experiment.json"
POSES = REPO / "config" / "poses.yaml"


def _steps() -> tuple[Step, list[Step], Step]:
    """The full example's move to ``tool_exchange_safe``, its first two exchanges after it
    (dock the ePick, load the pipettor) and the move after them. From there every motion
    of the exchanges is a straight line (no OMPL, whose seeded RNG is process-wide: two
    OMPL plans of one motion differ, planned ahead or not)."""
    steps = plan_goal(
        SCRIPT.read_bytes(), parser=ScriptParser.from_files(cell=None, poses=POSES), enable_batching=True
    ).script.steps
    first = next(i for i, s in enumerate(steps) if isinstance(s, ToolExchange))
    exchanges = list(steps[first : first + 2])
    assert [(s.operation, s.gripper) for s in exchanges if isinstance(s, ToolExchange)] == [
        ("dock", "epick"),
        ("load", "pipettor"),
    ]
    before, after = steps[first - 1], steps[first + 2]
    assert isinstance(before, MoveTo) and before.target == "tool_exchange_safe"
    assert isinstance(after, MoveTo)
    return before, exchanges, after


def _played(backend: MotionStack) -> list[ArmSegment]:
    """Records every arm segment ``backend`` plays from now on."""
    played: list[ArmSegment] = []
    play = backend._play

    def recording(segments: Sequence[object], dispatch: object) -> None:
        played.extend(s for s in segments if isinstance(s, ArmSegment))
        play(segments, dispatch)  # type: ignore[arg-type]

    backend._play = recording  # type: ignore[method-assign]
    return played


def _run(
    before: Step, exchanges: Sequence[Step], after: Step, *, forecast: float | None
) -> tuple[list[ArmSegment], int]:
    """Run ``before`` then ``exchanges`` on a fresh cell, after a forecast of the exchanges
    from the live state with ``forecast`` [rad] added to joint 4 (``None``: no forecast):
    the arm segments the exchanges played and how many came from the forecast."""
    cell = load_cell(config_file("cell.yaml"))
    with SimBackend(cell, speed=math.inf) as backend:
        assert isinstance(backend, MotionStack)
        backend.run_step(before).result(120)
        live = backend.joint_positions()
        assert live is not None
        if forecast is not None:
            a, b, c, d, e, f = (float(x) for x in live)
            backend.plan_across(exchanges, [after], start=(a, b, c, d + forecast, e, f)).result(120)
        played = _played(backend)
        for step in exchanges:
            backend.run_step(step).result(120)
        return played, backend.forecast_plans_used


def test_exchanges_play_their_forecast_motions_identical_to_plans_made_when_they_run() -> None:
    before, exchanges, after = _steps()
    fresh, none_used = _run(before, exchanges, after, forecast=None)
    again, _ = _run(before, exchanges, after, forecast=None)
    assert again == fresh, "planned at the step, the exchanges' motions are the same every time"
    reused, used = _run(before, exchanges, after, forecast=0.0)
    assert none_used == 0
    assert len(fresh) >= 4
    assert used == len(fresh), "every motion of both exchanges came from the forecast"
    assert reused == fresh  # same joints, velocities, accelerations and timing, point by point


def test_a_forecast_from_elsewhere_is_not_played_from_there() -> None:
    before, exchanges, after = _steps()
    fresh, _ = _run(before, exchanges, after, forecast=None)
    # The forecast starts 0.02 rad from where the arm will be (beyond the start tolerance,
    # 0.01 rad): its first motion is not played.
    reused, used = _run(before, exchanges, after, forecast=0.02)
    assert used < len(fresh), "the first motion is planned from the live state, not the forecast's"
    assert reused == fresh


def test_a_forecast_from_where_a_real_arm_stops_is_played() -> None:
    """On hardware the arm stops microradians off the last point the forecast planned from:
    within the start tolerance the forecast's motions are played (a plan-ahead's rule), the
    first from the forecast's own start, the others identical to the ones planned at the step."""
    before, exchanges, after = _steps()
    fresh, _ = _run(before, exchanges, after, forecast=None)
    reused, used = _run(before, exchanges, after, forecast=0.001)
    assert used == len(fresh) == len(reused), "every motion of both exchanges came from the forecast"
    assert reused[0].points[0].positions[3] - fresh[0].points[0].positions[3] == pytest.approx(0.001)
    assert reused[0].points[-1].positions == pytest.approx(fresh[0].points[-1].positions, abs=1e-9)
    assert reused[1:] == fresh[1:]

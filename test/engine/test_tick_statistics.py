"""A goal's tick timing (py_trees_ros ``Statistics``): counts, durations and intervals with
their running means and population variances, on injected clocks; and the orchestrator
times every tick of a goal."""

from __future__ import annotations

import itertools
import statistics

import pytest

from erobs_bt.goal import TickStatistics, TickTimes


def test_durations_and_intervals_with_their_means_and_variances() -> None:
    now = [0.0]
    ticks = TickStatistics(wall=lambda: 1000.0 + now[0], clock=lambda: now[0])
    assert ticks.times == TickTimes()
    starts, durations = [0.0, 0.5, 0.75, 2.0], [0.01, 0.03, 0.02, 0.06]
    for start, duration in zip(starts, durations, strict=True):
        now[0] = start
        ticks.started()
        now[0] = start + duration
        ticks.ended()
    times = ticks.times
    intervals = [b - a for a, b in itertools.pairwise(starts)]
    assert times.count == 4 and times.stamp == 1002.0
    assert times.duration == pytest.approx(0.06) and times.interval == pytest.approx(1.25)
    assert times.duration_mean == pytest.approx(statistics.fmean(durations))
    assert times.duration_variance == pytest.approx(statistics.pvariance(durations))
    assert times.interval_mean == pytest.approx(statistics.fmean(intervals))
    assert times.interval_variance == pytest.approx(statistics.pvariance(intervals))


def test_the_orchestrator_times_each_goal_afresh() -> None:
    from erobs_bt.backends.scripted import ScriptedBackend

    from helpers import make_orchestrator, move, script_json

    orchestrator = make_orchestrator(ScriptedBackend())
    try:
        for _ in range(2):
            before = orchestrator.ticks
            handle = orchestrator.submit(script_json([move("a"), move("b")]), dry_run=False)
            result = handle.wait(60.0)
            assert result.success, result
            times = orchestrator.tick_statistics.times
            assert times.count == orchestrator.ticks - before >= 1, "this goal's ticks, all of them"
            assert times.stamp > 0.0 and times.duration_mean > 0.0
    finally:
        orchestrator.shutdown()

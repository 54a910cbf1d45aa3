"""Issue 39's measure for the ``moveit`` backend, short enough for ``make bench``.

``config/full_experiment.json`` with ``backend: moveit`` and plan-ahead on, against
``erobs_bt_sim_move_group`` (one request at a time, as move_group serves them) with
``--plan-latency 0`` and ``--plan-latency 2``, speed 1: the overhead is the 2 s run's goal wall
time ÷ the 0 s run's − 1 (target ≤ 2 %), with where the extra seconds go (the waits at unit
starts, the planning inside tool exchanges and vision steps, the rest); the same with
``planning: local`` (the backend plans in its own process, move_group executes); beside it the embedded
cell's row (``backend: sim``, speed 1: goal wall time ÷ the motion played − 1, target ≤ 0.2 %), so
that one table gives every backend's overhead beside its target. About 6 minutes.
``bench_moveit.py`` has the longer study (0, 0.5 and 2 s, plan-ahead off and on, per unit).
"""

from __future__ import annotations

from bench_moveit import moveit_runs, one_run, overhead_section


def report() -> str:
    """The section of BENCHMARKS.md."""
    runs = moveit_runs((0.0, 2.0), (True,))
    local = moveit_runs((2.0,), (True,), planning="local")[(2.0, True)]
    runs[(None, True)] = one_run(True, None)  # the embedded cell, plan-ahead on
    return "## Issue 39: the robot's wait over the whole goal\n" + overhead_section(runs, local)


if __name__ == "__main__":
    print(report())

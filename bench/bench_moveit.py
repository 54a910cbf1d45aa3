"""The ``moveit`` backend: how long the robot waits for MoveIt at each motion unit's start.

``config/full_experiment.json`` (with ``config/poses.yaml``) runs through the engine with
``backend: moveit`` against ``erobs_bt_sim_move_group`` (a separate process, speed 1 = real
time) whose ``--plan-latency`` adds 0, 0.5 or 2 s to every plan (standing in for MoveIt's
seconds; EROBS measures ~2.7 s per MTC batch), with ``plan_ahead`` off and on, in one run
side by side. Pause steps are resumed at once (operator time excluded).

The wait of a motion unit is the wall time from its start (its boundary let it through) to
the dispatch of its trajectory, from the engine's own run-log records (``plan_started`` →
``execute_started``). Unit 1 is apart: nothing executes before it, so its plan can never be
hidden. The share is the waits of the other motion units over the goal's wall time (the arm
moves for nearly all of it at speed 1; the waits inside tool exchange and vision steps, which
plan their own motions when they run, are part of the wall time, not of the waits).

Run alone: ``scripts/env.sh .venv/bin/python bench/bench_moveit.py``.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_ros import REPO, ros_domain, ros_process
from common import markdown_table

SCRIPT = REPO / "config" / "full_experiment.json"
POSES = REPO / "config" / "poses.yaml"
LATENCIES = (0.0, 0.5, 2.0)
SPEED = 1.0


@dataclass(frozen=True)
class Run:
    """One run of the full example."""

    waits: dict[int, float]
    duration: float
    used: int
    discarded: int


def one_run(plan_ahead: bool, moveit_yaml: Path) -> Run:
    """The full example once with ``backend: moveit``; the waits from its records."""
    from erobs_bt.orchestrator import OrchestratorListener, State
    from erobs_bt.session import EngineConfig, build_engine

    class Probe(OrchestratorListener):
        def __init__(self) -> None:
            self.engine: Any = None
            self.records: list[Mapping[str, Any]] = []
            self.lock = threading.Lock()

        def state_changed(self, state: State, message: str) -> None:
            if state is State.PAUSED and self.engine is not None:
                self.engine.orchestrator.resume()

        def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
            with self.lock:
                self.records.append({**record, "mono": time.monotonic()})

    probe = Probe()
    engine = build_engine(
        EngineConfig(backend="moveit", moveit=moveit_yaml, poses=POSES, plan_ahead=plan_ahead),
        listener=probe,
    )
    probe.engine = engine
    try:
        began = time.monotonic()
        result = engine.orchestrator.submit(SCRIPT.read_text(), dry_run=False).wait(3600)
        duration = time.monotonic() - began
        if not result.success:
            raise RuntimeError(f"full example failed (plan_ahead={plan_ahead}): {result.error_message}")
    finally:
        engine.close()
    with probe.lock:
        records = list(probe.records)
    plan_start: dict[int, float] = {}
    waits: dict[int, float] = {}
    used = discarded = 0
    for record in records:
        event = record["event"]
        if event == "plan_started":
            plan_start[record["unit"]] = record["mono"]
        elif event == "execute_started" and record["unit"] in plan_start:
            waits.setdefault(record["unit"], record["mono"] - plan_start[record["unit"]])
        elif event == "plan_ahead":
            used += record["status"] == "used"
            discarded += record["status"] in ("discarded", "dropped")
    return Run(waits, duration, used, discarded)


def report() -> str:
    """The ``moveit`` section of BENCHMARKS.md."""
    rows = []
    shares: dict[tuple[float, bool], float] = {}
    with tempfile.TemporaryDirectory(prefix="erobs_bt-bench-moveit-") as folder:
        moveit_yaml = Path(folder) / "moveit.yaml"
        moveit_yaml.write_text("tools: simulated\n")
        for latency in LATENCIES:
            with ros_domain():
                command = [
                    sys.executable,
                    "-m",
                    "erobs_bt.ros.sim_move_group",
                    "--speed",
                    str(SPEED),
                    "--plan-latency",
                    str(latency),
                ]
                with ros_process(command, "erobs_bt_sim_move_group ready"):
                    for plan_ahead in (False, True):
                        run = one_run(plan_ahead, moveit_yaml)
                        first = min(run.waits)
                        gaps = sum(w for u, w in run.waits.items() if u != first)
                        share = gaps / run.duration
                        shares[(latency, plan_ahead)] = share
                        rows.append(
                            [
                                f"{latency:g} s",
                                "on" if plan_ahead else "off",
                                f"{gaps:.2f} s",
                                f"{share * 100:.2f} %",
                                f"{run.waits[first]:.2f} s",
                                f"{run.used} / {run.discarded}",
                                f"{run.duration:.1f} s",
                            ]
                        )
    table = markdown_table(
        [
            "plan latency",
            "plan_ahead",
            "robot waiting at the motion units' starts (units 2…)",
            "of the goal's wall time",
            "unit 1 (nothing to hide behind)",
            "plan-aheads used / discarded",
            "goal (wall)",
        ],
        rows,
    )
    target = shares.get((2.0, True))
    verdict = (
        f"With 2 s plans and plan-ahead the robot waits {target * 100:.2f} % of the run "
        + ("(target ≤ 2 %: met)." if target is not None and target <= 0.02 else "(target ≤ 2 %: not met).")
        if target is not None
        else ""
    )
    return (
        "## MoveIt backend: the robot's wait for move_group\n\n"
        "`config/full_experiment.json` with `backend: moveit` against `erobs_bt_sim_move_group` "
        f"(speed {SPEED:g}, a separate process, `--plan-latency` added to every plan), `plan_ahead` "
        "off and on, one run each, side by side in one bench run; pause steps resumed at once. "
        "The wait of a motion unit is the wall time from its start to the dispatch of its "
        "trajectory (run-log records `plan_started` → `execute_started`); unit 1 is apart. "
        "Plan-ahead plans across the tool exchanges (the exchange forecast with the same "
        "planner) and never across the vision step, whose following unit plans at its start.\n\n"
        f"{table}\n\n{verdict}\n"
    )


if __name__ == "__main__":
    print(report())

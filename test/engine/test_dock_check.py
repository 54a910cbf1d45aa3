"""A goal's tool exchanges are checked against the live tool changer before anything moves
(issue 27, item 5: docking into a dock that already holds a tool failed only mid-run)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from erobs_bt.script.model import ToolExchange
from erobs_bt.session import EngineConfig, build_engine
from erobs_bt.settings import EngineSettings

POSES = Path(__file__).resolve().parents[2] / "config" / "poses.yaml"


def _exchange(index: int, operation: str, gripper: str, dock: int) -> ToolExchange:
    spec = {"task_type": "tool_exchange", "operation": operation, "gripper": gripper, "dock_number": dock}
    return ToolExchange(
        index=index, path=f"tasks[{index}]", spec=spec, operation=operation, gripper=gripper, dock_number=dock
    )


def test_dock_problem_follows_the_docks_through_the_script() -> None:
    from erobs_bt.script.parse import dock_problem

    docks = {1: "hande", 2: "2fg7", 3: "pipettor", 4: None}
    fine = [
        _exchange(0, "dock", "epick", 4),
        _exchange(1, "load", "pipettor", 3),
        _exchange(2, "dock", "pipettor", 3),
    ]
    assert dock_problem(fine, docks) == ""
    assert dock_problem([_exchange(0, "dock", "epick", 3)], docks) == (
        "tasks[0].dock_number: dock 3 already holds the pipettor when the goal starts, so the epick "
        "cannot be docked there (empty docks: 4)"
    )
    assert dock_problem([_exchange(0, "dock", "epick", 4), _exchange(1, "load", "hande", 2)], docks) == (
        "tasks[1].dock_number: dock 2 holds the 2fg7 when the goal starts, not the hande"
    )


def test_docking_into_a_full_dock_fails_before_the_arm_moves() -> None:
    engine = build_engine(EngineConfig(poses=POSES, settings=EngineSettings(speed=math.inf)))
    try:
        start = engine.backend.joint_positions()
        script = {
            "start_gripper": "epick",
            "tasks": [
                {"task_type": "moveto", "target": "tool_exchange_safe"},
                {
                    "task_type": "tool_exchange",
                    "operation": "dock",
                    "gripper": "epick",
                    "dock_number": 3,
                    "approach_pose": "dock_approach",
                },
            ],
        }
        result = engine.orchestrator.submit(json.dumps(script), dry_run=False).wait(timeout=60)
        assert not result.success
        assert result.error_message == (
            "EXECUTION_FAILED: tasks[1].dock_number: dock 3 already holds the pipettor when the goal "
            "starts, so the epick cannot be docked there (empty docks: 4)"
        )
        assert result.completed_steps == 0
        assert engine.backend.joint_positions() == start, "nothing moved"
        assert engine.backend.current_gripper() == "epick"
    finally:
        engine.close()

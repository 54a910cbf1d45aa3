"""The console's pure pieces: step detail of every step kind, the trajectory JSON handed to
the 3D view, and locating the arm on a unit's planned motion (progress inside a batch)."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from erobs_bt.backends.base import ArmSegment, Solution, ToolSegment, TrajectoryPoint
from erobs_bt.batching import group_into_batches
from erobs_bt.plan import ScriptParser
from erobs_bt.viz.model import MotionTimeline, locate, trajectory_json, unit_steps

from helpers import SUCK, move, script_json

ZERO = (0.0,) * 6


def _segment(step: int, start: float, end: float, duration: float, samples: int = 11) -> ArmSegment:
    """A straight move of joint 1 from ``start`` to ``end`` [rad] in ``duration`` [s]."""
    points = tuple(
        TrajectoryPoint(
            (start + (end - start) * i / (samples - 1), 0.0, 0.0, 0.0, 0.0, 0.0),
            ZERO,
            ZERO,
            duration * i / (samples - 1),
        )
        for i in range(samples)
    )
    return ArmSegment(step, points)


def _there_and_back() -> Solution:
    # steps 1-3: 0 → 1 rad (2 s), vacuum_on, 1 → 0 rad (2 s): the path passes every place twice
    return Solution(
        (_segment(0, 0.0, 1.0, 2.0), ToolSegment(1, "epick", "vacuum_on"), _segment(2, 1.0, 0.0, 2.0)), "m"
    )


def test_the_step_detail_resolves_every_kind_of_step() -> None:
    text = script_json(
        [
            move("a"),
            {"task_type": "moveto", "direction": "up", "distance": 0.05, "planning_type": "cartesian"},
            {"task_type": "moveto", "cartesian_target": [0.4, 0.1, 0.3, 0.0, 180.0, 0.0]},
            {"task_type": "moveto", "target": "moveit_home"},
            {"task_type": "end_effector", "end_effector_action": "vacuum_on"},
            {"task_type": "tool_exchange", "operation": "dock", "gripper": "epick", "dock_number": 1},
            {"task_type": "pause"},
        ],
        start_gripper="epick",
    )
    script = ScriptParser.default()(text)
    units = group_into_batches(script.steps, enabled=True)
    steps = [step for rows in unit_steps(script, units).values() for step in rows]
    assert [s["step"] for s in steps] == list(range(1, 8))
    pose, up, cartesian, named, vacuum, dock, pause = steps
    assert pose["target"] == "a" and pose["joints"]["deg"][0] == pytest.approx(10.0)
    assert pose["joints"]["rad"][0] == pytest.approx(math.radians(10.0), abs=1e-5)
    assert pose["summary"] == "moveto a (auto) [10.0, -90.0, -90.0, -90.0, 90.0, 0.0]°"
    assert up["distance_m"] == 0.05 and up["direction"] == "up" and up["planning_type"] == "cartesian"
    assert up["summary"] == "moveto up 0.050 m (cartesian)"
    assert cartesian["cartesian_target"][:3] == [0.4, 0.1, 0.3] and cartesian["frame_id"] == "base_link"
    assert "rpy (0.0, 180.0, 0.0)°" in cartesian["summary"]
    assert named["named_state"] and named["summary"] == "moveto moveit_home (auto), named state"
    assert vacuum["summary"] == "end_effector vacuum_on (epick)" and vacuum["tool"] == {
        "gripper": "epick",
        "state": "vacuum_on",
    }
    assert dock["tool"] == {"gripper": "none", "state": ""}, "docking leaves no tool attached"
    assert pause["summary"] == "pause" and pause["tool"]["gripper"] == "none"
    json.dumps(steps)  # JSON-able as it is


def test_the_trajectory_json_lays_segments_end_to_end_and_thins_samples() -> None:
    trajectory = trajectory_json(_there_and_back(), unit=3, sample_period=0.5)
    assert trajectory["unit"] == 3 and trajectory["duration"] == 4.0
    assert trajectory["joint_names"][0] == "shoulder_pan_joint"
    times = trajectory["time_from_start"]
    assert all(a < b for a, b in itertools.pairwise(times)) and (times[0], times[-1]) == (0.0, 4.0)
    # 0, 0.6, 1.2, 1.8 and 2.0 s of each 2 s segment (samples 0.2 s apart, kept >= 0.5 s
    # apart, ends kept); the junction at 2.0 s is listed once.
    assert len(times) == len(trajectory["positions"]) == 5 + 4
    arm1, tool, arm2 = trajectory["segments"]
    assert (arm1["step"], arm1["start"], arm1["end"]) == (1, 0.0, 2.0)
    assert tool == {
        "step": 2,
        "kind": "tool",
        "start": 2.0,
        "end": 2.0,
        "gripper": "epick",
        "command": "vacuum_on",
    }
    assert (arm2["start"], arm2["end"]) == (2.0, 4.0) and arm2["first_point"] == arm1["last_point"]
    assert (
        trajectory["positions"][arm2["last_point"]][0] == 0.0
        and trajectory["positions"][arm1["last_point"]][0] == 1.0
    )


def test_locate_reads_a_path_that_comes_back_in_order() -> None:
    timeline = MotionTimeline.of(_there_and_back(), unit_steps=(1, 2, 3))
    start = locate(timeline, (0.0, *ZERO[1:]), elapsed=0.0)
    assert (start["step"], start["step_of_unit"], start["steps"], start["tau"]) == (1, 1, 3, 0.0)
    out = locate(timeline, (0.5, *ZERO[1:]), elapsed=1.0, previous=start["tau"])
    assert out["step"] == 1 and out["tau"] == pytest.approx(1.0) and out["fraction"] == pytest.approx(0.25)
    top = locate(timeline, (1.0, *ZERO[1:]), elapsed=2.0, previous=out["tau"])
    assert top["tau"] == pytest.approx(2.0) and top["step"] == 2, "at rest between the moves: the tool step"
    back = locate(timeline, (0.5, *ZERO[1:]), elapsed=3.0, previous=top["tau"])
    assert back["step"] == 3 and back["tau"] == pytest.approx(3.0), "the same place, the second time"
    assert back["eta"] == pytest.approx(1.0)
    never_back = locate(timeline, (0.5, *ZERO[1:]), elapsed=3.1, previous=back["tau"] + 0.2)
    assert never_back["tau"] >= back["tau"], "progress never goes back"


def test_locate_falls_back_to_the_clock_off_the_path_and_scales_the_eta() -> None:
    timeline = MotionTimeline.of(_there_and_back())
    off = locate(timeline, (0.5, 0.3, 0.0, 0.0, 0.0, 0.0), elapsed=1.5)
    assert off["source"] == "clock" and off["tau"] == pytest.approx(1.5)
    unknown = locate(timeline, None, elapsed=10.0)
    assert unknown["tau"] == 4.0 and unknown["fraction"] == 1.0 and unknown["eta"] == 0.0
    slow = locate(timeline, (0.5, *ZERO[1:]), elapsed=2.0)  # half the planned speed
    assert slow["source"] == "joint_states" and slow["eta"] == pytest.approx(6.0), "3 s planned × 2"


def test_a_unit_without_motion_steps_is_still_counted() -> None:
    script = ScriptParser.default()(script_json([move("a"), SUCK]))
    steps = unit_steps(script, group_into_batches(script.steps, enabled=True))
    assert list(steps) == [1, 2]
    assert steps[2][0]["summary"] == "pipettor SUCK 50 %", "volume_pct 0.5 is half the stroke"

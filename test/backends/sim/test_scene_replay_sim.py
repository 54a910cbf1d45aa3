"""The replay scene check on the simulated cell: the embedded planner's real collision check.

The orchestration rules (refused → planned afresh once, stale plan-aheads) are counted with
the scripted backend in test_replay_scene_check.py; here the check itself: the collision
model's conservative advancement (its bound and its agreement with the per-sample check of
planning) and goals on the in-process simulated cell whose scene changes between runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from erobs_bt.backends.base import ArmSegment
from erobs_bt.backends.stack import MotionStack
from erobs_bt.session import Engine, EngineConfig, build_engine
from erobs_bt.settings import EngineSettings
from erobs_bt.world.cell import Obstacle, Pose, Shape

from helpers import Recorder

REPO = Path(__file__).resolve().parents[3]
POSES = REPO / "config" / "poses.yaml"
# The first unit of config/full_experiment.json: one batch of ten steps (a part picked up
# with the vacuum on the way), so the goal is cache eligible.
BATCH = json.dumps(
    {
        "start_gripper": "epick",
        "tasks": json.loads((REPO / "config" / "full_experiment.json").read_text())["tasks"][:10],
    }
)
AWAY = Obstacle("crate", Shape("box", (0.2, 0.2, 0.2)), "base_link", Pose((-0.8, -0.8, 0.3)))


@pytest.fixture
def engine() -> Iterator[tuple[Engine, Recorder]]:
    recorder = Recorder()
    engine = build_engine(
        EngineConfig(
            poses=POSES, settings=EngineSettings(speed=math.inf, replay_scene_check=True, plan_ahead=False)
        ),
        listener=recorder,
    )
    try:
        yield engine, recorder
    finally:
        engine.close()


def stack(engine: Engine) -> MotionStack:
    backend = engine.backend
    assert isinstance(backend, MotionStack)
    return backend


def run_again(engine: Engine, start: tuple[float, ...]) -> object:
    """Put the arm back where the first run started (and the part back) and run BATCH."""
    backend = stack(engine)
    backend.arm.set_joint_positions(start)  # type: ignore[attr-defined]
    result = engine.orchestrator.submit(BATCH, dry_run=False).wait(60)
    return result


def box_across(engine: Engine) -> Obstacle:
    """A small box at the flange half-way through the cached trajectory."""
    solution = next(iter(engine.orchestrator.cache._entries.values())).solution
    arm = [s for s in solution.segments if isinstance(s, ArmSegment)]
    segment = max(arm, key=lambda s: len(s.points))
    q = segment.points[len(segment.points) // 2].positions
    T = stack(engine).planner.model.collision.frame_pose(q, "wrist_2_link")  # type: ignore[attr-defined]
    return Obstacle(
        "box1", Shape("box", (0.05, 0.05, 0.05)), "base_link", Pose(tuple(float(x) for x in T[:3, 3]))
    )


def test_the_reach_bound_holds_for_every_body() -> None:
    engine = build_engine(EngineConfig(poses=POSES, settings=EngineSettings(speed=math.inf)))
    try:
        model = stack(engine).planner.model.collision  # type: ignore[attr-defined]
        reach = model.reach()
        rng = np.random.default_rng(7)
        worst = 0.0
        for _ in range(200):
            q = rng.uniform(-math.pi, math.pi, 6)
            dq = rng.normal(0.0, 0.02, 6)
            before, after = model.body_placements(q), model.body_placements(q + dq)
            for name, T in before.items():
                moved = float(np.linalg.norm(after[name][:3, 3] - T[:3, 3]))
                worst = max(worst, moved / float(np.sum(np.abs(dq))))
        assert worst <= reach, (worst, reach)
        assert reach < 2.0, "a bound this loose would make the check slow"
    finally:
        engine.close()


def test_the_delta_check_finds_what_the_whole_world_check_finds(engine: tuple[Engine, Recorder]) -> None:
    """Conservative advancement against the added box (the stack remembers the world the
    solution was planned in) and every check of planning against the whole world (a solution
    whose world is not remembered) report the same first colliding sample; a box away from
    the path passes both."""
    eng, _ = engine
    assert eng.orchestrator.submit(BATCH, dry_run=False).wait(60).success
    backend = stack(eng)
    steps = eng.parse(BATCH).steps
    solution = next(iter(eng.orchestrator.cache._entries.values())).solution
    forgotten = replace(solution, scene_revision=None)
    world = tuple(backend.world_obstacles())
    box = box_across(eng)
    backend.set_world_obstacles((*world, box))
    delta, whole = backend.check_replay(solution, steps), backend.check_replay(forgotten, steps)
    assert delta is not None and whole is not None
    assert "with box1)" in delta
    assert delta.split(" in collision")[0] == whole.split(" in collision")[0], (delta, whole)
    backend.set_world_obstacles((*world, AWAY))
    assert backend.check_replay(solution, steps) is None
    assert backend.check_replay(forgotten, steps) is None
    backend.set_world_obstacles(world[1:])  # an object removed: nothing to check
    assert backend.check_replay(solution, steps) is None


def test_a_replay_through_a_new_box_is_refused_and_planned_afresh(engine: tuple[Engine, Recorder]) -> None:
    eng, recorder = engine
    backend = stack(eng)
    start = backend.joint_positions()
    assert start is not None
    first = eng.orchestrator.submit(BATCH, dry_run=False).wait(60)
    assert first.success, first
    world = tuple(backend.world_obstacles())
    planned_in = backend.scene_revision()

    # A box away from the path: the scene changed, the check passes, the hit replays.
    backend.set_world_obstacles((*world, AWAY))
    assert backend.scene_revision() != planned_in
    assert run_again(eng, start).success
    assert recorder.cache_statuses()[-1] == "HIT"
    replays = [e["detail"] for e in recorder.events if e["event"] == "replay_finished"]
    assert replays[-1] == "done"

    # A box across the path: refused before anything is sent, planned afresh once.
    box = box_across(eng)
    backend.set_world_obstacles((*world, box))
    result = run_again(eng, start)
    replays = [e["detail"] for e in recorder.events if e["event"] == "replay_finished"]
    assert replays[-1].startswith("refused, planning afresh: SCENE_CHANGED: the planning scene changed")
    assert "with box1)" in replays[-1]
    if result.success:  # went around the box: the new solution is clear of it
        solution = next(iter(eng.orchestrator.cache._entries.values())).solution
        assert solution.scene_revision == backend.scene_revision()
    else:
        assert result.error_message.startswith("PLANNING_FAILED:") and "box1" in result.error_message

    # The box removed: the world the first plan was made in is back, and so is its revision.
    backend.set_world_obstacles(world)
    assert backend.scene_revision() == planned_in
    again = run_again(eng, start)
    assert again.success, again

"""The embedded planner's OMPL settings (issue 39): the bounded shortcut simplification and
the search's own motion-check resolution, with the final re-check unchanged.

Plans in the packaged cell (``config/cell.yaml``) with the real collision model, around the
obstacle that blocks the straight joint line ``dock_approach`` → hot plate (the same pair
as ``test/planning/test_planner.py``), and checks every result independently of the planner at
0.01 rad per joint.
"""

from __future__ import annotations

import numpy as np
import pytest

from erobs_bt.planning.planner import MotionPlanner, PlannerConfig
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.collision import CollisionModel

#: Two poses of the sample scripts (cms_poses.yaml, spincoat_to_hotplate.json) [rad].
DOCK_APPROACH = np.radians([152.33, -135.73, -106.46, -27.73, -270.37, -207.74])
HOTPLATE = np.radians([65.63, -106.82, -73.45, -90.04, -270.12, -206.28])


@pytest.fixture(scope="module")
def epick(cell: CellConfig) -> CollisionModel:
    return CollisionModel(cell, gripper="epick")


def test_the_defaults_search_coarser_than_the_re_check_and_shortcut_the_path() -> None:
    config = PlannerConfig()
    assert config.simplification == "shortcut"
    assert config.ompl_check_step > config.check_step
    with pytest.raises(ValueError, match="simplification"):
        PlannerConfig(simplification="bspline")
    with pytest.raises(ValueError, match="ompl_check_step"):
        PlannerConfig(ompl_check_step=0.0)


@pytest.mark.parametrize("simplification", ["shortcut", "full"])
def test_a_blocked_move_in_the_cell_plans_around_with_either_simplification(
    epick: CollisionModel, simplification: str
) -> None:
    assert epick.check_path(np.stack([DOCK_APPROACH, HOTPLATE]), 0.01) is not None
    config = PlannerConfig(planning_time=2.0, simplify_time=0.5, simplification=simplification)
    segment = MotionPlanner(collision=epick, config=config).plan_to_joints(
        DOCK_APPROACH, HOTPLATE, step_index=0
    )
    q = np.array([p.positions for p in segment.points])
    assert np.array_equal(q[0], DOCK_APPROACH)
    assert np.array_equal(q[-1], HOTPLATE)
    # Checked at 0.01 rad per joint whatever resolution OMPL searched with.
    assert epick.check_path(q, 0.01) is None
    assert float(np.max(np.abs(np.diff(q, axis=0)))) <= 0.01 + 1e-9


def test_the_collision_query_answers_as_in_collision_with_and_without_tool_contact(
    epick: CollisionModel,
) -> None:
    rng = np.random.default_rng(39)
    samples = DOCK_APPROACH + rng.normal(0.0, 0.6, (400, 6))
    query = epick.collision_query()
    answers = [query(q) for q in samples]
    assert answers == [epick.in_collision(q) for q in samples]
    assert any(answers) and not all(answers)
    with epick.allowing_tool_contact():
        allowing = epick.collision_query()
        assert [allowing(q) for q in samples] == [epick.in_collision(q) for q in samples]

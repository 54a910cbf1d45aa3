"""The planning scene's world on the motion backends, without ROS: world_obstacles,
set_world_obstacles, scene_revision (erobs_bt issue 23, item 3)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from erobs_bt.backends.base import ErrorCode, MotionBackend, MotionError
from erobs_bt.backends.scripted import ScriptedBackend
from erobs_bt.backends.sim.backend import SimBackend
from erobs_bt.backends.sim.controller import SimController
from erobs_bt.backends.sim.tools import SimulatedChanger, SimulatedTool
from erobs_bt.backends.stack import MotionStack
from erobs_bt.planning.base import Planner, SceneKeeper
from erobs_bt.planning.planner import CellPlanner
from erobs_bt.script.model import MoveTo
from erobs_bt.world.cell import CellConfig, Obstacle, Pose, Shape
from erobs_bt.world.kinematics import T_BASE_LINK_BASE, fk, xyz_rpy_from_pose
from erobs_bt.world.scene import World, scene_revision, tag_objects
from erobs_bt.world.tools import initial_tool_state, mounted_at_start
from erobs_bt.world.vision import CalibratedMarkerDetector

from helpers import BAR_GUARD, SAMPLE_SCAN_1, detect_tag_1, error_of, tagged_cell

HOME = MoveTo(index=0, path="tasks[0]", spec={}, target="moveit_home")


def box(name: str, xyz: tuple[float, float, float], size: float = 0.1, frame: str = "base_link") -> Obstacle:
    return Obstacle(name=name, shape=Shape("box", (size, size, size)), frame=frame, pose=Pose(xyz=xyz))


def box_at_home(cell: CellConfig, name: str = "box1") -> Obstacle:
    """A 10 cm box around the wrist at ``moveit_home`` (the goal of :data:`HOME`)."""
    x, y, z = (float(v) for v in fk(cell.named_states["moveit_home"])[:3, 3])
    return box(name, (x, y, z))


def test_the_revision_depends_on_the_obstacles_not_their_order_or_frame() -> None:
    a, b = box("a", (0.5, 0.0, 0.2)), box("b", (0.0, 0.5, 0.2))
    assert scene_revision([a, b]) == scene_revision([b, a]) == World.of([b, a]).revision
    assert len(scene_revision([a])) == 12 and scene_revision([a]) != scene_revision([a, b])
    assert scene_revision([a]) != scene_revision([box("a", (0.5, 0.0, 0.21))])
    xyz, rpy = xyz_rpy_from_pose(np.linalg.inv(T_BASE_LINK_BASE) @ a.pose.matrix(), degrees=False)
    in_base = Obstacle(
        name="a",
        shape=a.shape,
        frame="base",
        pose=Pose(xyz=(xyz[0], xyz[1], xyz[2]), rpy=(rpy[0], rpy[1], rpy[2])),
    )
    world = World.of([in_base])
    assert world.revision == scene_revision([a]), "compared in base_link"
    assert world.obstacles[0].frame == "base_link"
    assert world.obstacles[0].T_base_link_obstacle() == pytest.approx(a.T_base_link_obstacle(), abs=1e-12)


@pytest.mark.parametrize(
    ("obstacles", "message"),
    [
        ([box("a", (0, 0, 1)), box("a", (0, 1, 1))], "obstacle name 'a' is used twice"),
        ([box("forearm_link", (0, 0, 1))], "'forearm_link' is the name of a robot link"),
        ([box("c", (0, 0, 1), frame="tool0")], "obstacle 'c': frame 'tool0'"),
        ([box("", (0, 0, 1))], "empty name"),
    ],
)
def test_a_malformed_world_is_refused_and_nothing_changes(
    cell: CellConfig, obstacles: list[Obstacle], message: str
) -> None:
    with SimBackend(cell, speed=math.inf) as backend:
        before = backend.scene_revision(), backend.world_obstacles()
        with pytest.raises(ValueError, match="set_world_obstacles: ") as raised:
            backend.set_world_obstacles(obstacles)
        assert message in str(raised.value)
        assert (backend.scene_revision(), backend.world_obstacles()) == before


def test_a_box_across_the_goal_fails_the_next_plan_naming_it_and_removing_it_restores_the_plan(
    cell: CellConfig,
) -> None:
    with SimBackend(cell, speed=math.inf, seed=1) as backend:
        assert isinstance(backend, MotionBackend)
        cell_world = backend.world_obstacles()
        assert {o.name for o in cell_world} == {o.name for o in cell.obstacles}
        assert all(o.frame == "base_link" for o in cell_world)
        original = backend.scene_revision()
        assert original == scene_revision(cell.obstacles)
        backend.plan([HOME]).result(timeout=60)

        revision = backend.set_world_obstacles((*cell_world, box_at_home(cell)))
        assert revision == backend.scene_revision() != original
        assert "box1" in {o.name for o in backend.world_obstacles()}
        error = error_of(backend.plan([HOME]))
        assert error.code is ErrorCode.PLANNING_FAILED
        assert "box1" in str(error) and "tasks[0]" in str(error)

        assert backend.set_world_obstacles(cell_world) == original
        solution = backend.plan([HOME]).result(timeout=60)
        backend.execute(solution, replay=False).result(timeout=60)
        assert backend.joint_positions() == pytest.approx(cell.named_states["moveit_home"], abs=1e-9)


def test_a_plan_keeps_the_world_of_the_moment_it_was_asked_for(cell: CellConfig) -> None:
    with SimBackend(cell, speed=math.inf, seed=1) as backend:
        cell_world = backend.world_obstacles()
        before = backend.plan([HOME])  # asked for before the box arrives
        backend.set_world_obstacles((*cell_world, box_at_home(cell)))
        after = backend.plan([HOME])
        solution = before.result(timeout=60)
        assert "box1" in str(error_of(after))
        # executing what was planned before the change is not the scene's business
        backend.execute(solution, replay=False).result(timeout=60)
        assert backend.joint_positions() == pytest.approx(cell.named_states["moveit_home"], abs=1e-9)


def test_an_added_obstacle_is_a_frame_cartesian_targets_may_name(cell: CellConfig) -> None:
    with SimBackend(cell, speed=math.inf, seed=1) as backend:
        target = box("landmark", (0.3, 0.3, 0.4), size=0.02)
        backend.set_world_obstacles((*backend.world_obstacles(), target))
        step = MoveTo(
            index=0,
            path="tasks[0]",
            spec={},
            cartesian_target=(0.0, 0.0, 0.15, math.pi, 0.0, 0.0),
            frame_id="landmark",
        )
        solution = backend.plan([step]).result(timeout=60)
        assert solution.segments


def test_the_scripted_backend_keeps_a_world_too() -> None:
    backend = ScriptedBackend()
    assert backend.world_obstacles() == () and backend.scene_revision() == scene_revision(())
    revision = backend.set_world_obstacles([box("b", (0, 0.5, 0.2)), box("a", (0.5, 0, 0.2))])
    assert [o.name for o in backend.world_obstacles()] == ["a", "b"]
    assert revision == backend.scene_revision() == scene_revision(backend.world_obstacles())
    with pytest.raises(ValueError, match="used twice"):
        backend.set_world_obstacles([box("a", (0, 0, 1)), box("a", (0, 0, 1))])


# -- tag-mapped collision objects ------------------------------------------------------------


def test_a_detected_tag_mapped_to_a_collision_object_adds_it_where_it_is_seen(cell: CellConfig) -> None:
    tagged = tagged_cell(cell, {1: BAR_GUARD})
    assert tag_objects(tagged)[1].name == "bar_guard" and tag_objects(cell) == {}
    step = detect_tag_1()
    changes: list[tuple[str, str]] = []
    with SimBackend(tagged, speed=math.inf, seed=1) as backend:
        backend.add_world_listener(lambda world, source: changes.append((world.revision, source)))
        before = backend.scene_revision()
        backend.run_step(step).result(timeout=120)

        (guard,) = [o for o in backend.world_obstacles() if o.name == "bar_guard"]
        expected = tagged.marker(1).pose.matrix()[:3, 3] + np.array([0, 0, 0.03])
        np.testing.assert_allclose(guard.T_base_link_obstacle()[:3, 3], expected, atol=1e-9)
        assert guard.shape == Shape("box", (0.1, 0.05, 0.04))
        assert backend.scene_revision() != before
        assert changes == [(backend.scene_revision(), "tag 1")]

        backend.run_step(step).result(timeout=120)  # seen again at the same place: no change
        assert len(changes) == 1


class SceneOfItsOwn:
    """The embedded planner behind a planning scene it keeps itself (a
    :class:`~erobs_bt.planning.base.SceneKeeper`, as move_group is) that refuses objects named
    in ``refused`` and keeps the others by name."""

    def __init__(self, planner: CellPlanner, refused: frozenset[str] = frozenset()) -> None:
        self._planner = planner
        self._refused = refused
        self.objects: dict[str, list[Obstacle]] = {}

    scene_owner = "its own scene"

    def put_object(self, obstacle: Obstacle, *, where: str) -> None:
        if obstacle.name in self._refused:
            raise MotionError(ErrorCode.EXECUTION_FAILED, f"{where}: the scene refused it")
        self.objects.setdefault(obstacle.name, []).append(obstacle)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._planner, name)


def stack_planning_in(cell: CellConfig, planner: SceneOfItsOwn) -> MotionStack:
    """The simulated cell's parts with ``planner``."""
    tools = initial_tool_state(cell, mounted_at_start(cell))
    return MotionStack(
        cell,
        planner=cast(Planner, planner),
        arm=SimController(cell.initial_joint_state, speed=math.inf),
        tool_drivers={name: SimulatedTool(name) for name in cell.grippers},
        changer=SimulatedChanger(),
        detector=CalibratedMarkerDetector(cell),
        tool_state=tools,
    )


def test_a_planner_keeping_its_own_scene_gets_the_tags_object_and_a_refusal_fails_the_step(
    cell: CellConfig,
) -> None:
    tagged = tagged_cell(cell, {1: BAR_GUARD})
    step = detect_tag_1()
    start = tuple(cell.initial_joint_state)
    keeper = SceneOfItsOwn(CellPlanner(tagged, initial_tool_state(tagged, mounted_at_start(tagged)), seed=1))
    assert isinstance(keeper, SceneKeeper)
    with stack_planning_in(tagged, keeper) as stack:
        before = stack.scene_revision()
        stack.run_step(step).result(timeout=120)
        stack.run_step(step).result(timeout=120)  # the same placement: not sent again
        (placed,) = keeper.objects["bar_guard"]
        expected = tagged.marker(1).pose.matrix()[:3, 3] + np.array([0, 0, 0.03])
        np.testing.assert_allclose(placed.T_base_link_obstacle()[:3, 3], expected, atol=1e-9)
        assert stack.scene_revision() == before  # the stack's world stays the cell's

    refusing = SceneOfItsOwn(
        CellPlanner(tagged, initial_tool_state(tagged, mounted_at_start(tagged)), seed=1),
        refused=frozenset({"bar_guard"}),
    )
    with stack_planning_in(tagged, refusing) as stack:
        error = error_of(stack.run_step(step))
        assert error.code is ErrorCode.EXECUTION_FAILED
        assert str(error).startswith(
            "EXECUTION_FAILED: tasks[3]: vision_moveto: tag 1: collision object bar_guard: "
        ), str(error)
        assert "the scene refused it" in str(error)
        assert np.allclose(stack.joint_positions(), SAMPLE_SCAN_1, atol=1e-6)  # seen, then stopped
        assert start != SAMPLE_SCAN_1


def test_a_malformed_tag_mapping_names_the_cell_file_and_key(cell: CellConfig) -> None:
    bad = tagged_cell(cell, {1: {"name": "x", "shape": "cone", "dimensions": [1, 1]}})
    with pytest.raises(ValueError, match=r"collision_objects\.1\.shape"):
        tag_objects(bad)
    twice = tagged_cell(
        cell,
        {
            1: {"name": "x", "shape": "sphere", "dimensions": [0.1]},
            2: {"name": "x", "shape": "sphere", "dimensions": [0.1]},
        },
    )
    with pytest.raises(ValueError, match="is the name of tag 1's object too"):
        SimBackend(twice, speed=math.inf)


def test_the_tag_mapping_is_read_from_a_cell_file(tmp_path: Path) -> None:
    from erobs_bt.paths import config_file
    from erobs_bt.world.config import load_cell

    text = config_file("cell.yaml").read_text()
    text += "\ncollision_objects:\n  25: {name: vial_rack_guard, shape: cylinder, dimensions: [0.1, 0.03]}\n"
    path = tmp_path / "tagged_cell.yaml"
    path.write_text(text)
    (mapped,) = tag_objects(load_cell(path)).values()
    assert (mapped.tag, mapped.name, mapped.shape) == (25, "vial_rack_guard", Shape("cylinder", (0.1, 0.03)))
    assert mapped.tag_offset == (0.0, 0.0, 0.0)
    path.write_text(text.replace("dimensions: [0.1, 0.03]", "dimensions: [0.1]"))
    with pytest.raises(ValueError, match=r"tagged_cell\.yaml.*collision_objects\.25\.dimensions"):
        tag_objects(load_cell(path))

"""Collision model of the simulated cell (pinocchio + coal on the airo-models UR5e).

Scenarios: the URDF model agrees with the DH kinematics; link hulls never miss a contact the
meshes find; the real EROBS poses are free in the packaged cell with the ePick and the
pipettor, and so are most straight joint-space moves between consecutive script poses; a tool
in the table, a folded arm, a held object and padding are all detected; paths are densified;
threads do not disturb each other.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml

from erobs_bt.world import kinematics as kin
from erobs_bt.world.cell import CellConfig, Obstacle, Pose, Shape
from erobs_bt.world.collision import (
    ADJACENT_LINKS,
    AcmStore,
    CollisionModel,
    acm_key,
    acm_key_document,
    default_cache_dir,
)


@pytest.fixture(scope="module")
def epick_model(cell: CellConfig) -> CollisionModel:
    return CollisionModel(cell, gripper="epick")


@pytest.fixture(scope="module")
def pipettor_model(cell: CellConfig) -> CollisionModel:
    return CollisionModel(cell, gripper="pipettor")


def _with_collision(cell: CellConfig, **changes: object) -> CellConfig:
    return dataclasses.replace(cell, collision=dataclasses.replace(cell.collision, **changes))


def _sample_poses(samples_dir: Path) -> dict[str, np.ndarray]:
    """Every pose of cms_poses.yaml and of the sample scripts' inline poses [rad]."""
    poses: dict[str, np.ndarray] = {}
    for name, degrees in yaml.safe_load((samples_dir / "cms_poses.yaml").read_text()).items():
        poses[f"cms_poses.yaml:{name}"] = np.radians(degrees)
    for script in sorted(samples_dir.glob("*.json")):
        for name, degrees in json.loads(script.read_text()).get("poses", {}).items():
            poses[f"{script.name}:{name}"] = np.radians(degrees)
    return poses


def test_urdf_frames_match_the_dh_kinematics(epick_model: CollisionModel) -> None:
    rng = np.random.default_rng(11)
    worst = 0.0
    for q in rng.uniform(kin.JOINT_LIMITS[:, 0], kin.JOINT_LIMITS[:, 1], size=(300, 6)):
        worst = max(worst, float(np.max(np.abs(epick_model.frame_pose(q, "flange") - kin.fk(q)))))
        worst = max(worst, float(np.max(np.abs(epick_model.frame_pose(q, "tool0") - kin.fk_tool0(q)))))
    assert worst < 1e-6
    np.testing.assert_allclose(epick_model.frame_pose(np.zeros(6), "base"), kin.T_BASE_LINK_BASE, atol=1e-12)


def test_link_hulls_never_miss_a_mesh_contact(cell: CellConfig) -> None:
    """The safety claim of the convex link model: over 2,000 configurations, no case where the
    hull model says free while the exact collision meshes collide."""
    hulls = CollisionModel(_with_collision(cell, padding=0.0), gripper="epick")
    meshes = CollisionModel(_with_collision(cell, padding=0.0, link_geometry="mesh"), gripper="epick")
    padded = CollisionModel(cell, gripper="epick")
    rng = np.random.default_rng(7)
    qs = rng.uniform(-math.pi, math.pi, size=(2000, 6))
    qs[:, 1] = rng.uniform(-math.pi, 0.0, size=2000)  # mostly above the table, where it matters
    mesh_hits = np.array([meshes.in_collision(q) for q in qs])
    hull_hits = np.array([hulls.in_collision(q) for q in qs])
    padded_hits = np.array([padded.in_collision(q) for q in qs])
    assert 0.05 < mesh_hits.mean() < 0.95  # the sample exercises both outcomes
    assert not np.any(mesh_hits & ~hull_hits)
    assert not np.any(mesh_hits & ~padded_hits)
    assert np.sum(padded_hits) >= np.sum(hull_hits)


def test_every_sample_pose_is_free_with_the_epick_and_the_pipettor(
    samples_dir: Path, cell: CellConfig, epick_model: CollisionModel, pipettor_model: CollisionModel
) -> None:
    poses = _sample_poses(samples_dir)
    poses["named:moveit_home"] = np.asarray(cell.named_states["moveit_home"])
    poses["initial_joint_state"] = np.asarray(cell.initial_joint_state)
    assert len(poses) > 40
    for model in (epick_model, pipettor_model):
        blocked = {name: model.contacts(q) for name, q in poses.items() if model.in_collision(q)}
        assert blocked == {}, f"{model.gripper}: {blocked}"


def test_straight_joint_moves_between_consecutive_script_poses_are_mostly_free(
    samples_dir: Path, cell: CellConfig, epick_model: CollisionModel, pipettor_model: CollisionModel
) -> None:
    registry = {
        n: np.radians(v) for n, v in yaml.safe_load((samples_dir / "cms_poses.yaml").read_text()).items()
    }
    models = {"epick": epick_model, "pipettor": pipettor_model}
    segments = blocked = 0
    for script in sorted(samples_dir.glob("*.json")):
        document = json.loads(script.read_text())
        inline = {n: np.radians(v) for n, v in document.get("poses", {}).items()}
        gripper = document["start_gripper"]
        previous: np.ndarray | None = None
        for task in document["tasks"]:
            if task["task_type"] == "tool_exchange" and task["operation"] == "load":
                gripper = task["gripper"]
            if task["task_type"] != "moveto" or "target" not in task or "direction" in task:
                continue
            target = task["target"]
            q = inline.get(target, registry.get(target))
            if q is None:
                q = np.asarray(cell.named_states[target])
            if previous is not None:
                segments += 1
                blocked += models[gripper].check_path(np.array([previous, q]), 0.01) is not None
            previous = q
    assert segments >= 20
    assert blocked <= 2


def test_tool_inside_the_table_is_a_collision_with_the_table(epick_model: CollisionModel) -> None:
    tcp_goal = kin.pose_from_xyz_rpy(
        [0.45, 0.15, -0.27], [0.0, math.pi, 0.0], degrees=False
    )  # table top -0.25
    flange_goal = kin.flange_goal_from_tip_goal(tcp_goal, epick_model.T_flange_tcp)
    q = kin.ik(flange_goal, seed=np.radians([0, -90, 90, -90, -90, 0]))[0]
    assert epick_model.in_collision(q)
    contacts = epick_model.contacts(q)
    assert ("epick/cup", "table") in contacts
    assert all(b == "table" for _, b in contacts)
    assert epick_model.first_contact(q) in contacts
    lifted = kin.ik(flange_goal @ kin.pose_from_xyz_rpy([-0.2, 0, 0], [0, 0, 0], degrees=False), seed=q)[0]
    assert not epick_model.in_collision(lifted)
    assert epick_model.first_contact(lifted) is None


def test_folded_arm_is_a_self_collision(epick_model: CollisionModel) -> None:
    q = np.array([0.0, -math.pi / 2, 2.9, 0.0, 0.0, 0.0])  # elbow folded, forearm over the shoulder
    contacts = epick_model.contacts(q)
    assert ("shoulder_link", "forearm_link") in contacts
    robot = set(epick_model.body_names[:7])
    assert all(a in robot and b in robot for a, b in contacts)


def test_allowed_collision_matrix_follows_the_setup_assistant_recipe(epick_model: CollisionModel) -> None:
    disabled = epick_model.disabled_pairs
    for a, b in ADJACENT_LINKS:
        assert tuple(sorted((a, b))) in disabled
    assert ("epick/body", "wrist_3_link") in disabled  # the tool is fixed to wrist_3
    assert ("base_link_inertia", "forearm_link") not in disabled  # can fold onto the base
    assert ("epick/body", "upper_arm_link") not in disabled
    again = CollisionModel(epick_model.cell, gripper="epick")
    assert again.disabled_pairs == disabled  # seeded sampling: deterministic


def test_touch_links_let_the_base_stand_on_its_pedestal(cell: CellConfig) -> None:
    q0 = np.asarray(cell.initial_joint_state)
    strict = dataclasses.replace(
        cell, obstacles=tuple(dataclasses.replace(o, touch_links=()) for o in cell.obstacles)
    )
    assert ("base_link_inertia", "robot_pedestal") in CollisionModel(strict, gripper="none").contacts(q0)
    assert not CollisionModel(cell, gripper="none").in_collision(q0)


def test_padding_keeps_arm_links_away_from_obstacles(cell: CellConfig) -> None:
    q = np.asarray(cell.named_states["moveit_home"])  # arm straight up
    start = CollisionModel(cell, gripper="none").frame_pose(q, "forearm_link")[:3, 3]  # inside the forearm

    def model_with_ball(x: float, padding: float) -> CollisionModel:
        centre = (float(start[0] + x), float(start[1]), float(start[2]) + 0.2)
        ball = Obstacle("ball", Shape("sphere", (0.01,)), "base_link", Pose(centre), ())
        bare = dataclasses.replace(cell, obstacles=(ball,))
        return CollisionModel(
            _with_collision(bare, padding=padding, self_collision_samples=200), gripper="none"
        )

    lo, hi = 0.0, 0.3  # moving the ball out along +x: touching the forearm at lo, free at hi
    assert model_with_ball(lo, 0.0).in_collision(q) and not model_with_ball(hi, 0.0).in_collision(q)
    for _ in range(16):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if model_with_ball(mid, 0.0).in_collision(q) else (lo, mid)
    assert not model_with_ball(hi + 0.005, 0.0).in_collision(q)
    assert model_with_ball(hi + 0.005, 0.01).in_collision(q)
    assert not model_with_ball(hi + 0.015, 0.01).in_collision(q)


def test_check_path_densifies_and_reports_the_first_unreachable_waypoint(cell: CellConfig) -> None:
    ball = Obstacle("ball", Shape("sphere", (0.05,)), "base_link", Pose((0.45, 0.0, 0.2)), ())
    model = CollisionModel(dataclasses.replace(cell, obstacles=(ball,)), gripper="epick")
    tcp_at_ball = kin.pose_from_xyz_rpy([0.45, 0.0, 0.2], [0.0, math.pi, 0.0], degrees=False)
    inside = kin.ik_tip(tcp_at_ball, model.T_flange_tcp, seed=np.radians([0, -90, 90, -90, -90, 0]))[0]
    swing = np.array([0.6, 0.0, 0.0, 0.0, 0.0, 0.0])  # pan the arm so the tool sweeps through the ball
    before, after = inside - swing, inside + swing
    assert model.in_collision(inside)
    assert not model.in_collision(before) and not model.in_collision(after)
    assert model.check_path(np.array([before, after])) == 1
    assert model.check_path(np.array([before, after]), max_step=2.0) is None  # ends only: sweep missed
    assert model.check_path(np.array([before, before, after])) == 2
    assert model.check_path(np.array([inside, before])) == 0
    assert model.check_path(before[None, :]) is None
    assert model.check_path(np.array([before, before - swing])) is None
    with pytest.raises(ValueError, match="qs: expected shape"):
        model.check_path(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="max_step"):
        model.check_path(np.zeros((2, 6)), max_step=0.0)


def test_a_held_object_collides_unless_it_touches_an_allowed_obstacle(cell: CellConfig) -> None:
    model = CollisionModel(cell, gripper="epick")
    q = np.radians([65.63, -106.82, -73.45, -90.04, -270.12, -206.28])  # `hotplate` pose
    assert not model.in_collision(q)
    slab = Shape("box", (0.05, 0.05, 0.04))
    below_tip = kin.pose_from_xyz_rpy([0.0, 0.0, 0.02], [0, 0, 0], degrees=False)  # 4 cm slab under the cup
    model.attach_object("sample", slab, below_tip)
    assert model.attached_object is not None
    assert ("hot_plate", "sample") in model.contacts(q)
    model.attach_object("sample", slab, below_tip, touch_obstacles=["hot_plate"])
    assert not model.in_collision(q)
    with pytest.raises(ValueError, match="already a body"):
        model.attach_object("table", slab, below_tip)
    with pytest.raises(ValueError, match="unknown obstacle"):
        model.attach_object("sample", slab, below_tip, touch_obstacles=["shelf"])
    model.attach_object("sample", slab, below_tip)
    model.detach_object()
    assert model.attached_object is None
    assert not model.in_collision(q)


def test_changing_the_gripper_changes_geometry_and_model_revision(cell: CellConfig) -> None:
    model = CollisionModel(cell, gripper="epick")
    assert model.model_revision == "robot_models__epick__3mm_dia"
    model.set_gripper("pipettor")
    assert model.model_revision == "robot_models__pipettor"
    assert model.cup_profile is None
    assert "pipettor/body" in model.body_names and "epick/body" not in model.body_names
    np.testing.assert_allclose(model.T_flange_tcp, cell.gripper("pipettor").T_flange_tcp())
    model.set_gripper("epick", cup_profile="20mm_dia")
    assert model.model_revision == "robot_models__epick__20mm_dia"
    with pytest.raises(ValueError, match="Unknown gripper: laser"):
        model.set_gripper("laser")
    with pytest.raises(ValueError, match="Unknown gripper: laser"):
        CollisionModel(cell, gripper="laser")


def test_threads_get_their_own_data(epick_model: CollisionModel) -> None:
    rng = np.random.default_rng(99)
    qs = rng.uniform(-math.pi, math.pi, size=(400, 6))
    expected = [epick_model.in_collision(q) for q in qs]
    results: dict[int, list[bool]] = {}

    def worker(k: int) -> None:
        results[k] = [epick_model.in_collision(q) for q in qs]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[k] == expected for k in range(3))


# -- the allowed-collision matrix, computed once per geometry -------------------------------------


def test_the_acm_key_changes_with_the_geometry_and_only_with_it(cell: CellConfig) -> None:
    base = acm_key(acm_key_document(cell, "epick", None))
    assert acm_key(acm_key_document(cell, "epick", None)) == base  # deterministic
    assert acm_key(acm_key_document(cell, "pipettor", None)) != base  # another tool
    epick = cell.gripper("epick")
    profiles = list(epick.cup_profiles)
    if len(profiles) > 1:
        assert acm_key(acm_key_document(cell, "epick", profiles[1])) != acm_key(
            acm_key_document(cell, "epick", profiles[0])
        )
    first = epick.collision[0]
    grown = dataclasses.replace(
        first, shape=dataclasses.replace(first.shape, size=tuple(v * 1.01 for v in first.shape.size))
    )
    resized = dataclasses.replace(
        cell,
        grippers={
            **cell.grippers,
            "epick": dataclasses.replace(epick, collision=(grown, *epick.collision[1:])),
        },
    )
    assert acm_key(acm_key_document(resized, "epick", None)) != base  # a tool part changed size
    moved = dataclasses.replace(
        first, pose=dataclasses.replace(first.pose, xyz=(first.pose.xyz[0] + 0.001, *first.pose.xyz[1:]))
    )
    shifted = dataclasses.replace(
        cell,
        grippers={
            **cell.grippers,
            "epick": dataclasses.replace(epick, collision=(moved, *epick.collision[1:])),
        },
    )
    assert acm_key(acm_key_document(shifted, "epick", None)) != base  # a tool part moved
    for changes in ({"self_collision_samples": 5000}, {"seed": 3}, {"link_geometry": "mesh"}):
        assert acm_key(acm_key_document(_with_collision(cell, **changes), "epick", None)) != base, changes
    # Obstacles and padding are not self-collision geometry: the matrix is the same.
    assert acm_key(acm_key_document(_with_collision(cell, padding=0.05), "epick", None)) == base
    assert acm_key(acm_key_document(dataclasses.replace(cell, obstacles=()), "epick", None)) == base


@pytest.mark.slow
def test_a_cached_acm_equals_a_fresh_one_and_is_reused_across_processes(
    cell: CellConfig, tmp_path: Path
) -> None:
    fresh = CollisionModel(cell, gripper="pipettor", acm_store=AcmStore(persist=False))
    first = AcmStore(tmp_path)
    computed = CollisionModel(cell, gripper="pipettor", acm_store=first)
    assert (first.computed, first.loaded) == (1, 0)
    path = first.path(acm_key(acm_key_document(cell, "pipettor", None)))
    assert path.parent == tmp_path / "acm" and path.is_file()
    # A new process: a new store on the same directory reads the file instead of sampling.
    second = AcmStore(tmp_path)
    loaded = CollisionModel(cell, gripper="pipettor", acm_store=second)
    assert (second.computed, second.loaded) == (0, 1)
    assert loaded.disabled_pairs == computed.disabled_pairs == fresh.disabled_pairs
    # Tool changes inside the process are answered from memory.
    loaded.set_gripper("epick")
    loaded.set_gripper("pipettor")
    assert (second.computed, second.loaded, second.reused) == (1, 1, 1)
    q = np.asarray(cell.named_states["moveit_home"])
    assert loaded.contacts(q) == fresh.contacts(q)


def test_stored_link_hulls_check_exactly_like_hulls_built_from_the_meshes(
    cell: CellConfig, tmp_path: Path
) -> None:
    built = AcmStore(tmp_path)
    from_meshes = CollisionModel(cell, gripper="epick", acm_store=built)
    assert (built.hulls_built, built.hulls_loaded) == (1, 0) and built.hulls_path().is_file()
    again = AcmStore(tmp_path)  # a new process: the hulls are read, no mesh is loaded
    from_disk = CollisionModel(cell, gripper="epick", acm_store=again)
    assert (again.hulls_built, again.hulls_loaded) == (0, 1)
    assert from_disk.body_names == from_meshes.body_names
    rng = np.random.default_rng(7)
    for q in rng.uniform(kin.JOINT_LIMITS[:, 0], kin.JOINT_LIMITS[:, 1], size=(200, 6)):
        assert from_disk.contacts(q) == from_meshes.contacts(q)


def test_a_damaged_hulls_file_is_rebuilt(cell: CellConfig, tmp_path: Path) -> None:
    store = AcmStore(tmp_path)
    reference = CollisionModel(cell, gripper="epick", acm_store=store)
    path = store.hulls_path()
    for damage in (b"", b"not a pinocchio archive", path.read_bytes()[:1000]):
        path.write_bytes(damage)
        again = AcmStore(tmp_path)
        model = CollisionModel(cell, gripper="epick", acm_store=again)
        assert (again.hulls_built, again.hulls_loaded) == (1, 0)
        q = np.asarray(cell.named_states["moveit_home"])
        assert model.contacts(q) == reference.contacts(q)


def test_a_damaged_acm_file_is_recomputed_and_rewritten(cell: CellConfig, tmp_path: Path) -> None:
    store = AcmStore(tmp_path)
    reference = CollisionModel(cell, gripper="pipettor", acm_store=store).disabled_pairs
    path = store.path(acm_key(acm_key_document(cell, "pipettor", None)))
    for damage in ("{not json", json.dumps({"key": "another", "disabled": []}), json.dumps([1, 2])):
        path.write_text(damage)
        again = AcmStore(tmp_path)
        assert CollisionModel(cell, gripper="pipettor", acm_store=again).disabled_pairs == reference
        assert (again.computed, again.loaded) == (1, 0)
        assert json.loads(path.read_text())["key"] == path.stem  # rewritten


def test_an_unwritable_cache_directory_only_costs_the_recomputation(cell: CellConfig, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    store = AcmStore(blocker)
    model = CollisionModel(cell, gripper="pipettor", acm_store=store)
    assert store.computed == 1 and len(model.disabled_pairs) > 0


def test_the_cache_directory_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EROBS_BT_CACHE_DIR", str(tmp_path / "explicit"))
    assert default_cache_dir() == tmp_path / "explicit"
    assert AcmStore().path("k") == tmp_path / "explicit" / "acm" / "k.json"
    monkeypatch.delenv("EROBS_BT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "erobs_bt"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "erobs_bt"

"""The node's live planning scene end to end (erobs_bt issue 23, item 3): a node process on the
simulated cell, MoveIt's collision_object / planning_scene / apply_planning_scene /
get_planning_scene / monitored_planning_scene from a real rclpy client in this process, and
the ``erobs-bt scene`` verbs."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from ros_fixtures import NodeProcess, RosEnvironment, ready_client

from erobs_bt.ros.client import commands
from erobs_bt.ros.client.client import ErobsBtClient, GoalRun, Recorder
from erobs_bt.rosqos import latched_qos
from erobs_bt.world.kinematics import fk

from helpers import POSES, move, script, wait_for

pytestmark = pytest.mark.ros

SPEED = 20.0
GOAL_TIMEOUT = 120.0

#: One batched unit of two joint moves ending at ``pipettor_scan``.
BATCH = script([move("sample_scan_1"), move("pipettor_scan")])
#: One longer batched unit (about 1 s of wall time at 20x) ending at ``pipettor_scan``.
LONG_BATCH = script([move("sample_scan_1"), move("pipettor_scan")] * 3)


def flange_at(pose: str) -> tuple[float, float, float]:
    """The flange position [m, base_link] at a pose of :data:`helpers.POSES`."""
    T = fk([math.radians(v) for v in POSES[pose]])
    return float(T[0, 3]), float(T[1, 3]), float(T[2, 3])


def box_message(
    name: str, position: tuple[float, float, float], size: float = 0.2, frame: str = "base_link"
) -> Any:
    from moveit_msgs.msg import CollisionObject
    from shape_msgs.msg import SolidPrimitive

    obj = CollisionObject(id=name, operation=CollisionObject.ADD)
    obj.header.frame_id = frame
    obj.pose.position.x, obj.pose.position.y, obj.pose.position.z = position
    obj.pose.orientation.w = 1.0
    obj.primitives = [SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[size, size, size])]
    return obj


def remove_message(name: str) -> Any:
    from moveit_msgs.msg import CollisionObject

    return CollisionObject(id=name, operation=CollisionObject.REMOVE)


def diff_of(*objects: Any) -> Any:
    from moveit_msgs.msg import PlanningScene

    scene = PlanningScene(is_diff=True)
    scene.robot_state.is_diff = True
    scene.world.collision_objects = list(objects)
    return scene


def ids_of(scene: Any) -> set[str]:
    return {o.id for o in scene.world.collision_objects}


def run_to_end(client: ErobsBtClient, text: str) -> GoalRun:
    run = client.send(text)
    assert run.accepted, run.rejection
    run.wait(GOAL_TIMEOUT)
    return run


class SceneTalker:
    """Publishes on ``collision_object`` and records ``monitored_planning_scene``."""

    def __init__(self, client: ErobsBtClient) -> None:
        from moveit_msgs.msg import CollisionObject, PlanningScene

        self.scenes: Recorder[Any] = Recorder()
        client.node.create_subscription(
            PlanningScene, "/monitored_planning_scene", self.scenes.add, latched_qos()
        )
        self.objects = client.node.create_publisher(CollisionObject, "/collision_object", 10)
        self.diffs = client.node.create_publisher(PlanningScene, "/planning_scene", 10)
        wait_for(
            lambda: self.objects.get_subscription_count() >= 1,
            30.0,
            "the node's collision_object subscription",
        )
        wait_for(
            lambda: self.diffs.get_subscription_count() >= 1, 30.0, "the node's planning_scene subscription"
        )
        assert self.scenes.wait_for(lambda m: True, 30.0) is not None, "no latched monitored_planning_scene"

    def publish(self, obj: Any, until: Any) -> Any:
        """Publish ``obj`` and wait for the scene that ``until`` accepts (the node applied it)."""
        since = self.scenes.count
        self.objects.publish(obj)
        scene = self.scenes.wait_for(until, 30.0, since=since)
        assert scene is not None, f"the node did not apply {obj.id!r}"
        return scene


# -- fixtures ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def run_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scene_runs")


@pytest.fixture(scope="module")
def node(ros_env: RosEnvironment, run_log_dir: Path) -> Iterator[NodeProcess]:
    process = NodeProcess(ros_env, {"speed": SPEED, "run_log_dir": str(run_log_dir)})
    process.start()
    yield process
    assert process.stop() == 0, process.output


@pytest.fixture(scope="module")
def client(node: NodeProcess) -> Iterator[ErobsBtClient]:
    with ready_client(node) as ros_client:
        yield ros_client


@pytest.fixture(scope="module")
def talker(client: ErobsBtClient) -> SceneTalker:
    return SceneTalker(client)


# -- scenarios ---------------------------------------------------------------------------------
def test_the_scene_starts_with_the_cell_obstacles_and_is_latched(
    client: ErobsBtClient, talker: SceneTalker
) -> None:
    latest = talker.scenes.latest()
    assert latest is not None and not latest.is_diff
    assert {"table", "hot_plate", "robot_pedestal"} <= ids_of(latest)
    scene = client.get_planning_scene(10.0)
    assert ids_of(scene) == ids_of(latest)
    assert tuple(scene.robot_state.joint_state.name)[:1] == ("shoulder_pan_joint",)
    assert len(scene.robot_state.joint_state.position) == 6


def test_a_box_on_collision_object_fails_the_next_plan_naming_it_and_remove_restores_it(
    client: ErobsBtClient, talker: SceneTalker, run_log_dir: Path, node: NodeProcess
) -> None:
    assert client.clear_cache()[0]
    talker.publish(box_message("box1", flange_at("pipettor_scan")), lambda m: "box1" in ids_of(m))

    blocked = run_to_end(client, BATCH)
    assert blocked.status_name == "ABORTED"
    assert blocked.result.error_code == "PLANNING_FAILED"
    assert "box1" in blocked.result.error_message, blocked.result.error_message

    talker.publish(remove_message("box1"), lambda m: "box1" not in ids_of(m))
    free = run_to_end(client, BATCH)
    assert free.status_name == "SUCCEEDED", free.result.error_message
    assert node.wait_for_line(lambda line: "planning scene" in line and "removed box1" in line, 10.0)


def test_a_change_during_a_goal_leaves_the_motion_in_flight_and_is_in_its_run_log_and_bag(
    client: ErobsBtClient, talker: SceneTalker, run_log_dir: Path
) -> None:
    assert client.clear_cache()[0]
    run = client.send(LONG_BATCH)
    assert run.accepted, run.rejection
    executing = run.feedback.wait_for(
        lambda f: f.unit_index == 1 and "execut" in f.status_message, GOAL_TIMEOUT
    )
    assert executing is not None, run.feedback.items()
    # across the end of the motion already running
    talker.publish(box_message("box2", flange_at("pipettor_scan")), lambda m: "box2" in ids_of(m))
    run.wait(GOAL_TIMEOUT)
    assert run.status_name == "SUCCEEDED", run.result.error_message

    # the run log: the scene at the start, then the change
    def records() -> list[dict[str, Any]]:
        found = []
        for path in run_log_dir.glob("*.jsonl"):
            for line in path.read_text().splitlines():
                record = json.loads(line)
                if record.get("event") in ("scene", "scene_changed"):
                    found.append(record)
        return found

    wait_for(lambda: any(r.get("added") == ["box2"] for r in records()), 30.0, "the scene_changed record")
    changed = next(r for r in records() if r.get("added") == ["box2"])
    assert changed["event"] == "scene_changed" and changed["source"] == "collision_object"
    assert "box2" in changed["objects"] and len(changed["revision"]) == 12
    goal_id = changed["goal_id"]
    start = [r for r in records() if r["event"] == "scene" and r["goal_id"] == goal_id]
    assert start and "box2" not in start[0]["objects"]

    # the bag beside it has the scene topic
    from mcap.reader import make_reader

    def bag_topics() -> set[str]:
        topics: set[str] = set()
        for path in run_log_dir.glob(f"*{goal_id}*.mcap"):
            try:
                with path.open("rb") as handle:
                    reader = make_reader(handle)
                    for _schema, channel, _message in reader.iter_messages():
                        topics.add(channel.topic)
            except Exception:  # still being written
                return set()
        return topics

    wait_for(lambda: "/monitored_planning_scene" in bag_topics(), 30.0, "the scene in the goal's bag")

    # the next plan sees the box: the same unit, planned again, fails naming it
    assert client.clear_cache()[0]
    blocked = run_to_end(client, BATCH)
    assert blocked.result.error_code == "PLANNING_FAILED" and "box2" in blocked.result.error_message
    talker.publish(remove_message("box2"), lambda m: "box2" not in ids_of(m))


def test_apply_and_get_planning_scene_round_trip(client: ErobsBtClient, talker: SceneTalker) -> None:
    before = client.get_planning_scene(10.0)
    assert client.apply_planning_scene(diff_of(box_message("box3", (0.5, 0.5, 0.6), size=0.05)), 10.0)
    with_box = client.get_planning_scene(10.0)
    assert ids_of(with_box) == ids_of(before) | {"box3"}
    (box,) = [o for o in with_box.world.collision_objects if o.id == "box3"]
    assert box.header.frame_id == "base_link" and list(box.primitives[0].dimensions) == pytest.approx(
        [0.05] * 3
    )

    # the attached tool is reported as MoveIt reports it (the module's node starts with the pipettor
    # or whatever the last goal left attached)
    (tool,) = before.robot_state.attached_collision_objects
    assert tool.link_name == "flange" and len(tool.object.primitives) >= 1

    # a whole scene (not a diff) replaces the world: the one read before, without box3; its
    # robot state (the attached tool, as read) comes back unchanged
    assert not before.is_diff
    assert client.apply_planning_scene(before, 10.0)
    assert ids_of(client.get_planning_scene(10.0)) == ids_of(before)
    # a diff on the planning_scene topic
    since = talker.scenes.count
    talker.diffs.publish(diff_of(box_message("box4", (0.5, -0.5, 0.6), size=0.05)))
    assert talker.scenes.wait_for(lambda m: "box4" in ids_of(m), 30.0, since=since) is not None
    since = talker.scenes.count
    talker.diffs.publish(diff_of(remove_message("box4")))
    assert talker.scenes.wait_for(lambda m: "box4" not in ids_of(m), 30.0, since=since) is not None
    assert ids_of(client.get_planning_scene(10.0)) == ids_of(before)

    # and the cell still plans: the table keeps the links allowed to touch it
    assert client.clear_cache()[0]
    assert run_to_end(client, BATCH).status_name == "SUCCEEDED"


def test_bad_messages_are_refused_with_a_logged_reason_and_the_node_keeps_serving(
    client: ErobsBtClient, talker: SceneTalker, node: NodeProcess
) -> None:
    from moveit_msgs.msg import AttachedCollisionObject
    from shape_msgs.msg import SolidPrimitive

    before = ids_of(client.get_planning_scene(10.0))
    assert not client.apply_planning_scene(diff_of(box_message("odd", (0.5, 0.0, 0.5), frame="tool0")), 10.0)
    assert node.wait_for_line(
        lambda line: "apply_planning_scene: refused: collision_object 'odd': unknown frame 'tool0'" in line,
        10.0,
    ), node.output

    cone = box_message("cone1", (0.5, 0.0, 0.5))
    cone.primitives = [SolidPrimitive(type=SolidPrimitive.CONE, dimensions=[0.1, 0.05])]
    talker.objects.publish(cone)
    assert node.wait_for_line(
        lambda line: (
            "collision_object: refused: collision_object 'cone1'" in line and "not supported" in line
        ),
        10.0,
    ), node.output

    assert not client.apply_planning_scene(diff_of(remove_message("never_added")), 10.0)
    held = diff_of()
    attached = AttachedCollisionObject(
        link_name="flange", object=box_message("crate", (0.0, 0.0, 0.1), size=0.05)
    )
    held.robot_state.attached_collision_objects = [attached]
    assert not client.apply_planning_scene(held, 10.0)
    assert node.wait_for_line(lambda line: "attached_collision_objects ('crate')" in line, 10.0)
    assert not client.apply_planning_scene(diff_of(box_message("forearm_link", (0.5, 0.0, 0.5))), 10.0)
    assert node.wait_for_line(lambda line: "'forearm_link' is the name of a robot link" in line, 10.0)

    assert ids_of(client.get_planning_scene(10.0)) == before
    assert node.running()


def test_the_cli_adds_lists_and_removes_a_box(client: ErobsBtClient, talker: SceneTalker) -> None:
    runner = CliRunner()
    added = runner.invoke(
        commands.scene,
        [
            "add-box",
            "clibox",
            "--size",
            "0.1",
            "0.2",
            "0.3",
            "--position",
            "0.4",
            "0.4",
            "0.5",
            "--timeout",
            "20",
        ],
    )
    assert added.exit_code == 0, added.output
    assert "clibox" in ids_of(client.get_planning_scene(10.0))

    listed = runner.invoke(commands.scene, ["list", "--json", "--timeout", "20"])
    assert listed.exit_code == 0, listed.output
    objects = {o["id"]: o for o in json.loads(listed.output)["objects"]}
    (shape,) = objects["clibox"]["shapes"]
    assert shape["shape"] == "box" and shape["size"] == pytest.approx([0.1, 0.2, 0.3])
    assert shape["position"] == pytest.approx([0.4, 0.4, 0.5])
    assert "table" in objects

    removed = runner.invoke(commands.scene, ["remove", "clibox", "--timeout", "20"])
    assert removed.exit_code == 0, removed.output
    assert "clibox" not in ids_of(client.get_planning_scene(10.0))

    refused = runner.invoke(commands.scene, ["remove", "clibox", "--timeout", "20"])
    assert refused.exit_code == 1 and "refused" in refused.output
    bad = runner.invoke(
        commands.scene, ["add-box", "b", "--size", "0", "1", "1", "--position", "0", "0", "1"]
    )
    assert bad.exit_code == 2 and "--size" in bad.output

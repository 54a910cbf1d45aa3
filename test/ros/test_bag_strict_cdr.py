"""Every message of a recorded bag is exactly its CDR bytes, read by an independent strict
reader (rosbags, requirements-dev.txt) as a user of the bag would (issue 40, item 8).

rclpy's ``serialize_message`` returns the rmw's buffer whose length is Fast DDS's size
estimate: a ``JointState`` came back as 44 bytes, 36 of them the message, then leftover
memory. The recorder wrote that buffer as is, and rosbags refused
``/monitored_planning_scene`` ("CDR message size mismatch") in every node bag. rosbags
tolerates up to 3 bytes of end padding; re-encoding what it decoded must give exactly as
many bytes as the file holds, so no byte that is not the message is left unnoticed.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from ros_fixtures import REPO, idle_after_goal
from rosbags.highlevel import AnyReader

from erobs_bt.cli import main
from erobs_bt.ros.record.mcap_record import TOPIC_TYPES

from helpers import POSES, wait_for

MCAP_MAGIC = b"\x89MCAP0\r\n"


def strictly_read(bag: Path) -> Counter[str]:
    """Decode every message of ``bag`` with rosbags (its own schemas), check it is exactly
    its bytes; the message count per topic."""
    counts: Counter[str] = Counter()
    with AnyReader([bag]) as reader:
        for connection, _, rawdata in reader.messages():
            message = reader.deserialize(rawdata, connection.msgtype)
            again = reader.typestore.serialize_cdr(message, connection.msgtype)
            assert len(again) == len(rawdata), (
                f"{connection.topic}: {len(rawdata)} bytes stored, the message is {len(again)}: "
                f"{bytes(rawdata[len(again) :])!r} after it"
            )
            counts[connection.topic] += 1
    return counts


def test_every_topic_of_a_cli_run_reads_strictly(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    script = str(REPO / "trees/pause_between_units.json")
    result = CliRunner().invoke(main, ["run", script, "--speed", "20", "--auto-resume", "--log", str(log)])
    assert result.exit_code == 0, result.output
    counts = strictly_read(tmp_path / "run.mcap")
    for topic in ("/joint_states", "/erobs_bt/execution_state", "/erobs_bt/tree_snapshot"):
        assert counts[topic] > 0, counts
    assert (
        counts["/erobs_bt/execute/_action/feedback"] > 0 and counts["/erobs_bt/execute/_action/status"] == 2
    )


def test_every_topic_of_a_node_bag_reads_strictly(cells: Any) -> None:
    from erobs_bt.ros.client.client import ErobsBtClient

    move = {"task_type": "moveto", "target": "vial_scan", "planning_type": "joint"}
    text = json.dumps(
        {"run_name": "strict_bag", "start_gripper": "pipettor", "poses": POSES, "tasks": [move]}
    )
    with ErobsBtClient("/cell2/erobs_bt", domain_id=cells.environment.domain_id) as client:
        assert client.wait_for_server(30.0), cells.nodes["cell2"].output
        assert client.wait_for_state_stream(30.0)
        before = client.states.count
        run = client.send(text)
        assert run.accepted, run.rejection
        run.wait(120.0)
        assert run.status_name == "SUCCEEDED"
        idle = idle_after_goal(client, before, 10.0)
        assert idle is not None
    (log,) = sorted(cells.run_logs["cell2"].glob(f"*_{idle.goal_id}_strict_bag.jsonl"))
    bag = log.with_suffix(".mcap")
    wait_for(lambda: bag.exists() and bag.read_bytes().endswith(MCAP_MAGIC), 10.0, "the goal's bag closed")
    counts = strictly_read(bag)
    assert len(counts) == len(TOPIC_TYPES), f"every recorded topic has messages: {counts}"
    assert counts["/cell2/monitored_planning_scene"] > 0, counts


def test_an_rclpy_serialised_scene_is_exactly_its_bytes() -> None:
    from geometry_msgs.msg import Pose
    from moveit_msgs.msg import CollisionObject, PlanningScene
    from rclpy.serialization import deserialize_message, serialize_message
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore
    from shape_msgs.msg import SolidPrimitive

    from erobs_bt.ros.cdr import cdr_size, serialize_exact
    from erobs_bt.ros.record.mcap_record import message_definition

    box = CollisionObject(
        id="sample_rack",
        primitives=[SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.1, 0.2, 0.05])],
        primitive_poses=[Pose()],
        operation=CollisionObject.ADD,
    )
    box.header.frame_id = "base_link"
    scene = PlanningScene(name="cell", is_diff=True)
    scene.world.collision_objects = [box]
    data = serialize_exact(scene)
    assert len(data) == cdr_size(scene) <= len(serialize_message(scene))
    assert deserialize_message(data, PlanningScene) == scene
    name = "moveit_msgs/msg/PlanningScene"
    typestore = get_typestore(Stores.EMPTY)
    typestore.register(get_types_from_msg(message_definition(name), name))
    read: Any = typestore.deserialize_cdr(data, name)
    assert [o.id for o in read.world.collision_objects] == ["sample_rack"]
    assert list(read.world.collision_objects[0].primitives[0].dimensions) == [0.1, 0.2, 0.05]
    assert len(typestore.serialize_cdr(read, name)) == len(data)

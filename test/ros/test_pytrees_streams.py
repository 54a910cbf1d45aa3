"""py_trees_ros snapshot streams: a raw client finds the tree the way py-trees-tree-viewer
does (services of type OpenSnapshotStream), opens a stream and rebuilds the running tree."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

from conftest import Cells
from py_trees_ros_interfaces.msg import Behaviour, BehaviourTree
from py_trees_ros_interfaces.srv import CloseSnapshotStream, OpenSnapshotStream
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from erobs_bt.backends.ros2_control.context import init_context
from erobs_bt.ros.client.client import ErobsBtClient, Recorder

from helpers import POSES

OPEN_TYPE = "py_trees_ros_interfaces/srv/OpenSnapshotStream"


def call(future: Any) -> Any:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(10.0), "no reply"
    return future.result()


def key(msg: Any) -> str:
    return str(uuid.UUID(bytes=bytes(msg.uuid)))


#: What the viewer must find: the snapshot-stream services of both cells.
BOTH_STREAMS = {"/cell1/erobs_bt/snapshot_streams/open", "/cell2/erobs_bt/snapshot_streams/open"}


def test_a_raw_viewer_finds_the_tree_opens_a_stream_and_rebuilds_the_running_tree(cells: Cells) -> None:
    context = init_context(cells.environment.domain_id)
    node = Node("raw_tree_viewer", context=context, start_parameter_services=False)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinning = threading.Event()
    spinning.set()
    spinner = threading.Thread(
        target=lambda: [executor.spin_once(timeout_sec=0.05) for _ in iter(spinning.is_set, False)],
        daemon=True,
    )
    spinner.start()
    trees: Recorder[Any] = Recorder()
    try:
        with ErobsBtClient("/cell2/erobs_bt", domain_id=cells.environment.domain_id) as client:
            assert client.wait_for_server(30.0)
            found: list[str] = []
            deadline = threading.Event()
            for _ in range(200):
                found = sorted(
                    name for name, types in node.get_service_names_and_types() if OPEN_TYPE in types
                )
                # Both cells (discovery of the other one may still be under way).
                if set(found) >= BOTH_STREAMS:
                    break
                deadline.wait(0.05)
            assert set(found) >= BOTH_STREAMS, found
            opener = node.create_client(OpenSnapshotStream, "/cell2/erobs_bt/snapshot_streams/open")
            closer = node.create_client(CloseSnapshotStream, "/cell2/erobs_bt/snapshot_streams/close")
            assert opener.wait_for_service(timeout_sec=10.0) and closer.wait_for_service(timeout_sec=10.0)
            request = OpenSnapshotStream.Request(topic_name="")
            request.parameters.blackboard_data = True
            request.parameters.snapshot_period = float("inf")
            topic = call(opener.call_async(request)).topic_name
            assert topic.startswith("/cell2/erobs_bt/snapshot_streams/_snapshots_")
            latched = QoSProfile(
                depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            )
            node.create_subscription(BehaviourTree, topic, trees.add, latched)

            states_before = client.states.count
            move = {"task_type": "moveto", "target": "vial_scan", "planning_type": "joint"}
            text = json.dumps(
                {"start_gripper": "pipettor", "poses": POSES, "tasks": [move, {"task_type": "pause"}, move]}
            )
            run = client.send(text)
            assert run.accepted, run.rejection
            paused = client.wait_for_state("PAUSED", 120.0, since=states_before)
            assert paused is not None
            tree = trees.wait_for(
                lambda t: any(
                    b.name == "unit 2 - pause" and b.status == Behaviour.RUNNING for b in t.behaviours
                ),
                10.0,
            )
            client.cancel_all()
            run.wait(60.0)
            closed = call(closer.call_async(CloseSnapshotStream.Request(topic_name=topic))).result
            closed_again = call(closer.call_async(CloseSnapshotStream.Request(topic_name=topic))).result
    finally:
        spinning.clear()
        spinner.join()
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()

    assert tree is not None, f"no running tree on {topic}"
    assert tree.changed
    behaviours = {key(b.own_id): b for b in tree.behaviours}
    root = tree.behaviours[0]
    zero = str(uuid.UUID(int=0))
    assert root.name == "script" and key(root.parent_id) == zero and root.status == Behaviour.RUNNING
    assert root.type == Behaviour.SEQUENCE and root.additional_detail == "WithMemory"
    assert root.class_name == "erobs_bt.tree.compile.UnitSequence"
    # Parent and child ids agree both ways; every behaviour is reachable from the root.
    for b in tree.behaviours:
        for child in b.child_ids:
            assert key(behaviours[key(child)].parent_id) == key(b.own_id)
    reached, stack = set(), [key(root.own_id)]
    while stack:
        current = stack.pop()
        reached.add(current)
        stack.extend(key(c) for c in behaviours[current].child_ids)
    assert reached == set(behaviours)
    # The running unit is the root's current child, on the active path to the tip.
    current = behaviours[key(root.current_child_id)]
    assert current.name == "unit 2 - pause" and current.is_active
    assert current.blackbox_level == Behaviour.BLACKBOX_LEVEL_BIG_PICTURE
    tip = behaviours[key(root.tip_id)]
    assert tip.class_name.endswith("PauseStep") and tip.status == Behaviour.RUNNING and tip.is_active
    children = [behaviours[key(c)] for c in root.child_ids]
    units = [c for c in children if c.blackbox_level == Behaviour.BLACKBOX_LEVEL_BIG_PICTURE]
    assert [u.name.split(" - ", 1)[0] for u in units] == ["unit 1", "unit 2", "unit 3"]
    assert all(c.class_name.endswith("UnitBoundary") for c in children if c not in units)
    assert [u.status for u in units] == [Behaviour.SUCCESS, Behaviour.RUNNING, Behaviour.INVALID]
    blackboard = {kv.key: kv.value for kv in tree.blackboard_on_visited_path}
    assert blackboard["/goal_id"] == paused.goal_id and blackboard["/state"] == "PAUSED"
    assert blackboard["/unit"] == "2" and blackboard["/cache_status"] in ("HIT", "MISS", "INELIGIBLE")
    assert closed is True and closed_again is False


def test_behaviour_messages_filled_slot_by_slot_equal_the_constructors() -> None:
    from rclpy.serialization import serialize_message

    from erobs_bt.ros.node.pytrees_streams import behaviour_msg, uuid_msgs

    values = [uuid.uuid4(), uuid.uuid4()]
    own, parent = uuid_msgs(values)
    assert [key(own), key(parent)] == [str(v) for v in values]
    fields = {
        "name": "unit 1: pipettor",
        "class_name": "erobs_bt.tree.compile.Unit",
        "own_id": own,
        "parent_id": parent,
        "child_ids": [parent],
        "type": Behaviour.SEQUENCE,
        "additional_detail": "WithMemory",
        "blackbox_level": Behaviour.BLACKBOX_LEVEL_BIG_PICTURE,
    }
    for given in (fields, {"name": "leaf"}, {}):
        built = behaviour_msg(**given)
        assert built == Behaviour(**given)
        assert serialize_message(built) == serialize_message(Behaviour(**given))

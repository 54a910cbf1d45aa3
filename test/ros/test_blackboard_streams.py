"""py_trees_ros blackboard streams: a raw client does what ``py-trees-blackboard-watcher``
does (py_trees_ros 2.x ``blackboard.py`` and ``programs/blackboard_watcher.py``): it finds
the node's services by their types, lists the variables, opens a stream on some of them,
subscribes to the stream's topic with the watcher's QoS (reliable, volatile, depth 1),
receives the goal context as it changes, and closes the stream (issue 40, item 9: the
watcher found no blackboard service on the node)."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import Cells
from py_trees_ros_interfaces.srv import CloseBlackboardStream, GetBlackboardVariables, OpenBlackboardStream
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from ros_fixtures import NodeProcess, RosProcess, ros_environment
from std_msgs.msg import String

from erobs_bt.backends.ros2_control.context import init_context
from erobs_bt.ros.client.client import ErobsBtClient, Recorder

from helpers import POSES, SUCK, move, script_json

pytestmark = pytest.mark.ros

NODE = "/cell1/erobs_bt"
TYPES = {
    "list": "py_trees_ros_interfaces/srv/GetBlackboardVariables",
    "open": "py_trees_ros_interfaces/srv/OpenBlackboardStream",
    "close": "py_trees_ros_interfaces/srv/CloseBlackboardStream",
}
#: py_trees_ros's ``qos_profile_unlatched``, what the watcher subscribes with.
WATCHER_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    durability=DurabilityPolicy.VOLATILE,
    reliability=ReliabilityPolicy.RELIABLE,
)


def call(future: Any) -> Any:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(10.0), "no reply"
    return future.result()


def values(message: Any) -> dict[str, str]:
    """``name : value`` lines of a stream's message as a dict."""
    pairs = [line.split(" : ", 1) for line in message.data.splitlines()]
    return {name.strip(): value for name, value in pairs}


def test_the_watcher_lists_the_goal_context_and_follows_the_chosen_keys(cells: Cells) -> None:
    context = init_context(cells.environment.domain_id)
    node = Node("raw_blackboard_watcher", context=context, start_parameter_services=False)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinning = threading.Event()
    spinning.set()
    spinner = threading.Thread(
        target=lambda: [executor.spin_once(timeout_sec=0.05) for _ in iter(spinning.is_set, False)],
        daemon=True,
    )
    spinner.start()
    updates: Recorder[Any] = Recorder()
    try:
        with ErobsBtClient(NODE, domain_id=cells.environment.domain_id) as client:
            assert client.wait_for_server(30.0)
            # Discovery as the watcher does it: by type, within the namespace asked for.
            found: dict[str, list[str]] = {}
            pause = threading.Event()
            for _ in range(200):
                graph = node.get_service_names_and_types()
                found = {
                    key: [name for name, types in graph if kind in types and name.startswith(NODE)]
                    for key, kind in TYPES.items()
                }
                if all(found.values()):
                    break
                pause.wait(0.05)
            assert found == {
                "list": [f"{NODE}/blackboard_streams/get_variables"],
                "open": [f"{NODE}/blackboard_streams/open"],
                "close": [f"{NODE}/blackboard_streams/close"],
            }, found
            lister = node.create_client(GetBlackboardVariables, found["list"][0])
            opener = node.create_client(OpenBlackboardStream, found["open"][0])
            closer = node.create_client(CloseBlackboardStream, found["close"][0])
            for service in (lister, opener, closer):
                assert service.wait_for_service(timeout_sec=10.0)

            variables = list(call(lister.call_async(GetBlackboardVariables.Request())).variables)

            request = OpenBlackboardStream.Request(variables=["goal_id", "/state", "unit"])
            topic = call(opener.call_async(request)).topic
            node.create_subscription(String, topic, updates.add, WATCHER_QOS)
            first = updates.wait_for(lambda m: True, 10.0)

            states_before = client.states.count
            move = {"task_type": "moveto", "target": "vial_scan", "planning_type": "joint"}
            text = json.dumps(
                {"start_gripper": "pipettor", "poses": POSES, "tasks": [move, {"task_type": "pause"}, move]}
            )
            run = client.send(text)
            assert run.accepted, run.rejection
            paused = client.wait_for_state("PAUSED", 120.0, since=states_before)
            assert paused is not None
            at_pause = updates.wait_for(
                lambda m: values(m).get("/state") == "PAUSED" and values(m).get("/goal_id") == paused.goal_id,
                10.0,
            )
            client.cancel_all()
            run.wait(60.0)
            closed = call(closer.call_async(CloseBlackboardStream.Request(topic_name=topic))).result
            closed_again = call(closer.call_async(CloseBlackboardStream.Request(topic_name=topic))).result
    finally:
        spinning.clear()
        spinner.join()
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()

    assert variables == ["/goal_id", "/state", "/unit", "/cache_key", "/cache_status", "/fault"], variables
    assert topic.startswith(f"{NODE}/blackboard_streams/_watcher_"), topic
    assert first is not None, f"no current values on {topic} for its first subscriber"
    assert set(values(first)) == {"/goal_id", "/state", "/unit"}, first.data
    assert at_pause is not None, f"the pause never reached {topic}"
    assert values(at_pause)["/unit"] == "2", at_pause.data
    assert closed is True and closed_again is False


WATCHER = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler);"
    "from py_trees_ros.programs.blackboard_watcher import main; "
    "sys.argv[0] = 'py-trees-blackboard-watcher'; main(sys.argv[1:])"
)


@pytest.mark.skipif(
    importlib.util.find_spec("py_trees_ros") is None,
    reason="py_trees_ros is not importable (not installable from PyPI; see the README's real-tools section)",
)
def test_py_trees_blackboard_watcher_lists_and_follows_the_goal_context(tmp_path: Path) -> None:
    """py_trees_ros's own program, unchanged, where it is importable (as test_py_trees_ros_tools)."""
    with ros_environment(tmp_path / "ros_log") as environment:
        node = NodeProcess(environment, {"speed": 5.0})
        node.start()
        try:
            listing = RosProcess(environment, [sys.executable, "-c", WATCHER, "--list"], None, cwd=tmp_path)
            listing.start()
            assert listing.wait_for_line(lambda line: line.strip() == "/cache_status", 60.0), listing.output
            watcher = RosProcess(
                environment, [sys.executable, "-c", WATCHER, "/state", "unit"], None, cwd=tmp_path
            )
            watcher.start()
            try:
                assert watcher.wait_for_line(lambda line: "creating subscription" in line, 60.0), (
                    watcher.output
                )
                assert watcher.wait_for_line(lambda line: "/state" in line, 30.0), watcher.output
                with ErobsBtClient(domain_id=environment.domain_id) as client:
                    assert client.wait_for_server(30.0), node.output
                    run = client.send(script_json([move("a"), SUCK, move("home")]))
                    assert run.accepted, run.rejection
                    assert run.wait(120.0).success
                assert watcher.wait_for_line(lambda line: line.split() == ["/unit", ":", "3"], 30.0), (
                    watcher.output
                )
            finally:
                watcher.stop()
                listing.stop()
        finally:
            assert node.stop() == 0, node.output

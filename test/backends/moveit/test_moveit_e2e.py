"""End to end: the ``erobs_bt`` node with ``backend: moveit`` against ``erobs_bt_sim_move_group``.

Two processes in this module's private domain: the simulated move_group (speed 20) and the
node (``backend:=moveit``, ``tools: simulated`` since the simulated move_group's cell has no
tool hardware). A real action client sends scripts; move_group's ``~/events`` show every plan
and every ExecuteTrajectory it served, so the tests count what reached "MoveIt". Every wait is
on a message, an event or the goal's result.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ros_fixtures import NodeProcess, RosEnvironment, RosProcess, ros_environment
from std_msgs.msg import String

from erobs_bt.backends.ros2_control.context import init_context
from erobs_bt.doubles.sim_move_group import READY_PREFIX, ROS_NODE_NAME
from erobs_bt.ros.client.client import ErobsBtClient, GoalRun, Recorder, latched_qos

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[3]
FULL_EXPERIMENT = REPO / "config" / "full_experiment.json"
POSES = REPO / "config" / "poses.yaml"
SPEED = 20.0
GOAL_TIMEOUT = 300.0
#: The node's moveit configuration (a module importing these fixtures may set its own).
MOVEIT_YAML = "tools: simulated\n"


class MoveGroupEvents:
    """The simulated move_group's ``~/events`` (JSON lines), decoded."""

    def __init__(self, domain_id: int) -> None:
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node

        self.context = init_context(domain_id)
        self.node = Node("move_group_observer", context=self.context, start_parameter_services=False)
        self.events: Recorder[dict[str, Any]] = Recorder(maxlen=100_000)
        self.node.create_subscription(
            String,
            f"/{ROS_NODE_NAME}/events",
            lambda m: self.events.add(json.loads(m.data)),
            latched_qos(10000),
        )
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        import threading

        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        with contextlib.suppress(ExternalShutdownException):
            while self.context.ok():
                self.executor.spin_once(timeout_sec=0.05)

    def of(self, kind: str, since: int = 0) -> list[dict[str, Any]]:
        return [e for e in self.events.items()[since:] if e["event"] == kind]

    def wait_count(
        self, kind: str, count: int, since: int = 0, timeout: float = 30.0
    ) -> list[dict[str, Any]]:
        """The ``kind`` events since ``since`` once there are ``count`` of them (or on timeout)."""
        self.events.wait_for(lambda _e: len(self.of(kind, since)) >= count, timeout, since=since)
        return self.of(kind, since)

    def close(self) -> None:
        self.context.try_shutdown()
        self.thread.join(5.0)
        self.executor.shutdown()
        self.node.destroy_node()


@pytest.fixture(scope="module")
def ros_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RosEnvironment]:
    with ros_environment(tmp_path_factory.mktemp("ros_log")) as environment:
        yield environment


@pytest.fixture(scope="module")
def move_group(ros_env: RosEnvironment, request: pytest.FixtureRequest) -> Iterator[RosProcess]:
    """The simulated move_group, with the using module's ``MOVE_GROUP_OPTIONS`` (default none)."""
    options = list(getattr(request.module, "MOVE_GROUP_OPTIONS", ()))
    command = [sys.executable, "-m", "erobs_bt.doubles.sim_move_group", "--speed", str(SPEED), *options]
    process = RosProcess(ros_env, command, READY_PREFIX).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def observer(move_group: RosProcess) -> Iterator[MoveGroupEvents]:
    watcher = MoveGroupEvents(move_group.environment.domain_id)
    yield watcher
    watcher.close()


@pytest.fixture(scope="module")
def node(
    ros_env: RosEnvironment,
    observer: MoveGroupEvents,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[NodeProcess]:
    """The node with ``backend: moveit`` and the using module's ``MOVEIT_YAML``."""
    moveit = tmp_path_factory.mktemp("moveit") / "moveit.yaml"
    moveit.write_text(getattr(request.module, "MOVEIT_YAML", MOVEIT_YAML))
    process = NodeProcess(
        ros_env, {"backend": "moveit", "moveit_config": str(moveit), "poses_file": str(POSES)}
    )
    process.start()
    yield process
    assert process.stop() == 0, process.output


@pytest.fixture(scope="module")
def client(node: NodeProcess) -> Iterator[ErobsBtClient]:
    with ErobsBtClient(domain_id=node.environment.domain_id) as ros_client:
        assert ros_client.wait_for_server(30.0), node.output
        assert ros_client.wait_for_state_stream(30.0), node.output
        yield ros_client


def finish(client: ErobsBtClient, run: GoalRun) -> Any:
    """Wait for the goal's result, resuming every pause step on the way."""
    assert run.accepted, run.rejection
    seen = client.states.count
    while not run.done():
        paused = client.states.wait_for(lambda m: m.state == "PAUSED", 0.5, since=seen)
        if paused is not None:
            seen = client.states.count
            client.resume()
    return run.wait(GOAL_TIMEOUT)


def move(target: str) -> dict[str, Any]:
    return {"task_type": "moveto", "target": target, "planning_type": "joint"}


def test_a_preview_plans_through_moveit_and_moves_nothing(
    client: ErobsBtClient, observer: MoveGroupEvents
) -> None:
    since = observer.events.count
    run = client.send(
        json.dumps({"start_gripper": "epick", "tasks": [move("transport"), move("hot_plate_above")]}),
        dry_run=True,
    )
    result = finish(client, run)
    assert result.success, result.error_message
    plans = observer.wait_count("plan", 2, since)
    assert len(plans) >= 2 and all(
        p.get("service") in ("plan_kinematic_path", "compute_cartesian_path") for p in plans
    ), plans
    assert not observer.of("execute", since), "a preview never executes"


def test_the_full_experiment_runs_through_moveit(
    client: ErobsBtClient, observer: MoveGroupEvents, node: NodeProcess
) -> None:
    since = observer.events.count
    result = finish(client, client.send(FULL_EXPERIMENT.read_text()))
    assert result.success, (result.error_message, node.output[-3000:])
    assert (result.completed_steps, result.total_steps) == (
        29,
        29,
    ) or result.completed_steps == result.total_steps
    executed = observer.of("execute", since)
    results = observer.wait_count("execute_result", len(executed), since)
    assert executed and len(results) == len(executed)
    assert {r["outcome"] for r in results} == {"succeeded"}
    scenes = [e for e in observer.of("scene", since) if e.get("source") == "apply_planning_scene"]
    attached = [tuple(e["attached"]) for e in scenes if e.get("ok")]
    # Docked and loaded through the planning scene: the pipettor then the ePick on the flange.
    assert ("erobs_tool_pipettor",) in attached and attached[-1] == ("erobs_tool_epick",), attached


def test_a_repeated_goal_replays_the_stored_trajectory_through_execute_trajectory(
    client: ErobsBtClient, observer: MoveGroupEvents
) -> None:
    assert finish(
        client, client.send(json.dumps({"start_gripper": "epick", "tasks": [move("transport")]}))
    ).success
    text = json.dumps({"start_gripper": "epick", "tasks": [move("hot_plate_above"), move("transport")]})
    assert client.clear_cache()[0]
    first = client.send(text)
    assert finish(client, first).success
    since = observer.events.count
    second = client.send(text)
    assert finish(client, second).success
    assert "MISS" in {f.cache_status for f in first.feedback.items()}
    assert "HIT" in {f.cache_status for f in second.feedback.items()}
    assert not observer.of("plan", since), "a cache HIT plans nothing"
    replayed = observer.wait_count("execute", 2, since)
    assert len(replayed) == 2 and all(e["server"] == "execute_trajectory" for e in replayed), replayed


def test_pause_cancel_and_stop(client: ErobsBtClient, observer: MoveGroupEvents) -> None:
    assert finish(
        client, client.send(json.dumps({"start_gripper": "epick", "tasks": [move("transport")]}))
    ).success
    tasks = [move("hot_plate_above"), move("transport")]
    # Pause at the pause step, then cancel while paused: nothing after it runs.
    since, states = observer.events.count, client.states.count
    run = client.send(
        json.dumps({"start_gripper": "epick", "tasks": [*tasks, {"task_type": "pause"}, *tasks]})
    )
    assert run.accepted
    # This goal's pause (an earlier test's goal also paused: its PAUSED is in the recorder).
    assert client.states.wait_for(lambda m: m.state == "PAUSED", 60.0, since=states) is not None
    client.cancel_all()
    result = run.wait(GOAL_TIMEOUT)
    assert run.status_name == "CANCELED" and result.completed_steps == 2
    # The two moves before the pause reached move_group; nothing after them did.
    assert len(observer.wait_count("execute_result", 2, since)) == 2
    assert len(observer.of("execute", since)) == 2
    # Stop mid-motion: move_group's goal is cancelled, the arm decelerates.
    since = observer.events.count
    run = client.send(json.dumps({"start_gripper": "epick", "tasks": tasks * 4}))
    assert run.accepted
    assert observer.events.wait_for(lambda e: e["event"] == "execute", 60.0, since=since) is not None
    assert client.stop()[0]
    result = run.wait(GOAL_TIMEOUT)
    assert not result.success
    assert (
        observer.events.wait_for(
            lambda e: e["event"] == "execute_result" and e["outcome"] == "preempted", 30.0, since=since
        )
        is not None
    )

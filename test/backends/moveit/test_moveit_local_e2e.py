"""End to end with ``planning: local``: the ``erobs_bt`` node (``backend: moveit``) plans the full
example in its own process and ``erobs_bt_sim_move_group`` only executes (and answers the scene
reads). Its own private domain, move_group and node, as test_moveit_e2e.py (whose event reader
and goal runner it uses)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from ros_fixtures import NodeProcess, RosEnvironment, RosProcess, ros_environment
from test_moveit_e2e import FULL_EXPERIMENT, POSES, SPEED, MoveGroupEvents, finish

from erobs_bt.doubles.sim_move_group import READY_PREFIX
from erobs_bt.ros.client.client import ErobsBtClient

from helpers import wait_for

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module")
def ros_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RosEnvironment]:
    with ros_environment(tmp_path_factory.mktemp("ros_log")) as environment:
        yield environment


@pytest.fixture(scope="module")
def observer(ros_env: RosEnvironment) -> Iterator[MoveGroupEvents]:
    # A plan latency no run could hide: a single planning request would show in the goal's time too.
    command = [
        sys.executable,
        "-m",
        "erobs_bt.doubles.sim_move_group",
        "--speed",
        str(SPEED),
        "--plan-latency",
        "30",
    ]
    process = RosProcess(ros_env, command, READY_PREFIX).start()
    watcher = MoveGroupEvents(ros_env.domain_id)
    yield watcher
    watcher.close()
    process.stop()


@pytest.fixture(scope="module")
def node(
    ros_env: RosEnvironment, observer: MoveGroupEvents, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodeProcess]:
    moveit = tmp_path_factory.mktemp("moveit") / "moveit.yaml"
    moveit.write_text("tools: simulated\nplanning: local\n")
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


def test_the_full_experiment_is_planned_here_and_executed_by_move_group(
    client: ErobsBtClient, observer: MoveGroupEvents, node: NodeProcess
) -> None:
    since = observer.events.count
    result = finish(client, client.send(FULL_EXPERIMENT.read_text()))
    assert result.success, result.error_message
    assert result.completed_steps == result.total_steps
    executed = observer.of("execute", since)
    results = observer.wait_count("execute_result", len(executed), since)
    assert len(executed) >= 20 and {r["outcome"] for r in results} == {"succeeded"}
    assert not observer.of("plan", since), "move_group was asked for no plan"
    # The operator sees on the node's own log that move_group's robot was checked.
    line = "planning: local: /move_group's robot_description checked"
    wait_for(lambda: line in node.output, 30.0, f"{line!r} in the node's output")

"""``~/reset_simulation`` (``std_srvs/srv/Empty``) and ``erobs-bt reset-sim`` against a real
node (issue 23, item 5): FULL_EXPERIMENT_RUN runs twice on one node with a reset between;
a reset while a goal runs is refused and changes nothing; the CLI reports both outcomes.

The Empty response carries no answer: the node logs it (``/rosout``) and the client reads
it there (:meth:`erobs_bt.ros.client.client.ErobsBtClient.reset_simulation`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import require_samples
from ros_fixtures import NodeProcess, RosEnvironment, ready_client

from helpers import LED, move, script

pytestmark = pytest.mark.ros

SPEED = 200.0
GOAL_TIMEOUT = 120.0
#: The run-log folder of each node process (by pid).
RUN_LOGS: dict[int, Path] = {}


@pytest.fixture(scope="module")
def node(ros_env: RosEnvironment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    samples_dir = require_samples()
    runs = tmp_path_factory.mktemp("runs")
    process = NodeProcess(
        ros_env,
        {"speed": SPEED, "run_log_dir": str(runs), "poses_file": str(samples_dir / "cms_poses.yaml")},
    )
    process.start()
    RUN_LOGS[process.pid] = runs
    yield process
    process.stop()


@pytest.fixture
def client(node: NodeProcess) -> Iterator[Any]:
    with ready_client(node) as ready:
        yield ready


def run_resuming(client: Any, text: str) -> Any:
    """Send a goal and resume each of its ``pause`` steps (an operator pressing Resume)."""
    since = client.states.count
    goal = client.send(text)
    assert goal.accepted, goal.rejection
    while not goal.done():
        paused = client.states.wait_for(lambda m: m.state == "PAUSED", 1.0, since=since)
        if paused is not None:
            since = client.states.count
            ok, message = client.resume()
            assert ok or goal.done(), message
    return goal.wait(GOAL_TIMEOUT)


def test_full_experiment_run_twice_on_one_node_with_a_reset_between(
    client: Any, node: NodeProcess, samples_dir: Path
) -> None:
    text = (samples_dir / "FULL_EXPERIMENT_RUN.json").read_text(encoding="utf-8")
    first = run_resuming(client, text)
    assert first.error_code == "", first.error_message
    ok, message = client.reset_simulation(timeout=30.0)
    assert ok, message
    assert message.startswith("simulation reset: epick attached; docks 1: hande"), message
    assert "pipettor with tip, 0 µL" in message
    # The run log of the goal before the reset tells of it, after the goal's end.
    (first_log,) = [p for p in RUN_LOGS[node.pid].glob("*.jsonl") if "FULL_EXPERIMENT" in p.name]
    records = [json.loads(line) for line in first_log.read_text(encoding="utf-8").splitlines()]
    assert records[-1]["event"] == "simulation_reset", records[-3:]
    assert records[-1]["by"] == "service /erobs_bt/reset_simulation"
    second = run_resuming(client, text)
    assert second.error_code == "", second.error_message
    assert client.reset_simulation(timeout=30.0)[0]  # the next test starts from a new cell


def test_a_reset_while_a_goal_runs_is_refused_and_changes_nothing(client: Any) -> None:
    since = client.states.count
    goal = client.send(script([move("sample_scan_1"), {"task_type": "pause"}, LED], gripper="pipettor"))
    assert goal.accepted, goal.rejection
    paused = client.states.wait_for(lambda m: m.state == "PAUSED", GOAL_TIMEOUT, since=since)
    assert paused is not None
    gripper = client.grippers.latest()
    ok, message = client.reset_simulation(timeout=30.0)
    assert not ok
    assert message == f"reset refused: busy: {paused.goal_id} is PAUSED", message
    assert client.grippers.latest() == gripper == "pipettor"  # nothing changed: no tool put back
    assert client.resume()[0]
    assert goal.wait(GOAL_TIMEOUT).error_code == ""
    since = client.grippers.count
    assert client.reset_simulation(timeout=30.0)[0]
    # The start tool is attached again, and the latched gripper topic says so.
    assert client.grippers.wait_for(lambda g: g == "epick", 30.0, since=since) == "epick"


def test_erobs_bt_reset_sim_reports_a_reset_and_a_refusal_with_its_exit_code(
    client: Any, node: NodeProcess
) -> None:
    assert node.environment is not None
    env = {**node.environment.env, "COLUMNS": "300", "NO_COLOR": "1"}
    command = [sys.executable, "-m", "erobs_bt", "reset-sim", "--timeout", "30"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok simulation reset: epick attached" in done.stdout, done.stdout

    since = client.states.count
    goal = client.send(script([{"task_type": "pause"}, LED], gripper="pipettor"))
    assert goal.accepted, goal.rejection
    paused = client.states.wait_for(lambda m: m.state == "PAUSED", GOAL_TIMEOUT, since=since)
    assert paused is not None
    try:
        refused = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert f"reset refused: busy: {paused.goal_id} is PAUSED" in refused.stdout, refused.stdout
        assert "refused reset refused" not in refused.stdout, refused.stdout
    finally:
        client.resume()
        goal.wait(GOAL_TIMEOUT)
    assert "simulation reset by service /erobs_bt/reset_simulation: epick attached" in node.output

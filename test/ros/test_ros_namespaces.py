"""ROS conventions: relative names moved by remapping, so two cells run side by side in one
domain (``/cell1`` and ``/cell2``), each with its own goal, joint states and run logs."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import Cells
from ros_fixtures import idle_after_goal

from erobs_bt.ros.client import commands
from erobs_bt.ros.client.client import ErobsBtClient, default_names
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.viz.runlog import REPLAY_EVENTS, read_run_log

from helpers import POSES

GOAL_TIMEOUT = 120.0


def script(run_name: str, *targets: str) -> str:
    tasks = [{"task_type": "moveto", "target": t, "planning_type": "joint"} for t in targets]
    return json.dumps({"run_name": run_name, "start_gripper": "pipettor", "poses": POSES, "tasks": tasks})


@pytest.fixture(scope="module")
def clients(cells: Cells) -> Iterator[dict[str, ErobsBtClient]]:
    opened: dict[str, ErobsBtClient] = {}
    try:
        for ns in ("cell1", "cell2"):
            client = opened[ns] = ErobsBtClient(
                f"/{ns}/erobs_bt", joint_states=True, domain_id=cells.environment.domain_id
            )
            assert client.wait_for_server(30.0), cells.nodes[ns].output
            assert client.wait_for_state_stream(30.0)
        yield opened
    finally:
        for client in opened.values():
            client.close()


def test_default_names_follow_the_node_namespace() -> None:
    names = default_names("/cell2/erobs_bt")
    assert names["execute"] == "/cell2/erobs_bt/execute"
    assert names["joint_states"] == "/cell2/joint_states"
    assert names["beambot_execution"] == "/cell2/beambot_execution"
    assert default_names()["joint_states"] == "/joint_states"


def test_every_name_of_each_cell_is_under_its_namespace(clients: dict[str, ErobsBtClient]) -> None:
    graph = clients["cell1"].node
    wanted = {f"/{ns}/erobs_bt/{name}" for ns in ("cell1", "cell2") for name in ("pause", "get_parameters")}
    # Discovery is asynchronous: look again until this node has seen both cells' services (at
    # most 30 s); the assertions below then name what is missing.
    deadline = time.monotonic() + 30.0
    while not wanted <= {name for name, _types in graph.get_service_names_and_types()}:
        if time.monotonic() > deadline:
            break
        threading.Event().wait(0.05)
    topics = {name for name, _types in graph.get_topic_names_and_types()}
    services = {name for name, _types in graph.get_service_names_and_types()}
    for ns in ("cell1", "cell2"):
        assert f"/{ns}/joint_states" in topics
        assert f"/{ns}/erobs_bt/execution_state" in topics
        assert f"/{ns}/erobs_bt/pause" in services
        assert f"/{ns}/erobs_bt/get_parameters" in services
    assert "/joint_states" not in topics and "/erobs_bt/execute/_action/status" not in topics


def test_two_cells_run_a_goal_each_at_the_same_time(cells: Cells, clients: dict[str, ErobsBtClient]) -> None:
    joints_before = {ns: c.joint_states.count for ns, c in clients.items()}
    states_before = {ns: c.states.count for ns, c in clients.items()}
    runs = {
        "cell1": clients["cell1"].send(script("cell_one_run", "sample_scan_1", "vial_scan")),
        "cell2": clients["cell2"].send(script("cell_two_run", "sample_scan_1", "vial_scan")),
    }
    for run in runs.values():
        assert run.accepted, run.rejection
    results = {ns: run.wait(GOAL_TIMEOUT) for ns, run in runs.items()}

    assert {ns: run.status_name for ns, run in runs.items()} == {"cell1": "SUCCEEDED", "cell2": "SUCCEEDED"}
    assert (results["cell1"].total_steps, results["cell2"].total_steps) == (2, 2)
    for ns, client in clients.items():
        moving = client.joint_states.wait_for(
            lambda m: any(abs(v) > 1e-6 for v in m.velocity), 5.0, since=joints_before[ns]
        )
        assert moving is not None and tuple(moving.name) == JOINT_NAMES, f"no motion on /{ns}/joint_states"

    # Each node wrote the goal's run log, named by goal id and script, in its own folder.
    for ns, run_name, steps in (("cell1", "cell_one_run", 2), ("cell2", "cell_two_run", 2)):
        idle = idle_after_goal(clients[ns], states_before[ns], 30.0)
        assert idle is not None
        logs = sorted(cells.run_logs[ns].glob(f"*_{idle.goal_id}_{run_name}.jsonl"))
        assert len(logs) == 1, sorted(p.name for p in cells.run_logs[ns].iterdir())
        # The orchestrator's events, in order (the replay records, written at once from the
        # threads that report them, interleave within one batch: erobs_bt.ros.node.runlogs).
        records = [r for r in read_run_log(logs[0]) if r["event"] not in REPLAY_EVENTS]
        events = [r["event"] for r in records]
        assert events[0] == "state" and "goal_started" in events and events[-1] == "goal_finished"
        assert {r["goal_id"] for r in records} == {idle.goal_id}
        finished: dict[str, Any] = records[-1]
        assert (finished["status"], finished["completed_steps"], finished["total_steps"]) == (
            "SUCCEEDED",
            steps,
            steps,
        )


def test_send_with_no_node_in_reach_hints_at_the_domain_and_exits_3(cells: Cells, tmp_path: Path) -> None:
    script_file = tmp_path / "move.json"
    script_file.write_text(script("unreachable", "vial_scan"))

    sent = CliRunner().invoke(
        commands.send, [str(script_file), "--node", "/nowhere/erobs_bt", "--timeout", "1"]
    )

    assert sent.exit_code == commands.EXIT_UNREACHABLE == 3, sent.output
    assert "/nowhere/erobs_bt/execute" in sent.output
    assert f"ROS_DOMAIN_ID={cells.environment.domain_id}" in sent.output and "discovery range" in sent.output

"""The MADSci node (``erobs-bt madsci-node``) driven by MADSci's own REST node client.

Two erobs_bt ROS nodes, ``/cell1/erobs_bt`` and ``/cell2/erobs_bt`` (simulated cells at 5x,
so a six-move batch lasts a few seconds), run in one private ROS domain, each with its own
MADSci node process in front (``--node /cellN/erobs_bt``, a private 127.0.0.1 port). An
observer :class:`~erobs_bt.ros.client.client.ErobsBtClient` per cell watches what each ROS node
publishes, and each node's run log (its ``goal_finished`` record) is what the MADSci result
is compared with. Waits are on states: MADSci's status and state as its client reads them,
the ROS nodes' latched execution states. A third cell, with an injected execution timeout,
faults and is reset, goes away and comes back. Every process is stopped by its PID.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from madsci.client.node.rest_node_client import RestNodeClient
from madsci.common.types.action_types import ActionRequest, ActionResult, ActionStatus
from madsci.common.types.node_types import AdminCommands, NodeStatus
from ros_fixtures import REPO, NodeProcess, RosEnvironment, RosProcess

from erobs_bt.ros.client.client import ErobsBtClient

from helpers import LED, free_port, move, script

pytestmark = pytest.mark.ros

SPEED = 5.0
WAIT = 120.0


LONG_BATCH = [move("sample_scan_1"), move("pipettor_scan")] * 3
#: units: 1 = six-move batch, 2 = LED, 3 = move, 4 = LED, 5 = move (10 steps)
FIVE_UNITS = script([*LONG_BATCH, LED, move("vial_scan"), LED, move("safe_sample_transport")])
TWO_MOVES = script([move("vial_scan"), move("safe_sample_transport")])


def until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``check()`` (a REST read) until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


def start_and_reach_unit(node: MadsciNode, script_text: str, unit: int) -> str:
    """Start ``run_script`` and wait until the MADSci state says the new goal runs ``unit``; its action id."""
    before = node.state()["goal_id"]
    action_id = node.start_action("run_script", script=script_text)
    until(
        lambda: (state := node.state())["goal_id"] != before and state["unit_index"] == unit,
        WAIT,
        f"unit {unit} of the new goal to start",
    )
    return action_id


class MadsciNode:
    """``erobs-bt madsci-node`` in a subprocess, with MADSci's REST client for it."""

    def __init__(self, environment: RosEnvironment, tmp: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        settings = tmp / f"madsci_{self.port}"
        (settings / ".madsci").mkdir(parents=True)  # MADSci falls back to ~/.madsci without one
        self.process = RosProcess(
            environment,
            [sys.executable, "-m", "erobs_bt", "madsci-node", "--port", str(self.port), *args],
            "erobs-bt madsci-node:",
            env={"MADSCI_SETTINGS_DIR": str(settings)},
        )
        self.client: RestNodeClient | None = None

    def start(self) -> MadsciNode:
        self.process.start()
        self.client = RestNodeClient(url=self.url)
        until(
            self._serving, 60.0, f"the MADSci node at {self.url} to finish starting:\n{self.process.output}"
        )
        return self

    def _serving(self) -> bool:
        try:
            return not self.status().initializing
        except Exception:  # not listening yet
            return False

    def status(self) -> NodeStatus:
        assert self.client is not None
        return self.client.get_status()

    def state(self) -> dict[str, Any]:
        assert self.client is not None
        return self.client.get_state()

    def start_action(self, name: str, **args: Any) -> str:
        """Create and start an action without waiting; its id."""
        assert self.client is not None
        result = self.client.send_action(ActionRequest(action_name=name, args=args), await_result=False)
        return result.action_id

    def result(self, name: str, action_id: str, timeout: float = WAIT) -> ActionResult:
        """The action's final result (errors, json_result, files), once it is terminal."""
        assert self.client is not None
        until(
            lambda: self.client.get_action_status_by_name(name, action_id).is_terminal,
            timeout,
            f"{name} {action_id} to end",
        )
        return self.client.get_action_result_by_name(name, action_id)

    def run(self, name: str, timeout: float = WAIT, **args: Any) -> ActionResult:
        return self.result(name, self.start_action(name, **args), timeout)

    def admin(self, command: AdminCommands) -> Any:
        assert self.client is not None
        # The value: the client puts its argument in the URL with an f-string, and Python 3.11
        # formats a str enum member as "AdminCommands.PAUSE".
        return self.client.send_admin_command(command.value)

    def stop(self) -> int:
        if self.client is not None:
            self.client.close()
        return self.process.stop()


def finished_record(run_logs: Path, goal_id: str) -> dict[str, Any]:
    """The ``goal_finished`` record of ``goal_id`` in the ROS node's own run log."""
    (log,) = run_logs.glob(f"*_{goal_id}_*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    (record,) = [r for r in records if r.get("event") == "goal_finished"]
    return record


def matches_the_node(json_result: dict[str, Any], run_logs: Path) -> None:
    record = finished_record(run_logs, json_result["goal_id"])
    assert json_result["status"] == record["status"], (json_result, record)
    assert json_result["error_code"] == record["error_code"], (json_result, record)
    assert json_result["error_message"] == record["error"], (json_result, record)
    assert json_result["completed_steps"] == record["completed_steps"], (json_result, record)
    assert json_result["total_steps"] == record["total_steps"], (json_result, record)


@pytest.fixture(scope="module", autouse=True)
def madsci_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """MADSci's settings folder for this process's MADSci clients: a temporary folder holding
    the ``.madsci/`` (logs, its id registry) that MADSci looks for from ``MADSCI_SETTINGS_DIR``
    upwards, falling back to ``~/.madsci``."""
    folder = tmp_path_factory.mktemp("madsci_settings")
    (folder / ".madsci").mkdir()  # the folder MADSci looks for from there (else ~/.madsci)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MADSCI_SETTINGS_DIR", str(folder))
        yield folder


def test_the_node_configuration_reads_the_environment_not_the_process_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MADSci settings parse the process's arguments over the values given: ``erobs-bt
    madsci-node --speed 2`` must not be read a second time, nor a MADSci-style ``--node_name``."""
    from erobs_bt.madsci.node import ErobsBtNodeConfig

    monkeypatch.setattr(sys, "argv", ["erobs-bt", "madsci-node", "--speed", "9", "--node_name", "other"])
    monkeypatch.setenv("NODE_RATE_LIMIT_REQUESTS", "500")

    config = ErobsBtNodeConfig(speed=2.0, node_name="cell1")

    assert (config.speed, config.node_name) == (2.0, "cell1")
    assert config.rate_limit_requests == 500  # MADSci's own NODE_* variables still apply


# -- two cells, each with a MADSci node -------------------------------------------------------
@pytest.fixture(scope="module")
def run_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {ns: tmp_path_factory.mktemp(f"runs_{ns}") for ns in ("cell1", "cell2")}


@pytest.fixture(scope="module")
def ros_cells(ros_env: RosEnvironment, run_logs: dict[str, Path]) -> Iterator[dict[str, NodeProcess]]:
    nodes = {
        ns: NodeProcess(
            ros_env, {"speed": SPEED, "run_log_dir": str(run_logs[ns])}, ros_arguments=["-r", f"__ns:=/{ns}"]
        )
        for ns in ("cell1", "cell2")
    }
    started = []
    try:
        for process in nodes.values():
            started.append(process.start())
        yield nodes
    finally:
        for process in started:
            assert process.stop() == 0, process.output


@pytest.fixture(scope="module")
def observers(
    ros_cells: dict[str, NodeProcess], ros_env: RosEnvironment
) -> Iterator[dict[str, ErobsBtClient]]:
    clients = {ns: ErobsBtClient(f"/{ns}/erobs_bt", domain_id=ros_env.domain_id) for ns in ros_cells}
    try:
        for ns, client in clients.items():
            assert client.wait_for_server(30.0), ros_cells[ns].output
            assert client.wait_for_state_stream(30.0)
        yield clients
    finally:
        for client in clients.values():
            client.close()


@pytest.fixture(scope="module")
def madsci(
    ros_cells: dict[str, NodeProcess],
    ros_env: RosEnvironment,
    run_logs: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, MadsciNode]]:
    tmp = tmp_path_factory.mktemp("madsci")
    nodes = {
        ns: MadsciNode(ros_env, tmp, "--node", f"/{ns}/erobs_bt", "--run-log-dir", str(run_logs[ns]))
        for ns in ros_cells
    }
    started = []
    try:
        for node in nodes.values():
            started.append(node.start())
        yield nodes
    finally:
        for node in started:
            assert node.stop() == 0, node.process.output


def test_info_declares_the_actions_and_admin_commands(madsci: dict[str, MadsciNode]) -> None:
    assert madsci["cell1"].client is not None
    info = madsci["cell1"].client.get_info()

    assert info.node_name == "cell1"
    assert set(info.actions) == {"run_script", "validate", "reset_fault", "clear_cache"}
    run_script = info.actions["run_script"]
    assert set(run_script.args) == {"script", "dry_run"}
    assert run_script.args["script"].required and not run_script.args["dry_run"].required
    assert {"json_result", "run_log", "bag"} == set(run_script.results)
    assert {"pause", "resume", "cancel", "safety_stop", "shutdown", "reset"} <= {
        str(getattr(c, "value", c)) for c in info.capabilities.admin_commands
    }
    # Served on 127.0.0.1 only (the default host).
    assert str(info.node_url) == f"{madsci['cell1'].url}/", info.node_url
    listening = {
        (c.laddr.ip, c.laddr.port)
        for c in psutil.Process(madsci["cell1"].process.pid).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    }
    assert listening == {("127.0.0.1", madsci["cell1"].port)}, listening
    status = madsci["cell1"].status()
    assert status.ready and not status.errored, status
    state = madsci["cell1"].state()
    assert state["cell"] == "/cell1/erobs_bt" and state["reachable"] and state["state"] == "IDLE", state
    assert state["docks_at_start"] == {"1": "hande", "2": "2fg7", "3": "pipettor", "4": None}, state


def test_two_cells_run_concurrently_one_goal_each_and_results_match_the_nodes(
    madsci: dict[str, MadsciNode], observers: dict[str, ErobsBtClient], run_logs: dict[str, Path]
) -> None:
    long_id = madsci["cell1"].start_action("run_script", script=FIVE_UNITS)
    short_id = madsci["cell2"].start_action("run_script", script=TWO_MOVES)

    short = madsci["cell2"].result("run_script", short_id)
    # cell2 finished while cell1 still runs its goal: neither waits for the other.
    cell1_status = madsci["cell1"].status()
    cell1_view = observers["cell1"].states.latest()
    second = madsci["cell1"].run("run_script", script=TWO_MOVES)
    # The unit comes with the goal's feedback, which may reach the MADSci node after the
    # RUNNING state (another topic): wait until the state names the running unit.
    busy_state = until(
        lambda: (state := madsci["cell1"].state())["unit_index"] >= 1 and state,
        30.0,
        "cell1's state to name its running unit",
    )
    long = madsci["cell1"].result("run_script", long_id)

    assert short.status == ActionStatus.SUCCEEDED, short
    assert short.json_result["completed_steps"] == short.json_result["total_steps"] == 2
    assert cell1_view is not None and cell1_view.state == "RUNNING", cell1_view
    assert cell1_status.busy and not cell1_status.ready, cell1_status
    # A second goal on a busy cell is refused with the engine's reason.
    assert second.status == ActionStatus.NOT_READY, second
    assert second.json_result["status"] == "REJECTED"
    assert "RUNNING" in second.errors[0].message and second.errors[0].error_type == "REJECTED", second.errors
    assert busy_state["state"] in ("RUNNING", "COMPLETING_TASK") and busy_state["unit_index"] >= 1, busy_state
    assert long.status == ActionStatus.SUCCEEDED, long
    assert long.json_result["completed_steps"] == long.json_result["total_steps"] == 10
    assert long.json_result["cache_status"] in ("MISS", "HIT", "INELIGIBLE")
    assert long.json_result["gripper"] == "pipettor"
    for result, ns in ((short, "cell2"), (long, "cell1")):
        matches_the_node(result.json_result, run_logs[ns])
        # The run log and the bag come with the result as MADSci files.
        node_log = next(run_logs[ns].glob(f"*_{result.json_result['goal_id']}_*.jsonl"))
        assert Path(result.files.run_log).read_text() == node_log.read_text()
        assert Path(result.files.bag).read_bytes().endswith(b"\x89MCAP0\r\n")
    assert madsci["cell1"].state()["last_result"] == long.json_result


def test_pause_and_resume_stop_the_goal_at_a_unit_boundary(
    madsci: dict[str, MadsciNode], observers: dict[str, ErobsBtClient], run_logs: dict[str, Path]
) -> None:
    node, observer = madsci["cell1"], observers["cell1"]
    since = observer.states.count
    action_id = start_and_reach_unit(node, FIVE_UNITS, 1)

    paused = node.admin(AdminCommands.PAUSE)
    completing = observer.states.wait_for(lambda m: m.state == "COMPLETING_TASK", WAIT, since=since)
    at_boundary = observer.states.wait_for(lambda m: m.state == "PAUSED", WAIT, since=since)
    status = until(lambda: (s := node.status()).paused and s, 30.0, "MADSci status paused")
    action_while_paused = node.client.get_action_status_by_name("run_script", action_id)
    state = node.state()
    resumed = node.admin(AdminCommands.RESUME)
    result = node.result("run_script", action_id)

    assert paused.success, paused
    # The batch that was running completed first (COMPLETING_TASK), then the cell paused.
    assert completing is not None and at_boundary is not None
    assert state["state"] == "PAUSED" and state["unit_index"] == 1, state
    assert status.busy and not status.ready
    # The action stays running (a workcell engine stops following a "paused" action).
    assert action_while_paused == ActionStatus.RUNNING
    assert resumed.success, resumed
    assert result.status == ActionStatus.SUCCEEDED, result
    assert result.json_result["completed_steps"] == 10
    matches_the_node(result.json_result, run_logs["cell1"])
    # Resume at PAUSED's boundary: the batch was not run again (one unit_started per unit).
    (log,) = run_logs["cell1"].glob(f"*_{result.json_result['goal_id']}_*.jsonl")
    starts = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["unit"] for r in starts if r.get("event") == "unit_started"] == [1, 2, 3, 4, 5]


def test_cancel_ends_the_goal_canceled_at_the_next_unit_boundary(
    madsci: dict[str, MadsciNode], run_logs: dict[str, Path]
) -> None:
    node = madsci["cell2"]
    action_id = start_and_reach_unit(node, FIVE_UNITS, 1)

    cancelled = node.admin(AdminCommands.CANCEL)
    result = node.result("run_script", action_id)
    nothing = node.admin(AdminCommands.CANCEL)

    assert cancelled.success, cancelled
    # Said at once: after which unit the goal ends, and how to halt now (issue 40, item 7).
    assert cancelled.data.startswith(
        "cancel accepted: the goal ends after unit 1 (its motion runs to its end); to halt now: stop"
    ), cancelled
    assert cancelled.data.endswith("from MADSci: the admin command safety_stop"), cancelled
    assert result.status == ActionStatus.CANCELLED, result
    assert result.json_result["status"] == "CANCELED" and result.json_result["error_code"] == "CANCELED"
    assert result.json_result["completed_steps"] == 6, result.json_result  # the batch finished
    matches_the_node(result.json_result, run_logs["cell2"])
    assert not nothing.success and "nothing to cancel" in nothing.data, nothing
    assert until(lambda: node.status().ready, 30.0, "cell2 ready again")


def test_safety_stop_stops_now_and_latches_until_reset(
    madsci: dict[str, MadsciNode], observers: dict[str, ErobsBtClient], run_logs: dict[str, Path]
) -> None:
    node = madsci["cell2"]
    action_id = start_and_reach_unit(node, script(LONG_BATCH), 1)

    stopped = node.admin(AdminCommands.SAFETY_STOP)
    result = node.result("run_script", action_id)
    idle = observers["cell2"].wait_for_state("IDLE", 30.0)
    status = node.status()
    refused = node.run("run_script", script=TWO_MOVES)
    reset = node.admin(AdminCommands.RESET)
    ready = until(lambda: node.status().ready, 30.0, "ready after reset")
    after = node.run("run_script", script=TWO_MOVES)

    assert stopped.success, stopped
    assert result.status == ActionStatus.FAILED, (stopped, result.json_result)
    assert result.json_result["error_code"] == "STOPPED", result.json_result
    assert result.errors[0].error_type == "STOPPED" and result.errors[0].message.startswith("STOPPED")
    assert result.json_result["completed_steps"] == 0  # the batch was halted, not finished
    matches_the_node(result.json_result, run_logs["cell2"])
    assert idle is not None
    assert status.stopped and not status.ready, status
    assert refused.status == ActionStatus.NOT_READY and "safety-stopped" in refused.errors[0].message
    assert reset.success and ready
    assert after.status == ActionStatus.SUCCEEDED, after


def test_validate_and_clear_cache(madsci: dict[str, MadsciNode]) -> None:
    node = madsci["cell1"]
    bad = json.dumps({"start_gripper": "pipettor", "tasks": [{"task_type": "moveto", "target": 3}]})

    good = node.run("validate", script=FIVE_UNITS)
    invalid = node.run("validate", script=bad)
    cleared = node.run("clear_cache")
    run_invalid = node.run("run_script", script=bad)

    assert good.status == ActionStatus.SUCCEEDED and good.json_result["valid"], good
    assert good.json_result["report"]["total_steps"] == 10 and len(good.json_result["report"]["units"]) == 5
    assert invalid.json_result["valid"] is False
    assert invalid.json_result["error"].startswith("tasks[0].target"), invalid.json_result
    assert cleared.status == ActionStatus.SUCCEEDED, cleared
    assert run_invalid.status == ActionStatus.FAILED, run_invalid
    assert run_invalid.json_result["error_code"] == "INVALID_SCRIPT"
    assert run_invalid.json_result["error_message"] == invalid.json_result["error"]


# -- a cell that faults, goes away and comes back -----------------------------------------------
def test_a_faulted_cell_is_errored_until_reset_fault_and_a_lost_cell_recovers(
    ros_env: RosEnvironment, tmp_path: Path
) -> None:
    faults = tmp_path / "faults.yaml"
    faults.write_text(yaml.safe_dump({"faults": [{"call": "execute", "outcome": "execution_timeout"}]}))
    parameters = {"speed": 20.0, "faults_file": str(faults)}
    ros_node = NodeProcess(ros_env, parameters, ros_arguments=["-r", "__ns:=/cell3"]).start()
    node = MadsciNode(ros_env, tmp_path, "--node", "/cell3/erobs_bt", "--timeout", "5").start()
    try:
        timed_out = node.run("run_script", script=TWO_MOVES)
        faulted = until(lambda: (s := node.status()).errored and s, 30.0, "errored (FAULTED)")
        refused = node.run("run_script", script=TWO_MOVES)
        reset = node.run("reset_fault")
        ready = until(lambda: node.status().ready, 30.0, "ready after reset_fault")

        # The ROS node stops while a goal runs: the action fails with what happened.
        during_id = start_and_reach_unit(node, FIVE_UNITS, 1)
        assert ros_node.stop() == 0
        during = node.result("run_script", during_id)
        lost = until(lambda: (s := node.status()).errored and s, 60.0, "errored (node gone)")
        unreachable = node.run("run_script", script=TWO_MOVES)
        ros_node = NodeProcess(ros_env, {"speed": 20.0}, ros_arguments=["-r", "__ns:=/cell3"]).start()
        back = until(lambda: node.status().ready, 60.0, "ready once the node is back")
        after = node.run("run_script", script=TWO_MOVES)
    finally:
        node.stop()
        ros_node.stop()

    assert timed_out.status == ActionStatus.FAILED and timed_out.json_result["error_code"] == "TIMEOUT"
    assert "FAULTED" in faulted.errors[-1].message and "TIMEOUT" in faulted.errors[-1].message, faulted
    assert refused.status == ActionStatus.NOT_READY, refused
    assert "orchestrator is FAULTED (TIMEOUT" in refused.errors[0].message, refused.errors
    assert reset.status == ActionStatus.SUCCEEDED and ready
    assert during.status == ActionStatus.FAILED, during
    # The node aborts its goal as it shuts down (SHUTDOWN), or the goal is lost with it.
    assert during.json_result["error_code"] in ("SHUTDOWN", "NODE_LOST"), during.json_result
    assert "shutting down" in during.errors[0].message or "went away" in during.errors[0].message
    assert "/cell3/erobs_bt went away" in lost.errors[-1].message, lost.errors
    assert lost.errors[-1].error_type == "CellUnreachable"
    assert unreachable.status == ActionStatus.NOT_READY and "went away" in unreachable.errors[0].message
    assert back
    assert after.status == ActionStatus.SUCCEEDED, after


# -- MADSci's workcell manager runs a workflow across the two cells -----------------------------
def test_a_two_step_workflow_on_two_cells_runs_under_the_workcell_manager(
    madsci: dict[str, MadsciNode], ros_env: RosEnvironment, run_logs: dict[str, Path], tmp_path: Path
) -> None:
    from madsci.client.workcell_client import WorkcellClient
    from madsci.common.types.step_types import StepDefinition
    from madsci.common.types.workflow_types import WorkflowDefinition
    from test_queueserver import Process

    redis_port, port, location_port = free_port(), free_port(), free_port()
    env = {**ros_env.env, "MADSCI_SETTINGS_DIR": str(tmp_path)}
    (tmp_path / ".madsci").mkdir()
    redis = Process(
        [
            "redis-server",
            "--port",
            str(redis_port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        env,
        "Ready to accept connections",
        tmp_path,
    )
    manager = None
    try:
        redis.wait_ready(30.0)
        nodes = [f"--node={ns}={node.url}" for ns, node in madsci.items()]
        manager = Process(
            [
                sys.executable,
                str(REPO / "test" / "madsci_workcell.py"),
                "--port",
                str(port),
                "--location-port",
                str(location_port),
                "--redis-port",
                str(redis_port),
                *nodes,
            ],
            env,
            "workcell manager ready",
            tmp_path,
        )
        manager.wait_ready(60.0)
        client = WorkcellClient(workcell_server_url=f"http://127.0.0.1:{port}/")
        workflow = WorkflowDefinition(
            name="two cells",
            steps=[
                StepDefinition(
                    name="cell1 moves", node="cell1", action="run_script", args={"script": TWO_MOVES}
                ),
                StepDefinition(
                    name="cell2 moves", node="cell2", action="run_script", args={"script": script(LONG_BATCH)}
                ),
            ],
        )
        run = client.start_workflow(
            workflow, prompt_on_error=False, raise_on_failed=False, raise_on_cancelled=False
        )
        known = client.get_nodes()
    finally:
        if manager is not None:
            manager.stop()
        redis.stop()

    assert set(known) == {"cell1", "cell2"}, known
    assert run.status.completed and not run.status.failed, (
        run.status,
        manager.lines[-30:] if manager else "",
    )
    # The workcell engine keeps each step's results as datapoints (json_result, the files) and
    # clears them from the step; the node that ran the step still has them under the action id.
    for step, ns in zip(run.steps, ("cell1", "cell2"), strict=True):
        assert step.result.status == ActionStatus.SUCCEEDED, step.result
        assert {"json_result", "run_log", "bag"} <= set(step.result.datapoints.model_dump()), step.result
        assert madsci[ns].client is not None
        result = madsci[ns].client.get_action_result_by_name("run_script", step.result.action_id)
        assert result.json_result["cell"] == f"/{ns}/erobs_bt", result.json_result
        assert result.json_result["completed_steps"] == (2 if ns == "cell1" else 6)
        matches_the_node(result.json_result, run_logs[ns])


# -- no ROS node: an embedded engine ---------------------------------------------------------------
def test_an_embedded_engine_serves_dry_runs_goals_lock_and_shutdown(
    ros_env: RosEnvironment, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    node = MadsciNode(
        ros_env, tmp_path, "--speed", "20", "--run-log-dir", str(runs), "--name", "bench"
    ).start()
    try:
        state = node.state()
        preview = node.run("run_script", script=TWO_MOVES, dry_run=True)
        ran = node.run("run_script", script=TWO_MOVES)
        locked = node.admin(AdminCommands.LOCK)
        refused = node.run("run_script", script=TWO_MOVES)
        unlocked = node.admin(AdminCommands.UNLOCK)
        shutdown = node.admin(AdminCommands.SHUTDOWN)
        assert node.process.process is not None
        exit_status = node.process.process.wait(60)
    finally:
        node.stop()

    assert state["cell"] == "embedded" and state["state"] == "IDLE" and state["attached_tool"] == "epick", (
        state
    )
    assert preview.status == ActionStatus.SUCCEEDED and preview.json_result["dry_run"] is True, preview
    assert preview.json_result["completed_steps"] == 2
    assert ran.status == ActionStatus.SUCCEEDED and ran.json_result["dry_run"] is False, ran
    assert ran.json_result["gripper"] == "pipettor"
    # The embedded engine's run log, as the result's file.
    (log,) = runs.glob(f"*_{ran.json_result['goal_id']}_*.jsonl")
    assert Path(ran.files.run_log).read_text() == log.read_text()
    matches_the_node(ran.json_result, runs)
    assert locked.success and unlocked.success
    assert refused.status == ActionStatus.NOT_READY and "locked" in refused.errors[0].message, refused
    assert shutdown.success and exit_status == 0, node.process.output

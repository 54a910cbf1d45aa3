"""A cancel racing the end of its goal, and the fault reset's trace, on a node in this process.

Issue 27 §2: a cancel that arrived after the goal had finished was *accepted* (listed in
``goals_canceling``, the goal CANCELING) and the goal then ended SUCCEEDED: the node's
goal-end cleanup forgot the goal before the action's terminal status was set (the final
tree snapshot runs in between), and a cancel landing there was taken for one of a goal not
submitted yet. Now a cancel is refused (the goal has finished) or honoured (CANCELED),
decided under the lock under which the terminal status is set. The tests hold the goal's
end with the node's :attr:`~erobs_bt.ros.node.node.ErobsBtNode.goal_end_gate` (the goal has
ended in the orchestrator, its final snapshot is sent, its terminal status is not set yet)
and put the cancel exactly there: the cancel callback before the terminal status, and the
cancel request taken by rcl before it with the callback after it. No sleeps: each step
waits on the answer or the event that ends the step before.

rclpy answers a cancel its server refused with ``return_code`` 0 and an empty
``goals_canceling``; the node's own clients (``GoalRun.cancel``, ``erobs-bt cancel``, the
Bluesky device) must read "accepted" as "listed".

Item 9: every fault reset (service, web console, a call in this process) is a line of the
node's log saying who asked, and a record in the faulted goal's run log.

The node (``ErobsBtNode`` on the scripted backend, run logs into a temporary folder) is
spun by a multi-threaded executor here, so a test can hold its goal thread; the clients
are the real ones, each with its own rclpy context, in the module's private ROS domain.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import rclpy
from click.testing import CliRunner
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter
from ros_fixtures import RosEnvironment

from erobs_bt.backends.scripted import Outcome
from erobs_bt.ros.client import commands
from erobs_bt.ros.client.client import ErobsBtClient, GoalRun, cancel_accepted
from erobs_bt.ros.node.node import ErobsBtNode
from erobs_bt.viz.runlog import read_run_log

from helpers import POSES, wait_for

pytestmark = pytest.mark.ros

WAIT = 30.0
#: The services of an action (``<action>/_action/<name>``).
ACTION_SERVICES = ("send_goal", "cancel_goal", "get_result")
#: One quick unit on the scripted backend.
SCRIPT = json.dumps(
    {
        "start_gripper": "pipettor",
        "poses": POSES,
        "tasks": [{"task_type": "moveto", "target": "vial_scan", "planning_type": "joint"}],
    }
)


@pytest.fixture(scope="module")
def node(ros_env: RosEnvironment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ErobsBtNode]:
    """The node, spun here (as :func:`erobs_bt.ros.process.serve` does, without signals)."""
    context = Context()
    rclpy.init(context=context, domain_id=ros_env.domain_id)
    runs = tmp_path_factory.mktemp("runs")
    ros_node = ErobsBtNode(
        context=context,
        parameter_overrides=[
            Parameter("backend", value="scripted"),
            Parameter("run_log_dir", value=str(runs)),
        ],
    )
    executor = MultiThreadedExecutor(num_threads=ros_node.settings.executor_threads, context=context)
    executor.add_node(ros_node)
    spinner = threading.Thread(target=executor.spin, name="test-node-executor")
    spinner.start()
    try:
        yield ros_node
    finally:
        ros_node.close()
        executor.shutdown()
        spinner.join(WAIT)
        ros_node.destroy_node()
        context.try_shutdown()


@pytest.fixture(scope="module")
def client(node: ErobsBtNode, ros_env: RosEnvironment) -> Iterator[ErobsBtClient]:
    with ErobsBtClient(domain_id=ros_env.domain_id) as ros_client:
        assert ros_client.wait_for_server(WAIT)
        assert ros_client.wait_for_state("IDLE", WAIT) is not None
        yield ros_client


@pytest.fixture(autouse=True)
def no_gate(node: ErobsBtNode) -> Iterator[None]:
    yield
    node.goal_end_gate = None


def held_goal(node: ErobsBtNode, client: ErobsBtClient, at_end: Callable[[GoalRun], None]) -> GoalRun:
    """Send :data:`SCRIPT`; when its goal has ended but before its terminal status is set,
    call ``at_end(run)`` on the goal's thread; return the run with its result."""
    sent = threading.Event()
    runs: list[GoalRun] = []
    errors: list[BaseException] = []

    def gate(goal_id: str) -> None:
        assert sent.wait(WAIT), "the goal was sent"
        try:
            at_end(runs[0])
        except BaseException as exc:  # reported by the test, not lost in the node's thread
            errors.append(exc)

    node.goal_end_gate = gate
    run = client.send(SCRIPT, timeout=WAIT)
    assert run.accepted, run.rejection
    runs.append(run)
    sent.set()
    run.wait(WAIT)
    if errors:
        raise errors[0]
    return run


def assert_nothing_kept(node: ErobsBtNode) -> None:
    """The node keeps no cancel bookkeeping of a goal that has ended (it grew per goal)."""
    server = node.goal_server
    with server._goal_lock:
        assert server._ros_cancels == set() and server._early_cancels == set()
        assert server._ros_goal is None and server._handle is None


# -- §2: the last lost cancel -----------------------------------------------------------------
def test_a_cancel_arriving_while_the_goal_ends_is_refused_and_the_goal_succeeds(
    node: ErobsBtNode, client: ErobsBtClient
) -> None:
    answers: list[Any] = []
    run = held_goal(node, client, lambda run: answers.append(run.cancel(WAIT)))

    (answer,) = answers
    listed = [bytes(info.goal_id.uuid) for info in answer.goals_canceling]
    # Before: listed (accepted, CANCELING), then SUCCEEDED.
    assert listed == [], f"a cancel after the goal finished was accepted; it ended {run.status_name}"
    assert run.status_name == "SUCCEEDED" and run.result.error_code == ""
    # rclpy's answer to a refused cancel: ERROR_NONE and nobody listed; the client reads it.
    assert answer.return_code == 0
    assert run.cancel_accepted is False and not cancel_accepted(answer, bytes(run._goal_handle.goal_id.uuid))
    assert_nothing_kept(node)


def test_a_cancel_taken_before_the_goal_ended_and_decided_after_it_is_refused(
    node: ErobsBtNode, client: ErobsBtClient
) -> None:
    """The other order: rcl lists the goal as cancelable (it is still executing), then the
    terminal status is set, then the node's cancel callback runs."""
    server = node.goal_server.action_servers[0]
    callback_entered = threading.Event()
    decisions: list[Any] = []
    futures: list[Any] = []

    def late_cancel(goal_handle: Any) -> Any:
        callback_entered.set()
        # Wait until the goal's execute callback has returned: rclpy sets the server's result
        # future after the terminal status (rclpy/action/server.py ``_execute_goal``: Jazzy
        # 344-356, Kilted 404-416). Not on the client's result: the client's get_result request
        # may have been taken in the same wait-set round as this cancel, and the server's
        # ``execute`` handles the cancel before it (Jazzy 495-502), so it waits behind this call.
        ended = threading.Event()
        server._result_futures[bytes(goal_handle.goal_id.uuid)].add_done_callback(lambda _f: ended.set())
        if not ended.wait(WAIT):
            decisions.append("the goal's terminal status was not set")  # fails the test below
            return node.goal_server._on_cancel(goal_handle)
        decision = node.goal_server._on_cancel(goal_handle)
        decisions.append(decision)
        return decision

    def at_end(run: GoalRun) -> None:
        futures.append(run._goal_handle.cancel_goal_async())
        assert callback_entered.wait(WAIT), "the cancel request reached the node's callback"

    server.register_cancel_callback(late_cancel)
    try:
        run = held_goal(node, client, at_end)
        done = threading.Event()
        futures[0].add_done_callback(lambda _future: done.set())
        assert done.wait(WAIT), "the cancel was answered"
    finally:
        server.register_cancel_callback(node.goal_server._on_cancel)

    answer = futures[0].result()
    assert [getattr(d, "name", d) for d in decisions] == ["REJECT"]
    assert run.status_name == "SUCCEEDED"
    assert not cancel_accepted(answer, bytes(run._goal_handle.goal_id.uuid))
    # Before: taken for an early cancel, its key stayed in both sets for ever.
    assert_nothing_kept(node)


def test_a_cancel_of_an_ending_goal_is_refused_while_the_next_goal_starts(
    node: ErobsBtNode, client: ErobsBtClient
) -> None:
    """The next goal may be accepted (the orchestrator is idle) while the first one's
    terminal status is not set yet; the first one's cancel is still its own, not taken for
    a cancel of the goal about to start."""
    answers: list[Any] = []
    second: list[GoalRun] = []

    def at_end(run: GoalRun) -> None:
        if second:
            return  # the second goal's own end
        node.goal_end_gate = None
        next_run = client.send(SCRIPT, timeout=WAIT)
        assert next_run.accepted, next_run.rejection
        second.append(next_run)
        answers.append(run.cancel(WAIT))

    run = held_goal(node, client, at_end)
    second[0].wait(WAIT)
    (answer,) = answers
    assert not cancel_accepted(answer), f"the ending goal's cancel was accepted; it ended {run.status_name}"
    assert run.status_name == "SUCCEEDED" and run.cancel_accepted is False
    assert second[0].status_name == "SUCCEEDED"
    assert_nothing_kept(node)


def test_erobs_bt_cancel_reads_a_refused_cancel_as_nothing_cancelled(
    node: ErobsBtNode, client: ErobsBtClient
) -> None:
    outputs: list[Any] = []

    def cancel_all(run: GoalRun) -> None:
        outputs.append(CliRunner().invoke(commands.cancel, ["--timeout", "20"]))

    run = held_goal(node, client, cancel_all)

    (output,) = outputs
    assert run.status_name == "SUCCEEDED"
    assert output.exit_code == 1, output.output
    assert "nothing cancelled (ERROR_NONE)" in output.output and "already finished" in output.output
    assert_nothing_kept(node)


def test_ctrl_c_in_send_reports_a_refused_cancel(
    node: ErobsBtNode, client: ErobsBtClient, tmp_path: Path
) -> None:
    """``erobs-bt send`` (a process of its own) gets Ctrl-C while the goal ends: its cancel
    is refused, and it says so instead of "cancelling" and then printing SUCCEEDED."""
    script_file = tmp_path / "one_move.json"
    script_file.write_text(SCRIPT, encoding="utf-8")
    command = [sys.executable, "-m", "erobs_bt", "send", str(script_file), "--timeout", str(WAIT)]
    env = {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output: list[str] = []
    seen, held = threading.Event(), threading.Event()

    def gate(goal_id: str) -> None:
        try:
            assert process.stdout is not None
            for line in process.stdout:  # the goal is accepted: send waits for its result now
                output.append(line)
                if line.startswith("accepted"):
                    break
            process.send_signal(signal.SIGINT)
            for line in process.stdout:  # its cancel is answered before the goal may end
                output.append(line)
                if "cancel refused" in line:
                    seen.set()
                    break
        finally:
            held.set()

    node.goal_end_gate = gate
    try:
        assert held.wait(WAIT * 4), "the goal's end was reached"  # (the gate reads the output)
        rest, _ = process.communicate(timeout=WAIT * 2)
        output.append(rest)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    text = "".join(output)
    assert seen.is_set(), text
    assert "cancel refused: the goal had already finished" in text, text
    assert "SUCCEEDED" in text and process.returncode == 0, text
    assert_nothing_kept(node)


def test_a_cancel_accepted_while_the_goal_runs_still_ends_it_canceled(
    node: ErobsBtNode, client: ErobsBtClient
) -> None:
    """The accepting side of the same decision: a goal held in its unit (scripted gate)."""
    release = threading.Event()
    assert node.orchestrator.clear_cache().success  # a fresh execution, not a replay
    node.backend.script("execute", Outcome.ok(gate=release))
    run = client.send(SCRIPT, timeout=WAIT)
    assert run.accepted, run.rejection
    try:
        answer = run.cancel(WAIT)
    finally:
        release.set()
    run.wait(WAIT)
    assert run.cancel_accepted is True and cancel_accepted(answer)
    assert run.status_name == "CANCELED" and run.result.error_code == "CANCELED"
    assert_nothing_kept(node)


def test_the_bluesky_device_reads_a_refused_cancel_as_refused(
    node: ErobsBtNode, client: ErobsBtClient, ros_env: RosEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    from erobs_bt.bluesky import ErobsRobot

    refused = threading.Event()

    class Refusals(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "refused the cancel" in record.getMessage():
                refused.set()

    handler = Refusals()
    logging.getLogger("erobs_bt.bluesky").addHandler(handler)
    robot = ErobsRobot(name="robot", domain_id=ros_env.domain_id, timeout=WAIT)
    try:
        # The node must know the device's action client (its answers would be lost otherwise:
        # "failed to send response", seen under load), as it knows the module's client.
        services = [f"/erobs_bt/execute/_action/{name}" for name in ACTION_SERVICES]
        wait_for(lambda: all(node.count_clients(name) >= 2 for name in services), WAIT, "the device matched")
        held: list[bool] = []

        def gate(goal_id: str) -> None:
            robot.stop()  # the device's cancel, sent on its own thread
            held.append(refused.wait(WAIT))

        node.goal_end_gate = gate
        status = robot.set(SCRIPT)
        status.wait(WAIT)
    finally:
        node.goal_end_gate = None
        logging.getLogger("erobs_bt.bluesky").removeHandler(handler)
        robot.destroy()
    assert held == [True], "the device said the node refused its cancel"
    assert status.success and robot.goal_status.get() == "SUCCEEDED"
    assert_nothing_kept(node)


# -- item 9: the fault reset leaves a trace ---------------------------------------------------
def faulted_goal(node: ErobsBtNode, client: ErobsBtClient) -> str:
    """Fault the node with a goal whose unit times out; its orchestrator goal id."""
    assert node.orchestrator.clear_cache().success  # a fresh execution, not a replay
    node.backend.script("execute", Outcome.fail("TIMEOUT: execution over 120 s"))
    since = client.states.count
    run = client.send(SCRIPT, timeout=WAIT)
    assert run.accepted, run.rejection
    run.wait(WAIT)
    assert run.result.error_code == "TIMEOUT" and node.orchestrator.state.value == "FAULTED"
    state = client.states.wait_for(lambda m: m.state == "FAULTED", WAIT, since=since)
    assert state is not None and state.goal_id
    return str(state.goal_id)


def reset_record(node: ErobsBtNode, goal_id: str) -> dict[str, Any]:
    """The last record of the run log of ``goal_id``: its fault reset, after its end."""
    assert node.run_logs is not None
    path = node.run_logs.path_of(goal_id)
    assert path is not None
    records = read_run_log(path)
    events = [r["event"] for r in records]
    assert "goal_finished" in events and events[-1] == "fault_reset", events[-3:]
    assert events.count("fault_reset") == 1 and records[-1]["faulted_goal_id"] == goal_id
    return records[-1]


def test_a_fault_reset_through_the_service_is_logged_with_who_asked(
    node: ErobsBtNode, client: ErobsBtClient, capfd: pytest.CaptureFixture[str]
) -> None:
    goal_id = faulted_goal(node, client)
    capfd.readouterr()
    result = CliRunner().invoke(commands.reset_fault, ["--timeout", "20"])
    assert result.exit_code == 0, result.output
    err = capfd.readouterr().err
    assert "fault reset by service /erobs_bt/reset_fault: cleared 'TIMEOUT: execution over 120 s'" in err, err
    record = reset_record(node, goal_id)
    assert record["by"] == "service /erobs_bt/reset_fault"
    assert record["fault"] == "TIMEOUT: execution over 120 s"


def test_a_fault_reset_from_the_web_console_is_in_the_nodes_log_and_run_log(
    node: ErobsBtNode, client: ErobsBtClient, capfd: pytest.CaptureFixture[str]
) -> None:
    import urllib.request

    from erobs_bt.viz.web import start_live_view

    goal_id = faulted_goal(node, client)
    view = start_live_view(node.orchestrator, rate=50.0)  # as `erobs-bt serve` serves the node's
    try:
        capfd.readouterr()
        request = urllib.request.Request(
            view.url + "api/reset_fault", method="POST", headers={"X-Requested-By": "erobs-bt"}
        )
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            assert json.loads(response.read())["success"] is True
        err = capfd.readouterr().err
    finally:
        view.close()
    assert "fault reset by web console (127.0.0.1:" in err, err
    record = reset_record(node, goal_id)
    assert record["by"].startswith("web console (127.0.0.1:")


def test_a_fault_reset_in_this_process_is_logged_too(
    node: ErobsBtNode, client: ErobsBtClient, capfd: pytest.CaptureFixture[str]
) -> None:
    goal_id = faulted_goal(node, client)
    capfd.readouterr()
    assert node.orchestrator.reset_fault().success
    err = capfd.readouterr().err
    assert "fault reset by in-process call: cleared 'TIMEOUT: execution over 120 s'" in err, err
    assert reset_record(node, goal_id)["by"] == "in-process call"


def test_a_goal_refused_by_a_faulted_node_is_logged_in_the_orchestrators_words(
    node: ErobsBtNode, client: ErobsBtClient, capfd: pytest.CaptureFixture[str]
) -> None:
    """The node does not decide admission itself: it asks the orchestrator and logs its answer."""
    faulted_goal(node, client)
    capfd.readouterr()
    try:
        run = client.send(SCRIPT, timeout=WAIT)
        err = capfd.readouterr().err
    finally:
        assert node.orchestrator.reset_fault().success
    assert not run.accepted
    refusal = node.orchestrator.admission()
    assert refusal is None, refusal
    assert (
        "goal rejected: orchestrator is FAULTED (TIMEOUT: execution over 120 s); check the cell, "
        "then reset the fault (~/reset_fault, `erobs-bt reset-fault`) or restart"
    ) in err, err


def test_many_goals_leave_the_nodes_bookkeeping_bounded(node: ErobsBtNode, client: ErobsBtClient) -> None:
    """Goals with cancels in every place (running, after the end) leave nothing per goal
    but the run logs' latest names (bounded by KEPT_GOALS, test_runlog checks the bound)."""
    for index in range(6):
        if index % 2:
            held_goal(node, client, lambda run: run.cancel(WAIT))
        else:
            run = client.send(SCRIPT, timeout=WAIT)
            run.wait(WAIT)
            run.cancel(WAIT)  # after its result: refused by rcl (terminal), nothing kept
            assert run.cancel_accepted is False
        node.goal_end_gate = None
        assert_nothing_kept(node)

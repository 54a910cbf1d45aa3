"""The Bluesky device against a real erobs_bt node process, driven by a real RunEngine.

One node (simulated cell at 5x, so a six-move batch lasts a few seconds) serves the module
in its own ROS domain. Pauses are requested when the device reports that a unit started
(an Ophyd signal subscription), and the tests wait for the node's latched states: the
robot must stop at a unit boundary and never be sent the script twice; abort cancels;
a node that stops gives a clear error and the device works again once a node is back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bluesky.plan_stubs as bps
import pytest
from bluesky import RunEngine
from bluesky.utils import FailedStatus, RunEngineInterrupted
from ophyd.status import SubscriptionStatus
from readme_snippets import readme_blocks
from ros_fixtures import (
    REPO,
    NodeProcess,
    RosEnvironment,
    fastdds_segments,
    orphaned_segments,
    ready_client,
    ros_environment,
)

from erobs_bt.bluesky import ErobsRobot, NodeUnavailable, ScriptFailed, run_script
from erobs_bt.ros.client.client import ErobsBtClient

from helpers import LED, move, script

pytestmark = pytest.mark.ros

SPEED = 5.0
WAIT = 120.0


LONG_BATCH = [move("sample_scan_1"), move("pipettor_scan")] * 3


#: units: 1 = six-move batch, 2 = LED, 3 = move, 4 = LED, 5 = move (10 steps)
FIVE_UNITS = script([*LONG_BATCH, LED, move("vial_scan"), LED, move("safe_sample_transport")])
#: units: 1 = move, 2 = LED, 3 = six-move batch, 4 = LED, 5 = move (10 steps)
LONG_THIRD = script([move("vial_scan"), LED, *LONG_BATCH, LED, move("safe_sample_transport")])


@pytest.fixture(scope="module")
def node(ros_env: RosEnvironment) -> Iterator[NodeProcess]:
    process = NodeProcess(ros_env, {"speed": SPEED})
    process.start()
    yield process
    assert process.stop() == 0, process.output


@pytest.fixture(scope="module")
def observer(node: NodeProcess) -> Iterator[ErobsBtClient]:
    """A second client that watches the node's latched state (as an operator's GUI would)."""
    with ready_client(node) as client:
        yield client


@pytest.fixture(scope="module")
def robot(observer: ErobsBtClient) -> Iterator[ErobsRobot]:
    device = ErobsRobot(name="robot", domain_id=observer.domain_id)
    yield device
    device.destroy()


@pytest.fixture
def RE() -> RunEngine:
    return RunEngine({}, call_returns_result=True)


def when_unit_starts(robot: ErobsRobot, unit: int, action: Any) -> threading.Event:
    """Call ``action()`` on a thread once the device reports ``unit`` started."""
    reached = threading.Event()

    def on_unit(value: Any = None, **_kwargs: Any) -> None:
        if value == unit and not reached.is_set():
            reached.set()
            threading.Thread(target=action, daemon=True).start()

    token = robot.unit.subscribe(on_unit, run=False)
    reached.token = token  # type: ignore[attr-defined]
    return reached


def goal_ids(observer: ErobsBtClient, since: int) -> set[str]:
    return {m.goal_id for m in observer.states.items()[since:] if m.goal_id}


def test_mv_runs_a_script_and_read_reports_the_result(
    RE: RunEngine,
    robot: ErobsRobot,
    tmp_path: Path,
) -> None:
    path = tmp_path / "two_moves.json"
    path.write_text(script([move("vial_scan"), move("safe_sample_transport")]), encoding="utf-8")

    RE(bps.mv(robot, str(path)))

    reading = robot.read()
    assert reading["robot_goal_status"]["value"] == "SUCCEEDED"
    assert (reading["robot_completed_steps"]["value"], reading["robot_total_steps"]["value"]) == (2, 2)
    assert reading["robot_gripper"]["value"] == "pipettor"
    assert reading["robot_cache_status"]["value"] in ("MISS", "HIT")
    assert reading["robot_error_message"]["value"] == ""
    assert set(robot.describe()) == set(reading)
    assert robot.describe()["robot_completed_steps"]["dtype"] == "integer"
    assert robot.read_configuration()["robot_node"]["value"] == "/erobs_bt"

    # The same eligible script from the same start replays from the node's plan cache.
    RE(bps.mv(robot, str(path)))
    assert robot.read()["robot_cache_status"]["value"] == "HIT"


def test_run_script_records_the_result_as_a_run(RE: RunEngine, robot: ErobsRobot) -> None:
    documents: list[tuple[str, dict[str, Any]]] = []
    RE.subscribe(lambda name, doc: documents.append((name, doc)))

    result = RE(run_script(robot, script([move("vial_scan"), LED, move("safe_sample_transport")])))

    assert result.exit_status == "success"
    names = [name for name, _ in documents]
    assert names == ["start", "descriptor", "event", "stop"]
    start = documents[0][1]
    assert (start["plan_name"], start["robot_node"], start["script_tasks"]) == ("run_script", "/erobs_bt", 3)
    event = documents[2][1]
    assert event["data"]["robot_goal_status"] == "SUCCEEDED"
    assert (event["data"]["robot_completed_steps"], event["data"]["robot_total_steps"]) == (3, 3)
    assert documents[3][1]["exit_status"] == "success"


def test_a_failing_script_fails_the_plan_with_its_path(RE: RunEngine, robot: ErobsRobot) -> None:
    bad = script([move("vial_scan"), {"task_type": "moveto", "planning_type": "joint"}])

    with pytest.raises(FailedStatus) as failure:
        RE(bps.mv(robot, bad))

    error = failure.value.args[0].exception()
    assert isinstance(error, ScriptFailed)
    assert error.status == "ABORTED" and error.completed_steps == 0
    assert "tasks[1]" in error.error_message
    reading = robot.read()
    assert reading["robot_goal_status"]["value"] == "ABORTED"
    assert reading["robot_error_code"]["value"] == "INVALID_SCRIPT"
    with pytest.raises(FileNotFoundError, match="not found"):
        RE(bps.mv(robot, "/no/such/script.json"))


def test_a_pause_stops_the_robot_at_a_unit_boundary_and_resume_completes_the_same_goal(
    RE: RunEngine,
    robot: ErobsRobot,
    observer: ErobsBtClient,
) -> None:
    since = observer.states.count
    when_unit_starts(robot, 1, RE.request_pause)

    with pytest.raises(RunEngineInterrupted):
        RE(bps.mv(robot, FIVE_UNITS))

    paused = observer.wait_for_state("PAUSED", WAIT, since=since)
    assert paused is not None, [m.state for m in observer.states.items()[since:]]
    assert paused.unit_index >= 1 and paused.current_step < 10, "paused between units, work left to do"
    assert RE.state == "paused"
    assert not observer.states.wait_for(lambda m: m.state == "CANCELING", 0.5, since=since)

    result = RE.resume()

    assert result.exit_status == "success"
    assert robot.read()["robot_goal_status"]["value"] == "SUCCEEDED"
    assert robot.read()["robot_completed_steps"]["value"] == 10
    assert len(goal_ids(observer, since)) == 1, "the replayed set re-attached, nothing was sent twice"


def test_a_deferred_pause_in_run_script_stops_the_robot_at_the_next_unit_boundary(
    RE: RunEngine,
    robot: ErobsRobot,
    observer: ErobsBtClient,
) -> None:
    since = observer.states.count
    when_unit_starts(robot, 2, lambda: RE.request_pause(defer=True))

    with pytest.raises(RunEngineInterrupted):
        RE(run_script(robot, LONG_THIRD))

    # The deferred pause waits for the checkpoint at the start of unit 3 (the long batch);
    # from there the robot stops at the boundary after it.
    paused = observer.wait_for_state("PAUSED", WAIT, since=since)
    assert paused is not None, [m.state for m in observer.states.items()[since:]]
    assert paused.unit_index >= 3 and paused.current_step < 10
    result = RE.resume()
    assert result.exit_status == "success"
    assert robot.read()["robot_completed_steps"]["value"] == 10
    assert len(goal_ids(observer, since)) == 1


def test_abort_while_paused_cancels_the_goal(
    RE: RunEngine,
    robot: ErobsRobot,
    observer: ErobsBtClient,
) -> None:
    since = observer.states.count
    when_unit_starts(robot, 1, RE.request_pause)
    with pytest.raises(RunEngineInterrupted):
        RE(bps.mv(robot, FIVE_UNITS))
    assert observer.wait_for_state("PAUSED", WAIT, since=since) is not None

    result = RE.abort("operator abort")

    assert result.exit_status == "abort"
    idle = observer.wait_for_state("IDLE", WAIT, since=since)
    assert idle is not None and "cancelled while paused" in idle.message
    SubscriptionStatus(robot.goal_status, lambda value, **_kw: value == "CANCELED").wait(WAIT)


def test_a_node_restart_gives_a_clear_error_then_the_device_reconnects(
    tmp_path: Path, robot: ErobsRobot
) -> None:
    # Its own domain and node: this node is stopped and started again.
    before = fastdds_segments()
    with ros_environment(tmp_path / "ros_log") as environment:
        RE = RunEngine({}, call_returns_result=True)
        first = NodeProcess(environment, {"speed": SPEED})
        first.start()
        device = ErobsRobot(name="cell", timeout=10.0, domain_id=environment.domain_id)
        try:
            RE(bps.mv(device, script([move("vial_scan")])))
            assert device.read()["cell_goal_status"]["value"] == "SUCCEEDED"

            # The node stops while a goal runs: the plan fails with a clear error.
            stopped = threading.Event()

            def stop_node() -> None:
                first.stop()
                stopped.set()

            when_unit_starts(device, 1, stop_node)
            with pytest.raises(FailedStatus) as during:
                RE(bps.mv(device, FIVE_UNITS))
            error = during.value.args[0].exception()
            assert isinstance(error, ScriptFailed | NodeUnavailable)
            assert "shutting down" in str(error) or "went away" in str(error), str(error)
            assert stopped.wait(60.0), "the node process exited"

            # No node: the next goal fails with what to check.
            with pytest.raises(FailedStatus) as down:
                RE(bps.mv(device, script([move("vial_scan")])))
            error = down.value.args[0].exception()
            assert isinstance(error, NodeUnavailable)
            assert "/erobs_bt is not reachable" in str(error) and "ROS_DOMAIN_ID" in str(error)
            assert device.read()["cell_goal_status"]["value"] == "UNREACHABLE"

            # A new node: the same device works again.
            second = NodeProcess(environment, {"speed": SPEED})
            second.start()
            try:
                RE(bps.mv(device, script([move("safe_sample_transport")])))
                assert device.read()["cell_goal_status"]["value"] == "SUCCEEDED"
            finally:
                assert second.stop() == 0, second.output
        finally:
            device.destroy()
            first.stop()
    assert orphaned_segments(before, environment.domain_id) == set()


def test_the_readme_snippet_runs_as_written_and_its_process_exits_cleanly(
    node: NodeProcess, tmp_path: Path
) -> None:
    """The README's Bluesky snippet, copied as a reader copies it, run from the repository's
    folder through scripts/env.sh against the node: the goals succeed and Python exits 0.
    Without a clean shutdown of the device's ROS client at exit, the process aborted
    (``terminate called without an active exception``, exit 134) after the motion succeeded."""
    snippet = readme_blocks("Bluesky and the queueserver (a beamline set-up)", "python")[0]
    # PYTHONPATH: this checkout's erobs_bt, whichever checkout the venv was installed from.
    path = tmp_path / "snippet.py"
    path.write_text(snippet)
    completed = subprocess.run(
        [str(REPO / "scripts" / "env.sh"), sys.executable, str(path)],
        cwd=REPO,
        env={
            **node.environment.env,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        },
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    assert "terminate called" not in output and "Aborted" not in output, output
    assert completed.stdout.strip().splitlines()[-1] == "SUCCEEDED", output

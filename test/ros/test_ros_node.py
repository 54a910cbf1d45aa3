"""The erobs_bt ROS 2 node, end to end: a node process on the simulated cell, driven by a
real rclpy action client in this process.

One node (sim backend at 20x speed) serves the module in its own ROS domain; the
fault scenario gets a second node in another domain, because a FAULTED node rejects
every later goal. Both are stopped with SIGINT by PID and must exit 0 and leave no
Fast DDS shared memory behind.

Scenarios follow docs/behaviour.md §3: feedback and result fields, replay from the
plan cache, pause/resume/cancel only at unit boundaries (a cancel during the last unit
ends CANCELED; a cancel while paused ends the goal), one goal at a time, FAULTED after
a fatal replay error, and path-specific validation errors.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import py_trees
import pytest
import yaml
from click.testing import CliRunner
from conftest import require_samples
from ros_fixtures import (
    REPO,
    NodeProcess,
    RosEnvironment,
    fastdds_segments,
    orphaned_segments,
    participant_ports,
    ready_client,
    ros_environment,
)

from erobs_bt.backends.base import ArmSegment, Solution, ToolSegment, TrajectoryPoint
from erobs_bt.ros import convert
from erobs_bt.ros.client import commands
from erobs_bt.ros.client.client import ErobsBtClient, GoalRun
from erobs_bt.ros.snapshots import SnapshotThrottle, TreeState
from erobs_bt.script.model import JOINT_NAMES

from helpers import LED, PAUSE, move, script

pytestmark = pytest.mark.ros

SPEED = 20.0
GOAL_TIMEOUT = 120.0


#: Six joint moves across the cell: one batched unit of about 1 s of wall time at 20x.
LONG_BATCH = [move("sample_scan_1"), move("pipettor_scan")] * 3


def run_to_end(client: ErobsBtClient, text: str, *, dry_run: bool = False) -> GoalRun:
    run = client.send(text, dry_run=dry_run)
    assert run.accepted, run.rejection
    run.wait(GOAL_TIMEOUT)
    return run


def wait_feedback(run: GoalRun, predicate: Any, what: str) -> Any:
    found = run.feedback.wait_for(predicate, GOAL_TIMEOUT)
    assert found is not None, f"no feedback {what}; got {run.feedback.items()}"
    return found


# -- fixtures ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shm_before() -> set[str]:
    return fastdds_segments()


@pytest.fixture(scope="module")
def ros_env(shm_before: set[str], ros_env: RosEnvironment) -> RosEnvironment:
    """conftest's domain, reserved after :func:`shm_before` has looked at /dev/shm."""
    return ros_env


@pytest.fixture(scope="module")
def node(ros_env: RosEnvironment) -> Iterator[NodeProcess]:
    process = NodeProcess(ros_env, {"speed": SPEED})
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def client(node: NodeProcess) -> Iterator[ErobsBtClient]:
    with ready_client(node, joint_states=True) as ros_client:
        # and the joint-state stream, so no scenario starts before its subscriptions work
        assert ros_client.joint_states.wait_for(lambda m: True, 30.0) is not None, node.output
        yield ros_client


# -- scenarios on the shared node -----------------------------------------------------------
def test_sample_script_succeeds_with_feedback_state_snapshot_and_joint_states(
    client: ErobsBtClient,
) -> None:
    assert client.clear_cache()[0]
    joints_before = client.joint_states.count
    states_before = client.states.count
    run = run_to_end(client, (require_samples() / "spincoat_to_hotplate.json").read_text())

    assert run.status_name == "SUCCEEDED"
    result = run.result
    assert (result.success, result.error_message, result.error_code) == (True, "", "")
    assert (result.completed_steps, result.total_steps) == (9, 9)
    feedback = run.feedback.items()
    assert feedback and all(f.total_steps == 9 for f in feedback)
    assert {f.unit_index for f in feedback} == {1}
    assert feedback[0].current_action.startswith("batch[9]: moveto, moveto, end_effector")
    assert "MISS" in {f.cache_status for f in feedback}
    assert feedback[-1].progress_percentage == pytest.approx(100.0)
    assert feedback[-1].current_gripper == "epick"

    running = client.states.wait_for(lambda m: m.state == "RUNNING", 5.0, since=states_before)
    assert running is not None and running.goal_id
    idle = client.states.wait_for(
        lambda m: m.state == "IDLE" and m.goal_id == running.goal_id, 5.0, since=states_before
    )
    assert idle is not None and idle.total_steps == 9 and idle.message.endswith("succeeded")
    final = client.snapshots.wait_for(lambda m: m.final and m.goal_id == idle.goal_id, 5.0)
    assert final is not None, "no final tree snapshot for the goal"
    assert final.state == "SUCCESS" and final.behaviours[0].parent_id == ""
    assert final.behaviours[0].name == "script"
    tree = convert.snapshot_from_msg(final)
    assert tree.counts().get("SUCCESS", 0) >= 3
    assert json.loads(final.tree_json)["goal_id"] == idle.goal_id
    assert client.grippers.wait_for(lambda g: g == "epick", 5.0) == "epick"

    moving = client.joint_states.wait_for(
        lambda m: any(abs(v) > 1e-6 for v in m.velocity), 5.0, since=joints_before
    )
    assert moving is not None, "no /joint_states with motion during the goal"
    assert tuple(moving.name) == JOINT_NAMES and len(moving.position) == 6


def test_the_same_script_from_the_same_start_replays_from_the_cache(client: ErobsBtClient) -> None:
    assert client.clear_cache()[0]
    # spincoat_to_hotplate ends at pre_hotplate: start there so both runs share the key.
    assert run_to_end(client, script([move("pre_hotplate")], gripper="epick")).result.success
    text = (require_samples() / "spincoat_to_hotplate.json").read_text()

    first = run_to_end(client, text)
    second = run_to_end(client, text)

    assert first.result.success and second.result.success
    assert "MISS" in {f.cache_status for f in first.feedback.items()}
    assert "HIT" in {f.cache_status for f in second.feedback.items()}
    assert (second.result.completed_steps, second.result.total_steps) == (9, 9)


def test_pause_takes_effect_at_the_next_unit_boundary_then_resume_finishes(
    client: ErobsBtClient,
) -> None:
    # units: 1 = batch of 6 moves, 2 = pipettor, 3 = move, 4 = pipettor, 5 = move (10 steps)
    text = script([*LONG_BATCH, LED, move("vial_scan"), LED, move("safe_sample_transport")])
    states_before = client.states.count
    run = client.send(text)
    assert run.accepted, run.rejection
    wait_feedback(run, lambda f: f.unit_index == 1, "for unit 1")

    assert client.pause() == (True, "Pause requested; pausing after the current unit completes")
    paused = client.wait_for_state("PAUSED", GOAL_TIMEOUT, since=states_before)

    assert paused is not None, [m.state for m in client.states.items()]
    assert client.states.wait_for(lambda m: m.state == "COMPLETING_TASK", 1.0, since=states_before)
    assert (paused.unit_index, paused.current_step, paused.total_steps) == (1, 1, 10)
    latest = wait_feedback(run, lambda f: f.status_message == "paused before unit 2", "announcing the pause")
    assert latest.progress_percentage == pytest.approx(60.0), "6 of 10 steps completed at the boundary"
    assert client.pause() == (False, "Already paused")
    assert run.feedback.wait_for(lambda f: f.unit_index >= 2, 0.3) is None, "unit 2 started while paused"

    assert client.resume() == (True, "Resumed")
    result = run.wait(GOAL_TIMEOUT)
    assert run.status_name == "SUCCEEDED"
    assert (result.completed_steps, result.total_steps) == (10, 10)
    # Feedback is thinned to feedback_rate (a quick unit's may be replaced by the next
    # unit's), so the units seen rise to the last one; all ten steps completed (above).
    seen = [f.unit_index for f in run.feedback.items()]
    assert seen == sorted(seen) and seen[0] == 1 and seen[-1] == 5


def test_cancel_during_the_last_unit_ends_canceled(client: ErobsBtClient) -> None:
    # units: 1 = move, 2 = pipettor, 3 = batch of 6 moves (8 steps)
    run = client.send(script([move("vial_scan"), LED, *LONG_BATCH]))
    assert run.accepted, run.rejection
    wait_feedback(run, lambda f: f.unit_index == 3, "for the last unit")

    response = run.cancel()
    result = run.wait(GOAL_TIMEOUT)

    assert response.return_code == 0 and len(response.goals_canceling) == 1
    assert run.status_name == "CANCELED"
    assert (result.success, result.error_code) == (False, "CANCELED")
    # A running unit is never interrupted: the last unit completes, and the cancel that
    # arrived during it is honoured at the boundary after it.
    assert (result.completed_steps, result.total_steps) == (8, 8)


def test_cancel_while_paused_ends_the_goal(client: ErobsBtClient) -> None:
    states_before = client.states.count
    run = client.send(script([move("vial_scan"), PAUSE, move("safe_sample_transport")]))
    assert run.accepted, run.rejection
    assert client.wait_for_state("PAUSED", GOAL_TIMEOUT, since=states_before) is not None

    response = client.cancel_all()
    result = run.wait(GOAL_TIMEOUT)

    assert response.return_code == 0 and len(response.goals_canceling) == 1
    assert run.status_name == "CANCELED"
    assert "paused" in result.error_message
    assert (result.completed_steps, result.total_steps) == (1, 3)


def test_a_second_goal_is_rejected_while_one_runs(client: ErobsBtClient) -> None:
    states_before = client.states.count
    first = client.send(script([PAUSE, move("safe_sample_transport")]))
    assert first.accepted, first.rejection
    assert client.wait_for_state("PAUSED", GOAL_TIMEOUT, since=states_before) is not None

    second = client.send(script([move("vial_scan")]))

    assert not second.accepted and second.status_name == "REJECTED"
    assert "PAUSED" in second.rejection
    client.cancel_all()
    assert first.wait(GOAL_TIMEOUT) is not None and first.status_name == "CANCELED"
    assert run_to_end(client, script([move("safe_sample_transport")])).status_name == "SUCCEEDED"


def test_a_malformed_script_aborts_with_its_path_and_the_node_serves_the_next(
    client: ErobsBtClient,
) -> None:
    bad = run_to_end(client, (require_samples() / "legacy_place_on_hotplate.json").read_text())

    assert bad.status_name == "ABORTED"
    assert bad.result.error_code == "INVALID_SCRIPT"
    assert bad.result.error_message.startswith(
        "tasks[0]: MoveTo goal must specify exactly one of target, direction/distance, or cartesian_target; "
        "this step gives target and direction/distance. EROBS jazzy_dev made the relative move"
    )
    assert (bad.result.completed_steps, bad.result.total_steps) == (0, 0)
    assert run_to_end(client, script([move("vial_scan")])).status_name == "SUCCEEDED"


#: Scripts whose text reaches ROS messages with a lone surrogate (the JSON escape \ud800)
#: or an escaped NUL in a field (issue 9, item 7). Raw JSON text, escapes kept as written.
HOSTILE_SCRIPTS = (
    '{"start_gripper":"epick","tasks":[{"task_type":"moveto","cartesian_target":[0.3,0.2,0.4],'
    '"frame_id":"\\ud800"}]}',
    '{"start_gripper":"\\ud800","tasks":[{"task_type":"pipettor","operation":"EJECT_TIP"}]}',
    '{"start_gripper":"epick","tasks":[{"task_type":"end_effector","end_effector_action":"vacuum_on",'
    '"end_effector_type":"\\ud800"}]}',
    '{"start_gripper":"none","tasks":[{"task_type":"tool_exchange","operation":"load",'
    '"gripper":"\\ud800","dock_number":1}]}',
    '{"start_gripper":"pipettor","tasks":[{"task_type":"vision_task","detector":"\\ud800","tag_id":1}]}',
    '{"start_gripper":"ep\\u0000ick","tasks":[{"task_type":"pipettor","operation":"EJECT_TIP"}]}',
)


def test_lone_surrogates_and_nul_in_a_script_never_take_the_node_down(
    node: NodeProcess, client: ErobsBtClient
) -> None:
    for text in HOSTILE_SCRIPTS:
        states_before = client.states.count
        run = run_to_end(client, text)

        assert node.running(), f"the node died on {text}:\n{node.output}"
        assert run.status_name == "ABORTED", text
        assert run.result.error_message and run.result.error_code, (text, run.result)
        # The latched state is right: the node is idle again (not stuck at RUNNING).
        latest = client.states.wait_for(
            lambda m: m is client.states.latest() and m.state == "IDLE", 10.0, since=states_before - 1
        )
        assert latest is not None, (text, [m.state for m in client.states.items()][-4:])
        if "u0000" in text:
            # An embedded NUL no longer cuts the message short ("Unknown gripper: ep").
            assert run.result.error_message != "Unknown gripper: ep", run.result.error_message
            assert "Unknown gripper: ep" not in run.result.error_message or (
                "ep\\x00ick" in run.result.error_message
            ), run.result.error_message
    assert "Exception in thread" not in node.output, node.output
    assert run_to_end(client, script([move("vial_scan")])).status_name == "SUCCEEDED"


def test_a_preview_cancelled_right_after_its_goal_response_always_ends_canceled(
    client: ErobsBtClient,
) -> None:
    """Issue 9, item 8: the cancel callback hands the cancel to the orchestrator at once,
    so a cancel accepted before the goal finishes is never lost to a short last unit
    (before: CancelGoal accepted, yet the goal SUCCEEDED in 5 of 9 tries)."""
    outcomes = []
    # A preview of one vacuum command takes 10-25 ms (one move: 100-170 ms), so a cancel
    # 0-40 ms after the goal response races the end of its only (final) unit.
    text = script([{"task_type": "end_effector", "end_effector_action": "vacuum_on"}], gripper="epick")
    for trial in range(30):
        run = client.send(text, dry_run=True)
        assert run.accepted, run.rejection
        # 0-40 ms after the goal response (the stimulus); every other trial at once, so that on
        # a fast, idle machine too some cancels arrive before the preview ends.
        time.sleep(0.0 if trial % 2 == 0 else (trial * 7 % 41) / 1000.0)
        response = run.cancel()
        result = run.wait(GOAL_TIMEOUT)
        accepted = response.return_code == 0 and len(response.goals_canceling) == 1
        outcomes.append((trial, accepted, run.status_name, result.error_code))
    # An accepted cancel always ends CANCELED; a refused one (the preview had finished)
    # leaves the success standing. Nothing else happens.
    for _, accepted, status, code in outcomes:
        expected = ("CANCELED", "CANCELED") if accepted else ("SUCCEEDED", "")
        assert (status, code) == expected, outcomes
    assert sum(accepted for _, accepted, _, _ in outcomes) >= 1, f"no cancel raced the goal: {outcomes}"


def test_stop_halts_the_arm_at_once_aborts_with_stopped_and_leaves_the_node_idle(
    client: ErobsBtClient,
) -> None:
    # Twelve moves in one batch: about 2 s of motion at 20x, a wide window for the stop.
    run = client.send(script([*LONG_BATCH, *LONG_BATCH, LED, move("vial_scan")]))
    assert run.accepted, run.rejection
    wait_feedback(run, lambda f: f.unit_index == 1 and "execut" in f.status_message, "executing unit 1")
    moving = client.joint_states.wait_for(
        lambda m: any(abs(v) > 1e-6 for v in m.velocity), GOAL_TIMEOUT, since=client.joint_states.count
    )
    assert moving is not None
    states_before = client.states.count

    reply = client.stop()
    result = run.wait(GOAL_TIMEOUT)

    assert reply[0], reply
    assert run.status_name == "ABORTED" and result.error_code == "STOPPED", result
    assert result.error_message.startswith("STOPPED: "), result.error_message
    assert result.completed_steps == 0, "the batch was halted: none of its steps counts"
    idle = client.states.wait_for(lambda m: m.state == "IDLE", 10.0, since=states_before)
    assert idle is not None, [m.state for m in client.states.items()]
    assert client.states.wait_for(lambda m: m.state == "FAULTED", 0.0, since=states_before) is None
    # At rest, and it stays there: the next joint states all have zero velocity.
    since = client.joint_states.count
    rest = client.joint_states.wait_for(lambda m: not any(m.velocity), 10.0, since=since)
    assert rest is not None
    since = client.joint_states.count
    later = [client.joint_states.wait_for(lambda m: True, 10.0, since=since + i) for i in range(10)]
    assert all(m is not None and not any(m.velocity) for m in later)
    assert all(list(m.position) == pytest.approx(list(rest.position), abs=1e-9) for m in later if m)
    assert run_to_end(client, script([move("safe_sample_transport")])).status_name == "SUCCEEDED"


def test_stop_works_while_paused_and_when_idle(client: ErobsBtClient) -> None:
    states_before = client.states.count
    run = client.send(script([move("vial_scan"), PAUSE, move("safe_sample_transport")]))
    assert run.accepted, run.rejection
    assert client.wait_for_state("PAUSED", GOAL_TIMEOUT, since=states_before) is not None

    stopped = CliRunner().invoke(commands.stop, [])
    result = run.wait(GOAL_TIMEOUT)
    idle_stop = client.stop()
    not_faulted = CliRunner().invoke(commands.reset_fault, [])

    assert stopped.exit_code == 0, stopped.output
    assert run.status_name == "ABORTED" and result.error_code == "STOPPED", result
    assert (result.completed_steps, result.total_steps) == (1, 3)
    assert idle_stop[0] and "No task" in idle_stop[1]
    assert not_faulted.exit_code == 1 and "Not faulted" in not_faulted.output, not_faulted.output
    assert run_to_end(client, script([move("vial_scan")])).status_name == "SUCCEEDED"


def test_quick_units_get_feedback_at_most_feedback_rate_and_every_units_last_one(
    client: ErobsBtClient,
) -> None:
    units = 300  # one-step units of no motion: far more units a second than feedback_rate
    began = time.monotonic()
    run = run_to_end(client, script([LED] * units))
    elapsed = time.monotonic() - began

    assert run.status_name == "SUCCEEDED"
    assert (run.result.completed_steps, run.result.total_steps) == (units, units)
    feedback = run.feedback.items()
    # feedback_rate is 50 Hz (config/erobs_bt.yaml) within a unit, and every unit's last
    # feedback is sent: at most one per 20 ms besides those. The node's publisher and the
    # client's reader each keep 1,000 of them, more than this goal publishes, so none is
    # lost on the way; only the last ones may come after the result, when rclpy's action
    # client no longer calls back for the goal (it drops a goal's feedback callback with its
    # result; the node publishes the goal's last feedback before its result, on another
    # topic). What the node publishes:
    # test_the_feedback_pump_publishes_every_units_last_feedback_and_the_goals_last.
    assert 1 <= len(feedback) <= units + 50.0 * elapsed + 2, (len(feedback), elapsed)
    indices = [f.unit_index for f in feedback]
    assert indices == sorted(indices) and indices[-1] <= units
    missing = sorted(set(range(1, indices[-1] + 1)) - set(indices))
    assert not missing, f"feedback of units {missing[:10]} lost before unit {indices[-1]}'s"


def at_rest(joint_state: Any) -> bool:
    """Every joint's velocity is zero (the sim controller publishes them at rest too)."""
    return all(abs(v) < 1e-12 for v in joint_state.velocity)


def test_a_dry_run_publishes_the_preview_and_moves_nothing(client: ErobsBtClient) -> None:
    assert run_to_end(client, script([move("safe_sample_transport")], gripper="epick")).result.success
    previews_before = client.previews.count
    # At rest: a state sent while the arm still moved may arrive after the result.
    joints = client.joint_states.wait_for(at_rest, 5.0, since=client.joint_states.count)
    assert joints is not None

    run = run_to_end(client, (require_samples() / "spincoat_to_hotplate.json").read_text(), dry_run=True)

    assert run.status_name == "SUCCEEDED" and run.result.completed_steps == 9
    preview = client.previews.wait_for(lambda m: True, 5.0, since=previews_before)
    assert preview is not None, "no preview trajectory"
    assert tuple(preview.joint_names) == JOINT_NAMES and len(preview.points) >= 2
    times = [convert.seconds(p.time_from_start) for p in preview.points]
    assert times == sorted(times) and len(set(times)) == len(times)
    after = client.joint_states.wait_for(lambda m: True, 5.0, since=client.joint_states.count)
    assert after is not None and at_rest(after)
    assert list(after.position) == pytest.approx(list(joints.position), abs=1e-9), "a preview moved the arm"


def test_cli_verbs_talk_to_the_node(client: ErobsBtClient, tmp_path: Path) -> None:
    runner = CliRunner()
    script_file = tmp_path / "move.json"
    script_file.write_text(script([move("vial_scan")]))

    sent = runner.invoke(commands.send, [str(script_file)])
    state = runner.invoke(commands.state, [])
    pause = runner.invoke(commands.pause, [])
    cancel = runner.invoke(commands.cancel, [])

    assert sent.exit_code == 0, sent.output
    assert "SUCCEEDED" in sent.output and "step 1/1" in sent.output
    assert state.exit_code == 0 and "IDLE" in state.output, state.output
    assert pause.exit_code == 1 and "No task is currently executing" in pause.output
    assert cancel.exit_code == 1 and "no active goal" in cancel.output
    rejected = runner.invoke(commands.send, [str(require_samples() / "legacy_place_on_hotplate.json")])
    assert rejected.exit_code == 2 and "INVALID_SCRIPT" in rejected.output, "exits as `validate` would"


def test_sigint_during_a_goal_stops_the_node_cleanly(
    node: NodeProcess, client: ErobsBtClient, shm_before: set[str]
) -> None:
    run = client.send(script([*LONG_BATCH, move("safe_sample_transport")]))
    assert run.accepted, run.rejection
    wait_feedback(run, lambda f: f.unit_index == 1, "for unit 1")
    states_before = client.states.count

    status = node.stop()
    farewell = client.states.wait_for(lambda m: m.message == "node shutting down", 5.0, since=states_before)
    result = run.wait(10.0)
    client.close()

    # The result says why the goal ended, and its status and code agree.
    assert run.status_name == "ABORTED" and result.error_code == "SHUTDOWN", result
    assert "node shutting down" in result.error_message, result.error_message
    assert status == 0, node.output
    assert "Traceback" not in node.output and "never retrieved" not in node.output, node.output
    assert farewell is not None and farewell.state == "IDLE", "the final state was not published"
    assert orphaned_segments(shm_before, node.environment.domain_id) == set()


# -- a node of its own: a fatal replay error faults it ------------------------------------
def test_an_injected_replay_timeout_faults_the_node_and_later_goals_are_rejected(
    tmp_path: Path,
) -> None:
    faults = tmp_path / "faults.yaml"
    faults.write_text(yaml.safe_dump({"faults": [{"call": "replay", "outcome": "acceptance_timeout"}]}))
    # Starts and ends at the cell's initial pose, so the second run has the first run's key.
    there_and_back = script([move("sample_scan_1"), move("safe_sample_transport")], gripper="epick")
    shm_before = fastdds_segments()
    with ros_environment(tmp_path / "ros_log") as environment:
        process = NodeProcess(environment, {"speed": SPEED, "faults_file": str(faults)})
        process.start()
        try:
            with ErobsBtClient(domain_id=environment.domain_id) as ros_client:
                assert ros_client.wait_for_server(30.0), process.output
                first = run_to_end(ros_client, there_and_back)
                second = run_to_end(ros_client, there_and_back)
                faulted = ros_client.wait_for_state("FAULTED", 5.0)
                third = ros_client.send(there_and_back)
                script_file = tmp_path / "there_and_back.json"
                script_file.write_text(there_and_back)
                refused = CliRunner().invoke(commands.send, [str(script_file)])
                resume = ros_client.resume()
                states_before = ros_client.states.count
                reset = CliRunner().invoke(commands.reset_fault, [])
                cleared = ros_client.wait_for_state("IDLE", 5.0, since=states_before)
                again = ros_client.reset_fault()
                fourth = run_to_end(ros_client, script([move("vial_scan")], gripper="epick"))
        finally:
            status = process.stop()

    assert first.status_name == "SUCCEEDED"
    assert "HIT" in {f.cache_status for f in second.feedback.items()}
    assert second.status_name == "ABORTED"
    assert second.result.error_code == "REPLAY_TIMEOUT"
    assert second.result.error_message.startswith("REPLAY_TIMEOUT: ")
    assert faulted is not None and faulted.message.startswith("REPLAY_TIMEOUT: ")
    assert not third.accepted and "FAULTED" in third.rejection
    assert refused.exit_code == 1, refused.output
    assert "orchestrator is FAULTED (REPLAY_TIMEOUT: " in refused.output, refused.output
    assert "reset the fault or restart" in refused.output and "state is unknown" not in refused.output
    assert resume == (False, "Not paused"), "Resume does not clear a fault"
    assert reset.exit_code == 0 and "Fault cleared: REPLAY_TIMEOUT: " in reset.output, reset.output
    assert cleared is not None and "fault reset" in cleared.message
    assert again[0] is False and "Not faulted" in again[1]
    assert fourth.status_name == "SUCCEEDED", "the node serves goals again without a restart"
    assert "fault_reset" in process.output or "reset_fault" in process.output, process.output
    assert status == 0, process.output
    assert orphaned_segments(shm_before, environment.domain_id) == set()


# -- pieces without a ROS graph -----------------------------------------------------------------
def test_the_launch_file_is_valid_python() -> None:
    source = (REPO / "launch" / "erobs_bt.launch.py").read_text()
    code = compile(source, "erobs_bt.launch.py", "exec")
    assert "generate_launch_description" in code.co_names


def test_serve_passes_overrides_after_the_params_file(tmp_path: Path) -> None:
    cell = tmp_path / "cell.yaml"
    args = commands.serve_arguments(REPO / "config" / "erobs_bt.yaml", cell=cell, speed=5, no_batching=True)
    assert args[:3] == ["--ros-args", "--params-file", str(REPO / "config" / "erobs_bt.yaml")]
    assert args[3:] == [
        "-p",
        f'cell_config:="{cell.resolve()}"',
        "-p",
        "speed:=5.0",
        "-p",
        "enable_batching:=false",
    ]


def test_snapshots_are_sent_on_change_at_most_at_the_rate_and_always_at_the_end() -> None:
    now = [0.0]
    sent: list[TreeState] = []
    throttle = SnapshotThrottle(sent.append, rate=10.0, clock=lambda: now[0])
    leaf = py_trees.behaviours.Running("work")
    root = py_trees.composites.Sequence("script", memory=True, children=[leaf])

    root.tick_once()
    throttle.ticked("goal-1", root)
    first = throttle.poll()
    root.tick_once()
    throttle.ticked("goal-1", root)
    now[0] = 0.05
    too_soon = throttle.poll()
    now[0] = 0.2
    unchanged = throttle.poll()
    final = throttle.finish("goal-1", root)
    again = throttle.finish("goal-1", root)

    assert first is not None and first.root_status == "RUNNING"
    tip = first.tip()
    assert tip is not None and tip.name == "work" and [b.is_active for b in first.behaviours] == [True, True]
    assert too_soon is None and unchanged is None
    assert final is not None and final.final and again is None
    assert [s.final for s in sent] == [False, True]


def test_a_solution_becomes_one_joint_trajectory_without_tool_commands() -> None:
    zero = (0.0,) * 6
    a, b, c = zero, (0.1,) * 6, (0.2,) * 6
    solution = Solution(
        segments=(
            ArmSegment(0, (TrajectoryPoint(a, zero, zero, 0.0), TrajectoryPoint(b, zero, zero, 1.5))),
            ToolSegment(1, "epick", "vacuum_on"),
            ArmSegment(2, (TrajectoryPoint(b, zero, zero, 0.0), TrajectoryPoint(c, zero, zero, 0.5))),
        ),
        model_revision="robot_models__epick__3mm_dia",
    )

    trajectory = convert.solution_to_trajectory(solution, stamp=convert.time_msg(0.0))

    assert tuple(trajectory.joint_names) == JOINT_NAMES
    assert [convert.seconds(p.time_from_start) for p in trajectory.points] == [0.0, 1.5, 2.0]
    assert [tuple(p.positions) for p in trajectory.points] == [a, b, c]


def test_a_goal_shut_down_while_paused_is_aborted_with_shutdown(tmp_path: Path) -> None:
    shm_before = fastdds_segments()
    with ros_environment(tmp_path / "ros_log") as environment:
        process = NodeProcess(environment, {"speed": SPEED})
        process.start()
        try:
            with ErobsBtClient(domain_id=environment.domain_id) as ros_client:
                assert ros_client.wait_for_server(30.0), process.output
                run = ros_client.send(script([PAUSE, move("vial_scan")]))
                assert run.accepted, run.rejection
                assert ros_client.wait_for_state("PAUSED", GOAL_TIMEOUT) is not None
                status = process.stop()
                result = run.wait(10.0)
        finally:
            status = process.stop()

    assert status == 0, process.output
    # Before: ABORTED with error_code "CANCELED" (status and code disagreed).
    assert run.status_name == "ABORTED" and result.error_code == "SHUTDOWN", result
    assert "node shutting down" in result.error_message
    assert orphaned_segments(shm_before, environment.domain_id) == set()


def test_a_dead_executor_thread_makes_the_node_exit_non_zero(tmp_path: Path) -> None:
    """A supervisor with respawn-on-failure must see the node fail (it exited 0 before)."""
    from erobs_bt.ros.node.node import EXIT_EXECUTOR_DIED, run

    def kill_the_executor(ros_node: Any) -> None:
        def boom() -> None:
            raise RuntimeError("a callback that raises, outside the node's guards")

        ros_node.create_timer(0.01, boom)

    with ros_environment(tmp_path / "ros_log") as environment:
        code = run(["--ros-args", "-p", "backend:=scripted"], on_ready=kill_the_executor)
        # Its DDS participant (with a server that answers nobody) has left the domain: it
        # lingered until a garbage collection, and a later reservation of this domain (the
        # next test module's, another suite's) found a dead /erobs_bt there.
        left_behind = participant_ports(environment.domain_id)

    assert code == EXIT_EXECUTOR_DIED != 0
    assert left_behind == []


def test_every_text_reaching_a_message_is_valid_utf8_without_nul() -> None:
    """Unit check of the conversions (no graph): serialising a message whose text came from
    a hostile script works, and nothing after an embedded NUL is lost."""
    from erobs_bt_interfaces.action import ExecuteScript
    from erobs_bt_interfaces.msg import ExecutionState
    from rclpy.serialization import deserialize_message, serialize_message

    from erobs_bt.orchestrator import Feedback, GoalStatus, Result, State

    nasty = "frame \ud800 / ep\x00ick"
    result = convert.result_to_msg(Result(GoalStatus.ABORTED, nasty, "EXECUTION_FAILED", 0, 1))
    state = convert.state_to_msg(
        State.IDLE,
        nasty,
        goal_id="goal-\udfff",
        current_step=0,
        total_steps=1,
        unit_index=0,
        stamp=convert.time_msg(0.0),
    )
    feedback = convert.feedback_to_msg(
        Feedback(
            current_step=1,
            total_steps=1,
            current_action=nasty,
            progress_percentage=0.0,
            status_message=nasty,
            current_gripper="ep\x00ick",
            unit_index=1,
            cache_status="",
        )
    )

    back = deserialize_message(serialize_message(result), ExecuteScript.Result)
    assert back.error_message == "frame \\ud800 / ep\\x00ick"
    assert deserialize_message(serialize_message(state), ExecutionState).goal_id == "goal-\\udfff"
    assert deserialize_message(serialize_message(feedback), ExecuteScript.Feedback).current_gripper == (
        "ep\\x00ick"
    )
    assert convert.ros_text("Grüße, ok") == "Grüße, ok", "valid text is unchanged"


def test_the_snapshot_encoder_serialises_exactly_what_snapshot_to_msg_does() -> None:
    from erobs_bt_interfaces.msg import TreeSnapshot
    from rclpy.serialization import deserialize_message, serialize_message

    from erobs_bt.ros.snapshots import TreeTracker

    # Names and messages of every length modulo 4 (CDR padding), non-ASCII, a NUL, a surrogate.
    leaves = [
        py_trees.behaviours.Success(name=name)
        for name in ("a", "ab", "abc", "abcd", "Grüße", "ep\x00ick", "frame \ud800")
    ]
    root = py_trees.composites.Sequence("script", memory=True, children=leaves)
    root.tick_once()
    leaves[2].feedback_message = 'quote " and \\ back'
    leaves[3].feedback_message = "Grüße \ud800"
    tracker = TreeTracker("goal-7", root)
    encoder = convert.TreeSnapshotEncoder(tracker)
    for final in (False, True):
        state = tracker.full(final=final, unit_index=3)
        for with_json in (False, True):
            expected = convert.snapshot_to_msg(state, with_json=with_json)
            encoded = encoder.full(state, with_json=with_json)
            got = deserialize_message(encoded, TreeSnapshot)
            assert len(encoded) == len(serialize_message(expected))
            assert got.behaviours == expected.behaviours
            assert (
                got.goal_id,
                got.state,
                got.unit_index,
                got.final,
                got.tip_id,
                got.delta,
                got.sequence,
            ) == (
                expected.goal_id,
                expected.state,
                expected.unit_index,
                expected.final,
                expected.tip_id,
                expected.delta,
                expected.sequence,
            )
            assert got.stamp == expected.stamp
            if with_json:
                assert json.loads(got.tree_json) == json.loads(expected.tree_json)
                # Byte for byte: compact JSON, each behaviour's keys in the encoder's order.
                keys = ("id", "name", "type", "parent_id", "children", "status", "message", "is_active")
                document = json.loads(got.tree_json)
                document["behaviours"] = [{k: b[k] for k in keys} for b in document["behaviours"]]
                assert got.tree_json == json.dumps(document, separators=(",", ":"))
            else:
                assert got.tree_json == ""
        leaves[0].feedback_message = "changed after the first full snapshot"
        root.tick_once()


def test_the_snapshot_encoder_serialises_deltas_exactly_as_snapshot_to_msg_does() -> None:
    from erobs_bt_interfaces.msg import TreeSnapshot
    from rclpy.serialization import deserialize_message, serialize_message

    from erobs_bt.ros.snapshots import TreeTracker

    leaves = [py_trees.behaviours.Running(name=name) for name in ("a", "Grüße", "ep\x00ick", "frame \ud800")]
    root = py_trees.composites.Parallel(
        "script", policy=py_trees.common.ParallelPolicy.SuccessOnAll(), children=leaves
    )
    tracker = TreeTracker("goal-8", root)
    serializer = convert.SnapshotSerializer()
    serializer.serialize(tracker.full(), tracker, with_json=True)
    for message in ("", "abc", "Grüße \ud800", 'quote " and \\ back'):
        root.tick_once()
        leaves[1].feedback_message = message
        leaves[3].feedback_message = message + "!"
        delta = tracker.delta(unit_index=2)
        assert delta is not None and not delta.full and delta.behaviours
        expected = convert.snapshot_to_msg(delta, with_json=True)
        encoded = serializer.serialize(delta, tracker, with_json=True)
        # Equal but for padding bytes (rclpy leaves those as they were in its buffer).
        assert len(encoded) == len(serialize_message(expected))
        assert deserialize_message(encoded, TreeSnapshot) == expected
    # The tracker's change log started afresh (it does past a few changes per behaviour):
    # the kept encoder re-reads every state, and says what a new one says.
    leaves[0].feedback_message = "after the log started afresh"
    tracker.changes.clear()
    tracker.changes_epoch += 1
    state = tracker.full()
    kept = serializer.serialize(state, tracker, with_json=True)
    assert kept == convert.TreeSnapshotEncoder(tracker).full(state, with_json=True)


def test_feedback_is_thinned_within_a_unit_but_keeps_every_units_last_and_every_decision() -> None:
    from erobs_bt.orchestrator import Feedback

    def fb(unit: int, cache: str = "", message: str = "") -> Feedback:
        return Feedback(unit, 10, f"unit {unit}", 10.0 * unit, message, "pipettor", unit, cache)

    supersedes = convert.feedback_supersedes
    # Within a unit the newer report says all the waiting one said.
    assert supersedes(fb(3, "", "unit 3: plan"), fb(3, "", "unit 3 started"))
    assert supersedes(fb(3, "MISS", "unit 3: plan"), fb(3, "", "unit 3 started"))
    assert supersedes(fb(3, "MISS", "unit 3 done"), fb(3, "MISS", "unit 3: execute"))
    # A later unit's feedback never replaces a waiting one: every unit's last one is sent.
    assert not supersedes(fb(4), fb(3))
    assert not supersedes(fb(4), fb(3, "INELIGIBLE", "unit 3 done"))
    assert not supersedes(fb(4), fb(3, "HIT", "unit 3 done"))
    assert not supersedes(fb(4, "MISS"), fb(3, "MISS", "unit 3 done"))


def test_the_feedback_bytes_deserialise_to_the_message_feedback_to_msg_builds() -> None:
    from erobs_bt_interfaces.action import ExecuteScript
    from rclpy.serialization import deserialize_message, serialize_message
    from unique_identifier_msgs.msg import UUID

    from erobs_bt.orchestrator import Feedback

    goal_uuid = bytes(range(200, 216))
    # Strings of every length modulo 4 (CDR padding) in every position, non-ASCII, a NUL, a
    # lone surrogate; a fractional percentage; large counters.
    texts = ["", "a", "ab", "abc", "abcd", "Grüße", "ep\x00ick", "frame \ud800"]
    for i, text in enumerate(texts):
        rotated = texts[i:] + texts[:i]
        feedback = Feedback(
            current_step=i,
            total_steps=4_000_000_000,
            current_action=rotated[0],
            progress_percentage=100.0 * i / 7,
            status_message=rotated[1],
            current_gripper=rotated[2],
            unit_index=i + 1,
            cache_status=rotated[3],
        )
        expected = ExecuteScript.Impl.FeedbackMessage(
            goal_id=UUID(uuid=list(goal_uuid)), feedback=convert.feedback_to_msg(feedback)
        )
        reference = serialize_message(expected)
        encoded = convert.feedback_message_cdr(goal_uuid, feedback)
        assert len(encoded) == len(reference), text
        got = deserialize_message(encoded, ExecuteScript.Impl.FeedbackMessage)
        assert bytes(got.goal_id.uuid) == goal_uuid
        # (progress_percentage is a float32 on the wire: compare what the reference carries.)
        assert got.feedback == deserialize_message(reference, ExecuteScript.Impl.FeedbackMessage).feedback
    with pytest.raises(ValueError, match="16 bytes"):
        convert.feedback_message_cdr(b"short", feedback)


def test_the_feedback_pump_publishes_every_units_last_feedback_and_the_goals_last() -> None:
    import threading

    from erobs_bt.orchestrator import Feedback
    from erobs_bt.ros.node.goal_server import _NATIVE, _FeedbackPump

    published: list[Feedback] = []
    started = threading.Event()

    class GoalHandle:
        is_active = True

    def publish(goal_handle: object, feedback: Feedback) -> None:
        started.wait(10.0)  # the pump publishes nothing until every feedback is queued
        published.append(feedback)

    api = dataclasses.replace(_NATIVE, publish=publish)
    pump = _FeedbackPump(lambda text: pytest.fail(text), rate=50.0)
    goal = GoalHandle()
    units, phases = 300, ("started", "run started", "run finished", "done")
    try:
        for unit in range(1, units + 1):
            for n, phase in enumerate(phases):
                done = unit - 1 + (n == len(phases) - 1)
                pump.put(
                    goal,
                    api,
                    Feedback(unit, units, "pipettor", 100.0 * done / units, phase, "pipettor", unit, ""),
                )
        started.set()
        pump.flush(10.0)  # what the node does before it sends the result
    finally:
        pump.close()
    # Every unit is reported, in order, by its last feedback (within a unit the newest
    # replaces a waiting one); the first one may have gone out before its unit's next ones.
    last_of_each = {}
    for feedback in published:
        last_of_each[feedback.unit_index] = feedback.status_message
    assert [f.unit_index for f in published] == sorted(f.unit_index for f in published)
    assert sorted(last_of_each) == list(range(1, units + 1))
    assert set(last_of_each.values()) == {"done"}
    assert (published[-1].unit_index, published[-1].progress_percentage) == (units, 100.0)
    assert len(published) <= units + 1

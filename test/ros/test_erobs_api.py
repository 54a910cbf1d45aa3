"""EROBS's own API (beambot_*) beside the native one, driven by a raw client process that
imports only rclpy, action_msgs, beambot_interfaces, std_srvs and std_msgs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import Cells
from ros_fixtures import REPO

from erobs_bt.ros.client.client import ErobsBtClient

from helpers import LED, move, script


def test_a_raw_erobs_client_runs_pauses_resumes_and_cancels_all(cells: Cells) -> None:
    # units: 1 = batch of 6 moves, 2 = LED, 3 = move (8 steps); then move, pause, move (3 steps)
    first = script([move("sample_scan_1"), move("pipettor_scan")] * 3 + [LED, move("vial_scan")])
    second = script([move("sample_scan_1"), {"task_type": "pause"}, move("vial_scan")])
    completed = subprocess.run(
        [sys.executable, str(Path(__file__).parents[1] / "raw_erobs_client.py"), "/cell1", first, second],
        cwd=REPO,
        env=dict(cells.environment.env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr + cells.nodes["cell1"].output[-3000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])

    assert report["imported_erobs_bt"] is False
    assert report["gripper_on_connect"] in ("pipettor", "epick", "none", "hande", "2fg7")
    assert report["accepted"] is True
    assert report["pause"] == [True, "Pause requested; pausing after the current unit completes"]
    assert report["pause_again"] == [False, "Already paused"]
    assert report["republished_while_paused"] >= 3 and report["republished_identical"]
    assert report["resume"][0] is True
    first_result = report["first"]
    assert first_result["status"] == 4  # SUCCEEDED
    assert (first_result["success"], first_result["error_message"]) == (True, "")
    assert (first_result["completed_steps"], first_result["total_steps"]) == (8, 8)
    assert first_result["detected_position"] == [] and first_result["detected_orientation"] == []
    assert first_result["last_feedback"]["progress_percentage"] == 100.0
    assert first_result["last_feedback"]["current_gripper"] == "pipettor"
    assert report["idle_after_goal"] is True
    assert report["resume_not_paused"] == [False, "Not currently paused"]
    assert report["cancel_all"] == {"return_code": 0, "goals_canceling": 1}
    second_result = report["second"]
    assert second_result["status"] == 5  # CANCELED
    assert second_result["success"] is False and "paused" in second_result["error_message"]
    assert (second_result["completed_steps"], second_result["total_steps"]) == (1, 3)


def test_a_preview_is_published_as_a_display_trajectory_for_the_erobs_gui(cells: Cells) -> None:
    from moveit_msgs.msg import DisplayTrajectory

    from erobs_bt.ros.client.client import Recorder, latched_qos

    with ErobsBtClient("/cell2/erobs_bt", domain_id=cells.environment.domain_id) as client:
        assert client.wait_for_server(30.0), cells.nodes["cell2"].output
        displays: Recorder[object] = Recorder()
        client.node.create_subscription(
            DisplayTrajectory, "/cell2/beambot/preview_trajectory", displays.add, latched_qos()
        )
        before = displays.count
        run = client.send(script([move("sample_scan_1"), move("vial_scan")]), dry_run=True)
        assert run.accepted, run.rejection
        run.wait(120.0)
        assert run.status_name == "SUCCEEDED"
        display = displays.wait_for(lambda m: True, 10.0, since=before)

    assert display is not None, "no DisplayTrajectory on /cell2/beambot/preview_trajectory"
    trajectory = display.trajectory[0].joint_trajectory
    assert len(display.trajectory) == 1 and len(trajectory.points) >= 2
    assert list(display.trajectory_start.joint_state.name) == list(trajectory.joint_names)
    assert list(display.trajectory_start.joint_state.position) == list(trajectory.points[0].positions)

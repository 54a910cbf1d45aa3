"""The bringup's process handling (erobs_bt/backends/ros2_control/bringup.py), without ROS.

The command here is a small Python program that writes its own PID and its child's into a file
and then sleeps: the tests wait for that file (an event, no sleep), then check that a stop, a
failed launch or an interrupted one leaves neither process behind (the whole process group, as
EROBS's ``kill_current_process`` does), and the gates around a launch: another bringup already
serving, the dashboard refusing to start the program, the arm not at rest.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.backends.ros2_control.bringup import Bringup, BringupConfig, Check
from erobs_bt.backends.ros2_control.link import wait_ready

from helpers import process_alive

#: Writes "<its PID> <its child's PID>" to argv[1], then sleeps; the child ignores SIGTERM, so
#: only the group's SIGKILL ends it.
PROGRAM = (
    "import os, signal, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', "
    "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
    "time.sleep(0.2)\n"
    "open(sys.argv[1] + '.partial', 'w').write(f'{os.getpid()} {child.pid}')\n"
    "os.replace(sys.argv[1] + '.partial', sys.argv[1])\n"
    "print('bringup for', sys.argv[2], flush=True)\n"
    "time.sleep(600)\n"
)


def config(tmp_path: Path, **options: Any) -> BringupConfig:
    fields: dict[str, Any] = {
        "command": (sys.executable, "-c", PROGRAM, str(tmp_path / "pids"), "{tool}"),
        "ready_timeout": 30.0,
        "stop_timeout": 0.5,
        "power_settle": 0.0,
        "drain_timeout": 0.0,
        "play_service": "",
    }
    return BringupConfig(**{**fields, **options})


def pids(tmp_path: Path) -> list[int]:
    return [int(p) for p in (tmp_path / "pids").read_text().split()]


def started(tmp_path: Path) -> Check:
    """Ready once the program has written its PIDs."""
    return ("the program's PIDs", (tmp_path / "pids").exists)


@pytest.fixture(autouse=True)
def log_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "log"
    monkeypatch.setenv("ROS_LOG_DIR", str(folder))
    return folder


def test_a_stop_ends_the_whole_process_group_even_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    bringup = Bringup(config(tmp_path), lambda tool: [started(tmp_path)])
    bringup.launch("hande", what="start-up")
    leader, child = pids(tmp_path)
    assert process_alive(leader) and process_alive(child) and bringup.tool == "hande"

    bringup.stop()

    assert not process_alive(leader) and wait_ready(lambda: not process_alive(child), 10.0)
    assert bringup.tool is None


def test_a_relaunch_replaces_the_process_and_keeps_its_output(tmp_path: Path, log_dir: Path) -> None:
    bringup = Bringup(config(tmp_path), lambda tool: [started(tmp_path)])
    bringup.launch("epick", what="start-up")
    first = pids(tmp_path)
    (tmp_path / "pids").unlink()

    bringup.launch("none", what="tool_exchange dock")

    second = pids(tmp_path)
    assert wait_ready(lambda: not any(process_alive(pid) for pid in first), 10.0) and all(
        process_alive(pid) for pid in second
    )
    assert bringup.launches == 2 and bringup.tool == "none"
    bringup.stop()
    outputs = sorted(p.read_text() for p in log_dir.glob("erobs_bt_bringup_*.log"))
    assert outputs == ["bringup for epick\n", "bringup for none\n"]


def test_a_launch_that_is_not_back_in_time_stops_what_it_started(tmp_path: Path) -> None:
    def never() -> bool:
        # Holds the launch until the program has written its PIDs (however loaded the machine),
        # so the timeout's clean-up always has the two processes to end.
        assert wait_ready((tmp_path / "pids").exists, 30.0)
        return False

    bringup = Bringup(config(tmp_path, ready_timeout=1.0), lambda tool: [("the arm's controller", never)])

    with pytest.raises(MotionError) as failure:
        bringup.launch("hande", what="tool_exchange load")

    assert failure.value.code is ErrorCode.EXECUTION_FAILED
    assert failure.value.detail.startswith(
        "tool_exchange load: the cell was not back within 1 s of launching the bringup for the hande: "
        "no the arm's controller; its output ended: bringup for hande ("
    )
    assert bringup.tool is None
    leader, child = pids(tmp_path)
    assert not process_alive(leader) and wait_ready(lambda: not process_alive(child), 10.0)


def test_a_stop_interrupts_a_launch_in_progress(tmp_path: Path) -> None:
    bringup: Bringup

    def interrupt_once_started() -> bool:
        if (tmp_path / "pids").exists():
            bringup.interrupt()  # what MotionStack.stop does through the changer
        return False

    bringup = Bringup(config(tmp_path), lambda tool: [("never", interrupt_once_started)])

    with pytest.raises(MotionError) as failure:
        bringup.launch("hande", what="tool_exchange load")

    assert failure.value.detail == "tool_exchange load: stopped by request"
    leader, child = pids(tmp_path)
    assert not process_alive(leader) and wait_ready(lambda: not process_alive(child), 10.0)


def test_a_second_bringup_beside_one_already_serving_is_refused(tmp_path: Path) -> None:
    bringup = Bringup(
        config(tmp_path),
        lambda tool: [started(tmp_path)],
        gone=lambda: [("FollowJointTrajectory server /x/follow_joint_trajectory", lambda: True)],
    )

    with pytest.raises(MotionError) as failure:
        bringup.launch("epick", what="start-up")

    assert failure.value.detail.startswith(
        "start-up: another bringup already serves the cell (FollowJointTrajectory server "
        "/x/follow_joint_trajectory)"
    )
    assert not (tmp_path / "pids").exists(), "nothing was launched"


class Dashboard:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.calls = 0

    def ready(self) -> bool:
        return True

    def play(self, timeout: float) -> str:
        self.calls += 1
        return self.answer


def test_the_program_is_started_through_the_dashboard_after_each_launch(tmp_path: Path) -> None:
    dashboard = Dashboard("")
    bringup = Bringup(
        config(tmp_path, play_service="/dashboard_client/play"),
        lambda tool: [started(tmp_path)],
        dashboard=dashboard,
    )
    bringup.launch("epick", what="start-up")
    (tmp_path / "pids").unlink()
    bringup.launch("none", what="tool_exchange dock")
    bringup.stop()
    assert dashboard.calls == 2


def test_a_refused_play_fails_the_launch_and_stops_it(tmp_path: Path) -> None:
    bringup = Bringup(
        config(tmp_path, play_service="/dashboard_client/play"),
        lambda tool: [started(tmp_path)],
        dashboard=Dashboard("refused: Robot is in protective stop"),
    )

    with pytest.raises(MotionError) as failure:
        bringup.launch("epick", what="start-up")

    assert failure.value.detail == (
        "start-up: the robot program did not start after the bringup for the epick: "
        "/dashboard_client/play: refused: Robot is in protective stop"
    )
    assert bringup.tool is None


def test_a_relaunch_waits_for_the_arm_at_rest_and_refuses_otherwise(tmp_path: Path) -> None:
    def moving(what: str) -> None:
        raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: the arm is not at rest")

    bringup = Bringup(config(tmp_path), lambda tool: [started(tmp_path)], before_relaunch=moving)
    bringup.launch("epick", what="start-up")  # nothing runs yet: not asked
    running = pids(tmp_path)

    with pytest.raises(MotionError, match="tool_exchange dock: the arm is not at rest"):
        bringup.launch("none", what="tool_exchange dock")

    assert all(process_alive(pid) for pid in running), "the running bringup was left alone"
    bringup.stop()

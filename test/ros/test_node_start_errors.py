"""A node that cannot start (its poses file is missing) exits with its clean error, every time.

The early exit used to leave the half-built node alive: its feedback and run-log threads
held it, so its DDS participant was still in the domain when the interpreter and Fast DDS
tore themselves down at exit, in no particular order; once in about 18 tries under load
(issue 27) the process died of a segmentation fault (exit 139) instead of exiting 2 with
its message. Now the node stops what it started and destroys itself before the error
leaves its constructor. The first test checks that deterministically (the threads and the
participant are gone at once); the second repeats the process's early exit.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from rclpy.parameter import Parameter
from ros_fixtures import PARAMS_FILE, REPO, RosEnvironment, participant_ports

from erobs_bt.backends.ros2_control.context import init_context
from erobs_bt.ros.node.node import ErobsBtNode
from erobs_bt.ros.process import EXIT_CONFIG

pytestmark = pytest.mark.ros

#: Threads the node starts while it is built (feedback pump, run-log writer).
NODE_THREADS = ("erobs_bt-feedback", "erobs_bt-run-logs")


def test_a_node_that_cannot_start_stops_its_threads_and_leaves_the_domain(
    ros_env: RosEnvironment, tmp_path: Path
) -> None:
    missing = tmp_path / "missing_poses.yaml"
    context = init_context(ros_env.domain_id)
    try:
        with pytest.raises((OSError, ValueError)) as raised:
            ErobsBtNode(
                context=context,
                parameter_overrides=[
                    Parameter("poses_file", value=str(missing)),
                    Parameter("run_log_dir", value=str(tmp_path / "runs")),
                ],
            )
        assert "missing_poses.yaml" in str(raised.value)
        # The exception (and its frames, which hold the half-built node) is still alive here:
        # the node must have cleaned up by itself, not through the garbage collector.
        left = [t.name for t in threading.enumerate() if t.name in NODE_THREADS]
        assert left == [], f"threads of the node that failed are still running: {left}"
        assert participant_ports(ros_env.domain_id) == [], "the failed node's DDS participant is still there"
    finally:
        context.try_shutdown()


def test_the_node_process_exits_with_its_clean_error_every_time(
    ros_env: RosEnvironment, tmp_path: Path
) -> None:
    command = [
        sys.executable,
        "-m",
        "erobs_bt.ros.node.node",
        "--ros-args",
        "--params-file",
        str(PARAMS_FILE),
    ]
    command += [
        "-p",
        f"poses_file:={tmp_path / 'missing_poses.yaml'}",
        "-p",
        f"run_log_dir:={tmp_path / 'runs'}",
    ]
    for attempt in range(6):
        completed = subprocess.run(
            command, cwd=REPO, env=ros_env.env, capture_output=True, text=True, timeout=120
        )
        output = completed.stdout + completed.stderr
        assert completed.returncode == EXIT_CONFIG, (
            f"attempt {attempt + 1}: exit {completed.returncode}\n{output}"
        )
        assert "erobs_bt: cannot start:" in completed.stderr and "missing_poses.yaml" in completed.stderr, (
            output
        )
        assert "Traceback" not in output and "terminate called" not in output, output

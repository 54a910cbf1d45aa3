"""scripts/env.sh: SIGINT and SIGTERM reach the command whatever the job control (a
background job of a script, where bash ignores SIGINT), and the throw-away ROS log folder is
kept only when the failed command left something worth reading in it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ros_fixtures import REPO, ros_environment

ENV_SH = REPO / "scripts" / "env.sh"

#: A command that, like the erobs_bt node, handles SIGINT/SIGTERM itself (it installs its
#: handlers even when the signal was ignored at start), says it is ready, and exits 0 on one.
WAITER = """
import signal, sys, threading
got = threading.Event()
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, lambda number, frame: got.set())
print("ready", flush=True)
got.wait()
print("stopped by a signal", flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_background_env_sh_of_a_script_forwards_the_signal(sig: signal.Signals, tmp_path: Path) -> None:
    # `bash -c '... &'` is a non-interactive shell without job control: its background job
    # starts with SIGINT ignored, as in any script that runs `scripts/env.sh CMD &`.
    wrapper = f'"{ENV_SH}" "{sys.executable}" -c "$WAITER" & echo "pid $!"; wait $!; echo "status $?"'
    env = {**os.environ, "WAITER": WAITER, "TMPDIR": str(tmp_path)}
    process = subprocess.Popen(["bash", "-c", wrapper], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline(), process.stdout.readline()]
        pid = int(next(line for line in lines if line.startswith("pid ")).split()[1])
        assert any(line.strip() == "ready" for line in lines), lines
        os.kill(pid, sig)
        rest, _ = process.communicate(timeout=30)  # without forwarding, the command never ends
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert "stopped by a signal" in rest and "status 0" in rest, rest


#: A refused verb: rclpy logs (an INFO line, or a WARN line) into ROS_LOG_DIR, then exit 1.
VERB = """
import os, sys, rclpy, rclpy.logging
rclpy.init()
logger = rclpy.logging.get_logger("erobs_bt_cli")
(logger.warning if sys.argv[1] == "warn" else logger.info)("goal refused: busy")
rclpy.shutdown()
print(os.environ["ROS_LOG_DIR"], flush=True)
sys.exit(1)
"""


@pytest.mark.ros
@pytest.mark.parametrize(("level", "kept"), [("info", False), ("warn", True)])
def test_the_ros_log_folder_of_a_failed_command_is_kept_only_with_something_to_read(
    level: str, kept: bool, tmp_path: Path
) -> None:
    with ros_environment(tmp_path / "domain_log") as environment:
        env = {**environment.env, "TMPDIR": str(tmp_path)}
        completed = subprocess.run(
            [str(ENV_SH), sys.executable, "-c", VERB, level],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert completed.returncode == 1, completed.stderr
    folder = Path(completed.stdout.strip())
    assert folder.parent == tmp_path and folder.name.startswith("erobs_bt-ros-log.")
    if kept:
        assert folder.is_dir() and any(folder.rglob("*.log")), "the WARN line is kept"
        assert f"ROS logs kept in {folder}" in completed.stderr
    else:
        assert not folder.exists(), f"nothing worth keeping in {folder}: {completed.stderr}"
        assert "ROS logs kept" not in completed.stderr

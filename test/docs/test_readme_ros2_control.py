"""The README's ros2_control walk-through, run as written from the repository alone.

The block is taken from README.md ("Driving a real arm (ros2_control)") and run by bash in
the repository's folder: the simulated hardware node and the node with the ros2_control
backend in the background, then ``send``. Only its ``export ROS_DOMAIN_ID=42`` is replaced by
the test's private domain, and an exit trap ends the two servers (SIGTERM by their PIDs,
which ``scripts/env.sh`` passes on) and waits for them. It needs no file outside the
repository (no ``../shared``). The block names the default venv, ``.venv/`` (ROS 2 Jazzy); under
another distro's venv (``.venv-kilted``) the test runs it with that venv's programs.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from readme_snippets import readme_blocks
from ros_fixtures import REPO, RosEnvironment

pytestmark = pytest.mark.ros

SECTION = "Driving a real arm (ros2_control)"


def test_the_walk_through_runs_as_written_from_the_repository(ros_env: RosEnvironment) -> None:
    block = readme_blocks(SECTION, "bash")[0]
    assert "../" not in block, "the walk-through names files outside the repository"
    assert re.search(r"^export ROS_DOMAIN_ID=\d+$", block, re.MULTILINE), block
    script = re.sub(
        r"^export ROS_DOMAIN_ID=\d+$", f"export ROS_DOMAIN_ID={ros_env.domain_id}", block, flags=re.MULTILINE
    )
    venv = Path(sys.prefix)
    if venv != REPO / ".venv":
        script = script.replace(".venv/bin/", f"{venv}/bin/")
    script = "trap 'kill -TERM $(jobs -p) 2>/dev/null; wait' EXIT\n" + script
    env = {k: v for k, v in ros_env.env.items() if k != "ROS_DOMAIN_ID"}
    process = subprocess.Popen(
        ["bash", "-e", "-c", script],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, ended below if it outlives the timeout
    )
    try:
        output, _ = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(60)
    assert process.returncode == 0, output
    assert "pick_and_place.json: SUCCEEDED" in output, output
    assert "cannot start" not in output, output

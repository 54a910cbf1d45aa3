"""The README's e-stop example, run as written: it shows what it claims (issue 40, item 4).

The block of "Scripts inside your own py_trees tree" runs ``examples/estop_two_scripts.py
--estop 3`` through ``scripts/env.sh`` from the repository's folder. Its output must show
the e-stop pressed while the arm moves in unit 3, the motion halted (the arm at rest), the
hold running above the halted work, and each script's final state: pick halted after its
first two units (2 of 8 steps), place never started. It used to exit at the press, with
the hold and pick still RUNNING.
"""

from __future__ import annotations

import os
import signal
import subprocess

from readme_snippets import readme_blocks
from ros_fixtures import REPO

SECTION = "Scripts inside your own py_trees tree"


def test_the_readme_estop_example_shows_the_motion_halted_and_the_final_states() -> None:
    (block,) = readme_blocks(SECTION, "bash")
    assert block.strip() == "scripts/env.sh .venv/bin/python examples/estop_two_scripts.py --estop 3", block
    process = subprocess.Popen(
        ["bash", "-e", "-c", block],
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, ended below if it outlives the timeout
    )
    try:
        output, _ = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(60)
    assert process.returncode == 0, output
    lines = output.splitlines()
    assert "e-stop pressed in unit 3 of pick, the arm moving" in lines, output
    halted = [line for line in lines if line.startswith("motion halted: the arm is at rest")]
    assert halted and "(joint speeds 0.0 rad/s" in halted[0], output
    # The tree after the reaction: the hold keeps the cell stopped; the motion's leaf was halted.
    assert "--> Hold [*] -- running" in output, output
    assert "--> ExecuteSolution [-] -- halted" in output, output
    assert "script: pick: INVALID (halted by the e-stop), 2/8 steps" in lines, output
    assert "script: place: INVALID (never started), 0/2 steps" in lines, output
    assert "RUNNING, 2/8 steps" not in output, output

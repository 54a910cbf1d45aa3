"""MADSci ``validate`` accepts exactly what ``run_script`` accepts (issue 40, item 1), and the
README's MADSci snippet runs as written.

In front of a ROS node (``--node``) the MADSci node validates with the node's own cell, pose
registry and batching, asked of the node: here a node whose ``poses_file`` is a registry of
its own (poses the packaged registry does not have, and without the packaged ``transport``)
and whose ``enable_batching`` is off. The embedded engine (no ``--node``) uses the registry
``erobs-bt run`` uses: the packaged one, with which ``config/full_experiment.json`` validates
and a script of its poses runs.
MADSci's own ``RestNodeClient`` drives both nodes (``test_madsci_node.MadsciNode``); every
process is stopped by its PID.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from madsci.common.types.action_types import ActionStatus
from readme_snippets import readme_blocks
from ros_fixtures import REPO, NodeProcess, RosEnvironment
from test_madsci_node import WAIT, MadsciNode, madsci_settings  # noqa: F401 (an autouse fixture)

from helpers import LED

pytestmark = pytest.mark.ros

#: A registry of the cell's own (degrees): two free poses of the packaged cell under names
#: the packaged config/poses.yaml does not have.
REGISTRY = """\
own_scan: [13.38, -112.45, -65.22, -90.98, -267.33, -166.94]
own_transport: [79.72, -69.5, -81.91, -117.92, -268.05, -157.15]
"""


def registry_script(*targets: str) -> str:
    """Moves to ``targets`` (named poses, none inline) and an LED step, with the pipettor."""
    tasks = [{"task_type": "moveto", "target": target, "planning_type": "joint"} for target in targets]
    return json.dumps({"start_gripper": "pipettor", "tasks": [*tasks, LED]})


def test_validate_in_front_of_a_ros_node_uses_the_nodes_registry_and_batching(
    ros_env: RosEnvironment, tmp_path: Path
) -> None:
    registry = tmp_path / "own_poses.yaml"
    registry.write_text(REGISTRY, encoding="utf-8")
    cell = NodeProcess(
        ros_env,
        {"speed": 20.0, "poses_file": str(registry), "enable_batching": False},
        ros_arguments=["-r", "__ns:=/cell7"],
    ).start()
    try:
        node = MadsciNode(ros_env, tmp_path, "--node", "/cell7/erobs_bt").start()
        try:
            own = registry_script("own_scan", "own_transport")
            packaged = registry_script("transport")
            validated = node.run("validate", script=own)
            ran = node.run("run_script", script=own)
            invalid = node.run("validate", script=packaged)
            refused = node.run("run_script", script=packaged)
        finally:
            assert node.stop() == 0, node.process.output
    finally:
        assert cell.stop() == 0, cell.output

    assert validated.status == ActionStatus.SUCCEEDED and validated.json_result["valid"], validated
    report = validated.json_result["report"]
    # The node's batching (off): every step is a unit of its own.
    assert report["total_steps"] == 3 and len(report["units"]) == 3, report
    assert ran.status == ActionStatus.SUCCEEDED, ran
    assert ran.json_result["total_steps"] == report["total_steps"]
    # A pose of the packaged registry, not of the node's: both refuse it, with one message.
    assert invalid.json_result["valid"] is False, invalid
    assert refused.json_result["error_code"] == "INVALID_SCRIPT", refused
    assert invalid.json_result["error"] == refused.json_result["error_message"]
    assert "Pose 'transport' not found" in invalid.json_result["error"], invalid.json_result


def test_the_embedded_engine_validates_and_runs_with_the_packaged_registry_and_the_readme_snippet_runs(
    ros_env: RosEnvironment, tmp_path: Path
) -> None:
    script = str(REPO / "config" / "full_experiment.json")
    node = MadsciNode(ros_env, tmp_path, "--speed", "20", "--run-log-dir", str(tmp_path / "runs")).start()
    try:
        validated = node.run("validate", script=script)
        # Poses of the packaged registry only (full_experiment.json waits at its pause steps).
        ran = node.run("run_script", script=registry_script("transport", "vial_scan"))
        # The README's snippet as a reader copies it, against this node's port.
        snippet = readme_blocks("MADSci (many cells under a lab orchestrator)", "python")[0]
        assert "http://127.0.0.1:2003" in snippet
        path = tmp_path / "snippet.py"
        path.write_text(snippet.replace("http://127.0.0.1:2003", node.url), encoding="utf-8")
        env = {
            **ros_env.env,
            "MADSCI_SETTINGS_DIR": str(os.environ["MADSCI_SETTINGS_DIR"]),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        shown = subprocess.run(
            [sys.executable, str(path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=WAIT
        )
    finally:
        assert node.stop() == 0, node.process.output

    assert validated.status == ActionStatus.SUCCEEDED and validated.json_result["valid"], validated
    assert validated.json_result["report"]["total_steps"] == 36
    assert ran.status == ActionStatus.SUCCEEDED, ran
    assert ran.json_result["completed_steps"] == ran.json_result["total_steps"] == 3, ran.json_result
    assert shown.returncode == 0, shown.stdout + shown.stderr
    sent, reason = shown.stdout.strip().splitlines()[-2:]
    assert sent == "failed [] None", shown.stdout  # what send_action says of a failed action
    assert reason.startswith("INVALID_SCRIPT tasks[0].target: Pose 'nowhere' not found"), shown.stdout

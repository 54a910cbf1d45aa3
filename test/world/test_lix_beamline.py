"""A beamline file whose ``poses_file`` does not exist (issue 38, item 5).

EROBS reads a missing pose registry as an empty one (``orchestrator._load_poses_registry``
returns ``{}`` when the file is absent), and LiX's ``lix_beamline.yaml`` names
``src/lix/poses.yaml``, which EROBS's repository does not have. erobs_bt loads such a
beamline with an empty registry and says so: ``validate`` and ``run`` print the warning,
the node logs it. EROBS's own files are read from ``../shared/samples/erobs/workspace``
(jazzy_dev @ 739cc0c); the test skips without them, or fails with
``EROBS_BT_REQUIRE_SHARED=1``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SAMPLES_DIR, require_samples
from test_beamline_config import write_workspace

from erobs_bt.cli import main
from erobs_bt.plan import pose_registry_file
from erobs_bt.world.beamline import beamline_warnings, compiled_cell_path, load_beamline

#: LiX's beamline file in EROBS's workspace.
LIX = SAMPLES_DIR / "workspace" / "src" / "beambot" / "config" / "lix_beamline.yaml"

#: A script for LiX's Hand-E at its SRDF's one arm state, with a field no one reads.
LIX_SCRIPT = {
    "start_gripper": "hande",
    "tasks": [
        {"task_type": "moveto", "target": "moveit_home", "notes": "LiX's one named state"},
        {"task_type": "end_effector", "end_effector_action": "hande_closed"},
    ],
}


def lix() -> Path:
    require_samples()
    assert LIX.is_file(), LIX
    return LIX


def missing_poses_warning(beamline: Path, poses: Path) -> str:
    return (
        f"{beamline}: poses_file: {poses} does not exist; the pose registry is empty, as in EROBS "
        "(pose names resolve from a script's poses and the named states only)"
    )


def test_a_missing_poses_file_is_an_empty_registry_and_a_warning(tmp_path: Path) -> None:
    path = write_workspace(tmp_path / "ws")
    (tmp_path / "ws" / "src" / "testbl" / "poses.yaml").unlink()
    assert load_beamline(path).name == "testbl_beamline"
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "poses.yaml").write_text("stale: [0, 0, 0, 0, 0, 0]\n", encoding="utf-8")
    cell = compiled_cell_path(path, directory=tmp_path / "out")
    assert not (tmp_path / "out" / "poses.yaml").exists(), "no registry beside the compiled cell"
    assert pose_registry_file(cell, None) is None
    assert beamline_warnings(cell) == (
        missing_poses_warning(path, tmp_path / "ws" / "src" / "testbl" / "poses.yaml"),
    )
    # A beamline with its registry, and erobs_bt's own cell format, warn of nothing.
    (tmp_path / "ws" / "src" / "testbl" / "poses.yaml").write_text("a: [0, 0, 0, 0, 0, 0]\n")
    assert beamline_warnings(compiled_cell_path(path, directory=tmp_path / "out2")) == ()
    assert beamline_warnings(None) == () and beamline_warnings(Path("config/cell.yaml")) == ()


def test_lix_beamline_loads_with_an_empty_registry() -> None:
    cell = load_beamline(lix())
    assert cell.name == "lix_beamline"
    assert set(cell.grippers) == {"hande", "none"}
    assert cell.grippers["hande"].tip_frame == "robotiq_hande_end"
    assert "moveit_home" in cell.named_states
    poses = LIX.parents[3] / "src" / "lix" / "poses.yaml"
    assert not poses.exists(), "EROBS's workspace has no LiX poses (the case of this test)"
    assert cell.extra["beamline"]["poses_file"] is None
    assert cell.extra["beamline"]["warnings"] == [missing_poses_warning(LIX, poses)]


def test_validate_and_run_on_lix_print_the_warning(tmp_path: Path) -> None:
    beamline = lix()
    warning = f"warning {missing_poses_warning(beamline, LIX.parents[3] / 'src' / 'lix' / 'poses.yaml')}"
    script = tmp_path / "lix.json"
    script.write_text(json.dumps(LIX_SCRIPT), encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(script), "--cell", str(beamline)])
    assert result.exit_code == 0, result.output
    assert warning in result.stderr.splitlines()
    assert result.stderr.count("the pose registry is empty") == 1, result.stderr
    assert "warning tasks[0].notes: unknown field of moveto, ignored" in result.stderr
    # The registry is empty: a CMS pose name is not found.
    cms_pose = tmp_path / "cms_pose.json"
    cms_pose.write_text(
        json.dumps(
            {"start_gripper": "hande", "tasks": [{"task_type": "moveto", "target": "safe_sample_transport"}]}
        ),
        encoding="utf-8",
    )
    refused = CliRunner().invoke(main, ["validate", str(cms_pose), "--cell", str(beamline)])
    assert refused.exit_code == 2 and "Pose 'safe_sample_transport' not found" in refused.stderr
    log = tmp_path / "run.jsonl"
    run = CliRunner().invoke(
        main,
        ["run", str(script), "--cell", str(beamline), "--speed", "100", "--no-mcap", "--log", str(log)],
    )
    assert run.exit_code == 0, run.output
    assert warning in run.stderr.splitlines()
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [r["status"] for r in records if r["event"] == "goal_finished"] == ["SUCCEEDED"]


@pytest.mark.ros
def test_the_node_on_lix_logs_the_missing_registry_and_a_scripts_unknown_field(ros_env: object) -> None:
    from ros_fixtures import NodeProcess, ready_client

    beamline = lix()
    node = NodeProcess(ros_env, {"speed": 100.0, "cell_config": str(beamline)})  # type: ignore[arg-type]
    node.start()
    try:
        poses = LIX.parents[3] / "src" / "lix" / "poses.yaml"
        assert node.wait_for_line(lambda line: missing_poses_warning(beamline, poses) in line, 30.0), (
            node.output
        )
        assert node.wait_for_line(lambda line: "pose registry: none" in line, 30.0), node.output
        with ready_client(node) as client:
            run = client.send(json.dumps(LIX_SCRIPT))
            assert run.accepted, run.rejection
            run.wait(120.0)
            assert run.status_name == "SUCCEEDED", node.output
        assert node.wait_for_line(
            lambda line: "WARN" in line and "tasks[0].notes: unknown field of moveto, ignored" in line, 30.0
        ), node.output
    finally:
        assert node.stop() == 0, node.output

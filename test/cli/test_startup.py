"""What a user pays before the robot moves, as behaviour (the figures are in bench/bench_startup.py):
``validate`` imports neither the engine's numerics nor rich, ``run`` opens its MCAP bag only
once the arm moves (keeping what came before, at the times it came) and says what speed the
simulated arm delivered."""

from __future__ import annotations

import gc
import json
import math
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from erobs_bt.cli import main
from erobs_bt.goal import OrchestratorListener
from erobs_bt.ros.record.mcap_deferred import DeferredRecorder
from erobs_bt.ros.record.mcap_record import read_recording
from erobs_bt.session import EngineConfig, build_engine
from erobs_bt.settings import EngineSettings

#: Modules ``validate`` has no use for: the engine's numerics, the collision model, the tree,
#: the terminal library, ROS, the bag writer.
NOT_FOR_VALIDATE = (
    "numpy",
    "pinocchio",
    "coal",
    "ruckig",
    "ompl",
    "py_trees",
    "rich",
    "rclpy",
    "mcap",
    "scipy",
)


def _modules_after(args: list[str], tmp_path: Path) -> tuple[int, set[str]]:
    """Run ``erobs-bt ARGS`` in a fresh interpreter; its exit status and the top-level
    packages it had imported when it exited."""
    listing = tmp_path / "modules.json"
    code = (
        "import atexit, json, sys\n"
        f"atexit.register(lambda: open({str(listing)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
        "from erobs_bt.cli import main\n"
        f"main({args!r})\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return completed.returncode, {name.split(".")[0] for name in json.loads(listing.read_text())}


def test_validate_imports_neither_the_engine_nor_rich(samples_dir: Path, tmp_path: Path) -> None:
    script = samples_dir / "spincoat_to_hotplate.json"
    status, modules = _modules_after(
        ["validate", str(script), "--poses", str(samples_dir / "cms_poses.yaml")], tmp_path
    )
    assert status == 0
    assert "click" in modules and "yaml" in modules, "the parser and the command line are loaded"
    assert not modules & set(NOT_FOR_VALIDATE), sorted(modules & set(NOT_FOR_VALIDATE))


def test_validate_rejects_an_invalid_script_without_them_either(samples_dir: Path, tmp_path: Path) -> None:
    status, modules = _modules_after(
        ["validate", str(samples_dir / "legacy_place_on_hotplate.json")], tmp_path
    )
    assert status == 2
    assert not modules & set(NOT_FOR_VALIDATE), sorted(modules & set(NOT_FOR_VALIDATE))


def test_the_help_still_lists_the_ros_and_viewer_verbs() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0, result.output
    for verb in ("validate", "run", "serve", "send", "cancel", "watch"):
        assert re.search(rf"^\s+{verb}\s", result.output, re.MULTILINE), verb
    assert CliRunner().invoke(main, ["cancel", "--help"]).exit_code == 0


def test_validate_prints_its_report_as_an_aligned_table(samples_dir: Path) -> None:
    script = samples_dir / "spincoat_to_hotplate.json"
    result = CliRunner().invoke(
        main, ["validate", str(script), "--poses", str(samples_dir / "cms_poses.yaml")]
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"valid {script}: 9 tasks → 9 steps, 1 unit (batching on)"
    assert lines[1].split() == ["unit", "kind", "steps", "action"]
    assert set(lines[2]) == {"─", " "}
    assert lines[3].split()[:3] == ["1", "batch", "1–9"]
    assert lines[3].index("batch[9]") == lines[1].index("action"), "columns line up"
    assert lines[4:6] == ["cache eligible: yes", "previewable:    yes"]
    assert re.fullmatch(r"key sha256:     [0-9a-f]{64}", lines[6])


def test_run_says_what_speed_the_simulated_arm_delivered(samples_dir: Path, tmp_path: Path) -> None:
    frozen = gc.get_freeze_count()
    result = CliRunner().invoke(
        main,
        [
            "run",
            str(samples_dir / "perf_safe_transport_to_safe_exchange.json"),
            "--speed",
            "1000",
            "--log",
            str(tmp_path / "run.jsonl"),
            "--no-mcap",
        ],
    )
    assert result.exit_code == 0, result.output
    found = re.search(
        r"simulated ([\d.]+) s of motion in ([\d.]+) s of wall time: ([\d,.]+)× \(asked 1,000×\)",
        result.output,
    )
    assert found, result.output
    simulated, wall, factor = float(found[1]), float(found[2]), float(found[3].replace(",", ""))
    records = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    planned = [r for r in records if r["event"] == "plan_finished"]
    motion = sum(float(r["detail"].split(" s of motion")[0]) for r in planned)
    assert abs(simulated - motion) < 0.02, "the simulated time is the planned motion's"
    assert 0.0 < factor <= 1000.0, "never more than asked"
    assert gc.get_freeze_count() == frozen, "a command called from another program freezes nothing"
    assert math.isclose(factor, simulated / wall, rel_tol=0.05) or wall < 0.001  # printed rounded


def test_the_bag_opens_at_the_first_motion_with_what_came_before_at_its_times(
    samples_dir: Path, tmp_path: Path
) -> None:
    engine = build_engine(EngineConfig(backend="sim", settings=EngineSettings(speed=math.inf)))
    errors: list[str] = []
    bag = DeferredRecorder(None, engine.backend, log_path=tmp_path / "run.jsonl", on_error=errors.append)
    records: list[dict[str, object]] = []

    class Events(OrchestratorListener):
        def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
            records.append(dict(record))

    try:
        assert bag.recorder is None, "nothing is opened before a goal"
        engine.orchestrator.listener.add(bag)
        engine.orchestrator.listener.add(Events())
        text = (samples_dir / "perf_safe_transport_to_safe_exchange.json").read_text()
        result = engine.orchestrator.submit(text, dry_run=False).wait(60)
        assert result.success, result.error_message
    finally:
        engine.close()
        recorder = bag.close()
    assert errors == [] and recorder is not None
    assert bag.path == tmp_path / "run.mcap"
    messages = read_recording(bag.path)
    topics = [topic for topic, _, _ in messages]
    assert topics.count("/erobs_bt/execute/_action/status") == 2, "EXECUTING and SUCCEEDED"
    assert "/joint_states" in topics and "/erobs_bt/tree_snapshot" in topics
    states = [(t, m.state) for topic, t, m in messages if topic == "/erobs_bt/execution_state"]
    assert [s for _, s in states] == ["RUNNING", "IDLE"]
    first_motion = next(float(r["t"]) for r in records if r["event"] in ("execute_started", "replay_started"))
    # Held back until the motion, recorded at the time it came: before the motion started.
    assert states[0][0] / 1e9 < first_motion

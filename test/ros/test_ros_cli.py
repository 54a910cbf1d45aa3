"""The ROS verbs as a user runs them: ``erobs-bt send`` and ``erobs-bt serve`` in processes
of their own, against a node in a private ROS domain.

* ``send --dry-run`` of a script that cannot be previewed exits 2, as ``preview`` does for
  the same file (the README's exit-code table: 2 is "the script was refused").
* ``send … | head``: the reader goes away after a few lines; ``send`` stops printing, waits
  for the goal's result and exits with its code (it used to hang for ever: rich's exit on a
  broken pipe ended the client's spin thread, so the result never arrived).
* ``serve`` stopped by Ctrl-C exits 0, also when Ctrl-C comes again while it shuts down
  (``scripts/env.sh`` passes the terminal's SIGINT on to the process that got it too).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ros_fixtures import NodeProcess, RosEnvironment, RosProcess, ros_environment

from helpers import POSES, move

pytestmark = pytest.mark.ros

GOAL_TIMEOUT = 120.0


def write_script(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"start_gripper": "pipettor", "poses": POSES, "tasks": tasks}))
    return path


def erobs_bt(*args: str) -> list[str]:
    return [sys.executable, "-m", "erobs_bt", *args]


@pytest.fixture(scope="module")
def node(ros_env: RosEnvironment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    runs = tmp_path_factory.mktemp("runs")
    process = NodeProcess(ros_env, {"speed": 5.0, "run_log_dir": str(runs)})
    process.start()
    yield process
    process.stop()


def test_send_dry_run_of_a_script_preview_refuses_exits_2_as_preview_does(
    node: NodeProcess, tmp_path: Path
) -> None:
    script = write_script(tmp_path / "paused.json", [move("sample_scan_1"), {"task_type": "pause"}])
    env = {**node.environment.env, "COLUMNS": "200", "NO_COLOR": "1"}
    preview = subprocess.run(
        erobs_bt("preview", str(script)), capture_output=True, text=True, env=env, timeout=120
    )
    sent = subprocess.run(
        erobs_bt("send", "--dry-run", str(script)), capture_output=True, text=True, env=env, timeout=120
    )
    assert preview.returncode == 2, preview.stdout + preview.stderr
    assert "Dry-run not supported for: step 2 (pause)" in preview.stderr, preview.stderr
    assert sent.returncode == preview.returncode, sent.stdout + sent.stderr
    assert "NOT_PREVIEWABLE" in sent.stdout, sent.stdout
    assert "Dry-run not supported for: step 2 (pause)" in sent.stdout, sent.stdout
    # A dry run that fails for another reason stays "the goal failed" (1); a good one 0.
    good = write_script(tmp_path / "good.json", [move("sample_scan_1")])
    ok = subprocess.run(
        erobs_bt("send", "--dry-run", str(good)), capture_output=True, text=True, env=env, timeout=120
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_send_into_a_pipe_whose_reader_left_waits_for_the_result_and_exits_with_its_code(
    node: NodeProcess, tmp_path: Path
) -> None:
    # Several units, so feedback keeps coming after the reader has gone.
    led = {"task_type": "pipettor", "operation": "SET_LED", "led_color": {"r": 0, "g": 1, "b": 0}}
    tasks = [move("sample_scan_1"), led]
    tasks += [move("pipettor_scan"), move("safe_sample_transport")]
    script = write_script(tmp_path / "four_units.json", tasks)
    env = {**node.environment.env, "COLUMNS": "200", "NO_COLOR": "1"}
    process = subprocess.Popen(
        erobs_bt("send", str(script)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()  # what `| head -1` reads; then it exits
        process.stdout.close()
        status = process.wait(GOAL_TIMEOUT)
        errors = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert first.startswith("accepted "), first  # feedback is printed after it
    assert status == 0, f"exit {status}: {errors}"
    assert "stdout closed; waiting for the goal's result" in errors, errors
    assert "Traceback" not in errors and "Aborted" not in errors, errors


def test_serve_exits_0_on_ctrl_c_also_when_pressed_again_while_it_shuts_down(tmp_path: Path) -> None:
    with ros_environment(tmp_path / "ros_log") as environment:
        serve = RosProcess(
            environment,
            erobs_bt("serve", "--speed", "5", "--view-port", "0"),
            "Ctrl-C to stop",
            env={"EROBS_BT_LOG_DIR": str(tmp_path / "runs"), "COLUMNS": "200", "NO_COLOR": "1"},
        )
        serve.start()
        process = serve.process
        assert process is not None
        try:
            # An operator pressing Ctrl-C again and again until the prompt is back.
            process.send_signal(signal.SIGINT)
            while True:
                try:
                    status = process.wait(0.1)
                    break
                except subprocess.TimeoutExpired:
                    process.send_signal(signal.SIGINT)
        finally:
            serve.stop()
    assert status == 0, f"exit {status} (negative: killed by that signal):\n{serve.output}"
    assert "Traceback" not in serve.output and "Aborted" not in serve.output, serve.output

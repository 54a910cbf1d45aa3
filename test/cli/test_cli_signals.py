"""``erobs-bt run`` ended by a signal: SIGTERM stops the arm now and still closes the run log
and the ROS 2 bag (a process killed on the spot would leave a bag without its summary)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from mcap.reader import make_reader


def test_sigterm_stops_the_motion_now_and_closes_the_log_and_the_bag(
    samples_dir: Path, tmp_path: Path
) -> None:
    script = samples_dir / "perf_safe_transport_to_safe_exchange.json"  # 2.75 s of motion at speed 1
    log, bag = tmp_path / "run.jsonl", tmp_path / "run.mcap"
    command = [sys.executable, "-m", "erobs_bt", "run", str(script), "--speed", "1"]
    command += ["--log", str(log), "--mcap", str(bag)]
    env = {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            if "✓ plan" in line:  # the unit is planned: its motion starts now and lasts seconds
                break
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=60)
        output.append(rest)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    text = "".join(output)
    assert process.returncode == 1, text  # the goal did not succeed
    assert "SIGTERM: stopping now" in text and "STOPPED" in text, text
    records = [json.loads(line) for line in log.read_text().splitlines()]
    (finished,) = [r for r in records if r["event"] == "goal_finished"]
    assert (finished["status"], finished["error_code"]) == ("ABORTED", "STOPPED"), finished
    assert finished["completed_steps"] < finished["total_steps"], "stopped during the motion"
    with bag.open("rb") as stream:
        summary = make_reader(stream).get_summary()
    assert summary is not None and summary.statistics is not None, "the bag was closed with its summary"
    assert summary.statistics.message_count > 0

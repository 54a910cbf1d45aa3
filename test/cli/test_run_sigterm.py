"""``erobs-bt run --view`` ended by SIGTERM (a process manager): the goal is stopped now (the
arm decelerates to rest, the goal ends STOPPED), the run log and the bag are closed and the
process exits, live view and all: it does not keep serving as it does after a run that
ended by itself (issue 40, item 3). Ctrl-C keeps its meaning (cancel at the unit boundary).

Each test starts ``python -m erobs_bt run`` (``erobs-bt`` is the program, so its own signal
handling is in force), waits for a line of its output, and sends SIGTERM by its PID.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from ros_fixtures import REPO

#: What ``run --view`` prints when it keeps serving after the run (the behaviour SIGTERM must not get).
LINGERING = "the live view keeps serving"


@contextmanager
def running(command: list[str]) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,  # no keyboard: a pause stays a pause
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def read_until(process: subprocess.Popen[str], output: list[str], predicate: Callable[[str], bool]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        output.append(line)
        if predicate(line):
            return
    pytest.fail("the output ended before the line awaited:\n" + "".join(output))


def rest_of(process: subprocess.Popen[str], output: list[str]) -> str:
    """The output up to the process's exit; fails (and kills it) if it starts to linger."""
    assert process.stdout is not None
    for line in process.stdout:
        output.append(line)
        if LINGERING in line:
            process.kill()
            pytest.fail("SIGTERM did not end the process: the live view kept serving\n" + "".join(output))
    process.wait(60)
    return "".join(output)


def finished(log: Path) -> dict[str, object]:
    records = [json.loads(line) for line in log.read_text().splitlines()]
    (record,) = [r for r in records if r["event"] == "goal_finished"]
    return record


def command(script: Path, log: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "erobs_bt", "run", str(script), "--view", "--log", str(log), *options]


def test_sigterm_during_the_motion_stops_the_goal_and_ends_the_process(tmp_path: Path) -> None:
    script = REPO / "trees" / "pick_and_place.json"  # one batch, about 10 s of motion at speed 1
    log, bag = tmp_path / "run.jsonl", tmp_path / "run.mcap"
    output: list[str] = []
    with running(command(script, log, "--speed", "1", "--mcap", str(bag))) as process:
        read_until(process, output, lambda line: "✓ plan" in line)  # the motion starts now
        process.send_signal(signal.SIGTERM)
        text = rest_of(process, output)
    assert process.returncode == 1, text  # the goal did not succeed (README: exit codes)
    assert "SIGTERM: stopping now" in text and "SIGTERM: closing the live view and exiting" in text, text
    record = finished(log)
    assert (record["status"], record["error_code"]) == ("ABORTED", "STOPPED"), record
    assert record["completed_steps"] < record["total_steps"], "stopped during the motion"
    assert bag.read_bytes().endswith(b"\x89MCAP0\r\n"), "the bag was closed"


def test_sigterm_while_paused_without_a_keyboard_stops_the_goal_and_ends_the_process(
    tmp_path: Path,
) -> None:
    script = REPO / "trees" / "pause_between_units.json"
    log = tmp_path / "paused.jsonl"
    output: list[str] = []
    with running(command(script, log, "--start-paused", "--no-mcap")) as process:
        read_until(process, output, lambda line: "no keyboard (stdin closed)" in line)
        process.send_signal(signal.SIGTERM)
        text = rest_of(process, output)
    assert process.returncode == 1, text
    assert "by another front end" not in text, text
    record = finished(log)
    assert (record["status"], record["error_code"]) == ("ABORTED", "STOPPED"), record
    assert record["completed_steps"] == 0, "nothing ran: it was paused before the first unit"


def test_sigterm_after_the_run_closes_the_lingering_live_view(tmp_path: Path) -> None:
    script = REPO / "trees" / "pick_and_place.json"
    log = tmp_path / "done.jsonl"
    output: list[str] = []
    with running(command(script, log, "--speed", "50", "--no-mcap")) as process:
        read_until(process, output, lambda line: LINGERING in line)
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        assert process.stdout is not None
        text = "".join(output) + process.stdout.read()
    assert process.returncode == 0, text  # the run succeeded; SIGTERM only ended the view
    assert "SIGTERM: closing the live view" in text, text
    assert finished(log)["status"] == "SUCCEEDED"

"""``erobs-bt run --view``: the terminal and the web console attend the same pauses.

Real ``erobs-bt run`` processes on the simulated cell, their live view driven over HTTP as
the page's buttons drive it. Whoever resumes, the other front end follows: a resume from the
web ends the terminal's prompt and the run goes on to its result and run-log path; with no
keyboard (stdin at its end, as under nohup or a service) a pause stays a pause for the web
console to resume, never a cancel. ``--start-paused`` parks the goal before its first unit.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "trees" / "pause_between_units.json"  # unit 2 is a pause step
WAIT = 120.0


class RunProcess:
    """``erobs-bt run SCRIPT --view …`` with its output collected as it comes (partial lines too)."""

    def __init__(self, args: list[str], stdin: Any) -> None:
        command = [sys.executable, "-m", "erobs_bt", "run", str(SCRIPT), "--view", "--speed", "50", *args]
        env = {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            command, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO
        )
        self._text = ""
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := self.process.stdout.read1(4096):
            with self._changed:
                self._text += chunk.decode(errors="replace")
                self._changed.notify_all()
        with self._changed:
            self._text += "\n<EOF>"
            self._changed.notify_all()

    @property
    def output(self) -> str:
        with self._changed:
            return self._text

    def wait_output(self, predicate: Callable[[str], bool], timeout: float = WAIT) -> str:
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self._text) or "<EOF>" in self._text, timeout):
                raise AssertionError(f"timed out; output so far:\n{self._text}")
            assert predicate(self._text), self._text
            return self._text

    def url(self) -> str:
        text = self.wait_output(lambda t: re.search(r"live view: (http://127\.0\.0\.1:\d+/)", t) is not None)
        found = re.search(r"live view: (http://127\.0\.0\.1:\d+/)", text)
        assert found is not None
        return found.group(1)

    def stop(self) -> int:
        """Ctrl-C (the lingering view ends) and wait."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._reader.join(10)
        return self.process.returncode


@pytest.fixture
def runs() -> Iterator[list[RunProcess]]:
    started: list[RunProcess] = []
    yield started
    for run in started:
        run.stop()


def picture(url: str, after: int | None = None) -> dict[str, Any]:
    query = f"?after={after}&wait=5" if after is not None else ""
    with urllib.request.urlopen(f"{url}api/state{query}", timeout=30) as response:
        return json.loads(response.read())


def wait_picture(
    url: str, predicate: Callable[[dict[str, Any]], bool], timeout: float = WAIT
) -> dict[str, Any]:
    """The first picture of the live view for which ``predicate`` holds (long polls, no sleeps)."""
    deadline = time.monotonic() + timeout
    current = picture(url)
    while not predicate(current):
        assert time.monotonic() < deadline, f"timed out; last picture state {current.get('state')}"
        current = picture(url, current["version"])
    return current


def press(url: str, action: str) -> dict[str, Any]:
    """A console button: POST /api/<action> with the console's header."""
    request = urllib.request.Request(
        f"{url}api/{action}", data=b"", method="POST", headers={"X-Requested-By": "erobs-bt"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def paused_at(message: str) -> Callable[[dict[str, Any]], bool]:
    return lambda p: p["state"] == "PAUSED" and message in p["state_message"]


def finished(p: dict[str, Any]) -> bool:
    return p["result"] is not None


def test_without_a_keyboard_a_web_pause_stays_a_pause_and_the_web_resumes_it(
    runs: list[RunProcess], tmp_path: Path
) -> None:
    log = tmp_path / "run.jsonl"
    run = RunProcess(["--log", str(log)], stdin=subprocess.DEVNULL)  # as nohup or a service runs it
    runs.append(run)
    url = run.url()
    # The operator's Pause from the web as soon as the goal runs (it parks before unit 2, or,
    # when it comes late, the script's pause step satisfies it), then the pause step: the
    # terminal has no keyboard, so each pause waits for the web console's Resume.
    wait_picture(url, lambda p: p["state"] in ("RUNNING", "PAUSED"))
    press(url, "pause")
    pauses: list[str] = []
    while True:
        state = wait_picture(
            url, lambda p: (p["state"] == "PAUSED" and p["state_message"] not in pauses) or finished(p)
        )
        if finished(state):
            break
        pauses.append(state["state_message"])
        seen = len(pauses)
        run.wait_output(lambda t: t.count("no keyboard") == seen)  # noqa: B023 (used at once)
        assert press(url, "resume")["success"], run.output
    assert any("pause step 3" in message for message in pauses), pauses
    done = wait_picture(url, finished)
    assert done["result"]["status"] == "SUCCEEDED", done["result"]
    run.wait_output(lambda t: "keeps serving" in t)
    assert run.stop() == 0, run.output
    text = run.output
    assert "cancelling" not in text and "CANCELED" not in text, text
    assert "resumed (by another front end)" in text, text
    assert f"run log: {log}" in text, text
    finished_records = [json.loads(line) for line in log.read_text().splitlines() if "goal_finished" in line]
    assert [r["status"] for r in finished_records] == ["SUCCEEDED"]


def test_a_resume_from_the_web_ends_the_terminal_prompt_and_start_paused_waits_for_it(
    runs: list[RunProcess], tmp_path: Path
) -> None:
    # stdin is a terminal nobody types into (a pty), so the run prompts as it does for a person.
    keys, terminal = pty.openpty()
    try:
        log = tmp_path / "run.jsonl"
        run = RunProcess(["--start-paused", "--log", str(log)], stdin=terminal)
        runs.append(run)
        url = run.url()
        start = wait_picture(url, paused_at("before unit 1"))
        assert start["feedback"] is None or not start["feedback"].get("unit_index"), "nothing started"
        run.wait_output(lambda t: t.count("Enter resumes") == 1)
        assert press(url, "resume")["success"]
        run.wait_output(lambda t: t.count("resumed (by another front end)") == 1)
        # The pause step: this time the terminal's Enter resumes it, and the web sees it.
        wait_picture(url, paused_at("pause step 3"))
        run.wait_output(lambda t: t.count("Enter resumes") == 2)
        os.write(keys, b"\n")
        done = wait_picture(url, finished)
        assert done["result"]["status"] == "SUCCEEDED", done["result"]
        run.wait_output(lambda t: "keeps serving" in t)
        assert run.stop() == 0, run.output
    finally:
        os.close(keys)
        os.close(terminal)
    text = run.output
    assert "Resumed" in text, text  # the orchestrator's reply to the terminal's Enter
    assert f"run log: {log}" in text, text
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["status"] for r in records if r["event"] == "goal_finished"] == ["SUCCEEDED"]


def test_ctrl_c_at_a_terminal_prompt_cancels_the_paused_goal(runs: list[RunProcess], tmp_path: Path) -> None:
    keys, terminal = pty.openpty()
    try:
        log = tmp_path / "run.jsonl"
        run = RunProcess(["--start-paused", "--log", str(log)], stdin=terminal)
        runs.append(run)
        url = run.url()
        wait_picture(url, paused_at("before unit 1"))
        run.wait_output(lambda t: "Enter resumes" in t)
        run.process.send_signal(signal.SIGINT)  # no Enter first
        done = wait_picture(url, finished)
        assert done["result"]["status"] == "CANCELED", done["result"]
        run.wait_output(lambda t: "keeps serving" in t)
        assert run.stop() == 1, run.output  # the goal was cancelled: exit 1
    finally:
        os.close(keys)
        os.close(terminal)
    assert f"run log: {log}" in run.output


def test_auto_resume_resumes_pause_steps_only_never_the_operators_pause(
    runs: list[RunProcess], tmp_path: Path
) -> None:
    log = tmp_path / "run.jsonl"
    args = ["--start-paused", "--auto-resume", "--resume-after", "0", "--log", str(log)]
    run = RunProcess(args, stdin=subprocess.DEVNULL)
    runs.append(run)
    url = run.url()
    # The operator's pause (--start-paused): the run attends it instead of auto-resuming it,
    # and once it said so nothing else could resume it: still paused before unit 1.
    wait_picture(url, paused_at("before unit 1"))
    run.wait_output(lambda t: "no keyboard" in t)
    assert paused_at("before unit 1")(picture(url)), "an operator's pause was auto-resumed"
    assert "auto-resume" not in run.output.split("no keyboard", 1)[0]
    assert press(url, "resume")["success"]
    # The script's pause step: --auto-resume resumes it by itself.
    done = wait_picture(url, finished)
    assert done["result"]["status"] == "SUCCEEDED", done["result"]
    run.wait_output(lambda t: "keeps serving" in t)
    assert run.stop() == 0, run.output
    assert "\nauto-resume\n" in run.output, run.output  # the pause step, resumed by itself

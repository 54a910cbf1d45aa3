"""Run history: the run log keeps what a replay needs (the tree and its status changes, the
arm's joint states, the tool), old logs still list, the API lists and serves runs, and in a
real Chromium the history page replays a run the test made on the simulated cell to its end
state; `erobs-bt log FILE --view` serves it."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import py_trees
import pytest
from click.testing import CliRunner

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.cli import main
from erobs_bt.orchestrator import ListenerGroup
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.viz.history import RunIndex
from erobs_bt.viz.runlog import REPLAY_EVENTS, RunLogWriter, read_run_log
from erobs_bt.viz.web import history_app
from erobs_bt.world.kinematics import fk, quat_matrix

from browser import needs_chromium
from helpers import SUCK, make_orchestrator, move, script_json, vacuum
from web3d_fixtures import LOAD_TIMEOUT_MS, canvas_png, chromium_page, serve

FIVE_UNITS = script_json([move("a"), vacuum("vacuum_on"), SUCK, move("b"), SUCK, move("c")])


def _walk(node: py_trees.behaviour.Behaviour):
    yield node
    for child in node.children:
        yield from _walk(child)


def _replayed_statuses(records: list[dict[str, Any]]) -> list[str]:
    (tree,) = [r for r in records if r["event"] == "tree"]
    statuses = ["INVALID"] * len(tree["nodes"])
    for record in records:
        if record["event"] == "tree_status":
            for index, status in record["changes"]:
                statuses[index] = status
    return statuses


def test_the_run_log_records_the_tree_and_its_status_changes(tmp_path: Path) -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", Outcome.ok(gate=gate))
    writer = RunLogWriter(tmp_path / "run.jsonl")
    orchestrator = make_orchestrator(backend, listener=ListenerGroup(writer))
    handle = orchestrator.submit(FIVE_UNITS, dry_run=False)
    root = handle.root
    assert root is not None
    from helpers import wait_for

    wait_for(lambda: backend.count("execute") == 1, message="unit 1 executing")
    wait_for(
        lambda: any(r["event"] == "tree_status" for r in read_run_log(writer.path)), message="first statuses"
    )
    middle = _replayed_statuses(read_run_log(writer.path))
    nodes = list(_walk(root))
    unit1 = next(i for i, n in enumerate(nodes) if n.name.startswith("unit 1:"))
    assert middle[unit1] == "RUNNING" and middle[0] == "RUNNING"
    gate.set()
    assert handle.wait(10).success
    writer.close()
    records = read_run_log(writer.path)
    (tree,) = [r for r in records if r["event"] == "tree"]
    assert [node[1] for node in tree["nodes"]] == [n.name for n in nodes], "pre-order, names"
    assert tree["nodes"][0][0] == -1 and all(
        nodes[parent] is nodes[i].parent for i, (parent, _, _) in enumerate(tree["nodes"]) if i
    )
    assert _replayed_statuses(records) == [n.status.value for n in nodes], (
        "the diffs add up to the final tree"
    )
    units = [i for i, n in enumerate(nodes) if n.name.startswith("unit ")]
    assert [_replayed_statuses(records)[i] for i in units] == ["SUCCESS"] * 5
    # The orchestrator's own events are all still there, in order, and the timeline skips the rest.
    assert [r["event"] for r in records if r["event"] not in REPLAY_EVENTS][:2] == ["state", "goal_started"]


def test_joint_states_are_throttled_while_moving_and_kept_at_rest(tmp_path: Path, monkeypatch: Any) -> None:
    import erobs_bt.viz.runlog as runlog

    clock = [1_700_000_000.0]
    monkeypatch.setattr(runlog, "time", SimpleNamespace(time=lambda: clock[0]))  # the writer's clock
    writer = RunLogWriter(tmp_path / "run.jsonl", joint_rate=20.0, joint_positions=lambda: [0.0] * 6)
    moving = (0.5,) * 6
    writer.joint_state(JOINT_NAMES, (0.1,) * 6, moving)  # no goal yet: not recorded
    writer.event("goal-1", {"t": clock[0], "event": "goal_started"})
    for k in range(1, 201):  # 2 s of motion sampled every 10 ms
        clock[0] += 0.01
        writer.joint_state(JOINT_NAMES, tuple(0.001 * k + 0.01 * j for j in range(6)), moving)
    clock[0] += 0.01
    rest = tuple(0.25 + 0.01 * j for j in range(6))
    writer.joint_state(JOINT_NAMES, rest, (0.0,) * 6)  # at rest 10 ms later: written at once
    clock[0] += 0.5
    writer.joint_state(JOINT_NAMES, rest, (0.0,) * 6)  # the same state again: not written twice
    writer.finished("goal-1", None)  # type: ignore[arg-type]
    writer.joint_state(JOINT_NAMES, (0.3,) * 6, moving)  # the goal ended: not recorded
    writer.close()
    samples = [r for r in read_run_log(writer.path) if r["event"] == "joint_state"]
    assert samples[0]["position"] == [0.0] * 6, "the state at the goal's start"
    assert samples[-1]["position"] == pytest.approx(list(rest)), "the state at rest after the motion"
    assert all(s["name"] == list(JOINT_NAMES) and s["goal_id"] == "goal-1" for s in samples)
    times = [s["t"] for s in samples[:-1]]
    assert 39 <= len(times) - 1 <= 41, "20 Hz over 2 s of motion"
    assert min(b - a for a, b in itertools.pairwise(times)) >= 0.99 * 0.05


def _old_log(path: Path) -> None:
    """A run log as erobs_bt wrote it before the replay records existed."""
    t = 1_700_000_000.0
    goal_1 = {"goal_id": "goal-1"}
    records = [
        {"t": t, **goal_1, "event": "state", "state": "RUNNING", "message": ""},
        {"t": t + 0.1, **goal_1, "event": "goal_started", "mode": "execute", "total_steps": 2, "units": 1},
        {"t": t + 0.2, **goal_1, "event": "unit_started", "unit": 1, "label": "batch[2]"},
        {"t": t + 2.0, **goal_1, "event": "goal_finished", "status": "SUCCEEDED", "error": ""}
        | {"completed_steps": 2, "total_steps": 2},
        {"t": t + 3.0, "goal_id": "goal-2", "event": "rejected_script", "error": "tasks[0].target: unknown"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def test_the_api_lists_runs_old_and_new_and_names_a_damaged_file(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    _old_log(folder / "20231114T221320Z_old.jsonl")
    (folder / "damaged.jsonl").write_text('{"t": 1, "event": "state"}\nnot json\n')
    (folder / "notes.txt").write_text("not a run log")
    with serve(history_app(RunIndex([folder]))) as url:
        status, listing = _get(url + "/api/runs")
        assert status == 200 and listing["folders"] == [str(folder)]
        by_id = {run["id"]: run for run in listing["runs"]}
        assert set(by_id) == {"20231114T221320Z_old", "damaged"}
        old = by_id["20231114T221320Z_old"]
        assert [(g["goal_id"], g["status"], g["motion"], g["tree"]) for g in old["goals"]] == [
            ("goal-1", "SUCCEEDED", False, False),
            ("goal-2", "REJECTED", False, False),
        ]
        assert old["goals"][0]["finished"] - old["goals"][0]["started"] == pytest.approx(1.9)
        assert "damaged.jsonl:2: not JSON" in by_id["damaged"]["error"]
        status, run = _get(url + "/api/runs/20231114T221320Z_old?goal=goal-1")
        assert (
            status == 200 and {r["goal_id"] for r in run["records"]} == {"goal-1"} and len(run["goals"]) == 2
        )
        assert _get(url + "/api/runs/nope")[0] == 404
        status, body = _get(url + "/api/runs/damaged")
        assert status == 422 and "damaged.jsonl:2" in body["error"]
        assert _get(url + "/api/runs", {"Host": "attacker.example"})[0] == 403, "DNS rebinding is refused"


def _finished_log(path: Path, goal: str, status: str, steps: tuple[int, int]) -> None:
    """A run log of one goal that ended ``status`` after ``steps`` (completed, total)."""
    t = 1_764_590_400.0
    records = [
        {"t": t, "goal_id": goal, "event": "goal_started", "mode": "execute", "total_steps": steps[1]},
        {"t": t + 61.2, "goal_id": goal, "event": "goal_finished", "status": status, "error": ""}
        | {"completed_steps": steps[0], "total_steps": steps[1]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@needs_chromium
@pytest.mark.parametrize("width", [1280, 1024])
def test_the_runs_table_shows_every_status_whole(tmp_path: Path, width: int) -> None:
    """No status is clipped ("SUCCEEI"): every status cell lies inside the visible list, at
    the widths of a laptop's browser window, with the node's long run-log names."""
    folder = tmp_path / "runs"
    folder.mkdir()
    statuses = ["SUCCEEDED", "CANCELED", "ABORTED"]
    for n, status in enumerate(statuses, start=1):
        name = f"20261201T12000{n}Z_goal-{n}{n}{n}_full_experiment_spin_coat_and_anneal.jsonl"
        _finished_log(folder / name, f"goal-{n}{n}{n}", status, (36 if status == "SUCCEEDED" else 12, 36))
    _old_log(folder / "20231114T221320Z_old.jsonl")  # with a REJECTED goal
    with serve(history_app(RunIndex([folder]))) as url, chromium_page(width, 800) as page:
        page.goto(url + "/history")
        page.wait_for_function("() => document.querySelectorAll('#runs tbody tr').length === 5")
        cells = page.eval_on_selector_all(
            "#runs tbody td.status",
            """(cells) => cells.map((cell) => {
              const panel = document.getElementById('runs-panel');
              const box = panel.getBoundingClientRect();
              const right = box.left + panel.clientLeft + panel.clientWidth;
              return {text: cell.textContent, right: cell.getBoundingClientRect().right, visible: right,
                      overflow: cell.scrollWidth - cell.clientWidth};
            })""",
        )
        page.screenshot(path=str(tmp_path / f"history_runs_{width}.png"))
    assert sorted(c["text"] for c in cells) == sorted([*statuses, "SUCCEEDED", "REJECTED"])
    for cell in cells:
        assert cell["overflow"] <= 0, f"{cell['text']} is cut inside its cell: {cell}"
        assert cell["right"] <= cell["visible"] + 0.5, f"{cell['text']} runs past the visible list: {cell}"


#: Three units on the simulated cell: a move, a pause step, a move back to the start.
PAUSED_SCRIPT = {
    "run_name": "history replay test",
    "start_gripper": "epick",
    "poses": {
        "safe_sample_transport": [79.72, -69.5, -81.91, -117.92, -268.05, -157.15],
        "spincoater_scan": [55.33, -100.26, -68.3, -101.46, -269.79, -216.28],
    },
    "tasks": [
        {"task_type": "moveto", "target": "spincoater_scan", "planning_type": "joint"},
        {"task_type": "pause"},
        {"task_type": "moveto", "target": "safe_sample_transport", "planning_type": "joint"},
    ],
}


def _assert_flange(seen: dict[str, list[float]], q: Any) -> None:
    expected = fk(np.asarray(q, dtype=float))
    assert 1000 * np.linalg.norm(np.array(seen["xyz"]) - expected[:3, 3]) < 1.0
    R = quat_matrix(seen["quat_xyzw"])
    assert np.degrees(np.arccos(np.clip((np.trace(R.T @ expected[:3, :3]) - 1) / 2, -1, 1))) < 0.1


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run log of PAUSED_SCRIPT, made with `erobs-bt run` on the simulated cell."""
    folder = tmp_path_factory.mktemp("history")
    script = folder / "paused.json"
    script.write_text(json.dumps(PAUSED_SCRIPT))
    log = folder / "runs" / "20261201T120000Z_paused.jsonl"
    args = ["run", str(script), "--speed", "4", "--auto-resume", "--resume-after", "0.3", "--log", str(log)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return log


@needs_chromium
def test_browser_replays_a_simulated_run_to_its_end_state(sim_run: Path, tmp_path: Path) -> None:
    records = read_run_log(sim_run)
    samples = [r for r in records if r["event"] == "joint_state"]
    assert len(samples) > 10, "the CLI's run log follows the simulated arm"
    final = samples[-1]["position"]
    assert final == pytest.approx(np.radians(PAUSED_SCRIPT["poses"]["safe_sample_transport"]), abs=1e-4)
    paused_at = next(r["t"] for r in records if r["event"] == "state" and r["state"] == "PAUSED")
    t0 = records[0]["t"]
    with serve(history_app(RunIndex([sim_run.parent]))) as url, chromium_page(1400, 900) as page:
        page.goto(url + "/history")
        page.wait_for_function(
            "() => Boolean(window.erobsHistory && window.erobsHistory.open)", timeout=LOAD_TIMEOUT_MS
        )
        row = page.locator('#runs tbody tr[data-run="20261201T120000Z_paused"]')
        assert row.get_attribute("data-status") == "SUCCEEDED"
        assert "3/3" in row.inner_text()
        row.click()
        page.wait_for_function(
            "() => window.erobsHistory.snapshot().opened && window.erobsHistory.snapshot().samples > 0",
            timeout=LOAD_TIMEOUT_MS,
        )
        start = page.evaluate("window.erobsHistory.snapshot()")
        assert start["time"] == 0 and start["units"] == {"1": "INVALID", "2": "INVALID", "3": "INVALID"}
        assert start["joints"] == pytest.approx(samples[0]["position"], abs=1e-6)
        assert page.input_value("#scrubber") == "0"

        page.evaluate(f"window.erobsHistory.seek({paused_at - t0 + 0.01})")
        paused = page.evaluate("window.erobsHistory.snapshot()")
        assert paused["state"] == "PAUSED" and paused["units"] == {
            "1": "SUCCESS",
            "2": "RUNNING",
            "3": "INVALID",
        }
        scan = np.radians(PAUSED_SCRIPT["poses"]["spincoater_scan"])
        assert paused["joints"] == pytest.approx(scan, abs=1e-4), "the arm waits at the first move's end"
        _assert_flange(page.evaluate("window.erobsHistory.view.linkPose('flange')"), scan)
        assert page.locator("#current div").first.inner_text().startswith("unit 2: pause")
        page.screenshot(path=str(tmp_path / "history_paused.png"))

        # Drag the scrubber to the end: the replay ends where the run ended.
        page.eval_on_selector(
            "#scrubber", "(s) => { s.value = '1000'; s.dispatchEvent(new Event('input')); }"
        )
        end = page.evaluate("window.erobsHistory.snapshot()")
        assert end["time"] == pytest.approx(end["duration"]) and end["duration"] == pytest.approx(
            records[-1]["t"] - t0
        )
        assert end["units"] == {"1": "SUCCESS", "2": "SUCCESS", "3": "SUCCESS"} and end["state"] == "IDLE"
        assert end["tool"] == "epick" and end["joints"] == pytest.approx(final, abs=1e-6)
        _assert_flange(page.evaluate("window.erobsHistory.view.linkPose('flange')"), final)
        page.screenshot(path=str(tmp_path / "history_end.png"))

        # Play from the middle runs to the end by itself.
        page.evaluate(f"window.erobsHistory.seek({end['duration'] / 2})")
        page.select_option("#speed", "20")
        page.click("#play")
        page.wait_for_function(
            "() => !window.erobsHistory.replay.playing"
            " && window.erobsHistory.snapshot().time >= window.erobsHistory.snapshot().duration",
            timeout=60_000,
        )
        assert page.evaluate("window.erobsHistory.snapshot().units")["3"] == "SUCCESS"
        (tmp_path / "history_canvas.png").write_bytes(canvas_png(page))


def test_log_view_serves_the_run_until_interrupted(tmp_path: Path) -> None:
    log = tmp_path / "20231114T221320Z_old.jsonl"
    _old_log(log)
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "erobs_bt", "log", str(log), "--view", "--goal", "goal-1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        url = ""
        for line in process.stdout:  # the timeline, then the replay URL
            if line.startswith("replay: "):
                url = line.split()[1]
                break
        assert url.startswith("http://127.0.0.1:") and url.endswith(
            "/history#run=20231114T221320Z_old&goal=goal-1"
        )
        base = url.split("/history")[0]
        status, run = _get(base + "/api/runs/20231114T221320Z_old")
        assert status == 200 and run["goals"][0]["status"] == "SUCCEEDED"
        with urllib.request.urlopen(base + "/", timeout=30) as response:
            assert response.url.endswith("/history") and b"history.js" in response.read()
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)

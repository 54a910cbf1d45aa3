"""The operator's console in a real Chromium (playwright, Debian's /usr/bin/chromium):
access (token, Host check, a tunnel on another port), every control, submitting scripts
with `validate`'s messages, step detail and progress through a multi-step batch on the
simulated cell, and what is shown agreeing with what happened.

Every wait is on a page condition or an engine event (no sleeps). Screenshots land in the
test's tmp_path (look at them: ``pytest --basetemp=/tmp/shots``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.cli import main
from erobs_bt.orchestrator import Orchestrator, OrchestratorListener, State
from erobs_bt.plan import ScriptParser, pose_registry_file
from erobs_bt.settings import EngineSettings
from erobs_bt.viz.web import Access, LiveView, start_live_view

from browser import launch_chromium, needs_chromium
from helpers import SUCK, move, script_json, vacuum, wait_for

CONTROL = {"X-Requested-By": "erobs-bt"}
TOKEN = "test-token-0123456789"
FIVE_UNITS = script_json([move("a"), vacuum("vacuum_on"), SUCK, move("b"), SUCK, move("c")])

pytestmark = needs_chromium


def request(
    url: str, *, method: str = "GET", headers: dict[str, str] | None = None, body: bytes | None = None
) -> tuple[int, bytes, Any]:
    """(status, body, headers) of one request; reads at most the first 4 kB of a stream."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            stream = response.headers.get("content-type", "").startswith("text/event-stream")
            return response.status, response.read1(4096) if stream else response.read(), response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers


def orchestrator_for(backend: Any) -> Orchestrator:
    """An orchestrator with the packaged cell's parser and its default pose registry (the
    parser `erobs-bt validate` uses, :func:`erobs_bt.plan.pose_registry_file`)."""
    parser = ScriptParser.from_files(poses=pose_registry_file(None, None))
    return Orchestrator(backend, parser=parser, settings=EngineSettings())


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 1100})
    try:
        yield context.new_page()
    finally:
        context.close()


def gated(count: int = 6) -> tuple[ScriptedBackend, list[threading.Event]]:
    """A scripted backend whose executions and single steps each wait for a gate."""
    backend = ScriptedBackend()
    gates = [threading.Event() for _ in range(count)]
    backend.script("execute", *(Outcome.ok(gate=g) for g in gates[0::2]))
    backend.script("run_step", *(Outcome.ok(gate=g) for g in gates[1::2]))
    return backend, gates


# -- access -------------------------------------------------------------------------------------------


def test_a_token_is_required_on_every_request_and_on_the_stream(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    orchestrator = orchestrator_for(ScriptedBackend())
    view = start_live_view(orchestrator, token=TOKEN)
    try:
        base = view.base_url
        assert view.url == f"{base}?token={TOKEN}"
        for path in ("", "static/app.js", "api/state", "api/events", "api/trajectories"):
            assert request(base + path)[0] == 401, path
            assert request(base + path + "?token=wrong")[0] == 403, path
        assert request(base + "api/state", headers={"X-Erobs-Token": TOKEN})[0] == 200
        assert request(base + "api/state", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
        status, body, _ = request(base + "api/events", headers={"X-Erobs-Token": TOKEN})
        assert status == 200 and body.startswith(b"id: 1\nevent: state\ndata: {")
        status, _, _ = request(base + "api/pause", method="POST", headers=CONTROL)
        assert status == 401, "a control request without the token is refused"
        status, body, _ = request(base + "api/pause", method="POST", headers={"X-Erobs-Token": TOKEN})
        assert status == 403 and b"X-Requested-By" in body, "the token does not replace the anti-CSRF header"
        status, body, _ = request(
            base + "api/pause", method="POST", headers={**CONTROL, "X-Erobs-Token": TOKEN}
        )
        assert status == 200 and json.loads(body)["message"] == "No task is currently executing"
        # With a token any Host name is accepted: a rebinding page cannot know the token.
        assert request(base + "api/state", headers={"Host": "robot.lab:80", "X-Erobs-Token": TOKEN})[0] == 200

        assert page.goto(base).status == 401
        assert page.goto(view.url).status == 200  # ?token= sets the cookie ...
        expect(page.locator("#state")).to_have_text("IDLE")  # ... which the event stream sends
        page.goto(base)  # and later visits need no token in the address
        expect(page.locator("#state")).to_have_text("IDLE")
        assert page.is_hidden("#connection")
        cookies = {c["name"]: c for c in page.context.cookies()}
        assert cookies["erobs_bt_token"]["httpOnly"] and cookies["erobs_bt_token"]["sameSite"] == "Strict"
    finally:
        view.close()


def test_access_policy_off_loopback_makes_a_token() -> None:
    assert Access.for_host("127.0.0.1").token is None
    assert Access.for_host("::1").token is None
    assert Access.for_host("localhost").token is None
    lan = Access.for_host("192.0.2.17")
    assert lan.token is not None and len(lan.token) >= 20
    assert Access.for_host("192.0.2.17").token != lan.token, "a new random token per server"
    assert Access.for_host("192.0.2.17", "given").token == "given"
    assert lan.check({}, {}, {}) == 401 and lan.check({}, {"token": "x"}, {}) == 403
    assert lan.check({}, {}, {"erobs_bt_token": lan.token}) == 0


class _Tunnel:
    """A TCP forwarder from a new local port to the view: what ``ssh -L`` does on this host."""

    def __init__(self, target_port: int) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.target = target_port
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.closed.set()
        self.server.close()


def test_the_host_check_accepts_loopback_names_on_any_port_and_a_tunnel(page: Any) -> None:
    from playwright.sync_api import expect

    orchestrator = orchestrator_for(ScriptedBackend())
    view = start_live_view(orchestrator)
    tunnel = _Tunnel(int(view.base_url.rsplit(":", 1)[1].strip("/")))
    try:
        url = view.url + "api/state"
        for host in ("localhost:9999", "127.0.0.1:1", "[::1]:8080", "localhost", "127.0.0.5:80"):
            assert request(url, headers={"Host": host})[0] == 200, host
        for host in (
            "attacker.example",
            f"attacker.example:{tunnel.target}",
            "localhost.attacker.example",
            "",
        ):
            assert request(url, headers={"Host": host})[0] == 403, f"DNS rebinding: {host!r} is refused"
        page.goto(f"http://localhost:{tunnel.port}/")
        expect(page.locator("#state")).to_have_text("IDLE")
        assert page.is_hidden("#connection"), "the page and its event stream work through the tunnel"
    finally:
        tunnel.close()
        view.close()


# -- controls ----------------------------------------------------------------------------------------


def test_pause_resume_cancel_at_the_boundary_with_no_stale_badges_or_replies(
    page: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    backend, gates = gated()
    orchestrator = orchestrator_for(backend)
    view = start_live_view(orchestrator, rate=50.0)
    try:
        page.goto(view.url)
        expect(page.locator("#state")).to_have_text("IDLE")
        handle = orchestrator.submit(FIVE_UNITS, dry_run=False)
        page.wait_for_selector('.unit.current[data-unit="1"][data-status="RUNNING"]')
        expect(page.locator("#cache-status")).to_have_text("cache INELIGIBLE")
        gates[0].set()
        page.wait_for_selector('.unit.current[data-unit="2"][data-status="RUNNING"]')
        expect(page.locator("#cache-status")).to_have_text("")  # a pipettor unit has no cache decision
        page.click("#pause")
        expect(page.locator("#state")).to_have_text("COMPLETING_TASK")
        expect(page.locator("#reply")).to_contain_text("Pause requested")
        gates[1].set()
        expect(page.locator("#state")).to_have_text("PAUSED")
        expect(page.locator("#reply")).to_have_text("")  # the request was satisfied; its reply is gone
        expect(page.locator("#cache-status")).to_have_text("")
        page.wait_for_selector('.boundary[data-name="before unit 3"][data-status="RUNNING"]')
        assert backend.count("execute") == 1, "paused at the boundary: unit 3 has not started"
        page.screenshot(path=str(tmp_path / "paused.png"), full_page=True)
        page.click("#resume")
        wait_for(lambda: backend.count("execute") == 2, message="unit 3 executing")
        page.wait_for_selector('.unit.current[data-unit="3"][data-status="RUNNING"]')
        page.click("#cancel")
        expect(page.locator("#state")).to_have_text("CANCELING")
        assert backend.count("execute") == 2 and not handle.done(), "cancel waits for the boundary"
        gates[2].set()
        assert handle.wait(10).status.value == "CANCELED"
        page.wait_for_selector('#result[data-status="CANCELED"]')
        expect(page.locator("#state")).to_have_attribute("data-tone", "warn")
        expect(page.locator("#state-note")).to_have_text(f"— last goal {handle.goal_id} CANCELED")
        assert page.is_hidden("#last-error"), "a cancel is not an error"
        assert backend.count("run_step") == 1, "unit 4 never ran"
    finally:
        for gate in gates:
            gate.set()
        view.close()


def test_stop_now_aborts_mid_motion_and_the_state_agrees_with_the_result(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    backend, gates = gated()
    orchestrator = orchestrator_for(backend)
    view = start_live_view(orchestrator, rate=50.0)
    try:
        page.goto(view.url)
        first = orchestrator.submit(script_json([SUCK]), dry_run=False)
        gates[1].set()
        assert first.wait(10).success
        page.wait_for_selector(f'#result[data-status="SUCCEEDED"]:has-text("{first.goal_id}")')
        expect(page.locator("#state")).to_have_attribute("data-tone", "ok")
        handle = orchestrator.submit(FIVE_UNITS, dry_run=False)
        page.wait_for_selector(
            '.unit.current[data-unit="1"] li.node[data-name="ExecuteSolution"][data-status="RUNNING"]'
        )
        assert page.is_hidden("#result"), "the previous goal's result is not shown over the new goal"
        page.click("#stop")
        result = handle.wait(10)
        assert result.error_code == "STOPPED" and backend.stops >= 1
        page.wait_for_selector('#result[data-status="ABORTED"]')
        expect(page.locator("#state")).to_have_text("IDLE")
        expect(page.locator("#state")).to_have_attribute("data-tone", "bad")  # never green over ABORTED
        expect(page.locator("#state-note")).to_have_text(f"— last goal {handle.goal_id} ABORTED")
        assert "STOPPED: stopped by operator request" in page.text_content("#result")
        # The stop is answered once the goal has ended, so its reply describes what is shown.
        expect(page.locator("#reply")).to_contain_text(f"Stopping {handle.goal_id}: motion halted")
        times = page.eval_on_selector_all("#events li", "items => items.map((li) => li.dataset.dt)")
        assert times and all(t.startswith("+") and float(t) >= 0 for t in times), times
        events = page.text_content("#events")
        assert "goal_finished" in events and "status=SUCCEEDED" not in events, "only the shown goal's events"
        page.screenshot(path=str(tmp_path / "stopped.png"), full_page=True)
    finally:
        for gate in gates:
            gate.set()
        view.close()


def test_a_fault_says_how_to_recover_and_reset_needs_a_confirmation(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    backend = ScriptedBackend()
    backend.script(
        "execute", Outcome(fail_with=MotionError(ErrorCode.TIMEOUT, "no answer from the controller"))
    )
    orchestrator = orchestrator_for(backend)
    view = start_live_view(orchestrator, rate=50.0)
    try:
        page.goto(view.url)
        handle = orchestrator.submit(script_json([move("a")]), dry_run=False)
        assert handle.wait(10).error_code == "TIMEOUT"
        expect(page.locator("#state")).to_have_text("FAULTED")
        expect(page.locator("#fault-reason")).to_contain_text("TIMEOUT")
        expect(page.locator("#fault-recovery")).to_contain_text("press Reset fault")
        assert page.is_enabled("#reset-fault") and page.is_disabled("#pause")
        page.fill("#script-text", script_json([SUCK]))
        page.click("#validate")
        expect(page.locator("#validation")).to_have_attribute("data-valid", "true")
        assert page.is_disabled("#run-script"), "no submitting while FAULTED"
        status, body, _ = request(
            view.url + "api/submit",
            method="POST",
            headers=CONTROL,
            body=json.dumps({"script": script_json([SUCK])}).encode(),
        )
        assert status == 409 and "FAULTED" in json.loads(body)["message"]
        page.click("#reset-fault")
        expect(page.locator("#reset-dialog")).to_be_visible()
        expect(page.locator("#reset-dialog-reason")).to_contain_text("TIMEOUT")
        page.screenshot(path=str(tmp_path / "reset-dialog.png"), full_page=True)
        page.click("#reset-abort")
        expect(page.locator("#reset-dialog")).to_be_hidden()
        assert orchestrator.state is State.FAULTED, "closing the dialog without confirming resets nothing"
        page.click("#reset-fault")
        page.click("#reset-confirm")
        expect(page.locator("#state")).to_have_text("IDLE")
        assert orchestrator.state is State.IDLE
        expect(page.locator("#reply")).to_contain_text("Fault cleared")
        assert page.is_hidden("#fault")
    finally:
        view.close()


# -- submitting scripts --------------------------------------------------------------------------------


def _validate_line(path: Path) -> str:
    result = CliRunner().invoke(main, ["validate", str(path)], terminal_width=400)
    return " ".join(result.output.splitlines()[0].split())


def test_a_bad_script_shows_the_validate_message_and_moves_nothing(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    backend = ScriptedBackend()
    orchestrator = orchestrator_for(backend)
    view = start_live_view(orchestrator, rate=50.0)
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "start_gripper": "pipettor",
                "tasks": [{"task_type": "moveto", "target": "home_nowhere"}],
            }
        )
    )
    try:
        expected = _validate_line(bad)
        assert expected.startswith(f"invalid {bad}: tasks[0].target: Pose 'home_nowhere' not found")
        page.goto(view.url)
        page.set_input_files("#script-file", str(bad))
        expect(page.locator("#validation")).to_have_attribute("data-valid", "false")
        shown = " ".join(page.text_content("#validation").split())
        assert shown == expected.replace(str(bad), bad.name), "the page says what `erobs-bt validate` says"
        assert page.is_disabled("#run-script") and page.is_disabled("#preview-script")
        status, body, _ = request(
            view.url + "api/submit",
            method="POST",
            headers=CONTROL,
            body=json.dumps({"script": bad.read_text()}).encode(),
        )
        assert status == 422 and json.loads(body)["error"] in expected
        assert backend.calls == [] and orchestrator.active_goal is None, "nothing was submitted or moved"
        page.screenshot(path=str(tmp_path / "invalid.png"), full_page=True)

        good = tmp_path / "good.json"
        good.write_text(script_json([move("a"), vacuum("vacuum_on"), SUCK]))
        page.set_input_files("#script-file", str(good))
        expect(page.locator("#validation")).to_have_attribute("data-valid", "true")
        valid_line = _validate_line(good)  # "valid PATH: 3 tasks → 3 steps, 2 units (batching on)"
        head = valid_line.replace(str(good), good.name).split(" (batching")[0]
        assert page.text_content("#validation").startswith(head)
        expect(page.locator("#plan")).to_contain_text(
            "step 1: moveto a (auto) [10.0, -90.0, -90.0, -90.0, 90.0, 0.0]°"
        )
        expect(page.locator("#preview-script")).to_be_disabled()  # a pipettor step is not previewable
        page.click("#run-script")
        page.wait_for_selector('#result[data-status="SUCCEEDED"]')
        assert backend.count("execute") == 1 and backend.count("run_step") == 1
    finally:
        view.close()


def test_preview_from_the_page_hands_the_trajectory_to_the_3d_view(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    backend = ScriptedBackend()
    orchestrator = orchestrator_for(backend)
    view = start_live_view(orchestrator, rate=50.0)
    try:
        page.goto(view.url)
        expect(page.locator("#state")).to_have_text("IDLE")
        page.evaluate(
            "window.seen = [];"
            "document.addEventListener('erobs:trajectory', (e) => window.seen.push(e.detail))"
        )
        page.fill("#script-text", script_json([move("a"), vacuum("vacuum_on"), move("b")]))
        page.click("#validate")
        expect(page.locator("#preview-script")).to_be_enabled()
        page.click("#preview-script")
        page.wait_for_selector('#result[data-status="SUCCEEDED"]')
        page.wait_for_function("() => window.seen.length === 1")
        trajectory = page.evaluate("window.seen[0]")
        assert trajectory["mode"] == "preview" and trajectory["unit"] == 1 and trajectory["source"] == "plan"
        assert trajectory["joint_names"][0] == "shoulder_pan_joint" and len(trajectory["joint_names"]) == 6
        # start, a (where the two moves meet, listed once), b
        assert len(trajectory["positions"]) == len(trajectory["time_from_start"]) == 3
        assert [s["kind"] for s in trajectory["segments"]] == ["arm", "tool", "arm"]
        assert trajectory["positions"][-1][0] == pytest.approx(0.349066, abs=1e-4), "ends at b (20°)"
        assert backend.count("execute") == 0, "a preview moves nothing"
        stored = json.loads(_get(view, "api/trajectories"))
        assert stored["units"][0]["positions"] == trajectory["positions"]
    finally:
        view.close()


def _get(view: LiveView, path: str) -> bytes:
    with urllib.request.urlopen(view.url + path, timeout=10) as response:
        return bytes(response.read())


def test_rejected_goals_appear(page: Any) -> None:
    from playwright.sync_api import expect

    orchestrator = orchestrator_for(ScriptedBackend())
    view = start_live_view(orchestrator, rate=50.0)
    try:
        page.goto(view.url)
        expect(page.locator("#state")).to_have_text("IDLE")
        handle = orchestrator.submit('{"tasks": [}', dry_run=False)  # e.g. from the ROS action
        assert handle.wait(5).error_code == "INVALID_SCRIPT"
        expect(page.locator("#rejected-panel")).to_be_visible()
        expect(page.locator("#rejected")).to_contain_text(f"{handle.goal_id}: ")
        expect(page.locator("#result")).to_contain_text("rejected before anything moved")
        expect(page.locator("#state")).to_have_attribute("data-tone", "bad")
    finally:
        view.close()


def test_a_goal_refused_while_busy_appears_and_the_running_goal_is_untouched(page: Any) -> None:
    """A goal the orchestrator refuses (busy here; FAULTED likewise), e.g. one sent to the node's
    action while another runs, never gets a goal id, yet the console lists the refusal."""
    from playwright.sync_api import expect

    from erobs_bt.orchestrator import GoalRejected

    backend, gates = gated()
    orchestrator = orchestrator_for(backend)
    view = start_live_view(orchestrator, rate=50.0)
    try:
        page.goto(view.url)
        handle = orchestrator.submit(FIVE_UNITS, dry_run=False)
        page.wait_for_selector('.unit.current[data-unit="1"][data-status="RUNNING"]')
        with pytest.raises(GoalRejected, match="busy"):
            orchestrator.submit(FIVE_UNITS, dry_run=False)
        expect(page.locator("#rejected-panel")).to_be_visible()
        expect(page.locator("#rejected")).to_contain_text(f"goal refused: busy: {handle.goal_id} is RUNNING")
        expect(page.locator("#state")).to_have_text("RUNNING")
        expect(page.locator("#last-error")).to_be_hidden()  # the refusal is not the running goal's error
        for gate in gates:
            gate.set()
        assert handle.wait(10).status.value == "SUCCEEDED"
    finally:
        view.close()


# -- step detail and progress on the simulated cell ---------------------------------------------------


def test_step_detail_and_progress_follow_the_arm_through_a_batch(
    page: Any, cell: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    from erobs_bt.backends.sim.backend import SimBackend

    tasks = [move("a"), move("b"), move("c"), vacuum("vacuum_on"), move("b"), move("a")]
    with SimBackend(cell, speed=2.0, seed=1) as backend:
        orchestrator = orchestrator_for(backend)
        view = start_live_view(orchestrator, rate=50.0)
        try:
            page.goto(view.url)
            expect(page.locator("#state")).to_have_text("IDLE")
            page.evaluate(
                """() => {
                  window.motion = [];
                  const el = document.getElementById('motion');
                  new MutationObserver(() => {
                    if (!el.dataset.step) return;
                    const row = document.querySelector('.unit[data-unit="1"] table.steps tr.current');
                    const done = document.querySelectorAll('.unit[data-unit="1"] table.steps tr.done').length;
                    window.motion.push([Number(el.dataset.step), el.textContent,
                      row ? Number(row.dataset.step) : 0, row ? row.textContent : "", done]);
                  }).observe(el, { childList: true, characterData: true, subtree: true, attributes: true });
                }"""
            )
            handle = orchestrator.submit(script_json(tasks), dry_run=False)
            page.wait_for_selector('#motion[data-step="3"]', timeout=30_000)
            page.screenshot(path=str(tmp_path / "batch-mid.png"))
            assert handle.wait(60).success
            page.wait_for_selector('#result[data-status="SUCCEEDED"]')
        finally:
            view.close()
    seen = page.evaluate("window.motion")
    steps = [record[0] for record in seen]
    assert steps == sorted(steps), f"progress never goes back: {steps}"
    assert {1, 2, 3, 5, 6} <= set(steps), f"every arm step was shown: {sorted(set(steps))}"
    assert all(text.startswith(f"step {s} of 6 (script step {s})") for s, text, *_ in seen)
    for step, _text, row_step, row_text, done in seen:
        assert row_step == step and done == step - 1, "the steps table marks the executing step"
        if step == 3:
            assert "moveto c (auto) [30.0, -90.0, -90.0, -90.0, 90.0, 0.0]°" in row_text, row_text
    etas = [float(re.search(r"ETA ([0-9.]+) s", r[1]).group(1)) for r in seen]  # type: ignore[union-attr]
    assert etas[0] > etas[-1] and etas[-1] < 1.0, "the ETA counts down to the end of the batch"
    details = page.text_content('.unit[data-unit="1"] table.steps')
    assert "end_effector vacuum_on" in details and "pipettor: vacuum_on" in details, (
        "tool state after the step"
    )


def test_the_step_count_and_the_percentage_are_one_number(page: Any, cell: Any) -> None:
    """Inside a batch the bar counts the steps the arm has passed: so do the count and the
    percentage beside it ("0 / 36 steps (25 %)" showed the completed units' steps beside
    the arm's percentage)."""
    from erobs_bt.backends.sim.backend import SimBackend

    tasks = [move("a"), move("b"), move("c"), move("b"), move("a"), move("c")]
    with SimBackend(cell, speed=2.0, seed=1) as backend:
        orchestrator = orchestrator_for(backend)
        view = start_live_view(orchestrator, rate=50.0)
        try:
            page.goto(view.url)
            page.wait_for_selector("#state:text('IDLE')")
            page.evaluate(
                """() => {
                  window.progress = [];
                  const text = document.getElementById('progress-text');
                  const bar = document.getElementById('progress-bar');
                  const motion = document.getElementById('motion');
                  new MutationObserver(() => {
                    window.progress.push([text.textContent, bar.style.width, motion.dataset.step || ""]);
                  }).observe(text, { childList: true, characterData: true, subtree: true });
                }"""
            )
            handle = orchestrator.submit(script_json(tasks), dry_run=False)
            assert handle.wait(60).success
            page.wait_for_selector('#result[data-status="SUCCEEDED"]')
            page.wait_for_function("() => (window.progress.at(-1) || [''])[0].startsWith('6 /')")
        finally:
            view.close()
    seen = page.evaluate("window.progress")
    for text, width, step in seen:
        found = re.fullmatch(r"(\d+) / (\d+) steps \((\d+) %\)", text)
        assert found is not None, text
        done, total, percent = (int(g) for g in found.groups())
        if total == 0:  # no goal yet
            assert (done, percent, width) == (0, 0, "0%"), text
            continue
        assert percent == round(100 * done / total), f"the count and the percentage disagree: {text}"
        assert float(width.rstrip("%")) == pytest.approx(100 * done / total, abs=0.01), f"bar {width}: {text}"
        if step:
            assert done == int(step) - 1, f"at step {step} the arm has passed {int(step) - 1}: {text}"
    inside = [(text, step) for text, _w, step in seen if step not in ("", "1")]
    assert inside, f"progress was shown inside the batch, past its first step: {seen}"
    assert seen[-1][0] == "6 / 6 steps (100 %)"


def test_the_tool_row_shows_the_attached_tool_through_an_exchange(page: Any) -> None:
    from playwright.sync_api import expect

    backend = ScriptedBackend()
    gates = [threading.Event() for _ in range(2)]
    backend.script("run_step", *(Outcome.ok(gate=g) for g in gates))
    orchestrator = orchestrator_for(backend)
    view = start_live_view(orchestrator, rate=50.0)
    dock = {"task_type": "tool_exchange", "operation": "dock", "gripper": "epick", "dock_number": 4}
    load = {"task_type": "tool_exchange", "operation": "load", "gripper": "pipettor", "dock_number": 3}
    try:
        page.goto(view.url)
        expect(page.locator("#tool")).to_have_attribute("data-tool", "epick")  # before any goal
        handle = orchestrator.submit(script_json([dock, load], start_gripper="epick"), dry_run=False)
        expect(page.locator("#current-unit")).to_contain_text("unit 1/2")
        expect(page.locator("#tool")).to_have_text("epick")
        gates[0].set()  # docked: the bare flange
        expect(page.locator("#current-unit")).to_contain_text("unit 2/2")
        expect(page.locator("#tool")).to_have_attribute("data-tool", "none")
        expect(page.locator("#tool")).to_have_text("none (bare flange)")
        gates[1].set()
        assert handle.wait(10).success
        expect(page.locator("#tool")).to_have_attribute("data-tool", "pipettor")
        expect(page.locator("#tool")).to_have_text("pipettor")
    finally:
        for gate in gates:
            gate.set()
        view.close()


def test_live_joint_states_reach_the_page_throttled(page: Any, cell: Any) -> None:
    from erobs_bt.backends.sim.backend import SimBackend

    with SimBackend(cell, speed=1.0, seed=1) as backend:
        orchestrator = orchestrator_for(backend)
        view = start_live_view(orchestrator, rate=50.0, joint_rate=10.0)
        try:
            page.goto(view.url)
            page.evaluate(
                "window.joints = [];"
                "document.addEventListener('erobs:joints', (e) => window.joints.push(e.detail))"
            )
            handle = orchestrator.submit(script_json([move("a"), move("b")]), dry_run=False)
            assert handle.wait(60).success
            final = [round(p, 3) for p in backend.joint_positions()]
            page.wait_for_function(
                "(q) => window.joints.length && "
                "window.joints.at(-1).position.map((p) => p.toFixed(3)).join() === q",
                arg=",".join(f"{p:.3f}" for p in final),
            )
            joints = page.evaluate("window.joints")
        finally:
            view.close()
    assert joints[-1]["name"][0] == "shoulder_pan_joint" and len(joints[-1]["position"]) == 6
    pans = [j["position"][0] for j in joints]
    assert len(set(pans)) >= 3, "intermediate states of the motion arrive"
    stamps = [j["t"] for j in joints]
    span = stamps[-1] - stamps[0]
    assert len(joints) <= 10.0 * span + 3, f"at most ~10 Hz: {len(joints)} events in {span:.2f} s"


# -- run --view ----------------------------------------------------------------------------------------


def test_run_view_keeps_serving_after_the_goal_until_ctrl_c(
    samples_dir: Path, tmp_path: Path, page: Any
) -> None:
    from playwright.sync_api import expect

    script = samples_dir / "perf_safe_transport_to_safe_exchange.json"
    command = [sys.executable, "-m", "erobs_bt", "run", str(script), "--view", "--speed", "50"]
    command += ["--log", str(tmp_path / "run.jsonl")]
    env = {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output: list[str] = []
    try:
        assert process.stdout is not None
        url = None
        for line in process.stdout:
            output.append(line)
            found = re.search(r"live view: (http://127\.0\.0\.1:\d+/)", line)
            url = url or (found.group(1) if found else None)
            if "keeps serving" in line:
                break
        assert url is not None and "press Ctrl-C to exit" in output[-1], "".join(output)
        page.goto(url)
        expect(page.locator("#lingering")).to_be_visible()
        expect(page.locator("#lingering")).to_contain_text("until you press Ctrl-C")
        expect(page.locator("#result")).to_have_attribute("data-status", "SUCCEEDED")
        # run --view serves the other pages too: the 3D cell view and the run history.
        expect(page.locator('#nav a[href="/history"]')).to_be_visible()
        if (Path(__file__).parents[2] / "erobs_bt/viz/static/vendor/three/build/three.module.js").exists():
            expect(page.locator("body")).to_have_attribute("data-cell3d", "ready", timeout=60_000)
            assert page.is_visible("#cell3d canvas")
            page.screenshot(path=str(tmp_path / "lingering.png"), full_page=True)
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=30)
        output.append(rest)
        assert process.returncode == 0, "".join(output)
        assert "Ctrl-C: closing the live view" in rest
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(url, timeout=5)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def test_a_replayed_unit_shows_the_cached_trajectory_without_counting_a_hit() -> None:
    backend = ScriptedBackend()
    orchestrator = orchestrator_for(backend)
    view = start_live_view(orchestrator, rate=50.0)
    text = script_json([move("a"), vacuum("vacuum_on"), move("b")])  # one batch: cache eligible
    start = backend.joint_positions()
    assert start is not None
    back = json.dumps(
        {
            "start_gripper": "pipettor",
            "poses": {"start": [math.degrees(a) for a in start]},
            "tasks": [{"task_type": "moveto", "target": "start"}],
        }
    )
    try:
        assert orchestrator.submit(text, dry_run=False).wait(10).success
        assert orchestrator.submit(back, dry_run=False).wait(10).success  # so the cache key matches
        hits = orchestrator.cache.hits
        handle = orchestrator.submit(text, dry_run=False)
        assert handle.wait(10).success
        assert backend.count("replay") == 1, "the second run replays"
        assert orchestrator.cache.hits == hits + 1, "the view's look at the cache is not a hit"
        wait_for(lambda: json.loads(_get(view, "api/state"))["goal"].get("id") == handle.goal_id)
        wait_for(lambda: json.loads(_get(view, "api/state"))["result"] is not None)
        state = json.loads(_get(view, "api/state"))
        assert state["trajectories"] == [{"unit": 1, "source": "cache", "duration": 2.0}]
        assert state["cache"] == "HIT"
        stored = json.loads(_get(view, "api/trajectories"))
        assert stored["goal_id"] == handle.goal_id and stored["units"][0]["source"] == "cache"
    finally:
        view.close()


def test_reset_simulation_and_run_from_the_initial_cell_on_the_simulated_cell(
    page: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    from erobs_bt.session import EngineConfig, build_engine

    class Results(OrchestratorListener):
        def __init__(self) -> None:
            self.statuses: list[str] = []

        def finished(self, goal_id: str, result: Any) -> None:
            self.statuses.append(result.status.value)

    engine = build_engine(EngineConfig(backend="sim", settings=EngineSettings(speed=1000.0)))
    results = Results()
    engine.orchestrator.listener.add(results)
    view = start_live_view(engine.orchestrator, rate=50.0)
    dock = {"task_type": "tool_exchange", "operation": "dock", "gripper": "epick", "dock_number": 4}
    load = {"task_type": "tool_exchange", "operation": "load", "gripper": "pipettor", "dock_number": 3}
    exchange = tmp_path / "exchange.json"
    exchange.write_text(script_json([dock, load], start_gripper="epick"))
    try:
        page.goto(view.url)
        expect(page.locator("#reset-simulation")).to_be_visible()
        expect(page.locator("#reset-simulation")).to_be_enabled()
        expect(page.locator("#run-reset")).to_be_checked()
        page.set_input_files("#script-file", str(exchange))
        expect(page.locator("#validation")).to_have_attribute("data-valid", "true")
        for runs in (1, 2):  # the second Run starts from the initial cell again: epick on, dock 4 empty
            expect(page.locator("#run-script")).to_be_enabled()
            page.click("#run-script")
            wait_for(lambda n=runs: len(results.statuses) == n, timeout=60.0, message=f"run {runs} ends")
            expect(page.locator("#tool")).to_have_attribute("data-tool", "pipettor")
        assert results.statuses == ["SUCCEEDED", "SUCCEEDED"]
        page.click("#reset-simulation")
        expect(page.locator("#reply")).to_contain_text("simulation reset: epick attached")
        expect(page.locator("#tool")).to_have_attribute("data-tool", "epick")
    finally:
        view.close()
        engine.close()

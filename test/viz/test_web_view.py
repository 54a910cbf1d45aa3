"""The live web view: the running tree's picture, its controls, folding of long scripts,
the terminal watcher that reads it, and a headless-Chromium walk through pause/resume."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.orchestrator import ListenerGroup, State
from erobs_bt.ros.client.commands import watch
from erobs_bt.viz.watch import picture_from_ros
from erobs_bt.viz.web import LiveView, start_live_view

from browser import launch_chromium, needs_chromium
from helpers import SUCK, make_orchestrator, move, script_json, show, vacuum, wait_for

# Five units: batch[2] (execute), pipettor (run_step), batch[1] (execute), pipettor, batch[1].
FIVE_UNITS = script_json([move("a"), vacuum("vacuum_on"), SUCK, move("b"), SUCK, move("c")])


def get_state(url: str, query: str = "") -> dict[str, Any]:
    with urllib.request.urlopen(url + "api/state" + query, timeout=30) as response:
        return json.loads(response.read())


def post(url: str, action: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url + f"api/{action}", method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


CONTROL = {"X-Requested-By": "erobs-bt"}


def gated_run(script: str = FIVE_UNITS):
    """An orchestrator with a live view; every execute and run_step waits for its gate."""
    backend = ScriptedBackend()
    gates = [threading.Event() for _ in range(6)]
    backend.script("execute", *(Outcome.ok(gate=g) for g in gates[0::2]))
    backend.script("run_step", *(Outcome.ok(gate=g) for g in gates[1::2]))
    orchestrator = make_orchestrator(backend)
    view = start_live_view(orchestrator, rate=50.0)
    return backend, gates, orchestrator, view


def test_the_state_follows_the_running_unit_with_cache_and_progress() -> None:
    backend, gates, orchestrator, view = gated_run()
    try:
        assert view.url.startswith("http://127.0.0.1:")
        idle = get_state(view.url)
        assert idle["state"] == "IDLE" and idle["tree"] is None
        handle = orchestrator.submit(FIVE_UNITS, dry_run=False)
        wait_for(lambda: backend.count("execute") == 1, message="unit 1 executing")
        state = get_state(view.url, f"?after={idle['version']}&wait=10")
        wait_for(lambda: get_state(view.url)["tree"] is not None, message="first snapshot")
        state = get_state(view.url)
        tree = state["tree"]
        assert state["state"] == "RUNNING" and state["goal"]["id"] == handle.goal_id
        assert tree["current_unit"] == 1 and tree["total_units"] == 5
        (unit1,) = [e for e in tree["entries"] if e["kind"] == "unit" and e["unit"] == 1]
        assert unit1["current"] and unit1["open"] and unit1["status"] == "RUNNING"
        assert unit1["cache"] == "INELIGIBLE" and "plan" in unit1["seconds"]
        running = [n["name"] for n in _walk(unit1["children"]) if n["status"] == "RUNNING"]
        assert running == ["FaultOnFatalReplay", "ReplayOrPlan", "fresh", "ExecuteSolution"]
        before = state["version"]
        gates[0].set()
        wait_for(lambda: backend.count("run_step") == 1, message="unit 2 running")
        later = get_state(view.url, f"?after={before}&wait=10")
        assert later["version"] > before, "a long poll returns as soon as the picture changes"
        wait_for(lambda: get_state(view.url)["tree"]["current_unit"] == 2, message="unit 2 current")
        state = get_state(view.url)
        assert state["feedback"]["unit_index"] == 2
        assert state["feedback"]["progress_percentage"] == pytest.approx(100 * 2 / 6)
        for gate in gates:
            gate.set()
        assert handle.wait(10).success, show(handle.root)
        wait_for(lambda: get_state(view.url)["result"] is not None, message="result shown")
        final = get_state(view.url)
        assert final["result"]["status"] == "SUCCEEDED" and final["state"] == "IDLE"
        assert final["tree"]["counts"]["SUCCESS"] == 5
    finally:
        view.close()


def _walk(nodes: list[dict[str, Any]]):
    for node in nodes:
        yield node
        yield from _walk(node.get("children", []))


def test_controls_call_the_orchestrator_and_refuse_foreign_requests() -> None:
    backend, gates, orchestrator, view = gated_run()
    try:
        status, body = post(view.url, "pause", CONTROL)
        assert (status, body["success"], body["message"], body["state"]) == (
            200,
            False,
            "No task is currently executing",
            "IDLE",
        )
        handle = orchestrator.submit(FIVE_UNITS, dry_run=False)
        wait_for(lambda: backend.count("execute") == 1)
        status, body = post(view.url, "pause")
        assert status == 403 and "X-Requested-By" in body["error"], "a cross-site form cannot pause the robot"
        request = urllib.request.Request(view.url + "api/state", headers={"Host": "attacker.example:80"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 403, "DNS rebinding: foreign Host headers are refused"
        assert post(view.url, "launch", CONTROL)[0] in (404, 405)
        status, body = post(view.url, "pause", CONTROL)
        assert (status, body["success"]) == (200, True)
        assert orchestrator.state is State.COMPLETING_TASK
        gates[0].set()
        wait_for(lambda: orchestrator.state is State.PAUSED)
        wait_for(lambda: get_state(view.url)["state"] == "PAUSED")
        boundary = next(e for e in get_state(view.url)["tree"]["entries"] if e.get("unit") == 2)["boundary"]
        assert boundary["name"] == "before unit 2" and boundary["status"] == "RUNNING"
        assert post(view.url, "cancel", CONTROL)[1]["success"]
        result = handle.wait(10)
        assert result.status.value == "CANCELED"
        wait_for(lambda: (get_state(view.url)["result"] or {}).get("status") == "CANCELED")
        assert get_state(view.url)["last_error"] == "", "a cancel is not an error"
    finally:
        view.close()


def test_a_thousand_unit_script_folds_finished_units() -> None:
    tasks = [move("a") if i % 2 == 0 else SUCK for i in range(1000)]
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", *([Outcome.ok()] * 299), Outcome.ok(gate=gate))
    orchestrator = make_orchestrator(backend)
    view = start_live_view(orchestrator, rate=50.0)
    try:
        handle = orchestrator.submit(script_json(tasks), dry_run=False)
        wait_for(lambda: backend.count("execute") == 300, timeout=60, message="unit 599 executing")
        wait_for(lambda: (get_state(view.url)["tree"] or {}).get("current_unit") == 599, timeout=20)
        with urllib.request.urlopen(view.url + "api/state", timeout=30) as response:
            body = response.read()
        tree = json.loads(body)["tree"]
        assert tree["total_units"] == 1000
        assert tree["counts"] == {"SUCCESS": 598, "RUNNING": 1, "INVALID": 401, "FAILURE": 0}
        kinds = [
            (e["kind"], e.get("state"), e.get("first"), e.get("last"), e.get("unit")) for e in tree["entries"]
        ]
        assert kinds[0] == ("fold", "done", 1, 595, None), "finished units collapse into one line"
        assert [k[4] for k in kinds if k[0] == "unit"] == [596, 597, 598, 599, 600, 601]
        assert kinds[-2] == ("fold", "pending", 602, 1000, None)
        assert kinds[-1][0] == "end"
        shown = sum(1 for e in tree["entries"] if e["kind"] == "unit" for _ in _walk(e["children"]))
        # Odd units are moves (7 behaviours under the unit), even ones pipettor steps (2).
        assert shown == 3 * 7 + 3 * 2, "only the six units around the current one carry their subtrees"
        assert len(body) < 200_000
        gate.set()
        assert handle.wait(60).success
    finally:
        view.close()


def test_a_listener_error_never_reaches_the_goal_and_close_detaches() -> None:
    orchestrator = make_orchestrator(ScriptedBackend())
    view = start_live_view(orchestrator)
    listener = view.listener
    listener.event("goal-1", {"t": 1.0, "event": "plan_finished", "unit": 1, "seconds": "not a number"})
    assert isinstance(orchestrator.listener, ListenerGroup) and listener in orchestrator.listener.listeners
    waiting: list[dict[str, Any]] = []
    poller = threading.Thread(
        target=lambda: waiting.append(get_state(view.url, f"?after={view.version}&wait=20"))
    )
    poller.start()
    wait_for(lambda: view.waiting == 1, message="long poll waiting")
    view.close()
    poller.join(5)
    assert not poller.is_alive() and waiting, "closing releases waiting clients"
    assert listener not in orchestrator.listener.listeners
    view.close()


def _sse_state(chunk: str) -> dict[str, Any] | None:
    """The picture of one ``state`` Server-Sent Event, or ``None`` for any other chunk."""
    lines = chunk.splitlines()
    if "event: state" not in lines:
        return None
    return json.loads(next(line for line in lines if line.startswith("data: "))[len("data: ") :])


def test_the_event_stream_sends_a_change_made_while_it_waits_for_its_client() -> None:
    """A picture published while the stream waits in a ``yield`` (the client still reading
    the previous event) is the next thing sent, not held back until the 15 s keep-alive."""
    backend = ScriptedBackend()
    backend.script("execute", Outcome(fail_with=MotionError(ErrorCode.TIMEOUT, "no answer")))
    orchestrator = make_orchestrator(backend)
    view = LiveView(orchestrator, rate=50.0)

    def faulted_picture(after: int) -> dict[str, Any]:
        while True:  # state_json waits for each newer picture (bounded by the goal's end)
            picture = json.loads(view.state_json(after=after, wait=10.0))
            if picture["state"] == "FAULTED" or picture["version"] == after:
                return picture
            after = picture["version"]

    async def next_state(stream: Any) -> dict[str, Any]:
        while (picture := _sse_state(await stream.__anext__())) is None:
            pass
        return picture

    async def scenario() -> None:
        view.attach_loop(asyncio.get_running_loop())
        view.start()
        stream = view.stream()
        try:
            first = await next_state(stream)  # the stream now waits in its yield
            assert first["state"] == "IDLE"
            handle = orchestrator.submit(script_json([move("a")]), dry_run=False)
            result = await asyncio.to_thread(handle.wait, 10.0)
            assert result.error_code == "TIMEOUT"
            published = await asyncio.to_thread(faulted_picture, first["version"])
            assert published["state"] == "FAULTED", "the view published the fault"
            sent = await asyncio.wait_for(next_state(stream), 5.0)
            assert sent["version"] <= published["version"] and sent["version"] > first["version"]
            while sent["state"] != "FAULTED":  # a RUNNING picture may come first, then the fault
                sent = await asyncio.wait_for(next_state(stream), 5.0)
            assert sent["version"] == published["version"]
        finally:
            await stream.aclose()

    try:
        asyncio.run(scenario())
    finally:
        view.close()


def test_watch_prints_the_live_view_once() -> None:
    backend, gates, orchestrator, view = gated_run()
    try:
        handle = orchestrator.submit(FIVE_UNITS, dry_run=False)
        wait_for(lambda: backend.count("execute") == 1)
        wait_for(lambda: get_state(view.url)["tree"] is not None)
        result = CliRunner().invoke(watch, ["--url", view.url, "--once"], terminal_width=160)
        assert result.exit_code == 0, result.output
        assert "RUNNING" in result.output
        assert "unit 1: batch[2]: moveto, end_effector" in result.output and "◀ current" in result.output
        assert "ExecuteSolution" in result.output, "the current unit is shown with its subtree"
        assert "unit 5: batch[1]: moveto" in result.output
        for gate in gates:
            gate.set()
        assert handle.wait(10).success
    finally:
        view.close()
    result = CliRunner().invoke(watch, ["--url", view.url, "--once"])
    assert result.exit_code == 1 and "cannot reach the live view" in result.output


def test_watch_passes_the_access_token_of_a_view_that_needs_one() -> None:
    orchestrator = make_orchestrator(ScriptedBackend())
    view = start_live_view(orchestrator, token="watch-token-123")
    try:
        assert view.url == view.base_url + "?token=watch-token-123"
        refused = CliRunner().invoke(watch, ["--url", view.base_url, "--once"], env={"EROBS_BT_TOKEN": ""})
        assert refused.exit_code == 2 and "needs an access token" in refused.output, refused.output
        wrong = CliRunner().invoke(watch, ["--url", view.base_url, "--token", "nope", "--once"])
        assert wrong.exit_code == 2 and "refused the access token" in wrong.output, wrong.output
        for hostile in ("a\nb", "nul\x00", "caf\u00e9", "\ud800"):
            bad = CliRunner().invoke(watch, ["--url", view.base_url, "--token", hostile, "--once"])
            assert bad.exit_code == 2 and "printable ASCII" in bad.output, (hostile, bad.output)
        for args, env in (
            (["--url", view.url], {}),  # the URL as `run --view` prints it
            (["--url", view.base_url, "--token", "watch-token-123"], {}),
            (["--url", view.base_url], {"EROBS_BT_TOKEN": "watch-token-123"}),
        ):
            result = CliRunner().invoke(watch, [*args, "--once"], env=env, terminal_width=160)
            assert result.exit_code == 0 and "IDLE" in result.output, (args, result.output)
            assert "watch-token-123" not in result.output, "the token is never printed"
    finally:
        view.close()


def test_a_ros_tree_snapshot_becomes_the_same_picture() -> None:
    def behaviour(id_: str, parent: str, name: str, status: str = "INVALID", type_: str = "Sequence"):
        return SimpleNamespace(
            id=id_, parent_id=parent, name=name, type=type_, status=status, message="", is_active=False
        )

    snapshot = SimpleNamespace(
        goal_id="goal-7",
        final=False,
        behaviours=[
            behaviour("r", "", "script", "RUNNING"),
            behaviour("b1", "r", "before unit 1", "SUCCESS", "UnitBoundary"),
            behaviour("u1", "r", "unit 1: pipettor", "SUCCESS"),
            behaviour("l1", "u1", "Run pipettor", "SUCCESS", "RunSingleStep"),
            behaviour("b2", "r", "before unit 2", "RUNNING", "UnitBoundary"),
            behaviour("u2", "r", "unit 2: moveto"),
            behaviour("e", "r", "after last unit", "INVALID", "UnitBoundary"),
        ],
    )
    state = SimpleNamespace(
        state="PAUSED", message="paused before unit 2", current_step=2, total_steps=2, unit_index=2
    )
    picture = picture_from_ros(snapshot, state)
    assert picture["state"] == "PAUSED" and picture["goal"]["id"] == "goal-7"
    tree = picture["tree"]
    assert tree["current_unit"] == 2, "paused before unit 2: unit 2 is where the goal is"
    units = [e for e in tree["entries"] if e["kind"] == "unit"]
    assert [(u["unit"], u["status"]) for u in units] == [(1, "SUCCESS"), (2, "INVALID")]
    assert units[1]["boundary"]["status"] == "RUNNING"
    assert units[0]["children"][0]["name"] == "Run pipettor"


@needs_chromium
def test_browser_sees_units_advance_pause_resume_and_success(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    backend, gates, orchestrator, view = gated_run()
    handle = None
    try:
        with sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 1000})
                page.goto(view.url)
                expect(page.locator("#state")).to_have_text("IDLE")
                assert page.is_disabled("#pause") and page.is_disabled("#resume")
                handle = orchestrator.submit(FIVE_UNITS, dry_run=False)
                page.wait_for_selector('.unit.current[data-unit="1"][data-status="RUNNING"]', timeout=10_000)
                page.wait_for_selector(
                    '.unit.current[data-unit="1"] li.node[data-name="ExecuteSolution"]'
                    '[data-status="RUNNING"]',
                    timeout=10_000,
                )
                assert page.text_content("#state") == "RUNNING"
                gates[0].set()
                page.wait_for_selector('.unit.current[data-unit="2"][data-status="RUNNING"]', timeout=10_000)
                assert page.get_attribute('.unit[data-unit="1"]', "data-status") == "SUCCESS"
                assert page.text_content("#current-unit").startswith("unit 2/5: pipettor")
                page.click("#pause")
                expect(page.locator("#state")).to_have_text("COMPLETING_TASK")
                assert "Pause requested" in page.text_content("#reply")
                gates[1].set()
                expect(page.locator("#state")).to_have_text("PAUSED")
                page.wait_for_selector('.boundary[data-name="before unit 3"][data-status="RUNNING"]')
                assert backend.count("execute") == 1, "paused at the boundary: unit 3 has not started"
                assert page.is_enabled("#resume") and page.is_disabled("#pause")
                expect(page.locator("#progress-text")).to_have_text(re.compile(r"^3 / 6 steps"))
                page.screenshot(path=str(tmp_path / "paused.png"), full_page=True)
                page.click("#resume")
                expect(page.locator("#state")).to_have_text("RUNNING")
                for gate in gates:
                    gate.set()
                expect(page.locator("#state")).to_have_text("IDLE")
                page.wait_for_selector('#result[data-status="SUCCEEDED"]')
                assert page.text_content("#progress-text").startswith("6 / 6 steps (100 %)")
                assert page.is_hidden("#last-error")
                page.screenshot(path=str(tmp_path / "succeeded.png"), full_page=True)
            finally:
                browser.close()
        assert handle is not None and handle.wait(10).success
        assert (tmp_path / "paused.png").stat().st_size > 10_000
    finally:
        for gate in gates:
            gate.set()
        view.close()

"""The operator's console, opened while a goal is paused, never says "no goal yet" (issue 40,
item 6), in a real Chromium (playwright, as test_web_console.py).

While the page connects it says so; once the picture arrives it shows the paused goal with its
mode, steps and units, also when the view was started after the goal (it adopts the goal).
The event stream is held off (the route aborted) until the "connecting" text was checked, so
the check does not race the first picture.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from erobs_bt.backends.scripted import ScriptedBackend
from erobs_bt.orchestrator import State
from erobs_bt.viz.web import start_live_view

from browser import launch_chromium, needs_chromium
from helpers import make_orchestrator, move, script_json, wait_for

pytestmark = needs_chromium


@pytest.fixture()
def page() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        try:
            context = chromium.new_context(viewport={"width": 1280, "height": 1000})
            yield context.new_page()
        finally:
            chromium.close()


def test_the_console_connecting_to_a_paused_goal_says_connecting_then_shows_the_goal(page: Any) -> None:
    from playwright.sync_api import expect

    orchestrator = make_orchestrator(ScriptedBackend())
    handle = orchestrator.submit(script_json([move("a"), move("b"), move("c")]), dry_run=False, paused=True)
    try:
        wait_for(lambda: orchestrator.state is State.PAUSED, message="the goal paused before unit 1")
        view = start_live_view(orchestrator, rate=50.0)  # started after the goal: it adopts it
        try:
            page.route("**/api/events", lambda route: route.abort())
            page.goto(view.url)
            expect(page.locator("#goal")).to_have_text("connecting…")
            page.unroute("**/api/events")
            page.evaluate("connect()")  # the page's own (re)connection, now let through
            expect(page.locator("#state")).to_have_text("PAUSED")
            expect(page.locator("#goal")).to_have_text(
                f"{handle.goal_id} · execute · 3 steps · 1 unit · cache eligible"
            )
        finally:
            view.close()
    finally:
        orchestrator.cancel()
        handle.wait(30)
        orchestrator.shutdown()

"""The one table of state colours (erobs_bt.terminal.STATE_STYLES) covers every execution state,
and each terminal view draws a state with it: erobs-bt run's progress and the watcher."""

from __future__ import annotations

import io

from rich.console import Console

from erobs_bt.console import ConsoleProgress
from erobs_bt.goal import State
from erobs_bt.terminal import STATE_STYLES, state_style
from erobs_bt.viz.watch import render_picture


def test_every_execution_state_has_one_style_and_an_unknown_one_none() -> None:
    assert set(STATE_STYLES) == {state.value for state in State}
    assert all(STATE_STYLES.values())
    assert state_style("NOT_A_STATE") == ""


def _ansi_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, color_system="standard", width=120), out


def _ansi(style: str, text: str) -> str:
    console, out = _ansi_console()
    console.print(text, style=style, end="")
    return out.getvalue().split(text)[0]


def test_run_progress_and_watcher_draw_a_state_in_the_table_s_style() -> None:
    console, out = _ansi_console()
    ConsoleProgress(console).state_changed(State.FAULTED, "TIMEOUT: unit 2")
    assert _ansi(STATE_STYLES["FAULTED"], "FAULTED") + "FAULTED" in out.getvalue()

    console, out = _ansi_console()
    console.print(render_picture({"state": "PAUSED"}, source="test"))
    assert _ansi(STATE_STYLES["PAUSED"], "PAUSED") + "PAUSED" in out.getvalue()

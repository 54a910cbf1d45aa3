"""The CLI's rich console, in a module of its own so that commands which print but run no
goal (``validate``) do not import the orchestrator; :mod:`erobs_bt.console` re-exports it."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console

from erobs_bt.stdio import say_when_stdout_closes, stdout_closed

#: The rich style of each execution state (:class:`erobs_bt.goal.State` values, the
#: ``ExecutionState.state`` strings) wherever a terminal shows one: ``erobs-bt run``'s
#: progress, ``erobs-bt state``, ``erobs-bt watch``. One table, so a state looks the same in
#: each; an unknown state has no style (:func:`state_style`).
STATE_STYLES: dict[str, str] = {
    "IDLE": "green",
    "RUNNING": "bold blue",
    "COMPLETING_TASK": "yellow",
    "PAUSED": "bold yellow",
    "CANCELING": "yellow",
    "FAULTED": "bold red",
}


def state_style(state: str) -> str:
    """The rich style of the execution state named ``state`` (:data:`STATE_STYLES`; ``""``
    for a name it does not know)."""
    return STATE_STYLES.get(state, "")


def make_console(*, stderr: bool = False, closed_note: str | None = None) -> Console:
    """A rich console for the CLI.

    On a terminal it behaves as usual; when the output goes to a file or a pipe (a log,
    CI) lines are not wrapped at 80 columns, so paths and messages stay copyable. Emoji
    codes are not replaced (``emoji=False``): a ``:name:`` in a message is what the user
    wrote, and rich's emoji table (about 5 ms of start-up) is never loaded.

    Args:
        stderr: print to stderr instead of stdout.
        closed_note: when given, said on stderr when the stream closes (``erobs-bt send …
            | head``), which ends no verb (:mod:`erobs_bt.stdio`; :class:`ClosableConsole`).
    """
    stream = sys.stderr if stderr else sys.stdout
    options: dict[str, Any] = {"stderr": stderr, "emoji": False}
    if not stream.isatty():
        options.update(width=200, soft_wrap=True)
    if closed_note is not None:
        return ClosableConsole(closed_note, **options)
    return Console(**options)


class ClosableConsole(Console):
    """A rich console that goes quiet when the reader of its stream goes away.

    ``erobs-bt send SCRIPT | head`` closes the pipe after a few lines. rich's reaction to
    the failed write (:class:`BrokenPipeError`) is to raise ``SystemExit(1)`` from the
    printing thread; raised in an rclpy callback it ended the client's spin thread, so the
    goal's result never arrived and the command hung. This console instead reacts as every
    verb does to a closed stdout (:func:`erobs_bt.stdio.stdout_closed`: the stream goes to
    ``/dev/null``, ``note`` is said once on stderr), prints nothing more, and lets the caller
    go on (``send`` waits for the goal's result and exits with its code). Under ``erobs-bt``
    the guarded ``sys.stdout`` (:func:`erobs_bt.stdio.guard_stdout`) sees the closed pipe
    first; this hook serves a console writing to an unguarded stream.

    Args:
        note: what to say on stderr when the stream has closed.
        **options: :class:`rich.console.Console`'s.
    """

    def __init__(self, note: str, **options: Any) -> None:
        super().__init__(**options)
        self.note = note
        say_when_stdout_closes(note)

    def on_broken_pipe(self) -> None:
        """Hook override (rich calls it when a write failed with ``BrokenPipeError``): go
        quiet and react as every verb does (:func:`erobs_bt.stdio.stdout_closed`)."""
        self.quiet = True
        stdout_closed(self.file)

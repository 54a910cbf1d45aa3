"""The terminal's part in an in-process run (``erobs-bt run``): the keyboard at a pause.

A paused goal can be resumed or cancelled from more than one front end at once: the
terminal (Enter, ``c`` + Enter), the operator's web console of ``run --view`` (Resume,
Cancel, Stop), Ctrl-C and SIGTERM. The orchestrator decides (its ``resume``/``cancel``
are thread-safe; the first request wins) and every front end follows its state:

* :class:`TerminalPauses` (an orchestrator listener, so it sees every state change, even a
  pause that ends and a new one that begins within a few milliseconds) waits for a line
  typed on the terminal *or* for the pause to end, whichever comes first. A resume (or
  cancel) from the web console ends the terminal's prompt with a line saying so, and the
  run goes on to its result and run-log path; Ctrl-C works while it waits (nothing blocks
  in ``input()``).
* A closed stdin (``< /dev/null``, ``nohup``, a service) is *no keyboard*: the pause stays
  a pause, for the web console to resume or cancel (or Ctrl-C / SIGTERM). It never turns
  into a cancel.
* ``--auto-resume`` resumes the script's ``pause`` steps only: an operator's pause (the
  console's Pause, ``--start-paused``) waits for a person (:meth:`TerminalPauses.at_pause_step`).
* Lines typed on a terminal before the pause began are discarded (``tcflush``): an Enter
  pressed while the arm moved must not resume the next pause unseen. Piped input (not a
  terminal) is read as it comes, one line per pause.
"""

from __future__ import annotations

import os
import select
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any

from erobs_bt.goal import OrchestratorListener, State

if TYPE_CHECKING:
    from rich.console import Console

    from erobs_bt.orchestrator import GoalHandle, Orchestrator

#: [s] how often a waiting prompt looks at the keyboard and at the goal.
POLL = 0.05


class Keyboard:
    """Lines from stdin without blocking the caller (``select`` on its file descriptor).

    Args:
        stream: the input (default ``sys.stdin``). A stream without a file descriptor (an
            in-memory one, as test runners give) is read with ``readline()``, which does not
            block on such a stream.

    Attributes:
        closed: stdin has reached its end (or there is none): no keyboard.
        is_terminal: stdin is a terminal (type-ahead is discarded at each pause).
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = sys.stdin if stream is None else stream
        self._fd: int | None
        try:
            self._fd = self._stream.fileno() if self._stream is not None else None
        except (AttributeError, OSError, ValueError):  # in-memory stream (io.UnsupportedOperation)
            self._fd = None
        self._buffer = b""
        self.closed = self._stream is None or getattr(self._stream, "closed", False)
        self.is_terminal = self._fd is not None and os.isatty(self._fd)

    def discard_typeahead(self) -> None:
        """Drop what was typed on the terminal and not read yet (nothing for other inputs)."""
        if not self.is_terminal or self._fd is None:
            return
        import termios

        termios.tcflush(self._fd, termios.TCIFLUSH)
        self._buffer = b""

    def line(self, timeout: float) -> str | None:
        """The next line (without its line end) that arrives within ``timeout`` [s].

        Returns:
            The line, or ``None`` when none was completed in time.

        Raises:
            EOFError: stdin is closed (and :attr:`closed` is set); a last line without a
                line end is returned first.
        """
        if self.closed:
            raise EOFError("stdin is closed")
        if self._fd is None:
            text = self._stream.readline()
            if not text:
                self.closed = True
                raise EOFError("stdin is closed")
            return text.rstrip("\r\n")
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            readable, _, _ = select.select([self._fd], [], [], max(0.0, remaining))
            if not readable:
                return None
            data = os.read(self._fd, 4096)
            if not data:
                self.closed = True
                if self._buffer:
                    last, self._buffer = self._buffer, b""
                    return last.decode(errors="replace").rstrip("\r")
                raise EOFError("stdin is closed")
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode(errors="replace").rstrip("\r")


class TerminalPauses(OrchestratorListener):
    """The terminal as one front end of a run's pauses (joins ``orchestrator.listener``).

    Every state change the orchestrator delivers is counted; a pause is over when any state
    change follows the ``PAUSED`` that began it, so a resume from elsewhere is never missed,
    even when the goal pauses again at once (a ``pause`` step right after a boundary).

    Args:
        orchestrator: runs the goals.
        console: where the prompt and messages go.
        keyboard: the terminal's input.
        elsewhere: the other front ends that can resume a pause, for the messages
            (``"the live view (http://…)"``); ``""`` when there is none.
    """

    def __init__(
        self, orchestrator: Orchestrator, console: Console, keyboard: Keyboard, *, elsewhere: str = ""
    ) -> None:
        self.orchestrator = orchestrator
        self.console = console
        self.keyboard = keyboard
        self.elsewhere = elsewhere
        self._changed = threading.Condition()
        self._changes = 0
        self._state: State | None = None
        self._unit_label: str | None = None  # of the unit started and not yet completed
        orchestrator.listener.add(self)

    def state_changed(self, state: State, message: str) -> None:
        """Hook: count the change and wake a waiting prompt."""
        with self._changed:
            self._changes += 1
            self._state = state
            self._changed.notify_all()

    def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
        """Hook: follow which unit runs (a ``pause`` step's unit is labelled ``pause``)."""
        if record.get("event") == "unit_started":
            self._unit_label = str(record.get("label", ""))
        elif record.get("event") in ("unit_succeeded", "goal_finished"):
            self._unit_label = None

    def at_pause_step(self) -> bool:
        """The goal is paused by a script ``pause`` step (which ``--auto-resume`` resumes),
        not by an operator's pause (the console's Pause, ``--start-paused``), which waits for
        a person whatever ``--auto-resume`` says."""
        return self.orchestrator.state is State.PAUSED and self._unit_label == "pause"

    def attend(self, handle: GoalHandle, *, interrupted: Callable[[], bool] = lambda: False) -> None:
        """Attend a ``PAUSED`` goal from the terminal until the pause is over.

        Enter resumes, ``c`` + Enter cancels; a resume or cancel from another front end ends
        the wait with a line saying what happened. Without a keyboard the goal stays paused
        (never cancelled) and this waits for another front end, Ctrl-C (KeyboardInterrupt,
        raised to the caller) or SIGTERM.

        Args:
            handle: the paused goal.
            interrupted: looked at every :data:`POLL`; when it turns true (SIGTERM arrived,
                ``erobs-bt run``) this returns at once, the goal still paused, for the caller
                to act.
        """
        with self._changed:  # the PAUSED the caller saw has reached the listeners
            while self._state is not State.PAUSED and not handle.done():
                self._changed.wait(POLL)
            began = self._changes
        if handle.done():
            return

        def paused() -> bool:
            return self._changes == began and not handle.done() and not interrupted()

        console, keyboard = self.console, self.keyboard
        if not keyboard.closed:
            keyboard.discard_typeahead()
            also = f" (or Resume/Cancel in {self.elsewhere})" if self.elsewhere else ""
            console.print(f"[yellow]paused[/] — Enter resumes, 'c' + Enter cancels{also}: ", end="")
            console.file.flush()
            while paused():
                try:
                    answer = keyboard.line(POLL)
                except EOFError:
                    console.print()
                    break
                except KeyboardInterrupt:
                    console.print()  # the caller's Ctrl-C message on a line of its own
                    raise
                if answer is None:
                    continue
                if not paused():  # the line came as another front end acted: theirs stands
                    break
                wants_cancel = answer.strip().lower().startswith("c")
                reply = self.orchestrator.cancel() if wants_cancel else self.orchestrator.resume()
                console.print(reply.message, highlight=False)
                return
            else:
                console.print()  # end the prompt's line
        if keyboard.closed and paused():
            if self.elsewhere:
                console.print(
                    f"[yellow]no keyboard (stdin closed): the goal stays paused; "
                    f"Resume or Cancel in {self.elsewhere}[/]",
                    highlight=False,
                )
            else:
                console.print(
                    "[yellow]no keyboard (stdin closed) and no live view: the goal stays paused; Ctrl-C "
                    "cancels (use --auto-resume or --view to run unattended)[/]",
                    highlight=False,
                )
            with self._changed:
                while paused():
                    self._changed.wait(POLL)  # short waits: Ctrl-C is taken between them
        if not handle.done() and not interrupted():
            with self._changed:
                after = self._state
            names: dict[State | None, str] = {State.RUNNING: "resumed", State.CANCELING: "cancelling"}
            left = names.get(after, after.value if after is not None else "")
            console.print(f"[yellow]{left}[/] (by another front end)", highlight=False)

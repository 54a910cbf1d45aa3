"""Standard output whose reader went away: ``erobs-bt validate X | head -1``.

When the reader of a pipe exits (``head``, ``less`` quit early, a closed ``grep -q``), every
later write to it fails with :class:`BrokenPipeError` (Python ignores ``SIGPIPE``). click
turns that into exit status 1 and rich into ``SystemExit(1)`` — "the goal failed" in
``erobs-bt``'s exit codes (:mod:`erobs_bt.commandline`), which a closed pipe is not: the
verb's work is unchanged, only its remaining output has nobody to read it.

One reaction for every printing verb (:func:`stdout_closed`): the stream's file descriptor
is pointed at ``/dev/null`` (so no later write, Python's own flush at exit included, fails
again), nothing more is printed, a verb that keeps working (``send`` waits for its goal)
says why on stderr (:func:`say_when_stdout_closes`), and the verb goes on to its own exit
status. Two hooks lead to it: :func:`guard_stdout`, which ``erobs-bt`` installs before any
verb runs (click's ``echo``, ``print`` and rich consoles all write to ``sys.stdout``), and
:class:`erobs_bt.terminal.ClosableConsole` for a rich console writing to a stream that is
not guarded (a verb called inside another program).

Imports nothing beyond the standard library (``validate``'s start-up).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import IO, Any, TextIO

_lock = threading.Lock()
_closed = False
_note: str | None = None


def say_when_stdout_closes(note: str | None) -> None:
    """Say ``note`` on stderr if stdout closes from now on (``None``: say nothing, the
    default: ``validate | head`` is silent)."""
    global _note
    _note = note


def stdout_closed(stream: IO[str] | None = None) -> None:
    """Stdout's reader went away: point its file descriptor at ``/dev/null`` and say the
    note of :func:`say_when_stdout_closes` once on stderr (see the module docstring).

    Args:
        stream: the stream that failed (default: ``sys.__stdout__``, the process's stdout).
    """
    global _closed
    with _lock:
        if _closed:
            return
        _closed = True
        target = stream if stream is not None else sys.__stdout__
        with contextlib.suppress(OSError, ValueError, AttributeError):  # no descriptor: nothing to redirect
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, target.fileno())  # type: ignore[union-attr]
            finally:
                os.close(devnull)
    if _note is not None:
        with contextlib.suppress(OSError, ValueError):  # stderr gone too: nobody is left to tell
            print(_note, file=sys.stderr, flush=True)


def is_stdout_closed() -> bool:
    """True once :func:`stdout_closed` ran."""
    return _closed


class _GuardedStream:
    """``sys.stdout`` whose writes and flushes treat a :class:`BrokenPipeError` as
    :func:`stdout_closed` instead of raising; every other attribute is the stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: Any) -> int:
        if _closed:
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            stdout_closed(self._stream)
            return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            stdout_closed(self._stream)
            with contextlib.suppress(OSError, ValueError):
                self._stream.flush()  # now into /dev/null: the buffer empties

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_stdout() -> None:
    """Make ``sys.stdout`` react to a closed pipe with :func:`stdout_closed` (idempotent).
    For the process's own program only (``erobs-bt``): ``sys.stdout`` belongs to the program."""
    if sys.stdout is not None and not isinstance(sys.stdout, _GuardedStream):
        sys.stdout = _GuardedStream(sys.stdout)  # type: ignore[assignment]

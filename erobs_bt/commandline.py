"""What the ``erobs-bt`` verb modules share: exit codes, the script loader, the lines that
report an invalid script or configuration, ``--poses``'s help, whether ``erobs-bt`` is
the program, and signals received on a pipe (:class:`SignalPipe`, the node's process and
``run`` alike).

:mod:`erobs_bt.cli` (the group and the embedded-cell verbs), :mod:`erobs_bt.ros.client.commands`
and :mod:`erobs_bt.viz.commands` all import it; it imports none of them, so the verb modules
stand on it instead of on each other (``erobs-bt`` loads them lazily, :mod:`erobs_bt.cli`).
Imports click and the parser only (``validate``'s start-up, see :mod:`erobs_bt.cli`).

Exit codes: :data:`EXIT_FAILED` (1) the goal failed (planning, execution, cancel),
:data:`EXIT_INVALID` (2) the script or a configuration file is invalid.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

import click

from erobs_bt.plan import GoalPlan, ScriptParser, plan_goal, pose_registry_file
from erobs_bt.script.errors import ScriptError

if TYPE_CHECKING:
    from rich.text import Text

#: The goal failed (planning, execution, cancel).
EXIT_FAILED = 1
#: The script or a configuration file is invalid.
EXIT_INVALID = 2


#: ``--poses``'s help, for every verb that reads a script.
POSES_HELP = (
    "Pose registry YAML (degrees). Default: the packaged config/poses.yaml with the packaged "
    "cell, the poses.yaml beside a --cell file."
)


def load_plan(
    path: Path,
    *,
    poses: Path | None,
    cell: Path | None = None,
    enable_batching: bool = True,
    preview: bool = False,
) -> GoalPlan:
    """Read a script file and make its goal plan with the cell's parser.

    Args:
        path: the script (read as bytes: UTF-8, a byte-order mark is ignored).
        poses: the pose registry, or ``None`` for the cell's default
            (:func:`~erobs_bt.plan.pose_registry_file`).
        cell: the cell configuration (``None``: the packaged ``config/cell.yaml``).
        enable_batching: group consecutive moveto/end_effector steps.
        preview: refuse a script that cannot be previewed.

    Raises:
        ConfigurationError: the cell, the registry or the vision targets are invalid, or a
            configuration file cannot be read.
        ScriptError: the script is invalid (message names the path).
        NotPreviewableError: ``preview`` and the script has steps other than
            moveto/end_effector.
        OSError: the script cannot be read.
    """
    parser = load_parser(cell=cell, poses=poses)
    return plan_goal(path.read_bytes(), parser=parser, enable_batching=enable_batching, preview=preview)


class ConfigurationError(Exception):
    """A configuration file (cell, pose registry, vision targets) is invalid or unreadable."""


def load_parser(*, cell: Path | None, poses: Path | None) -> ScriptParser:
    """The parser for the ``--cell`` and ``--poses`` files (no ``--poses``: the cell's default
    registry, :func:`~erobs_bt.plan.pose_registry_file`).

    Raises:
        ConfigurationError: with the file and key of the problem.
    """
    try:
        return ScriptParser.from_files(cell=cell, poses=pose_registry_file(cell, poses))
    except (ScriptError, OSError) as exc:
        raise ConfigurationError(str(exc)) from None


def labelled(label: str, text: str) -> Text:
    """``<label> <text>`` for a rich console, with the label in bold red and ``text``
    verbatim (no rich markup or emoji codes are read from it: messages quote what the user
    wrote)."""
    from rich.text import Text

    return Text.assemble((label, "bold red"), " ", text)


def use_color() -> bool | None:
    """click's ``color`` argument: never with ``NO_COLOR`` set (https://no-color.org, as rich
    does), else on a terminal only (click's default)."""
    return False if os.environ.get("NO_COLOR") else None


def echo_labelled(label: str, text: str, *, err: bool, fg: str) -> None:
    """``<label> <text>`` with the label in bold ``fg`` on a terminal, ``text`` verbatim."""
    click.echo(f"{click.style(label, fg=fg, bold=True)} {text}", err=err, color=use_color())


def print_invalid(script: Path, error: Exception) -> None:
    """``invalid <script>: <error>`` on stderr: the one rejection line of every verb."""
    echo_labelled("invalid", f"{script}: {error}", err=True, fg="red")


def print_configuration_error(error: Exception) -> None:
    """``configuration error: <error>`` on stderr."""
    echo_labelled("configuration error:", str(error), err=True, fg="red")


def print_warnings(plan: GoalPlan) -> None:
    """``warning <text>`` on stderr for each of the script's warnings (valid, but a pose
    that looks like radians…)."""
    for warning in plan.script.warnings:
        echo_labelled("warning", warning, err=True, fg="yellow")


def fail_invalid(script: Path, error: Exception) -> NoReturn:
    """Print ``invalid <script>: <error>`` on stderr and exit 2."""
    print_invalid(script, error)
    sys.exit(EXIT_INVALID)


def fail_configuration(error: Exception) -> NoReturn:
    """Print ``configuration error: <error>`` on stderr and exit 2."""
    print_configuration_error(error)
    sys.exit(EXIT_INVALID)


def is_the_program() -> bool:
    """True when this process was started as ``erobs-bt``, ``python -m erobs_bt`` or
    ``python -m erobs_bt.cli``."""
    entry = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path()
    as_module = entry.name in ("__main__.py", "cli.py") and entry.parent.name == "erobs_bt"
    return entry.name == "erobs-bt" or as_module


class SignalPipe:
    """Signals received as bytes on a pipe that the main thread waits on (the self-pipe).

    The handler only writes the signal's number to the pipe: it takes no lock and raises
    nothing, so it cannot interrupt the main thread inside a lock it holds (``Event.set``
    in a handler could: a deadlock, or a RecursionError when the signal came again) nor
    in the middle of a shutdown. The main thread looks when it suits it: :meth:`wait`
    (``select`` on the pipe, also a way to sleep) or :attr:`received`. Used by the node's
    process (:func:`erobs_bt.ros.process.serve`: SIGINT and SIGTERM) and by ``erobs-bt run``
    (SIGTERM: a process manager ending the process).

    Call from the main thread (Python runs signal handlers there).

    Args:
        signals: the signals to take over (``signal.SIGTERM``, …); their handlers found are
            put back by :meth:`close`.
    """

    def __init__(self, signals: Sequence[int]) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        #: The signals received so far, in order (read from the pipe by :meth:`wait`).
        self.signals: list[int] = []
        self._previous: dict[int, Any] = {number: signal.signal(number, self._handle) for number in signals}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):  # the pipe is full (many signals) or closed: enough said
            os.write(self._write, bytes((signum,)))

    def fileno(self) -> int:
        """The pipe's read end (readable once a signal arrived and was not read yet)."""
        return self._read

    def wait(self, timeout: float) -> bool:
        """Wait at most ``timeout`` [s] for a signal; True when one has arrived (now or before).

        Raises:
            ValueError: the pipe was closed (:meth:`close`).
        """
        wait = 0.0 if self.signals else max(0.0, timeout)  # one has come: only read what is new
        ready, _, _ = select.select([self._read], [], [], wait)
        if ready:
            with contextlib.suppress(BlockingIOError):
                self.signals.extend(os.read(self._read, 64))
        return bool(self.signals)

    @property
    def received(self) -> bool:
        """A signal has arrived (looks at the pipe without waiting)."""
        return self.wait(0.0)

    def close(self, *, ignore: bool = False) -> None:
        """Put the handlers found back and close the pipe; with ``ignore``, ignore these
        signals instead (the interpreter's own shutdown still to come, when ``erobs-bt`` is
        the program, must not be killed half-way by one). Safe to call twice."""
        for number, handler in self._previous.items():
            signal.signal(number, signal.SIG_IGN if ignore else handler)
        self._previous = {}
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._read = self._write = -1

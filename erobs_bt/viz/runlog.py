"""The run log: every orchestrator event as one JSON line, and a readable timeline.

The orchestrator already reports everything worth keeping through
:meth:`~erobs_bt.orchestrator.OrchestratorListener.event` — state changes, goals
starting and finishing, unit starts and completions, cache decisions, the start and
end of each plan/execute/replay/run phase with its duration, errors with their prefix
(``PLANNING_FAILED:``, ``TIMEOUT:`` …). :class:`RunLogWriter` appends those records to
a JSON Lines file, flushed after each line, so the log survives a crash up to the last
event and can be followed with ``tail -f``. :func:`timeline` turns a log back into a
table with times relative to the first record, per-unit durations and errors in red.

A record is ``{"t": epoch s, "goal_id": "goal-3", "event": "plan_finished", ...fields}``;
the fields are those of the event (``unit`` is 1-based, ``seconds`` in seconds).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from rich.table import Table
from rich.text import Text

from erobs_bt.orchestrator import OrchestratorListener

_LOG = logging.getLogger(__name__)


def default_log_dir() -> Path:
    """Where run logs go by default: ``$EROBS_BT_LOG_DIR``, else ``~/.local/state/erobs_bt/runs``."""
    configured = os.environ.get("EROBS_BT_LOG_DIR")
    return Path(configured) if configured else Path.home() / ".local" / "state" / "erobs_bt" / "runs"


class RunLogWriter(OrchestratorListener):
    """An orchestrator listener that appends every event record to ``path`` as JSON Lines.

    Thread-safe; each line is written whole and flushed. Writing never raises into the
    orchestrator (a viewer must not fail a goal): after an ``OSError`` (disk full, file
    removed) or :meth:`close`, records are dropped and :attr:`error` says why.

    Text that UTF-8 cannot encode (a lone surrogate from a script's ``\\ud800`` escape) is
    written as its backslash escape, so such a script is logged like any other.

    Args:
        path: the log file; created with its parent directory, appended to when it
            exists (several goals and runs share one log; every line names its goal).

    Raises:
        OSError: the file cannot be opened.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8", errors="backslashreplace")
        self.error = ""
        self.lines = 0

    def event(self, goal_id: str, record: Mapping[str, Any], *, flush: bool = True) -> None:
        """Append ``{"t", "goal_id", "event", ...}`` as one line (and flush the file,
        unless ``flush`` is false: a writer of many lines calls :meth:`flush` after them)."""
        fields = dict(record)
        line = {"t": fields.pop("t", None), "goal_id": goal_id, "event": fields.pop("event", ""), **fields}
        text = json.dumps(line, default=str, ensure_ascii=False) + "\n"
        with self._lock:
            if self._file is None:
                return
            try:
                self._file.write(text)
                if flush:
                    self._file.flush()
                self.lines += 1
            except OSError as exc:
                self.error = f"{self.path}: {exc}"
                _LOG.warning("run log disabled: %s", self.error)
                self._close_locked()

    def flush(self) -> None:
        """Flush the lines written so far to the file."""
        with self._lock:
            if self._file is None:
                return
            try:
                self._file.flush()
            except OSError as exc:
                self.error = f"{self.path}: {exc}"
                _LOG.warning("run log disabled: %s", self.error)
                self._close_locked()

    def close(self) -> None:
        """Close the file; later records are dropped. Safe to call twice."""
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:
                self.error = self.error or f"{self.path}: {exc}"
            self._file = None
            if not self.error:
                self.error = "closed"

    def __enter__(self) -> RunLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_run_log(path: str | Path) -> list[dict[str, Any]]:
    """Read a run log.

    A last line without its newline (the process died while writing it) is ignored.

    Args:
        path: a file written by :class:`RunLogWriter`.

    Returns:
        The records in file order.

    Raises:
        ValueError: a line is not a JSON object with ``t`` (number) and ``event``
            (string); the message names the file and line, e.g. ``run.jsonl:7: not JSON``.
        OSError: the file cannot be read.
    """
    text = Path(path).read_text(encoding="utf-8")
    lines = text.split("\n")
    if lines and lines[-1] != "":
        lines = lines[:-1]
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object")
        if not isinstance(record.get("t"), (int, float)) or not isinstance(record.get("event"), str):
            raise ValueError(f"{path}:{number}: a record needs a numeric 't' and a string 'event'")
        records.append(record)
    return records


_SKIP_DETAILS = frozenset({"t", "goal_id", "event", "unit", "seconds"})


def _is_error(record: Mapping[str, Any]) -> bool:
    event = record.get("event", "")
    if record.get("status") == "CANCELED":
        return False
    if record.get("error"):
        return True
    if event == "state" and record.get("state") == "FAULTED":
        return True
    if event == "goal_finished" and record.get("status") == "ABORTED":
        return True
    return str(record.get("detail", "")).startswith("failed")


def _details(record: Mapping[str, Any]) -> str:
    event = record.get("event", "")
    if event == "state":
        message = record.get("message", "")
        return f"{record.get('state', '')}" + (f" — {message}" if message else "")
    if event == "cache":
        return str(record.get("status", ""))
    parts = []
    for key, value in record.items():
        if key in _SKIP_DETAILS or value in ("", None):
            continue
        parts.append(str(value) if key in ("detail", "error", "label") else f"{key}={value}")
    return ", ".join(parts)


def timeline(records: Iterable[Mapping[str, Any]], *, goal_id: str | None = None) -> Table:
    """The records as a rich table: relative time, goal, unit, event, details, duration.

    Durations: a phase's ``seconds`` for ``*_finished``; for ``unit_succeeded`` the time
    since that unit's ``unit_started``; for ``goal_finished`` the time since
    ``goal_started``. Errors (an ``error`` field, a ``failed…`` detail, FAULTED, an
    ABORTED goal) are red; cancellations (whose ``error`` is the cancel reason) and
    pauses yellow; cache hits green.

    Args:
        records: from :func:`read_run_log`.
        goal_id: show only this goal.

    Returns:
        The table (print it with a ``rich.console.Console``).
    """
    table = Table(
        "time", "goal", "unit", "event", "details", "duration", title="run log", title_justify="left"
    )
    chosen = [r for r in records if goal_id is None or r.get("goal_id") == goal_id]
    if not chosen:
        return table
    origin = float(chosen[0]["t"])
    unit_start: dict[tuple[str, Any], float] = {}
    goal_start: dict[str, float] = {}
    for record in chosen:
        t = float(record["t"])
        goal = str(record.get("goal_id", ""))
        event = str(record.get("event", ""))
        unit = record.get("unit")
        duration = ""
        if event.endswith("_finished") and isinstance(record.get("seconds"), (int, float)):
            duration = f"{record['seconds']:.3f} s"
        elif event == "unit_started":
            unit_start[(goal, unit)] = t
        elif event == "unit_succeeded" and (goal, unit) in unit_start:
            duration = f"{t - unit_start[(goal, unit)]:.3f} s"
        elif event == "goal_started":
            goal_start[goal] = t
        if event == "goal_finished" and goal in goal_start:
            duration = f"{t - goal_start[goal]:.3f} s"
        style = ""
        if _is_error(record):
            style = "bold red"
        elif record.get("status") == "CANCELED" or record.get("state") in ("CANCELING", "PAUSED"):
            style = "yellow"
        elif event == "cache" and record.get("status") == "HIT":
            style = "green"
        table.add_row(
            f"+{t - origin:.3f}",
            goal,
            "" if unit is None else str(unit),
            Text(event, style=style or "bold"),
            Text(_details(record), style=style),
            duration,
        )
    return table

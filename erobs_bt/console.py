"""Readable live progress of a goal on the terminal (used by ``erobs-bt run``/``preview``).

:class:`ConsoleProgress` is an :class:`~erobs_bt.orchestrator.OrchestratorListener`
that prints one line per unit phase as run-log records arrive (unit start, cache
decision, plan/replay/execute timings, a replay sent unchecked from another planning-scene
revision, pauses, errors) and keeps per-run totals for the final summary.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console

from erobs_bt.orchestrator import OrchestratorListener, Result, State
from erobs_bt.terminal import make_console, state_style
from erobs_bt.wording import steps_done

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["ConsoleProgress", "RunTotals", "make_console"]


@dataclass
class RunTotals:
    """What one goal took.

    Attributes:
        planning_time: wall time in ``PlanUnit`` [s].
        execution_time: wall time executing fresh solutions and single steps [s].
        replay_time: wall time replaying cached solutions [s].
        cache: count of cache decisions by status (``HIT``, ``MISS``, ``INELIGIBLE``).
        units: units completed.
        unchecked: the notices of cache hits replayed unchecked although planned in another
            planning-scene revision (``replay_unchecked`` records), ``unit N: …``.
    """

    planning_time: float = 0.0
    execution_time: float = 0.0
    replay_time: float = 0.0
    cache: dict[str, int] = field(default_factory=dict)
    units: int = 0
    unchecked: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)


class ConsoleProgress(OrchestratorListener):
    """Print progress lines for every unit of every goal.

    Args:
        console: where to print. Call :meth:`begin` before each goal.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.totals = RunTotals()
        self._units_total = 0
        self._lock = threading.Lock()
        self.state = State.IDLE

    def begin(self, units_total: int) -> None:
        """Reset the totals for a new goal of ``units_total`` units."""
        with self._lock:
            self.totals = RunTotals()
            self._units_total = units_total

    def state_changed(self, state: State, message: str) -> None:
        self.state = state
        if state in (State.PAUSED, State.COMPLETING_TASK, State.CANCELING, State.FAULTED):
            style = state_style(state.value)
            self.console.print(f"  [{style}]{state.value}[/] {message}", highlight=False)

    def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
        kind = record.get("event", "")
        unit = record.get("unit")
        prefix = f"  unit {unit}/{self._units_total}" if unit else "  "
        with self._lock:
            totals = self.totals
            if kind == "unit_started":
                head = f"[bold]▶ unit {unit}/{self._units_total}[/]"
                self.console.print(f"{head} step {record['first_step']}: {record['label']}", highlight=False)
            elif kind == "cache":
                status = record["status"]
                totals.cache[status] = totals.cache.get(status, 0) + 1
                colour = {"HIT": "green", "MISS": "cyan"}.get(status, "dim")
                self.console.print(f"{prefix} cache [{colour}]{status}[/]", highlight=False)
            elif kind.endswith("_finished") and kind != "goal_finished":
                phase = kind.removesuffix("_finished")
                seconds = float(record.get("seconds", 0.0))
                if phase == "plan":
                    totals.planning_time += seconds
                elif phase == "replay":
                    totals.replay_time += seconds
                else:
                    totals.execution_time += seconds
                detail = record.get("detail", "")
                failed = str(detail).startswith("failed")
                mark = "[red]✗[/]" if failed else "[green]✓[/]"
                self.console.print(f"{prefix} {mark} {phase} {seconds:.2f} s  {detail}", highlight=False)
            elif kind == "unit_succeeded":
                totals.units += 1
            elif kind == "replay_unchecked":
                notice = str(record.get("message", ""))
                totals.unchecked.append(f"unit {unit}: {notice}")
                self.console.print(f"{prefix} [yellow]![/] {notice}", highlight=False)

    def summary(self, result: Result, *, title: str, dry_run: bool = False) -> Table:
        """A table of the goal's outcome and timings; ``dry_run``: a preview, whose steps and
        units were planned, not executed (:func:`erobs_bt.wording.steps_done`)."""
        from rich.table import Table  # after the run: not on the way to the first motion

        totals = self.totals
        table = Table(title=title, show_header=False)
        status = "[green]SUCCEEDED[/]" if result.success else f"[red]{result.status.value}[/]"
        table.add_row("result", status)
        if result.error_message:
            table.add_row("error", f"[red]{result.error_message}[/]")
        table.add_row("steps", steps_done(result.completed_steps, result.total_steps, dry_run=dry_run))
        table.add_row("units", steps_done(totals.units, self._units_total, dry_run=dry_run))
        table.add_row("cache", ", ".join(f"{k} {v}" for k, v in sorted(totals.cache.items())) or "-")
        table.add_row("planning time", f"{totals.planning_time:.2f} s")
        table.add_row("execution time", f"{totals.execution_time:.2f} s")
        table.add_row("replay time", f"{totals.replay_time:.2f} s")
        table.add_row("wall time", f"{time.monotonic() - totals.started:.2f} s")
        for notice in totals.unchecked:
            table.add_row("notice", f"[yellow]{notice}[/]")
        return table

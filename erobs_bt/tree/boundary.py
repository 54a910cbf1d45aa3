"""Unit boundaries: the only places where pause and cancel take effect.

A :class:`UnitBoundary` sits between every two units of the compiled tree, before the
first and after the last. When ticked it

1. reports the previous unit as completed (its steps now count),
2. ends the goal as CANCELED if a cancel is pending (so a cancel that arrived during
   the final unit still wins over success),
3. before a unit: parks the goal in PAUSED (RUNNING, no work) if a pause is pending,
   until Resume, or ends it if a cancel arrives while paused,
4. takes the next unit's cache key from the live robot state and lets the unit start.

After the last unit a pending pause is dropped: the goal may finish without pausing.
Making boundaries nodes keeps the pause/cancel granularity visible in every rendering
of the tree and in its snapshots.
"""

from __future__ import annotations

import py_trees
from py_trees.common import Status

from erobs_bt.batching import Unit
from erobs_bt.tree.context import FinishReason, GoalContext


class UnitBoundary(py_trees.behaviour.Behaviour):
    """The boundary between ``previous`` and ``following`` (either may be ``None``).

    Args:
        context: the goal context (controls and events).
        previous: the unit that has just completed when this boundary is reached.
        following: the unit about to start, or ``None`` after the last unit.
    """

    def __init__(self, context: GoalContext, *, previous: Unit | None, following: Unit | None) -> None:
        name = f"before unit {following.index + 1}" if following is not None else "after last unit"
        super().__init__(name)
        self.context = context
        self.previous = previous
        self.following = following
        self._reported = False
        self._paused = False

    def initialise(self) -> None:
        """Forget the previous visit: report the previous unit again, not paused."""
        self._reported = False
        self._paused = False

    def update(self) -> Status:
        """Report the previous unit, then cancel (FAILURE), park (RUNNING) or let through (SUCCESS)."""
        ctx = self.context
        controls = ctx.controls
        if not self._reported:
            self._reported = True
            if self.previous is not None:
                ctx.events.unit_succeeded(self.previous)
        if controls.cancel_requested:
            ctx.finish_reason = FinishReason.CANCELED
            ctx.cancel_message = "cancelled while paused" if self._paused else "cancelled"
            self.feedback_message = ctx.cancel_message
            return Status.FAILURE
        if self.following is None:
            controls.take_pause()
            return Status.SUCCESS
        if self._paused:
            if not controls.take_resume():
                return Status.RUNNING
            self._paused = False
            ctx.events.resumed()
        elif controls.take_pause():
            self._paused = True
            self.feedback_message = "paused"
            ctx.events.paused(f"paused before unit {self.following.index + 1}")
            return Status.RUNNING
        self.feedback_message = ""
        ctx.begin_unit(self.following)
        ctx.events.unit_started(self.following)
        return Status.SUCCESS

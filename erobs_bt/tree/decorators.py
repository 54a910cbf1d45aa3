"""The fault decorator: the one place where the orchestrator's fault latches.

EROBS treats ``TIMEOUT:`` and ``REPLAY_TIMEOUT:`` errors as fatal: the goal aborts,
the orchestrator faults and rejects every later goal, and no further trajectory is
dispatched (batching-and-caches.txt, "Replay failure handling"). A unit that fails
while a cancel is pending faults it too (erobs-semantics.md §3). Every unit that can
fail is wrapped in :class:`FaultOnFatal`; when the unit fails it applies
:func:`fault_of` to the goal's typed failure and latches ``context.fault``, which the
orchestrator turns into FAULTED. Nothing else decides that a fault latches.
"""

from __future__ import annotations

import py_trees
from py_trees.common import Status

from erobs_bt.tree.context import GoalContext


def fault_of(context: GoalContext) -> str | None:
    """The fault a failed unit latches, or ``None`` (the goal just aborts).

    Rules, in order:

    * a goal being halted (``Orchestrator.stop``/``shutdown``) never faults: the failure
      is the halt's own doing;
    * a fatal failure (``TIMEOUT:``/``REPLAY_TIMEOUT:``) faults, with that error as reason;
    * a failure recorded while a cancel was pending faults.
    """
    failure = context.failure
    if failure is None or context.controls.halt is not None:
        return None
    if failure.fatal:
        return str(failure)
    if context.failed_while_canceling:
        return f"unit failed while a cancel was pending: {failure}"
    return None


class FaultOnFatal(py_trees.decorators.Decorator):
    """Pass the child's status through; latch the fault when the child failed and
    :func:`fault_of` says the failure faults.

    Args:
        name: ``FaultOnFatalReplay`` around a ReplayOrPlan selector, ``FaultOnFatal``
            around a single step or a preview plan.
        child: the unit's work.
        context: the goal context holding the typed ``failure``.
    """

    def __init__(self, name: str, child: py_trees.behaviour.Behaviour, context: GoalContext) -> None:
        super().__init__(name=name, child=child)
        self.context = context

    def update(self) -> Status:
        """Latch ``context.fault`` when the child failed with a faulting failure."""
        status = self.decorated.status
        if status == Status.FAILURE and self.context.fault is None:
            fault = fault_of(self.context)
            if fault is not None:
                self.context.fault = fault
                self.feedback_message = f"FAULTED: {fault}"
        return status

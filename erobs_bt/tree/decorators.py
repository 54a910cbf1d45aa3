"""The fault decorator.

EROBS treats ``TIMEOUT:`` and ``REPLAY_TIMEOUT:`` errors as fatal: the goal aborts,
the orchestrator faults and rejects every later goal, and no further trajectory is
dispatched (batching-and-caches.txt, "Replay failure handling"). The decorator wraps
the work of each unit; when the unit fails with a fatal error recorded in the context
it latches ``context.faulted``, which the orchestrator turns into FAULTED.
"""

from __future__ import annotations

import py_trees
from py_trees.common import Status

from erobs_bt.tree.context import GoalContext


class FaultOnFatal(py_trees.decorators.Decorator):
    """Pass the child's status through; latch the fault when it failed fatally.

    Args:
        name: ``FaultOnFatalReplay`` around a ReplayOrPlan selector, ``FaultOnFatal``
            around a single step.
        child: the unit's work.
        context: the goal context holding ``fatal_error``.
    """

    def __init__(self, name: str, child: py_trees.behaviour.Behaviour, context: GoalContext) -> None:
        super().__init__(name=name, child=child)
        self.context = context

    def update(self) -> Status:
        status = self.decorated.status
        if status == Status.FAILURE and self.context.fatal_error is not None:
            self.context.faulted = True
            self.feedback_message = f"FAULTED: {self.context.fatal_error}"
        return status

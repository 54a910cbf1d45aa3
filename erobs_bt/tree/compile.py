"""Compile a script's units into a py_trees behaviour tree.

The shape (docs/design.md §2)::

    Sequence "script" (memory)
    ├── UnitBoundary "before unit 1"
    ├── Sequence "unit 1: batch[3]: moveto, moveto, end_effector" (memory)
    │   └── FaultOnFatalReplay
    │       └── Selector "ReplayOrPlan" (memory)
    │           ├── ReplayCached          miss / ineligible → FAILURE, no dispatch
    │           └── Sequence "fresh" (memory)
    │               ├── ReplayNotFatal?   a fatal replay error never reaches planning
    │               ├── PlanUnit
    │               └── ExecuteSolution
    ├── UnitBoundary "before unit 2"
    ├── Sequence "unit 2: pause"          └── PauseStep
    ├── UnitBoundary "before unit 3"
    ├── Sequence "unit 3: tool_exchange"  └── FaultOnFatal └── Run tool_exchange
    └── UnitBoundary "after last unit"

Why the unit boundaries are nodes: pause and cancel take effect only between units,
so the places where they can take effect are visible in every rendering and snapshot
of the tree, and the orchestrator needs no separate bookkeeping of "between units".

Preview compiles the same shape with ``PlanUnit`` (under ``FaultOnFatal``) as the only
leaf of a motion unit: preview never replays and never executes.

Compile cost: a tree has several behaviours per step (each with a logger and a UUID), so
a 10,000-step script allocates hundreds of thousands of objects, and CPython's cyclic
garbage collector, triggered by allocation counts, runs ever longer passes over them while
they are being built: 59 % of the time at 10,000 steps. None of them is garbage yet, so
:func:`compile_tree` pauses the collector while it builds (:func:`collector_paused`); the
next collection after it sees them once. Compile time is then linear in the steps.

Ticking cost: the root is a :class:`UnitSequence`, a memory sequence that resumes at
its running child by position. py_trees' ``Sequence`` finds the running child with
``list.index`` on every tick, which is linear in the number of units; here a tick
visits only the active path.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

import py_trees
from py_trees.common import Status

from erobs_bt.batching import Unit
from erobs_bt.plan import NotPreviewableError, check_previewable
from erobs_bt.tree.behaviours import (
    ExecuteSolution,
    PauseStep,
    PlanUnit,
    ReplayCached,
    ReplayNotFatal,
    RunSingleStep,
)
from erobs_bt.tree.boundary import UnitBoundary
from erobs_bt.tree.context import GoalContext, Mode
from erobs_bt.tree.decorators import FaultOnFatal

__all__ = [
    "NotPreviewableError",
    "UnitSequence",
    "check_previewable",
    "collector_paused",
    "compile_tree",
    "unit_name",
]

_COLLECTOR_LOCK = threading.Lock()
_COLLECTOR_PAUSES = 0
_COLLECTOR_WAS_ENABLED = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector for the ``with`` block (reference counting
    still frees everything that is not in a cycle).

    Nesting and concurrent use from several threads are safe: the collector is switched
    off by the first pause and back on (if it was on) when the last one ends.
    """
    global _COLLECTOR_PAUSES, _COLLECTOR_WAS_ENABLED
    with _COLLECTOR_LOCK:
        if _COLLECTOR_PAUSES == 0:
            _COLLECTOR_WAS_ENABLED = gc.isenabled()
            gc.disable()
        _COLLECTOR_PAUSES += 1
    try:
        yield
    finally:
        with _COLLECTOR_LOCK:
            _COLLECTOR_PAUSES -= 1
            if _COLLECTOR_PAUSES == 0 and _COLLECTOR_WAS_ENABLED:
                gc.enable()


class UnitSequence(py_trees.composites.Sequence):
    """A memory sequence that resumes its running child in O(1).

    Same semantics as ``py_trees.composites.Sequence(memory=True)``; it keeps the
    index of the current child instead of searching for it on every tick.
    """

    def __init__(self, name: str, children: list[py_trees.behaviour.Behaviour]) -> None:
        super().__init__(name, memory=True, children=children)
        self._index = 0

    @property
    def position(self) -> int:
        """Index of the child running now (or to run next); 0 before the first tick.

        Children before it have finished and are not ticked again in this run, which is
        what lets a viewer re-read only the recent part of the tree
        (:class:`erobs_bt.ros.snapshots.TreeTracker`).
        """
        return self._index

    def tick(self) -> Iterator[py_trees.behaviour.Behaviour]:
        """Tick from the running child (or from the first one when not RUNNING), yielding
        every behaviour ticked; stops at the first child that does not succeed."""
        if self.status != Status.RUNNING:
            for child in self.children:
                if child.status != Status.INVALID:
                    child.stop(Status.INVALID)
            self._index = 0
            self.initialise()
        if not self.children:
            self.current_child = None
            self.stop(Status.SUCCESS)
            yield self
            return
        children = self.children
        while self._index < len(children):
            child = children[self._index]
            self.current_child = child
            for node in child.tick():
                yield node
                if node is child and node.status != Status.SUCCESS:
                    if node.status == Status.RUNNING:
                        self.status = Status.RUNNING
                    else:
                        self.stop(node.status)
                    yield self
                    return
            self._index += 1
        self.stop(Status.SUCCESS)
        yield self

    def stop(self, new_status: Status = Status.INVALID) -> None:
        """As ``Composite.stop``; on a halt (INVALID) only the children up to the current
        one can be active, so only they are stopped (each running leaf then stops the
        motion it started)."""
        if new_status == Status.INVALID:
            self.current_child = None
            for child in self.children[: self._index + 1]:
                if child.status != Status.INVALID:
                    child.stop(Status.INVALID)
            self._index = 0
        self.terminate(new_status)
        self.status = new_status
        self.iterator = self.tick()


def unit_name(unit: Unit) -> str:
    """The name of a unit's sequence: ``unit 3: batch[2]: moveto, end_effector``."""
    return f"unit {unit.index + 1}: {unit.label}"


def _motion_unit(context: GoalContext, unit: Unit) -> py_trees.behaviour.Behaviour:
    if context.mode is Mode.PREVIEW:
        work = FaultOnFatal("FaultOnFatal", PlanUnit(context, unit), context)
        return py_trees.composites.Sequence(unit_name(unit), memory=True, children=[work])
    fresh = py_trees.composites.Sequence(
        "fresh",
        memory=True,
        children=[ReplayNotFatal(context), PlanUnit(context, unit), ExecuteSolution(context, unit)],
    )
    replay_or_plan = py_trees.composites.Selector(
        "ReplayOrPlan", memory=True, children=[ReplayCached(context, unit), fresh]
    )
    guarded = FaultOnFatal("FaultOnFatalReplay", replay_or_plan, context)
    return py_trees.composites.Sequence(unit_name(unit), memory=True, children=[guarded])


def _single_unit(context: GoalContext, unit: Unit) -> py_trees.behaviour.Behaviour:
    step = unit.steps[0]
    if step.task_type == "pause":
        body: py_trees.behaviour.Behaviour = PauseStep(context, unit)
    else:
        body = FaultOnFatal("FaultOnFatal", RunSingleStep(context, unit), context)
    return py_trees.composites.Sequence(unit_name(unit), memory=True, children=[body])


def compile_tree(context: GoalContext) -> UnitSequence:
    """Build the tree for ``context.units`` in ``context.mode``.

    Args:
        context: the goal context; its units, mode and backend are used by the leaves.

    Returns:
        The root ``script`` sequence. Tick it with ``root.tick_once()`` or iterate
        ``root.tick()``; there is no need for ``py_trees.trees.BehaviourTree``.

    Raises:
        NotPreviewableError: preview mode and a step is not moveto/end_effector.
    """
    if context.mode is Mode.PREVIEW:
        check_previewable(context.script)
    with collector_paused():
        return _compile(context)


def _compile(context: GoalContext) -> UnitSequence:
    children: list[py_trees.behaviour.Behaviour] = []
    previous: Unit | None = None
    for unit in context.units:
        children.append(UnitBoundary(context, previous=previous, following=unit))
        if unit.is_motion:
            children.append(_motion_unit(context, unit))
        else:
            children.append(_single_unit(context, unit))
        previous = unit
    children.append(UnitBoundary(context, previous=previous, following=None))
    return UnitSequence("script", children)

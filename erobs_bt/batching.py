"""Group the expanded steps of a script into execution units.

The rule is the specification's (docs/script-format.md, "Units of execution and batching"): with
batching enabled, consecutive ``moveto`` and ``end_effector`` steps form one *batched*
unit, planned and executed as one task; every other step is a *single* unit of its
own; step order never changes. With batching disabled every step is a single unit.

There is deliberately no special break for ePick operations and no vacuum-seal check
between a gripper step and the next move: grouping depends on the task type only.

A unit is the granularity of pause and cancel: both take effect only between units.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from erobs_bt.script.model import Step

#: A batch of at most this many steps is labelled with every step's type, in order.
LABEL_LISTED_STEPS = 12

#: A longer batch is labelled by its runs of one type when it has at most this many runs.
LABEL_LISTED_RUNS = 6


@dataclass(frozen=True)
class Unit:
    """One unit of execution.

    Attributes:
        index: 0-based position among the script's units.
        steps: the steps, in script order (never empty).
        batched: ``True`` for a unit formed by batching (motion steps planned and
            executed as one task); ``False`` for a single-step unit.
    """

    index: int
    steps: tuple[Step, ...]
    batched: bool

    @cached_property
    def is_motion(self) -> bool:
        """True when every step is ``moveto``/``end_effector`` (planned, then executed).

        Computed once per unit (the steps never change): every unit's start asks it.
        """
        return all(step.is_motion for step in self.steps)

    @property
    def first_step(self) -> int:
        """Index of the unit's first step in the expanded script."""
        return self.steps[0].index

    @cached_property
    def label(self) -> str:
        """The feedback ``current_action`` text: ``batch[3]: moveto, moveto, end_effector`` or
        the single step's task type (``pause``, ``tool_exchange``, ``moveto`` …).

        Bounded whatever the batch's size (it names the unit in feedback, tree snapshots,
        run logs and every view): a batch of more than :data:`LABEL_LISTED_STEPS` steps is
        written by runs of one type, ``batch[5000]: moveto ×4999, end_effector``, and when
        it has more than :data:`LABEL_LISTED_RUNS` runs by the count of each type,
        ``batch[900]: moveto ×600, end_effector ×300 (in 600 runs)``. Computed once per
        unit.
        """
        if not self.batched:
            return self.steps[0].script_type
        types = [step.script_type for step in self.steps]
        if len(types) <= LABEL_LISTED_STEPS:
            return f"batch[{len(types)}]: {', '.join(types)}"
        runs: list[list[Any]] = []
        for kind in types:
            if runs and runs[-1][0] == kind:
                runs[-1][1] += 1
            else:
                runs.append([kind, 1])
        if len(runs) <= LABEL_LISTED_RUNS:
            listed = ", ".join(kind if count == 1 else f"{kind} ×{count}" for kind, count in runs)
            return f"batch[{len(types)}]: {listed}"
        totals = Counter(types)
        listed = ", ".join(f"{kind} ×{count}" for kind, count in totals.items())
        return f"batch[{len(types)}]: {listed} (in {len(runs)} runs)"


def group_into_batches(steps: Sequence[Step], *, enabled: bool) -> list[Unit]:
    """Split ``steps`` into units.

    Args:
        steps: the expanded steps of a script, in order.
        enabled: the ``enable_batching`` parameter. ``False`` makes every step a
            single unit.

    Returns:
        The units in order; concatenating their steps gives back ``steps``.
    """
    units: list[Unit] = []
    pending: list[Step] = []

    def flush() -> None:
        if pending:
            units.append(Unit(len(units), tuple(pending), batched=True))
            pending.clear()

    for step in steps:
        if enabled and step.is_motion:
            pending.append(step)
            continue
        flush()
        units.append(Unit(len(units), (step,), batched=False))
    flush()
    return units

"""Which scripts can be previewed (kept free of py_trees, so ``erobs-bt validate`` starts fast).

:mod:`erobs_bt.tree.compile` re-exports both names.
"""

from __future__ import annotations

from erobs_bt.script.model import MOTION_TASK_TYPES, Script


class NotPreviewableError(ValueError):
    """A preview was requested for a script with steps other than moveto/end_effector."""


def check_previewable(script: Script) -> None:
    """Raise when ``script`` cannot be previewed.

    Preview supports only ``moveto`` and ``end_effector`` (batching-and-caches.txt).

    Raises:
        NotPreviewableError: naming every offending step, e.g.
            ``Preview supports only moveto and end_effector steps; not previewable:
            step 4 tool_exchange (tasks[3]), step 9 pause (tasks[8])``.
    """
    offending = [s for s in script.steps if s.task_type not in MOTION_TASK_TYPES]
    if offending:
        listed = ", ".join(
            f"step {s.index + 1} {getattr(s, 'kind', s.task_type)} ({s.path})" for s in offending
        )
        raise NotPreviewableError(
            f"Preview supports only moveto and end_effector steps; not previewable: {listed}"
        )

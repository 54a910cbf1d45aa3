"""erobs_bt: an execution engine for EROBS lab-robot task scripts.

A script is validated and expanded (:mod:`erobs_bt.script`), grouped into units
(:mod:`erobs_bt.batching`), compiled into a py_trees behaviour tree
(:mod:`erobs_bt.tree`) and ticked by the :class:`erobs_bt.orchestrator.Orchestrator`
against a :class:`erobs_bt.backends.base.MotionBackend` (the embedded simulated UR5e
cell by default). See docs/design.md for the map.
"""

from __future__ import annotations

__version__ = "0.1.0"

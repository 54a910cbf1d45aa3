"""The engine's options as one frozen object, built once by a front end and passed whole.

The command line (``erobs-bt run``), the ROS node's parameters
(:meth:`erobs_bt.ros.params.NodeSettings.engine_settings`), the MADSci node and the
Bluesky device each build one :class:`EngineSettings`; :func:`erobs_bt.session.build_engine`
hands it to the backend factory (``speed``), the plan cache (``cache_capacity``,
``cache_max_bytes``) and the :class:`~erobs_bt.orchestrator.Orchestrator`, which hands it to
each goal's :class:`~erobs_bt.tree.context.GoalContext`. No layer copies the options one by
one. The files that shape an engine (cell, poses, backend configuration) are
:class:`erobs_bt.session.EngineConfig`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from erobs_bt.cache import DEFAULT_CAPACITY, DEFAULT_MAX_BYTES
from erobs_bt.timeouts import DEFAULT_TIMEOUTS

__all__ = ["EngineSettings"]


@dataclass(frozen=True)
class EngineSettings:
    """Options of an engine (the ROS parameters of the same names, the CLI options).

    Attributes:
        enable_batching: group consecutive moveto/end_effector steps into one unit.
        cache_capacity: plan-cache capacity (LRU) [entries].
        cache_max_bytes: plan-cache bound on the memory its solutions hold [bytes].
        timeouts: per-type timeouts [s]; a partial table given is completed from
            :data:`erobs_bt.timeouts.DEFAULT_TIMEOUTS` (read-only afterwards).
        plan_ahead: plan the next motion unit while a unit executes (execute mode only;
            :mod:`erobs_bt.tree.context`).
        replay_scene_check: check a cached trajectory against the planning scene as it is
            now before it is replayed (:class:`erobs_bt.tree.behaviours.ReplayCached`); off
            by default, as the specification's replay runs no collision pass; needs a
            backend whose ``checks_replay`` is true.
        speed: simulated-time factor of the sim backend (1.0 = real time; ``inf``: no waits).

    Raises:
        ValueError: a timeout key that is no task type of :data:`DEFAULT_TIMEOUTS`.
    """

    enable_batching: bool = True
    cache_capacity: int = DEFAULT_CAPACITY
    cache_max_bytes: int = DEFAULT_MAX_BYTES
    timeouts: Mapping[str, float] = field(default_factory=lambda: DEFAULT_TIMEOUTS)
    plan_ahead: bool = True
    replay_scene_check: bool = False
    speed: float = 1.0

    def __post_init__(self) -> None:
        """Check the timeout keys and complete the table (frozen: set once, here)."""
        unknown = set(self.timeouts) - set(DEFAULT_TIMEOUTS)
        if unknown:
            raise ValueError(
                f"timeout: unknown task type(s) {sorted(unknown)} (known: {', '.join(DEFAULT_TIMEOUTS)})"
            )
        if self.timeouts is not DEFAULT_TIMEOUTS:
            object.__setattr__(self, "timeouts", MappingProxyType({**DEFAULT_TIMEOUTS, **self.timeouts}))

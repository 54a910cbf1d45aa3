"""Assemble a ready-to-run engine from configuration.

The CLI (``erobs-bt run``/``preview``/``serve``) and the ROS node build the same
thing from the same settings: a cell configuration, a pose registry, a motion
backend, a script parser that knows the cell's grippers and named states, a plan
cache and an orchestrator. :func:`build_engine` is the one place that does it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from erobs_bt.backends.base import MotionBackend
from erobs_bt.backends.factory import create_backend
from erobs_bt.cache import DEFAULT_CAPACITY, PlanCache
from erobs_bt.orchestrator import SHUTDOWN_REASON, Orchestrator, OrchestratorListener
from erobs_bt.script.macros import VisionTargets
from erobs_bt.script.model import Script
from erobs_bt.script.parse import parse_script
from erobs_bt.script.poses import PoseRegistry
from erobs_bt.tree.context import DEFAULT_TIMEOUTS


@dataclass(frozen=True)
class EngineConfig:
    """Everything that shapes an engine (the ROS parameters, the CLI options).

    Attributes:
        backend: ``sim`` (default) or ``scripted``.
        cell: cell YAML; ``None`` for the packaged ``config/cell.yaml``.
        poses: pose-registry YAML (degrees); ``None`` for none.
        faults: fault-injection YAML for the sim backend; ``None`` for none.
        speed: simulated-time factor (1.0 = real time).
        enable_batching: group consecutive moveto/end_effector steps.
        cache_capacity: plan-cache capacity (LRU).
        timeouts: per-type timeouts [s] overriding :data:`DEFAULT_TIMEOUTS`.
    """

    backend: str = "sim"
    cell: Path | None = None
    poses: Path | None = None
    faults: Path | None = None
    speed: float = 1.0
    enable_batching: bool = True
    cache_capacity: int = DEFAULT_CAPACITY
    timeouts: Mapping[str, float] = field(default_factory=dict)


@dataclass
class Engine:
    """An assembled engine: the orchestrator and the parts it was built from."""

    config: EngineConfig
    backend: MotionBackend
    registry: PoseRegistry | None
    orchestrator: Orchestrator

    def parse(self, text: str | bytes) -> Script:
        """Parse a script exactly as goals are parsed (same registry, cell names)."""
        return self.orchestrator.parser(text if isinstance(text, str) else text.decode())

    def close(self, reason: str = SHUTDOWN_REASON) -> None:
        """Halt the running goal (it aborts with ``SHUTDOWN: <reason>``), then stop the goal
        thread and the backend."""
        self.orchestrator.shutdown(reason=reason)
        shutdown = getattr(self.backend, "shutdown", None)
        if callable(shutdown):
            shutdown()


def build_engine(config: EngineConfig, *, listener: OrchestratorListener | None = None) -> Engine:
    """Build an :class:`Engine`.

    Raises:
        ScriptError: the pose registry or ``config/vision_targets.yaml`` is invalid
            (message names file and key).
        ValueError: the cell or fault configuration is invalid, or the backend is unknown.
    """
    registry = PoseRegistry.load(config.poses) if config.poses is not None else None
    backend = create_backend(config.backend, cell=config.cell, speed=config.speed, faults=config.faults)
    # Loaded once per engine, not on every parse of a script that uses a macro.
    vision_targets = VisionTargets.default()
    cell = getattr(backend, "cell", None)
    if cell is not None:
        parser = functools.partial(
            parse_script,
            registry=registry,
            vision_targets=vision_targets,
            grippers=tuple(cell.grippers),
            named_states=tuple(cell.named_states),
        )
    else:
        parser = functools.partial(parse_script, registry=registry, vision_targets=vision_targets)
    unknown = set(config.timeouts) - set(DEFAULT_TIMEOUTS)
    if unknown:
        raise ValueError(
            f"timeout: unknown task type(s) {sorted(unknown)} (known: {', '.join(DEFAULT_TIMEOUTS)})"
        )
    orchestrator = Orchestrator(
        backend,
        parser=parser,
        enable_batching=config.enable_batching,
        cache=PlanCache(config.cache_capacity),
        timeouts=config.timeouts,
        listener=listener,
    )
    return Engine(config, backend, registry, orchestrator)

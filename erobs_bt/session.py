"""Assemble a ready-to-run engine from configuration.

The CLI (``erobs-bt run``/``preview``/``serve``) and the ROS node build the same
thing from the same settings: a cell configuration, a pose registry, a motion
backend, the script parser configured from the cell (:class:`erobs_bt.plan.ScriptParser`,
the same one ``erobs-bt validate`` uses), a plan cache and an orchestrator.
:func:`build_engine` is the one place that does it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from erobs_bt.backends.base import MotionBackend
from erobs_bt.backends.factory import create_backend
from erobs_bt.cache import DEFAULT_CAPACITY, DEFAULT_MAX_BYTES, PlanCache
from erobs_bt.orchestrator import SHUTDOWN_REASON, Orchestrator, OrchestratorListener
from erobs_bt.plan import GoalPlan, ScriptParser, plan_goal
from erobs_bt.script.model import Script
from erobs_bt.script.poses import PoseRegistry
from erobs_bt.tree.context import DEFAULT_TIMEOUTS


@dataclass(frozen=True)
class EngineConfig:
    """Everything that shapes an engine (the ROS parameters, the CLI options).

    Attributes:
        backend: ``sim`` (default), ``ros2_control``, ``moveit`` or ``scripted``.
        cell: cell YAML; ``None`` for the packaged ``config/cell.yaml``.
        hardware: the ``ros2_control`` backend's hardware YAML; ``None`` for the
            packaged ``config/ur5e_ros2_control.yaml``.
        poses: pose-registry YAML (degrees); ``None`` for none.
        faults: fault-injection YAML for the sim backend; ``None`` for none.
        speed: simulated-time factor (1.0 = real time).
        enable_batching: group consecutive moveto/end_effector steps.
        cache_capacity: plan-cache capacity (LRU).
        cache_max_bytes: plan-cache bound on the memory its solutions hold [bytes].
        timeouts: per-type timeouts [s] overriding :data:`DEFAULT_TIMEOUTS`.
        plan_ahead: plan the next motion unit while a unit executes (the orchestrator's
            ``plan_ahead``).
        replay_scene_check: check a cached trajectory against the planning scene before it
            is replayed (the orchestrator's ``replay_scene_check``); needs a backend whose
            ``checks_replay`` is true.
        moveit: the ``moveit`` backend's YAML; ``None`` for the packaged ``config/moveit.yaml``.
        ros_namespace: the namespace of a backend's own ROS node (the ``ros2_control``
            backend's link; the ``erobs_bt`` node gives its own); ``None``: ``/``.
    """

    backend: str = "sim"
    cell: Path | None = None
    poses: Path | None = None
    faults: Path | None = None
    hardware: Path | None = None
    moveit: Path | None = None
    speed: float = 1.0
    enable_batching: bool = True
    cache_capacity: int = DEFAULT_CAPACITY
    cache_max_bytes: int = DEFAULT_MAX_BYTES
    timeouts: Mapping[str, float] = field(default_factory=dict)
    plan_ahead: bool = True
    replay_scene_check: bool = False
    ros_namespace: str | None = None


@dataclass
class Engine:
    """An assembled engine: the orchestrator and the parts it was built from."""

    config: EngineConfig
    backend: MotionBackend
    registry: PoseRegistry | None
    orchestrator: Orchestrator

    def parse(self, text: str | bytes) -> Script:
        """Parse a script exactly as goals are parsed (same registry, cell vocabulary).

        Raises:
            ScriptError: the script is invalid.
        """
        return self.plan(text).script

    def plan(self, text: str | bytes, *, preview: bool = False) -> GoalPlan:
        """The goal plan of a script, exactly as :meth:`Orchestrator.submit` makes it.

        Raises:
            ScriptError: the script is invalid.
            erobs_bt.plan.NotPreviewableError: ``preview`` and the script has other steps.
        """
        return plan_goal(
            text,
            parser=self.orchestrator.parser,
            enable_batching=self.config.enable_batching,
            preview=preview,
        )

    def close(self, reason: str = SHUTDOWN_REASON) -> None:
        """Admit no more goals (:meth:`Orchestrator.stop_admitting`), halt the running goal
        (it aborts with ``SHUTDOWN: <reason>``), then stop the goal thread and the backend."""
        self.orchestrator.stop_admitting(reason)
        self.orchestrator.shutdown(reason=reason)
        self.backend.close()


def build_engine(config: EngineConfig, *, listener: OrchestratorListener | None = None) -> Engine:
    """Build an :class:`Engine`.

    Raises:
        ScriptError: the pose registry, the cell's vocabulary or ``config/vision_targets.yaml``
            is invalid (message names file and key).
        ValueError: the cell or fault configuration is invalid, or the backend is unknown.
    """
    # The same files as `erobs-bt validate --cell --poses`: one parser configuration.
    parser = ScriptParser.from_files(cell=config.cell, poses=config.poses)
    backend = create_backend(
        config.backend,
        cell=config.cell,
        speed=config.speed,
        faults=config.faults,
        hardware=config.hardware,
        ros_namespace=config.ros_namespace,
        moveit=config.moveit,
    )
    unknown = set(config.timeouts) - set(DEFAULT_TIMEOUTS)
    if unknown:
        raise ValueError(
            f"timeout: unknown task type(s) {sorted(unknown)} (known: {', '.join(DEFAULT_TIMEOUTS)})"
        )
    orchestrator = Orchestrator(
        backend,
        parser=parser,
        enable_batching=config.enable_batching,
        cache=PlanCache(config.cache_capacity, max_bytes=config.cache_max_bytes),
        timeouts=config.timeouts,
        listener=listener,
        plan_ahead=config.plan_ahead,
        replay_scene_check=config.replay_scene_check,
    )
    return Engine(config, backend, parser.registry, orchestrator)

"""Assemble a ready-to-run engine from configuration.

The CLI (``erobs-bt run``/``preview``/``serve``) and the ROS node build the same
thing from the same settings: a cell configuration, a pose registry, a motion
backend, the script parser configured from the cell (:class:`erobs_bt.plan.ScriptParser`,
the same one ``erobs-bt validate`` uses), a plan cache and an orchestrator.
:func:`build_engine` is the one place that does it. It reads the cell once
(:func:`erobs_bt.world.config.load_cell`) and hands the :class:`~erobs_bt.world.cell.CellConfig`
to the parser (its vocabulary) and the backend factory; :attr:`Engine.cell` keeps it (its
``source`` is the file it came from).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from erobs_bt.backends.base import MotionBackend
from erobs_bt.backends.factory import create_backend
from erobs_bt.cache import PlanCache
from erobs_bt.orchestrator import SHUTDOWN_REASON, Orchestrator, OrchestratorListener
from erobs_bt.plan import GoalPlan, ScriptParser, plan_goal
from erobs_bt.script.model import Script
from erobs_bt.script.poses import PoseRegistry
from erobs_bt.settings import EngineSettings
from erobs_bt.world.cell import DEFAULT_CELL_PATH, CellConfig
from erobs_bt.world.config import load_cell


@dataclass(frozen=True)
class EngineConfig:
    """Everything that shapes an engine (the ROS parameters, the CLI options): the backend,
    its files, and the engine's options as one :class:`~erobs_bt.settings.EngineSettings`.

    Attributes:
        backend: ``sim`` (default), ``ros2_control``, ``moveit`` or ``scripted``.
        cell: cell YAML; ``None`` for the packaged ``config/cell.yaml``.
        hardware: the ``ros2_control`` backend's hardware YAML; ``None`` for the
            packaged ``config/ur5e_ros2_control.yaml``.
        poses: pose-registry YAML (degrees); ``None`` for none.
        faults: fault-injection YAML for the sim backend; ``None`` for none.
        settings: the engine's options (batching, plan cache, timeouts, plan-ahead, the
            replay's scene check, the sim backend's speed), passed whole to the backend
            factory and the orchestrator.
        moveit: the ``moveit`` backend's YAML; ``None`` for the packaged ``config/moveit.yaml``.
        ros_namespace: the namespace of a backend's own ROS node (the ``ros2_control``
            backend's link; the ``erobs_bt`` node gives its own); ``None``: ``/``.
        docks: what the operator said the docks hold at start (``--docks``, the node's
            ``docks``; already applied to ``cell``), dock number → tool (``None``: empty);
            the orchestrator refuses a first goal whose start tool they hold in a dock.
            ``None``: not stated (the cell file's docks).
    """

    backend: str = "sim"
    cell: Path | None = None
    poses: Path | None = None
    faults: Path | None = None
    hardware: Path | None = None
    moveit: Path | None = None
    ros_namespace: str | None = None
    settings: EngineSettings = field(default_factory=EngineSettings)
    docks: Mapping[int, str | None] | None = None


@dataclass
class Engine:
    """An assembled engine: the orchestrator and the parts it was built from.

    Attributes:
        config: what it was built from.
        cell: the cell, read once (``cell.source``: its file).
        backend: the motion backend built for it.
        registry: the pose registry, or ``None``.
        orchestrator: runs the goals.
    """

    config: EngineConfig
    cell: CellConfig
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
            enable_batching=self.config.settings.enable_batching,
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
        ScriptError: the pose registry or ``config/vision_targets.yaml`` is invalid (message
            names file and key).
        ValueError: the cell (:class:`~erobs_bt.world.cell.CellConfigError`: its vocabulary
            too) or the fault configuration is invalid, or the backend is unknown.
    """
    # The cell read once; the parser is the one `erobs-bt validate --cell --poses` makes.
    cell = load_cell(config.cell if config.cell is not None else DEFAULT_CELL_PATH)
    parser = ScriptParser.for_cell(cell, poses=config.poses)
    backend = create_backend(
        config.backend,
        cell=cell,
        speed=config.settings.speed,
        faults=config.faults,
        hardware=config.hardware,
        ros_namespace=config.ros_namespace,
        moveit=config.moveit,
    )
    settings = config.settings
    orchestrator = Orchestrator(
        backend,
        parser=parser,
        settings=settings,
        cache=PlanCache(settings.cache_capacity, max_bytes=settings.cache_max_bytes),
        listener=listener,
        stated_docks=config.docks,
    )
    return Engine(config, cell, backend, parser.registry, orchestrator)

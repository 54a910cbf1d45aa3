"""The ``erobs_bt`` ROS 2 node: a thin node around the orchestrator.

Like the Nav2 behaviour-tree navigator around its ``BtActionServer``, and py_trees_ros's
tree node beside its publishers, the node owns no execution logic. It is three parts:

* :class:`ErobsBtNode` (this module): the parameters (declared from
  :data:`erobs_bt.ros.params.PARAMETERS`, checked when set), start-up (the engine from
  :func:`erobs_bt.session.build_engine`, exactly as for the CLI) and shutdown;
* the goal server (:mod:`erobs_bt.ros.node.goal_server`): the actions and the Trigger
  services, a loop around the engine that admits a goal (the orchestrator decides),
  runs it, and reports its feedback and result;
* the publisher bridge (:mod:`erobs_bt.ros.node.bridge`): the orchestrator's state, progress,
  previews and trees, the joint states, the py_trees_ros snapshot streams and the run
  logs' bags, as ROS topics.

Every text that reaches a message or the log goes through
:func:`erobs_bt.ros.convert.ros_text` (valid UTF-8, no NUL), so no goal's text can make
rclpy raise while it serialises a message.

Threading. The orchestrator runs each goal on its own goal thread. The node spins a
:class:`rclpy.executors.MultiThreadedExecutor`: the action servers in a reentrant
callback group (the execute callback of a running goal blocks its worker thread), the
Trigger services in mutually exclusive groups (stop in one of its own), each timer in a
group of its own (:mod:`erobs_bt.ros.node.goal_server`, :mod:`erobs_bt.ros.node.bridge`). So
``executor_threads`` must be at least 3 (one blocked execute callback, one service, one
timer); the default is 4.

Shutdown (SIGINT/SIGTERM): rclpy's own signal handlers are disabled, because they shut
the context down before the node could publish its final state. :func:`run` instead
waits for the signal, then :meth:`ErobsBtNode.close` halts the goal and stops the
robot (:meth:`Orchestrator.shutdown` with the reason ``node shutting down``), waits for
the execute callback to return, stops the timers and the joint-state listener, closes
the backend and publishes the final state; only then the executor is shut down and its
thread joined *before* ``destroy_node`` and ``rclpy.shutdown`` (without the join, rclpy
can abort; docs/ros2-from-pypi.md §3). A goal ended by shutdown is ABORTED with
``error_code`` ``SHUTDOWN`` and a message saying the node is shutting down, running or
paused alike. If the executor thread dies, :func:`run` exits with
:data:`EXIT_EXECUTOR_DIED` so that a supervisor restarts the node.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.context import Context
from rclpy.exceptions import ParameterException
from rclpy.node import Node
from rclpy.parameter import Parameter

from erobs_bt.backends.base import FitsCups, KnowsIfResettable, KnowsSceneOwner, MotionBackend, TracksTools
from erobs_bt.orchestrator import Orchestrator, Result
from erobs_bt.plan import describe_pose_registry
from erobs_bt.ros.node.bridge import PublisherBridge
from erobs_bt.ros.node.goal_server import CANCELED_OUTSIDE_ROS, SHUTDOWN_REASON, GoalServer
from erobs_bt.ros.node.nodelog import NodeLog
from erobs_bt.ros.node.runlogs import NodeRunLogs
from erobs_bt.ros.params import (
    ENDPOINTS,
    NODE_NAME,
    PARAMETERS,
    SPECS,
    NodeSettings,
    ParameterSpec,
    coerce_parameter,
    endpoints_doc,
    parameters_doc,
)
from erobs_bt.ros.process import EXIT_CONFIG, EXIT_EXECUTOR_DIED, serve
from erobs_bt.script.vocabulary import dock_contents_text
from erobs_bt.session import EngineConfig, build_engine
from erobs_bt.world.beamline import beamline_warnings

__all__ = [
    "CANCELED_OUTSIDE_ROS",
    "EXIT_CONFIG",
    "EXIT_EXECUTOR_DIED",
    "NODE_NAME",
    "PARAMETERS",
    "SHUTDOWN_REASON",
    "ErobsBtNode",
    "NodeSettings",
    "ParameterSpec",
    "engine_config",
    "main",
    "run",
]

# Exit codes of :func:`main`: EXIT_CONFIG (2) when a parameter or a configuration file is
# invalid, EXIT_EXECUTOR_DIED (3) when the executor thread died (erobs_bt.ros.process).


def engine_config(settings: NodeSettings, *, namespace: str | None = None) -> EngineConfig:
    """The :class:`~erobs_bt.session.EngineConfig` the node's parameters describe; a
    backend's own ROS node goes into ``namespace`` (the node's); an empty ``poses_file`` is
    the cell's default registry (:func:`~erobs_bt.plan.pose_registry_file`)."""
    cell, poses = settings.script_files()  # erobs_bt's format or a beamline file; the registry
    return EngineConfig(
        ros_namespace=namespace,
        backend=settings.backend,
        cell=cell,
        poses=poses,
        faults=Path(settings.faults_file) if settings.faults_file else None,
        hardware=Path(settings.hardware_config) if settings.hardware_config else None,
        moveit=Path(settings.moveit_config) if settings.moveit_config else None,
        settings=settings.engine_settings(),
        docks=settings.dock_contents(),
    )


_CLASS_DOC = """Executes EROBS task scripts on a motion backend through the orchestrator.

One goal at a time, whichever API it comes through; pause and cancel take effect at unit
boundaries (docs/behaviour.md §3). ``~`` is the node's name (``erobs_bt``); every name
is relative and changed by remapping (``-r __ns:=/cell2``, ``-r joint_states:=...``),
so several cells run side by side in one domain.

Parameters (from :data:`erobs_bt.ros.params.PARAMETERS`; ``config/erobs_bt.yaml`` is
rendered from the same table; integers are accepted for doubles):

{parameters}
Names (:data:`erobs_bt.ros.params.ENDPOINTS`):

{endpoints}

The native action ``~/execute`` (``ExecuteScript``) and EROBS's ``beambot_execution``
(``MTCExecution``) run (or, with ``dry_run``, preview) a script; a goal is rejected
while another runs or the node is FAULTED. Feedback per unit and phase (at most
``feedback_rate`` a second within a unit; every unit's last one and every HIT or MISS
decision are sent); status
SUCCEEDED, ABORTED or CANCELED. A cancel request is accepted and honoured at the next
unit boundary (at once while paused); the action's cancel-all request (zero goal id
and stamp, as ``erobs-bt cancel`` and EROBS's ``stop_robot`` send) cancels whatever runs.
``~/tree_snapshot`` carries a goal's whole tree first, then only what changed
(:mod:`erobs_bt.ros.snapshots`); py_trees_ros viewers open snapshot streams
(:mod:`erobs_bt.ros.node.pytrees_streams`). Every goal gets a JSON Lines run log
(:mod:`erobs_bt.ros.node.runlogs`). rclpy's parameter services (``~/describe_parameters``,
``~/get_parameters``, ``~/set_parameters``, …) serve the parameters; all are read-only
except the py_trees_ros ``default_snapshot_*`` ones and rclpy's ``use_sim_time`` (declared
by every rclpy node; true takes the node's clock from ``/clock``).

The engine (backend, pose registry, parser, plan cache, orchestrator) is assembled by
:func:`erobs_bt.session.build_engine`, exactly as for the CLI. Around it, ``goal_server``
(:class:`~erobs_bt.ros.node.goal_server.GoalServer`) serves the actions and the Trigger services,
and ``bridge`` (:class:`~erobs_bt.ros.node.bridge.PublisherBridge`) publishes the topics; the
node itself keeps the parameters, start-up and shutdown.

Args:
    context: the rclpy context (default: the global one).
    parameter_overrides: initial parameter values (as ``-p`` would give).
    node_name: the node's name (default ``erobs_bt``).
    namespace: the node's namespace (default: from ``__ns`` remapping, else ``/``).

Raises:
    ValueError: a parameter is out of range or a configuration file is invalid.
    OSError: a configuration file cannot be read.
"""


class ErobsBtNode(Node):
    __doc__ = _CLASS_DOC.format(parameters=parameters_doc(), endpoints=endpoints_doc())

    def __init__(
        self,
        *,
        context: Context | None = None,
        parameter_overrides: Sequence[Parameter[Any]] = (),
        node_name: str = NODE_NAME,
        namespace: str | None = None,
    ) -> None:
        try:
            self._construct(context, parameter_overrides, node_name, namespace)
        except BaseException:
            self._abandon_construction()
            raise

    def _abandon_construction(self) -> None:
        """Undo a construction that raised (a missing poses file, a bad parameter): stop the
        threads it started (feedback pump, run-log writer), close the engine and destroy the
        node, so that nothing keeps the node alive and its DDS participant leaves now, while
        the context is up. Before, the two threads kept the half-built node (and its
        participant) alive into the interpreter's and Fast DDS's own teardown at exit, the
        one thing an early exit did differently from a normal one; a node that should have
        exited with its clean error (status 2) once died of a segmentation fault there."""
        server = self.__dict__.get("goal_server")
        if server is not None:
            with contextlib.suppress(Exception):
                server.close_feedback()
        parts = ("scene", "run_logs", "engine", "erobs")
        for part in (self.__dict__.get(name) for name in parts):
            if part is not None:
                with contextlib.suppress(Exception):
                    part.close()
        with contextlib.suppress(Exception):  # also when rclpy's Node.__init__ itself failed
            self.destroy_node()

    def _construct(
        self,
        context: Context | None,
        parameter_overrides: Sequence[Parameter[Any]],
        node_name: str,
        namespace: str | None,
    ) -> None:
        super().__init__(
            node_name, context=context, namespace=namespace, parameter_overrides=list(parameter_overrides)
        )
        self._declare_parameters()
        self.settings = NodeSettings.from_values(
            {spec.name: self.get_parameter(spec.name).value for spec in PARAMETERS}
        )
        settings = self.settings
        self._log = NodeLog(self)
        self._closing = threading.Event()
        self._service_group = MutuallyExclusiveCallbackGroup()
        self.run_logs = (
            NodeRunLogs(
                settings.run_log_folder(), on_error=self._log.warning, snapshot_rate=settings.snapshot_rate
            )
            if settings.run_logs
            else None
        )
        config = engine_config(settings, namespace=self.get_namespace())
        self.engine = build_engine(config)
        self.get_logger().info(
            describe_pose_registry(
                config.cell, settings.poses_file or None, option="the poses_file parameter"
            )
        )
        for warning in beamline_warnings(config.cell):  # a missing poses_file: an empty registry
            self.get_logger().warning(warning)
        self.backend: MotionBackend = self.engine.backend
        self.orchestrator: Orchestrator = self.engine.orchestrator
        docks = self.backend.dock_contents()
        if docks is not None:
            self.get_logger().info(
                f"docks at start: {dock_contents_text(docks)}"
                + (" (the docks parameter)" if settings.docks else " (the cell's)")
            )
        self._fit_cup(settings.cup_profile)

        self.erobs: Any = None
        ErobsApi = _optional("erobs_bt.ros.node.erobs_api", "ErobsApi", self) if settings.erobs_api else None
        if ErobsApi is not None:
            self.erobs = ErobsApi(
                self,
                self.orchestrator,
                current_gripper=self.backend.current_gripper,
                feedback_period=settings.erobs_api_feedback_period,
                callback_group=self._service_group,
                epick_status=self._simulated_epick_status(),
            )
        self.bridge = PublisherBridge(
            self,
            self.orchestrator,
            settings=settings,
            log=self._log,
            closing=self._closing,
            run_logs=self.run_logs,
            erobs=self.erobs,
            streams_type=_optional("erobs_bt.ros.node.pytrees_streams", "SnapshotStreams", self),
            blackboard_type=_optional("erobs_bt.ros.node.pytrees_streams", "BlackboardStreams", self),
            service_group=self._service_group,
        )
        self.goal_server = GoalServer(
            self,
            self.orchestrator,
            settings=settings,
            log=self._log,
            closing=self._closing,
            run_logs=self.run_logs,
            erobs=self.erobs,
            service_group=self._service_group,
            final_snapshot=self.bridge.final_snapshot,
        )
        # The bridge first: a goal's state and progress are published before its feedback.
        listeners = self.orchestrator.listener
        listeners.add(self.bridge)
        listeners.add(self.goal_server)
        if self.run_logs is not None:
            listeners.add(self.run_logs)
            self.run_logs.attach(  # joint states for the history's replay and the bags
                self.backend,
                rate=settings.joint_state_rate,
                resolve=lambda name: self.resolve_topic_name(name, only_expand=True),
            )
        #: The live planning scene (:mod:`erobs_bt.ros.node.scene`); ``None`` when the backend's
        #: scene belongs to another node (``backend: moveit``: move_group's; the node then serves
        #: none of its names).
        self.scene: Any = None
        owner = self.backend.scene_owner if isinstance(self.backend, KnowsSceneOwner) else None
        if owner is not None:
            self._log.info(f"planning scene: served by {owner} (the backend's scene), not by this node")
        else:
            from erobs_bt.ros.node.scene import NodeScene

            self.scene = NodeScene(
                self, self.backend, self.orchestrator, log=self._log, run_logs=self.run_logs
            )
            listeners.add(self.scene)  # after the run logs: a goal's log is open for its scene record
        #: The py_trees_ros snapshot streams (:mod:`erobs_bt.ros.node.pytrees_streams`), or ``None``.
        self.streams: Any = self.bridge.streams
        #: Where joint states come from: ``"robot"``, ``"listener"`` or ``"timer"``.
        self.joint_state_source = self.bridge.joint_state_source
        self._configure_default_stream()
        self.add_pre_set_parameters_callback(self._coerce_set)
        self.add_on_set_parameters_callback(self._check_set)
        self.add_post_set_parameters_callback(self._apply_set)
        self.bridge.publish_state(self.orchestrator.state, "ready")

    # -- parameters ---------------------------------------------------------------------
    def _declare_parameters(self) -> None:
        # An integer given for a double parameter (-p speed:=20) is taken as a double.
        for name, override in list(self._parameter_overrides.items()):
            value = coerce_parameter(name, override.value)
            if value is not None:
                self._parameter_overrides[name] = Parameter(name, Parameter.Type.DOUBLE, value)
        for spec in PARAMETERS:
            self.declare_parameter(
                spec.name,
                spec.default,
                ParameterDescriptor(
                    description=spec.description,
                    read_only=spec.read_only,
                    additional_constraints=spec.range_text(),
                ),
            )

    @staticmethod
    def _coerce_set(parameters: list[Parameter[Any]]) -> list[Parameter[Any]]:
        """Pre-set callback: an integer for a double parameter becomes a double."""
        out: list[Parameter[Any]] = []
        for parameter in parameters:
            value = coerce_parameter(parameter.name, parameter.value)
            out.append(
                parameter if value is None else Parameter(parameter.name, Parameter.Type.DOUBLE, value)
            )
        return out

    def _check_set(self, parameters: list[Parameter[Any]]) -> SetParametersResult:
        for parameter in parameters:
            spec = SPECS.get(parameter.name)
            if spec is None:
                continue
            try:
                spec.check(parameter.value)
                if parameter.name == "cup_profile":
                    self._cup_problem(str(parameter.value))
            except ValueError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def _apply_set(self, parameters: list[Parameter[Any]]) -> None:
        if any(p.name.startswith("default_snapshot_") for p in parameters):
            self._configure_default_stream()
        for parameter in parameters:
            if parameter.name == "cup_profile":
                self._fit_cup(str(parameter.value))

    def _simulated_epick_status(self) -> Callable[[], int | None] | None:
        """The simulated ePick's object-detection status, when this engine runs the simulation
        itself (a :attr:`~erobs_bt.backends.base.KnowsIfResettable.resettable` backend: the
        embedded cell); ``None`` otherwise: with hardware, or a simulated hardware node, the
        ePick's driver publishes it."""
        backend = self.backend
        simulated = isinstance(backend, KnowsIfResettable) and backend.resettable
        if not simulated or not isinstance(backend, TracksTools):
            return None
        from erobs_bt.world.tools import epick_object_status

        return lambda: epick_object_status(backend.tool_state())

    def _cup_problem(self, cup_profile: str) -> None:
        """Raise ``ValueError`` (naming the parameter) when ``cup_profile`` cannot be fitted:
        no vacuum gripper of the cell has it, or the backend has no suction cups."""
        backend = self.backend
        if not isinstance(backend, FitsCups):
            if cup_profile:
                raise ValueError(
                    f"parameter cup_profile: the {self.settings.backend} backend has no suction cups"
                )
            return
        available = backend.cup_profiles()
        if cup_profile and cup_profile not in available:
            raise ValueError(
                f"parameter cup_profile: Unknown cup profile: {cup_profile} "
                f"(available: {', '.join(available) or 'none'})"
            )

    def _fit_cup(self, cup_profile: str) -> None:
        """The backend fits ``cup_profile`` ('' = the default) from the next goal's start on.

        Raises:
            ValueError: as :meth:`_cup_problem` (at start-up: the node exits with a
                configuration error).
        """
        self._cup_problem(cup_profile)
        if isinstance(self.backend, FitsCups):
            self.backend.set_cup_override(cup_profile)

    def _configure_default_stream(self) -> None:
        if self.streams is None:
            return
        from erobs_bt.ros.node.pytrees_streams import StreamParameters

        value = {
            name: self.get_parameter(name).value
            for name in (
                "default_snapshot_stream",
                "default_snapshot_period",
                "default_snapshot_blackboard_data",
                "default_snapshot_blackboard_activity",
            )
        }
        self.streams.configure_default(
            bool(value["default_snapshot_stream"]),
            StreamParameters(
                snapshot_period=float(value["default_snapshot_period"]) or float("inf"),
                blackboard_data=bool(value["default_snapshot_blackboard_data"]),
                blackboard_activity=bool(value["default_snapshot_blackboard_activity"]),
            ),
        )

    # -- public --------------------------------------------------------------------
    def endpoints(self) -> dict[str, str]:
        """The fully qualified names of the node's actions, services and topics, by key
        (:data:`erobs_bt.ros.params.ENDPOINTS`), for the APIs this node serves."""
        served = {
            "native": self.settings.native_api,
            "erobs": self.erobs is not None,
            "py_trees_ros": self.streams is not None,
            "moveit": self.scene is not None,
        }
        native_services = (
            {"pause", "resume", "stop", "reset_fault", "clear_cache", "reset_simulation"}
            if self.settings.native_api
            else set()
        )
        resolved: dict[str, str] = {}
        for endpoint in ENDPOINTS:
            always = endpoint.key in ("joint_states", "tree_snapshot")
            if not (served[endpoint.api] or always):
                continue
            if endpoint.key == "object_detection_status" and not self.erobs.publishes_epick_status:
                continue
            if (
                endpoint.api == "native"
                and endpoint.kind == "service"
                and endpoint.key not in native_services
            ):
                continue
            if endpoint.kind == "topic":
                resolved[endpoint.key] = self.resolve_topic_name(endpoint.name, only_expand=True)
            else:
                resolved[endpoint.key] = self.resolve_service_name(endpoint.name, only_expand=True)
        return resolved

    def close(self) -> None:
        """Stop accepting goals, cancel the running one, stop motion and publish the final state.

        Call before the executor is shut down (the blocked execute callback returns
        once the goal has ended). Idempotent.
        """
        if not self.goal_server.close():  # no more goals; the running one halted and ended
            return
        self.bridge.close()
        if self.scene is not None:
            self.scene.close()
        if self.erobs is not None:
            self.erobs.close()
        self.engine.close()
        if self.run_logs is not None:
            self.run_logs.close()
        self.goal_server.close_feedback()
        self.bridge.publish_state(self.orchestrator.state, SHUTDOWN_REASON)
        # The process exits right after this: the farewell waits for the acks (bounded).
        self.bridge.wait_for_state_acked(2.0)

    @property
    def last_result(self) -> Result | None:
        """The result of the latest goal, or ``None``."""
        return self.goal_server.last_result

    @property
    def goal_end_gate(self) -> Callable[[str], None] | None:
        """The goal server's :attr:`~erobs_bt.ros.node.goal_server.GoalServer.goal_end_gate`
        (a test's hold on a goal's end, before its terminal status is set)."""
        return self.goal_server.goal_end_gate

    @goal_end_gate.setter
    def goal_end_gate(self, gate: Callable[[str], None] | None) -> None:
        self.goal_server.goal_end_gate = gate


def _optional(module: str, name: str, node: Node) -> Any:
    """``module.name``, or ``None`` (with a warning) when its interface package is not installed.

    beambot_interfaces and py_trees_ros_interfaces come from a ROS installation or from
    ``interfaces/``; without them the node serves the rest of its API.
    """
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        node.get_logger().warning(f"{module} is off: {exc}")
        return None


def run(
    ros_arguments: Sequence[str] = (),
    *,
    on_ready: Callable[[ErobsBtNode], None] | None = None,
) -> int:
    """Run the node until SIGINT or SIGTERM, then shut down cleanly.

    Must be called from the main thread (it installs the signal handlers).

    Args:
        ros_arguments: ROS command-line arguments, e.g.
            ``["--ros-args", "--params-file", "config/erobs_bt.yaml", "-p", "speed:=20.0"]``.
        on_ready: called once the node is spinning (default: print one ``erobs_bt ready``
            line with the action name to stdout).

    Returns:
        0 after a clean shutdown (SIGINT/SIGTERM), :data:`EXIT_CONFIG` when the node could
        not start because of an invalid parameter or configuration file,
        :data:`EXIT_EXECUTOR_DIED` when the executor thread died (the node shuts down
        cleanly, then exits non-zero so that a supervisor restarts it).
    """

    def ready(node: ErobsBtNode, discovery: str) -> None:
        if on_ready is not None:
            on_ready(node)
        else:
            print(
                f"erobs_bt ready: action {node.endpoints().get('execute', '-')} "
                f"(ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}, discovery {discovery})",
                flush=True,
            )

    return serve(
        "erobs_bt",
        ros_arguments,
        ErobsBtNode,
        threads=lambda node: node.settings.executor_threads,
        on_ready=ready,
        start_errors=(ValueError, OSError, ParameterException),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``erobs_bt_node``: ``erobs_bt_node --ros-args --params-file ...``."""
    args = list(sys.argv[1:] if argv is None else argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

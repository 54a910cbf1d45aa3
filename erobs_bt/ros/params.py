"""The node's parameters and names: one table, from which everything else comes.

:data:`PARAMETERS` is the only list of the ``erobs_bt`` node's parameters. From it come

* the declarations (:meth:`ErobsBtNode.__init__` declares each :class:`ParameterSpec`
  with its default, description, range and read-only flag),
* the "Parameters" section of the node class docstring (:func:`parameters_doc`),
* the default params file ``config/erobs_bt.yaml`` (:func:`render_params_file`; a test
  checks that the file equals its rendering), keyed ``/**:`` so it applies under any
  node name and namespace,
* the validated, typed :class:`NodeSettings` the node runs with.

:data:`ENDPOINTS` is the one table of the node's actions, services and topics: relative
names (``~/execute`` is ``<namespace>/<node name>/execute``; ``joint_states`` is
``<namespace>/joint_states``) that ROS remapping changes (``-r __ns:=/cell2``,
``-r joint_states:=/arm/joint_states``), as ROS conventions ask; they are not parameters.

Integer values for double parameters (``-p speed:=20``, ``speed: 20`` in a YAML file) are
accepted: :func:`coerce_parameter` turns them into doubles before the declaration and
before a ``set_parameters`` request is checked.

This module does not import rclpy (the table is plain data, usable by docs and tests).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from erobs_bt.backends.factory import BACKEND_KINDS
from erobs_bt.cache import DEFAULT_CAPACITY, DEFAULT_MAX_BYTES
from erobs_bt.settings import EngineSettings
from erobs_bt.timeouts import DEFAULT_TIMEOUTS, PLANNING_STEPS_PER_TIMEOUT, TIMEOUT_USES

#: The node's default name (``~`` in the names below).
NODE_NAME = "erobs_bt"

Value = bool | int | float | str


@dataclass(frozen=True)
class ParameterSpec:
    """One ROS parameter of the node.

    Attributes:
        name: the parameter name (dots group it in YAML: ``timeout.moveto``).
        default: its default; the type of the default is the parameter's type.
        description: what it means, with its unit in brackets (``[s]``, ``[Hz]``).
        read_only: fixed after start-up (most are: they shape the engine).
        minimum: the smallest allowed value of a number, or ``None``.
        minimum_open: the minimum itself is not allowed (``> minimum``).
        choices: the allowed values of a string, or ``()`` for any.
        section: the heading it is listed under in the docstring and the YAML file.
    """

    name: str
    default: Value
    description: str
    read_only: bool = True
    minimum: float | None = None
    minimum_open: bool = False
    choices: tuple[str, ...] = ()
    section: str = "engine"

    @property
    def type_name(self) -> str:
        """``bool``, ``int``, ``double`` or ``string``."""
        if isinstance(self.default, bool):
            return "bool"
        if isinstance(self.default, int):
            return "int"
        if isinstance(self.default, float):
            return "double"
        return "string"

    def check(self, value: object) -> Value:
        """Validate ``value`` for this parameter; an int is accepted for a double.

        Returns:
            The value with the parameter's type.

        Raises:
            ValueError: naming the parameter, e.g. ``parameter speed: must be > 0 (got 0.0)``.
        """
        kind = self.type_name
        if kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"parameter {self.name}: must be a bool (got {value!r})")
            return value
        if kind == "string":
            text = str(value)
            if self.choices and text not in self.choices:
                raise ValueError(
                    f"parameter {self.name}: must be one of {', '.join(self.choices)} (got {text!r})"
                )
            return text
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"parameter {self.name}: must be a number (got {value!r})")
        if kind == "int" and not isinstance(value, int):
            raise ValueError(f"parameter {self.name}: must be an integer (got {value!r})")
        number: int | float = value if kind == "int" else float(value)
        if math.isnan(number):
            raise ValueError(f"parameter {self.name}: must be a number (got nan)")
        if self.minimum is not None:
            below = number <= self.minimum if self.minimum_open else number < self.minimum
            if below:
                raise ValueError(f"parameter {self.name}: must be {self.range_text()} (got {number!r})")
        return number

    def range_text(self) -> str:
        """``> 0``, ``>= 3``, ``sim | scripted`` or ``""``."""
        if self.choices:
            return " | ".join(self.choices)
        if self.minimum is None:
            return ""
        bound = int(self.minimum) if self.type_name == "int" else self.minimum
        return f"{'>' if self.minimum_open else '>='} {bound:g}"


def _positive(name: str, default: float, description: str, **extra: Any) -> ParameterSpec:
    return ParameterSpec(name, default, description, minimum=0.0, minimum_open=True, **extra)


def _timeout_specs() -> tuple[ParameterSpec, ...]:
    return tuple(
        _positive(
            f"timeout.{kind}",
            float(seconds),
            (
                f"[s] time allowed to plan a unit, per started {PLANNING_STEPS_PER_TIMEOUT} steps of it; "
                "past it the unit fails with PLANNING_FAILED: (not fatal)"
                if kind == "planning"
                else f"[s] execution timeout of {TIMEOUT_USES[kind]} (EROBS's timeout.{kind}); past it "
                "the unit fails with TIMEOUT: and the orchestrator faults"
            ),
            section="timeouts",
        )
        for kind, seconds in DEFAULT_TIMEOUTS.items()
    )


#: Every parameter of the node, in the order of the params file.
PARAMETERS: tuple[ParameterSpec, ...] = (
    ParameterSpec(
        "backend",
        "sim",
        "motion backend: 'sim' (embedded simulated UR5e cell), 'ros2_control' (a ros2_control arm over "
        "FollowJointTrajectory: ur_robot_driver, or erobs_bt_sim_hardware), 'moveit' (the cell's "
        "move_group plans and executes; config/moveit.yaml) or 'scripted' (test double)",
        choices=BACKEND_KINDS,
    ),
    ParameterSpec("cell_config", "", "cell YAML for the sim backend; '' = the packaged config/cell.yaml"),
    ParameterSpec(
        "docks",
        "",
        "what the docks hold at start, e.g. '1=hande,4=epick' ('3=' for an empty dock; a dock not "
        "named is empty), instead of what cell_config says (a beamline file's dock_number); "
        "'' = the cell's (the CLI's --docks)",
    ),
    ParameterSpec(
        "hardware_config",
        "",
        "ros2_control backend: the cell's ROS interfaces YAML; '' = config/ur5e_ros2_control.yaml",
    ),
    ParameterSpec(
        "moveit_config",
        "",
        "moveit backend: move_group's names and planning settings YAML; '' = config/moveit.yaml",
    ),
    ParameterSpec(
        "poses_file",
        "",
        "pose registry YAML (name: 6 joint angles in degrees); '' = the cell's: the packaged "
        "config/poses.yaml with the packaged cell, else poses.yaml beside cell_config (if any)",
    ),
    _positive("speed", 1.0, "sim playback speed factor (1.0 = real time, 20.0 = 20x faster)"),
    ParameterSpec("faults_file", "", "sim fault-injection YAML; '' = no faults"),
    ParameterSpec(
        "cup_profile",
        "",
        "suction cup fitted on the vacuum gripper at the next goal's start and when a tool_exchange "
        "loads it (EROBS's "
        "cup_profile, set by its MCP set_cup_profile; changes the model revision); "
        "'' = the gripper's default from the cell config",
        read_only=False,
    ),
    ParameterSpec("enable_batching", True, "group consecutive moveto/end_effector steps into one unit"),
    ParameterSpec("cache_capacity", DEFAULT_CAPACITY, "plan cache size (LRU, in memory)", minimum=1),
    ParameterSpec(
        "cache_max_bytes",
        DEFAULT_MAX_BYTES,
        "[bytes] most memory the plan cache's solutions may hold (estimated); least recently used "
        "entries are evicted past it, and a larger solution is not stored",
        minimum=1,
    ),
    ParameterSpec("plan_ahead", True, "plan the next motion unit while a unit executes (hides planning)"),
    ParameterSpec(
        "replay_scene_check",
        False,
        "before a cache HIT is replayed, check its trajectory densely against the planning scene as "
        "it is now; a collision refuses the replay (SCENE_CHANGED, non-fatal: the batch is planned "
        "afresh once). Off by default: the specification's replay runs no collision pass. Needs the "
        "embedded planner (backend sim or ros2_control)",
    ),
    *_timeout_specs(),
    ParameterSpec(
        "run_logs",
        True,
        "write a JSON Lines run log per goal (the CLI's format) and, beside it, the goal as a "
        "ROS 2 bag (<same name>.mcap: joint states, state, feedback, tree snapshots)",
        section="run logs",
    ),
    ParameterSpec(
        "run_log_dir",
        "",
        "folder of the run logs, one <UTC time>_<goal id>_<script>.jsonl per goal; "
        "'' = $EROBS_BT_LOG_DIR, else ~/.local/state/erobs_bt/runs",
        section="run logs",
    ),
    ParameterSpec(
        "native_api",
        True,
        "serve the native API (~/execute, ~/pause, ~/resume, ~/stop, ~/reset_fault, ~/clear_cache, "
        "~/execution_state, ~/current_gripper, ~/preview_trajectory)",
        section="interfaces",
    ),
    ParameterSpec(
        "erobs_api",
        True,
        "also serve EROBS's beambot API (beambot_execution, beambot/pause|resume|execution_state|"
        "current_gripper|preview_trajectory) for its GUI, MCP server and Bluesky wrapper",
        section="interfaces",
    ),
    _positive(
        "erobs_api_feedback_period",
        0.5,
        "[s] while paused, the beambot_execution feedback is republished this often (as EROBS does)",
        section="interfaces",
    ),
    _positive(
        "feedback_rate",
        50.0,
        "[Hz] most action feedback messages per second within a unit; a newer feedback replaces "
        "a waiting one of its unit, but every unit's last feedback and every HIT/MISS cache "
        "decision are sent",
        section="interfaces",
    ),
    _positive(
        "snapshot_rate",
        10.0,
        "[Hz] most ~/tree_snapshot updates and snapshot-stream messages per second "
        "(the first and final snapshot of a goal are always sent)",
        section="tree snapshots",
    ),
    ParameterSpec(
        "snapshot_json",
        True,
        "also fill TreeSnapshot.tree_json in full snapshots (for viewers without the message types)",
        section="tree snapshots",
    ),
    ParameterSpec(
        "default_snapshot_stream",
        False,
        "py_trees_ros: publish the default snapshot stream ~/snapshots",
        read_only=False,
        section="tree snapshots",
    ),
    ParameterSpec(
        "default_snapshot_period",
        2.0,
        "py_trees_ros: [s] the default stream republishes an unchanged tree this often (0 = only on change)",
        read_only=False,
        minimum=0.0,
        section="tree snapshots",
    ),
    ParameterSpec(
        "default_snapshot_blackboard_data",
        True,
        "py_trees_ros: the default stream carries the goal context as blackboard key/values",
        read_only=False,
        section="tree snapshots",
    ),
    ParameterSpec(
        "default_snapshot_blackboard_activity",
        False,
        "py_trees_ros: the default stream carries blackboard activity (erobs_bt has none to report)",
        read_only=False,
        section="tree snapshots",
    ),
    _positive(
        "joint_state_rate",
        50.0,
        "[Hz] joint_states messages per second while moving (sim: on the controller's clock; "
        "at rest it repeats the state at its idle rate, 50 Hz)",
        section="node",
    ),
    ParameterSpec(
        "executor_threads", 4, "worker threads of the MultiThreadedExecutor", minimum=3, section="node"
    ),
    _positive("shutdown_timeout", 10.0, "[s] wait for the running unit to stop on shutdown", section="node"),
)

SPECS: Mapping[str, ParameterSpec] = MappingProxyType({spec.name: spec for spec in PARAMETERS})


@dataclass(frozen=True)
class Endpoint:
    """One action, service or topic of the node.

    Attributes:
        key: short key (``execute``, ``pause``, …), also the client's name for it.
        name: the relative name the node uses (remappable).
        kind: ``action``, ``service`` or ``topic``.
        type_name: the interface type, e.g. ``std_srvs/srv/Trigger``.
        api: ``native``, ``erobs`` or ``py_trees_ros`` (which parameter switches it), or
            ``moveit`` (the live planning scene's names: not served with ``backend: moveit``).
        description: what it is for.
    """

    key: str
    name: str
    kind: str
    type_name: str
    api: str
    description: str


#: How the node answers ``~/reset_simulation`` (``std_srvs/srv/Empty`` has an empty
#: response): after a reset it logs INFO ``simulation reset by <who>: <what the cell is>``
#: (``<who>`` is ``service <resolved service name>`` for the service); a refusal is logged
#: WARN ``reset_simulation: reset refused: <why>``. Both reach ``/rosout`` before the
#: response is sent; ``erobs-bt reset-sim`` reads them there.
RESET_SIMULATION_DONE = "simulation reset by "
#: The start of the node's WARN line for a refused ``~/reset_simulation`` (:data:`RESET_SIMULATION_DONE`).
RESET_SIMULATION_REFUSED = "reset_simulation: "

#: History depth of ``~/tree_snapshot``, the node's publisher and every subscriber: a full
#: snapshot is followed by deltas, and a subscriber that misses one waits for the next full
#: snapshot, so keep a few.
SNAPSHOT_DEPTH = 50
#: Action feedback messages kept by the node's feedback publisher (for readers that have not
#: acknowledged them yet) and by the client's reader (until its spin thread takes them),
#: not rclpy's 10. A goal of quick units publishes one feedback per unit, hundreds a second,
#: faster than an rclpy spin step takes them; with 10, 899 of ~1,000 arrived on 1,000
#: one-step units. Depth is no part of QoS matching: every action client still matches.
FEEDBACK_DEPTH = 1000


#: The live planning scene's names (:mod:`erobs_bt.ros.node.scene`), MoveIt's, API ``moveit``:
#: served unless ``backend`` is ``moveit`` (then move_group serves them).
SCENE_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(
        "collision_object",
        "collision_object",
        "topic",
        "moveit_msgs/msg/CollisionObject",
        "moveit",
        "subscribed: add, remove, append or move a collision object of the planning scene's world",
    ),
    Endpoint(
        "planning_scene",
        "planning_scene",
        "topic",
        "moveit_msgs/msg/PlanningScene",
        "moveit",
        "subscribed: a diff of the world (is_diff), or a whole world that replaces it",
    ),
    Endpoint(
        "apply_planning_scene",
        "apply_planning_scene",
        "service",
        "moveit_msgs/srv/ApplyPlanningScene",
        "moveit",
        "apply a planning scene (success false when refused; the reason is logged)",
    ),
    Endpoint(
        "get_planning_scene",
        "get_planning_scene",
        "service",
        "moveit_msgs/srv/GetPlanningScene",
        "moveit",
        "the planning scene: the world's collision objects and the robot state",
    ),
    Endpoint(
        "monitored_planning_scene",
        "monitored_planning_scene",
        "topic",
        "moveit_msgs/msg/PlanningScene",
        "moveit",
        "the whole planning scene after each change (latched)",
    ),
)

#: The node's surface. ``~`` is the node's name, so under ``__ns:=/cell2`` the native
#: execute action is ``/cell2/erobs_bt/execute`` and the EROBS one ``/cell2/beambot_execution``.
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(
        "execute",
        "~/execute",
        "action",
        "erobs_bt_interfaces/action/ExecuteScript",
        "native",
        "run or preview a script",
    ),
    Endpoint(
        "pause", "~/pause", "service", "std_srvs/srv/Trigger", "native", "pause at the next unit boundary"
    ),
    Endpoint("resume", "~/resume", "service", "std_srvs/srv/Trigger", "native", "resume a paused goal"),
    Endpoint(
        "stop",
        "~/stop",
        "service",
        "std_srvs/srv/Trigger",
        "native",
        "stop now: the arm decelerates to rest, the goal aborts (STOPPED), the node stays IDLE",
    ),
    Endpoint(
        "reset_fault",
        "~/reset_fault",
        "service",
        "std_srvs/srv/Trigger",
        "native",
        "clear FAULTED after the operator checked the cell (refused when not faulted)",
    ),
    Endpoint(
        "clear_cache", "~/clear_cache", "service", "std_srvs/srv/Trigger", "native", "drop every cached plan"
    ),
    Endpoint(
        "reset_simulation",
        "~/reset_simulation",
        "service",
        "std_srvs/srv/Empty",
        "native",
        "put the simulated cell back in its initial state (refused while a goal runs, and on a "
        "backend that is not simulated; the answer is the node's log line, see docs)",
    ),
    Endpoint(
        "execution_state",
        "~/execution_state",
        "topic",
        "erobs_bt_interfaces/msg/ExecutionState",
        "native",
        "orchestrator state (latched)",
    ),
    Endpoint(
        "current_gripper",
        "~/current_gripper",
        "topic",
        "std_msgs/msg/String",
        "native",
        "attached gripper (latched)",
    ),
    Endpoint(
        "docks",
        "~/docks",
        "topic",
        "std_msgs/msg/String",
        "native",
        "what the tool changer's docks hold, '1: hande, 2: empty, ...' (latched; a backend that "
        "tracks its docks)",
    ),
    Endpoint(
        "preview_trajectory",
        "~/preview_trajectory",
        "topic",
        "trajectory_msgs/msg/JointTrajectory",
        "native",
        "last preview (latched)",
    ),
    Endpoint(
        "tree_snapshot",
        "~/tree_snapshot",
        "topic",
        "erobs_bt_interfaces/msg/TreeSnapshot",
        "native",
        "tree structure once per goal, then what changed (latched)",
    ),
    Endpoint(
        "joint_states",
        "joint_states",
        "topic",
        "sensor_msgs/msg/JointState",
        "native",
        "arm joint states [rad, rad/s]",
    ),
    Endpoint(
        "beambot_execution",
        "beambot_execution",
        "action",
        "beambot_interfaces/action/MTCExecution",
        "erobs",
        "EROBS's execute action",
    ),
    Endpoint("beambot_pause", "beambot/pause", "service", "std_srvs/srv/Trigger", "erobs", "EROBS pause"),
    Endpoint("beambot_resume", "beambot/resume", "service", "std_srvs/srv/Trigger", "erobs", "EROBS resume"),
    Endpoint(
        "beambot_execution_state",
        "beambot/execution_state",
        "topic",
        "std_msgs/msg/String",
        "erobs",
        "EROBS state text; IDLE once after every goal",
    ),
    Endpoint(
        "beambot_current_gripper",
        "beambot/current_gripper",
        "topic",
        "std_msgs/msg/String",
        "erobs",
        "EROBS gripper (transient local)",
    ),
    Endpoint(
        "beambot_preview_trajectory",
        "beambot/preview_trajectory",
        "topic",
        "moveit_msgs/msg/DisplayTrajectory",
        "erobs",
        "preview for EROBS's GUI (transient local)",
    ),
    Endpoint(
        "object_detection_status",
        "object_detection_status",
        "topic",
        "epick_msgs/msg/ObjectDetectionStatus",
        "erobs",
        "the simulated ePick's status, as its driver publishes it (sim backend, while the ePick is attached)",
    ),
    Endpoint(
        "snapshot_streams_open",
        "~/snapshot_streams/open",
        "service",
        "py_trees_ros_interfaces/srv/OpenSnapshotStream",
        "py_trees_ros",
        "open a snapshot stream",
    ),
    Endpoint(
        "snapshot_streams_close",
        "~/snapshot_streams/close",
        "service",
        "py_trees_ros_interfaces/srv/CloseSnapshotStream",
        "py_trees_ros",
        "close a snapshot stream",
    ),
    Endpoint(
        "snapshot_streams_reconfigure",
        "~/snapshot_streams/reconfigure",
        "service",
        "py_trees_ros_interfaces/srv/ReconfigureSnapshotStream",
        "py_trees_ros",
        "reconfigure a snapshot stream",
    ),
    Endpoint(
        "blackboard_streams_get_variables",
        "~/blackboard_streams/get_variables",
        "service",
        "py_trees_ros_interfaces/srv/GetBlackboardVariables",
        "py_trees_ros",
        "the goal context's blackboard keys (py-trees-blackboard-watcher --list)",
    ),
    Endpoint(
        "blackboard_streams_open",
        "~/blackboard_streams/open",
        "service",
        "py_trees_ros_interfaces/srv/OpenBlackboardStream",
        "py_trees_ros",
        "open a blackboard stream (std_msgs/String, on change)",
    ),
    Endpoint(
        "blackboard_streams_close",
        "~/blackboard_streams/close",
        "service",
        "py_trees_ros_interfaces/srv/CloseBlackboardStream",
        "py_trees_ros",
        "close a blackboard stream",
    ),
    Endpoint(
        "snapshots",
        "~/snapshots",
        "topic",
        "py_trees_ros_interfaces/msg/BehaviourTree",
        "py_trees_ros",
        "the default snapshot stream (latched)",
    ),
    *SCENE_ENDPOINTS,
)

ENDPOINT_NAMES: Mapping[str, str] = MappingProxyType({e.key: e.name for e in ENDPOINTS})


def coerce_parameter(name: str, value: object) -> float | None:
    """The double to use for an integer given to a double parameter, else ``None``."""
    spec = SPECS.get(name)
    if spec is not None and spec.type_name == "double" and type(value) is int:
        return float(value)
    return None


@dataclass(frozen=True)
class NodeSettings:
    """The node's parameters, read at start-up and validated (see :data:`PARAMETERS`).

    ``timeout.<kind>`` parameters are collected in :attr:`timeouts`; every other parameter
    is the attribute of its name.
    """

    backend: str
    cell_config: str
    docks: str
    hardware_config: str
    moveit_config: str
    poses_file: str
    speed: float
    faults_file: str
    cup_profile: str
    enable_batching: bool
    cache_capacity: int
    cache_max_bytes: int
    plan_ahead: bool
    replay_scene_check: bool
    timeouts: Mapping[str, float]
    run_logs: bool
    run_log_dir: str
    native_api: bool
    erobs_api: bool
    erobs_api_feedback_period: float
    feedback_rate: float
    snapshot_rate: float
    snapshot_json: bool
    default_snapshot_stream: bool
    default_snapshot_period: float
    default_snapshot_blackboard_data: bool
    default_snapshot_blackboard_activity: bool
    joint_state_rate: float
    executor_threads: int
    shutdown_timeout: float

    def engine_settings(self) -> EngineSettings:
        """The engine's options these parameters give (built once, passed whole to
        :func:`erobs_bt.session.build_engine`)."""
        return EngineSettings(
            enable_batching=self.enable_batching,
            cache_capacity=self.cache_capacity,
            cache_max_bytes=self.cache_max_bytes,
            timeouts=self.timeouts,
            plan_ahead=self.plan_ahead,
            replay_scene_check=self.replay_scene_check,
            speed=self.speed,
        )

    @staticmethod
    def from_values(values: Mapping[str, Any]) -> NodeSettings:
        """Build from ``{parameter name: value}`` (missing names take their defaults).

        Raises:
            ValueError: a value has the wrong type or is out of range, naming the parameter
                (``parameter speed: must be > 0 (got 0.0)``), or a name is unknown.
        """
        unknown = set(values) - set(SPECS)
        if unknown:
            raise ValueError(f"unknown parameter(s): {', '.join(sorted(unknown))}")
        checked = {spec.name: spec.check(values.get(spec.name, spec.default)) for spec in PARAMETERS}
        timeouts = {
            name.split(".", 1)[1]: float(value)
            for name, value in checked.items()
            if name.startswith("timeout.")
        }
        plain = {name: value for name, value in checked.items() if not name.startswith("timeout.")}
        return NodeSettings(timeouts=MappingProxyType(timeouts), **plain)  # type: ignore[arg-type]

    def script_files(self) -> tuple[Path | None, Path | None]:
        """The node's cell and pose-registry files: ``cell_config`` as a file in erobs_bt's
        cell format (a beamline file compiled, :func:`~erobs_bt.world.beamline.resolve_cell_file`;
        ``None``: the packaged cell) and the registry (an empty ``poses_file``: the cell's
        default, :func:`~erobs_bt.plan.pose_registry_file`). The one place the node decides
        them: its engine (:func:`erobs_bt.ros.node.node.engine_config`) and a MADSci node that
        validates for it (:meth:`erobs_bt.madsci.cells.RosCell.parser`) both call it.

        Raises:
            erobs_bt.world.cell.CellConfigError: the beamline file is unreadable or invalid,
                or the ``docks`` parameter does not fit the cell.
            ValueError: the ``docks`` parameter is malformed (``parameter docks: …``).
        """
        from erobs_bt.plan import pose_registry_file
        from erobs_bt.world.beamline import resolve_cell_file

        docks = self.dock_contents()
        # erobs_bt's format or a beamline file, with the docks' contents at start
        cell = resolve_cell_file(self.cell_config or None, docks=docks)
        return cell, pose_registry_file(cell, self.poses_file or None)

    def dock_contents(self) -> dict[int, str | None] | None:
        """The ``docks`` parameter as dock number → tool (``None``: empty), or ``None`` when
        it is empty (the cell file's docks).

        Raises:
            ValueError: malformed (``parameter docks: …``).
        """
        from erobs_bt.script.vocabulary import parse_dock_contents

        return parse_dock_contents(self.docks, where="parameter docks") if self.docks else None

    def run_log_folder(self) -> Path:
        """The folder run logs go to (``run_log_dir``, else the CLI's default folder)."""
        from erobs_bt.viz.runlog import default_log_dir

        return Path(self.run_log_dir).expanduser() if self.run_log_dir else default_log_dir()


def _sections() -> dict[str, list[ParameterSpec]]:
    sections: dict[str, list[ParameterSpec]] = {}
    for spec in PARAMETERS:
        sections.setdefault(spec.section, []).append(spec)
    return sections


def parameters_doc(indent: str = "    ") -> str:
    """The "Parameters" part of the node's docstring: one bullet per parameter."""
    lines: list[str] = []
    for section, specs in _sections().items():
        lines.append(f"{indent}*{section}*:")
        lines.append("")
        for spec in specs:
            extra = [spec.type_name, f"default ``{_yaml_value(spec.default)}``"]
            if spec.range_text():
                extra.append(spec.range_text())
            if not spec.read_only:
                extra.append("writable")
            lines.append(f"{indent}* **{spec.name}** ({', '.join(extra)}): {spec.description}.")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def endpoints_doc(indent: str = "    ") -> str:
    """The node's names as docstring bullets."""
    return "\n".join(
        f"{indent}* **{e.name}** ({e.kind}, ``{e.type_name}``, {e.api} API): {e.description}."
        for e in ENDPOINTS
    )


def _yaml_value(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return ".inf" if math.isinf(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    return '""' if value == "" else value


def render_params_file() -> str:
    """The default params file (``config/erobs_bt.yaml``), rendered from :data:`PARAMETERS`.

    Keyed ``/**:`` so that it applies to the node under any name and namespace.
    """
    out = [
        "# Parameters of the erobs_bt node, generated from erobs_bt/ros/params.py (PARAMETERS);",
        "# edit the table there and regenerate with `python -m erobs_bt.ros.params > config/erobs_bt.yaml`.",
        "# ROS 2 params-file format:  erobs_bt_node --ros-args --params-file config/erobs_bt.yaml",
        "# '/**' applies it to the node under any node name and namespace (e.g. __ns:=/cell2).",
        "# Units: seconds [s], hertz [Hz]; pose registries hold joint angles in degrees.",
        "# Integers are accepted for double parameters (speed: 20 is speed: 20.0).",
        "/**:",
        "  ros__parameters:",
    ]

    section = ""
    group = ""
    for spec in PARAMETERS:
        if spec.section != section:
            section = spec.section
            out.append(f"    # -- {section} --")
        flags = "" if spec.read_only else " (writable at run time)"
        prefix, _, leaf = spec.name.rpartition(".")
        if prefix and prefix != group:
            out.append(f"    {prefix}:")
        group = prefix
        pad = "      " if prefix else "    "
        out.append(f"{pad}# {spec.description}{flags}")
        out.append(f"{pad}{leaf}: {_yaml_value(spec.default)}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(render_params_file(), end="")

"""What ``launch/erobs_bt.launch.py`` starts, as plain data: its arguments and its nodes.

ROS 2's ``launch`` and ``launch_ros`` are not installable from PyPI (only the unrelated
2017 ``launch`` package is there), so the launch file itself runs only on a machine with
a ROS installation. Everything it decides lives here instead, importable and tested
without ``launch``: :data:`ARGUMENTS` (the one table of launch arguments) and
:func:`node_specs` (the nodes for given argument values). The launch file turns each
:class:`NodeSpec` into a ``launch_ros.actions.Node``; :meth:`NodeSpec.command` gives the
command line ``launch_ros`` runs for it (executable, ``--ros-args``, ``__node`` and
``__ns`` remapping, the params file, overrides, the log level), which the tests run.

Only the arguments given (non-empty) become parameter overrides, so a params file's values
are never replaced by launch defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: (name, default, description) of every launch argument.
ARGUMENTS: tuple[tuple[str, str, str], ...] = (
    ("namespace", "", "node namespace, e.g. cell2 ('' = the root namespace)"),
    ("params_file", "", "node params file ('' = the package's config/erobs_bt.yaml)"),
    ("poses_file", "", "pose registry YAML, degrees (set only when given)"),
    ("cell_config", "", "cell YAML for the sim backend (set only when given)"),
    ("log_level", "info", "ROS log level: debug, info, warn, error"),
    ("use_sim_time", "", "true or false (set only when given)"),
    (
        "hardware",
        "embedded",
        "embedded, sim (start erobs_bt_sim_hardware), ros2_control (a driver runs), moveit (the "
        "cell's move_group runs) or sim_moveit (start erobs_bt_sim_move_group)",
    ),
    ("hardware_config", "", "the cell's ROS interfaces YAML (set only when given)"),
    ("moveit_config", "", "the moveit backend's YAML (set only when given)"),
)
#: The ``hardware`` choices.
HARDWARE = ("embedded", "sim", "ros2_control", "moveit", "sim_moveit")
#: The ``log_level`` choices (rcutils severities).
LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")

PACKAGE = "erobs_bt"
#: Console script → its module (setup.py's entry points).
MODULES = {
    "erobs_bt_node": "erobs_bt.ros.node.node",
    "erobs_bt_sim_hardware": "erobs_bt.doubles.sim_hardware",
    "erobs_bt_sim_move_group": "erobs_bt.doubles.sim_move_group",
}


@dataclass(frozen=True)
class NodeSpec:
    """One node the launch file starts.

    Attributes:
        executable: the console script (``erobs_bt_node``, ``erobs_bt_sim_hardware``).
        name: the node name.
        namespace: its namespace (``""`` for the root).
        params_files: params files, in order.
        overrides: parameter values given as launch arguments (only those given).
        arguments: non-ROS command-line arguments.
        log_level: the ROS log level.
    """

    executable: str
    name: str
    namespace: str
    params_files: tuple[str, ...] = ()
    overrides: Mapping[str, object] = field(default_factory=dict)
    arguments: tuple[str, ...] = ()
    log_level: str = "info"

    def ros_arguments(self) -> list[str]:
        """``--ros-args`` and what follows, as ``launch_ros`` passes them."""
        out = ["--ros-args", "-r", f"__node:={self.name}"]
        if self.namespace:
            out += ["-r", f"__ns:=/{self.namespace.strip('/')}"]
        for path in self.params_files:
            out += ["--params-file", path]
        for name, value in self.overrides.items():
            out += ["-p", f"{name}:={_ros_value(value)}"]
        return [*out, "--log-level", self.log_level]

    @property
    def module(self) -> str:
        """The Python module behind the console script (``python -m`` runs the same)."""
        return MODULES[self.executable]

    def command(self, prefix: Sequence[str] = ()) -> list[str]:
        """The command line; ``prefix`` replaces the console script (e.g.
        ``[sys.executable, "-m", spec.module]``)."""
        return [*(prefix or [self.executable]), *self.arguments, *self.ros_arguments()]


def _ros_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def default_params_file() -> str:
    """The package's ``config/erobs_bt.yaml`` (:func:`erobs_bt.paths.config_file`: the source
    checkout, or the installed ``share/erobs_bt`` found through the ament index).

    Raises:
        FileNotFoundError: erobs_bt's data files are not installed where they are looked for.
    """
    from erobs_bt.paths import config_file

    return str(config_file("erobs_bt.yaml"))


def node_specs(values: Mapping[str, str], *, params_file: str | None = None) -> list[NodeSpec]:
    """The nodes for launch argument ``values`` (missing names take :data:`ARGUMENTS` defaults).

    Args:
        values: argument name → text, as ``name:=value`` gives them.
        params_file: the params file when ``values`` gives none (default:
            :func:`default_params_file`, looked up only then, so a given ``params_file``
            needs no installed share directory).

    Raises:
        ValueError: an unknown argument, or a ``hardware``, ``log_level`` or
            ``use_sim_time`` value that is not one of its choices (naming it).
    """
    known = {name for name, _, _ in ARGUMENTS}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(
            f"unknown launch argument(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    value = {name: values.get(name, default) for name, default, _ in ARGUMENTS}
    hardware = value["hardware"]
    if hardware not in HARDWARE:
        raise ValueError(f"hardware:={hardware}: must be one of {', '.join(HARDWARE)}")
    if value["log_level"] not in LOG_LEVELS:
        raise ValueError(f"log_level:={value['log_level']}: must be one of {', '.join(LOG_LEVELS)}")
    given = ("poses_file", "cell_config")
    overrides: dict[str, object] = {name: value[name] for name in given if value[name]}
    if value["use_sim_time"]:
        flag = value["use_sim_time"].lower()
        if flag not in ("true", "false"):
            raise ValueError(f"use_sim_time:={value['use_sim_time']}: must be true or false")
        overrides["use_sim_time"] = flag == "true"
    if hardware in ("sim", "ros2_control"):
        overrides["backend"] = "ros2_control"
    elif hardware in ("moveit", "sim_moveit"):
        overrides["backend"] = "moveit"
    if value["hardware_config"]:
        overrides["hardware_config"] = value["hardware_config"]
    if value["moveit_config"]:
        overrides["moveit_config"] = value["moveit_config"]
    elif hardware == "sim_moveit":
        # The simulated move_group's cell has no tool hardware: the tools are simulated.
        from erobs_bt.paths import config_file

        overrides["moveit_config"] = str(config_file("moveit_sim.yaml"))
    files = (value["params_file"] or params_file or default_params_file(),)
    namespace, log_level = value["namespace"], value["log_level"]
    nodes: list[NodeSpec] = []
    if hardware == "sim":
        config = ("--config", value["hardware_config"]) if value["hardware_config"] else ()
        nodes.append(
            NodeSpec(
                "erobs_bt_sim_hardware",
                "erobs_bt_sim_hardware",
                namespace,
                arguments=config,
                log_level=log_level,
            )
        )
    if hardware == "sim_moveit":
        nodes.append(NodeSpec("erobs_bt_sim_move_group", "move_group", namespace, log_level=log_level))
    nodes.append(NodeSpec("erobs_bt_node", "erobs_bt", namespace, files, overrides, log_level=log_level))
    return nodes

"""Launch the erobs_bt node: ``ros2 launch erobs_bt erobs_bt.launch.py [arg:=value ...]``.

Arguments (all optional):

* ``namespace`` — the node's namespace, e.g. ``cell2``: every name moves under it
  (``/cell2/erobs_bt/execute``, ``/cell2/joint_states``, ``/cell2/beambot_execution``),
  so several cells run side by side in one ROS domain;
* ``params_file`` — the node's params file (default: the package's
  ``config/erobs_bt.yaml``, keyed ``/**`` so it applies under any namespace);
* ``poses_file``, ``cell_config`` — override those parameters **only when given**;
* ``log_level`` — ``debug``, ``info`` (default), ``warn``, ``error``;
* ``use_sim_time`` — set the parameter only when given (``true``/``false``).

Nothing else is passed as a parameter, so the params file's values are never replaced
by launch defaults. Needs a ROS 2 installation with ``launch`` and ``launch_ros`` (not
installable from PyPI; without them run ``erobs_bt_node --ros-args --params-file
config/erobs_bt.yaml -r __ns:=/cell2`` or ``erobs-bt serve``). The node sets
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` itself unless it is already set.
* ``hardware`` — what moves: ``embedded`` (default: the in-process simulated cell),
  ``sim`` (``erobs_bt_sim_hardware`` is started beside the node, in the same namespace,
  and the node uses the ``ros2_control`` backend against it), ``ros2_control`` (a real
  driver such as ur_robot_driver already runs; the node uses the ``ros2_control`` backend);
* ``hardware_config`` — the cell's ROS interfaces YAML for the ``ros2_control`` backend
  and the hardware node (default: ``config/ur5e_ros2_control.yaml``; set only when given).
"""

from __future__ import annotations

import os
from typing import Any

from ament_index_python.packages import get_package_share_directory
from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

#: (name, default, description) of every launch argument.
ARGUMENTS = (
    ("namespace", "", "node namespace, e.g. cell2 ('' = the root namespace)"),
    ("params_file", "", "node params file ('' = the package's config/erobs_bt.yaml)"),
    ("poses_file", "", "pose registry YAML, degrees (set only when given)"),
    ("cell_config", "", "cell YAML for the sim backend (set only when given)"),
    ("log_level", "info", "ROS log level: debug, info, warn, error"),
    ("use_sim_time", "", "true or false (set only when given)"),
    ("hardware", "embedded", "embedded, sim (start erobs_bt_sim_hardware) or ros2_control (a driver runs)"),
    ("hardware_config", "", "the cell's ROS interfaces YAML (set only when given)"),
)
#: The ``hardware`` choices.
HARDWARE = ("embedded", "sim", "ros2_control")


def _node(context: LaunchContext, *args: Any, **kwargs: Any) -> list[Node]:
    value = {name: LaunchConfiguration(name).perform(context) for name, _, _ in ARGUMENTS}
    params_file = value["params_file"] or os.path.join(
        get_package_share_directory("erobs_bt"), "config", "erobs_bt.yaml"
    )
    overrides: dict[str, object] = {
        name: value[name] for name in ("poses_file", "cell_config") if value[name]
    }
    if value["use_sim_time"]:
        overrides["use_sim_time"] = value["use_sim_time"].lower() in ("true", "1", "yes")
    hardware = value["hardware"]
    if hardware not in HARDWARE:
        raise ValueError(f"hardware:={hardware}: must be one of {', '.join(HARDWARE)}")
    if hardware != "embedded":
        overrides["backend"] = "ros2_control"
    if value["hardware_config"]:
        overrides["hardware_config"] = value["hardware_config"]
    parameters: list[object] = [params_file]
    if overrides:
        parameters.append(overrides)
    nodes: list[Node] = []
    if hardware == "sim":
        config = ["--config", value["hardware_config"]] if value["hardware_config"] else []
        nodes.append(
            Node(
                package="erobs_bt",
                executable="erobs_bt_sim_hardware",
                name="erobs_bt_sim_hardware",
                namespace=value["namespace"],
                output="screen",
                emulate_tty=True,
                arguments=config,
                ros_arguments=["--log-level", value["log_level"]],
            )
        )
    return [
        *nodes,
        Node(
            package="erobs_bt",
            executable="erobs_bt_node",
            name="erobs_bt",
            namespace=value["namespace"],
            output="screen",
            emulate_tty=True,
            parameters=parameters,
            ros_arguments=["--log-level", value["log_level"]],
        ),
    ]


def generate_launch_description() -> LaunchDescription:
    """The erobs_bt node (and for ``hardware:=sim`` the hardware node) with the arguments above."""
    declared = [
        DeclareLaunchArgument(name, default_value=default, description=description)
        for name, default, description in ARGUMENTS
    ]
    return LaunchDescription([*declared, OpaqueFunction(function=_node)])

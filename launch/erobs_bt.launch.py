"""Launch the erobs_bt node: ``ros2 launch erobs_bt erobs_bt.launch.py [arg:=value ...]``.

Arguments (all optional):

* ``namespace`` — the node's namespace, e.g. ``cell2``: every name moves under it
  (``/cell2/erobs_bt/execute``, ``/cell2/joint_states``, ``/cell2/beambot_execution``),
  so several cells run side by side in one ROS domain;
* ``params_file`` — the node's params file (default: the package's
  ``config/erobs_bt.yaml``, keyed ``/**`` so it applies under any namespace, looked up
  only when no ``params_file`` is given: :func:`erobs_bt.paths.config_file`);
* ``poses_file``, ``cell_config`` — override those parameters **only when given**;
* ``log_level`` — ``debug``, ``info`` (default), ``warn``, ``error``;
* ``use_sim_time`` — set the parameter only when given (``true``/``false``).

Nothing else is passed as a parameter, so the params file's values are never replaced
by launch defaults. The arguments and the nodes they give are decided by
:mod:`erobs_bt.ros.node.launching` (importable and tested without ``launch``); this file only
turns them into ``launch_ros`` nodes, whose executables ``launch_ros`` finds in
``<prefix>/lib/erobs_bt/`` of the ament index (a colcon install, or the venv that
``scripts/setup.sh`` makes an ament prefix). Needs ``launch`` and ``launch_ros`` (a ROS 2
installation; not installable from PyPI; without them run the same command line,
``erobs_bt_node --ros-args -r __node:=erobs_bt -r __ns:=/cell2 --params-file
config/erobs_bt.yaml --log-level info``, or ``erobs-bt serve``). The node sets
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` itself unless it is already set.
* ``hardware`` — what moves: ``embedded`` (default: the in-process simulated cell),
  ``sim`` (``erobs_bt_sim_hardware`` is started beside the node, in the same namespace,
  and the node uses the ``ros2_control`` backend against it), ``ros2_control`` (a real
  driver such as ur_robot_driver already runs; the node uses the ``ros2_control`` backend),
  ``moveit`` (the cell's move_group runs; the node uses the ``moveit`` backend) or
  ``sim_moveit`` (``erobs_bt_sim_move_group`` is started beside the node as ``move_group``, and
  the node uses the ``moveit`` backend against it, with simulated tools);
* ``hardware_config`` — the cell's ROS interfaces YAML for the ``ros2_control`` backend
  and the hardware node (default: ``config/ur5e_ros2_control.yaml``; set only when given);
* ``moveit_config`` — the ``moveit`` backend's YAML (default: ``config/moveit.yaml``, with
  ``hardware:=sim_moveit`` ``config/moveit_sim.yaml``; set only when given).
"""

from __future__ import annotations

from typing import Any

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from erobs_bt.ros.node.launching import ARGUMENTS, PACKAGE, node_specs
from launch import LaunchContext, LaunchDescription


def _nodes(context: LaunchContext, *args: Any, **kwargs: Any) -> list[Node]:
    values = {name: LaunchConfiguration(name).perform(context) for name, _, _ in ARGUMENTS}
    return [
        Node(
            package=PACKAGE,
            executable=spec.executable,
            name=spec.name,
            namespace=spec.namespace,
            output="screen",
            emulate_tty=True,
            arguments=list(spec.arguments),
            parameters=[*spec.params_files, *([dict(spec.overrides)] if spec.overrides else [])],
            ros_arguments=["--log-level", spec.log_level],
        )
        for spec in node_specs(values)
    ]


def generate_launch_description() -> LaunchDescription:
    """The erobs_bt node (and for ``hardware:=sim`` the hardware node, for ``hardware:=sim_moveit``
    the simulated move_group) with the arguments above."""
    declared = [
        DeclareLaunchArgument(name, default_value=default, description=description)
        for name, default, description in ARGUMENTS
    ]
    return LaunchDescription([*declared, OpaqueFunction(function=_nodes)])

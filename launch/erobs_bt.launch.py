"""Launch the erobs_bt node with its default parameters (config/erobs_bt.yaml).

Needs a ROS 2 installation with ``launch`` and ``launch_ros`` (not installable from PyPI;
without them, run ``erobs_bt_node --ros-args --params-file config/erobs_bt.yaml`` or
``erobs-bt serve``). Arguments override single parameters, e.g.
``ros2 launch erobs_bt erobs_bt.launch.py speed:=20.0 params_file:=/path/to/params.yaml``.
The node sets ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` itself unless it is already set.
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    """The erobs_bt node, its params file and a few common overrides as launch arguments."""
    default_params = os.path.join(get_package_share_directory("erobs_bt"), "config", "erobs_bt.yaml")
    arguments = [
        DeclareLaunchArgument("params_file", default_value=default_params, description="node params file"),
        DeclareLaunchArgument("backend", default_value="sim", description="'sim' or 'scripted'"),
        DeclareLaunchArgument("speed", default_value="1.0", description="sim playback speed factor"),
        DeclareLaunchArgument("enable_batching", default_value="true", description="batch motion steps"),
    ]
    node = Node(
        package="erobs_bt",
        executable="erobs_bt_node",
        name="erobs_bt",
        output="screen",
        emulate_tty=True,
        parameters=[
            LaunchConfiguration("params_file"),
            {
                "backend": LaunchConfiguration("backend"),
                "speed": LaunchConfiguration("speed"),
                "enable_batching": LaunchConfiguration("enable_batching"),
            },
        ],
    )
    return LaunchDescription([*arguments, node])

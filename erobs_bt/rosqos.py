"""The QoS profile of erobs_bt's latched topics, in one place.

A latched topic keeps its last messages for subscribers that join later: reliable delivery,
``TRANSIENT_LOCAL`` durability, history ``KEEP_LAST`` of ``depth`` (ROS 2's replacement for
ROS 1's latching; py_trees_ros calls the same profile "latched"). Publishers and
subscribers both use it, so they match: the node's state and snapshot topics
(:mod:`erobs_bt.ros.node.node`), the EROBS drop-in API (:mod:`erobs_bt.ros.node.erobs_api`), the
py_trees_ros streams (:mod:`erobs_bt.ros.node.pytrees_streams`), the test doubles
(:mod:`erobs_bt.doubles`), the client and the watcher, and the ROS-side drivers (the UR
driver's ``robot_program_running``, :mod:`erobs_bt.backends.ros2_control.arm`; move_group's
latched description topics, :mod:`erobs_bt.backends.moveit.planner`).

Below the backends and ``erobs_bt.ros`` beside :mod:`erobs_bt.rostime` (pyproject.toml, the
import contracts "layers" and "rclpy"): the ROS conversions every ROS-side module shares.
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy


def latched_qos(depth: int = 1) -> QoSProfile:
    """Reliable, transient-local, keep-last-``depth`` QoS: a subscriber that joins late still
    receives the last ``depth`` messages the publisher sent (``depth`` >= 1)."""
    return QoSProfile(
        depth=depth,
        history=HistoryPolicy.KEEP_LAST,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL,
    )

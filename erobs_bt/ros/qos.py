"""The QoS profile of erobs_bt's latched topics, in one place.

A latched topic keeps its last messages for subscribers that join later: reliable delivery,
``TRANSIENT_LOCAL`` durability, history ``KEEP_LAST`` of ``depth`` (ROS 2's replacement for
ROS 1's latching; py_trees_ros calls the same profile "latched"). Publishers and
subscribers both use it, so they match: the node's state and snapshot topics
(:mod:`erobs_bt.ros.node.node`), the EROBS drop-in API (:mod:`erobs_bt.ros.node.erobs_api`), the
py_trees_ros streams (:mod:`erobs_bt.ros.node.pytrees_streams`), the simulated hardware node
(:mod:`erobs_bt.doubles.sim_hardware`), the client and the watcher.
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

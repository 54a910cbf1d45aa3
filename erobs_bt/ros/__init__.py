"""The ROS 2 face of erobs_bt: the ``erobs_bt`` node, its client and CLI verbs.

rclpy is imported at module level only by :mod:`erobs_bt.ros.node` and the parts it is made
of (:mod:`erobs_bt.ros.goal_server`, :mod:`erobs_bt.ros.bridge`, :mod:`erobs_bt.ros.nodelog`),
:mod:`erobs_bt.ros.client` and :mod:`erobs_bt.ros.convert` (docs/design.md §1: the engine never
imports it); :mod:`erobs_bt.ros.commands` imports them inside its functions and
:mod:`erobs_bt.ros.snapshots` not at all, so the ``erobs-bt`` command starts fast when no
ROS verb runs.

Safe by default (docs/design.md §4): every process that joins ROS through this package calls
:func:`ensure_localhost_discovery` before ``rclpy.init()``, so a node is not discoverable
from the network unless the user chose a wider ``ROS_AUTOMATIC_DISCOVERY_RANGE``.
"""

from __future__ import annotations

import os

#: The environment variable Kilted's rcl reads for the discovery scope
#: (``ROS_LOCALHOST_ONLY`` is no longer read; see docs/ros2-from-pypi.md §3).
DISCOVERY_RANGE_VARIABLE = "ROS_AUTOMATIC_DISCOVERY_RANGE"


def ensure_localhost_discovery() -> str:
    """Set ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` unless the user has set it.

    Must run before ``rclpy.init()`` (rcl reads the variable when the context starts).

    Returns:
        The discovery range in effect (``LOCALHOST``, or the user's value such as ``SUBNET``).
    """
    value = os.environ.get(DISCOVERY_RANGE_VARIABLE, "")
    if not value:
        os.environ[DISCOVERY_RANGE_VARIABLE] = "LOCALHOST"
        value = "LOCALHOST"
    return value

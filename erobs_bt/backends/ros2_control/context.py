"""Joining ROS safely: localhost discovery by default, and a private rclpy context.

The one place of these rules for every process that joins ROS (the ``erobs_bt`` node, its
client and CLI verbs through :mod:`erobs_bt.ros`, and the ROS-side drivers' own links).
rclpy is imported only inside :func:`init_context`, so importing this module is cheap.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rclpy.context import Context

#: The environment variable Jazzy's and Kilted's rcl read for the discovery scope
#: (``ROS_LOCALHOST_ONLY`` is deprecated on Jazzy and no longer read on Kilted; see
#: docs/ros2-from-pypi.md §3).
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


def init_context(domain_id: int | None = None) -> Context:
    """A new, initialised rclpy context in ``domain_id`` with localhost discovery by default.

    Args:
        domain_id: the ROS domain (0-232); ``None`` lets rcl read ``ROS_DOMAIN_ID`` now (0
            when unset), which is what a command started by a user should do.

    Returns:
        The context; the caller shuts it down (``context.try_shutdown()``) after destroying
        its nodes. No signal handlers are installed (the owner of the process decides).
        It takes no command-line arguments: ``rclpy.init(args=None)`` would read the
        process's ``sys.argv``, so in the node process (``erobs_bt_node --ros-args -r
        __node:=erobs_bt -r __ns:=/cell2 --params-file ...``) every node of this context
        would be renamed to the node's name and given its parameters: two ``/cell2/erobs_bt``
        in the graph, answering each other's parameter requests. Remaps and parameters are
        for the process's own node; a helper names itself.
    """
    import rclpy
    from rclpy.context import Context
    from rclpy.signals import SignalHandlerOptions

    ensure_localhost_discovery()
    context = Context()
    rclpy.init(args=[], context=context, domain_id=domain_id, signal_handler_options=SignalHandlerOptions.NO)
    return context

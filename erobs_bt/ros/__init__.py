"""The ROS 2 face of erobs_bt: the ``erobs_bt`` node, its client and CLI verbs.

rclpy is imported at module level only by :mod:`erobs_bt.ros.node` and the parts it is made
of (:mod:`erobs_bt.ros.goal_server`, :mod:`erobs_bt.ros.bridge`, :mod:`erobs_bt.ros.nodelog`),
:mod:`erobs_bt.ros.client` and :mod:`erobs_bt.ros.convert` (docs/design.md §1: the engine never
imports it); :mod:`erobs_bt.ros.commands` imports them inside its functions and
:mod:`erobs_bt.ros.snapshots` not at all, so the ``erobs-bt`` command starts fast when no
ROS verb runs.

Safe by default (docs/design.md §4): every process that joins ROS through this package calls
:func:`~erobs_bt.backends.ros2_control.context.ensure_localhost_discovery` (the rules live
with the ROS-side drivers, which join ROS too and sit below this package) before
``rclpy.init()``, so a node is not discoverable from the network unless the user chose a wider
``ROS_AUTOMATIC_DISCOVERY_RANGE``.
"""

"""The ROS 2 face of erobs_bt, one package per product.

* :mod:`erobs_bt.ros.client`: the node's client and the ``erobs-bt`` ROS verbs (the top).
* :mod:`erobs_bt.ros.node`: the ``erobs_bt`` node and its parts.
* :mod:`erobs_bt.ros.record`: the bag recorders.
* Here, shared by them and by the test doubles (:mod:`erobs_bt.doubles`): ``convert`` (engine
  values <-> ROS messages), ``cdr``, ``params`` (the node's parameter table, read by the
  client for the endpoint names), ``snapshots``, ``domain``, ``process`` (how a ROS process
  runs and stops) and ``planning_scene`` (MoveIt's scene messages <-> the world model).

The order is an import contract (pyproject.toml, "ros").

rclpy is imported at module level only by :mod:`erobs_bt.ros.node.node` and the parts it is made
of (:mod:`erobs_bt.ros.node.goal_server`, :mod:`erobs_bt.ros.node.bridge`, :mod:`erobs_bt.ros.node.nodelog`),
:mod:`erobs_bt.ros.client.client` and :mod:`erobs_bt.ros.convert` (docs/design.md §1: the engine never
imports it); :mod:`erobs_bt.ros.client.commands` imports them inside its functions and
:mod:`erobs_bt.ros.snapshots` not at all, so the ``erobs-bt`` command starts fast when no
ROS verb runs.

Safe by default (docs/design.md §4): every process that joins ROS through this package calls
:func:`~erobs_bt.backends.ros2_control.context.ensure_localhost_discovery` (the rules live
with the ROS-side drivers, which join ROS too and sit below this package) before
``rclpy.init()``, so a node is not discoverable from the network unless the user chose a wider
``ROS_AUTOMATIC_DISCOVERY_RANGE``.
"""

"""The ``erobs_bt`` ROS 2 node (``erobs_bt_node``): the engine behind ROS interfaces.

:mod:`~erobs_bt.ros.node.node` (start-up, parameters, shutdown), :mod:`~erobs_bt.ros.node.goal_server`
(the actions and services around the orchestrator), :mod:`~erobs_bt.ros.node.bridge` (state,
previews, snapshots, joint states as topics), :mod:`~erobs_bt.ros.node.erobs_api` (EROBS's
``beambot_*`` drop-in), :mod:`~erobs_bt.ros.node.pytrees_streams` (py_trees_ros streams),
:mod:`~erobs_bt.ros.node.scene` (MoveIt's planning-scene interfaces), :mod:`~erobs_bt.ros.node.runlogs`
and :mod:`~erobs_bt.ros.node.nodelog` (the node's run logs and log lines),
:mod:`~erobs_bt.ros.node.launching` (the launch file's nodes, importable without ``launch``).
Above the recorders (:mod:`erobs_bt.ros.record`: a goal's bag) and the shared ROS pieces of
:mod:`erobs_bt.ros`; below the client and its verbs (``erobs-bt serve`` runs the node).
"""

"""The recorders: a run as a ROS 2 bag (MCAP).

:mod:`~erobs_bt.ros.record.mcap_record` (:class:`~erobs_bt.ros.record.mcap_record.McapRecorder`,
the node's topics and events as CDR messages; reading a bag back) and
:mod:`~erobs_bt.ros.record.mcap_deferred` (a recorder opened when the arm first moves, for
``erobs-bt run --record``). Below the node (one bag per goal, :mod:`erobs_bt.ros.node.runlogs`);
above the shared ROS pieces (:mod:`erobs_bt.ros.convert`, :mod:`erobs_bt.ros.cdr`,
:mod:`erobs_bt.ros.params`, :mod:`erobs_bt.ros.snapshots`).
"""

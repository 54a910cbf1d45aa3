"""The node's client and the ``erobs-bt`` ROS verbs.

:mod:`~erobs_bt.ros.client.client` (:class:`~erobs_bt.ros.client.client.ErobsBtClient`: goals,
services, the latched state; used by the verbs, the MADSci node and the Bluesky device),
:mod:`~erobs_bt.ros.client.commands` (``serve``, ``send``, ``pause``, ``state``, ``scene``, …)
and :mod:`~erobs_bt.ros.client.watch` (the node's tree in a terminal). The top of
:mod:`erobs_bt.ros`: ``serve`` runs the node (:mod:`erobs_bt.ros.node`).
"""

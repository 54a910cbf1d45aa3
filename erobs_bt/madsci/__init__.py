"""erobs_bt under a MADSci lab: one MADSci node per erobs_bt cell.

* :mod:`erobs_bt.madsci.cells` — what the MADSci node drives: a cell behind an erobs_bt ROS
  node (:class:`~erobs_bt.madsci.cells.RosCell`, one :class:`~erobs_bt.ros.client.client.ErobsBtClient`
  reused, as the Bluesky device does) or an engine in the same process
  (:class:`~erobs_bt.madsci.cells.EmbeddedCell`). No MADSci import: the engine's view of a cell.
* :mod:`erobs_bt.madsci.node` — the MADSci node (``madsci.node_module.RestNode``): actions,
  admin commands, status and state mapped onto the cell.
* :mod:`erobs_bt.madsci.commands` — the ``erobs-bt madsci-node`` verb.

The MADSci packages are the ``madsci`` extra (``requirements-madsci.txt``); only
:mod:`erobs_bt.madsci.node` imports them.
"""

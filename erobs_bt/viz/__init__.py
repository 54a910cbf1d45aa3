"""Seeing the tree: static renderings, a live web view, a terminal watcher, run logs
and a BehaviorTree.CPP export.

Every module here imports only the standard library, py_trees, pydot, rich and click
at import time; the ROS client (:mod:`erobs_bt.viz.watch`) imports rclpy only when a
ROS watch actually starts, so the ``erobs-bt`` command stays fast.

* :mod:`~erobs_bt.viz.render` — compile a script for display (nothing is ticked) and
  write it as dot/svg/png/text.
* :mod:`~erobs_bt.viz.export_btcpp` — the compiled tree as BehaviorTree.CPP v4 XML, a
  format check, and loading it back with py_trees' XML parser.
* :mod:`~erobs_bt.viz.runlog` — :class:`~erobs_bt.viz.runlog.RunLogWriter` (JSON Lines)
  and the timeline printer.
* :mod:`~erobs_bt.viz.model` — the folded, JSON-able picture of a running tree shared
  by the web view and the watcher.
* :mod:`~erobs_bt.viz.web` — :func:`~erobs_bt.viz.web.start_live_view`.
* :mod:`~erobs_bt.viz.watch` — the terminal watcher (ROS topic or web view URL).
* :mod:`~erobs_bt.viz.commands` — the click commands (``COMMANDS``).
"""

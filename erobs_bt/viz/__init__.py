"""Seeing the tree: static renderings, a live web view, a terminal watcher, run logs
and a BehaviorTree.CPP export.

Nothing here imports ROS (rclpy, message packages, :mod:`erobs_bt.ros`): the viewers work on
the embedded cell as on the node, and :mod:`erobs_bt.ros` builds on them (the ROS watcher
:mod:`erobs_bt.ros.client.watch`, the bag recorder :mod:`erobs_bt.ros.record.mcap_record`). The import
contracts in pyproject.toml (``lint-imports``) hold this.

* :mod:`~erobs_bt.viz.render` — compile a script for display (nothing is ticked) and
  write it as dot/svg/png/text.
* :mod:`~erobs_bt.viz.export_btcpp` — the compiled tree as BehaviorTree.CPP v4 XML, a
  format check, and loading it back with py_trees' XML parser.
* :mod:`~erobs_bt.viz.runlog` — :class:`~erobs_bt.viz.runlog.RunLogWriter` (JSON Lines)
  and the timeline printer.
* :mod:`~erobs_bt.viz.model` — the folded, JSON-able picture of a running tree shared
  by the web view and the watcher.
* :mod:`~erobs_bt.viz.web` — :func:`~erobs_bt.viz.web.start_live_view`.
* :mod:`~erobs_bt.viz.history` — the run history's routes (past run logs, replayed).
* :mod:`~erobs_bt.viz.watch` — the terminal watcher: the picture, drawn, and the web view
  URL source (the ROS source is :mod:`erobs_bt.ros.client.watch`).
* :mod:`~erobs_bt.viz.bag` — a run's ROS 2 bag as a file (beside its run log, its topics).
* :mod:`~erobs_bt.viz.commands` — the click commands (``COMMANDS``).
"""

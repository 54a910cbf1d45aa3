"""py_trees_ros's own ``py-trees-tree-watcher`` against the node, where py_trees_ros is importable.

py_trees_ros is not installable from PyPI (``pip index versions py_trees_ros``: no
distribution) or Debian 12, so in CI this test skips and test/ros/test_pytrees_streams.py's raw
client stands in for it. On a machine with py_trees_ros (a ROS installation, or its source on
``PYTHONPATH`` as the README describes) it runs the watcher program itself, unchanged, in a
subprocess: it must discover the node's snapshot-stream services, open a stream and print the
compiled tree of a running goal through to the goal's end. ``import py_trees_ros`` needs the
whole py_trees_ros_interfaces (its ``action`` module too): test_interop_hashes checks that.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path

import pytest
from ros_fixtures import NodeProcess, RosProcess, ros_environment

from erobs_bt.ros.client.client import ErobsBtClient

from helpers import SUCK, move, script_json

pytestmark = pytest.mark.ros

WATCHER = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler);"
    "from py_trees_ros.programs.tree_watcher import main; sys.argv[0] = 'py-trees-tree-watcher'; main()"
)


@pytest.mark.skipif(
    importlib.util.find_spec("py_trees_ros") is None,
    reason="py_trees_ros is not importable (not installable from PyPI; see the README's real-tools section)",
)
def test_py_trees_tree_watcher_shows_the_running_tree(tmp_path: Path) -> None:
    with ros_environment(tmp_path / "ros_log") as environment:
        node = NodeProcess(environment, {"speed": 5.0})
        node.start()
        watcher = RosProcess(environment, [sys.executable, "-c", WATCHER, "--snapshots"], None, cwd=tmp_path)
        watcher.start()
        try:
            with ErobsBtClient(domain_id=environment.domain_id) as client:
                assert client.wait_for_server(30.0), node.output
                # the watcher has opened its stream once the node publishes a stream topic
                deadline = threading.Event()
                for _ in range(600):
                    topics = [name for name, _ in client.node.get_topic_names_and_types()]
                    if any(t.startswith("/erobs_bt/snapshot_streams/_snapshots_") for t in topics):
                        break
                    assert watcher.running(), watcher.output
                    deadline.wait(0.1)
                else:
                    pytest.fail("the watcher opened no stream:\n" + watcher.output)
                run = client.send(script_json([move("a"), SUCK, move("home")]))
                assert run.accepted, run.rejection
                assert run.wait(120.0).success
            finished = watcher.wait_for_line(lambda line: line.strip() == "{-} script [✓]", 60.0)
            assert finished, "\n".join(watcher.lines[-80:])
            text = watcher.output
            for unit in ("unit 1: batch[1]: moveto", "unit 2: pipettor", "unit 3: batch[1]: moveto"):
                assert unit in text, text[-3000:]
            assert "PlanUnit" in text and "ExecuteSolution" in text
        finally:
            watcher.stop()
            assert node.stop() == 0, node.output

"""End to end with ``planning: local``: the ``erobs_bt`` node (``backend: moveit``) plans the full
example in its own process and ``erobs_bt_sim_move_group`` only executes (and answers the scene
reads). Its own private domain, move_group and node, as test_moveit_e2e.py (whose event reader
and goal runner it uses)."""

from __future__ import annotations

import pytest
import test_moveit_e2e as e2e
from ros_fixtures import NodeProcess
from test_moveit_e2e import FULL_EXPERIMENT, MoveGroupEvents, finish

from erobs_bt.ros.client.client import ErobsBtClient

from helpers import wait_for

pytestmark = pytest.mark.ros


#: The node plans here (the fixtures of test_moveit_e2e.py read these two).
MOVEIT_YAML = "tools: simulated\nplanning: local\n"
#: A plan latency no run could hide: a single planning request would show in the goal's time too.
MOVE_GROUP_OPTIONS = ("--plan-latency", "30")

# test_moveit_e2e.py's fixtures, in this module's own domain (pytest finds them by these names).
ros_env, move_group, observer, node, client = e2e.ros_env, e2e.move_group, e2e.observer, e2e.node, e2e.client


def test_the_full_experiment_is_planned_here_and_executed_by_move_group(
    client: ErobsBtClient, observer: MoveGroupEvents, node: NodeProcess
) -> None:
    since = observer.events.count
    result = finish(client, client.send(FULL_EXPERIMENT.read_text()))
    assert result.success, result.error_message
    assert result.completed_steps == result.total_steps
    executed = observer.of("execute", since)
    results = observer.wait_count("execute_result", len(executed), since)
    assert len(executed) >= 20 and {r["outcome"] for r in results} == {"succeeded"}
    assert not observer.of("plan", since), "move_group was asked for no plan"
    # The operator sees on the node's own log that move_group's robot was checked.
    line = "planning: local: /move_group's robot_description checked"
    wait_for(lambda: line in node.output, 30.0, f"{line!r} in the node's output")

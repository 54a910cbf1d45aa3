"""What the node tells its clients through the feedback (erobs_bt issue 40, items 2 and 7), end
to end: a node process on the simulated cell with the default ``replay_scene_check:=false``.

* A cached trajectory replayed after a box was published on ``collision_object`` across it is
  sent unchecked (the specification's replay) and the goal's feedback says so, naming
  ``replay_scene_check``; the MADSci cell of the node (:class:`erobs_bt.madsci.cells.RosCell`)
  reads it from there into its outcome.
* ``erobs-bt cancel`` while a unit runs prints what the cancel will do (``the goal ends after
  unit 3 (its motion runs to its end)``, and ``stop`` to halt now), read from the state the node
  published on accepting it; the goal's feedback says it too; the unit still runs to its end.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from ros_fixtures import NodeProcess, RosEnvironment, ready_client
from test_ros_node import LONG_BATCH, wait_feedback
from test_ros_scene import SceneTalker, box_message, ids_of, remove_message, run_to_end
from test_ros_scene_replay import BATCH, flange_between

from erobs_bt.ros.client import commands
from erobs_bt.ros.client.client import ErobsBtClient

from helpers import LED, move, script

pytestmark = pytest.mark.ros

SPEED = 20.0
GOAL_TIMEOUT = 120.0


@pytest.fixture(scope="module")
def node(ros_env: RosEnvironment) -> Iterator[NodeProcess]:
    process = NodeProcess(ros_env, {"speed": SPEED})
    process.start()
    yield process
    assert process.stop() == 0, process.output


@pytest.fixture(scope="module")
def client(node: NodeProcess) -> Iterator[ErobsBtClient]:
    with ready_client(node) as ros_client:
        yield ros_client


def test_a_replay_through_a_new_box_is_sent_unchecked_and_the_feedback_says_so(
    client: ErobsBtClient, node: NodeProcess
) -> None:
    from erobs_bt.goal import unchecked_replay_in
    from erobs_bt.madsci.cells import RosCell

    talker = SceneTalker(client)
    assert client.clear_cache()[0]
    # The first run ends at pipettor_scan; the second starts there and is stored under that start.
    assert run_to_end(client, BATCH).status_name == "SUCCEEDED"
    stored = run_to_end(client, BATCH)
    assert stored.status_name == "SUCCEEDED", stored.result.error_message
    assert not any(unchecked_replay_in(f.status_message) for f in stored.feedback.items())

    box = flange_between("pipettor_scan", "sample_scan_1")
    talker.publish(box_message("box1", box, size=0.12), lambda m: "box1" in ids_of(m))
    cell = RosCell("/erobs_bt", domain_id=node.environment.domain_id, timeout=30.0)
    try:
        assert cell.wait_reachable(30.0)
        outcome = cell.run(BATCH)
    finally:
        cell.close()
        talker.publish(remove_message("box1"), lambda m: "box1" not in ids_of(m))

    assert outcome.status == "SUCCEEDED" and outcome.cache_status == "HIT", outcome
    (notice,) = outcome.notices
    assert notice.startswith("unit 1: replayed unchecked: planned in planning-scene revision"), notice
    assert "sent without a collision check" in notice and "replay_scene_check:=true" in notice


def test_erobs_bt_cancel_says_the_goal_ends_after_the_running_unit_and_names_stop(
    client: ErobsBtClient,
) -> None:
    # units: 1 = move, 2 = pipettor, 3 = batch of 12 moves (about 2 s at 20x; 14 steps)
    run = client.send(script([move("vial_scan"), LED, *LONG_BATCH, *LONG_BATCH]))
    assert run.accepted, run.rejection
    wait_feedback(run, lambda f: f.unit_index == 3, "for the last unit")

    cancelled = CliRunner().invoke(commands.cancel, ["--timeout", "30"])
    result = run.wait(GOAL_TIMEOUT)

    notice = "cancel accepted: the goal ends after unit 3 (its motion runs to its end)"
    assert cancelled.exit_code == 0, cancelled.output
    assert notice in cancelled.output and "to halt now: stop (erobs-bt stop, ~/stop)" in cancelled.output, (
        cancelled.output
    )
    assert run.status_name == "CANCELED"
    assert (result.completed_steps, result.total_steps) == (14, 14), "the running unit ran to its end"
    assert any(notice in f.status_message for f in run.feedback.items()), [
        f.status_message for f in run.feedback.items()
    ]

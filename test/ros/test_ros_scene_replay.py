"""The opt-in replay scene check end to end through a node (erobs_bt issue 23, item 4): a node
process on the simulated cell with ``replay_scene_check:=true``; a box published on
MoveIt's ``collision_object`` across a cached trajectory refuses its replay with
``SCENE_CHANGED`` (the feedback says why) and the batch is planned afresh once; a box away
from the path lets the hit replay."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from ros_fixtures import NodeProcess, RosEnvironment, ready_client
from test_ros_scene import SceneTalker, box_message, ids_of, remove_message, run_to_end

from erobs_bt.ros.client.client import ErobsBtClient
from erobs_bt.world.kinematics import fk

from helpers import POSES, move, script

pytestmark = pytest.mark.ros

SPEED = 20.0
#: One batched unit of two joint moves, from pipettor_scan (where it ends) and back there.
BATCH = script([move("sample_scan_1"), move("pipettor_scan")])


def flange_between(a: str, b: str) -> tuple[float, float, float]:
    """The flange position [m, base_link] half-way (in joint space) from pose ``a`` to ``b``:
    on the free joint move between them, a straight joint-space line."""
    q = [math.radians((x + y) / 2.0) for x, y in zip(POSES[a], POSES[b], strict=True)]
    T = fk(q)
    return float(T[0, 3]), float(T[1, 3]), float(T[2, 3])


@pytest.fixture(scope="module")
def node(ros_env: RosEnvironment) -> Iterator[NodeProcess]:
    process = NodeProcess(ros_env, {"speed": SPEED, "replay_scene_check": True})
    process.start()
    yield process
    assert process.stop() == 0, process.output


@pytest.fixture(scope="module")
def client(node: NodeProcess) -> Iterator[ErobsBtClient]:
    with ready_client(node) as ros_client:
        yield ros_client


@pytest.fixture(scope="module")
def talker(client: ErobsBtClient) -> SceneTalker:
    return SceneTalker(client)


def statuses(run: object) -> set[str]:
    return {f.cache_status for f in run.feedback.items()}  # type: ignore[attr-defined]


def test_a_cached_trajectory_through_a_new_box_is_refused_and_planned_afresh_once(
    client: ErobsBtClient, talker: SceneTalker, node: NodeProcess
) -> None:
    assert client.clear_cache()[0]
    # The first run ends at pipettor_scan; the second starts there and is stored under that start.
    assert run_to_end(client, BATCH).status_name == "SUCCEEDED"
    stored = run_to_end(client, BATCH)
    assert stored.status_name == "SUCCEEDED", stored.result.error_message

    # A box away from the path: the scene changed, the check passes, the hit replays.
    talker.publish(box_message("crate", (-0.8, -0.8, 0.3)), lambda m: "crate" in ids_of(m))
    passed = run_to_end(client, BATCH)
    assert passed.status_name == "SUCCEEDED", passed.result.error_message
    assert "HIT" in statuses(passed)
    assert not any("SCENE_CHANGED" in f.status_message for f in passed.feedback.items())

    # A box across the cached motion: refused before anything is sent, planned afresh once.
    box = flange_between("pipettor_scan", "sample_scan_1")
    talker.publish(box_message("box1", box, size=0.12), lambda m: "box1" in ids_of(m))
    refused = run_to_end(client, BATCH)
    assert "HIT" in statuses(refused)
    why = [f.status_message for f in refused.feedback.items() if "SCENE_CHANGED" in f.status_message]
    assert why, [f.status_message for f in refused.feedback.items()]
    assert "the planning scene changed since this trajectory was planned" in why[0] and "box1" in why[0]
    if refused.status_name == "SUCCEEDED":  # the fresh plan went around the box
        assert refused.result.completed_steps == refused.result.total_steps == 2
    else:  # or it could not, and says so, naming the box
        assert refused.result.error_code == "PLANNING_FAILED", refused.result.error_message
        assert "box1" in refused.result.error_message

    # The box removed: the path is free again.
    talker.publish(remove_message("box1"), lambda m: "box1" not in ids_of(m))
    talker.publish(remove_message("crate"), lambda m: "crate" not in ids_of(m))
    again = run_to_end(client, BATCH)
    assert again.status_name == "SUCCEEDED", again.result.error_message

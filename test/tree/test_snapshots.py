"""Tree snapshots without a ROS graph: the structure once, then deltas whose cost does not
grow with the tree, rebuilt exactly by the assembler; the throttle's order of messages."""

from __future__ import annotations

import json
import threading

import py_trees
import pytest

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.batching import group_into_batches
from erobs_bt.cache import PlanCache
from erobs_bt.ros.snapshots import SnapshotAssembler, SnapshotThrottle, TreeState, TreeTracker, take_snapshot
from erobs_bt.script.parse import parse_script
from erobs_bt.tree.compile import compile_tree
from erobs_bt.tree.context import Controls, GoalContext, Mode

Status = py_trees.common.Status


class Gated:
    """A tree of ``units`` pipettor units, each step held by its own gate, so a test moves
    it on one unit at a time (waiting on the backend's dispatch count, not on time)."""

    def __init__(self, units: int) -> None:
        tasks = [{"task_type": "pipettor", "operation": "SUCK", "volume_pct": 0.1}] * units
        script = parse_script(json.dumps({"start_gripper": "pipettor", "tasks": tasks}))
        self.backend = ScriptedBackend()
        self.gates = [threading.Event() for _ in range(units)]
        self.backend.script("run_step", *[Outcome.ok(gate=g) for g in self.gates])
        unit_list = group_into_batches(script.steps, enabled=True)
        context = GoalContext(script, unit_list, Mode.EXECUTE, self.backend, PlanCache(), False, Controls())
        self.root = compile_tree(context)
        self.root.tick_once()
        self.done = 0

    def advance(self) -> None:
        """Finish the running unit and tick until the next one has dispatched its step."""
        self.gates[self.done].set()
        self.done += 1
        waiter = threading.Event()
        for _ in range(100_000):
            self.root.tick_once()
            if self.root.status != Status.RUNNING or self.backend.count("run_step") > self.done:
                return
            waiter.wait(0.0005)
        raise AssertionError("the tree did not advance")


def same(a: TreeState, b: TreeState) -> bool:
    return [(s.id, s.status, s.message, s.is_active) for s in a.behaviours] == [
        (s.id, s.status, s.message, s.is_active) for s in b.behaviours
    ]


@pytest.mark.parametrize("units", [10, 60])
def test_deltas_rebuild_the_exact_tree_at_every_step(units: int) -> None:
    tree = Gated(units)
    root = tree.root
    tracker = TreeTracker("goal-1", root)
    assembler = SnapshotAssembler()
    assert assembler.add(tracker.full()) is not None
    for _ in range(units):
        tree.advance()
        delta = tracker.delta()
        assert delta is not None and not delta.full
        rebuilt = assembler.add(delta)
        assert rebuilt is not None and same(rebuilt, take_snapshot("goal-1", root, final=False))
    final = tracker.full(final=True)
    assert final.root_status == "SUCCESS" and same(final, take_snapshot("goal-1", root, final=True))
    assert tracker.delta() is None, "nothing changed since the final snapshot"


def test_a_delta_reads_only_the_recent_units_whatever_the_tree_size() -> None:
    scanned = {}
    for units in (20, 400):
        tree = Gated(units)
        tracker = TreeTracker("goal-1", tree.root)
        tracker.full()
        for _ in range(units // 2):
            tree.advance()
        tracker.delta()  # catch up with the half run so far
        tree.advance()
        tracker.delta()
        scanned[units] = tracker.last_scanned
    assert scanned[20] == scanned[400] < 30, scanned


def test_the_assembler_waits_for_a_full_snapshot_after_a_gap() -> None:
    tree = Gated(5)
    tracker = TreeTracker("goal-1", tree.root)
    assembler = SnapshotAssembler()
    assembler.add(tracker.full())
    tree.advance()
    tracker.delta()  # lost on the way
    tree.advance()
    assert assembler.add(tracker.delta()) is None and assembler.ignored == 1  # type: ignore[arg-type]
    assert assembler.add(tracker.full()) is not None


def test_the_throttle_sends_structure_then_changes_at_most_at_the_rate_and_always_the_end() -> None:
    now = [0.0]
    sent: list[TreeState] = []
    throttle = SnapshotThrottle(sent.append, rate=10.0, clock=lambda: now[0])
    tree = Gated(3)
    root = tree.root
    throttle.ticked("goal-1", root)
    first = throttle.poll()
    tree.advance()
    throttle.ticked("goal-1", root)
    now[0] = 0.05
    too_soon = throttle.poll()
    now[0] = 0.2
    delta = throttle.poll()
    unchanged = throttle.poll()
    throttle.request_full()
    now[0] = 0.4
    again = throttle.poll()
    final = throttle.finish("goal-1", root)

    assert first is not None and first.full and first.sequence == 0 and first.root_status == "RUNNING"
    assert too_soon is None and unchanged is None
    assert delta is not None and not delta.full and delta.sequence == 1
    assert again is not None and again.full
    assert final is not None and final.final and final.full
    assert throttle.finish("goal-1", root) is None
    assert [s.sequence for s in sent] == [0, 1, 2, 3]


def test_uuid_texts_are_the_uuids_str() -> None:
    import uuid

    from erobs_bt.ros.snapshots import uuid_texts

    values = [uuid.uuid4() for _ in range(50)] + [uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)]
    assert uuid_texts(values) == [str(v) for v in values]
    assert uuid_texts([]) == []
    assert uuid_texts(["not-a-uuid", 7]) == ["not-a-uuid", "7"]

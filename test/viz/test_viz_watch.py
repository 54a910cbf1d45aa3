"""The terminal watcher reads the node's latched tree snapshots over ROS (its topic names,
QoS and message fields match what ``erobs_bt.ros`` publishes)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from ros_fixtures import ros_environment

from erobs_bt.backends.ros2_control.context import init_context

pytestmark = pytest.mark.ros


@pytest.fixture
def private_ros(tmp_path: Path) -> Iterator[int]:
    """A private domain on localhost (its ``ROS_DOMAIN_ID`` is set for the watcher, which
    reads it as the CLI does), logs in the test's directory."""
    with ros_environment(tmp_path / "ros_log") as environment:
        yield environment.domain_id


def watch_once_late(domain_id: int, history: list[Any], state: Any, current: Any) -> tuple[int, str]:
    """``watch --once`` against a stand-in node whose latched ``~/tree_snapshot`` history
    is ``history`` and whose state is ``state``; like the node's matched callback, it
    publishes ``current`` once a subscriber appears. Returns the exit code and the text."""
    from erobs_bt_interfaces.msg import ExecutionState, TreeSnapshot
    from rclpy.node import Node

    from erobs_bt.ros.client.client import latched_qos
    from erobs_bt.ros.client.watch import watch_ros
    from erobs_bt.ros.params import SNAPSHOT_DEPTH

    context = init_context(domain_id)
    node = Node("erobs_bt", context=context, start_parameter_services=False)
    done = threading.Event()
    snapshots = node.create_publisher(TreeSnapshot, "~/tree_snapshot", latched_qos(SNAPSHOT_DEPTH))
    states = node.create_publisher(ExecutionState, "~/execution_state", latched_qos())

    def send() -> None:
        while not done.is_set() and snapshots.get_subscription_count() == 0:
            done.wait(0.01)
        # Later than the latched history (a busy node): the outcome does not depend on this
        # pause, it only makes a watcher that drew the history's tree visible.
        done.wait(0.5)
        snapshots.publish(current)

    sender = threading.Thread(target=send)
    try:
        for message in history:
            snapshots.publish(message)
        states.publish(state)
        sender.start()
        console = Console(record=True, width=160, color_system=None)
        code = watch_ros("/erobs_bt", console=console, once=True, timeout=20.0, stop=threading.Event())
    finally:
        done.set()
        if sender.is_alive():
            sender.join(10)
        node.destroy_node()
        context.try_shutdown()
    return code, console.export_text()


def test_watch_once_draws_the_latched_snapshot(private_ros: int) -> None:
    from builtin_interfaces.msg import Time
    from erobs_bt_interfaces.msg import BehaviourStatus, ExecutionState, TreeSnapshot
    from rclpy.node import Node

    from erobs_bt.ros.client.client import latched_qos
    from erobs_bt.ros.client.watch import watch_ros

    context = init_context(private_ros)
    node = Node("erobs_bt", context=context, start_parameter_services=False)
    try:
        snapshots = node.create_publisher(TreeSnapshot, "~/tree_snapshot", latched_qos())
        states = node.create_publisher(ExecutionState, "~/execution_state", latched_qos())

        def status(
            id_: str, parent: str, name: str, value: str, type_: str, message: str = ""
        ) -> BehaviourStatus:
            return BehaviourStatus(
                id=id_,
                name=name,
                type=type_,
                parent_id=parent,
                status=value,
                message=message,
                is_active=False,
            )

        snapshots.publish(
            TreeSnapshot(
                stamp=Time(sec=1),
                goal_id="goal-4",
                state="RUNNING",
                unit_index=2,
                final=False,
                tip_id="x2",
                behaviours=[
                    status("r", "", "script", "RUNNING", "UnitSequence"),
                    status("b1", "r", "before unit 1", "SUCCESS", "UnitBoundary"),
                    status("u1", "r", "unit 1: pipettor", "SUCCESS", "Sequence"),
                    status("b2", "r", "before unit 2", "SUCCESS", "UnitBoundary"),
                    status("u2", "r", "unit 2: batch[2]: moveto, end_effector", "RUNNING", "Sequence"),
                    status("x2", "u2", "ExecuteSolution", "RUNNING", "ExecuteSolution", "executing"),
                    status("e", "r", "after last unit", "INVALID", "UnitBoundary"),
                ],
                tree_json="",
            )
        )
        states.publish(
            ExecutionState(
                stamp=Time(sec=1),
                state="RUNNING",
                goal_id="goal-4",
                current_step=2,
                total_steps=3,
                unit_index=2,
                message="unit 2/2",
            )
        )
        console = Console(record=True, width=160, color_system=None)
        code = watch_ros("/erobs_bt", console=console, once=True, timeout=20.0, stop=threading.Event())
    finally:
        node.destroy_node()
        context.try_shutdown()
    text = console.export_text()
    assert code == 0, text
    assert "/erobs_bt/tree_snapshot" in text and "goal-4" in text
    assert "unit 2: batch[2]: moveto, end_effector" in text and "◀ current" in text
    assert "ExecuteSolution  executing" in text
    assert "step 2/3, unit 2" in text, "the ExecutionState topic gives the step and unit"


def test_watch_once_waits_for_an_execution_state_that_arrives_after_the_snapshot(
    private_ros: int,
) -> None:
    """Regression: ``watch --once`` drew as soon as the snapshot arrived (``state ?``), so
    the test above failed about 1 run in 6. Here the state is published only after the
    watcher is subscribed and has had time to receive the snapshot; it must still be drawn."""
    import time

    from builtin_interfaces.msg import Time
    from erobs_bt_interfaces.msg import BehaviourStatus, ExecutionState, TreeSnapshot
    from rclpy.node import Node

    from erobs_bt.ros.client.client import latched_qos
    from erobs_bt.ros.client.watch import watch_ros

    context = init_context(private_ros)
    node = Node("erobs_bt", context=context, start_parameter_services=False)
    console = Console(record=True, width=160, color_system=None)
    codes: list[int] = []
    try:
        snapshots = node.create_publisher(TreeSnapshot, "~/tree_snapshot", latched_qos())
        states = node.create_publisher(ExecutionState, "~/execution_state", latched_qos())
        snapshots.publish(
            TreeSnapshot(
                stamp=Time(sec=1),
                goal_id="goal-7",
                state="SUCCESS",
                unit_index=0,
                final=True,
                tip_id="r",
                behaviours=[
                    BehaviourStatus(
                        id="r", name="script", type="UnitSequence", parent_id="", status="SUCCESS"
                    )
                ],
                tree_json="",
            )
        )
        watcher = threading.Thread(
            target=lambda: codes.append(
                watch_ros("/erobs_bt", console=console, once=True, timeout=30.0, grace=30.0)
            )
        )
        watcher.start()
        deadline = time.monotonic() + 30.0
        while (
            snapshots.get_subscription_count() == 0 or states.get_subscription_count() == 0
        ) and time.monotonic() < deadline:
            time.sleep(0.01)
        # Give the snapshot time to arrive first (the old watcher drew right then); the new
        # one waits for the state whatever this delay is.
        time.sleep(0.5)
        states.publish(
            ExecutionState(stamp=Time(sec=2), state="IDLE", goal_id="goal-7", message="goal-7 succeeded")
        )
        watcher.join(60.0)
    finally:
        node.destroy_node()
        context.try_shutdown()
    text = console.export_text()
    assert codes == [0], text
    assert "state ?" not in text and "IDLE" in text and "goal-7 succeeded" in text, text


def test_watch_once_waits_past_an_earlier_goals_latched_snapshot(private_ros: int) -> None:
    """Nobody watched goal-5, so the latched history still ends with goal-4's tree; the node
    sends goal-5's tree when a subscriber appears, and that is the one drawn."""
    from builtin_interfaces.msg import Time
    from erobs_bt_interfaces.msg import BehaviourStatus, ExecutionState, TreeSnapshot

    def snapshot(goal_id: str, unit: str, stamp: int) -> TreeSnapshot:
        behaviours = [
            BehaviourStatus(id="r", name="script", type="UnitSequence", parent_id="", status="RUNNING"),
            BehaviourStatus(id="u1", name=unit, type="Sequence", parent_id="r", status="RUNNING"),
        ]
        return TreeSnapshot(
            stamp=Time(sec=stamp), goal_id=goal_id, state="RUNNING", unit_index=1, final=False, tip_id="u1",
            behaviours=behaviours, tree_json="",
        )  # fmt: skip

    code, text = watch_once_late(
        private_ros,
        [snapshot("goal-4", "unit 1: pipettor", 1)],
        ExecutionState(stamp=Time(sec=2), state="RUNNING", goal_id="goal-5", unit_index=1),
        snapshot("goal-5", "unit 1: batch[1]: moveto", 3),
    )
    assert code == 0, text
    assert "goal-5" in text and "unit 1: batch[1]: moveto" in text, text
    assert "goal-4" not in text, "the earlier goal's latched tree is not drawn"


def test_watch_once_waits_past_the_same_goals_older_latched_tree(private_ros: int) -> None:
    """Regression (issue 27): someone watched goal-6's first unit, then the goal paused at
    unit 2 with nobody watching; the latched history ends with the unit-1 tree. Only a tree
    taken after the state was entered (the one the node sends a new subscriber) is drawn."""
    from builtin_interfaces.msg import Time
    from erobs_bt_interfaces.msg import BehaviourStatus, ExecutionState, TreeSnapshot

    def snapshot(stamp: int, running: str) -> TreeSnapshot:
        def unit(id_: str, name: str) -> BehaviourStatus:
            status = "RUNNING" if name == running else ("SUCCESS" if name < running else "INVALID")
            return BehaviourStatus(id=id_, name=name, type="Sequence", parent_id="r", status=status)

        return TreeSnapshot(
            stamp=Time(sec=stamp), goal_id="goal-6", state="RUNNING", final=False, tip_id="",
            behaviours=[
                BehaviourStatus(id="r", name="script", type="UnitSequence", parent_id="", status="RUNNING"),
                unit("u1", "unit 1: batch[1]: moveto"),
                unit("u2", "unit 2: pause"),
            ],
        )  # fmt: skip

    code, text = watch_once_late(
        private_ros,
        [snapshot(10, "unit 1: batch[1]: moveto")],
        ExecutionState(stamp=Time(sec=20), state="PAUSED", goal_id="goal-6", unit_index=2, message="paused"),
        snapshot(30, "unit 2: pause"),
    )
    assert code == 0, text
    current = [line for line in text.splitlines() if "◀ current" in line]
    assert len(current) == 1 and "unit 2: pause" in current[0], text

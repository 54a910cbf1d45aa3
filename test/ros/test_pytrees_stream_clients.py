"""py_trees_ros snapshot-stream clients as the field's tools use them, against a node process
of its own: many watchers opening and closing streams at once (the node keeps serving), a
stream opened late (on a paused goal nobody watched, on an idle node) gets the current tree
at once, the names it sends can be drawn by py_trees' Graphviz export (what
``py-trees-tree-watcher --dot-graph`` calls), and its statistics and ``~/tree_snapshot``'s
root state are filled while the goal runs."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import py_trees
import pytest
from py_trees_ros_interfaces.msg import Behaviour, BehaviourTree
from py_trees_ros_interfaces.srv import CloseSnapshotStream, OpenSnapshotStream
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from ros_fixtures import NodeProcess, ros_environment

from erobs_bt.backends.ros2_control.context import init_context
from erobs_bt.ros.client.client import ErobsBtClient, Recorder, latched_qos

from helpers import POSES

pytestmark = pytest.mark.ros

NODE = "/erobs_bt"
MOVE = {"task_type": "moveto", "target": "vial_scan", "planning_type": "joint"}
BACK = {"task_type": "moveto", "target": "sample_scan_1", "planning_type": "joint"}
#: Unit 1 moves, unit 2 pauses, unit 3 moves (unit names: ``unit 2: pause``).
PAUSING = json.dumps(
    {"start_gripper": "pipettor", "poses": POSES, "tasks": [MOVE, {"task_type": "pause"}, BACK]}
)
GOAL_TIMEOUT = 120.0
#: Many moves, then a pause: the stress test's goal runs while watchers come and go.
LONG = json.dumps(
    {"start_gripper": "pipettor", "poses": POSES, "tasks": [MOVE, BACK] * 10 + [{"task_type": "pause"}, MOVE]}
)
ROUNDS, PER_ROUND = 25, 10


def key(msg: Any) -> str:
    return str(uuid.UUID(bytes=bytes(msg.uuid)))


def wait(future: Any, timeout: float = 20.0) -> Any:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout), "no reply"
    return future.result()


class Watchers:
    """Stream clients in this process: one rclpy node per watcher (as each watcher process
    has), all in one context spun by a multi-threaded executor."""

    def __init__(self, domain_id: int) -> None:
        self.context = init_context(domain_id)
        self.executor = MultiThreadedExecutor(num_threads=4, context=self.context)
        self.nodes: list[Node] = []
        # Held by each spin_once and by drop: a node is never destroyed while a spin builds a wait
        # set holding its handles (rclpy raises InvalidHandle there and the spin thread dies).
        self._spin_lock = threading.Lock()
        self._spinning = threading.Event()
        self._spinning.set()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while self._spinning.is_set() and self.context.ok():
            with self._spin_lock:
                self.executor.spin_once(timeout_sec=0.05)

    def watcher(self, name: str) -> Watcher:
        node = Node(name, context=self.context, start_parameter_services=False)
        self.nodes.append(node)
        self.executor.add_node(node)
        return Watcher(node)

    def drop(self, watcher: Watcher) -> None:
        with self._spin_lock:
            self.executor.remove_node(watcher.node)
            self.nodes.remove(watcher.node)
            watcher.node.destroy_node()

    def close(self) -> None:
        self._spinning.clear()
        self._thread.join(10.0)
        self.executor.shutdown()
        for node in self.nodes:
            node.destroy_node()
        self.context.try_shutdown()


class Watcher:
    """One py_trees_ros stream client: opens a stream, subscribes to it, closes it."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.opener = node.create_client(OpenSnapshotStream, f"{NODE}/snapshot_streams/open")
        self.closer = node.create_client(CloseSnapshotStream, f"{NODE}/snapshot_streams/close")
        self.trees: Recorder[Any] = Recorder()
        self.topic = ""

    def open(self, *, period: float = float("inf")) -> str:
        assert self.opener.wait_for_service(timeout_sec=20.0)
        request = OpenSnapshotStream.Request(topic_name="")
        request.parameters.snapshot_period = period
        request.parameters.blackboard_data = True
        self.topic = wait(self.opener.call_async(request)).topic_name
        self.node.create_subscription(BehaviourTree, self.topic, self.trees.add, latched_qos())
        return self.topic

    def close_async(self) -> Any:
        assert self.closer.wait_for_service(timeout_sec=20.0)
        return self.closer.call_async(CloseSnapshotStream.Request(topic_name=self.topic))


@pytest.fixture(scope="module")
def stream_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NodeProcess, int]]:
    """A node process of this module's own (a crash here takes no other test's node)."""
    with ros_environment(tmp_path_factory.mktemp("streams_ros_log")) as environment:
        logs = tmp_path_factory.mktemp("streams_run_logs")
        process = NodeProcess(environment, {"speed": 20.0, "run_log_dir": str(logs)}).start()
        try:
            yield process, environment.domain_id
        finally:
            process.stop()


@pytest.fixture
def watchers(stream_node: tuple[NodeProcess, int]) -> Iterator[Watchers]:
    group = Watchers(stream_node[1])
    try:
        yield group
    finally:
        group.close()


@pytest.fixture
def client(stream_node: tuple[NodeProcess, int]) -> Iterator[ErobsBtClient]:
    with ErobsBtClient(NODE, domain_id=stream_node[1]) as erobs:
        assert erobs.wait_for_server(30.0)
        assert erobs.wait_for_state_stream(30.0)
        yield erobs


def paused_goal(client: ErobsBtClient) -> tuple[Any, Any]:
    """Send :data:`PAUSING` and wait until it is PAUSED at unit 2; (the run, the state)."""
    since = client.states.count
    run = client.send(PAUSING)
    assert run.accepted, run.rejection
    paused = client.wait_for_state("PAUSED", GOAL_TIMEOUT, since=since)
    assert paused is not None and paused.unit_index == 2, paused
    return run, paused


def finish(client: ErobsBtClient, run: Any) -> None:
    assert client.resume(10.0)[0]
    result = run.wait(GOAL_TIMEOUT)
    assert result is not None and run.status_name == "SUCCEEDED", result


def pause_running(tree: Any) -> bool:
    return any(b.name.startswith("unit 2") and b.status == Behaviour.RUNNING for b in tree.behaviours)


def watched_pause(watchers: Watchers, client: ErobsBtClient, name: str) -> tuple[Any, Any]:
    """A stream opened before the goal (it sees every change): the tree it shows once the
    goal is paused at unit 2, after which the goal is resumed to its end; (tree, state)."""
    watcher = watchers.watcher(name)
    watcher.open()
    run, paused = paused_goal(client)
    try:
        tree = watcher.trees.wait_for(pause_running, 20.0)
        assert tree is not None, f"no tree with unit 2 running on {watcher.topic}"
    finally:
        finish(client, run)
    return tree, paused


def test_many_watchers_closing_streams_at_once_do_not_stop_the_node(
    stream_node: tuple[NodeProcess, int], watchers: Watchers, client: ErobsBtClient
) -> None:
    """Regression: closing a stream destroyed its publisher (and its QoS event handler) from
    the close service's callback while another executor thread built a wait set holding
    it: ``InvalidHandle`` killed the executor thread and the node exited 3 (three of six
    rounds of six watchers stopping together). Rounds while the goal runs, then paused."""
    process, _domain = stream_node
    since = client.states.count
    run = client.send(LONG)
    assert run.accepted, run.rejection
    rounds, per_round = ROUNDS, PER_ROUND
    for round_ in range(rounds):
        group = [watchers.watcher(f"watcher_{round_}_{i}") for i in range(per_round)]
        topics = [w.open(period=0.05) for w in group]
        assert len(set(topics)) == per_round
        futures = [w.close_async() for w in group]  # all at once
        done = [threading.Event() for _ in futures]
        for future, event in zip(futures, done, strict=True):
            future.add_done_callback(lambda _f, e=event: e.set())
        for event in done:
            while not event.wait(0.1):
                assert process.running(), f"the node died in round {round_}:\n{process.output}"
        replies = [f.result() for f in futures]
        assert all(r.result for r in replies), f"round {round_}: a stream was not closed"
        for w in group:
            watchers.drop(w)  # the watcher processes go away too
        assert process.running(), f"the node died in round {round_}:\n{process.output}"
    assert client.wait_for_state("PAUSED", GOAL_TIMEOUT, since=since) is not None, process.output
    finish(client, run)
    assert process.running(), process.output
    assert "executor thread died" not in process.output, process.output


def test_a_stream_opened_on_a_paused_goal_gets_the_current_tree_at_once(
    watchers: Watchers, client: ErobsBtClient
) -> None:
    """Regression: a viewer attaching to a goal already paused received nothing (the tree
    does not change while paused, and a new stream was only published to on a change)."""
    run, paused = paused_goal(client)
    try:
        watcher = watchers.watcher("late_viewer")
        watcher.open()  # only on change: the first tree must come from the opening itself
        tree = watcher.trees.wait_for(pause_running, 20.0)
        assert tree is not None, f"nothing on {watcher.topic} for a goal paused at unit 2"
        blackboard = {kv.key: kv.value for kv in tree.blackboard_on_visited_path}
        assert blackboard["/goal_id"] == paused.goal_id and blackboard["/state"] == "PAUSED"
    finally:
        finish(client, run)
    # Idle: a new stream gets the goal's final tree.
    late = watchers.watcher("idle_viewer")
    late.open()
    final = late.trees.wait_for(lambda t: t.behaviours and t.behaviours[0].status == Behaviour.SUCCESS, 20.0)
    assert final is not None, f"nothing on {late.topic} on an idle node"
    assert all(b.status == Behaviour.SUCCESS for b in final.behaviours if b.name.startswith("unit "))


def rebuilt(tree: Any) -> py_trees.behaviour.Behaviour:
    """A py_trees tree from a ``BehaviourTree`` message, as py_trees_ros's watcher rebuilds
    it (a composite per SEQUENCE/SELECTOR/PARALLEL, a behaviour per leaf, message names)."""
    by_id = {key(b.own_id): b for b in tree.behaviours}
    kinds: dict[int, Callable[[str], py_trees.behaviour.Behaviour]] = {
        Behaviour.SEQUENCE: lambda name: py_trees.composites.Sequence(name, memory=True),
        Behaviour.SELECTOR: lambda name: py_trees.composites.Selector(name, memory=False),
        Behaviour.PARALLEL: lambda name: py_trees.composites.Parallel(
            name, policy=py_trees.common.ParallelPolicy.SuccessOnAll()
        ),
    }

    def build(msg: Any) -> py_trees.behaviour.Behaviour:
        children = [build(by_id[key(c)]) for c in msg.child_ids]
        if msg.type == Behaviour.DECORATOR and len(children) == 1:
            return py_trees.decorators.Inverter(name=msg.name, child=children[0])
        if msg.type in kinds:
            composite = kinds[msg.type](msg.name)
            composite.add_children(children)
            return composite
        return py_trees.behaviours.Dummy(name=msg.name)

    return build(tree.behaviours[0])


def test_stream_names_draw_as_one_connected_graph_with_py_trees_dot_export(
    watchers: Watchers, client: ErobsBtClient, tmp_path: Path
) -> None:
    """Regression: unit names (``unit 2: pause``) contain ``:``, which Graphviz reads as
    node:port, so ``py-trees-tree-watcher --dot-graph`` drew the units detached."""
    import pydot

    tree, _paused = watched_pause(watchers, client, "dot_viewer")
    root = rebuilt(tree)
    dot = py_trees.display.dot_tree(root)  # what the watcher's --dot-graph renders
    path = tmp_path / "tree.dot"
    path.write_text(dot.to_string())
    (graph,) = pydot.graph_from_dot_file(str(path))  # as Graphviz reads it back
    names = {n.get_name().strip('"') for n in graph.get_nodes()} - {"node", "edge", "graph"}
    ends = [(e.get_source(), e.get_destination()) for e in graph.get_edges()]
    for source, destination in ends:
        for end in (source, destination):
            assert ":" not in end.strip('"'), f"edge end {end} names a port"
            assert end.strip('"') in names, f"edge end {end} is no node of the graph"
    behaviours = len(tree.behaviours)
    assert len(ends) == behaviours - 1, "one edge per behaviour but the root: a connected tree"
    units = [b.name for b in tree.behaviours if b.blackbox_level == Behaviour.BLACKBOX_LEVEL_BIG_PICTURE]
    assert units == ["unit 1 - batch[1] - moveto", "unit 2 - pause", "unit 3 - batch[1] - moveto"], units


def test_stream_statistics_are_filled_while_the_goal_runs(watchers: Watchers, client: ErobsBtClient) -> None:
    """Regression: statistics were empty (``Tick 0``, durations 0.000 with ``-s``)."""
    tree, paused = watched_pause(watchers, client, "stats_viewer")
    stats = tree.statistics
    assert stats.count > 1, f"tick count {stats.count}"
    assert stats.stamp.sec > 0
    assert stats.tick_duration_average > 0.0 and stats.tick_duration_variance >= 0.0
    assert stats.tick_interval_average > 0.0 and stats.tick_interval_variance >= 0.0
    assert paused.goal_id in {kv.value for kv in tree.blackboard_on_visited_path}


def test_tree_snapshot_deltas_carry_the_roots_status(client: ErobsBtClient) -> None:
    """Regression: ``TreeSnapshot.state`` (documented as the root's status) was INVALID in
    every delta while the goal ran."""
    since = client.snapshots.count
    run, paused = paused_goal(client)
    finish(client, run)
    final = client.snapshots.wait_for(lambda m: m.goal_id == paused.goal_id and m.final, 20.0, since=since)
    assert final is not None and final.state == "SUCCESS"
    snapshots = [m for m in client.snapshots.items()[since:] if m.goal_id == paused.goal_id]
    deltas = [m for m in snapshots if m.delta]
    assert deltas, "the goal sent no delta snapshot"
    states = [m.state for m in deltas]
    # RUNNING while it runs (a delta taken between the last tick and the final snapshot may
    # already show SUCCESS); and wherever a delta lists the root, the two agree.
    assert "RUNNING" in states and set(states) <= {"RUNNING", "SUCCESS"}, states
    for m in deltas:
        roots = [b.status for b in m.behaviours if not b.parent_id]
        assert roots in ([], [m.state]), (roots, m.state)


def test_state_and_watch_once_show_the_paused_tree_and_then_the_final_one(client: ErobsBtClient) -> None:
    """Regression (issue 27): ``erobs-bt state``'s "last snapshot" showed the goal's first
    tree (unit 1, planning) from the latched history even PAUSED at unit 2 or IDLE, and so
    did ``watch --once``: a snapshot now counts only if taken after the state was entered,
    or if it is the goal's final one (:func:`erobs_bt.ros.client.client.shows_state`)."""
    from click.testing import CliRunner
    from rich.console import Console

    from erobs_bt.ros.client import commands
    from erobs_bt.ros.client.watch import watch_ros

    def last_snapshot() -> str:
        shown = CliRunner().invoke(commands.state, ["--node", NODE, "--timeout", "20"], terminal_width=400)
        assert shown.exit_code == 0, shown.output
        return next(line for line in shown.output.splitlines() if "last snapshot" in line)

    def watched_current_unit() -> str:
        console = Console(record=True, width=400, color_system=None)
        assert watch_ros(NODE, console=console, once=True, timeout=20.0) == 0
        text = console.export_text()
        return next((line for line in text.splitlines() if "◀ current" in line), text)

    run, paused = paused_goal(client)  # this client watched unit 1, then the goal paused
    try:
        paused_line = last_snapshot()
        current = watched_current_unit()
    finally:
        finish(client, run)
    assert paused.goal_id in paused_line and "PauseStep" in paused_line, paused_line
    assert "unit 2: pause" in current, current
    idle_line = last_snapshot()
    assert paused.goal_id in idle_line and "(final)" in idle_line, idle_line


def test_stream_publishers_are_in_no_wait_set(tmp_path: Path) -> None:
    """Why closing is safe: a stream's publisher adds no waitable to the node (rclpy gives a
    publisher QoS event handlers by default, and the executor puts those in its wait sets;
    one destroyed while a wait set was built killed the executor), so destroying it from the
    close callback cannot pull anything out from under a wait set being built."""
    from erobs_bt.ros.node.pytrees_streams import SnapshotStreams, StreamParameters

    with ros_environment(tmp_path / "ros_log") as environment:
        context = init_context(environment.domain_id)
        node = Node("streams_only", context=context, start_parameter_services=False)
        try:
            streams = SnapshotStreams(node, context=lambda: [], rate=10.0)
            before = len(list(node.waitables))
            streams.configure_default(True, StreamParameters(snapshot_period=0.1))  # as an open does
            (publisher,) = [p for p in node.publishers if p.topic_name == streams.default_topic]
            assert publisher.event_handlers == []
            assert len(list(node.waitables)) == before
            streams.configure_default(False, StreamParameters())  # as a close does
            assert streams.default_topic not in [p.topic_name for p in node.publishers]
        finally:
            node.destroy_node()
            context.try_shutdown()


def test_streams_opened_and_closed_while_the_executor_builds_wait_sets_keep_it_alive(tmp_path: Path) -> None:
    """The close crash, reproduced in this process: streams open and close on one thread
    (as the close service's callback does on a worker thread) while a multi-threaded
    executor rebuilds its wait set a thousand times a second (a 1 kHz timer), with the
    interpreter switching threads every 10 µs so the two interleave finely. Before the fix
    the executor died with ``InvalidHandle`` within a few hundred cycles (121 in one run);
    it must survive 5,000."""
    import sys

    from erobs_bt.ros.node.pytrees_streams import SnapshotStreams, StreamParameters

    with ros_environment(tmp_path / "ros_log") as environment:
        context = init_context(environment.domain_id)
        node = Node("streams_race", context=context, start_parameter_services=False)
        streams = SnapshotStreams(node, context=lambda: [], rate=10.0)
        node.create_timer(0.001, lambda: None)
        executor = MultiThreadedExecutor(num_threads=2, context=context)
        executor.add_node(node)
        died: list[BaseException] = []
        stop = threading.Event()

        def spin() -> None:
            try:
                while not stop.is_set():
                    executor.spin_once(timeout_sec=0.01)
            except BaseException as exc:  # the executor thread's death is the failure
                died.append(exc)

        spinner = threading.Thread(target=spin)
        spinner.start()
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-5)
        cycles = 0
        try:
            while cycles < 5000 and not died:
                streams.configure_default(True, StreamParameters())  # opens ~/snapshots
                streams.configure_default(False, StreamParameters())  # closes it
                cycles += 1
        finally:
            sys.setswitchinterval(interval)
            stop.set()
            spinner.join(10.0)
            executor.shutdown()
            node.destroy_node()
            context.try_shutdown()
    assert not died, f"the executor died after {cycles} open/close cycles: {died[0]!r}"

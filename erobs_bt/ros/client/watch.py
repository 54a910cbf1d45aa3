"""The terminal tree watcher's ROS source: ``erobs-bt watch`` (without ``--url``).

Subscribes to the node's latched ``~/tree_snapshot`` (``erobs_bt_interfaces/msg/TreeSnapshot``)
and ``~/execution_state`` topics and draws them with the watcher of :mod:`erobs_bt.viz.watch`
(:func:`~erobs_bt.viz.watch.picture_from_ros`, :func:`~erobs_bt.viz.watch.render_picture`).
rclpy is imported only when a ROS watch starts; discovery stays on localhost unless the
user chose otherwise (:func:`erobs_bt.backends.ros2_control.context.ensure_localhost_discovery`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.text import Text

from erobs_bt.viz.watch import picture_from_ros, render_picture

#: [s] how long ``watch --once`` waits for the other latched topic after the first arrived.
DEFAULT_GRACE = 3.0


def _await_latched(
    latest: dict[str, Any],
    changed: threading.Condition,
    stop: threading.Event,
    *,
    timeout: float,
    grace: float,
) -> tuple[Any, Any]:
    """Wait for the latched snapshot and state (see :func:`watch_ros`); returns both, either
    may be ``None``. A snapshot that does not show the state (another goal's, or an older
    tree of the same goal from the latched history:
    :func:`erobs_bt.ros.client.client.shows_state`) is waited past until ``timeout`` (then the
    newest one is returned). ``latest`` is read only under ``changed``'s lock: ``tree`` is the
    :class:`~erobs_bt.ros.snapshots.TreeState` of ``snapshot``."""
    from erobs_bt.ros.client.client import shows_state

    start = time.monotonic()
    deadline = start + timeout
    first_at: float | None = None
    with changed:
        while not stop.is_set():
            snapshot, state = latest["snapshot"], latest["state"]
            if snapshot is not None and state is not None and shows_state(latest["tree"], state):
                break
            now = time.monotonic()
            if first_at is None and (snapshot is not None or state is not None):
                first_at = now
            limit = deadline if first_at is None else min(deadline, first_at + grace)
            if first_at is not None and (snapshot is None or state is not None):
                # the snapshot (of the state's goal) is what is drawn: wait for it the full timeout
                limit = deadline
            if now >= limit:
                break
            changed.wait(min(0.25, limit - now))
        return latest["snapshot"], latest["state"]


def watch_ros(
    node: str,
    *,
    console: Console,
    once: bool,
    timeout: float = 10.0,
    stop: threading.Event | None = None,
    grace: float = DEFAULT_GRACE,
) -> int:
    """Draw the tree snapshots of the ``erobs_bt`` node ``node`` until interrupted.

    With ``once``, both latched topics are awaited: the snapshot (within ``timeout``) and
    the execution state. The two arrive independently (one subscription each), so drawing
    on the first would show ``state ?``; after the first of them has arrived, the other is
    awaited for at most ``grace`` more seconds (never past ``timeout``). A node that has
    published no state within that time is drawn with ``state ?`` and a note.

    Args:
        node: the node's fully qualified name (``/erobs_bt``).
        console: where to draw.
        once: print the latched snapshot and state (the last ones published) and return.
        timeout: with ``once``, how long to wait for the snapshot [s].
        stop: set it to end the watch.
        grace: [s] with ``once``, the longest wait for the second latched topic.

    Returns:
        0, or 1 when ``once`` and no snapshot arrived in time.
    """
    from erobs_bt_interfaces.msg import ExecutionState, TreeSnapshot
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rich.live import Live

    from erobs_bt.backends.ros2_control.context import init_context
    from erobs_bt.ros.client.client import default_names
    from erobs_bt.rosqos import latched_qos

    names = default_names(node)
    stop = stop or threading.Event()
    # The spin thread writes, this thread reads: every access under the condition's lock.
    changed = threading.Condition()
    latest: dict[str, Any] = {"snapshot": None, "tree": None, "state": None, "count": 0}

    def keep(key: str) -> Callable[[Any], None]:
        def callback(message: Any) -> None:
            with changed:
                latest[key] = message
                latest["count"] += 1
                changed.notify_all()

        return callback

    # ~/tree_snapshot sends a full tree, then deltas: rebuild the full tree from them.
    from erobs_bt.ros.convert import snapshot_from_msg, snapshot_to_msg
    from erobs_bt.ros.params import SNAPSHOT_DEPTH
    from erobs_bt.ros.snapshots import SnapshotAssembler

    assembler = SnapshotAssembler()
    keep_snapshot = keep("snapshot")

    def on_snapshot(message: Any) -> None:
        tree = assembler.add(snapshot_from_msg(message))
        if tree is not None:
            msg = snapshot_to_msg(tree, with_json=False)
            with changed:  # an RLock: the tree and its message change together
                latest["tree"] = tree
                keep_snapshot(msg)

    context = init_context()
    ros_node = Node("erobs_bt_watch", context=context, start_parameter_services=False)
    ros_node.create_subscription(
        TreeSnapshot, names["tree_snapshot"], on_snapshot, latched_qos(SNAPSHOT_DEPTH)
    )
    ros_node.create_subscription(ExecutionState, names["execution_state"], keep("state"), latched_qos())
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(ros_node)
    spinning = threading.Event()
    spinning.set()

    def spin() -> None:
        # spin_once in a loop, so the loop (not executor.shutdown) ends the spinning and
        # no callback is in flight when the executor is shut down.
        while spinning.is_set() and context.ok():
            executor.spin_once(timeout_sec=0.1)

    spinner = threading.Thread(target=spin, name="erobs_bt-watch", daemon=True)
    spinner.start()

    def current() -> dict[str, Any]:
        with changed:
            return picture_from_ros(latest["snapshot"], latest["state"])

    try:
        if once:
            snapshot, state = _await_latched(latest, changed, stop, timeout=timeout, grace=grace)
            if snapshot is None:
                console.print(
                    f"[bold red]no tree snapshot from {names['tree_snapshot']} within {timeout:g} s[/]"
                )
                return 1
            console.print(render_picture(picture_from_ros(snapshot, state), source=names["tree_snapshot"]))
            if state is None:
                console.print(f"[yellow]no execution state from {names['execution_state']} yet[/]")
            return 0
        with Live(
            Text(f"waiting for {names['tree_snapshot']} …"), console=console, refresh_per_second=8
        ) as live:
            seen = 0
            while not stop.is_set():
                with changed:
                    if latest["count"] == seen:
                        changed.wait(0.25)
                    fresh, seen = latest["count"] != seen, latest["count"]
                if fresh:
                    live.update(render_picture(current(), source=names["tree_snapshot"]))
        return 0
    finally:
        spinning.clear()
        spinner.join(5.0)
        executor.shutdown()
        ros_node.destroy_node()
        context.try_shutdown()

"""Running one rclpy node as a process until SIGINT/SIGTERM: the one guarded spin loop.

Both ``erobs_bt_node`` and ``erobs_bt_sim_hardware`` run the same way:

* ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` unless already set
  (:func:`erobs_bt.backends.ros2_control.context.ensure_localhost_discovery`);
* rclpy's own signal handlers are disabled (they shut the context down before the node
  could stop its motion and publish its final state); SIGINT/SIGTERM only write a byte to a
  pipe the main thread waits on (:class:`erobs_bt.commandline.SignalPipe`: a handler that
  took a lock, such as ``Event.set``'s, could interrupt the main thread inside that very
  lock: a deadlock, or a RecursionError when the signal is repeated);
* what start-up built is frozen out of the garbage collector's generations
  (``gc.freeze``: the collections during a goal do not walk it each time);
* the node is spun by a :class:`~rclpy.executors.MultiThreadedExecutor` on its own
  thread; the main thread waits for the signal or for that thread to die;
* a node that cannot start (``start_errors``) is answered with its message and
  :data:`EXIT_CONFIG`, after what it built is collected (no DDS participant is left to the
  interpreter's exit);
* on the way out the node's ``close()`` runs first (halt, stop, final messages), then the
  executor is shut down and its thread **joined before** ``destroy_node`` and
  ``rclpy.shutdown`` (without the join rclpy can abort; docs/ros2-from-pypi.md §3).
"""

from __future__ import annotations

import gc
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from erobs_bt.backends.ros2_control.context import ensure_localhost_discovery
from erobs_bt.commandline import SignalPipe

#: Exit status when the node could not start (a bad parameter, argument or file).
EXIT_CONFIG = 2
#: Exit status when the executor thread died (the node stopped serving): a supervisor
#: should restart it.
EXIT_EXECUTOR_DIED = 3


class ClosableNode(Protocol):
    """A node :func:`serve` can run: an rclpy node with a ``close()`` that stops its work."""

    def close(self) -> None: ...

    def destroy_node(self) -> None: ...


N = TypeVar("N", bound=ClosableNode)


def serve(
    name: str,
    ros_arguments: Sequence[str],
    make_node: Callable[[], N],
    *,
    threads: Callable[[N], int],
    on_ready: Callable[[N, str], None],
    start_errors: tuple[type[BaseException], ...] = (ValueError, OSError),
    poll: float = 0.5,
) -> int:
    """Run ``make_node()`` until SIGINT or SIGTERM (call from the main thread).

    Args:
        name: the process name for rclpy's arguments and for messages (``erobs_bt``).
        ros_arguments: ROS command-line arguments (``["--ros-args", "-r", "__ns:=/cell2"]``).
        make_node: builds the node (after ``rclpy.init``).
        threads: the executor's worker threads for the node.
        on_ready: called once the node spins, with the node and the discovery range text.
        start_errors: exceptions of ``make_node`` that mean a bad configuration: printed
            (``<name>: cannot start: ...``) and answered with :data:`EXIT_CONFIG`.
        poll: how often [s] the main thread checks that the executor thread lives.

    Returns:
        0 after a clean shutdown on a signal, :data:`EXIT_CONFIG`, or
        :data:`EXIT_EXECUTOR_DIED` when the executor thread stopped on its own (the node
        is still closed cleanly first).
    """
    discovery = ensure_localhost_discovery()
    rclpy.init(args=[name, *ros_arguments], signal_handler_options=SignalHandlerOptions.NO)
    # The self-pipe: a signal handler only writes to it (no lock), the main thread selects on it.
    signals = SignalPipe((signal.SIGINT, signal.SIGTERM))
    stopped = False
    try:
        try:
            node = make_node()
        except start_errors as exc:
            print(f"{name}: cannot start: {exc}", file=sys.stderr, flush=True)
            failed = True
        else:
            failed = False
        if failed:
            # The node that failed half-way has stopped its threads and destroyed itself
            # (ErobsBtNode); collect what the exception's frames still held of it now, while
            # the context is up, so that no DDS participant is left for the interpreter's and
            # the DDS library's exit to tear down in the wrong order (a rare segfault).
            gc.collect()
            return EXIT_CONFIG
        # What start-up built (modules, the node, the engine, the cell) lives as long as
        # the process: move it out of the collector's generations, so the collections a
        # goal's many short-lived objects trigger do not walk it again and again, holding
        # the GIL (gc.freeze; start-up garbage is collected first).
        gc.collect()
        gc.freeze()
        executor = MultiThreadedExecutor(num_threads=threads(node))
        executor.add_node(node)  # type: ignore[arg-type]
        died: list[BaseException] = []

        def spin() -> None:
            try:
                executor.spin()
            except BaseException as exc:
                died.append(exc)
                print(
                    f"{name}: the executor thread died: {type(exc).__name__}: {exc}\n"
                    f"{traceback.format_exc()}",
                    file=sys.stderr,
                    flush=True,
                )

        spinner = threading.Thread(target=spin, name=f"{name}-executor")
        spinner.start()
        try:
            on_ready(node, discovery)
            while spinner.is_alive():
                if signals.wait(poll):
                    stopped = True
                    break
        finally:
            node.close()
            executor.shutdown()
            spinner.join()
            node.destroy_node()
        executor_died = bool(died) or not stopped
        # A dead executor's exception keeps the callback that raised "in use", so rclpy
        # defers finalising the destroyed node (and rmw keeps its DDS participant, servers
        # and all, in the domain) until a garbage collection: drop the last references and
        # collect now, so the node has left the graph when serve() returns (erobs_bt.ros.domain).
        died.clear()
        del node
        executor = None  # type: ignore[assignment]
        gc.unfreeze()  # the frozen start-up objects (the node among them) are collectable again
        gc.collect()
        if executor_died:
            print(f"{name}: exiting because the executor stopped serving", file=sys.stderr, flush=True)
            return EXIT_EXECUTOR_DIED
        return 0
    finally:
        signals.close()
        if rclpy.ok():
            rclpy.shutdown()


__all__ = ["EXIT_CONFIG", "EXIT_EXECUTOR_DIED", "ClosableNode", "serve"]

"""What the simulated ROS nodes share as processes: their events, their close and their run.

``erobs_bt_sim_hardware`` (:mod:`erobs_bt.doubles.sim_hardware`) and ``erobs_bt_sim_move_group``
(:mod:`erobs_bt.doubles.sim_move_group`) each hold a :class:`NodeEvents` (the latched
``~/events`` topic of JSON events and the closing flag), end with :func:`stop_controller`, and
run through :func:`run_sim` (the checks of ``--speed``/``--rate``, the "cannot start" answer, the
ready line and :func:`erobs_bt.ros.process.serve` with the simulators' settings).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from argparse import Namespace
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from rclpy.node import Node
from rclpy.qos import QoSProfile
from std_msgs.msg import String

from erobs_bt.backends.base import JointStateListener
from erobs_bt.ros.process import EXIT_CONFIG, ClosableNode, serve

N = TypeVar("N", bound=ClosableNode)


class NodeEvents:
    """A simulated node's ``~/events`` topic (``std_msgs/String``, one JSON object a message:
    ``{"event": kind, "t": wall time [s, 4 decimals], **fields}``) and its closing flag.

    Args:
        node: the node that publishes.
        qos: the topic's QoS (the simulators' latched profile).

    Attributes:
        closing: set once the node closes (:meth:`begin_close`); nothing is published after.
    """

    def __init__(self, node: Node, qos: QoSProfile) -> None:
        self._node = node
        self.closing = threading.Event()
        self._publisher = node.create_publisher(String, "~/events", qos)

    def live(self) -> bool:
        """False once the node closes or its context is shut down (publish nothing then)."""
        return not self.closing.is_set() and self._node.context.ok()

    def publish(self, kind: str, **fields: Any) -> None:
        """Publish one event (``fields`` must be JSON-serialisable); nothing when not :meth:`live`."""
        if not self.live():
            return
        self._publisher.publish(
            String(data=json.dumps({"event": kind, "t": round(time.time(), 4), **fields}))
        )

    def begin_close(self) -> bool:
        """Publish the ``shutdown`` event and set :attr:`closing`; False (and nothing done) when
        the node is already closing."""
        if self.closing.is_set():
            return False
        self.publish("shutdown")
        self.closing.set()
        return True


class StoppableController(Protocol):
    """What :func:`stop_controller` needs of a simulated arm controller."""

    def stop(self) -> None: ...

    def wait_idle(self, timeout: float | None = None) -> bool: ...

    def remove_listener(self, listener: JointStateListener) -> None: ...

    def shutdown(self) -> None: ...


def stop_controller(controller: StoppableController, listener: JointStateListener) -> None:
    """Stop the simulated arm, wait up to 5 s for it to be idle, drop the node's joint-state
    ``listener`` and shut the controller down."""
    controller.stop()
    controller.wait_idle(5.0)
    controller.remove_listener(listener)
    controller.shutdown()


def run_sim(
    name: str,
    args: Namespace,
    ros_args: Sequence[str],
    configure: Callable[[], Callable[[], N]],
    ready: Callable[[N], str],
) -> int:
    """Check ``args``, configure and serve a simulated node until SIGINT/SIGTERM.

    Args:
        name: the process name (``erobs_bt_sim_hardware``), in messages and rclpy's arguments.
        args: the parsed command line; ``args.speed`` and ``args.rate`` must be > 0.
        ros_args: the ROS arguments for rclpy.
        configure: reads and checks the rest of the configuration, returns what builds the
            node; raises ``ValueError``/``OSError`` for a bad one.
        ready: the node's ready line; `` (ROS_DOMAIN_ID=<id>, discovery <range>)`` is appended
            and the line printed once the node spins.

    Returns:
        The exit status: 0, 2 (:data:`~erobs_bt.ros.process.EXIT_CONFIG`) for bad arguments or
        configuration (``<name>: cannot start: <reason>`` on stderr), 3 when the executor died
        (:func:`erobs_bt.ros.process.serve`, 8 threads; a ``ValueError`` of the node's start
        is a bad configuration).
    """
    try:
        if not (args.speed > 0.0) or not (args.rate > 0.0):
            raise ValueError("--speed and --rate must be > 0")
        make_node = configure()
    except (ValueError, OSError) as exc:
        print(f"{name}: cannot start: {exc}", file=sys.stderr, flush=True)
        return EXIT_CONFIG

    def on_ready(node: N, discovery: str) -> None:
        print(
            f"{ready(node)} (ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}, discovery {discovery})",
            flush=True,
        )

    return serve(
        name,
        ros_args,
        make_node,
        threads=lambda node: 8,
        on_ready=on_ready,
        start_errors=(ValueError,),
        poll=0.2,
    )

"""Helpers for tests that run ``erobs_bt_sim_hardware`` (the simulated cell as a hardware node).

* :class:`HardwareProcess` starts ``python -m erobs_bt.doubles.sim_hardware`` with options in the
  reserved domain (:func:`ros_fixtures.ros_environment`), waits for its ready line and stops
  it by its PID (SIGINT, or SIGKILL for the "driver died" scenarios).
* :class:`HardwareObserver` is an rclpy node in this process, in its own context: it records
  the hardware's ``~/events`` (JSON, transient local) and ``/joint_states``, and offers raw
  FollowJointTrajectory / SetIO clients for testing the hardware node on its own.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from control_msgs.action import FollowJointTrajectory
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from ros_fixtures import REPO, RosEnvironment, RosProcess
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from ur_msgs.srv import SetIO

from erobs_bt.backends.ros2_control.action_client import ActionClient
from erobs_bt.backends.ros2_control.context import init_context
from erobs_bt.doubles.sim_hardware import NODE_NAME, READY_PREFIX
from erobs_bt.ros.client.client import Recorder, latched_qos

HARDWARE_CONFIG = REPO / "config" / "ur5e_ros2_control.yaml"


class HardwareProcess(RosProcess):
    """``erobs_bt_sim_hardware`` in a subprocess (:class:`ros_fixtures.RosProcess`).

    Args:
        environment: the reserved domain's environment.
        options: command-line options (``["--speed", "20", "--faults", "..."]``).
        env: extra environment variables.
    """

    def __init__(
        self, environment: RosEnvironment, options: Sequence[str] = (), env: dict[str, str] | None = None
    ) -> None:
        super().__init__(
            environment,
            [sys.executable, "-m", "erobs_bt.doubles.sim_hardware", *options],
            READY_PREFIX,
            env=env,
        )


class HardwareObserver:
    """Records what the hardware node reports, and talks to it with raw clients.

    Attributes:
        events: every ``~/events`` message, decoded.
        joint_states: ``/joint_states`` messages.

    Args:
        domain_id: the ROS domain to join (the fixture's ``environment.domain_id``).
    """

    def __init__(self, domain_id: int) -> None:
        self.context = init_context(domain_id)
        self.node = Node("hardware_observer", context=self.context, start_parameter_services=False)
        self.events: Recorder[dict[str, Any]] = Recorder()
        self.joint_states: Recorder[Any] = Recorder(maxlen=20_000)
        self.node.create_subscription(
            String, f"/{NODE_NAME}/events", lambda m: self.events.add(json.loads(m.data)), latched_qos(10000)
        )
        self.node.create_subscription(JointState, "/joint_states", self.joint_states.add, 100)
        self.trajectory: ActionClient = ActionClient(
            self.node, FollowJointTrajectory, "/scaled_joint_trajectory_controller/follow_joint_trajectory"
        )
        self.set_io: Any = self.node.create_client(SetIO, "/io_and_status_controller/set_io")
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set() and self.context.ok():
            self._executor.spin_once(timeout_sec=0.05)

    def of(self, kind: str, since: int = 0) -> list[dict[str, Any]]:
        """The events of ``kind`` received after the first ``since`` events."""
        return [e for e in self.events.items()[since:] if e["event"] == kind]

    def wait_count(
        self, kind: str, count: int, since: int = 0, timeout: float = 30.0
    ) -> list[dict[str, Any]]:
        """The events of ``kind`` after the first ``since``, once at least ``count`` of them
        arrived (or what arrived within ``timeout``). The hardware publishes its events on a
        topic of its own, so the one for a goal's result can arrive after the result itself."""
        # Counted once per wake-up, at the newest event (not once per event kept).
        self.events.wait_for(
            lambda e: e is self.events.latest() and len(self.of(kind, since)) >= count, timeout, since=since
        )
        return self.of(kind, since)

    def wait_event(self, kind: str, timeout: float = 30.0, *, since: int = 0, **match: Any) -> dict[str, Any]:
        found = self.events.wait_for(
            lambda e: e["event"] == kind and all(e.get(k) == v for k, v in match.items()),
            timeout,
            since=since,
        )
        assert found is not None, f"no {kind} event {match}; got {self.events.items()[since:]}"
        return found

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._executor.shutdown()
        self.trajectory.destroy()
        self.node.destroy_node()
        self.context.try_shutdown()


def write_hardware_config(path: Path, **overrides: Any) -> Path:
    """A copy of ``config/ur5e_ros2_control.yaml`` with top-level sections updated (e.g. ``timeouts``)."""
    import yaml

    data = yaml.safe_load(HARDWARE_CONFIG.read_text())
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path.write_text(yaml.safe_dump(data))
    return path

"""Action requests from a thread other than the one that spins the node (erobs_bt's
ActionClient, erobs_bt/backends/ros2_control/action_client.py), and RosLink.run_in_executor.

Jazzy's rclpy files a request's future only after sending it, and drops an answer that the spin
thread takes in between: the future never completes. Every action client of erobs_bt sends its
requests from the thread that waits (the step's thread, a client's caller), so each must get
every answer. (The window is a few microseconds: rclpy's own client lost no answer in 3,000
goals here either, so the stress test guards the class rather than reproduces the loss.)"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from ros_fixtures import RosEnvironment

from erobs_bt.backends.ros2_control.link import RosLink

pytestmark = pytest.mark.ros

#: Goals in the stress test (each answered at once by an in-process server).
GOALS = int(os.environ.get("EROBS_BT_ACTION_STRESS_GOALS", "300"))


def _serve_and_send(client_type: Any, domain_id: int) -> tuple[int, int]:
    """Send :data:`GOALS` goals, one after another, from this thread to a server in the same
    process, spun by another thread; each waits for its accept and its result (up to 5 s).
    Returns (goals answered, results received)."""
    from control_msgs.action import GripperCommand
    from rclpy.action import ActionServer

    link = RosLink("action_stress", domain_id=domain_id, start=False)
    try:

        def execute(goal_handle: Any) -> Any:
            goal_handle.succeed()
            return GripperCommand.Result(reached_goal=True)

        server = ActionServer(link.node, GripperCommand, "stress", execute_callback=execute)
        client = client_type(link.node, GripperCommand, "stress")
        link.start()
        assert client.wait_for_server(timeout_sec=10.0)
        answered = results = 0
        for _ in range(GOALS):
            sent = client.send_goal_async(GripperCommand.Goal())
            if not _wait(sent, 5.0):
                break
            answered += 1
            if not _wait(sent.result().get_result_async(), 5.0):
                break
            results += 1
        link.run_in_executor(client.destroy)
        link.run_in_executor(server.destroy)
        return answered, results
    finally:
        link.close()


def _wait(future: Any, timeout: float) -> bool:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    return done.wait(timeout)


def test_every_goal_and_result_sent_from_another_thread_is_answered(ros_env: RosEnvironment) -> None:
    from erobs_bt.backends.ros2_control.action_client import ActionClient

    assert _serve_and_send(ActionClient, ros_env.domain_id) == (GOALS, GOALS)


def test_a_request_that_raises_is_raised_to_the_caller_and_the_link_spins_on(ros_env: RosEnvironment) -> None:
    link = RosLink("spin_thread_raises", domain_id=ros_env.domain_id)
    try:

        def fails() -> None:
            raise ValueError("a request the client refused")

        with pytest.raises(ValueError, match="a request the client refused"):
            link.run_in_executor(fails)
        ran_in: list[threading.Thread] = []
        assert link.run_in_executor(lambda: ran_in.append(threading.current_thread()) or 7) == 7
        assert ran_in[0] is not threading.current_thread(), "not run in the spin thread"
        assert ran_in[0].is_alive()
    finally:
        link.close()


def test_a_closed_link_runs_the_request_in_the_calling_thread(ros_env: RosEnvironment) -> None:
    link = RosLink("spin_thread_closed", domain_id=ros_env.domain_id)
    link.close()
    assert link.run_in_executor(threading.current_thread) is threading.current_thread()


def test_closing_a_link_with_action_clients_and_servers_leaves_the_domain(tmp_path: Path) -> None:
    """rclpy's ``Node.destroy_node`` does not destroy a node's waitables (action clients and
    servers), and a live one keeps the node's handle: the link's DDS participant stayed in the
    domain after :meth:`RosLink.close` (seen as ``DomainNotLeft`` when ``make bench`` closed a
    ``ros2_control`` backend). The link destroys them itself."""
    from control_msgs.action import FollowJointTrajectory
    from rclpy.action import ActionServer

    from erobs_bt.backends.ros2_control.action_client import ActionClient
    from erobs_bt.ros.domain import participant_ports, private_domain

    # A domain of its own (loopback, its log folder), strict: DomainNotLeft if a participant stays.
    with private_domain(tmp_path / "log") as environment:
        domain = environment.domain_id
        link = RosLink("left_domain", domain_id=domain, start=False)
        ActionClient(link.node, FollowJointTrajectory, "left_domain_fjt")
        ActionServer(
            link.node,
            FollowJointTrajectory,
            "left_domain_fjt",
            execute_callback=lambda handle: FollowJointTrajectory.Result(),
        )
        link.start()
        assert participant_ports(domain) != []
        link.close()
        assert list(link.node.waitables) == []
        assert participant_ports(domain) == []

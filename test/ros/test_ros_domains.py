"""In-process ROS users talk in exactly the domain they are given, and a domain is not given
back while this process is still in it (:mod:`erobs_bt.ros.domain`).

The suite used to depend on its file order: an in-process node whose executor had died left
its DDS participant (with an ``/erobs_bt`` action server that answers nobody) in its domain
until a garbage collection, the fixture gave the domain back, and a later module that
reserved the same domain sent its goal to that dead server.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from domain_coordinator.impl import PORT_BASE
from ros_fixtures import NodeProcess, ros_environment

from erobs_bt.backends.ros2_control.context import init_context
from erobs_bt.ros.client.client import ErobsBtClient
from erobs_bt.ros.domain import (
    DomainNotLeft,
    held_domains,
    participant_ports,
    reclaim,
    reserved_domain,
)

from helpers import wait_for

pytestmark = pytest.mark.ros

LED = json.dumps(
    {
        "start_gripper": "pipettor",
        "tasks": [{"task_type": "pipettor", "operation": "SET_LED", "led_color": {"r": 0, "g": 1, "b": 0}}],
    }
)


def graph(client: ErobsBtClient) -> set[str]:
    return {f"{ns.rstrip('/')}/{name}" for name, ns in client.node.get_node_names_and_namespaces()}


def test_two_domains_in_one_process_each_client_reaches_only_its_own_node(tmp_path: Path) -> None:
    with ros_environment(tmp_path / "log_a") as a:
        node_a = NodeProcess(a, {"speed": 20}, ros_arguments=["-r", "__ns:=/a"]).start()
        try:
            with ros_environment(tmp_path / "log_b") as b:
                node_b = NodeProcess(b, {"speed": 20}, ros_arguments=["-r", "__ns:=/b"]).start()
                try:
                    # The environment names domain b now; each client is given its own.
                    with (
                        ErobsBtClient("/a/erobs_bt", domain_id=a.domain_id) as in_a,
                        ErobsBtClient("/b/erobs_bt", domain_id=b.domain_id) as in_b,
                    ):
                        assert (in_a.domain_id, in_b.domain_id) == (a.domain_id, b.domain_id)
                        assert in_a.wait_for_server(30.0), node_a.output
                        assert in_b.wait_for_server(30.0), node_b.output
                        for client in (in_a, in_b):
                            run = client.send(LED)
                            assert run.accepted, run.rejection
                            assert run.wait(60.0).success, run.result
                        # Both graphs are discovered (each client found and used its node)
                        # and neither holds the other domain's node. (Node names come with
                        # DDS discovery of the ros_discovery_info topic, which can arrive after
                        # the endpoints a goal needs: wait for them.)
                        wait_for(
                            lambda: "/a/erobs_bt" in graph(in_a), 30.0, "/a/erobs_bt in domain a's graph"
                        )
                        wait_for(
                            lambda: "/b/erobs_bt" in graph(in_b), 30.0, "/b/erobs_bt in domain b's graph"
                        )
                        assert "/b/erobs_bt" not in graph(in_a) and "/a/erobs_bt" not in graph(in_b)
                finally:
                    assert node_b.stop() == 0, node_b.output
        finally:
            assert node_a.stop() == 0, node_a.output
    assert participant_ports(a.domain_id) == [] and participant_ports(b.domain_id) == []


def test_a_domain_this_process_is_still_in_is_kept_reserved_until_it_is_left() -> None:
    from rclpy.node import Node

    with pytest.raises(DomainNotLeft) as raised, reserved_domain() as domain:
        context = init_context(domain)
        node = Node("left_behind", context=context, start_parameter_services=False)

    assert raised.value.domain_id == domain and raised.value.ports == participant_ports(domain) != []
    assert domain in held_domains()
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(OSError):  # ros-domain-coordinator's reservation is still bound
            probe.bind(("", PORT_BASE + domain))
    finally:
        probe.close()

    node.destroy_node()
    context.try_shutdown()
    assert participant_ports(domain) == []
    assert domain in reclaim() and domain not in held_domains()


def test_a_domain_another_process_is_still_in_is_skipped() -> None:
    """A reservation only proves that no *reserving* process holds a domain; a straggler
    that outlived its reservation (a leaked node, another suite's) may still be in it. A
    domain with any bound RTPS port is skipped."""
    with reserved_domain() as first:
        pass  # the domain the coordinator hands out next (it is free again now)
    straggler = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        straggler.bind(("127.0.0.1", 7400 + 250 * first + 11))  # a unicast port of domain `first`
        assert participant_ports(first, any_process=True) == [7400 + 250 * first + 11]
        with reserved_domain() as chosen:
            assert chosen != first
            assert participant_ports(chosen, any_process=True) == []
    finally:
        straggler.close()

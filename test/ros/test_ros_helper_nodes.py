"""The node's helpers in the ROS graph, and which of its parameters can be set.

The launch file's ``hardware:=sim`` under a namespace (run as the command lines launch_ros
would run, :mod:`erobs_bt.ros.node.launching`): the hardware node and the erobs_bt node with
the ``ros2_control`` backend, whose link to the hardware is a node of its own in the same
process. That helper must not take the process's ``-r __node:=erobs_bt`` remap: the graph
holds one ``/cell2/erobs_bt``, and it answers its parameters every time (as ``ros2 param get``
asks them). The README's list of writable parameters is checked against the live node.
"""

from __future__ import annotations

import fnmatch
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ros_fixtures import READY_PREFIX, REPO, RosProcess, ros_environment

from erobs_bt.backends.ros2_control.context import init_context
from erobs_bt.backends.ros2_control.link import LINK_NODE_NAME
from erobs_bt.doubles.sim_hardware import NODE_NAME as HARDWARE_NAME
from erobs_bt.doubles.sim_hardware import READY_PREFIX as HARDWARE_READY
from erobs_bt.ros.node.launching import node_specs

pytestmark = pytest.mark.ros


def result(future: Any, timeout: float = 10.0) -> Any:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout), "no reply"
    return future.result()


@pytest.fixture(scope="module")
def launched_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, RosProcess]]:
    """``hardware:=sim namespace:=cell2``: the hardware process, then the node process; an
    in-process observer node with a parameter client for ``/cell2/erobs_bt``."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter_client import AsyncParameterClient

    hardware_spec, node_spec = node_specs({"namespace": "cell2", "hardware": "sim"})
    logs = tmp_path_factory.mktemp("helper_run_logs")
    with ros_environment(tmp_path_factory.mktemp("helper_ros_log")) as environment:
        hardware = RosProcess(
            environment, hardware_spec.command([sys.executable, "-m", hardware_spec.module]), HARDWARE_READY
        )
        node = RosProcess(
            environment,
            [*node_spec.command([sys.executable, "-m", node_spec.module]), "-p", f"run_log_dir:={logs}"],
            READY_PREFIX,
        )
        started: list[RosProcess] = []
        context = init_context(environment.domain_id)
        observer = Node("helper_test_observer", context=context, start_parameter_services=False)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(observer)
        stop = threading.Event()
        spinner = threading.Thread(
            target=lambda: [executor.spin_once(timeout_sec=0.05) for _ in iter(lambda: stop.is_set(), True)],
            daemon=True,
        )
        spinner.start()
        try:
            for process in (hardware, node):
                process.start()
                started.append(process)
            parameters = AsyncParameterClient(observer, "/cell2/erobs_bt")
            assert parameters.wait_for_services(30.0), node.output
            yield observer, parameters, node
        finally:
            stop.set()
            spinner.join(10.0)
            executor.shutdown()
            observer.destroy_node()
            context.try_shutdown()
            for process in reversed(started):
                process.stop()


def test_the_backends_helper_node_has_its_own_name_beside_the_node(
    launched_sim: tuple[Any, Any, RosProcess],
) -> None:
    """Regression: the ``ros2_control`` backend's node was initialised with the process's
    arguments, so ``-r __node:=erobs_bt`` renamed it too: two ``/cell2/erobs_bt``, and
    ``ros2 param get /cell2/erobs_bt backend`` answered "Parameter not set" in 4 of 10 tries."""
    observer, parameters, node = launched_sim
    expected = {("erobs_bt", "/cell2"), (LINK_NODE_NAME, "/cell2"), (HARDWARE_NAME, "/cell2")}
    deadline = time.monotonic() + 30.0
    names = observer.get_node_names_and_namespaces()
    while not expected <= set(names) and time.monotonic() < deadline:
        time.sleep(0.05)  # the observer's spin thread takes the graph updates
        names = observer.get_node_names_and_namespaces()
    assert expected <= set(names), names
    assert names.count(("erobs_bt", "/cell2")) == 1, names
    for attempt in range(10):  # a second node of that name would answer some of them
        backend, speed = result(parameters.get_parameters(["backend", "speed"])).values
        assert backend.string_value == "ros2_control", f"try {attempt + 1}: {backend}"
        assert speed.double_value == 1.0, f"try {attempt + 1}: {speed}"
    assert node.running(), node.output


#: The README's sentence naming the writable parameters (the rest are read-only).
WRITABLE_SENTENCE = re.compile(r"all parameters are read-only except (?P<names>.*?), and integers", re.S)


def test_the_readme_names_exactly_the_writable_parameters(launched_sim: tuple[Any, Any, RosProcess]) -> None:
    """Regression: the README said every parameter is read-only but ``default_snapshot_*``;
    rclpy's ``use_sim_time`` is writable too."""
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue

    _observer, parameters, _node = launched_sim
    names = result(parameters.list_parameters()).result.names
    described = result(parameters.describe_parameters(list(names))).descriptors
    writable = {d.name for d in described if not d.read_only}
    match = WRITABLE_SENTENCE.search((REPO / "README.md").read_text())
    assert match is not None, "the README's parameter paragraph moved"
    # The parameter names (or name patterns) in backticks; `/clock` is a topic.
    quoted = re.findall(r"`([^`]+)`", match.group("names"))
    patterns = [n for n in quoted if re.fullmatch(r"[a-z][\w.]*\*?", n)]
    for name in writable:
        assert any(fnmatch.fnmatch(name, p) for p in patterns), f"{name} is writable; README names {patterns}"
    for pattern in patterns:
        assert fnmatch.filter(writable, pattern), f"README names {pattern}, which is not writable"
    assert "use_sim_time" in writable
    # Writable indeed: set it and read it back, then restore it.
    for value in (True, False):
        set_ = Parameter(
            name="use_sim_time", value=ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=value)
        )
        assert result(parameters.set_parameters([set_])).results[0].successful
        (read,) = result(parameters.get_parameters(["use_sim_time"])).values
        assert read.bool_value is value


def test_helper_contexts_take_no_process_arguments(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """In-process: a context from ``init_context`` ignores ``sys.argv``'s ROS arguments."""
    from rclpy.node import Node

    argv = ["erobs_bt_node", "--ros-args", "-r", "__node:=erobs_bt", "-r", "__ns:=/x"]
    monkeypatch.setattr(sys, "argv", argv)
    with ros_environment(tmp_path / "ros_log") as environment:
        context = init_context(environment.domain_id)
        try:
            helper = Node(LINK_NODE_NAME, context=context, namespace="/cell2", start_parameter_services=False)
            assert helper.get_fully_qualified_name() == f"/cell2/{LINK_NODE_NAME}"
            helper.destroy_node()
        finally:
            context.try_shutdown()

"""The launch file's arguments and nodes, run for real.

ROS 2's ``launch`` and ``launch_ros`` are not installable from PyPI (checked against the
package lists: no ``ros-launch*`` wheel; PyPI's ``launch`` is an unrelated 2017 package),
so ``ros2 launch`` cannot run here. What the launch file decides lives in
:mod:`erobs_bt.ros.launching`; these tests check the launch file uses it, check the
decisions, and run the command line ``launch_ros`` would run for the node, in a private
domain: the node appears under the namespace with a params-file value in effect, and is
stopped by its PID.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ros_fixtures import REPO, ros_environment

from erobs_bt.ros.launching import ARGUMENTS, NodeSpec, node_specs

LAUNCH_FILE = REPO / "launch" / "erobs_bt.launch.py"


def test_the_launch_file_declares_the_table_and_delegates_to_it() -> None:
    if importlib.util.find_spec("launch_ros") is not None:  # a ROS installation: load it for real
        spec = importlib.util.spec_from_file_location("erobs_bt_launch", LAUNCH_FILE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        declared = [a.name for a in module.generate_launch_description().get_launch_arguments()]
        assert declared == [name for name, _, _ in ARGUMENTS]
    tree = ast.parse(LAUNCH_FILE.read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "erobs_bt.ros.launching"
        for alias in node.names
    }
    assert {"ARGUMENTS", "node_specs"} <= imported
    doc = ast.get_docstring(tree) or ""
    for name, _, _ in ARGUMENTS:
        assert f"``{name}``" in doc, f"the launch file's docstring does not describe {name}"
    assert [name for name, _, _ in ARGUMENTS] == [
        "namespace",
        "params_file",
        "poses_file",
        "cell_config",
        "log_level",
        "use_sim_time",
        "hardware",
        "hardware_config",
    ]


def test_defaults_pass_only_the_params_file() -> None:
    (node,) = node_specs({}, params_file="/share/erobs_bt/config/erobs_bt.yaml")
    assert node.params_files == ("/share/erobs_bt/config/erobs_bt.yaml",)
    assert dict(node.overrides) == {}, "launch defaults must not override the params file"
    assert node.command() == [
        "erobs_bt_node",
        "--ros-args",
        "-r",
        "__node:=erobs_bt",
        "--params-file",
        "/share/erobs_bt/config/erobs_bt.yaml",
        "--log-level",
        "info",
    ]


def test_given_arguments_become_overrides_and_sim_hardware_starts_beside() -> None:
    hardware, node = node_specs(
        {
            "namespace": "cell2",
            "params_file": "/tmp/p.yaml",
            "poses_file": "/tmp/poses.yaml",
            "use_sim_time": "True",
            "hardware": "sim",
            "hardware_config": "/tmp/hw.yaml",
            "log_level": "debug",
        }
    )
    assert hardware.executable == "erobs_bt_sim_hardware" and hardware.namespace == "cell2"
    assert hardware.arguments == ("--config", "/tmp/hw.yaml") and hardware.params_files == ()
    assert node.params_files == ("/tmp/p.yaml",)
    assert dict(node.overrides) == {
        "poses_file": "/tmp/poses.yaml",
        "use_sim_time": True,
        "backend": "ros2_control",
        "hardware_config": "/tmp/hw.yaml",
    }
    assert node.ros_arguments()[-2:] == ["--log-level", "debug"]
    assert node.ros_arguments()[3:5] == ["-r", "__ns:=/cell2"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"hardware": "moveit"}, "hardware:=moveit: must be one of embedded, sim, ros2_control"),
        ({"log_level": "loud"}, "log_level:=loud: must be one of"),
        ({"use_sim_time": "yes please"}, "use_sim_time:=yes please: must be true or false"),
        ({"namespce": "x"}, "unknown launch argument"),
    ],
)
def test_bad_arguments_are_refused_naming_them(values: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        node_specs(values)


@pytest.fixture()
def launched(tmp_path: Path) -> Iterator[tuple[Any, NodeSpec, subprocess.Popen[str], list[str]]]:
    """The node as the launch file starts it: namespace cell9, a params file with speed 7."""
    params = tmp_path / "cell9.yaml"
    source = (REPO / "config" / "erobs_bt.yaml").read_text()
    params.write_text(source.replace("    speed: 1.0\n", "    speed: 7.0\n"))
    assert "speed: 7.0" in params.read_text()
    (spec,) = node_specs({"namespace": "cell9", "params_file": str(params)})
    with ros_environment(tmp_path / "ros_log") as environment:
        process = subprocess.Popen(
            spec.command([sys.executable, "-m", spec.module]),
            env=dict(environment.env),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line.rstrip("\n"))
                if line.startswith("erobs_bt ready"):
                    ready.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            while not ready.wait(0.05):
                assert process.poll() is None, "\n".join(lines)
            yield environment, spec, process, lines
        finally:
            if process.poll() is None:
                process.send_signal(2)  # SIGINT, by its PID
                try:
                    process.wait(30.0)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            reader.join(5.0)


def test_the_launched_node_runs_under_its_namespace_with_the_params_file_in_effect(
    launched: tuple[Any, NodeSpec, subprocess.Popen[str], list[str]],
) -> None:
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter_client import AsyncParameterClient

    _environment, _spec, process, lines = launched
    assert any("/cell9/erobs_bt/execute" in line for line in lines), lines
    context = Context()
    rclpy.init(context=context)
    node = Node("launch_test_client", context=context, start_parameter_services=False)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        client = AsyncParameterClient(node, "/cell9/erobs_bt")
        assert client.wait_for_services(30.0), "\n".join(lines)
        future = client.get_parameters(["speed", "backend"])
        executor.spin_until_future_complete(future, timeout_sec=10.0)
        assert future.done(), "no reply from /cell9/erobs_bt/get_parameters"
        speed, backend = future.result().values
        assert speed.double_value == 7.0, "the params file's value is in effect under the namespace"
        assert backend.string_value == "sim"
        deadline = time.monotonic() + 10.0
        while ("erobs_bt", "/cell9") not in node.get_node_names_and_namespaces():
            assert time.monotonic() < deadline, node.get_node_names_and_namespaces()
            executor.spin_once(timeout_sec=0.05)
    finally:
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()
    process.send_signal(2)
    assert process.wait(30.0) == 0, "\n".join(lines)

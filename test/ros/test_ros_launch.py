"""The launch file's arguments and nodes, run for real, and the venv as an ament prefix.

ROS 2's ``launch``, ``launch_ros`` and ``ros2cli`` (``ros2 launch``, ``ros2 run``) are not
installable from PyPI (checked with ``pip index versions``: no ``ros-launch-ros``, no
``py_trees_ros``; PyPI's ``launch`` is an unrelated 2017 package), so they cannot run in CI.
What the launch file decides lives in :mod:`erobs_bt.ros.node.launching`; these tests check the
launch file uses it, check the decisions, and run what ``launch_ros`` would run for the node:
the executable found the way ``launch_ros``'s ``Node(package=, executable=)`` and ``ros2 run``
find it (``<prefix>/lib/<package>/<executable>`` of the package's prefix in the ament index,
ament_index_python from PyPI), with the command line ``launch_ros`` builds, in a private
domain: the node appears under the namespace with a params-file value in effect, and is
stopped by its PID. scripts/setup.sh makes the venv that prefix (scripts/ament_prefix.py);
the README says what was also run by hand against the real ``ros2 launch``.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ros_fixtures import READY_PREFIX, REPO, RosProcess, ros_environment

from erobs_bt.ros.node.launching import ARGUMENTS, MODULES, PACKAGE, NodeSpec, node_specs

LAUNCH_FILE = REPO / "launch" / "erobs_bt.launch.py"


def executable_in_package(executable: str, package: str = PACKAGE) -> Path:
    """The file ``launch_ros``'s ``Node(package=, executable=)`` (its ``ExecutableInPackage``
    substitution) and ``ros2 run PACKAGE EXECUTABLE`` start: ``<prefix>/lib/<package>/
    <executable>``, ``<prefix>`` being the package's prefix in the ament index of
    ``AMENT_PREFIX_PATH``; both refuse a file that is missing or not executable."""
    from ament_index_python.packages import get_package_prefix

    path = Path(get_package_prefix(package)) / "lib" / package / executable
    assert path.is_file() and os.access(path, os.X_OK), f"{path}: no executable {executable} of {package}"
    return path


@pytest.fixture()
def venv_prefix(monkeypatch: pytest.MonkeyPatch) -> Path:
    """This venv alone as the ament prefix path (what scripts/env.sh sets)."""
    prefix = Path(sys.prefix)
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    return prefix


def test_the_venv_is_an_ament_prefix_for_launch_ros_and_ros2_run(venv_prefix: Path) -> None:
    """scripts/setup.sh's venv: the ament index knows erobs_bt, its share directory has what
    ``ros2 launch erobs_bt erobs_bt.launch.py`` loads, and ``lib/erobs_bt/`` has every executable
    the launch file starts."""
    from ament_index_python.packages import (
        get_package_prefix,
        get_package_share_directory,
        get_packages_with_prefixes,
    )

    assert get_packages_with_prefixes().get(PACKAGE) == str(venv_prefix)
    assert get_package_prefix(PACKAGE) == str(venv_prefix)
    share = Path(get_package_share_directory(PACKAGE))
    assert share == venv_prefix / "share" / PACKAGE
    assert "<name>erobs_bt</name>" in (share / "package.xml").read_text()
    assert (share / "launch" / "erobs_bt.launch.py").read_text() == LAUNCH_FILE.read_text()
    for name in ("erobs_bt.yaml", "cell.yaml", "vision_targets.yaml", "ur5e_ros2_control.yaml"):
        assert (share / "config" / name).is_file(), name
    for executable in MODULES:
        resolved = executable_in_package(executable).resolve()
        assert resolved == (venv_prefix / "bin" / executable).resolve(), executable
    # the params file the launch file uses by default is the installed share directory's one
    (node,) = node_specs({})
    assert Path(node.params_files[0]).resolve() == (share / "config" / "erobs_bt.yaml").resolve()


def test_a_given_params_file_needs_no_share_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``params_file:=`` is used as given: nothing looks up the installed share directory (the
    launch file called ``get_package_share_directory`` before reading the argument)."""
    import erobs_bt.paths

    def absent() -> Path:
        raise FileNotFoundError("erobs_bt data files not found")

    monkeypatch.setattr(erobs_bt.paths, "share_dir", absent)
    (node,) = node_specs({"params_file": str(tmp_path / "mine.yaml")})
    assert node.params_files == (str(tmp_path / "mine.yaml"),)
    with pytest.raises(FileNotFoundError, match="data files not found"):
        node_specs({})
    calls = {
        node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        for node in ast.walk(ast.parse(LAUNCH_FILE.read_text()))
        if isinstance(node, ast.Call)
    }
    assert "get_package_share_directory" not in calls, "the launch file looks up the share directory itself"
    assert "node_specs" in calls


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
        if isinstance(node, ast.ImportFrom) and node.module == "erobs_bt.ros.node.launching"
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
        "moveit_config",
    ]


def test_moveit_hardware_chooses_the_moveit_backend_and_sim_moveit_starts_the_simulated_move_group() -> None:
    (node,) = node_specs({"hardware": "moveit"}, params_file="p.yaml")
    assert node.overrides == {"backend": "moveit"}
    move_group, node = node_specs({"hardware": "sim_moveit", "namespace": "cell2"}, params_file="p.yaml")
    assert (move_group.executable, move_group.name, move_group.namespace) == (
        "erobs_bt_sim_move_group",
        "move_group",
        "cell2",
    )
    assert node.overrides["backend"] == "moveit"
    assert str(node.overrides["moveit_config"]).endswith("moveit_sim.yaml")
    (node,) = node_specs({"hardware": "moveit", "moveit_config": "/cell/moveit.yaml"}, params_file="p.yaml")
    assert node.overrides == {"backend": "moveit", "moveit_config": "/cell/moveit.yaml"}


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
        (
            {"hardware": "gazebo"},
            "hardware:=gazebo: must be one of embedded, sim, ros2_control, moveit, sim_moveit",
        ),
        ({"log_level": "loud"}, "log_level:=loud: must be one of"),
        ({"use_sim_time": "yes please"}, "use_sim_time:=yes please: must be true or false"),
        ({"namespce": "x"}, "unknown launch argument"),
    ],
)
def test_bad_arguments_are_refused_naming_them(values: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        node_specs(values)


@pytest.fixture()
def launched(
    tmp_path: Path, venv_prefix: Path
) -> Iterator[tuple[Any, NodeSpec, subprocess.Popen[str], list[str]]]:
    """The node as the launch file starts it: namespace cell9, a params file with speed 7; the
    executable found in the ament index as ``launch_ros`` finds it, started outside the
    checkout."""
    params = tmp_path / "cell9.yaml"
    source = (REPO / "config" / "erobs_bt.yaml").read_text()
    params.write_text(source.replace("    speed: 1.0\n", "    speed: 7.0\n"))
    assert "speed: 7.0" in params.read_text()
    (spec,) = node_specs({"namespace": "cell9", "params_file": str(params)})
    with ros_environment(tmp_path / "ros_log") as environment:
        node = RosProcess(
            environment,
            spec.command([str(executable_in_package(spec.executable))]),
            READY_PREFIX,
            env={"AMENT_PREFIX_PATH": str(venv_prefix)},
            cwd=tmp_path,
        ).start()
        try:
            assert node.process is not None
            yield environment, spec, node.process, node.lines
        finally:
            node.stop()


@pytest.mark.ros
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

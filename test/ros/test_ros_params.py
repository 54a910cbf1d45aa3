"""The node's parameters: one table (erobs_bt/ros/params.py) behind the declarations, the
docstring and config/erobs_bt.yaml; rclpy's parameter services reachable from a client;
integers accepted for doubles; the params file applied under any namespace."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from conftest import Cells
from ros_fixtures import REPO, NodeProcess

from erobs_bt.ros.node.node import PARAMETERS, ErobsBtNode
from erobs_bt.ros.params import SPECS, NodeSettings, coerce_parameter, render_params_file


# -- the table ------------------------------------------------------------------------------
def test_the_params_file_is_rendered_from_the_table_and_keyed_for_any_node() -> None:
    text = (REPO / "config" / "erobs_bt.yaml").read_text()
    assert text == render_params_file(), "regenerate: python -m erobs_bt.ros.params > config/erobs_bt.yaml"
    document = yaml.safe_load(text)
    assert list(document) == ["/**"]
    flat: dict[str, Any] = {}

    def flatten(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                flatten(f"{prefix}{key}.", item)
        else:
            flat[prefix[:-1]] = value

    flatten("", document["/**"]["ros__parameters"])
    assert flat == {spec.name: spec.default for spec in PARAMETERS}
    assert all(type(flat[name]) is type(spec.default) for name, spec in SPECS.items())


def test_the_node_docstring_lists_every_parameter_from_the_table() -> None:
    doc = ErobsBtNode.__doc__ or ""
    for spec in PARAMETERS:
        assert f"**{spec.name}**" in doc
        assert spec.description in doc
    assert "**~/snapshot_streams/open**" in doc and "**beambot_execution**" in doc


def test_settings_validate_with_the_parameter_name() -> None:
    assert NodeSettings.from_values({"speed": 20}).speed == 20.0
    assert NodeSettings.from_values({}).timeouts["moveto"] == 120.0
    with pytest.raises(ValueError, match=r"parameter speed: must be > 0 \(got 0.0\)"):
        NodeSettings.from_values({"speed": 0.0})
    with pytest.raises(ValueError, match="parameter executor_threads: must be >= 3"):
        NodeSettings.from_values({"executor_threads": 2})
    with pytest.raises(
        ValueError, match="parameter backend: must be one of sim, ros2_control, moveit, scripted"
    ):
        NodeSettings.from_values({"backend": "gazebo"})
    with pytest.raises(ValueError, match="parameter enable_batching: must be a bool"):
        NodeSettings.from_values({"enable_batching": 1})


def test_only_integers_for_double_parameters_are_coerced() -> None:
    assert coerce_parameter("speed", 20) == 20.0
    assert coerce_parameter("speed", 20.5) is None
    assert coerce_parameter("speed", True) is None
    assert coerce_parameter("cache_capacity", 3) is None
    assert coerce_parameter("unknown", 3) is None


def test_an_out_of_range_parameter_stops_the_node_with_exit_2(cells: Cells) -> None:
    process = NodeProcess(cells.environment, {"speed": 0}, ros_arguments=["-r", "__ns:=/bad"])
    with pytest.raises(RuntimeError, match="did not start"):
        process.start()
    assert process.stop() == 2
    assert "parameter speed: must be > 0 (got 0.0)" in process.output


# -- over the graph ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def parameter_client(cells: Cells) -> Iterator[Any]:
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter_client import AsyncParameterClient

    from erobs_bt.backends.ros2_control.context import init_context

    context = init_context(cells.environment.domain_id)
    node = Node("param_test_client", context=context, start_parameter_services=False)
    client = AsyncParameterClient(node, "/cell1/erobs_bt")
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.05)

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        assert client.wait_for_services(30.0), cells.nodes["cell1"].output
        yield client
    finally:
        stop.set()
        spinner.join()
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()


def result(future: Any) -> Any:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(10.0), "no reply from the parameter service"
    return future.result()


def test_parameters_are_listed_described_and_read_through_rclpy_services(parameter_client: Any) -> None:
    from rcl_interfaces.msg import ParameterType

    listed = result(parameter_client.list_parameters()).result.names
    assert set(SPECS) <= set(listed)
    described = result(parameter_client.describe_parameters(["speed", "default_snapshot_period"])).descriptors
    assert described[0].type == ParameterType.PARAMETER_DOUBLE and described[0].read_only
    assert described[0].description == SPECS["speed"].description
    assert described[1].type == ParameterType.PARAMETER_DOUBLE and not described[1].read_only
    values = result(parameter_client.get_parameters(["speed", "backend", "timeout.moveto"])).values
    # -p speed:=20 (an integer) was accepted as the double 20.0; the params file applied
    # under the /cell1 namespace (its backend and timeouts are the node's values).
    assert values[0].type == ParameterType.PARAMETER_DOUBLE and values[0].double_value == 20.0
    assert values[1].string_value == "sim" and values[2].double_value == 120.0


def test_set_parameters_refuses_read_only_and_out_of_range_and_takes_integers_for_doubles(
    parameter_client: Any,
) -> None:
    from rclpy.parameter import Parameter

    replies = result(
        parameter_client.set_parameters(
            [
                Parameter("speed", value=5.0),
                Parameter("default_snapshot_period", value=-1.0),
                Parameter("default_snapshot_period", value=3),
            ]
        )
    ).results
    assert not replies[0].successful and "read-only" in replies[0].reason
    assert not replies[1].successful and "default_snapshot_period: must be >= 0" in replies[1].reason
    assert replies[2].successful, replies[2].reason
    values = result(parameter_client.get_parameters(["default_snapshot_period", "speed"])).values
    assert values[0].double_value == 3.0 and values[1].double_value == 20.0
    result(parameter_client.set_parameters([Parameter("default_snapshot_period", value=2.0)]))


def test_the_plan_cache_byte_bound_is_a_parameter_the_engine_is_built_with() -> None:
    from erobs_bt.cache import DEFAULT_MAX_BYTES
    from erobs_bt.ros.node.node import engine_config
    from erobs_bt.session import build_engine

    assert SPECS["cache_max_bytes"].default == DEFAULT_MAX_BYTES and SPECS["cache_max_bytes"].read_only
    with pytest.raises(ValueError, match="parameter cache_max_bytes: must be >= 1"):
        NodeSettings.from_values({"cache_max_bytes": 0})
    engine = build_engine(
        engine_config(NodeSettings.from_values({"backend": "scripted", "cache_max_bytes": 4096}))
    )
    try:
        assert engine.orchestrator.cache.max_bytes == 4096
        assert engine.orchestrator.cache.capacity == SPECS["cache_capacity"].default
    finally:
        engine.close()


def test_the_plan_cache_byte_bound_is_read_through_the_parameter_services(parameter_client: Any) -> None:
    from rcl_interfaces.msg import ParameterType
    from rclpy.parameter import Parameter

    from erobs_bt.cache import DEFAULT_MAX_BYTES

    (value,) = result(parameter_client.get_parameters(["cache_max_bytes"])).values
    assert value.type == ParameterType.PARAMETER_INTEGER and value.integer_value == DEFAULT_MAX_BYTES
    (reply,) = result(parameter_client.set_parameters([Parameter("cache_max_bytes", value=1024)])).results
    assert not reply.successful and "read-only" in reply.reason

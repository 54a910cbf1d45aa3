"""The packaged hardware YAML (``config/ur5e_ros2_control.yaml``) against EROBS's own files.

EROBS's workspace (``../shared/samples/erobs/workspace``, a copy of bondada-a/erobs
``jazzy_dev`` @ 739cc0c) holds what runs on its cell: the SRDF xacro of its MoveIt
configuration (the grippers' named states), the per-tool controllers YAML (controller names,
types, parameters). Whatever the hardware YAML says about the same things must equal them.
Skipped without ../shared (a clone on its own), a failure in CI (:func:`conftest.require_samples`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import require_samples

from erobs_bt.backends.ros2_control import load_hardware_config
from erobs_bt.paths import config_file
from erobs_bt.world.beamline import expand_srdf

MOVEIT_CONFIG = Path("src/custom-ur-descriptions/cms_moveit_config")


@pytest.fixture(scope="module")
def workspace() -> Path:
    return require_samples() / "workspace"


def srdf_group_states(workspace: Path, gripper: str) -> dict[str, dict[str, float]]:
    """``state -> {joint: value}`` of every group_state EROBS's SRDF has with ``gripper:=<gripper>``."""
    srdf = expand_srdf(
        workspace / MOVEIT_CONFIG / "srdf" / "ur.srdf.xacro", gripper, workspace, source="test"
    )
    return {
        str(s.get("name")): {str(j.get("name")): float(j.get("value", "nan")) for j in s.iter("joint")}
        for s in srdf.iter("group_state")
    }


def controllers(workspace: Path, gripper: str) -> dict[str, Any]:
    """``controller -> ros__parameters`` of EROBS's ``<gripper>_controllers.yaml`` overlay."""
    data = yaml.safe_load((workspace / MOVEIT_CONFIG / "config" / f"{gripper}_controllers.yaml").read_text())
    return {name: entry["ros__parameters"] for name, entry in data["/**"].items()}


@pytest.mark.parametrize("gripper", ["hande", "2fg7", "epick"])
def test_the_finger_positions_are_the_group_states_of_erobs_srdf(workspace: Path, gripper: str) -> None:
    adapter = load_hardware_config(config_file("ur5e_ros2_control.yaml")).grippers[gripper]
    states = srdf_group_states(workspace, gripper)
    for name, target in adapter.states.items():
        joints = states[name]
        assert len(joints) == 1, joints  # one commanded finger joint
        (value,) = joints.values()
        assert target.position == pytest.approx(value, abs=1e-9), f"{gripper} {name}: {joints}"
    if adapter.joint:
        assert {j for s in adapter.states for j in states[s]} == {adapter.joint}


def test_the_hande_is_erobs_parallel_gripper_action_controller(workspace: Path) -> None:
    adapter = load_hardware_config(config_file("ur5e_ros2_control.yaml")).grippers["hande"]
    (name, params), *others = controllers(workspace, "hande").items()
    assert not others
    assert params["type"] == "parallel_gripper_action_controller/GripperActionController"
    assert adapter.adapter == "parallel_gripper"
    # The controller's action server is "~/gripper_cmd" (parallel_gripper_action_controller_impl.hpp).
    assert adapter.action == f"/{name}/gripper_cmd"
    assert adapter.joint == params["joint"]
    assert adapter.controller is not None
    assert adapter.controller.goal_tolerance == params["goal_tolerance"]
    assert adapter.controller.allow_stalling is params["allow_stalling"]
    assert adapter.controller.max_effort == params["max_effort"]
    assert params["max_effort_interface"] == ""  # so the goal's effort is ignored: none is sent


def test_the_epick_is_erobs_epick_gripper_action_controller_and_status_publisher(workspace: Path) -> None:
    adapter = load_hardware_config(config_file("ur5e_ros2_control.yaml")).grippers["epick"]
    types = {params["type"]: name for name, params in controllers(workspace, "epick").items()}
    assert adapter.adapter == "epick"
    action = types["epick_controllers/EpickGripperActionController"]
    # Its action server is "~/gripper_cmd" (ros2_epick_gripper epick_gripper_action_controller.cpp).
    assert adapter.action == f"/{action}/gripper_cmd"
    # epick_status_publisher_controller publishes on the absolute /object_detection_status.
    assert "epick_controllers/EpickStatusPublisherController" in types
    assert adapter.status == "/object_detection_status"


#: MoveIt's controller type (moveit_simple_controller_manager) -> the adapters that speak it.
MOVEIT_TYPES = {
    "ParallelGripperCommand": ("parallel_gripper",),
    "GripperCommand": ("gripper_command", "epick"),
}


@pytest.mark.parametrize("gripper", ["hande", "epick", "2fg7"])
def test_the_gripper_actions_are_those_erobs_moveit_drives(workspace: Path, gripper: str) -> None:
    """Each tool's moveit_controllers.yaml (CMS ``config/<gripper>/``) names the gripper
    controller MoveIt sends its goals to on EROBS's cell: ``/<controller>/<action_ns>``."""
    adapter = load_hardware_config(config_file("ur5e_ros2_control.yaml")).grippers[gripper]
    data = yaml.safe_load(
        (workspace / MOVEIT_CONFIG / "config" / gripper / "moveit_controllers.yaml").read_text()
    )
    manager = data["moveit_simple_controller_manager"]
    (name,) = [n for n in manager["controller_names"] if manager[n]["type"] != "FollowJointTrajectory"]
    assert adapter.action == f"/{name}/{manager[name]['action_ns']}"
    assert adapter.adapter in MOVEIT_TYPES[manager[name]["type"]]

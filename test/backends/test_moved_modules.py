"""The names kept for the old layout are gone (issue 35): each name is imported from the module
that defines it, with no alias, shim or import hook in between."""

from __future__ import annotations

import importlib
import sys

import pytest

import erobs_bt.backends.ros2_control
import erobs_bt.backends.sim
import erobs_bt.ros
import erobs_bt.ros.domain
from erobs_bt.backends.stack import MotionStack

#: Modules that lived in erobs_bt.backends.sim before the motion stack (issue 22).
OLD_SIM_MODULES = ("cell", "kinematics", "collision", "vision", "planner", "cartesian", "timing")


@pytest.mark.parametrize("old", OLD_SIM_MODULES)
def test_an_old_simulator_module_name_does_not_import(old: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"erobs_bt.backends.sim.{old}")


def test_no_import_hook_of_erobs_bt_is_installed() -> None:
    assert [f for f in sys.meta_path if type(f).__module__.startswith("erobs_bt")] == []
    assert not hasattr(erobs_bt.backends.sim, "MOVED_MODULES")


@pytest.mark.parametrize(
    "name", ["Ros2ControlBackend", "load_hardware_config", "HardwareConfig", "RosLink", "trajectory_goal"]
)
def test_the_ros2_control_package_re_exports_nothing(name: str) -> None:
    assert not hasattr(erobs_bt.backends.ros2_control, name)


@pytest.mark.parametrize(
    ("module", "name"),
    [
        (erobs_bt.ros.domain, "init_context"),
        (erobs_bt.ros, "ensure_localhost_discovery"),
        (erobs_bt.ros, "DISCOVERY_RANGE_VARIABLE"),
    ],
)
def test_the_ros_package_keeps_no_names_of_the_ros2_control_context(module: object, name: str) -> None:
    assert not hasattr(module, name)


@pytest.mark.parametrize("alias", ["controller", "shutdown"])
def test_the_motion_stack_has_no_aliases(alias: str) -> None:
    assert not hasattr(MotionStack, alias)

"""The ROS 2 distro of this venv, and the settings that follow from it (erobs_bt.rosdistro): the
Fast DDS profile reaches the middleware under the name its release reads, on every path that
starts ROS (scripts/env.sh, private_domain), and the ROS messages are the distro's.

A wrong name would not fail any ROS test: the profile would be ignored and discovery would only
be slower (2.5-3 s instead of ~0.15 s). These tests make that mistake visible."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from erobs_bt.ros.domain import ROS_VARIABLES
from erobs_bt.rosdistro import (
    DISTROS,
    PROFILES_VARIABLES,
    SHM_PREFIXES,
    UnknownRosDistro,
    profiles_variable,
    ros_distro,
)

REPO = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)
#: The Fast DDS library of each distro's wheels (ros-fastrtps 2.14 on Jazzy, ros-fastdds 3.2 on Kilted).
FASTDDS_LIBRARY = {"jazzy": "libfastrtps.so", "kilted": "libfastdds.so"}


def test_the_distro_is_the_one_the_venv_was_set_up_for() -> None:
    distro = ros_distro()
    assert distro in DISTROS
    wanted = os.environ.get("EROBS_ROS_DISTRO")
    if wanted:  # make test passes it down
        assert distro == wanted
    locked = {
        line.split("==")[1]
        for line in (REPO / f"requirements-{distro}.lock").read_text().splitlines()
        if line.startswith("ros-rclpy==")
    }
    assert locked == {importlib.metadata.version("ros-rclpy")}


def test_the_venv_holds_the_fast_dds_release_whose_profile_variable_is_used() -> None:
    distro = ros_distro()
    assert (VENV / "lib" / FASTDDS_LIBRARY[distro]).exists()
    others = [FASTDDS_LIBRARY[d] for d in DISTROS if d != distro]
    assert not any((VENV / "lib" / name).exists() for name in others), "another distro's Fast DDS is left"
    assert profiles_variable() == PROFILES_VARIABLES[distro]
    assert SHM_PREFIXES[distro] in FASTDDS_LIBRARY[distro]


def test_env_sh_exports_the_profile_under_the_distros_name_only() -> None:
    environment = {key: value for key, value in os.environ.items() if key not in PROFILES_VARIABLES.values()}
    environment["EROBS_VENV"] = str(VENV)
    printed = subprocess.run(
        [str(REPO / "scripts" / "env.sh"), "env"], env=environment, capture_output=True, text=True, check=True
    ).stdout
    exported = dict(line.split("=", 1) for line in printed.splitlines() if "=" in line)
    profile = str(REPO / "config" / "fastdds_localhost.xml")
    assert exported.get(profiles_variable()) == profile
    others = [name for name in PROFILES_VARIABLES.values() if name != profiles_variable()]
    assert all(exported.get(name) is None for name in others)


def test_private_domain_sets_and_restores_the_distros_profile_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from erobs_bt.ros.domain import private_domain

    for name in PROFILES_VARIABLES.values():
        monkeypatch.delenv(name, raising=False)
    assert set(PROFILES_VARIABLES.values()) <= set(ROS_VARIABLES)
    profile = REPO / "config" / "fastdds_localhost.xml"
    with private_domain(tmp_path / "log", profile) as environment:
        assert environment.env[profiles_variable()] == str(profile)
        others = [name for name in PROFILES_VARIABLES.values() if name != profiles_variable()]
        assert not any(name in environment.env for name in others)
    assert not any(name in os.environ for name in PROFILES_VARIABLES.values())


def test_an_rclpy_of_no_supported_distro_is_named_in_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda _name: "3.3.16")  # Humble's rclpy
    with pytest.raises(UnknownRosDistro, match=r"rclpy 3\.3\.16 is of no distro erobs_bt supports"):
        ros_distro()

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    monkeypatch.setenv("ROS_DISTRO", "jazzy")
    assert ros_distro() == "jazzy"
    monkeypatch.setenv("ROS_DISTRO", "humble")
    with pytest.raises(UnknownRosDistro, match="rclpy is not installed and ROS_DISTRO is 'humble'"):
        ros_distro()

"""The test tiers (README "Development"): the markers are registered, the ROS and browser
helpers refuse to start in a test without their marker, and a test that uses a ROS fixture
is marked ``ros`` without saying so."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from ros_fixtures import REPO, ros_environment

from browser import launch_chromium


def test_the_tiers_are_registered_and_markers_are_strict() -> None:
    options = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]
    registered = {line.split(":", 1)[0] for line in options["ini_options"]["markers"]}
    assert {"ros", "browser", "slow"} <= registered
    assert "--strict-markers" in options["ini_options"]["addopts"]


def test_a_ros_domain_is_refused_in_a_test_not_marked_ros(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="not marked 'ros'"), ros_environment(tmp_path):
        pass


def test_chromium_is_refused_in_a_test_not_marked_browser() -> None:
    with pytest.raises(RuntimeError, match="not marked 'browser'"):
        launch_chromium(playwright=None)


def test_a_test_using_ros_env_is_marked_ros(ros_env: object, request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("ros") is not None

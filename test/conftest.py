"""Shared pytest fixtures, the test tiers, and the suite's hypothesis profile.

Tiers (markers registered in pyproject.toml; README "Development"): ``ros`` (ROS processes or
an rclpy context), ``browser`` (Chromium), ``slow``. A test that uses :func:`ros_env` or
:func:`cells` is marked ``ros`` here; a ``browser`` test is skipped where Debian's Chromium is
absent. While a test runs, :data:`helpers.RUNNING_MARKERS` holds its markers, so the ROS and
browser helpers refuse to start in a test without the marker.

Hypothesis runs derandomised and without an example database by default, so the suite draws
the same examples on every machine and every run (a failure found once is kept as an
``@example`` in its test). ``HYPOTHESIS_PROFILE=explore`` draws fresh random examples, for
hunting new counterexamples by hand.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from interop import REQUIRE_SHARED_ENV, shared_required

from erobs_bt.script.model import Step
from erobs_bt.script.parse import parse_script
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.config import load_cell

import helpers
from browser import CHROMIUM

settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


# A suite started in the background by a shell without job control (`make test &`, some CI
# runners) inherits SIGINT *ignored*, and so would every server the tests start and then stop
# with SIGINT (RE Manager, `run --view`, nodes): they would hang until killed, leaving children.
# A handler here is reset to the default at every exec, so each child starts with SIGINT live.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: Fixtures that put a test in the ``ros`` tier (directly or through another fixture).
ROS_FIXTURES = frozenset({"ros_env", "cells"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that use :data:`ROS_FIXTURES` ``ros`` (before ``-m`` selects), and skip
    ``browser`` tests where Debian's Chromium is not installed."""
    for item in items:
        if ROS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.ros)
        if item.get_closest_marker("browser") is not None and not CHROMIUM.exists():
            item.add_marker(pytest.mark.skip(reason=f"Debian chromium is not installed ({CHROMIUM})"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Record the markers of the test about to be set up (:func:`helpers.require_marker`)."""
    helpers.RUNNING_MARKERS = frozenset(mark.name for mark in item.iter_markers())


#: The real EROBS sample scripts and pose registry: beside the repository, not in it. Resolved:
#: where ../shared is a symbolic link, the paths the code reports (it resolves the files it
#: reads) and the ones the tests expect are the same.
SAMPLES_DIR = (Path(__file__).resolve().parents[2] / "shared").resolve() / "samples" / "erobs"

#: Set to 1 (``.ci/run`` does) to make a missing ../shared a failure instead of a skip
#: (one switch for the samples and the upstream type hashes: :mod:`interop`).
REQUIRE_SAMPLES = REQUIRE_SHARED_ENV


def require_samples() -> Path:
    """:data:`SAMPLES_DIR`, or skip the test when it is absent (a clone on its own).

    With ``EROBS_BT_REQUIRE_SHARED=1`` an absent folder fails the test instead, so CI
    cannot pass with the sample tests silently skipped.
    """
    if not (SAMPLES_DIR / "FULL_EXPERIMENT_RUN.json").is_file():
        reason = f"the EROBS sample scripts are not beside the repository ({SAMPLES_DIR} is missing)"
        if shared_required():
            pytest.fail(f"{reason}, and {REQUIRE_SAMPLES}=1 makes them mandatory")
        pytest.skip(reason)
    return SAMPLES_DIR


@pytest.fixture
def samples_dir() -> Path:
    """The EROBS sample scripts and pose registry (``../shared/samples/erobs``); skips when absent."""
    return require_samples()


@pytest.fixture(scope="module")
def cell() -> CellConfig:
    """The packaged simulated cell (``config/cell.yaml``)."""
    return load_cell()


@pytest.fixture
def perf_steps(samples_dir: Path) -> tuple[Step, ...]:
    """The two moves of ``perf_safe_transport_to_safe_exchange.json`` (one batch)."""
    return parse_script((samples_dir / "perf_safe_transport_to_safe_exchange.json").read_text()).steps


@pytest.fixture(scope="module")
def ros_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A private ROS domain for the module (:func:`ros_fixtures.ros_environment`): its
    variables are set in this process; its ``ROS_LOG_DIR`` is a temporary folder."""
    from ros_fixtures import ros_environment

    with ros_environment(tmp_path_factory.mktemp("ros_log")) as environment:
        yield environment


@dataclass
class Cells:
    """Two erobs_bt node processes, ``/cell1/erobs_bt`` and ``/cell2/erobs_bt``, in one domain.

    Attributes:
        environment: the reserved domain (its variables are set in this process).
        nodes: namespace (``cell1``, ``cell2``) → the node process.
        run_logs: namespace → the node's ``run_log_dir``.
    """

    environment: Any
    nodes: dict[str, Any]
    run_logs: dict[str, Path]


@pytest.fixture(scope="session")
def cells(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cells]:
    """Shared by the ROS convention, parameter, EROBS API and py_trees_ros tests (one pair
    of node processes for all of them). ``speed:=20`` is given as an integer on purpose:
    integers are accepted for double parameters."""
    from ros_fixtures import NodeProcess, ros_environment

    with ros_environment(tmp_path_factory.mktemp("cells_ros_log")) as environment:
        logs = {ns: tmp_path_factory.mktemp(f"run_logs_{ns}") for ns in ("cell1", "cell2")}
        nodes = {
            ns: NodeProcess(
                environment, {"speed": 20, "run_log_dir": str(logs[ns])}, ros_arguments=["-r", f"__ns:=/{ns}"]
            )
            for ns in ("cell1", "cell2")
        }
        started = []
        try:
            for process in nodes.values():
                process.start()
                started.append(process)
            yield Cells(environment, nodes, logs)
        finally:
            for process in started:
                process.stop()

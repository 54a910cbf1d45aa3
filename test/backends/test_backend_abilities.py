"""The optional abilities of a backend are named protocols (issue 35): each assembly has exactly
the ones it claims (erobs_bt/backends/factory.py), and nothing outside ``erobs_bt/backends/``
probes a backend with ``getattr``/``hasattr`` (it checks ``isinstance(backend, <ability>)``,
:data:`erobs_bt.backends.base.ABILITIES`)."""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ros_fixtures import REPO, ros_environment

from erobs_bt.backends.base import (
    ABILITIES,
    HasArm,
    KnowsIfResettable,
    KnowsSceneOwner,
    MeasuresPlayback,
    MotionBackend,
)

PACKAGE = REPO / "erobs_bt"


def protocol_members(protocol: type) -> set[str]:
    """The public members a protocol asks for, its protocol bases' included."""
    return {
        name
        for cls in protocol.__mro__
        if cls.__dict__.get("_is_protocol") and cls.__module__ != "typing"
        for name in vars(cls)
        if not name.startswith("_")
    }


#: Every name a backend may be probed for: the protocol's and every ability's members.
BACKEND_MEMBERS = protocol_members(MotionBackend).union(*(protocol_members(p) for p in ABILITIES))


def backend_probes(root: Path) -> list[str]:
    """``getattr``/``hasattr`` calls outside ``root/backends`` that probe a backend: their
    object is named ``backend`` (``backend``, ``self._backend``, ``engine.backend``) or the
    attribute asked for is one of a backend's (:data:`BACKEND_MEMBERS`)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if (root / "backends") in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2
            ):
                continue
            subject, name = node.args[0], node.args[1]
            asked = name.value if isinstance(name, ast.Constant) else None
            if "backend" in ast.unparse(subject).lower() or asked in BACKEND_MEMBERS:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_nothing_outside_the_backends_probes_a_backend_with_getattr() -> None:
    assert backend_probes(PACKAGE) == []


def backend_name_branches(root: Path) -> list[str]:
    """Comparisons with a backend's name (``settings.backend == "moveit"``, ``backend in (...)``)
    outside ``root/backends`` and the places that choose what to start for a backend kind (the
    factory's callers: ``ros/node/launching.py``, the CLI's options)."""
    found = []
    for path in sorted((root / "ros" / "node").rglob("*.py")):
        if path.name == "launching.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                text = ast.unparse(node)
                if "backend" in text and any(
                    isinstance(c, ast.Constant) and c.value in ("sim", "moveit", "ros2_control")
                    for c in ast.walk(node)
                ):
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno}: {text}")
    return found


def test_the_node_asks_the_backend_what_it_can_not_its_name() -> None:
    """The node decides what to serve by the backend's abilities (issue 35: it branched on
    ``settings.backend`` to serve the planning scene and the simulated ePick status)."""
    assert backend_name_branches(PACKAGE) == []


def test_the_name_scan_reports_a_branch(tmp_path: Path) -> None:
    node = tmp_path / "erobs_bt" / "ros" / "node"
    node.mkdir(parents=True)
    (node / "node.py").write_text("if settings.backend != 'moveit':\n    pass\nif kind == 'sim':\n    pass\n")
    assert backend_name_branches(tmp_path / "erobs_bt") == [
        "erobs_bt/ros/node/node.py:1: settings.backend != 'moveit'"
    ]


def test_the_probe_scan_reports_each_probe(tmp_path: Path) -> None:
    root = tmp_path / "erobs_bt"
    (root / "backends").mkdir(parents=True)
    (root / "backends" / "inside.py").write_text("getattr(backend, 'cell', None)\n")
    (root / "front.py").write_text(
        "getattr(self._backend, 'anything', None)\n"
        "hasattr(thing, 'reset_simulation')\n"
        "getattr(step, 'target')\n"
    )
    assert backend_probes(root) == [
        "erobs_bt/front.py:1: getattr(self._backend, 'anything', None)",
        "erobs_bt/front.py:2: hasattr(thing, 'reset_simulation')",
    ]


# ---------------------------------------------------------------------------------------------
# Each assembly: what it claims is what it has
# ---------------------------------------------------------------------------------------------


def check_claims(backend: Any, claimed: set[type]) -> None:
    """Assert ``backend`` has every member of each protocol it claims (as the table in
    erobs_bt/backends/factory.py, which mypy checks, states it) and is none it does not claim."""
    cls = type(backend)
    for protocol in claimed:
        assert isinstance(backend, protocol), f"{cls.__name__} is not {protocol.__name__}"
        for name in protocol_members(protocol):
            assert hasattr(cls, name), f"{cls.__name__} has no {name} ({protocol.__name__})"
    for protocol in set(ABILITIES) - claimed:
        assert not isinstance(backend, protocol), f"{cls.__name__} is {protocol.__name__}, unclaimed"


def test_the_scripted_double_is_a_backend_with_no_optional_ability() -> None:
    from erobs_bt.backends.scripted import ScriptedBackend

    backend = ScriptedBackend()
    check_claims(backend, {MotionBackend})


def test_the_sim_stack_has_every_ability_and_a_simulation_to_reset() -> None:
    from erobs_bt.backends.factory import create_backend

    backend = create_backend("sim", speed=math.inf)
    try:
        check_claims(backend, {MotionBackend, *ABILITIES})
        assert isinstance(backend, KnowsIfResettable) and backend.resettable
        assert isinstance(backend, HasArm) and isinstance(backend.arm, MeasuresPlayback)
        assert isinstance(backend, KnowsSceneOwner) and backend.scene_owner is None  # its own world
    finally:
        backend.close()


@pytest.fixture
def domain(tmp_path: Path) -> Iterator[int]:
    with ros_environment(tmp_path / "ros_log") as environment:
        yield environment.domain_id


@pytest.mark.ros
def test_the_ros_stacks_have_every_ability_but_no_simulation_to_reset(domain: int) -> None:
    from erobs_bt.backends.moveit.backend import MoveItBackend
    from erobs_bt.backends.moveit.model import MoveItConfig
    from erobs_bt.backends.ros2_control.backend import Ros2ControlBackend
    from erobs_bt.backends.ros2_control.config import load_hardware_config
    from erobs_bt.backends.sim.tools import SimulatedChanger, SimulatedTool
    from erobs_bt.paths import config_file
    from erobs_bt.world.config import load_cell

    cell = load_cell()
    ros2_control = Ros2ControlBackend(
        cell, load_hardware_config(config_file("ur5e_ros2_control.yaml")), wait_for_state=0, domain_id=domain
    )
    try:
        tools = ({name: SimulatedTool(name) for name in cell.grippers}, SimulatedChanger())
        moveit = MoveItBackend(
            cell, None, MoveItConfig(tools="simulated"), tools=tools, wait_for_state=0, domain_id=domain
        )
        try:
            for stack in (ros2_control, moveit):
                check_claims(stack, {MotionBackend, *ABILITIES})
                assert isinstance(stack, KnowsIfResettable) and not stack.resettable
                assert isinstance(stack, HasArm) and not isinstance(stack.arm, MeasuresPlayback)
            # ros2_control plans in the cell's own world; through MoveIt the scene is move_group's.
            assert isinstance(ros2_control, KnowsSceneOwner) and ros2_control.scene_owner is None
            assert isinstance(moveit, KnowsSceneOwner) and moveit.scene_owner == "/move_group"
        finally:
            moveit.close()
    finally:
        ros2_control.close()

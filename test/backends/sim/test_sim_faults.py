"""Scenarios of fault injection: every configured fault reaches the engine with the right prefix."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from erobs_bt.backends.base import ErrorCode, Solution
from erobs_bt.backends.sim.backend import SimBackend
from erobs_bt.backends.sim.faults import (
    FAULT_INTERFACES,
    FaultInjector,
    load_faults,
    parse_fault_section,
    parse_faults,
)
from erobs_bt.script.model import MoveTo, Pipettor, Step
from erobs_bt.script.parse import parse_script
from erobs_bt.settings import EngineSettings
from erobs_bt.world.cell import CellConfig

from helpers import error_of


@pytest.fixture
def perf_steps(samples_dir: Path) -> tuple[Step, ...]:
    """The 2-step unit of perf_safe_transport_to_safe_exchange.json (epick, joint moves)."""
    return parse_script((samples_dir / "perf_safe_transport_to_safe_exchange.json").read_text()).steps


def backend_with(cell: CellConfig, *entries: Mapping[str, object], **section: object) -> SimBackend:
    injector = parse_fault_section({**section, "inject": list(entries)}, source="faults.yaml")
    return SimBackend(cell, speed=math.inf, faults=injector)


def test_planning_failure_fires_on_the_configured_occurrence(
    cell: CellConfig, perf_steps: tuple[Step, ...]
) -> None:
    with backend_with(cell, {"call": "plan", "outcome": "planning_failure", "occurrence": 2}) as backend:
        assert isinstance(backend.plan(perf_steps).result(timeout=60), Solution), "the first plan is fine"

        error = error_of(backend.plan(perf_steps))

        assert str(error) == "PLANNING_FAILED: injected planning failure"
        assert backend.plan(perf_steps).result(timeout=60) is not None, "only the 2nd occurrence fails"
        assert [f.occurrence for f in backend.faults.fired()] == [2]


@pytest.mark.parametrize(
    ("entry", "replay", "expected"),
    [
        ({"call": "execute", "outcome": "goal_rejected"}, False, "EXECUTION_FAILED: goal rejected by"),
        (
            {"call": "acceptance", "outcome": "acceptance_timeout"},
            False,
            "TIMEOUT: goal acceptance over 10 s",
        ),
        (
            {"call": "acceptance", "outcome": "acceptance_timeout"},
            True,
            "REPLAY_TIMEOUT: goal acceptance over 10 s",
        ),
        (
            {"call": "execute", "outcome": "server_unavailable"},
            False,
            "EXECUTION_FAILED: execute_task_solution action server unavailable",
        ),
        (
            {"call": "replay", "outcome": "server_unavailable"},
            True,
            "EXECUTION_FAILED: execute_task_solution action server unavailable",
        ),
        (
            {"call": "replay", "outcome": "replay_error", "prefix": "REPLAY_TIMEOUT"},
            True,
            "REPLAY_TIMEOUT: injected",
        ),
        (
            {"call": "replay", "outcome": "replay_error", "prefix": "TIMEOUT:"},
            True,
            "TIMEOUT: injected replay error",
        ),
        ({"call": "replay", "outcome": "replay_error"}, True, "EXECUTION_FAILED: injected replay error"),
        (
            {"call": "replay", "outcome": "goal_rejected", "message": "busy"},
            True,
            "EXECUTION_FAILED: goal rejected",
        ),
    ],
)
def test_faults_before_motion_come_out_with_their_prefix_and_move_nothing(
    cell: CellConfig,
    perf_steps: tuple[Step, ...],
    entry: dict[str, object],
    replay: bool,
    expected: str,
) -> None:
    with backend_with(cell, {**entry, "delay": 0.01}) as backend:
        solution = backend.plan(perf_steps).result(timeout=60)
        before = backend.joint_positions()

        error = error_of(backend.execute(solution, replay=replay))

        assert str(error).startswith(expected)
        assert error.fatal == str(error).startswith(("TIMEOUT:", "REPLAY_TIMEOUT:"))
        assert backend.joint_positions() == before, "nothing was dispatched to the arm"
        backend.execute(solution, replay=replay).result(timeout=60)
        assert backend.joint_positions() == solution.final_positions(), "the next dispatch is not affected"


@pytest.mark.parametrize(
    ("outcome", "replay", "expected"),
    [
        ("execution_error", False, "EXECUTION_FAILED: injected execution error"),
        ("execution_error", True, "EXECUTION_FAILED: injected execution error"),
        ("execution_timeout", False, "TIMEOUT: execution over 120 s"),
        ("execution_timeout", True, "REPLAY_TIMEOUT: execution over 120 s"),
    ],
)
def test_execution_faults_stop_the_arm_part_way_along_its_path(
    cell: CellConfig, perf_steps: tuple[Step, ...], outcome: str, replay: bool, expected: str
) -> None:
    call = "replay" if replay else "execute"
    with backend_with(cell, {"call": call, "outcome": outcome, "after_fraction": 0.5}) as backend:
        solution = backend.plan(perf_steps).result(timeout=60)
        start = np.array(solution.start_positions)
        goal = np.array(solution.final_positions())

        error = error_of(backend.execute(solution, replay=replay))

        assert str(error).startswith(expected)
        q = np.array(backend.joint_positions())
        travelled = np.linalg.norm(q - start) / np.linalg.norm(goal - start)
        assert 0.2 < travelled < 0.9, "stopped part-way (half the motion time, plus the ramp)"
        assert not backend.arm.is_busy()


def test_run_step_faults_select_by_step_type_and_report_their_server(cell: CellConfig) -> None:
    suck = Pipettor(index=4, path="tasks[4]", spec={}, operation="SUCK", volume_pct=0.2)
    entries = (
        {"call": "run_step", "outcome": "goal_rejected", "step_type": "tool_exchange"},
        {"call": "run_step", "outcome": "acceptance_timeout", "step_index": 4},
    )
    with backend_with(cell, *entries, acceptance_timeout=2.5) as backend:
        backend.prepare_goal("pipettor")

        error = error_of(backend.run_step(suck))

        assert str(error) == "TIMEOUT: goal acceptance over 2.5 s (pipettor)"
        assert backend.pipettor_state().volume == 0.0, "the rejected command did nothing"
        assert "aspirated" in backend.run_step(suck).result(timeout=60), "only the first matching call"
        assert [f.spec.step_index for f in backend.faults.fired()] == [4]


def test_injector_counts_each_entry_on_its_own_matching_calls() -> None:
    injector = FaultInjector(
        parse_faults(
            [
                {
                    "call": "plan",
                    "outcome": "planning_failure",
                    "step_type": "moveto",
                    "occurrence": [1, 3],
                    "message": "first",
                },
                {"call": "plan", "outcome": "planning_failure", "occurrence": "all", "message": "second"},
            ],
            source="f.yaml",
        )
    )
    fired = [
        injector.check("plan", step_types=types)
        for types in (["moveto"], ["pipettor"], ["moveto"], ["moveto"])
    ]
    # Entry 1 counts moveto plans only (1st and 3rd fire: calls 1 and 4); entry 2 counts every
    # plan and fires whenever entry 1 does not.
    assert [f.message if f else None for f in fired] == ["first", "second", "second", "first"]
    assert [(f.spec.message, f.occurrence) for f in injector.fired()] == [
        ("first", 1),
        ("second", 2),
        ("second", 3),
        ("first", 3),
    ]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            [{"call": "teleport", "outcome": "goal_rejected"}],
            r"faults.yaml: faults\[0\].call: unknown call 'teleport' \(expected one of: plan, ",
        ),
        (
            [{"call": "plan", "outcome": "replay_error"}],
            r"faults\[0\].outcome: replay_error cannot happen on call plan",
        ),
        (
            [{"call": "execute", "outcome": "goal_rejected", "step_type": "moveto"}],
            r"faults\[0\].step_type: only valid",
        ),
        (
            [{"call": "execute", "outcome": "goal_rejected", "colour": 1}],
            r"faults\[0\]\.colour: unknown key \(allowed: ",
        ),
        (
            [{"call": "plan", "outcome": "planning_failure", "occurrence": 0}],
            r"faults\[0\].occurrence: must be",
        ),
        (
            [{"call": "replay", "outcome": "replay_error", "prefix": "OOPS"}],
            r"faults\[0\].prefix: unknown prefix 'OOPS' \(expected one of: ",
        ),
        (
            [{"call": "execute", "outcome": "goal_rejected", "after_fraction": 0.5}],
            r"after_fraction: only valid",
        ),
        ({"inject": [{"call": "plan"}]}, r"faults.yaml: faults.inject\[0\].outcome: missing"),
        (
            {"acceptance_timeout": -1},
            r"faults.yaml: faults.acceptance_timeout: must be a finite number greater than zero \(s\)",
        ),
        ({"injections": []}, r"faults.yaml: faults.injections: unknown key"),
    ],
)
def test_configuration_errors_name_the_file_and_the_key(section: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_fault_section(section, source="faults.yaml")


def test_faults_load_from_a_separate_file_or_the_cell_file(tmp_path: Path, cell: CellConfig) -> None:
    listed = tmp_path / "faults.yaml"
    listed.write_text("- {call: replay, outcome: replay_error, prefix: REPLAY_TIMEOUT}\n")
    keyed = tmp_path / "cell_with_faults.yaml"
    keyed.write_text(
        "name: x\n"
        "faults:\n"
        "  execution_timeout: 60\n"
        "  inject:\n"
        "    - {call: execute, outcome: execution_timeout}\n"
    )

    assert load_faults(listed).specs[0].prefix is ErrorCode.REPLAY_TIMEOUT
    from_cell = load_faults(keyed)
    assert from_cell.execution_timeout == 60.0 and from_cell.specs[0].outcome == "execution_timeout"
    assert load_faults(cell.source).specs == (), "the packaged cell injects nothing"
    broken = tmp_path / "broken.yaml"
    broken.write_text("faults: [{call: plan, outcome: planning_failure, delay: -1}]\n")
    with pytest.raises(
        ValueError, match=rf"{broken}: faults\[0\].delay: must be a finite number >= 0 \(s\) \(got -1\)"
    ):
        load_faults(broken)


def test_a_unit_planned_with_an_injected_cell_fault_section(cell: CellConfig) -> None:
    from dataclasses import replace
    from types import MappingProxyType

    faulty = replace(
        cell,
        extra=MappingProxyType(
            {
                "faults": {
                    "inject": [{"call": "plan", "outcome": "planning_failure", "message": "scene is stale"}]
                }
            }
        ),
    )
    step = MoveTo(index=0, path="tasks[0]", spec={}, target="moveit_home")
    with SimBackend(faulty, speed=math.inf) as backend:
        assert str(error_of(backend.plan([step]))) == "PLANNING_FAILED: scene is stale"


def test_server_unavailable_during_a_replay_plans_afresh_once_and_does_not_fault(cell: CellConfig) -> None:
    """docs/behaviour.md §3: only TIMEOUT:/REPLAY_TIMEOUT: faults (issue 9, item 3)."""
    from erobs_bt.orchestrator import GoalStatus, Orchestrator, State

    text = (
        '{"start_gripper": "epick", "tasks": [{"task_type": "moveto", "target": "moveit_home"},'
        ' {"task_type": "end_effector", "end_effector_action": "vacuum_off"}]}'
    )
    faults = parse_faults([{"call": "replay", "outcome": "server_unavailable"}], source="test")
    with SimBackend(cell, speed=math.inf, faults=faults) as backend:
        start = backend.joint_positions()
        orchestrator = Orchestrator(backend, parser=parse_script, settings=EngineSettings())
        first = orchestrator.submit(text, dry_run=False).wait(120)
        assert first.success, first
        backend.arm.set_joint_positions(start)  # the same goal from the same start replays
        second = orchestrator.submit(text, dry_run=False).wait(120)
        assert second.status is GoalStatus.SUCCEEDED, second
        assert orchestrator.state is State.IDLE
        assert [f.call for f in backend.faults.fired()] == ["replay"], "one replay, then one fresh attempt"
        assert backend.joint_positions() != start, "the fresh attempt moved the arm"


def test_the_cell_reads_the_one_fault_language_and_refuses_the_hardware_interfaces() -> None:
    """One language (docs/fault-injection.md): the hardware node's outcome names are accepted on
    the cell's calls; its interfaces are not the cell's calls."""
    (spec,) = parse_faults([{"call": "execute", "outcome": "reject", "occurrence": [1, 2]}], source="f.yaml")
    assert (spec.call, spec.outcome, spec.occurrences) == ("execute", "goal_rejected", frozenset({1, 2}))
    assert spec.source == "f.yaml: faults[0]"
    with pytest.raises(ValueError, match=r"^f.yaml: faults\[0\]\.interface: unknown call 'set_io'"):
        parse_faults([{"interface": "set_io", "outcome": "goal_rejected"}], source="f.yaml")
    with pytest.raises(ValueError, match=r"faults\[0\]\.error_code: only valid for the hardware node"):
        parse_faults([{"call": "execute", "outcome": "execution_error", "error_code": -4}], source="f")
    with pytest.raises(ValueError, match=r"faults\[0\]: give call or interface"):
        parse_faults([{"call": "plan", "interface": "plan", "outcome": "planning_failure"}], source="f")


def test_a_server_unavailable_interface_is_down_from_the_start_and_never_counted_as_a_call() -> None:
    injector = FaultInjector(
        parse_faults(
            [
                {"interface": "set_io", "outcome": "server_down"},
                {"interface": "pipettor", "outcome": "hang", "occurrence": 2},
            ],
            source="",
            key="--faults",
            targets=FAULT_INTERFACES,
        )
    )
    assert injector.down("set_io") and not injector.down("pipettor")
    assert injector.check("set_io") is None
    assert injector.check("pipettor") is None
    fired = injector.check("pipettor")
    assert fired is not None and fired.outcome == "execution_timeout" and fired.source == "--faults[1]"


def test_the_sim_assembly_reads_a_fault_file_by_path(tmp_path: Path) -> None:
    """``backend: sim`` with ``--faults``: the factory hands the file to the sim assembly."""
    from erobs_bt.backends.factory import create_backend

    path = tmp_path / "faults.yaml"
    path.write_text("- {call: plan, outcome: planning_failure, message: from the file}\n")
    backend = create_backend("sim", speed=math.inf, faults=path)
    try:
        step = MoveTo(index=0, path="tasks[0]", spec={}, target="moveit_home")
        assert str(error_of(backend.plan([step], start=None))) == "PLANNING_FAILED: from the file"
    finally:
        backend.close()

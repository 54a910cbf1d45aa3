"""The tool changer as EROBS drives it, and what its docks hold at start (issue 38, items 2-4).

* Item 2: the cell's ``tool_exchange`` block (EROBS's beamline form: ``dock_spacing_m``,
  ``reference_dock``, ``load_sequence``, ``dock_sequence``) computes the dock and load
  motions in one place (:func:`erobs_bt.world.tools.exchange_moves`), for every backend.
* Item 3: a beamline gripper's ``dock_number`` is the dock it is stored in at start
  (tests on EROBS's own CMS file: test_erobs_cms_scripts.py).
* Item 4: ``--docks`` / the node's ``docks`` parameter set what the docks hold at start
  without editing the cell file; ``validate`` says which contents it assumed; ``reset-sim``,
  ``state`` and the console show them.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from erobs_bt.cli import main
from erobs_bt.script.model import ToolExchange
from erobs_bt.script.vocabulary import parse_dock_contents
from erobs_bt.session import EngineConfig, build_engine
from erobs_bt.settings import EngineSettings
from erobs_bt.world.beamline import resolve_cell_file, with_dock_contents
from erobs_bt.world.cell import CellConfigError
from erobs_bt.world.config import load_cell
from erobs_bt.world.kinematics import fk
from erobs_bt.world.tools import exchange_moves

REPO = Path(__file__).resolve().parents[2]
POSES = REPO / "config" / "poses.yaml"
FULL_EXPERIMENT = REPO / "config" / "full_experiment.json"
LOAD_APPROACH = (143.73, -129.69, -124.24, -15.92, -270.41, -216.3)


def _exchange(operation: str, gripper: str, dock: int) -> ToolExchange:
    joints = tuple(math.radians(a) for a in LOAD_APPROACH)
    return ToolExchange(
        index=0,
        path="tasks[0]",
        spec={},
        operation=operation,
        gripper=gripper,
        dock_number=dock,
        approach_pose="load_approach",
        approach_joints=joints,  # type: ignore[arg-type]
    )


def test_the_tool_exchange_block_makes_the_shift_and_the_sequence_of_the_step() -> None:
    cell = load_cell()
    inbound, outbound = exchange_moves(cell, _exchange("load", "2fg7", 2))
    assert [m.path for m in (*inbound, *outbound)] == [
        "tasks[0] (approach load_approach)",
        "tasks[0] (shift to dock 2: right 0.150 m)",  # 0.15 * (reference 3 - dock 2) > 0: right
        "tasks[0] (load step 1: forward 0.030 m)",  # the tool is taken here, at the seat
        "tasks[0] (load step 2: up 0.150 m)",
        "tasks[0] (load step 3: backward 0.030 m)",
    ]
    assert len(outbound) == 2
    shift = inbound[1]
    assert shift.direction_vector == (0.0, -1.0, 0.0) and shift.planning_type == "cartesian"  # type: ignore[attr-defined]
    # Dock 4 lies on the other side (left), the reference dock needs no shift.
    inbound, outbound = exchange_moves(cell, _exchange("dock", "epick", 4))
    assert [m.path for m in (*inbound, *outbound)][1:3] == [
        "tasks[0] (shift to dock 4: left 0.150 m)",
        "tasks[0] (dock step 1: forward 0.030 m)",
    ]
    assert [m.path for m in outbound] == ["tasks[0] (dock step 3: backward 0.030 m)"]  # left in the holder
    inbound, _ = exchange_moves(cell, _exchange("load", "pipettor", 3))
    assert [m.path for m in inbound][1] == "tasks[0] (load step 1: forward 0.030 m)"


def test_a_dock_seat_is_the_approach_shifted_to_its_line_and_the_loads_first_move() -> None:
    cell = load_cell()
    T = fk([math.radians(a) for a in LOAD_APPROACH])
    for number in (1, 2, 3, 4):
        seat = cell.dock_seat(number)
        assert seat is not None
        lateral = 0.15 * (3 - number)  # along the flange's -Y ("right") for a positive offset
        expected = T[:3, 3] - lateral * T[:3, 1] + 0.03 * T[:3, 0]
        np.testing.assert_allclose(seat[:3, 3], expected, atol=1e-9)


def test_a_cell_without_a_tool_exchange_block_cannot_exchange_tools(tmp_path: Path) -> None:
    import yaml

    document = yaml.safe_load((REPO / "config" / "cell.yaml").read_text())
    del document["tool_exchange"]
    path = tmp_path / "cell.yaml"
    path.write_text(yaml.safe_dump(document))
    cell = load_cell(path)
    assert cell.tool_changer is None and cell.dock_seat(3) is None
    with pytest.raises(Exception, match=r"the cell has no tool_exchange block \(dock_spacing_m"):
        exchange_moves(cell, _exchange("load", "pipettor", 3))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda te: te.update(dock_spacing_m=0),
            r"tool_exchange\.dock_spacing_m: must be a finite number greater than zero",
        ),
        (lambda te: te.pop("reference_dock"), r"tool_exchange\.reference_dock"),
        (
            lambda te: te["load_sequence"][1].update(direction="sideways"),
            r"tool_exchange\.load_sequence\[1\]\.direction",
        ),
        (
            lambda te: te["dock_sequence"][0].update(distance=-0.1),
            r"tool_exchange\.dock_sequence\[0\]\.distance",
        ),
    ],
)
def test_an_invalid_tool_exchange_block_names_its_key(tmp_path: Path, change: object, message: str) -> None:
    import yaml

    document = yaml.safe_load((REPO / "config" / "cell.yaml").read_text())
    change(document["tool_exchange"])  # type: ignore[operator]
    path = tmp_path / "cell.yaml"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(CellConfigError, match=message):
        load_cell(path)


def test_dock_contents_are_parsed_from_the_option_text() -> None:
    assert parse_dock_contents("1=hande,4=epick") == {1: "hande", 4: "epick"}
    assert parse_dock_contents(" 3= , 2=empty ,") == {3: None, 2: None}
    with pytest.raises(ValueError, match=r"--docks: expected <dock number>=<gripper> entries"):
        parse_dock_contents("hande")
    with pytest.raises(ValueError, match=r"parameter docks: dock 1 is named twice"):
        parse_dock_contents("1=hande,1=epick", where="parameter docks")


def test_the_given_docks_replace_what_the_cell_file_stores(tmp_path: Path) -> None:
    path = with_dock_contents(None, {1: "hande", 4: "epick"}, directory=tmp_path / "cell")
    cell = load_cell(path)
    assert {d.number: d.gripper for d in cell.docks} == {1: "hande", 2: None, 3: None, 4: "epick"}
    # The packaged cell's pose registry and vision targets come along (the same defaults).
    assert (path.parent / "poses.yaml").read_text() == POSES.read_text()
    assert (path.parent / "vision_targets.yaml").is_file()
    with pytest.raises(CellConfigError, match=r"has no dock 7 \(docks: 1, 2, 3, 4\)"):
        with_dock_contents(None, {7: "hande"})
    with pytest.raises(
        CellConfigError, match=r"docks 1 and 2 both hold the hande, but a tool is in one place"
    ):
        with_dock_contents(None, {1: "hande", 2: "hande"})
    with pytest.raises(CellConfigError, match=r"unknown gripper 'laser'"):
        with_dock_contents(None, {1: "laser"})


def test_validate_says_which_dock_contents_it_assumed() -> None:
    runner = CliRunner()
    # FULL_EXPERIMENT docks the ePick into 4 and loads the pipettor from 3.
    done = runner.invoke(main, ["validate", str(FULL_EXPERIMENT)])
    assert done.exit_code == 0, done.output
    assert "docks at start: 1: hande, 2: 2fg7, 3: pipettor, 4: empty\n" in done.output
    # (the ePick starts on the arm: --docks naming it in a dock is a configuration error, u41 item 1)
    done = runner.invoke(main, ["validate", str(FULL_EXPERIMENT), "--docks", "1=hande,3=2fg7"])
    assert done.exit_code == 0, done.output
    assert (
        "docks at start: 1: hande, 2: empty, 3: 2fg7, 4: empty — tasks[13].dock_number: dock 3 holds "
        "the 2fg7 when the goal starts, not the pipettor (set --docks)"
    ) in done.output
    done = runner.invoke(main, ["validate", str(FULL_EXPERIMENT), "--docks", "3=pipettor", "--json"])
    report = json.loads(done.output)
    assert report["docks_at_start"] == "1: empty, 2: empty, 3: pipettor, 4: empty"
    assert report["dock_problem"] is None
    done = runner.invoke(main, ["validate", str(FULL_EXPERIMENT), "--docks", "9=hande"])
    assert done.exit_code == 2 and "has no dock 9" in done.output


def test_the_docks_option_sets_the_simulated_cell_and_its_reset() -> None:
    cell = resolve_cell_file(None, docks={1: "hande", 4: "epick"})
    engine = build_engine(EngineConfig(cell=cell, poses=POSES, settings=EngineSettings(speed=math.inf)))
    try:
        # Two tools in no dock (the 2fg7, the pipettor): the arm starts bare.
        assert engine.backend.current_gripper() == "none"
        assert dict(engine.backend.dock_contents() or {}) == {1: "hande", 2: None, 3: None, 4: "epick"}
        reply = engine.orchestrator.reset_simulation()
        assert reply.success and reply.message.startswith(
            "simulation reset: none attached; docks 1: hande, 2: empty, 3: empty, 4: epick;"
        ), reply.message
        script = {
            "start_gripper": "none",
            "tasks": [
                {"task_type": "moveto", "target": "tool_exchange_safe"},
                {
                    "task_type": "tool_exchange",
                    "operation": "load",
                    "gripper": "epick",
                    "dock_number": 4,
                    "approach_pose": "load_approach",
                },
            ],
        }
        result = engine.orchestrator.submit(json.dumps(script), dry_run=False).wait(timeout=120)
        assert result.success, result.error_message
        assert engine.backend.current_gripper() == "epick"
    finally:
        engine.close()


def test_the_docks_parameter_is_the_nodes_cell() -> None:
    pytest.importorskip("rclpy")
    from erobs_bt.ros.node.node import engine_config
    from erobs_bt.ros.params import NodeSettings

    config = engine_config(NodeSettings.from_values({"docks": "3=pipettor"}))
    assert config.cell is not None
    assert {d.number: d.gripper for d in load_cell(config.cell).docks} == {
        1: None,
        2: None,
        3: "pipettor",
        4: None,
    }
    assert config.poses is not None and config.poses.read_text() == POSES.read_text()
    with pytest.raises(ValueError, match=r"parameter docks: expected <dock number>=<gripper>"):
        engine_config(NodeSettings.from_values({"docks": "pipettor"}))


def test_state_and_reset_sim_show_the_docks_the_parameter_set(ros_env: object, tmp_path: Path) -> None:
    import subprocess

    from ros_fixtures import NodeProcess, ready_client

    node = NodeProcess(ros_env, {"docks": "1=hande,4=epick", "run_log_dir": str(tmp_path)})  # type: ignore[arg-type]
    node.start()
    try:
        with ready_client(node) as client:
            docks = client.docks.wait_for(lambda _m: True, 30.0)
            assert docks == "1: hande, 2: empty, 3: empty, 4: epick"
        assert node.environment is not None
        env = {**node.environment.env, "COLUMNS": "300", "NO_COLOR": "1"}
        state = subprocess.run(
            [sys.executable, "-m", "erobs_bt", "state", "--timeout", "30"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert state.returncode == 0, state.stdout + state.stderr
        assert "docks" in state.stdout and "1: hande, 2: empty, 3: empty, 4: epick" in state.stdout, (
            state.stdout
        )
        reset = subprocess.run(
            [sys.executable, "-m", "erobs_bt", "reset-sim", "--timeout", "30"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert reset.returncode == 0, reset.stdout + reset.stderr
        assert "docks at start: 1: hande, 2: empty, 3: empty, 4: epick (the docks parameter)" in node.output
        assert (
            "ok simulation reset: none attached; docks 1: hande, 2: empty, 3: empty, 4: epick" in reset.stdout
        )
    finally:
        node.stop()

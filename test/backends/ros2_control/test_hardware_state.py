"""The double's ``--state-file`` (erobs_bt/doubles/hardware_state.py): the physical cell kept
across a relaunch of its bringup, in a file private to the user; anything else is refused with
the file's name, never unpickled."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from erobs_bt.doubles.hardware_state import PhysicalState, load_state, save_state
from erobs_bt.world.config import load_cell
from erobs_bt.world.tools import initial_tool_state


def state() -> PhysicalState:
    cell = load_cell()
    return PhysicalState(
        tuple(float(x) + 0.1 for x in cell.initial_joint_state), initial_tool_state(cell, "hande"), 24.0
    )


def test_a_saved_state_is_read_back_equal_from_a_file_private_to_the_user(tmp_path: Path) -> None:
    path = tmp_path / "cell.state"
    assert load_state(path) is None, "no file: a first start"

    save_state(path, state())

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_state(path) == state()


def test_a_state_file_others_may_write_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "cell.state"
    save_state(path, state())
    path.chmod(0o666)

    with pytest.raises(ValueError, match=r"cell\.state: not read: a state file must belong to this user"):
        load_state(path)


def test_a_file_that_is_not_a_state_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "garbage.state"
    path.write_bytes(b"\x80\x04not a pickle at all")
    path.chmod(0o600)

    with pytest.raises(ValueError, match=r"garbage\.state: not a state file of erobs_bt_sim_hardware"):
        load_state(path)

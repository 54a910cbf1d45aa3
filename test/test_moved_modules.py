"""The world model's and the planner's old module names under backends.sim still import (README)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from erobs_bt.backends.sim import MOVED_MODULES


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_old_name_is_the_new_module(old: str) -> None:
    moved = importlib.import_module(f"erobs_bt.backends.sim.{old}")
    assert moved is importlib.import_module(MOVED_MODULES[old])


def test_from_import_of_an_old_name_in_a_fresh_interpreter() -> None:
    code = (
        "from erobs_bt.backends.sim.cell import load_cell\n"
        "from erobs_bt.backends.sim.kinematics import fk_base_tool0\n"
        "import erobs_bt.world.cell as new\n"
        "assert load_cell is new.load_cell\n"
        "print(load_cell().name)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_unknown_name_still_fails() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("erobs_bt.backends.sim.no_such_module")

"""The public subtree API (erobs_bt.compose) and its example (examples/estop_two_scripts.py):
scripts compiled into a user's py_trees tree on the simulated cell, ticked with
``BehaviourTree.tick()``; pause, resume and cancel at unit boundaries; a reactive e-stop above
two scripts halts the running one and the arm stops (controlled stop) and stays stopped."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import threading
from collections.abc import Iterator
from types import ModuleType

import py_trees
import pytest
from py_trees.common import Status
from ros_fixtures import REPO

from erobs_bt.backends.factory import create_backend
from erobs_bt.compose import script_subtree
from erobs_bt.script.errors import ScriptError

#: Joint acceleration limit of the UR5e [rad/s²] (docs/behaviour.md §2): the stop ramp bound.
MAX_ACCELERATION = 5.0


@pytest.fixture(scope="module")
def example() -> ModuleType:
    path = REPO / "examples" / "estop_two_scripts.py"
    spec = importlib.util.spec_from_file_location("estop_two_scripts", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def backend() -> Iterator[object]:
    sim = create_backend("sim", speed=5.0)
    yield sim
    sim.close()  # type: ignore[attr-defined]


def test_two_scripts_run_in_the_users_tree_with_behaviour_tree_tick(
    example: ModuleType, backend: object
) -> None:
    pressed = threading.Event()
    tree, pick, place = example.build(backend, pressed)
    assert isinstance(tree, py_trees.trees.BehaviourTree)

    example.tick_until(tree, pick, lambda: tree.root.status in (Status.SUCCESS, Status.FAILURE))

    assert tree.root.status == Status.SUCCESS
    assert (pick.outcome().completed_steps, pick.outcome().total_steps) == (8, 8)
    assert (place.outcome().completed_steps, place.outcome().total_steps) == (2, 2)
    assert pick.outcome().error == "" and not pick.faulted
    final = backend.joint_positions()  # type: ignore[attr-defined]
    target = [math.radians(d) for d in example.POSES["safe_sample_transport"]]
    assert max(abs(a - b) for a, b in zip(final, target, strict=True)) < 1e-3


def test_the_estop_halts_the_running_script_and_the_arm_stops(example: ModuleType, backend: object) -> None:
    pressed = threading.Event()
    tree, pick, place = example.build(backend, pressed)
    controller = backend.arm  # type: ignore[attr-defined]
    halted_at: list[object] = []

    def pressed_in_unit_3_while_moving() -> bool:
        if halted_at:
            return True
        if not pressed.is_set() and pick.current_unit == 3 and controller.is_busy():
            pressed.set()
            pick.wake()
            return False
        if pressed.is_set():
            halted_at.append(controller.joint_state())  # just after the tick that halted
            return True
        return False

    example.tick_until(tree, pick, pressed_in_unit_3_while_moving)

    assert pick.root.status == Status.INVALID, "the selector halted the script"
    assert place.root.status == Status.INVALID, "the second script never started"
    assert controller.wait_idle(30.0), "the arm came to rest"
    state = halted_at[0]
    rest = controller.joint_positions()
    # A controlled stop from velocity v within the acceleration limit a travels v²/2a; allow
    # twice that (sampling) plus 0.01 rad.
    for start, end, velocity in zip(state.positions, rest, state.velocities, strict=True):
        assert abs(end - start) <= 2 * velocity**2 / (2 * MAX_ACCELERATION) + 0.01, (start, end, velocity)
    assert pick.outcome().completed_steps == 2, "units 1 and 2 completed, the batch did not"
    # ... and stays stopped while the e-stop is held.
    for _ in range(5):
        tree.tick()
    assert not controller.is_busy()
    assert controller.joint_positions() == rest


def test_pause_resume_and_cancel_act_at_unit_boundaries(example: ModuleType, backend: object) -> None:
    subtree = script_subtree(json.dumps(example.PLACE), backend=backend, name="place")
    tree = py_trees.trees.BehaviourTree(subtree.root)
    subtree.pause()  # requested before the first unit: it pauses at the first boundary
    example.tick_until(tree, subtree, lambda: subtree.outcome().paused)
    assert subtree.root.status == Status.RUNNING and subtree.outcome().completed_steps == 0
    subtree.resume()
    example.tick_until(tree, subtree, lambda: subtree.root.status != Status.RUNNING)
    assert subtree.root.status == Status.SUCCESS and subtree.outcome().completed_steps == 2

    # Ticking again runs the script again from its first unit; a cancel ends it at a boundary.
    example.tick_until(tree, subtree, lambda: subtree.current_unit == 1)
    subtree.cancel()
    example.tick_until(tree, subtree, lambda: subtree.root.status != Status.RUNNING)
    outcome = subtree.outcome()
    assert outcome.status == Status.FAILURE and outcome.error == "cancelled"
    # PLACE is one batched unit: it completes, and the cancel that arrived during the last
    # unit still ends the script at the boundary after it (not success).
    assert outcome.completed_steps == 2


def test_an_invalid_script_is_refused_with_its_path(backend: object) -> None:
    with pytest.raises(ScriptError, match=r"tasks\[0\]"):
        script_subtree('{"start_gripper": "pipettor", "tasks": [{"task_type": "moveto"}]}', backend=backend)
    with pytest.raises(ValueError, match="unknown task type"):
        script_subtree(
            '{"start_gripper": "pipettor", "tasks": [{"task_type": "pause"}]}',
            backend=backend,
            timeouts={"teleport": 1.0},
        )

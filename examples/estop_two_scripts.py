"""Two robot scripts in your own py_trees tree, under a reactive e-stop.

::

    {o} cell (Selector, memory=False: re-checks the e-stop on every tick)
    ├── {-} e-stop (Sequence)
    │   ├── E-stop pressed?          SUCCESS while the e-stop is pressed
    │   └── Hold                     RUNNING: keep the cell stopped
    └── {-} work (Sequence, memory=True)
        ├── script: pick             erobs_bt.compose.script_subtree(...).root
        └── script: place

While the e-stop is released, ``E-stop pressed?`` fails and the selector runs ``work``.
Pressing it makes the first branch succeed on the next tick: the selector halts ``work``,
py_trees stops the running leaf, and the leaf stops the motion it started. Run it::

    scripts/env.sh .venv/bin/python examples/estop_two_scripts.py            # both scripts
    scripts/env.sh .venv/bin/python examples/estop_two_scripts.py --estop 3  # e-stop in unit 3

The tree is ticked with ``py_trees.trees.BehaviourTree.tick()``; between ticks the loop waits
for the next backend event (or 0.5 s), so ticks follow the work rather than a fixed rate.
"""

from __future__ import annotations

import argparse
import json
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import py_trees
from py_trees.common import Status

from erobs_bt.backends.base import MotionBackend
from erobs_bt.backends.factory import create_backend
from erobs_bt.compose import ScriptSubtree, script_subtree

POSES = {
    "safe_sample_transport": [79.72, -69.5, -81.91, -117.92, -268.05, -157.15],
    "sample_scan_1": [13.38, -112.45, -65.22, -90.98, -267.33, -166.94],
    "pipettor_scan": [112.19, -63.37, -140.83, -65.82, -269.73, -229.5],
    "vial_scan": [90.95, -55.09, -134.23, -80.7, -269.7, -182.8],
}


def _move(target: str) -> dict[str, Any]:
    return {"task_type": "moveto", "target": target, "planning_type": "joint"}


#: units: 1 = move, 2 = LED, 3 = six-move batch (a few seconds at speed 5)
PICK = {
    "start_gripper": "pipettor",
    "poses": POSES,
    "tasks": [
        _move("vial_scan"),
        {"task_type": "pipettor", "operation": "SET_LED", "led_color": {"r": 0, "g": 0, "b": 1}},
        *[_move("sample_scan_1"), _move("pipettor_scan")] * 3,
    ],
}
PLACE = {
    "start_gripper": "pipettor",
    "poses": POSES,
    "tasks": [_move("vial_scan"), _move("safe_sample_transport")],
}


class EStopPressed(py_trees.behaviour.Behaviour):
    """SUCCESS while ``pressed`` is set, FAILURE otherwise (a condition: no side effects)."""

    def __init__(self, pressed: threading.Event) -> None:
        super().__init__("E-stop pressed?")
        self.pressed = pressed

    def update(self) -> Status:
        """Read the e-stop."""
        return Status.SUCCESS if self.pressed.is_set() else Status.FAILURE


def build(
    backend: MotionBackend, pressed: threading.Event
) -> tuple[py_trees.trees.BehaviourTree, ScriptSubtree, ScriptSubtree]:
    """The tree of the module docstring, bound to ``backend``.

    Returns:
        The tree and the two script subtrees (pick, place).
    """
    work = threading.Event()  # one event wakes the tick loop for both scripts
    pick = script_subtree(json.dumps(PICK), backend=backend, name="script: pick", work=work)
    place = script_subtree(json.dumps(PLACE), backend=backend, name="script: place", work=work)
    estop = py_trees.composites.Sequence(
        "e-stop", memory=False, children=[EStopPressed(pressed), py_trees.behaviours.Running("Hold")]
    )
    scripts = py_trees.composites.Sequence("work", memory=True, children=[pick.root, place.root])
    root = py_trees.composites.Selector("cell", memory=False, children=[estop, scripts])
    return py_trees.trees.BehaviourTree(root), pick, place


def tick_until(
    tree: py_trees.trees.BehaviourTree,
    subtree: ScriptSubtree,
    done: Callable[[], bool],
    *,
    timeout: float = 600.0,
) -> int:
    """Tick ``tree`` until ``done()`` is true; between ticks wait for the next event of the
    scripts (``subtree``'s shared work event; at most 0.5 s, so timeouts are still checked).

    Returns:
        The number of ticks.

    Raises:
        TimeoutError: ``done()`` still false after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    count = 0
    while time.monotonic() < deadline:
        tree.tick()
        count += 1
        if done():
            return count
        subtree.wait_for_work(0.5)
    raise TimeoutError(f"not done after {timeout} s ({count} ticks)")


def main() -> int:
    """Run both scripts on the simulated cell, optionally pressing the e-stop in a unit of pick.

    With ``--estop UNIT`` the e-stop is pressed once pick has reached that unit and the arm
    moves; the output shows the motion halted (the arm at rest, how far it went after the
    press), the tree with the hold running and the work halted, and each script's final
    state with the steps it completed.
    """
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--estop",
        type=int,
        metavar="UNIT",
        help="press the e-stop once pick moves the arm in UNIT (or later)",
    )
    parser.add_argument("--speed", type=float, default=5.0, help="sim speed factor (default 5)")
    args = parser.parse_args()
    backend = create_backend("sim", speed=args.speed)
    controller = backend.arm  # type: ignore[attr-defined]
    pressed = threading.Event()
    at_press: list[Any] = []  # the arm's state when the e-stop was pressed
    tree, pick, place = build(backend, pressed)
    try:

        def reacted() -> bool:
            due = args.estop and not pressed.is_set() and pick.current_unit >= args.estop
            if due and controller.is_busy():
                at_press.append(controller.joint_state())
                print(f"e-stop pressed in unit {pick.current_unit} of pick, the arm moving")
                pressed.set()
                pick.wake()
                return False  # the next tick reacts: the selector halts the work
            if pressed.is_set():
                return True  # this tick halted the work; the halted leaf stopped its motion
            return tree.root.status in (Status.SUCCESS, Status.FAILURE)

        tick_until(tree, pick, reacted)
        if pressed.is_set():
            if not controller.wait_idle(30.0):  # the stop ramp: at most the joints' deceleration
                print("the arm did not come to rest within 30 s")
                return 1
            tree.tick()  # the e-stop is still held: the hold keeps the cell stopped
            rest = controller.joint_state()
            fastest = max(abs(v) for v in at_press[0].velocities)
            moved = max(abs(b - a) for a, b in zip(at_press[0].positions, rest.positions, strict=True))
            still = max(abs(v) for v in rest.velocities)
            print(
                f"motion halted: the arm is at rest (joint speeds {still:.1f} rad/s, "
                f"{fastest:.2f} rad/s at the press; {math.degrees(moved):.1f}° of travel to stop)"
            )
        print(py_trees.display.unicode_tree(tree.root, show_status=True))
        for subtree in (pick, place):
            outcome = subtree.outcome()
            steps = f"{outcome.completed_steps}/{outcome.total_steps} steps"
            if pressed.is_set() and outcome.status is Status.INVALID:
                how = "halted by the e-stop" if subtree.current_unit else "never started"
                print(f"{subtree.root.name}: {outcome.status.value} ({how}), {steps}")
            else:
                print(f"{subtree.root.name}: {outcome.status.value}, {steps}")
        return 0 if tree.root.status == Status.SUCCESS or pressed.is_set() else 1
    finally:
        backend.close()  # type: ignore[attr-defined]


if __name__ == "__main__":
    raise SystemExit(main())

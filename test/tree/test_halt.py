"""A halted behaviour stops the motion it started (docs/design.md §2, guide rule 10).

py_trees halts a running subtree by calling ``stop(INVALID)`` on it, which calls
``terminate(INVALID)`` on every running leaf: a reactive selector whose e-stop condition
becomes true above the script's subtree, or ``root.stop()``. That preemption must stop
the arm (a controlled deceleration), not merely forget the future.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import py_trees
from py_trees.common import Status

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.backends.sim.backend import SimBackend
from erobs_bt.batching import group_into_batches
from erobs_bt.cache import PlanCache, is_eligible
from erobs_bt.script.parse import parse_script
from erobs_bt.tree.behaviours import ExecuteSolution, FutureBehaviour, RunSingleStep
from erobs_bt.tree.compile import compile_tree
from erobs_bt.tree.context import Controls, GoalContext, Mode
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.kinematics import ACCELERATION_LIMITS

from helpers import SUCK, error_of, move, script_json, show, vacuum


class EStop(py_trees.behaviour.Behaviour):
    """SUCCESS once the e-stop is pressed (the test sets ``pressed``), FAILURE before."""

    def __init__(self) -> None:
        super().__init__("EStopPressed?")
        self.pressed = threading.Event()

    def update(self) -> Status:
        return Status.SUCCESS if self.pressed.is_set() else Status.FAILURE


def _context(text: str, backend: Any) -> GoalContext:
    script = parse_script(text)
    units = group_into_batches(script.steps, enabled=True)
    return GoalContext(
        script=script,
        units=units,
        mode=Mode.EXECUTE,
        backend=backend,
        cache=PlanCache(),
        eligible=is_eligible(units),
        controls=Controls(),
    )


def _find(root: py_trees.behaviour.Behaviour, kind: type[Any]) -> Any:
    return next(b for b in root.iterate() if isinstance(b, kind))


def test_e_stop_preemption_stops_the_simulated_arm_within_the_deceleration_distance(
    cell: CellConfig, samples_dir: Path
) -> None:
    text = (samples_dir / "perf_safe_transport_to_safe_exchange.json").read_text()
    # Real time: the motion (2.7 s, cruising from 0.7 s to 2.0 s) is preempted well before its end.
    with SimBackend(cell, speed=1.0, seed=1) as backend:
        context = _context(text, backend)
        script_root = compile_tree(context)
        estop = EStop()
        # The usual safety pattern: a reactive selector (no memory) re-checks the e-stop
        # condition on every tick and preempts the script when it holds.
        root = py_trees.composites.Selector("safety", memory=False, children=[estop, script_root])
        execute = _find(script_root, ExecuteSolution)
        moving = threading.Event()
        backend.add_joint_state_listener(
            lambda names, q, qd: moving.set() if max(map(abs, qd)) > 0.1 else None
        )
        while not (execute.status == Status.RUNNING and moving.is_set()):
            root.tick_once()
            assert root.status == Status.RUNNING, show(root)
            moving.wait(0.05)
        future = execute._future
        assert future is not None and not future.done()

        estop.pressed.set()
        root.tick_once()  # the selector preempts the script: terminate(INVALID) on its leaves
        halted = backend.arm.joint_state()

        assert root.status == Status.SUCCESS and script_root.status == Status.INVALID, show(root)
        error = error_of(future)
        assert error.code is ErrorCode.EXECUTION_FAILED and "stopped" in str(error)
        assert backend.arm.wait_idle(30)
        rest = np.array(backend.joint_positions())

        # From (q, v) the time-scaling ramp brakes every joint to rest in
        # T = max_k |v_k| / a_k at the full acceleration limit a, covering |v_i| T / 2;
        # allow twice that (the ramp gets at least a - |q"| >= 80 % of the limit here, since
        # the trajectory itself accelerates at most 1 rad/s²).
        v = np.abs(np.array(halted.velocities))
        stop_time = float(np.max(v / ACCELERATION_LIMITS))
        travelled = np.abs(rest - np.array(halted.positions))
        assert np.all(travelled <= v * stop_time + 1e-3), (travelled, v, stop_time)
        assert float(np.max(v)) > 0.05, "the arm was moving when the e-stop preempted the script"

        # It stays stopped: the rest of the solution is never played, even as the tree
        # keeps being ticked with the e-stop held.
        for _ in range(5):
            root.tick_once()
        assert not backend.arm.is_busy()
        assert np.array_equal(np.array(backend.joint_positions()), rest)
        final = context.solutions[0].final_positions()
        assert final is not None and float(np.max(np.abs(rest - np.array(final)))) > 0.1


def test_root_stop_of_an_executing_unit_stops_the_backend_once_and_terminate_is_idempotent() -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", Outcome.ok(gate=gate))
    context = _context(script_json([move("a"), vacuum("vacuum_on"), move("b")]), backend)
    root = compile_tree(context)
    root.tick_once()
    execute = _find(root, ExecuteSolution)
    assert execute.status == Status.RUNNING, show(root)
    future = execute._future

    root.stop(Status.INVALID)
    execute.terminate(Status.INVALID)  # a second halt does nothing more

    assert backend.stops == 1, "the halted leaf stopped the motion it started, once"
    assert isinstance(future.exception(timeout=5), MotionError)
    gate.set()
    assert backend.gripper_states == [], "nothing of the stopped execution was applied"


def test_a_single_step_halted_mid_run_stops_the_robot_and_planning_halts_stop_nothing() -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("run_step", Outcome.ok(gate=gate))
    context = _context(script_json([SUCK]), backend)
    root = compile_tree(context)
    root.tick_once()
    assert _find(root, RunSingleStep).status == Status.RUNNING, show(root)
    root.stop(Status.INVALID)
    assert backend.stops == 1

    plan_gate = threading.Event()
    planner = ScriptedBackend()
    planner.script("plan", Outcome.ok(gate=plan_gate))
    planning = compile_tree(_context(script_json([move("a")]), planner))
    planning.tick_once()
    assert any(isinstance(b, FutureBehaviour) and b.status == Status.RUNNING for b in planning.iterate())
    planning.stop(Status.INVALID)
    assert planner.stops == 0, "halting a plan has no motion to stop"
    plan_gate.set()
    gate.set()


def test_a_leaf_of_a_goal_being_halted_dispatches_nothing() -> None:
    from erobs_bt.tree.context import Halt, HaltReason

    backend = ScriptedBackend()
    context = _context(script_json([move("a")]), backend)
    root = compile_tree(context)
    context.controls.request_halt(Halt(HaltReason.STOPPED, "stopped by operator request"))
    root.tick_once()
    assert root.status == Status.FAILURE, show(root)
    assert backend.calls == [], "no plan, execute or replay once a halt is requested"

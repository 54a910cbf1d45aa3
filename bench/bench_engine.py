"""Engine benchmarks: tick cost and compile cost against script size.

Tick cost: a compiled tree whose last unit is running (held by a gated scripted
backend) is ticked the way the orchestrator ticks it (``root.tick()`` on the active
path) and, side by side, with ``py_trees.trees.BehaviourTree.tick()`` on the same
tree, and with a stock ``py_trees.composites.Sequence(memory=True)`` root holding the
same children.

Compile cost: parse + batch + compile for scripts of 10 … 10,000 steps, µs per step.
"""

from __future__ import annotations

import gc
import json
import threading

import py_trees
from common import fmt_us, markdown_table, measure, median

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.batching import group_into_batches
from erobs_bt.cache import PlanCache
from erobs_bt.script.parse import parse_script
from erobs_bt.tree.compile import compile_tree
from erobs_bt.tree.context import Controls, GoalContext, Mode

SIZES = (10, 100, 1_000, 10_000)
POSE = [10.0, -90.0, -90.0, -90.0, 90.0, 0.0]


def script_text(units: int) -> str:
    """``units`` units alternating a one-move batch and a pipettor step."""
    tasks = [
        {"task_type": "moveto", "target": "a"}
        if i % 2 == 0
        else {"task_type": "pipettor", "operation": "SUCK", "volume_pct": 0.1}
        for i in range(units)
    ]
    return json.dumps({"start_gripper": "pipettor", "poses": {"a": POSE}, "tasks": tasks})


def compiled(units: int) -> tuple[py_trees.behaviour.Behaviour, threading.Event]:
    """A compiled tree ticked until its last unit runs (held by the returned gate)."""
    script = parse_script(script_text(units))
    unit_list = group_into_batches(script.steps, enabled=True)
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("run_step", *([Outcome.ok()] * (units // 2 - 1)), Outcome.ok(gate=gate))
    context = GoalContext(script, unit_list, Mode.EXECUTE, backend, PlanCache(), False, Controls())
    root = compile_tree(context)
    for _ in range(10 * units):
        root.tick_once()
        if backend.count("run_step") == units // 2:
            break
    return root, gate


def tick_rows() -> list[list[str]]:
    rows = []
    for units in SIZES:
        root, gate = compiled(units)
        repeats = 7
        inner = 200 if units <= 1000 else 20
        ours = median(measure(lambda root=root: [None for _ in root.tick()], repeats=repeats, inner=inner))
        tree = py_trees.trees.BehaviourTree(root)
        bt = median(measure(tree.tick, repeats=repeats, inner=max(1, inner // 10)))
        stock = py_trees.composites.Sequence("stock", memory=True, children=[])
        stock.children = root.children
        stock.status = py_trees.common.Status.RUNNING
        stock.current_child = root.current_child
        stock_t = median(measure(lambda s=stock: [None for _ in s.tick()], repeats=repeats, inner=inner))
        gate.set()
        rows.append(
            [
                f"{units:,}",
                fmt_us(ours),
                fmt_us(stock_t),
                fmt_us(bt),
                f"{bt / ours:,.0f}×",
                f"{stock_t / ours:,.1f}×",
            ]
        )
    return rows


def compile_rows() -> list[list[str]]:
    rows = []
    for steps in SIZES:
        text = script_text(steps)

        def build(text: str = text) -> None:
            script = parse_script(text)
            units = group_into_batches(script.steps, enabled=True)
            context = GoalContext(
                script, units, Mode.EXECUTE, ScriptedBackend(), PlanCache(), None, Controls()
            )
            compile_tree(context)

        repeats = 5 if steps <= 1000 else 3
        seconds = median(measure(build, repeats=repeats))
        gc.disable()
        try:
            without_gc = median(measure(build, repeats=repeats))
        finally:
            gc.enable()
        rows.append(
            [
                f"{steps:,}",
                f"{seconds * 1e3:,.2f} ms",
                f"{seconds / steps * 1e6:,.1f} µs",
                f"{without_gc / steps * 1e6:,.1f} µs",
            ]
        )
    return rows


def report() -> str:
    """The engine section of BENCHMARKS.md."""
    ticks = markdown_table(
        [
            "units",
            "erobs_bt tick (active path)",
            "stock memory Sequence root",
            "BehaviourTree.tick()",
            "BehaviourTree / erobs_bt",
            "stock / erobs_bt",
        ],
        tick_rows(),
    )
    compiles = markdown_table(
        ["steps", "parse + batch + compile", "per step", "per step, garbage collector off"], compile_rows()
    )
    return (
        "## Tick cost vs script size\n\n"
        "One unit running (the last one), median per tick over 7 samples. Baselines: "
        "`py_trees.trees.BehaviourTree.tick()` on the same tree (it also iterates the whole tree "
        "for its visitors), and a stock `py_trees.composites.Sequence(memory=True)` root over the "
        "same children (it finds the running child with `list.index`).\n\n"
        f"{ticks}\n\n"
        "Reading the figures: the engine's tick stays flat because the root resumes its running "
        "child by index and nothing else is visited; `BehaviourTree.tick()` grows with the tree "
        "because it iterates every behaviour for its visitors after each tick, and the stock "
        "memory Sequence grows because it searches its children for the running one.\n\n"
        "## Compile cost vs script size\n\n"
        f"{compiles}\n\n"
        "Reading the figures: parse + batch + compile is linear up to 1,000 steps; at 10,000 steps "
        "the cost per step grows. The last column, measured in the same run with Python's garbage "
        "collector switched off, shows where that comes from: the tree allocates several behaviours "
        "per step (each with a logger and a UUID), and the collector's full passes over that many "
        "objects are what grows, not the grouping or the compiler itself.\n"
    )


if __name__ == "__main__":
    print(report())

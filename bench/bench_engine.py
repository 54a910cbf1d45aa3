"""Engine benchmarks: tick cost and compile cost against script size.

Tick cost: a compiled tree whose last unit is running (held by a gated scripted
backend) is ticked the way the orchestrator ticks it (``root.tick()`` on the active
path) and, side by side, with ``py_trees.trees.BehaviourTree.tick()`` on the same
tree, and with a stock ``py_trees.composites.Sequence(memory=True)`` root holding the
same children.

Compile cost: parse + batch + compile for scripts of 10 … 10,000 steps, µs per step.
"""

from __future__ import annotations

import contextlib
import gc
import json
import threading
from collections.abc import Callable

import py_trees
from common import fmt_us, markdown_table, measure, median

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.batching import group_into_batches
from erobs_bt.cache import PlanCache
from erobs_bt.script.parse import parse_script
from erobs_bt.tree import compile as compile_module
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
    """Parse + batch + compile per step: as shipped (the collector paused while the tree is
    built), with the collector running throughout (as before; the pause replaced by a no-op,
    a bench-only instrument), and with the collector off for the whole of it (the floor)."""
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

        def build_compile_only(text: str = text) -> Callable[[], None]:
            script = parse_script(text)
            units = group_into_batches(script.steps, enabled=True)

            def run() -> None:
                compile_tree(
                    GoalContext(script, units, Mode.EXECUTE, ScriptedBackend(), PlanCache(), None, Controls())
                )

            return run

        repeats = 3
        shipped = measure(build, repeats=repeats)
        compile_only = measure(build_compile_only(), repeats=repeats)
        paused = compile_module.collector_paused
        compile_module.collector_paused = contextlib.nullcontext  # type: ignore[assignment]
        try:
            before = measure(build, repeats=repeats)
            compile_before = measure(build_compile_only(), repeats=repeats)
        finally:
            compile_module.collector_paused = paused
        gc.disable()
        try:
            without_gc = measure(build, repeats=repeats)
        finally:
            gc.enable()

        def per_step(samples: list[float], steps: int = steps) -> str:
            return (
                f"{median(samples) / steps * 1e6:,.1f} µs "
                f"({min(samples) / steps * 1e6:,.1f}–{max(samples) / steps * 1e6:,.1f})"
            )

        rows.append(
            [
                f"{steps:,}",
                f"{median(shipped) * 1e3:,.2f} ms",
                per_step(shipped),
                per_step(before),
                per_step(compile_only),
                per_step(compile_before),
                per_step(without_gc),
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
        [
            "steps",
            "parse + batch + compile",
            "per step, median (min–max) of 3",
            "per step, collector running (before)",
            "compile alone, per step",
            "compile alone, collector running (before)",
            "per step, collector off throughout (floor)",
        ],
        compile_rows(),
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
        "Reading the figures: `compile_tree` pauses Python's cyclic garbage collector while it "
        "builds the tree (several behaviours per step, each with a logger and a UUID: hundreds of "
        "thousands of objects at 10,000 steps, none of them garbage yet), so the collector no longer "
        "makes repeated passes over a growing heap during the build; the compile-alone columns show "
        "the effect where it applies. Parsing is outside `compile_tree` and still runs with the "
        "collector on (the parser belongs to the script package); the last column is the floor with "
        "the collector off for parse, grouping and compile together.\n"
    )


if __name__ == "__main__":
    print(report())

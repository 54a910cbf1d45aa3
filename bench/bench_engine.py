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
import json
import threading
from collections.abc import Callable

import py_trees
from common import markdown_table, measure, median

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.batching import group_into_batches
from erobs_bt.cache import PlanCache
from erobs_bt.script.parse import parse_script
from erobs_bt.tree import compile as compile_module
from erobs_bt.tree.compile import compile_tree
from erobs_bt.tree.context import Controls, GoalContext, Mode

#: Compile sizes [steps].
SIZES = (10, 100, 1_000, 10_000)
#: Tick sizes [units]: 2 and 18 are the sample scripts' sizes (a two-unit goal;
#: FULL_EXPERIMENT_RUN.json's 18 units), then the large-script range.
TICK_SIZES = (2, 18, 100, 1_000, 10_000)
REPEATS = 3
POSE = [10.0, -90.0, -90.0, -90.0, 90.0, 0.0]


def spread_us(samples: list[float], per: float = 1.0) -> str:
    """``median (min–max)`` in µs, each sample divided by ``per``."""
    values = [v / per * 1e6 for v in samples]
    return f"{median(values):,.1f} µs ({min(values):,.1f}–{max(values):,.1f})"


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
    """Per tick with the last unit running: the engine's root, a stock memory Sequence over the
    same children and ``BehaviourTree.tick()``, interleaved, :data:`REPEATS` samples each."""
    rows = []
    for units in TICK_SIZES:
        root, gate = compiled(units)
        tree = py_trees.trees.BehaviourTree(root)
        stock = py_trees.composites.Sequence("stock", memory=True, children=[])
        stock.children = root.children
        stock.status = py_trees.common.Status.RUNNING
        stock.current_child = root.current_child
        inner = 2_000 if units <= 100 else 200
        ours: list[float] = []
        stocks: list[float] = []
        trees: list[float] = []
        for _ in range(REPEATS):  # interleaved: the three see the same machine load
            ours += measure(root.tick_once, repeats=1, inner=inner)
            stocks += measure(stock.tick_once, repeats=1, inner=inner)
            trees += measure(tree.tick, repeats=1, inner=max(1, inner // (10 if units < 1_000 else 100)))
        gate.set()
        rows.append(
            [
                f"{units:,}",
                spread_us(ours),
                spread_us(stocks),
                spread_us(trees),
                f"**{median(stocks) / median(ours):,.2f}×**",
                f"{median(trees) / median(ours):,.0f}×",
            ]
        )
    return rows


def compile_rows() -> list[list[str]]:
    """Parse + batch + compile per step: as shipped (the collector paused while the tree is
    built), compile alone, and with the collector running throughout (as before; the pause
    replaced by a no-op, a bench-only instrument)."""
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

        if steps == SIZES[0]:
            build()  # warm-up: the first build pays one-off costs (regular expressions, caches)
        inner = max(1, 1_000 // steps)  # small scripts: a sample spans 1,000 steps
        shipped, compile_only, before = [], [], []
        compile_run = build_compile_only()
        paused = compile_module.collector_paused
        for _ in range(REPEATS):  # interleaved: every variant sees the same machine load
            shipped += measure(build, repeats=1, inner=inner)
            compile_only += measure(compile_run, repeats=1, inner=inner)
            compile_module.collector_paused = contextlib.nullcontext  # type: ignore[assignment]
            try:
                before += measure(build, repeats=1, inner=inner)
            finally:
                compile_module.collector_paused = paused
        rows.append(
            [
                f"{steps:,}",
                f"{median(shipped) * 1e3:,.2f} ms",
                spread_us(shipped, steps),
                spread_us(compile_only, steps),
                spread_us(before, steps),
                f"{median(before) / median(shipped):.1f}×",
            ]
        )
    return rows


def report() -> str:
    """The engine section of BENCHMARKS.md."""
    tick_table = tick_rows()
    real = " and ".join(f"{row[4].strip('*')} at {row[0]} units" for row in tick_table[:2])
    ticks = markdown_table(
        [
            "units",
            "erobs_bt root `tick_once()`, median (min–max) of 3",
            "stock `Sequence(memory=True).tick_once()`",
            "`BehaviourTree.tick()`",
            "stock / erobs_bt",
            "BehaviourTree / erobs_bt",
        ],
        tick_table,
    )
    compile_table = compile_rows()
    compiles = markdown_table(
        [
            "steps",
            "parse + batch + compile",
            "per step, median (min–max) of 3",
            "compile alone, per step",
            "per step, collector running (before)",
            "before / now",
        ],
        compile_table,
    )
    per_step = [float(row[2].split(" µs")[0].replace(",", "")) for row in compile_table]
    linear = per_step[-1] / per_step[1]
    compile_alone = [float(row[3].split(" µs")[0].replace(",", "")) for row in compile_table]
    linear_compile = compile_alone[-1] / compile_alone[1]
    return (
        "## Tick cost vs script size\n\n"
        "A compiled script of alternating one-move batches and pipettor steps with its last unit "
        "running (held by a gated scripted backend), ticked three ways side by side, interleaved, "
        "three samples each (a sample is the mean of 200–2,000 ticks): the engine's root "
        "`tick_once()` (what the orchestrator's tick does: the root resumes its running child), a "
        "stock `py_trees.composites.Sequence(memory=True)` over the same children `tick_once()` "
        "(the fair baseline: the composite the engine's root replaces), and "
        "`py_trees.trees.BehaviourTree.tick()` on the engine's root (what a py_trees application "
        "usually calls; it also visits the whole tree for its visitors after each tick). 2 and 18 "
        "units are real script sizes (a two-unit goal; FULL_EXPERIMENT_RUN.json compiles to 18).\n\n"
        f"{ticks}\n\n"
        f"Reading the figures: at real script sizes the stock memory Sequence costs {real} of the "
        "engine's root (in bold; the issue expected 1.1–1.5×): both tick the one running unit, the "
        "stock one first finds it with `list.index`, which is cheap over a few dozen children. The "
        "gap opens only with thousands of units, where that search grows with the tree. "
        "`BehaviourTree.tick()` is not the composite's cost but the tree-wide visit after each "
        "tick, which the engine does not do.\n\n"
        "## Compile cost vs script size\n\n"
        f"{compiles}\n\n"
        f"Linear per step: at 10,000 steps a step costs {linear:.2f}× what it costs at 100 "
        f"(parse + batch + compile, medians), compile alone {linear_compile:.2f}× (1.00× would be "
        "exactly linear). "
        "Reading the figures: `compile_tree` pauses Python's cyclic garbage collector while it "
        "builds the tree (several behaviours per step, each with a logger and a UUID: hundreds of "
        "thousands of objects at 10,000 steps, none of them garbage yet), so the collector no longer "
        "makes repeated passes over a growing heap during the build. Parsing is outside "
        "`compile_tree` and still runs with the collector on (the parser belongs to the script "
        "package).\n"
    )


if __name__ == "__main__":
    print(report())

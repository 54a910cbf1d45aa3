"""Snapshot scaling: a goal through the node against the same goal in-process, by tree size.

Scripts of 10, 100, 1,000 and 10,000 one-step units (``pipettor`` ``SET_LED``: no motion,
so the tree and its bookkeeping are the cost, not the arm). Measured side by side in one
run, each repeat interleaved (in-process, node, floor), so that the load of a shared
machine changing between them widens the spread rather than biasing the ratio:

* **node**: the node process (``python -m erobs_bt.ros.node.node``, sim backend, params file
  ``config/erobs_bt.yaml``) in a private domain, driven by
  :class:`~erobs_bt.ros.client.client.ErobsBtClient` in this process, which subscribes to
  ``~/tree_snapshot`` (a viewer is watching, so snapshots are taken and published): goal
  sent → result received;
* **in-process**: ``build_engine(EngineConfig(backend='sim'))`` in this process,
  ``Orchestrator.submit`` → ``GoalHandle.wait``.

Both parse, compile and run the same script; the ratio is what the ROS layer (snapshots,
feedback, state messages, run log, DDS) adds. Target: ≤ 1.2 at every size.

Two figures explain the difference, measured in the same run:

* **action floor**: the same goal (same script text) to a bare rclpy ``ActionServer`` of
  ``ExecuteScript`` in its own process whose execute callback succeeds at once (this file
  with ``--floor-server``), from the same client: what the action protocol and DDS cost for
  this payload, with nothing executed;
* **node's own time**: the node's ``RUNNING`` → ``IDLE`` ``~/execution_state`` stamps
  (the orchestrator accepted the parsed, compiled script → the goal finished), without the
  goal's transport, parsing and compiling.

Snapshot cost at 1,000 units, while the goal advances one unit at a time (a gated
scripted backend): a delta (``TreeTracker.delta`` + ``TreeSnapshotEncoder.delta``), a
later full snapshot (``TreeSnapshotEncoder.full`` with ``tree_json``: a new viewer, the
final one), the once-per-goal structure (tracker with its walk, encoder, first full one),
against a full copy built as messages (``take_snapshot`` + ``snapshot_to_msg`` with
``tree_json`` + serialisation). Target ≤ 1 ms for an update.

The node's snapshot CPU per goal at 1,000 and 10,000 units (:func:`goal_snapshot_cost`):
everything the snapshot timer and the goal's end spend on ``~/tree_snapshot`` (and the
bag's copy of the same bytes) over one goal: the structure, the first full snapshot, the
deltas at 10 Hz of the in-process goal's pace, the final full snapshot.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import py_trees
from bench_ros import node_process, ros_domain, ros_process
from common import fmt_ms, markdown_table, median
from rclpy.serialization import serialize_message

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.batching import group_into_batches
from erobs_bt.cache import PlanCache
from erobs_bt.ros import convert
from erobs_bt.ros.snapshots import SnapshotThrottle, TreeStructure, TreeTracker, take_snapshot
from erobs_bt.script.model import Script, Step
from erobs_bt.script.parse import parse_script
from erobs_bt.session import EngineConfig, build_engine
from erobs_bt.settings import EngineSettings
from erobs_bt.tree.compile import compile_tree
from erobs_bt.tree.context import Controls, GoalContext, Mode

FLOOR_ACTION = "/erobs_bt_floor/execute"
SIZES = (10, 100, 1_000, 10_000)
LED = {"task_type": "pipettor", "operation": "SET_LED", "led_color": {"r": 0, "g": 1, "b": 0}}
TIMEOUT = 600.0
SNAPSHOT_SAMPLES = 200
#: Goals per size for the node's snapshot CPU per goal.
GOAL_SNAPSHOT_REPEATS = 3


#: Goals per size and side.
REPEATS = 3
#: Goals of the smallest size each side runs before the measured ones.
WARM_UP = 2


def repeats(units: int) -> int:
    return REPEATS


def script(units: int) -> str:
    """``units`` one-step units (compact JSON: 10,000 fit the 1 MiB script limit)."""
    document = {"start_gripper": "pipettor", "tasks": [LED] * units}
    return json.dumps(document, separators=(",", ":"))


def process_cpu(pid: int) -> float:
    """CPU time (user + system) a process has used so far [s] (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def floor_server() -> int:
    """The floor's server: an ``ExecuteScript`` ActionServer whose execute callback succeeds
    at once (nothing parsed, nothing run)."""
    import contextlib

    import rclpy
    from erobs_bt_interfaces.action import ExecuteScript
    from rclpy.action import ActionServer
    from rclpy.executors import ExternalShutdownException

    rclpy.init()
    node = rclpy.create_node("erobs_bt_floor")

    def execute(goal_handle: object) -> object:
        goal_handle.succeed()  # type: ignore[attr-defined]
        return ExecuteScript.Result(success=True)

    ActionServer(node, ExecuteScript, FLOOR_ACTION, execute_callback=execute)
    print("floor server ready", flush=True)
    with contextlib.suppress(KeyboardInterrupt, ExternalShutdownException):
        rclpy.spin(node)
    return 0


@dataclass
class NodeTimes:
    """Per size: the in-process goal [s] and this process's CPU over it [s]; goal sent →
    result through the node [s], the node process's CPU [s], the node's own ``RUNNING`` →
    ``IDLE`` time [s] (where both states arrived), the floor [s], and the
    ``~/tree_snapshot`` messages of the last goal."""

    local: dict[int, list[float]]
    local_cpu: dict[int, list[float]]
    wall: dict[int, list[float]]
    cpu: dict[int, list[float]]
    own: dict[int, list[float]]
    floor: dict[int, list[float]]
    snapshots: dict[int, int]


def own_time(states: list[object], goal_id: str) -> float | None:
    """``IDLE`` stamp − ``RUNNING`` stamp of ``goal_id`` among ``ExecutionState`` messages [s]."""
    from erobs_bt.rostime import seconds

    running = [m for m in states if m.goal_id == goal_id and m.state == "RUNNING"]  # type: ignore[attr-defined]
    idle = [m for m in states if m.goal_id == goal_id and m.state == "IDLE"]  # type: ignore[attr-defined]
    if not running or not idle:
        return None
    return seconds(idle[-1].stamp) - seconds(running[0].stamp)  # type: ignore[attr-defined]


def measure() -> NodeTimes:
    """Every size, each repeat interleaved: the goal in-process, through the node, then to
    the floor server (same script text), so a change of the machine's load between them
    shows in the spread, not in the ratio."""
    from erobs_bt.ros.client.client import ErobsBtClient

    out = NodeTimes({}, {}, {}, {}, {}, {}, {})
    floor_cmd = [sys.executable, __file__, "--floor-server"]
    engine = build_engine(EngineConfig(backend="sim", settings=EngineSettings(speed=20.0)))
    try:
        with (
            ros_domain(),
            node_process({"speed": "20.0"}) as node,
            ros_process(floor_cmd, "floor server ready"),
            ErobsBtClient() as client,
            ErobsBtClient(names={"execute": FLOOR_ACTION}) as floor,
        ):
            if not client.wait_for_server(30.0):
                raise RuntimeError("node not discovered:\n" + "\n".join(node.lines))
            for _ in range(WARM_UP):  # the first goals of each side import and set up lazily
                engine.orchestrator.submit(script(SIZES[0]), dry_run=False).wait(TIMEOUT)
                client.send(script(SIZES[0]), timeout=TIMEOUT).wait(TIMEOUT)
                floor.send(script(SIZES[0]), timeout=TIMEOUT).wait(TIMEOUT)
            for units in SIZES:
                text = script(units)
                for key in ("local", "local_cpu", "wall", "cpu", "own", "floor"):
                    getattr(out, key)[units] = []
                for _ in range(repeats(units)):
                    began, began_cpu = time.perf_counter(), process_cpu(os.getpid())
                    local = engine.orchestrator.submit(text, dry_run=False).wait(TIMEOUT)
                    out.local[units].append(time.perf_counter() - began)
                    out.local_cpu[units].append(process_cpu(os.getpid()) - began_cpu)
                    if not local.success:
                        raise RuntimeError(f"in-process {units} units: {local.error_message}")

                    before, states_before = client.snapshots.count, client.states.count
                    began, began_cpu = time.perf_counter(), process_cpu(node.pid)
                    result = client.send(text, timeout=TIMEOUT).wait(TIMEOUT)
                    out.wall[units].append(time.perf_counter() - began)
                    out.cpu[units].append(process_cpu(node.pid) - began_cpu)
                    if not result.success:
                        raise RuntimeError(f"node {units} units: {result.error_message}")
                    idle = client.states.wait_for(lambda m: m.state == "IDLE", 10.0, since=states_before)
                    if idle is not None:  # the client decodes snapshots on a thread of its own
                        client.snapshots.wait_for(
                            lambda m, goal=idle.goal_id: m.final and m.goal_id == goal, 30.0, since=before
                        )
                    out.snapshots[units] = client.snapshots.count - before
                    recent = client.states.items()[-(client.states.count - states_before) :]
                    seen = own_time(recent, idle.goal_id) if idle else None
                    if seen is not None:
                        out.own[units].append(seen)

                    began = time.perf_counter()
                    floor.send(text, timeout=TIMEOUT).wait(TIMEOUT)
                    out.floor[units].append(time.perf_counter() - began)
    finally:
        engine.close()
    return out


@dataclass
class SnapshotCosts:
    """Costs of one ``~/tree_snapshot`` message at 1,000 units [s], sampled while a goal
    advances one unit at a time."""

    behaviours: int
    delta: list[float]
    delta_bytes: int
    structure: list[float]
    full: list[float]
    full_copy: list[float]


def compiled_tree(parsed: Script, backend: ScriptedBackend) -> py_trees.behaviour.Behaviour:
    """The execute-mode tree of ``parsed`` on ``backend`` (batching on, an empty plan cache)."""
    context = GoalContext(
        parsed,
        group_into_batches(parsed.steps, enabled=True),
        Mode.EXECUTE,
        backend,
        PlanCache(),
        False,
        Controls(),
    )
    return compile_tree(context)


def snapshot_costs(units: int = 1_000) -> SnapshotCosts:
    """What the node pays for each kind of snapshot (see the module docstring)."""
    tasks = [{"task_type": "pipettor", "operation": "SUCK", "volume_pct": 0.1}] * units
    parsed = parse_script(json.dumps({"start_gripper": "pipettor", "tasks": tasks}))
    backend = ScriptedBackend()
    gates = [threading.Event() for _ in range(units)]
    backend.script("run_step", *[Outcome.ok(gate=g) for g in gates])
    root = compiled_tree(parsed, backend)
    root.tick_once()
    structure: list[float] = []
    for _ in range(5):  # once per goal, as the node: walk the tree, its first full snapshot
        TreeStructure.forget()  # measure the walk, not the structure kept from the last one
        began = time.perf_counter()
        tracker = TreeTracker("goal-1", root)
        state = tracker.full()
        encoder = convert.TreeSnapshotEncoder(tracker)
        encoder.full(state, with_json=True)
        structure.append(time.perf_counter() - began)
    costs = SnapshotCosts(tracker.size, [], 0, structure, [], [])
    waiter = threading.Event()
    for n in range(SNAPSHOT_SAMPLES):
        gates[n].set()
        while backend.count("run_step") <= n + 1:
            root.tick_once()
            waiter.wait(0.0002)
        began = time.perf_counter()
        delta = tracker.delta()
        assert delta is not None
        costs.delta_bytes = len(encoder.delta(delta))
        costs.delta.append(time.perf_counter() - began)
        if n % 20 == 0:
            began = time.perf_counter()
            encoder.full(tracker.full(), with_json=True)
            costs.full.append(time.perf_counter() - began)
            began = time.perf_counter()
            full = take_snapshot("goal-1", root, final=False)
            serialize_message(convert.snapshot_to_msg(full, with_json=True))
            costs.full_copy.append(time.perf_counter() - began)
    for gate in gates:
        gate.set()
    return costs


class _PollingBackend(ScriptedBackend):
    """A scripted backend (every call succeeds at once) that calls ``hook`` before each
    ``run_step``: the snapshot timer, firing mid-tick as it does in the node."""

    hook: Callable[[], None] | None = None

    def run_step(self, step: Step) -> Future[str]:
        if self.hook is not None:
            self.hook()
        return super().run_step(step)


def goal_snapshot_cost(units: int, units_per_poll: int) -> float:
    """The CPU the node's snapshot path spends on one goal of ``units`` one-step units [s].

    The goal's tree runs on this thread (a scripted backend, every step succeeds at once);
    every ``units_per_poll`` units the snapshot timer fires (a :class:`SnapshotThrottle`
    polled with a clock that allows it), and the goal ends with the final snapshot. The
    throttle publishes as the node does, every snapshot serialised by one
    :class:`~erobs_bt.ros.convert.SnapshotSerializer` with ``tree_json`` (``~/tree_snapshot``
    and the goal's bag take the same bytes): the structure and the first full snapshot,
    the deltas, the final full snapshot. Only the snapshot calls are timed.
    """
    parsed = parse_script(script(units))
    backend = _PollingBackend()
    root = compiled_tree(parsed, backend)
    serializer = convert.SnapshotSerializer()
    clock = [0.0]
    throttle = SnapshotThrottle(
        lambda state: serializer.serialize(state, throttle.tracker, with_json=True),
        rate=10.0,
        clock=lambda: clock[0],
    )
    spent = [0.0]
    calls = [0]

    def poll() -> None:
        calls[0] += 1
        throttle.ticked("goal-1", root)
        if calls[0] == 1 or calls[0] % units_per_poll == 0:
            clock[0] += 1.0
            began = time.perf_counter()
            throttle.poll()
            spent[0] += time.perf_counter() - began

    backend.hook = poll
    root.tick_once()
    while root.status == py_trees.common.Status.RUNNING:
        root.tick_once()
    began = time.perf_counter()
    throttle.finish("goal-1", root)
    return spent[0] + time.perf_counter() - began


def goal_snapshot_costs(units_per_poll: int) -> dict[int, list[float]]:
    """:func:`goal_snapshot_cost` of each size, :data:`GOAL_SNAPSHOT_REPEATS` times."""
    goal_snapshot_cost(SIZES[0], units_per_poll)  # imports, first-use set-up
    return {
        units: [goal_snapshot_cost(units, units_per_poll) for _ in range(GOAL_SNAPSHOT_REPEATS)]
        for units in (1_000, 10_000)
    }


def cpu_ratio(node: list[float], local: list[float]) -> str:
    """Median node CPU / median in-process CPU, or ``—`` when the in-process CPU is below
    the clock tick ``/proc`` counts in (10 ms)."""
    if median(local) <= 0:
        return "— (in-process < 1 tick)"
    return f"{median(node) / median(local):.2f}×"


def spread(samples: list[float]) -> str:
    """``min–max`` in ms."""
    return f"{min(samples) * 1e3:,.1f}–{max(samples) * 1e3:,.1f} ms"


def report() -> str:
    """The snapshot-scaling section of BENCHMARKS.md."""
    measured = measure()
    raw = os.environ.get("EROBS_BENCH_RAW")
    if raw:  # every sample, for a later look (the report is medians)
        with open(raw, "w") as out:
            json.dump(dataclasses.asdict(measured), out)
    local, local_cpu = measured.local, measured.local_cpu
    node, node_cpu = measured.wall, measured.cpu
    rows = []
    worst = 0.0
    ratios: dict[int, float] = {}
    for units in SIZES:
        ratio = median(node[units]) / median(local[units])
        ratios[units] = ratio
        worst = max(worst, ratio)
        own = measured.own[units]
        floor = median(measured.floor[units])
        rows.append(
            [
                f"{units:,}",
                str(len(node[units])),
                f"{fmt_ms(median(local[units]))} ({spread(local[units])})",
                f"{fmt_ms(median(node[units]))} ({spread(node[units])})",
                f"**{ratio:.2f}×**",
                f"{min(node[units]) / max(local[units]):.2f}–{max(node[units]) / min(local[units]):.2f}×",
                f"{fmt_ms(floor)} ({spread(measured.floor[units])})",
                f"{(median(node[units]) - floor) / median(local[units]):.2f}×",
                f"{fmt_ms(median(own))} (n={len(own)})" if own else "—",
                cpu_ratio(node_cpu[units], local_cpu[units]),
                str(measured.snapshots[units]),
            ]
        )
    table = markdown_table(
        [
            "one-step units",
            "runs",
            "in-process goal: median (spread)",
            "node goal, client watching ~/tree_snapshot: median (spread)",
            "node / in-process (medians)",
            "ratio range (extremes)",
            "action floor: same goal to a bare ActionServer (spread)",
            "(node − floor) / in-process",
            "node's own RUNNING → IDLE (median)",
            "node process CPU / in-process CPU (medians)",
            "~/tree_snapshot messages in the last goal",
        ],
        rows,
    )
    costs = snapshot_costs()
    # The snapshot timer fires at 10 Hz (snapshot_rate) of a goal that runs as fast as the
    # in-process one measured above.
    units_per_poll = max(1, round(0.1 / (median(local[1_000]) / 1_000)))
    per_goal = goal_snapshot_costs(units_per_poll)
    goal_table = markdown_table(
        ["node's snapshot CPU per goal", "median", "max", "per unit", "share of the in-process goal"],
        [
            [
                f"{units:,} units (structure, first full, deltas every {units_per_poll} units, final full)",
                f"**{fmt_ms(median(samples))}**",
                fmt_ms(max(samples)),
                f"{median(samples) / units * 1e6:.1f} µs",
                f"{median(samples) / median(local[units]) * 100:.1f} %",
            ]
            for units, samples in per_goal.items()
        ],
    )
    snapshot_table = markdown_table(
        ["snapshot at 1,000 units", "behaviours", "samples", "median", "max"],
        [
            [
                "delta (`TreeTracker.delta` + `TreeSnapshotEncoder.delta`)",
                f"{costs.behaviours:,}",
                str(len(costs.delta)),
                f"**{fmt_ms(median(costs.delta))}**",
                fmt_ms(max(costs.delta)),
            ],
            [
                "full, later in the goal: a new viewer, the final one "
                "(`TreeSnapshotEncoder.full`, with JSON)",
                f"{costs.behaviours:,}",
                str(len(costs.full)),
                f"**{fmt_ms(median(costs.full))}**",
                fmt_ms(max(costs.full)),
            ],
            [
                "structure, once per goal (`TreeTracker.full`, which walks the tree, "
                "+ `TreeSnapshotEncoder` + its first full one)",
                f"{costs.behaviours:,}",
                str(len(costs.structure)),
                fmt_ms(median(costs.structure)),
                fmt_ms(max(costs.structure)),
            ],
            [
                "full copy as messages (`take_snapshot` + `snapshot_to_msg` with JSON + serialisation)",
                f"{costs.behaviours:,}",
                str(len(costs.full_copy)),
                fmt_ms(median(costs.full_copy)),
                fmt_ms(max(costs.full_copy)),
            ],
        ],
    )
    verdict = "meets" if worst <= 1.2 else "misses"
    per_size = ", ".join(f"{ratios[u]:.2f}× at {u:,}" for u in SIZES)
    return (
        "## Snapshot scaling: node vs in-process by tree size\n\n"
        "Generated by `bench/bench_snapshots.py` (its own section; run it with "
        "`scripts/env.sh .venv/bin/python bench/run_all.py --section bench_snapshots`). Scripts of "
        "one-step units (`pipettor` `SET_LED`, no motion), sim backend at `speed:=20`, each size measured "
        f"{REPEATS} times in-process (`Orchestrator.submit` → `GoalHandle.wait`) and through the node "
        "(goal sent → result, with `ErobsBtClient` subscribed to `~/tree_snapshot`) in the same run, "
        f"each repeat interleaved (in-process, node, floor), after {WARM_UP} warm-up goals on each side. "
        "The node sends a goal's structure once and then only what changed (`erobs_bt/ros/snapshots.py`); "
        "snapshots, full and deltas, are serialised from parts kept per behaviour (`TreeSnapshotEncoder`) "
        "and the goal's ROS 2 bag records the same bytes; action feedback is at most `feedback_rate` "
        "(50 Hz) within a unit plus every unit's last one and every HIT/MISS decision, encoded by erobs_bt "
        "and published as bytes; run-log lines are encoded with orjson where they happen and written "
        "once per batch by a thread of their own, which also makes the goal's bag; the node logs through "
        "rcutils directly (erobs_bt/ros/node/runlogs.py, node.py). The action floor is the same goal "
        "(same script text, same client) to a bare rclpy `ActionServer` of `ExecuteScript` in its own "
        "process that succeeds at once; the "
        "node's own time is from its `RUNNING` and `IDLE` `~/execution_state` stamps (parsed and "
        "compiled script accepted → goal finished). CPU is the process's user + system time over the "
        "goal (the node's includes its DDS threads).\n\n"
        f"{table}\n\n{snapshot_table}\n\n"
        "The node's snapshot CPU per goal: the goal's tree run on one thread (scripted backend, every "
        "step succeeds at once) with the snapshot timer fired between two steps every "
        f"{units_per_poll} units (10 Hz at the in-process goal's pace), publishing as the node does "
        "(`SnapshotThrottle` + `SnapshotSerializer` with `tree_json`; `~/tree_snapshot` and the bag take "
        f"the same bytes); only the snapshot calls timed, {GOAL_SNAPSHOT_REPEATS} goals per size.\n\n"
        f"{goal_table}\n\n"
        f"Node / in-process: {per_size}; worst {worst:.2f}× ({verdict} the 1.2 target). A delta costs "
        f"{fmt_ms(median(costs.delta))} and a later full snapshot {fmt_ms(median(costs.full))} "
        "at 1,000 units "
        f"(target ≤ 1 ms), against {fmt_ms(median(costs.full_copy))} for a full copy built as messages; a "
        f"serialised delta is {costs.delta_bytes:,} bytes. The machine is shared (2 cores, other work "
        "running), so absolute times vary between runs; the ratios are measured side by side.\n"
    )


if __name__ == "__main__":
    if "--floor-server" in sys.argv:
        sys.exit(floor_server())
    print(report())

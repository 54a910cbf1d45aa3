"""What a user pays before the robot moves: start-up, the allowed-collision matrix, the speed cap.

Every figure is measured three times in this run and shown as the median with the spread
(min–max) of the three, next to the baseline it is compared with, measured side by side:

* **CLI start-up**: ``erobs-bt validate`` on a sample script and ``erobs-bt run`` until
  the first motion (the run log's first ``execute_started`` record, against the instant
  the process was spawned), each a fresh process; wall time and CPU time (user + system of
  the child). Baselines: an interpreter that does nothing (``python -c pass``), and the
  import of ``scipy.spatial.transform`` alone, which is what the numpy rotations replaced.
* **allowed-collision matrix (ACM)**: building the collision model of a tool with the
  matrix sampled afresh (10,000 configurations, what every process and tool change paid
  before) against the same model with the matrix read from the disk cache (what a new
  process pays) and from memory (what a tool change within a process pays).
* **one-step pipettor goal** (``anti_solvent_dispense.json``: the operator has mounted the
  pipettor, one ``EXPEL``): submit → result of the first goal of a fresh in-process engine
  at infinite sim speed (mounting the pipettor builds its collision model), with the
  matrix cached against the matrix sampled afresh (a store without disk
  and memory swapped in for the process default: a bench-only instrument).
* **the speed cap**: simulated seconds per wall second that the controller delivers while
  it plays trajectories at ``speed`` 1 … ∞, with the coarse steps it now takes against one
  control period per loop iteration (what it did before; the bench forces that through
  ``SimController._periods_per_iteration``, a bench-only instrument). The final state of
  every run is compared with the real-time run.
"""

from __future__ import annotations

import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from common import fmt_ms, markdown_table

from erobs_bt.backends.sim.controller import SimController

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO.parent / "shared" / "samples" / "erobs"
POSES = SAMPLES / "cms_poses.yaml"
REPEATS = 3
ERobsBT = Path(sys.executable).with_name("erobs-bt")


def spread(samples: Sequence[float], fmt: Callable[[float], str] = fmt_ms) -> str:
    """``median (min–max)`` of the samples."""
    return f"{fmt(statistics.median(samples))} ({fmt(min(samples))}–{fmt(max(samples))})"


def child(args: Sequence[str], *, env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Run a process to completion: ``(spawn instant [epoch s], wall [s], CPU [s])``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    spawned = time.time()
    began = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return spawned, wall, cpu


def startup_rows() -> list[list[str]]:
    python = sys.executable
    script = SAMPLES / "spincoat_to_hotplate.json"
    rows: list[list[str]] = []
    cases: list[tuple[str, list[str]]] = [
        ("`python -c pass` (the interpreter alone, baseline)", [python, "-c", "pass"]),
        (
            "`import scipy.spatial.transform` (what the rotations used to import)",
            [python, "-c", "import scipy.spatial.transform"],
        ),
        (
            "`erobs-bt validate spincoat_to_hotplate.json`",
            [str(ERobsBT), "validate", str(script), "--poses", str(POSES)],
        ),
        (
            "`import` of the engine with the simulated cell",
            [python, "-c", "import erobs_bt.session, erobs_bt.backends.sim.backend"],
        ),
    ]
    for label, args in cases:
        walls, cpus = [], []
        for _ in range(REPEATS):
            _, wall, cpu = child(args)
            walls.append(wall)
            cpus.append(cpu)
        rows.append([label, spread(walls), spread(cpus)])
    walls, cpus, firsts = [], [], []
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "run.jsonl"
            args = [
                str(ERobsBT),
                "run",
                str(SAMPLES / "perf_safe_transport_to_safe_exchange.json"),
                "--poses",
                str(POSES),
                "--speed",
                "1000",
                "--log",
                str(log),
            ]
            spawned, wall, cpu = child(args)
            records = [json.loads(line) for line in log.read_text().splitlines()]
            first = next(r["t"] for r in records if r["event"] in ("execute_started", "replay_started"))
            firsts.append(first - spawned)
            walls.append(wall)
            cpus.append(cpu)
    rows.append(
        [
            "`erobs-bt run perf_safe_transport_to_safe_exchange.json --speed 1000`: spawn → first motion",
            spread(firsts),
            "—",
        ]
    )
    rows.append(["↳ the same run, whole process", spread(walls), spread(cpus)])
    return rows


def acm_rows() -> tuple[list[list[str]], list[list[str]]]:
    from erobs_bt.backends.sim import collision
    from erobs_bt.backends.sim.cell import load_cell

    cell = load_cell()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for gripper in ("epick", "pipettor", "hande"):
            cold, disk, memory = [], [], []
            for n in range(REPEATS):
                directory = Path(tmp) / f"{gripper}-{n}"
                began = time.perf_counter()
                collision.CollisionModel(cell, gripper=gripper, acm_store=collision.AcmStore(directory))
                cold.append(time.perf_counter() - began)
                store = collision.AcmStore(directory)  # a new process: empty memory, same disk
                began = time.perf_counter()
                model = collision.CollisionModel(cell, gripper=gripper, acm_store=store)
                disk.append(time.perf_counter() - began)
                other = "epick" if gripper != "epick" else "pipettor"
                model.set_gripper(other)
                began = time.perf_counter()
                model.set_gripper(gripper)  # a tool change back: the matrix is in memory
                memory.append(time.perf_counter() - began)
                if store.computed != 1 or store.loaded != 1:
                    raise RuntimeError(
                        f"{gripper}: expected one load and one computation, got {store.__dict__}"
                    )
            rows.append(
                [
                    gripper,
                    spread(cold),
                    spread(disk),
                    spread(memory),
                    f"{statistics.median(cold) / statistics.median(disk):,.0f}×",
                ]
            )
    goal_rows = pipettor_goal_rows(collision)
    return rows, goal_rows


def pipettor_goal_rows(collision: object) -> list[list[str]]:
    from erobs_bt.session import EngineConfig, build_engine

    text = (SAMPLES / "anti_solvent_dispense.json").read_text()
    results: dict[str, list[float]] = {"cached": [], "sampled": []}
    default_store = collision.DEFAULT_ACM_STORE  # type: ignore[attr-defined]
    try:
        for _ in range(REPEATS):
            for mode in ("cached", "sampled"):
                collision.DEFAULT_ACM_STORE = (  # type: ignore[attr-defined]
                    default_store if mode == "cached" else collision.AcmStore(persist=False)  # type: ignore[attr-defined]
                )
                engine = build_engine(EngineConfig(backend="sim", speed=math.inf))
                try:
                    # The first goal of the process: mounting the pipettor builds its model.
                    began = time.perf_counter()
                    result = engine.orchestrator.submit(text, dry_run=False).wait(60.0)
                    results[mode].append(time.perf_counter() - began)
                    if not result.success:
                        raise RuntimeError(f"anti_solvent_dispense.json failed: {result.error_message}")
                finally:
                    engine.close()
    finally:
        collision.DEFAULT_ACM_STORE = default_store  # type: ignore[attr-defined]
    ratio = statistics.median(results["sampled"]) / statistics.median(results["cached"])
    return [
        [
            "`anti_solvent_dispense.json` (pipettor mounted by hand, one `EXPEL`), "
            "first goal: submit → result",
            spread(results["cached"]),
            spread(results["sampled"]),
            f"{ratio:,.0f}×",
        ]
    ]


def speed_rows() -> tuple[list[list[str]], float]:
    from erobs_bt.backends.base import ArmSegment
    from erobs_bt.backends.sim.controller import SimController
    from erobs_bt.backends.sim.kinematics import ACCELERATION_LIMITS, VELOCITY_LIMITS
    from erobs_bt.backends.sim.timing import time_parameterize

    a = (0.0, -1.57, 1.57, -1.57, -1.57, 0.0)
    b = (1.2, -0.9, 0.7, -0.6, -1.2, 1.5)
    points = time_parameterize(
        [a, b, a],
        velocity_limits=VELOCITY_LIMITS,
        acceleration_limits=ACCELERATION_LIMITS,
        speed_scaling=0.01,
    )
    segment = ArmSegment(0, tuple(points))
    duration = segment.duration

    def play(speed: float, kind: type[SimController]) -> tuple[float, tuple[float, ...]]:
        controller = kind(a, speed=speed)
        try:
            began = time.perf_counter()
            played = 0.0
            while played == 0.0 or time.perf_counter() - began < 0.5:
                controller.execute(segment).result(timeout=600)
                played += duration
            return played / (time.perf_counter() - began), controller.joint_positions()
        finally:
            controller.shutdown()

    class OnePeriod(SimController):
        """The loop as it was: one control period per iteration."""

        def _periods_per_iteration(self) -> int:
            return 1

    rows = []
    for speed in (10.0, 100.0, 1000.0, 10000.0, math.inf):
        coarse, fine = [], []
        for _ in range(REPEATS):
            delivered, final = play(speed, SimController)
            coarse.append(delivered)
            if final != a:
                raise RuntimeError(f"speed {speed}: final state {final} differs from {a}")
            fine.append(play(speed, OnePeriod)[0])
        label = "∞" if not math.isfinite(speed) else f"{speed:,.0f}"
        rows.append(
            [
                label,
                spread(coarse, lambda v: f"{v:,.0f}×"),
                spread(fine, lambda v: f"{v:,.0f}×"),
                f"{statistics.median(coarse) / statistics.median(fine):,.1f}×",
            ]
        )
    return rows, duration


def report() -> str:
    startup = markdown_table(["what", "wall time, median (min–max) of 3", "CPU time"], startup_rows())
    acm, goal = acm_rows()
    acm_table = markdown_table(
        [
            "tool",
            "collision model, ACM sampled (before)",
            "ACM read from the disk cache (new process)",
            "tool change, ACM in memory",
            "sampled / disk",
        ],
        acm,
    )
    goal_table = markdown_table(
        [
            "goal (in-process engine, infinite sim speed)",
            "ACM cached",
            "ACM sampled afresh (before)",
            "ratio",
        ],
        goal,
    )
    speed_table, duration = speed_rows()
    speeds = markdown_table(
        [
            "`--speed`",
            "delivered, coarse steps (now)",
            "delivered, one period per iteration (before)",
            "now / before",
        ],
        speed_table,
    )
    return (
        "## Start-up: what a user pays before the robot moves\n\n"
        f"Each figure three times in this run, median (min–max); each row a fresh process. {os.cpu_count()} "
        "cores shared with other work: wall times carry that noise, CPU times less so.\n\n"
        f"{startup}\n\n"
        "### The allowed-collision matrix, computed once per cell geometry\n\n"
        "Building the collision model of a tool (URDF, hulls, scene and the ACM), median (min–max) of 3.\n\n"
        f"{acm_table}\n\n"
        f"{goal_table}\n\n"
        "### The speed cap\n\n"
        f"Simulated seconds per wall second while a {duration:.1f} s trajectory (3 waypoints) "
        "plays back to back for at least 0.5 s, "
        "median (min–max) of 3; every run ends exactly at the trajectory's last point.\n\n"
        f"{speeds}\n"
    )


if __name__ == "__main__":
    print(report())

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
* **one-step pipettor goal** (``anti_solvent_dispense.json``: ``start_gripper`` pipettor on
  a cell that starts with the ePick, so the goal mounts the pipettor by hand, then one
  ``EXPEL``): ``Orchestrator.submit`` → the goal's result (parse, tree, the goal's thread,
  the mount, the pipettor step at infinite sim speed, the result), in an engine that is
  already built (``build_engine`` is not timed), with the ACM on disk. The first goal of a
  fresh engine and the later goals of the same engine separately; and the first goal with
  a store without disk and memory swapped in for the process default (a bench-only
  instrument), which shows whether the goal depends on the matrix at all.
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

from common import SAMPLES, compile_package, fmt_ms, markdown_table, samples_skipped

REPO = Path(__file__).resolve().parents[1]
POSES = SAMPLES / "cms_poses.yaml"
#: The sample scripts the `validate` and `run` start-up rows (and the import breakdown) measure.
STARTUP_SAMPLES = (POSES.name, "spincoat_to_hotplate.json", "perf_safe_transport_to_safe_exchange.json")
#: The sample script the pipettor-goal rows measure.
PIPETTOR_SAMPLE = "anti_solvent_dispense.json"
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


def process_cpu(pid: int) -> float:
    """CPU time [s] of every live thread of ``pid`` (``/proc/<pid>/task/*/schedstat``, ns)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
    return total / 1e9


def first_motion(args: Sequence[str], log: Path) -> tuple[float, float, float, float]:
    """Run ``erobs-bt run … --log LOG`` and watch its run log for the first motion.

    The first motion is the first ``execute_started`` or ``replay_started`` record (the unit's
    trajectory is handed to the controller right after it). Its ``t`` against the instant the
    process was spawned is the wall time; the process's CPU time is read from ``/proc`` as soon
    as the record appears (polled every millisecond, so it includes up to about a millisecond of
    the motion itself).

    Returns:
        ``(wall to first motion, CPU to first motion, whole process wall, whole process CPU)`` [s].
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    spawned = time.time()
    began = time.perf_counter()
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    first: float | None = None
    cpu_first = math.nan
    try:
        while process.poll() is None and first is None:
            if log.exists():
                for line in log.read_text().splitlines():
                    record = json.loads(line) if line.endswith("}") else {}
                    if record.get("event") in ("execute_started", "replay_started"):
                        cpu_first = process_cpu(process.pid)
                        first = float(record["t"])
                        break
            time.sleep(0.001)
        status = process.wait(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if status != 0 or first is None:
        raise RuntimeError(
            f"{' '.join(args)}: exit status {status}, first motion {'seen' if first else 'not seen'}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return first - spawned, cpu_first, wall, cpu


#: Where import time goes, by the top-level package of each module (``python -X importtime``).
IMPORT_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("numpy", ("numpy",)),
    ("pinocchio, coal (collision model)", ("pinocchio", "coal", "eigenpy", "hppfcl", "cmeel")),
    ("ruckig, ompl (trajectories, sampling planner)", ("ruckig", "ompl")),
    ("py_trees (and pydot, which it imports)", ("py_trees", "pydot", "pyparsing")),
    ("rich", ("rich", "markdown_it", "mdurl", "pygments")),
    ("click", ("click",)),
    ("yaml", ("yaml", "_yaml")),
    ("erobs_bt", ("erobs_bt",)),
)


def import_breakdown(args: Sequence[str]) -> dict[str, float]:
    """Self import time [s] per group of :data:`IMPORT_GROUPS` (plus ``standard library and other``)
    of one command under ``python -X importtime``, median of :data:`REPEATS` runs."""
    runs: list[dict[str, float]] = []
    for _ in range(REPEATS):
        completed = subprocess.run(
            [sys.executable, "-X", "importtime", *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        groups: dict[str, float] = {}
        for line in completed.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            fields = line.split("|")
            self_us = int(fields[0].split(":")[1])
            top = fields[2].strip().split(".")[0]
            label = next((g for g, tops in IMPORT_GROUPS if top in tops), "standard library and other")
            groups[label] = groups.get(label, 0.0) + self_us / 1e6
        runs.append(groups)
    labels = {label for groups in runs for label in groups}
    return {label: statistics.median(groups.get(label, 0.0) for groups in runs) for label in labels}


#: Medians [s] of the start-up rows, for the reading of the figures (filled by :func:`startup_rows`).
FIGURES: dict[str, float] = {}


def startup_rows() -> tuple[list[list[str]], list[list[str]] | str]:
    """The start-up table and the import-time breakdown table; without the sample scripts, the
    rows that need none and, instead of the breakdown, the paragraph saying what was skipped."""
    compile_package()
    skipped = samples_skipped(
        "the `validate` and `run` start-up rows, the reading against issue 13's targets and the "
        "import-time breakdown",
        STARTUP_SAMPLES,
    )
    python = sys.executable
    script = SAMPLES / "spincoat_to_hotplate.json"
    validate = [str(ERobsBT), "validate", str(script), "--poses", str(POSES)]
    rows: list[list[str]] = []
    cases: list[tuple[str, str, list[str]]] = [
        ("pass", "`python -c pass` (the interpreter alone, baseline)", [python, "-c", "pass"]),
        (
            "scipy",
            "`import scipy.spatial.transform` (what the rotations used to import)",
            [python, "-c", "import scipy.spatial.transform"],
        ),
        ("help", "`erobs-bt --help` (the command line, no verb)", [str(ERobsBT), "--help"]),
        ("validate", "`erobs-bt validate spincoat_to_hotplate.json` (target ≤ 0.3 s)", validate),
        (
            "engine",
            "`import` of the engine with the simulated cell",
            [python, "-c", "import erobs_bt.session, erobs_bt.backends.sim.backend"],
        ),
    ]
    if skipped:
        cases = [case for case in cases if case[0] != "validate"]
    for key, label, args in cases:
        walls, cpus = [], []
        for _ in range(REPEATS):
            _, wall, cpu = child(args)
            walls.append(wall)
            cpus.append(cpu)
        rows.append([label, spread(walls), spread(cpus)])
        FIGURES[f"{key} wall"] = statistics.median(walls)
        FIGURES[f"{key} cpu"] = statistics.median(cpus)
    if skipped:
        return rows, skipped
    run_args = [
        "run",
        str(SAMPLES / "perf_safe_transport_to_safe_exchange.json"),
        "--poses",
        str(POSES),
        "--speed",
        "1000",
    ]
    firsts, first_cpus, walls, cpus = [], [], [], []
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "run.jsonl"
            first, first_cpu, wall, cpu = first_motion([str(ERobsBT), *run_args, "--log", str(log)], log)
        firsts.append(first)
        first_cpus.append(first_cpu)
        walls.append(wall)
        cpus.append(cpu)
    rows.append(
        [
            "`erobs-bt run perf_safe_transport_to_safe_exchange.json --speed 1000`: spawn → first motion "
            "(target ≤ 0.8 s)",
            spread(firsts),
            spread(first_cpus),
        ]
    )
    rows.append(["↳ the same run, whole process", spread(walls), spread(cpus)])
    FIGURES["first wall"] = statistics.median(firsts)
    FIGURES["first cpu"] = statistics.median(first_cpus)
    breakdown_validate = import_breakdown(["-m", "erobs_bt.cli", *validate[1:]])
    with tempfile.TemporaryDirectory() as tmp:
        breakdown_run = import_breakdown(
            ["-m", "erobs_bt.cli", *run_args, "--log", str(Path(tmp) / "run.jsonl")]
        )
    labels = [label for label, _ in IMPORT_GROUPS] + ["standard library and other"]
    breakdown = [
        [label, fmt_ms(breakdown_validate.get(label, 0.0)), fmt_ms(breakdown_run.get(label, 0.0))]
        for label in labels
    ]
    breakdown.append(
        [
            "**all imports**",
            f"**{fmt_ms(sum(breakdown_validate.values()))}**",
            f"**{fmt_ms(sum(breakdown_run.values()))}**",
        ]
    )
    return rows, breakdown


def acm_rows() -> tuple[list[list[str]], list[list[str]] | str]:
    from erobs_bt.world import collision
    from erobs_bt.world.config import load_cell

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


#: Later goals timed per fresh engine in the pipettor-goal rows.
LATER_GOALS = 5


def pipettor_goal_rows(collision: object) -> list[list[str]] | str:
    """The pipettor-goal table's rows; without the sample script, the paragraph saying it was skipped."""
    from erobs_bt.session import EngineConfig, build_engine
    from erobs_bt.settings import EngineSettings

    skipped = samples_skipped("the one-step pipettor goal rows", [PIPETTOR_SAMPLE])
    if skipped:
        return skipped
    text = (SAMPLES / PIPETTOR_SAMPLE).read_text()
    results: dict[str, list[float]] = {"first": [], "later": [], "sampled": []}
    reloads = 0
    default_store = collision.DEFAULT_ACM_STORE  # type: ignore[attr-defined]

    def goal(engine: object) -> float:
        began = time.perf_counter()
        result = engine.orchestrator.submit(text, dry_run=False).wait(60.0)  # type: ignore[attr-defined]
        seconds = time.perf_counter() - began
        if not result.success:
            raise RuntimeError(f"anti_solvent_dispense.json failed: {result.error_message}")
        return seconds

    try:
        for _ in range(REPEATS):
            for mode in ("cached", "sampled"):
                collision.DEFAULT_ACM_STORE = (  # type: ignore[attr-defined]
                    default_store if mode == "cached" else collision.AcmStore(persist=False)  # type: ignore[attr-defined]
                )
                engine = build_engine(EngineConfig(backend="sim", settings=EngineSettings(speed=math.inf)))
                try:
                    if engine.backend.current_gripper() == "pipettor":
                        raise RuntimeError("the packaged cell starts with the pipettor: nothing to mount")
                    first = goal(engine)  # the first goal of the engine: it mounts the pipettor
                    if mode == "cached":
                        results["first"].append(first)
                        # the same engine again: the pipettor is mounted
                        later = [goal(engine) for _ in range(LATER_GOALS)]
                        results["later"].append(statistics.median(later))
                    else:
                        results["sampled"].append(first)
                    reloads += engine.backend.model_reloads  # type: ignore[attr-defined]
                finally:
                    engine.close()
    finally:
        collision.DEFAULT_ACM_STORE = default_store  # type: ignore[attr-defined]
    FIGURES["pipettor first"] = statistics.median(results["first"])
    FIGURES["pipettor later"] = statistics.median(results["later"])
    FIGURES["pipettor reloads"] = reloads
    return [
        [
            "`anti_solvent_dispense.json` (pipettor mounted by hand, one `EXPEL`): submit → result",
            spread(results["first"]),
            spread(results["later"]),
            spread(results["sampled"]),
        ]
    ]


def pipettor_reading() -> str:
    """Issue 13's pipettor-goal target against this run's medians."""
    first, later = FIGURES["pipettor first"], FIGURES["pipettor later"]
    met = "met" if max(first, later) <= 0.020 else "not met"
    reloads = int(FIGURES["pipettor reloads"])
    return (
        "The goal as timed: `Orchestrator.submit` of the script text until its result, in-process, "
        "the engine already built (not timed) and the matrix on disk; it parses and validates the "
        "script, compiles its tree, starts the goal's thread, mounts the pipettor by hand "
        "(`start_gripper`; the cell starts with the ePick), runs the `EXPEL` at infinite sim speed "
        "and returns the result. Later goals: the same script again on the same engine (median of "
        f"{LATER_GOALS} per engine). Issue 13's target, ≤ 20 ms: {met} ({fmt_ms(first)} for the "
        f"first goal, {fmt_ms(later)} for later ones). Mounting a tool no longer reloads the "
        "collision model: the reload (the tool's geometry, scene and matrix, the table above) "
        "waits for the first plan that needs the new tool, so a goal that plans nothing pays "
        f"nothing for it (robot-model reloads over all these goals: {reloads}) and the matrix "
        "sampled afresh costs this goal nothing either; a motion goal after the mount pays the "
        "reload once, at its first plan."
    )


def speed_rows() -> tuple[list[list[str]], tuple[float, float]]:
    """Delivered speed per ``--speed``, now and before; also ``(short, long)`` trajectory durations [s].

    Both trajectories go ``a → b → a``; the long one (speed scaling 0.01, 96.9 s) is played where
    the controller delivers hundreds of × or more, so that one play spans tens of milliseconds and
    the per-goal overhead (a future, a thread wake-up) stays out of the figure; the short one (speed
    scaling 0.2, 6.2 s) where it delivers at most ~100× and for the one-period loop (≤ ~10×), so
    that no run needs minutes. Each run plays its trajectory back to back for at least 0.5 s.
    """
    from erobs_bt.backends.base import ArmSegment
    from erobs_bt.backends.sim.controller import SimController
    from erobs_bt.planning.timing import time_parameterize
    from erobs_bt.world.kinematics import ACCELERATION_LIMITS, VELOCITY_LIMITS

    a = (0.0, -1.57, 1.57, -1.57, -1.57, 0.0)
    b = (1.2, -0.9, 0.7, -0.6, -1.2, 1.5)

    def trajectory(scaling: float) -> ArmSegment:
        points = time_parameterize(
            [a, b, a],
            velocity_limits=VELOCITY_LIMITS,
            acceleration_limits=ACCELERATION_LIMITS,
            speed_scaling=scaling,
        )
        return ArmSegment(0, tuple(points))

    short, long = trajectory(0.2), trajectory(0.01)

    def play(
        speed: float, kind: type[SimController], segment: ArmSegment
    ) -> tuple[float, float, tuple[float, ...]]:
        """``(delivered back to back, delivered during the motions (playback()), final state)``."""
        controller = kind(a, speed=speed)
        try:
            began = time.perf_counter()
            played = 0.0
            while played == 0.0 or time.perf_counter() - began < 0.5:
                controller.execute(segment).result(timeout=600)
                played += segment.duration
            elapsed = time.perf_counter() - began
            return played / elapsed, controller.playback().factor, controller.joint_positions()
        finally:
            controller.shutdown()

    class OnePeriod(SimController):
        """The loop as it was: one control period per iteration."""

        def _periods_per_iteration(self, lag: float = 0.0) -> int:
            return 1

    rows = []
    for speed in (10.0, 100.0, 1000.0, 10000.0, math.inf):
        segment = short if speed <= 100.0 else long
        coarse, during, fine = [], [], []
        for _ in range(REPEATS):  # interleaved, so both see the same machine load
            delivered, measured, final = play(speed, SimController, segment)
            coarse.append(delivered)
            during.append(measured)
            if final != a:
                raise RuntimeError(f"speed {speed}: final state {final} differs from {a}")
            fine.append(play(speed, OnePeriod, short)[0])
        label = "∞" if not math.isfinite(speed) else f"{speed:,.0f}"
        delivered_median = statistics.median(coarse)
        rows.append(
            [
                label,
                f"{segment.duration:.1f} s",
                spread(coarse, lambda v: f"{v:,.0f}×"),
                "—" if not math.isfinite(speed) else f"{delivered_median / speed * 100:.0f} %",
                spread(during, lambda v: f"{v:,.0f}×"),
                spread(fine, lambda v: f"{v:,.0f}×"),
                f"{delivered_median / statistics.median(fine):,.1f}×",
            ]
        )
    return rows, (short.duration, long.duration)


def startup_reading() -> str:
    """Issue 13's start-up targets against this run's medians, wall and CPU."""
    validate_wall, validate_cpu = FIGURES["validate wall"], FIGURES["validate cpu"]
    first_wall, first_cpu = FIGURES["first wall"], FIGURES["first cpu"]
    idle_wall, idle_cpu = FIGURES["pass wall"], FIGURES["pass cpu"]

    def verdict(value: float, target: float) -> str:
        return "met" if value <= target else "not met"

    return (
        f"Against issue 13's targets: `validate` takes {fmt_ms(validate_cpu)} of CPU "
        f"(target 0.3 s: {verdict(validate_cpu, 0.3)}) and {fmt_ms(validate_wall)} of wall time "
        f"({verdict(validate_wall, 0.3)}); `run` reaches its first motion after {fmt_ms(first_cpu)} "
        f"of CPU (target 0.8 s: {verdict(first_cpu, 0.8)}) and {fmt_ms(first_wall)} of wall time "
        f"({verdict(first_wall, 0.8)}). The wall times are those of this shared machine: an "
        f"interpreter that does nothing took {fmt_ms(idle_wall)} of wall time for "
        f"{fmt_ms(idle_cpu)} of CPU here, so CPU time is the figure that carries over to an idle "
        "machine, where a single-threaded start-up's wall time is about its CPU time."
    )


def report() -> str:
    startup_table, breakdown_table = startup_rows()
    startup = markdown_table(["what", "wall time, median (min–max) of 3", "CPU time"], startup_table)
    if isinstance(breakdown_table, str):
        reading, breakdown = breakdown_table, "(skipped, see above)"
    else:
        reading = startup_reading()
        breakdown = markdown_table(
            [
                "package (self import time, `-X importtime`, median of 3)",
                "`validate`",
                "`run` (whole process)",
            ],
            breakdown_table,
        )
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
    goal_table = (
        goal
        if isinstance(goal, str)
        else markdown_table(
            [
                "goal (in-process engine built beforehand, infinite sim speed)",
                "first goal of the engine, median (min–max) of 3",
                f"later goals (median of {LATER_GOALS} each), median (min–max) of 3",
                "first goal, ACM sampled afresh",
            ],
            goal,
        )
    )
    speed_table, (short, long) = speed_rows()
    speeds = markdown_table(
        [
            "`--speed`",
            "trajectory",
            "delivered back to back, coarse steps (now), median (min–max) of 3",
            "delivered / asked",
            "delivered during the motions (`SimController.playback()`, what `run` prints)",
            f"delivered, one period per iteration (before; {short:.1f} s trajectory)",
            "now / before",
        ],
        speed_table,
    )
    return (
        "## Start-up: what a user pays before the robot moves\n\n"
        f"Each figure three times in this run, median (min–max); each row a fresh process. {os.cpu_count()} "
        "cores shared with other work: wall times carry that noise (on an idle machine wall time is "
        "about CPU time for these single-threaded start-ups), CPU times less so. The package is "
        "byte-compiled first (`compileall`, what `pip install` does), so no row pays for compiling "
        "erobs_bt's sources; a process started with `PYTHONDONTWRITEBYTECODE` set on a source "
        "checkout (as this machine's shells are) compiles them on every start, about 0.1 s more.\n\n"
        f"{startup}\n\n"
        f"{reading}\n\n"
        "Where the import time goes, by package (self time of each module, so a package's row "
        "does not include what it imports from another row; `-X importtime` adds its own "
        "overhead, so these sum to more than the imports cost without it):\n\n"
        f"{breakdown}\n\n"
        "### The allowed-collision matrix, computed once per cell geometry\n\n"
        "Building the collision model of a tool (URDF, hulls, scene and the ACM), median (min–max) of 3.\n\n"
        f"{acm_table}\n\n"
        f"{goal_table}\n\n"
        + ("" if isinstance(goal, str) else f"{pipettor_reading()}\n\n")
        + "### The speed cap\n\n"
        "Simulated seconds per wall second that `SimController` delivers while a trajectory "
        f"(3 waypoints, `a → b → a`: {short:.1f} s at speed scaling 0.2, {long:.1f} s at 0.01) plays "
        "back to back for at least 0.5 s, median (min–max) of 3, the two loops interleaved; every run "
        "ends exactly at the trajectory's last point. The long trajectory is used where the controller "
        "delivers hundreds of × or more, so that one play spans tens of milliseconds and the per-goal "
        "overhead stays out of the figure. *Back to back* counts the wall time between plays too (the "
        "caller's thread waking up for the next goal); *during the motions* is what the controller "
        "measures from each `execute()` call to the end of its motion, the figure `erobs-bt run` "
        "prints at the end (`simulated … s of motion in … s of wall time: …× (asked …×)`). A "
        "trajectory's clock starts at its `execute()` call, a loop behind its deadline makes the lag up "
        "in one coarse step, and no motion ends before `duration / speed`, so neither figure can "
        "exceed the asked speed (∞ shows what the CPU allows).\n\n"
        f"{speeds}\n"
    )


if __name__ == "__main__":
    print(report())

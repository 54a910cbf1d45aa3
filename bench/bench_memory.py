"""Memory benchmarks: resident memory with a full plan cache against the same process with an empty one.

Two measurements, side by side:

* **In-process engine** (a fresh Python process, so no other benchmark's garbage is in
  it): ``build_engine`` on the simulated cell runs FULL_EXPERIMENT_RUN.json once; the
  solutions of its 8 motion units are combined, in order, into one :class:`Solution` of
  the whole script's motion (what one FULL_EXPERIMENT-sized cache entry would be). Its
  resident memory (``VmRSS``) is read with the engine's cache empty, then after storing 64
  variants of that solution (start joints shifted by 0.01 rad per variant, so every key
  and every entry is distinct) in the engine's own :class:`PlanCache`, then after
  ``clear_cache``. Each variant is decoded from its own bytes, so no two entries share
  objects (as distinct plans do not). ``PlanCache.nbytes()`` is the cache's own estimate of
  the memory its decoded entries hold (``solution_nbytes``, what its byte bound counts).
* **The node** (``python -m erobs_bt.ros.node.node``, sim backend): a FULL_EXPERIMENT-sized
  *eligible* goal does not exist among the samples (the full script is 18 units, never
  cache-eligible), so the node's cache is filled the only way a client can fill it: 64
  dry-run previews of an eligible script of similar size, ``spincoat_to_hotplate.json``
  with its tasks repeated :data:`REPEATS` times, each variant with the ``hotplate`` pose
  moved by 0.001° × its number (a distinct key). ``VmRSS`` of the node process is read
  idle (after a warm-up preview and ``~/clear_cache``), after the 64 previews, and after
  ``~/clear_cache``. The cache size is ``solution_nbytes`` of the same plan made in-process × 64.
  A control node with ``cache_capacity:=1`` runs the same previews: its growth is what
  planning and previewing leave behind without the cache.

The in-process readings are taken after ``gc.collect()`` and glibc ``malloc_trim(0)`` (live
memory); the node's are raw, as the operating system sees the process.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import math
import os
import subprocess
import sys
import time
import tracemalloc
from dataclasses import replace
from typing import Any

from bench_planning import FULL_EXPERIMENT, POSES_FILE, REPO, run_full_experiment, sim_backend, sim_engine
from bench_ros import node_process, ros_domain, rss_bytes
from common import SAMPLES, markdown_table, samples_skipped

from erobs_bt.backends.base import Solution
from erobs_bt.cache import DEFAULT_CAPACITY, make_key, solution_nbytes

#: How often the tasks of spincoat_to_hotplate.json are repeated for the node's entries. Once:
#: the 64 + 64 previews of the two nodes plan afresh every time (distinct keys), so the
#: section's run time is that of 130 plans; three repeats (27 steps) took it past the 600 s
#: section limit on a loaded machine, and the in-process engine row already measures
#: FULL_EXPERIMENT-sized entries.
REPEATS = 1
MIB = 1024 * 1024
CONTROL_LABEL = "node process, `cache_capacity` 1 (control: same 64 previews)"
#: Numbers per trajectory point in a serialised solution: time, then 6 positions, velocities, accelerations.
NUMBERS_PER_POINT = 19
TIMEOUT = 120.0


def _live_rss() -> int:
    """This process's RSS after ``gc.collect()`` and glibc ``malloc_trim(0)`` [bytes].

    The trim hands memory the allocator keeps free back to the system, so the reading
    follows live memory rather than the process's history (what earlier work freed).
    """
    gc.collect()
    # Not glibc (no libc.so.6 or no malloc_trim): the reading includes what the allocator keeps.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return rss_bytes()


def measure_engine() -> dict[str, Any]:
    """In this process: RSS with the engine's cache empty, full (64 FULL_EXPERIMENT-sized), cleared."""
    before_engine = _live_rss()
    engine = sim_engine()
    try:
        run = run_full_experiment(engine)
        first = run.solutions[0]
        combined = Solution(
            segments=tuple(segment for solution in run.solutions for segment in solution.segments),
            model_revision=first.model_revision,
            start_positions=first.start_positions,
        )
        script = engine.parse(FULL_EXPERIMENT.read_text())
        cache = engine.orchestrator.cache
        revision = sim_backend(engine).model_revision()
        assert first.start_positions is not None
        q0 = list(first.start_positions)
        entry_bytes = len(combined.to_bytes())
        empty = _live_rss()
        for k in range(DEFAULT_CAPACITY):
            start = (q0[0] + 0.01 * k, *q0[1:])
            key = make_key(script, model_revision=revision, start=start)
            variant = Solution.from_bytes(replace(combined, start_positions=start).to_bytes())
            cache.put(key, variant)
        entries = len(cache)
        nbytes = cache.nbytes()
        full = _live_rss()
        engine.orchestrator.clear_cache()
        cleared = _live_rss()
        tracemalloc.start()
        decoded = Solution.from_bytes(combined.to_bytes())
        decoded_size = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        points = sum(len(getattr(s, "points", ())) for s in decoded.segments)
    finally:
        engine.close()
    return {
        "before_engine": before_engine,
        "empty": empty,
        "full": full,
        "cleared": cleared,
        "entries": entries,
        "nbytes": nbytes,
        "entry_bytes": entry_bytes,
        "points": points,
        "units": len(run.solutions),
        "decoded_object": decoded_size,
    }


def engine_figures() -> dict[str, Any]:
    """:func:`measure_engine` in a fresh interpreter (``bench/bench_memory.py --engine``)."""
    completed = subprocess.run(
        [sys.executable, __file__, "--engine"],
        cwd=REPO,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"bench_memory --engine failed:\n{completed.stdout}\n{completed.stderr}")
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


def preview_script(variant: int) -> str:
    """spincoat_to_hotplate.json with its tasks repeated and the hotplate pose nudged by ``variant``."""
    document = json.loads((SAMPLES / "spincoat_to_hotplate.json").read_text())
    document["tasks"] = document["tasks"] * REPEATS
    hotplate = list(document["poses"]["hotplate"])
    hotplate[5] = round(hotplate[5] + 0.001 * variant, 6)
    document["poses"]["hotplate"] = hotplate
    return json.dumps(document)


def node_figures(capacity: int) -> dict[str, Any]:
    """RSS of a node with ``cache_capacity`` = ``capacity``.

    Read idle, after 64 eligible previews, and after ``~/clear_cache``.
    """
    from erobs_bt.ros.client.client import ErobsBtClient

    engine = sim_engine()
    try:
        entry = sim_backend(engine).plan(engine.parse(preview_script(0)).steps).result()
        entry_bytes = solution_nbytes(entry)
        steps = len(engine.parse(preview_script(0)).steps)
    finally:
        engine.close()
    parameters = {"speed": "20.0", "backend": "sim", "cache_capacity": str(capacity)}
    with ros_domain(), node_process(parameters) as node, ErobsBtClient() as client:
        if not client.wait_for_server(30.0):
            raise RuntimeError("the node's action server was not discovered:\n" + "\n".join(node.lines))

        def preview(variant: int) -> None:
            run = client.send(preview_script(variant), dry_run=True, timeout=30.0)
            result = run.wait(TIMEOUT)
            if not result.success:
                raise RuntimeError(f"preview {variant} failed: {result.error_message}")

        preview(DEFAULT_CAPACITY)  # warm-up (imports, first plan), then empty the cache again
        client.clear_cache()
        time.sleep(0.5)
        empty = rss_bytes(node.pid)
        began = time.perf_counter()
        half = empty
        for variant in range(DEFAULT_CAPACITY):
            preview(variant)
            if variant + 1 == DEFAULT_CAPACITY // 2:
                half = rss_bytes(node.pid)
        fill_seconds = time.perf_counter() - began
        time.sleep(0.5)
        full = rss_bytes(node.pid)
        ok, message = client.clear_cache()
        if not ok:
            raise RuntimeError(f"~/clear_cache refused: {message}")
        time.sleep(0.5)
        cleared = rss_bytes(node.pid)
    entries = min(capacity, DEFAULT_CAPACITY)
    return {
        "empty": empty,
        "half": half,
        "full": full,
        "cleared": cleared,
        "entries": entries,
        "nbytes": entry_bytes * entries,
        "entry_bytes": entry_bytes,
        "steps": steps,
        "fill_seconds": fill_seconds,
    }


def mib(n: float) -> str:
    return f"{n / MIB:,.1f} MiB"


def report() -> str:
    """The memory section of BENCHMARKS.md."""
    needed = [POSES_FILE.name, FULL_EXPERIMENT.name, "spincoat_to_hotplate.json"]
    skipped = samples_skipped("every memory figure", needed)
    if skipped:
        return f"## Memory: a full plan cache\n\n{skipped}\n"
    engine = engine_figures()
    node = node_figures(DEFAULT_CAPACITY)
    control = node_figures(1)
    engine_entry = (
        f"FULL_EXPERIMENT_RUN.json motion ({engine['units']} units combined, {engine['points']:,} "
        f"points), {engine['entry_bytes'] / 1024:,.0f} KiB"
    )
    node_entry = f"`spincoat_to_hotplate.json` ({node['steps']} steps), {node['entry_bytes'] / 1024:,.0f} KiB"
    rows = []
    for label, figures, entry in (
        ("in-process engine, live memory (after `malloc_trim`)", engine, engine_entry),
        ("node process, `cache_capacity` 64", node, node_entry),
        (CONTROL_LABEL, control, node_entry),
    ):
        growth = figures["full"] - figures["empty"]
        rows.append(
            [
                label,
                entry,
                str(figures["entries"]),
                mib(figures["nbytes"]),
                mib(figures["empty"]),
                mib(figures["full"]),
                f"{'+' if growth >= 0 else '−'}{mib(abs(growth))}",
                "— (control)" if label == CONTROL_LABEL else f"{growth / figures['nbytes']:.2f}",
                mib(figures["cleared"]),
            ]
        )
    table = markdown_table(
        [
            "process",
            "one cache entry",
            "entries",
            "`PlanCache.nbytes()`",
            "RSS, cache empty",
            "RSS, cache full",
            "growth",
            "growth / nbytes",
            "RSS after clear_cache",
        ],
        rows,
    )
    engine_ratio = (engine["full"] - engine["empty"]) / engine["nbytes"]
    per_number = engine["entry_bytes"] / (engine["points"] * NUMBERS_PER_POINT)
    node_growth = node["full"] - node["empty"]
    control_growth = control["full"] - control["empty"]
    attributable = node_growth - control_growth
    attributable_ratio = attributable / (node["nbytes"] - control["nbytes"])
    returned = (node["full"] - node["cleared"]) / node_growth if node_growth > 0 else math.nan
    engine_base = engine["empty"] - engine["before_engine"]
    if 0.8 <= engine_ratio <= 1.25:
        engine_reading = (
            f"In live memory a full cache costs what it says it holds (growth / nbytes "
            f"{engine_ratio:.2f}): entries are kept decoded (frozen trajectory objects, so a hit needs "
            "no decoding), and the cache's own estimate of their size, which its byte bound counts, "
            "matches what the process pays."
        )
    else:
        engine_reading = (
            f"In live memory the growth is {engine_ratio:.2f}× the cache's own estimate of its "
            "entries (`nbytes`), not the 1× the estimate is meant to give."
        )
    first_half = control["half"] - control["empty"]
    second_half = control["full"] - control["half"]
    halves = (
        f"the control node grew {mib(first_half)} over the first {DEFAULT_CAPACITY // 2} previews and "
        f"{mib(second_half)} over the next {DEFAULT_CAPACITY // 2}"
    )
    if second_half <= 0.25 * max(first_half, 1):
        control_reading = (
            f"That part levels off ({halves}): allocator and library warm-up, not a per-goal leak."
        )
    else:
        control_reading = (
            f"That part had not levelled off after 64 goals ({halves}, about "
            f"{mib(second_half / (DEFAULT_CAPACITY // 2))} per preview): a per-goal growth of the node "
            "worth investigating before it runs for days."
        )
    if attributable_ratio < 0.9:
        history = (
            "Raw RSS reflects the process's history: entries partly land in heap memory that planning "
            "had already grown and freed, so this difference is smaller than the bytes stored and "
            "varies from run to run; the in-process live figure is the one to size the cache with."
        )
    else:
        history = "Raw RSS of the node thus grows at least by what the cache stores."
    if returned < 0.2:
        release = (
            f"`~/clear_cache` gave back only {returned * 100:.0f} % of the growth: the node's RSS stays "
            "near its high-water mark, because CPython and glibc keep freed heap memory for reuse "
            "rather than returning it (the in-process reading trims explicitly; the node does not)."
        )
    else:
        release = f"`~/clear_cache` gave back {returned * 100:.0f} % of the growth."
    return (
        "## Memory: a full plan cache\n\n"
        "Resident memory (`VmRSS` from `/proc/<pid>/status`) of one process with its plan cache "
        "empty, then holding 64 entries (the specification's capacity), then after clearing it.\n\n"
        "- **In-process engine**, in a fresh interpreter: the engine runs FULL_EXPERIMENT_RUN.json on "
        "the sim once; the solutions of its motion units are combined into one solution of the "
        "whole script's motion and 64 variants of it (start joints shifted 0.01 rad each, distinct "
        "keys) go into the engine's own `PlanCache`. Readings after `gc.collect()` and glibc "
        "`malloc_trim(0)`, i.e. live memory, not what earlier work left free in the allocator.\n"
        "- **Node process**: no sample goal is both FULL_EXPERIMENT-sized and cache-eligible (the "
        "full script is 18 units), so the node's cache is filled the way a client can fill it: 64 "
        "eligible dry-run previews of the largest eligible sample script, each with the `hotplate` pose "
        f"nudged by 0.001° × its number (distinct keys); {node['fill_seconds']:.1f} s for the 64. "
        "Raw RSS, as the operating system sees it. The control node runs the same 64 previews "
        "with `cache_capacity:=1`, so its growth is everything except the cache. The node's "
        "`nbytes` is the estimated decoded size of the same plan made in-process × entries.\n\n"
        f"{table}\n\n"
        f"For scale: the in-process engine on the simulated cell (cell, collision model, planner, "
        f"after one run of the full script) adds {mib(engine_base)} of live memory to an "
        f"interpreter with the modules imported ({mib(engine['before_engine'])}); the node process "
        f"is {mib(node['empty'])} with an empty cache. A deserialised FULL_EXPERIMENT-sized "
        f"solution (what a replay holds while it runs) is {mib(engine['decoded_object'])} of Python "
        f"objects (`tracemalloc`), {engine['decoded_object'] / engine['entry_bytes']:.1f}× its "
        "serialised size.\n\n"
        "### Reading the figures\n\n"
        f"{engine_reading} 64 FULL_EXPERIMENT-sized entries are {mib(engine['nbytes'])} "
        f"(serialised they would be {mib(engine['entry_bytes'] * engine['entries'])}, "
        f"{per_number:.1f} bytes per number): the price of replays that need no decoding. The cache "
        "is bounded by bytes as well as by its 64 entries (`PlanCache(max_bytes=…)`, default "
        "512 MiB, room for 64 entries of this size), evicting the least recently used. In the node "
        f"the raw RSS grew {mib(node_growth)} with 64 entries and {mib(control_growth)} in the "
        f"control with one, so the cache added {mib(attributable)} over the control "
        f"({attributable_ratio:.2f}× its stored bytes). {history} The control's growth comes with "
        f"planning and previewing, whatever the cache holds. {control_reading} {release}\n"
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--engine"]:
        print(json.dumps(measure_engine()))
    else:
        print(report())

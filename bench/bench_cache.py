"""Plan-cache benchmarks: what replaying a stored solution costs against planning it afresh.

For the two cache-eligible sample scripts (one batch each), on the simulated cell:

* **fresh plan** — ``SimBackend.plan(script.steps).result()`` from the cell's live state,
  what ``PlanUnit`` does on a cache miss;
* **replay branch, end to end** — everything the replay branch of a ``ReplayOrPlan`` unit
  does before the stored solution runs, timed one branch at a time right after the previous
  replay finished: ``GoalContext.begin_unit`` (the unit's key from the live model revision
  and arm state, what the unit boundary does) and ``ReplayCached.start()`` (the lookup, the
  key digest and motion time kept with the entry, the cache and phase events, and the
  hand-over of the solution to ``SimBackend.execute``, which returns once the execution is
  queued on the backend's action worker). The execution itself is not timed;
* its parts, each in a tight loop: the key document (built once per goal when the context
  is made, before the tree is compiled; paid on both paths), the key at the unit's start,
  the digest, the lookup (hit and miss);
* **key + digest + lookup, before and now** — the figure this section reported before:
  now ``begin_unit`` + digest + ``PlanCache.get``; before, ``make_key`` (the whole document
  encoded again for every unit) + a digest hashing the whole key text + ``get``. Both run
  side by side in this process;
* **decoding the JSON** — ``Solution.from_bytes`` of the serialised solution, what a cache
  of bytes would add to every hit.

Key computation alone is also measured on every sample script that parses (with the
pose registry ``cms_poses.yaml``), eligible or not, to show how it scales with the
script.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace

from bench_planning import POSES_FILE, sim_backend, sim_engine
from common import SAMPLES, fmt_ms, fmt_us, markdown_table, measure, median, p90, samples_skipped

from erobs_bt.backends.base import Solution
from erobs_bt.backends.sim.controller import SimController
from erobs_bt.backends.stack import MotionStack
from erobs_bt.batching import Unit, group_into_batches
from erobs_bt.cache import CacheKey, KeyDocument, PlanCache, is_eligible, make_key, solution_nbytes
from erobs_bt.script.errors import ScriptError
from erobs_bt.script.model import Script, Step
from erobs_bt.tree.behaviours import ReplayCached
from erobs_bt.tree.context import Controls, GoalContext, Mode

ELIGIBLE = ("spincoat_to_hotplate.json", "perf_safe_transport_to_safe_exchange.json")
PLAN_RUNS = 9
#: Replay branches timed one by one per sample (each then executes at infinite speed).
BRANCH_INNER = 15


def _replay_branch(
    backend: MotionStack, context: GoalContext, unit: Unit, start: tuple[float, ...], samples: int
) -> list[float]:
    """Seconds of each of ``samples`` replay branches, from the unit's start to the dispatch.

    Timed: ``GoalContext.begin_unit`` (the key from the live model revision and arm state,
    what the unit boundary does) and ``ReplayCached.start()`` (lookup, digest, the cache
    and phase events, the hand-over of the stored solution to ``SimBackend.execute``, which
    returns once the execution is queued). Not timed: the execution itself, which is waited
    for, and putting the arm back at the start (``SimController.set_joint_positions``) so
    that the next branch hits again.
    """
    controller = backend.arm
    assert isinstance(controller, SimController), type(controller)
    times = []
    for _ in range(samples):
        controller.set_joint_positions(start)
        leaf = ReplayCached(context, unit)
        began = time.perf_counter()
        context.begin_unit(unit)
        future = leaf.start()
        times.append(time.perf_counter() - began)
        if not isinstance(future, Future):
            raise RuntimeError(f"the replay branch did not dispatch: {leaf.feedback_message}")
        future.result()
    return times


def replay_rows() -> tuple[list[list[str]], list[tuple[float, float, float]]]:
    rows: list[list[str]] = []
    figures: list[tuple[float, float, float]] = []
    engine = sim_engine()
    try:
        backend = sim_backend(engine)
        initial = backend.joint_positions()
        for name in ELIGIBLE:
            text = (SAMPLES / name).read_text()
            script = engine.parse(text)
            units = group_into_batches(script.steps, enabled=True)
            if not is_eligible(units):
                raise RuntimeError(f"{name}: expected one batch (cache eligible), got {len(units)} units")

            def fresh(steps: tuple[Step, ...] = script.steps) -> Solution:
                return backend.plan(steps, start=None).result()

            solution = fresh()
            fresh_s = measure(fresh, repeats=PLAN_RUNS)

            cache = PlanCache()
            context = GoalContext(script, units, Mode.EXECUTE, backend, cache, True, Controls())
            context.begin_unit(units[0])
            key = context.unit_key
            assert key is not None and key == make_key(
                script, model_revision=backend.model_revision(), start=initial
            )
            cache.put(key, solution)
            miss_key = replace(key, start=None)
            data = solution.to_bytes()

            def key_before(script: Script = script) -> CacheKey:
                revision, start = backend.model_revision(), backend.joint_positions()
                return make_key(script, model_revision=revision, start=start)

            def before(key_before: Callable[[], CacheKey] = key_before, cache: PlanCache = cache) -> None:
                # What a hit paid before this change: the whole document encoded and hashed.
                fresh_key = key_before()
                fresh_key.digest()
                cache.get(fresh_key)

            def now(context: GoalContext = context, unit: Unit = units[0], cache: PlanCache = cache) -> None:
                context.begin_unit(unit)
                assert context.unit_key is not None
                context.unit_key.digest()
                cache.get(context.unit_key)

            document_s = median(measure(lambda s=script: KeyDocument.of(s), repeats=7, inner=100))
            key_s = median(measure(lambda c=context, u=units[0]: c.begin_unit(u), repeats=7, inner=200))
            digest_s = median(measure(key.digest, repeats=7, inner=200))
            miss_s = median(measure(lambda c=cache, k=miss_key: c.get(k), repeats=7, inner=200))
            hit_s = median(measure(lambda c=cache, k=key: c.get(k), repeats=9, inner=200))
            decode_s = median(measure(lambda d=data: Solution.from_bytes(d), repeats=9, inner=10))
            before_samples = [median(measure(before, repeats=1, inner=100)) for _ in range(9)]
            now_samples = [median(measure(now, repeats=1, inner=100)) for _ in range(9)]
            branch_samples = [
                median(_replay_branch(backend, context, units[0], initial, BRANCH_INNER)) for _ in range(9)
            ]
            backend.arm.set_joint_positions(initial)
            branch_s = median(branch_samples)
            before_s = median(before_samples)
            fresh_m = median(fresh_s)
            points = sum(len(getattr(s, "points", ())) for s in solution.segments)
            rows.append(
                [
                    f"`{name}`",
                    str(len(script.steps)),
                    f"{len(data) / 1024:,.0f} KiB, {points} points, {solution.duration:.1f} s",
                    f"{fmt_ms(fresh_m)} (p90 {fmt_ms(p90(fresh_s))})",
                    fmt_us(document_s),
                    fmt_us(key_s),
                    fmt_us(digest_s),
                    fmt_us(miss_s),
                    fmt_us(hit_s),
                    f"{fmt_us(median(now_samples))} ({fmt_us(min(now_samples))}–{fmt_us(max(now_samples))})",
                    f"**{fmt_us(branch_s)}** ({fmt_us(min(branch_samples))}–{fmt_us(max(branch_samples))})",
                    f"{fmt_us(before_s)} ({fmt_us(min(before_samples))}–{fmt_us(max(before_samples))})",
                    fmt_ms(decode_s),
                    f"**{fresh_m / branch_s:,.0f}×**",
                    f"{solution_nbytes(solution) / 1024:,.0f} KiB",
                ]
            )
            figures.append((fresh_m, branch_s, decode_s))
    finally:
        engine.close()
    return rows, figures


def key_rows() -> list[list[str]]:
    engine = sim_engine()
    rows = []
    try:
        backend = sim_backend(engine)
        revision, start = backend.model_revision(), backend.joint_positions()
        for path in sorted(SAMPLES.glob("*.json")):
            text = path.read_text()
            try:
                script = engine.parse(text)
            except ScriptError:
                continue  # the negative sample (legacy_place_on_hotplate.json)
            parse_s = median(measure(lambda t=text: engine.parse(t), repeats=5, inner=20))
            key_s = median(
                measure(
                    lambda s=script: make_key(s, model_revision=revision, start=start),
                    repeats=7,
                    inner=200,
                )
            )
            units = group_into_batches(script.steps, enabled=True)
            rows.append(
                [
                    f"`{path.name}`",
                    str(len(script.steps)),
                    "yes" if is_eligible(units) else "no",
                    f"{len(script.key_document()):,} B",
                    fmt_us(key_s),
                    fmt_us(parse_s),
                ]
            )
    finally:
        engine.close()
    return rows


def report() -> str:
    """The plan-cache section of BENCHMARKS.md."""
    skipped = samples_skipped("every plan-cache figure", [POSES_FILE.name, *ELIGIBLE])
    if skipped:
        return f"## Plan cache: replay vs fresh plan\n\n{skipped}\n"
    rows, figures = replay_rows()
    replay = markdown_table(
        [
            "script (one batch)",
            "steps",
            "solution",
            "fresh plan",
            "key document (once per goal, at compile)",
            "key at the unit's start",
            "digest",
            "lookup (miss)",
            "lookup (hit)",
            "key + digest + lookup, median (min–max) of 9",
            "replay branch end to end, median (min–max) of 9",
            "key + digest + lookup before (`make_key` per unit), median (min–max) of 9",
            "decoding the JSON (a cache of bytes)",
            "fresh / replay branch",
            "entry in memory (decoded)",
        ],
        rows,
    )
    keys = markdown_table(
        ["sample script", "steps", "eligible", "key document", "make_key", "parse (for scale)"], key_rows()
    )
    (fresh_a, replay_a, decode_a), (fresh_b, replay_b, _) = figures
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    saved = min(fresh_a - replay_a, fresh_b - replay_b), max(fresh_a - replay_a, fresh_b - replay_b)
    return (
        "## Plan cache: replay vs fresh plan\n\n"
        f"On the simulated cell, from its live (initial) state; load average {load} (2 cores, shared). "
        f"`fresh plan`: `SimBackend.plan(steps).result()`, median of {PLAN_RUNS} (p90). `replay branch "
        "end to end`: what the replay branch of a `ReplayOrPlan` unit does before the stored "
        "solution runs — `GoalContext.begin_unit` (the unit's key from the live model revision and "
        "arm state) and `ReplayCached.start()` (lookup; the key digest and motion time, kept with the "
        "entry; the cache and phase events; the hand-over to `SimBackend.execute`, which returns once "
        f"the execution is queued) — each branch timed on its own right after the previous replay "
        f"finished, median of {BRANCH_INNER} per sample, median (min–max) over 9 samples. `key "
        "document`: the goal-content part of the key (`KeyDocument.of`), built once per eligible "
        "goal when its context is made, before the tree is compiled, on both paths. `key + digest + "
        "lookup` now and `before` (`make_key`, which encodes the whole document again for every "
        "unit, and a digest over the whole key text): the figure this section reported before, "
        "side by side, 100 per sample. `decoding the JSON`: `Solution.from_bytes`, what a cache of "
        "bytes would add to every hit. `entry in memory`: the decoded solution's size "
        "(`solution_nbytes`, what the byte bound counts); `solution`: serialised size, trajectory "
        "points, motion time.\n\n"
        f"{replay}\n\n"
        "Key computation on every sample script that parses (`cms_poses.yaml` as the registry; "
        "`make_key` builds the document each time, which a goal now does once; parse time for "
        "scale, it is paid on both paths):\n\n"
        f"{keys}\n\n"
        "### Reading the figures\n\n"
        f"The replay branch costs {fmt_us(replay_a)} end to end on the 9-step script (issue 13 asks "
        f"for ≤ 0.1 ms: {'met' if replay_a <= 1e-4 else 'not met'} at this load). What changed: the "
        "goal-content part of the key (the normalised JSON of the expanded steps and resolved "
        "poses) is fixed once the script is parsed, so it is built once per goal, with its SHA-256 "
        "state, and a unit's start only rounds the six live joints into it; the entry keeps the "
        "key's digest and the motion time, so a hit encodes and hashes nothing; the simulated "
        "backend reads a cached model revision, skips fault bookkeeping when no fault is "
        "configured and hands the solution to its action worker with one queue put. The key, "
        "its digest and the cache rules are unchanged (same fields, same text, same LRU bounds). "
        "The lookup itself is a dictionary access, because the entry is the decoded solution "
        "(frozen dataclasses of tuples, shared by every replay, which nobody can change); decoding "
        f"the stored JSON, which the cache did on every hit before it kept decoded entries, costs "
        f"{fmt_ms(decode_a)} alone. The price is memory: a decoded entry is about 2.3× its "
        "serialised size, which is why the cache is bounded by bytes as well as by its 64 entries "
        "(`PlanCache(max_bytes=…)`, default 512 MiB, still LRU). On this shared machine single "
        "branches vary with what the other processes do to the caches: the tight-loop parts add "
        "up to less than the end-to-end figure. Against planning afresh a hit saves "
        f"{fmt_ms(saved[0])}–{fmt_ms(saved[1])} per goal here, because the simulated cell plans these "
        "free joint moves fast; against seconds of motion that is small. Replay also skips the "
        "collision re-check that fresh planning includes (the specification's replay runs no fresh "
        "collision pass), so the ratio compares unequal guarantees.\n"
    )


if __name__ == "__main__":
    print(report())

"""Plan-cache benchmarks: what replaying a stored solution costs against planning it afresh.

For the two cache-eligible sample scripts (one batch each), on the simulated cell:

* **fresh plan** — ``SimBackend.plan(script.steps).result()`` from the cell's live state,
  what ``PlanUnit`` does on a cache miss;
* **replay overhead** — what the orchestrator and ``ReplayCached`` do before a stored
  solution can be dispatched: ``make_key`` (the live model revision and joint state
  read from the backend, as the orchestrator does), ``CacheKey.digest()`` (written to
  the run log for every eligible goal) and ``PlanCache.get`` of the hit (lock, LRU
  update; the entry is the decoded, immutable solution itself);
* **replay overhead with bytes stored (before)** — the same path plus
  ``Solution.from_bytes`` of the serialised solution, which is what a cache of JSON bytes
  paid on every hit (measured side by side on the same solution).

Both paths then execute the same trajectory, so execution is left out. The ratio
fresh plan / replay overhead is the work a hit saves; the absolute difference is the
time it saves.

Key computation alone is also measured on every sample script that parses (with the
pose registry ``cms_poses.yaml``), eligible or not, to show how it scales with the
script.
"""

from __future__ import annotations

from collections.abc import Callable

from bench_planning import SAMPLES, sim_backend, sim_engine
from common import fmt_ms, fmt_us, markdown_table, measure, median, p90

from erobs_bt.backends.base import Solution
from erobs_bt.batching import group_into_batches
from erobs_bt.cache import CacheKey, PlanCache, is_eligible, make_key, solution_nbytes
from erobs_bt.script.errors import ScriptError
from erobs_bt.script.model import Script, Step

ELIGIBLE = ("spincoat_to_hotplate.json", "perf_safe_transport_to_safe_exchange.json")
PLAN_RUNS = 9


def replay_rows() -> tuple[list[list[str]], list[tuple[float, float, float]]]:
    rows: list[list[str]] = []
    figures: list[tuple[float, float, float]] = []
    engine = sim_engine()
    try:
        backend = sim_backend(engine)
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

            def key_now(script: Script = script) -> CacheKey:
                return make_key(
                    script, model_revision=backend.model_revision(), start=backend.joint_positions()
                )

            cache = PlanCache()
            key = key_now()
            cache.put(key, solution)
            miss_key = make_key(script, model_revision=backend.model_revision(), start=None)
            data = solution.to_bytes()

            def replay(
                cache: PlanCache = cache, key_now: Callable[[], CacheKey] = key_now
            ) -> Solution | None:
                fresh_key = key_now()
                fresh_key.digest()
                return cache.get(fresh_key)

            if replay() is None:
                raise RuntimeError(f"{name}: the stored solution was not found again")
            key_s = median(measure(key_now, repeats=7, inner=200))
            digest_s = median(measure(key.digest, repeats=7, inner=200))
            miss_s = median(measure(lambda c=cache, k=miss_key: c.get(k), repeats=7, inner=200))
            hit_samples = measure(lambda c=cache, k=key: c.get(k), repeats=9, inner=200)
            decode_s = median(measure(lambda d=data: Solution.from_bytes(d), repeats=9, inner=10))
            replay_samples = measure(replay, repeats=9, inner=100)
            replay_s = median(replay_samples)

            def replay_bytes(data: bytes = data) -> Solution:
                replay()
                return Solution.from_bytes(data)

            before_samples = measure(replay_bytes, repeats=9, inner=10)
            before_s = median(before_samples)
            fresh_m = median(fresh_s)
            points = sum(len(getattr(s, "points", ())) for s in solution.segments)
            rows.append(
                [
                    f"`{name}`",
                    str(len(script.steps)),
                    f"{len(data) / 1024:,.0f} KiB, {points} points, {solution.duration:.1f} s",
                    f"{fmt_ms(fresh_m)} (p90 {fmt_ms(p90(fresh_s))})",
                    fmt_us(key_s),
                    fmt_us(digest_s),
                    fmt_us(miss_s),
                    f"{fmt_us(median(hit_samples))} ({fmt_us(min(hit_samples))}–{fmt_us(max(hit_samples))})",
                    f"**{fmt_us(replay_s)}** ({fmt_us(min(replay_samples))}–{fmt_us(max(replay_samples))})",
                    f"{fmt_ms(before_s)} ({fmt_ms(min(before_samples))}–{fmt_ms(max(before_samples))})",
                    f"{before_s / replay_s:,.0f}×",
                    f"**{fresh_m / replay_s:,.0f}×**",
                    f"{solution_nbytes(solution) / 1024:,.0f} KiB",
                ]
            )
            figures.append((fresh_m, replay_s, decode_s))
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
    rows, figures = replay_rows()
    replay = markdown_table(
        [
            "script (one batch)",
            "steps",
            "solution",
            "fresh plan",
            "make_key",
            "digest",
            "lookup (miss)",
            "lookup (hit), median (min–max) of 9",
            "replay overhead (decoded entries), median (min–max) of 9",
            "replay overhead with bytes stored (before)",
            "before / now",
            "fresh / replay",
            "entry in memory (decoded)",
        ],
        rows,
    )
    keys = markdown_table(
        ["sample script", "steps", "eligible", "key document", "make_key", "parse (for scale)"], key_rows()
    )
    (fresh_a, replay_a, decode_a), (fresh_b, replay_b, _) = figures
    saved = min(fresh_a - replay_a, fresh_b - replay_b), max(fresh_a - replay_a, fresh_b - replay_b)
    return (
        "## Plan cache: replay vs fresh plan\n\n"
        f"On the simulated cell, from its live (initial) state. `fresh plan`: "
        f"`SimBackend.plan(steps).result()`, median of {PLAN_RUNS} (p90). `replay overhead`: "
        "`make_key` + `digest()` + `PlanCache.get` of the hit, measured end to end with a new key "
        "object each time; the cache keeps the decoded, immutable solution, so a hit is a lookup. "
        "`with bytes stored (before)`: the same path plus `Solution.from_bytes`, what the cache paid "
        "per hit when it kept JSON bytes. `entry in memory`: the decoded solution's size "
        "(`solution_nbytes`, what the byte bound counts); `solution`: serialised size, trajectory "
        "points, motion time.\n\n"
        f"{replay}\n\n"
        "Key computation on every sample script that parses (`cms_poses.yaml` as the registry; "
        "parse time for scale, it is paid on both paths):\n\n"
        f"{keys}\n\n"
        "### Reading the figures\n\n"
        f"A hit now costs {fmt_us(replay_a)} end to end on the 9-step script (issue 13 asks for "
        f"≤ 0.1 ms: {'met' if replay_a <= 1e-4 else 'not met end to end'}): the key (`make_key` and "
        "its digest, computed for every eligible goal, hit or miss, and written to the run log) is "
        "most of it; the lookup of the hit itself is a dictionary access, because the entry is the "
        "decoded solution (frozen dataclasses of tuples, shared by every replay, which nobody can "
        f"change). Decoding the stored JSON, which the cache did on every hit before, costs "
        f"{fmt_ms(decode_a)} alone. The price is memory: a decoded entry is about 2.3× its "
        "serialised size, which is why the cache is bounded by bytes as well as by its 64 entries "
        "(`PlanCache(max_bytes=…)`, default 512 MiB, still LRU). Against planning afresh a hit saves "
        f"{fmt_ms(saved[0])}–{fmt_ms(saved[1])} per goal here, because the simulated cell plans these "
        "free joint moves fast; against seconds of motion that is small. Replay also skips the "
        "collision re-check that fresh planning includes (the specification's replay runs no fresh "
        "collision pass), so the ratio compares unequal guarantees.\n"
    )


if __name__ == "__main__":
    print(report())

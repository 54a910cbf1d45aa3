"""PlanCache: an in-memory LRU of serialised solutions, capacity 64 by default."""

from __future__ import annotations

import pytest

from erobs_bt.backends.base import ArmSegment, Solution, ToolSegment, TrajectoryPoint
from erobs_bt.cache import DEFAULT_CAPACITY, CacheKey, PlanCache


def key(n: int) -> CacheKey:
    return CacheKey(f'{{"steps":[{n}]}}', "robot_models__epick", (0.0,) * 6)


def solution(n: int) -> Solution:
    point = TrajectoryPoint((float(n),) * 6, (0.0,) * 6, (0.0,) * 6, 0.0)
    return Solution((ArmSegment(0, (point,)), ToolSegment(1, "epick", "vacuum_on")), "robot_models__epick")


def test_default_capacity_is_64_and_the_least_recently_used_entry_is_evicted() -> None:
    cache = PlanCache()
    assert cache.capacity == DEFAULT_CAPACITY == 64
    for n in range(64):
        cache.put(key(n), solution(n))
    assert cache.get(key(0)) == solution(0)  # 0 becomes the most recently used
    cache.put(key(64), solution(64))
    assert len(cache) == 64
    assert key(1) not in cache, "1 was the least recently used"
    assert key(0) in cache and key(64) in cache


def test_solutions_round_trip_through_their_serialised_form() -> None:
    cache = PlanCache(capacity=2)
    cache.put(key(1), solution(1))
    restored = cache.get(key(1))
    assert restored == solution(1)
    assert cache.nbytes() == len(solution(1).to_bytes())


def test_put_replaces_an_existing_entry() -> None:
    cache = PlanCache(capacity=2)
    cache.put(key(1), solution(1))
    cache.put(key(1), solution(7))
    assert len(cache) == 1 and cache.get(key(1)) == solution(7)


def test_a_new_cache_is_empty_restarting_discards_everything() -> None:
    cache = PlanCache()
    cache.put(key(1), solution(1))
    assert cache.clear() == 1
    assert PlanCache().get(key(1)) is None


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity"):
        PlanCache(capacity=0)

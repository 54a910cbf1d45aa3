"""PlanCache: an in-memory LRU of decoded, immutable solutions, capacity 64 by default,
bounded by bytes as well."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from erobs_bt.backends.base import ArmSegment, Solution, ToolSegment, TrajectoryPoint
from erobs_bt.cache import DEFAULT_CAPACITY, DEFAULT_MAX_BYTES, CacheKey, PlanCache, solution_nbytes


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


def long_solution(points: int, offset: float = 0.0) -> Solution:
    trajectory = tuple(
        TrajectoryPoint(
            tuple(offset + i * 1e-3 + j for j in range(6)),
            tuple(0.5 + i * 1e-4 + j for j in range(6)),
            tuple(-0.25 + i * 1e-5 + j for j in range(6)),
            i * 0.01,
        )
        for i in range(points)
    )
    return Solution((ArmSegment(0, trajectory),), "robot_models__epick", trajectory[0].positions)


def test_a_hit_returns_the_stored_immutable_solution_without_decoding() -> None:
    cache = PlanCache(capacity=2)
    stored = long_solution(50)
    cache.put(key(1), stored)
    first, second = cache.get(key(1)), cache.get(key(1))
    assert first == stored and first is second  # one decoded object, shared by every replay
    assert first is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.segments[0].points[0].positions = (0.0,) * 6  # type: ignore[misc]
    assert isinstance(first.segments[0].points[0].positions, tuple)


def test_a_solution_built_from_lists_is_normalised_so_its_creator_cannot_change_the_entry() -> None:
    positions = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    point = TrajectoryPoint(positions, (0.0,) * 6, (0.0,) * 6, 0.0)  # type: ignore[arg-type]
    cache = PlanCache()
    cache.put(key(1), Solution((ArmSegment(0, (point,)),), "robot_models__epick"))
    positions[0] = 99.0
    restored = cache.get(key(1))
    assert restored is not None and restored.segments[0].points[0].positions == (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)


def test_the_stored_solution_reports_no_planning_time() -> None:
    cache = PlanCache()
    cache.put(key(1), dataclasses.replace(solution(1), planning_time=0.25))
    restored = cache.get(key(1))
    assert restored is not None and restored.planning_time == 0.0 and restored == solution(1)


def _deep_size(root: object) -> int:
    """Sum of ``sys.getsizeof`` over every distinct object reachable from ``root``."""
    seen: set[int] = set()
    total = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, tuple):
            stack.extend(obj)
        elif dataclasses.is_dataclass(obj):
            stack.extend(getattr(obj, f.name) for f in dataclasses.fields(obj))
    return total


def test_nbytes_estimates_the_memory_the_decoded_entries_hold() -> None:
    decoded = Solution.from_bytes(long_solution(400, offset=0.123).to_bytes())
    estimate = solution_nbytes(decoded)
    assert 0.9 * _deep_size(decoded) <= estimate <= 1.1 * _deep_size(decoded)
    cache = PlanCache()
    cache.put(key(1), decoded)
    cache.put(key(2), long_solution(10))
    assert cache.nbytes() == estimate + solution_nbytes(long_solution(10))
    cache.put(key(1), long_solution(10))  # a replaced entry no longer counts
    assert cache.nbytes() == 2 * solution_nbytes(long_solution(10))
    cache.clear()
    assert cache.nbytes() == 0


def test_the_byte_bound_evicts_least_recently_used_entries() -> None:
    entry = solution_nbytes(long_solution(100))
    cache = PlanCache(capacity=64, max_bytes=3 * entry)
    assert PlanCache().max_bytes == DEFAULT_MAX_BYTES
    for n in range(3):
        cache.put(key(n), long_solution(100, offset=n))
    assert cache.get(key(0)) is not None  # 0 becomes the most recently used
    cache.put(key(3), long_solution(100, offset=3))
    assert len(cache) == 3 and cache.nbytes() <= 3 * entry
    assert key(1) not in cache, "1 was the least recently used"
    assert key(0) in cache and key(2) in cache and key(3) in cache


def test_a_solution_larger_than_the_byte_bound_is_not_stored() -> None:
    small = solution_nbytes(long_solution(5))
    cache = PlanCache(max_bytes=small * 2)
    cache.put(key(1), long_solution(5))
    cache.put(key(2), long_solution(500))
    assert key(2) not in cache and key(1) in cache and cache.nbytes() == small
    cache.put(key(1), long_solution(500))  # replacing with an oversized one drops the old entry
    assert len(cache) == 0 and cache.nbytes() == 0


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


def test_capacity_and_byte_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity"):
        PlanCache(capacity=0)
    with pytest.raises(ValueError, match="max_bytes"):
        PlanCache(max_bytes=0)

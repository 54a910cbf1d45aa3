"""The plan cache: replay a stored solution when a goal repeats exactly.

What is in the key (docs/script-format.md, "Cache eligibility"):

* the normalised JSON of the expanded steps and the resolved poses they use
  (:meth:`erobs_bt.script.model.Script.key_document`): whitespace and object-key
  order do not matter, step order and pose values do;
* the robot-model revision (tool and cup profile);
* the six starting arm joints in radians rounded to two decimals (0.01 rad), or
  ``None`` when no complete joint state is known. Angles are not wrapped: a
  whole-turn difference is a different key. ``-0.0`` and ``0.0`` are the same.

What is deliberately *not* in the key: the planning scene, the contents of model or
calibration files, the ``run_name`` and other ignored envelope fields, registry poses
the script does not use, and registry entries overridden by inline poses. Moving an
obstacle therefore leaves a stored plan replayable; a fresh preview refreshes it.

Only goals whose whole task list forms one batched unit are eligible
(:func:`is_eligible`). The cache is an LRU of serialised solutions (capacity 64 by
default), in memory, lost on restart.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from erobs_bt.backends.base import Solution
from erobs_bt.plan import is_eligible
from erobs_bt.script.model import Script

__all__ = ["DEFAULT_CAPACITY", "CacheKey", "PlanCache", "is_eligible", "make_key", "round_start"]

#: Default capacity, from the specification ("holds up to 64 serialized solutions").
DEFAULT_CAPACITY = 64


@dataclass(frozen=True)
class CacheKey:
    """The identity of a replayable goal.

    Attributes:
        document: normalised JSON of expanded steps and resolved poses.
        model_revision: ``<prefix>__<gripper>[__<cup_profile>]``.
        start: six joint angles [rad] rounded to 0.01, or ``None`` when unknown.
    """

    document: str
    model_revision: str
    start: tuple[float, ...] | None

    def digest(self) -> str:
        """SHA-256 hex digest of the whole key (for logs and the CLI)."""
        start = "none" if self.start is None else ",".join(f"{a:.2f}" for a in self.start)
        text = f"{self.document}\n{self.model_revision}\n{start}"
        return hashlib.sha256(text.encode()).hexdigest()


def round_start(positions: Sequence[float] | None) -> tuple[float, ...] | None:
    """Round a live arm state for the key.

    Args:
        positions: joint angles [rad], or ``None``.

    Returns:
        Six angles rounded to two decimals with ``-0.0`` folded into ``0.0`` and no
        angle wrapping, or ``None`` when ``positions`` is ``None`` or not a complete
        six-joint state.
    """
    if positions is None or len(positions) != 6:
        return None
    return tuple(round(float(a), 2) + 0.0 for a in positions)


def make_key(script: Script, *, model_revision: str, start: Sequence[float] | None) -> CacheKey:
    """Build the cache key of ``script`` for a given model revision and live arm state [rad]."""
    return CacheKey(script.key_document(), model_revision, round_start(start))


class PlanCache:
    """A thread-safe LRU of serialised :class:`Solution` objects.

    Args:
        capacity: the most entries kept; the least recently used is evicted first.

    Raises:
        ValueError: ``capacity`` < 1.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"cache capacity must be >= 1 (got {capacity})")
        self.capacity = capacity
        self._entries: OrderedDict[CacheKey, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey) -> Solution | None:
        """Return the stored solution for ``key`` (marking it most recently used), or ``None``."""
        with self._lock:
            data = self._entries.get(key)
            if data is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
        return Solution.from_bytes(data)

    def put(self, key: CacheKey, solution: Solution) -> None:
        """Store (or replace) the solution for ``key``, evicting the LRU entry when full."""
        data = solution.to_bytes()
        with self._lock:
            self._entries[key] = data
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def clear(self) -> int:
        """Drop every entry; returns how many were dropped."""
        with self._lock:
            count = len(self._entries)
            self._entries.clear()
            return count

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def nbytes(self) -> int:
        """Total size of the stored serialised solutions [bytes]."""
        with self._lock:
            return sum(len(v) for v in self._entries.values())

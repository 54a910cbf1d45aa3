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
calibration files, the ``run_name`` and other ignored fields of the script and of its tasks
(the parser drops a task's unknown fields from the step), registry poses
the script does not use, and registry entries overridden by inline poses. Moving an
obstacle therefore leaves a stored plan replayable; a fresh preview refreshes it.

Only goals whose whole task list forms one batched unit are eligible
(:func:`is_eligible`). The cache is an in-memory LRU, lost on restart, bounded by its
entry count (64 by default, the specification's "up to 64 serialized solutions") and by
the memory its entries hold (:data:`DEFAULT_MAX_BYTES`).

Entries are kept **decoded**: a :class:`~erobs_bt.backends.base.Solution` is a frozen
dataclass of tuples, immutable all the way down, so the stored object itself is handed to
every replay and nobody can change it. A hit then costs a dictionary lookup instead of
decoding JSON (which was 80–87 % of the replay overhead); the price is memory, about 2.4×
the serialised size, which :func:`solution_nbytes` estimates and the byte bound caps.
Bytes (:meth:`Solution.to_bytes`) are for transport only.

The goal-content part of the key is fixed once a script is parsed, so it is built once per
goal, when its tree is compiled (:class:`KeyDocument`, kept in the goal context): at a unit's
start only the live arm state is rounded and combined with it (:meth:`KeyDocument.key`), and
the key's digest hashes only that short tail on top of the document's SHA-256 state. The
key and its digest are exactly those of :func:`make_key` (the same fields, the same text).
"""

from __future__ import annotations

import hashlib
import logging
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from erobs_bt.backends.base import ArmSegment, Solution, TrajectoryPoint
from erobs_bt.plan import is_eligible
from erobs_bt.script.model import Script

__all__ = [
    "DEFAULT_CAPACITY",
    "CacheEntry",
    "CacheKey",
    "KeyDocument",
    "PlanCache",
    "is_eligible",
    "make_key",
    "round_start",
    "solution_nbytes",
]

_LOG = logging.getLogger(__name__)

#: Default capacity, from the specification ("holds up to 64 serialized solutions").
DEFAULT_CAPACITY = 64
#: Default bound on the memory held by the entries [bytes]: 512 MiB, room for the 64
#: entries of the specification even when each is as large as the whole
#: FULL_EXPERIMENT_RUN.json motion (about 2.5 MiB decoded, see BENCHMARKS.md).
DEFAULT_MAX_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class CacheKey:
    """The identity of a replayable goal.

    Attributes:
        document: normalised JSON of expanded steps and resolved poses.
        model_revision: ``<prefix>__<gripper>[__<cup_profile>]``.
        start: six joint angles [rad] rounded to 0.01, or ``None`` when unknown.

    Only these three fields make the key's identity (equality, hash). ``hashed_document``
    is an optional speed-up of :meth:`digest`: the SHA-256 state after ``document`` and a
    newline (:class:`KeyDocument` supplies it); it never changes the digest.
    """

    document: str
    model_revision: str
    start: tuple[float, ...] | None
    hashed_document: Any = field(default=None, compare=False, repr=False)

    def digest(self) -> str:
        """SHA-256 hex digest of the whole key (for logs and the CLI): of the text
        ``<document>\n<model_revision>\n<start>``, ``start`` as comma-separated ``%.2f``
        angles or ``none``."""
        start = "none" if self.start is None else ",".join(f"{a:.2f}" for a in self.start)
        tail = f"{self.model_revision}\n{start}".encode()
        if self.hashed_document is not None:
            hasher = self.hashed_document.copy()
        else:
            hasher = hashlib.sha256(f"{self.document}\n".encode())
        hasher.update(tail)
        return hasher.hexdigest()


def round_start(positions: Sequence[float] | None) -> tuple[float, ...] | None:
    """Round a live arm state for the key.

    Args:
        positions: joint angles [rad], or ``None``.

    Returns:
        Six angles rounded to two decimals (exactly as ``round(angle, 2)``, see
        :func:`_round2`) with ``-0.0`` folded into ``0.0`` and no angle wrapping, or
        ``None`` when ``positions`` is ``None`` or not a complete six-joint state.
    """
    if positions is None or len(positions) != 6:
        return None
    a, b, c, d, e, f = positions
    return (_round2(a), _round2(b), _round2(c), _round2(d), _round2(e), _round2(f))


def _round2(angle: float) -> float:
    """``round(angle, 2) + 0.0``, without the decimal conversion ``round`` makes.

    ``round(x, 2)`` is the double nearest to ``n / 100``, ``n`` the integer nearest to the
    exact ``100 x`` (ties to even). The product ``100.0 * x`` is within half an ulp of the
    exact one, so unless it lies within ``1e-6`` of a tie (or ``x`` is huge or not finite,
    where ``round`` is used) its nearest integer is that ``n``; and ``n / 100.0`` is the
    double nearest to ``n / 100`` (IEEE division is correctly rounded, ``n`` and 100 are
    exact). ``+ 0.0`` turns ``-0.0`` into ``0.0``.
    """
    x = float(angle)
    scaled = 100.0 * x
    if -1e12 < scaled < 1e12:
        n = round(scaled)
        if abs(abs(scaled - n) - 0.5) > 1e-6:
            return n / 100.0 + 0.0
    return round(x, 2) + 0.0


@dataclass(frozen=True)
class KeyDocument:
    """The goal-content part of a script's cache keys, built once per goal.

    Attributes:
        text: :meth:`Script.key_document` of the script (the expanded steps and the
            resolved poses, normalised).
        hashed: the SHA-256 state after ``text`` and a newline, which
            :meth:`CacheKey.digest` continues with the rest of the key (never updated in
            place: the digest works on a copy).

    A script is immutable once parsed, so its document cannot go stale; a changed script
    or pose file is parsed into a new script with its own document.
    """

    text: str
    hashed: Any = field(compare=False, repr=False)

    @classmethod
    def of(cls, script: Script) -> KeyDocument:
        """Build the document of ``script`` (the JSON encoding of its steps and poses)."""
        text = script.key_document()
        return cls(text, hashlib.sha256(f"{text}\n".encode()))

    def key(self, *, model_revision: str, start: Sequence[float] | None) -> CacheKey:
        """The cache key for a model revision and a live arm state [rad] (rounded by
        :func:`round_start`); equal to :func:`make_key` of the script with the same inputs."""
        return CacheKey(self.text, model_revision, round_start(start), self.hashed)


def make_key(script: Script, *, model_revision: str, start: Sequence[float] | None) -> CacheKey:
    """Build the cache key of ``script`` for a given model revision and live arm state [rad].

    This encodes the script's document every time; a goal builds it once instead
    (:class:`KeyDocument`, :attr:`erobs_bt.tree.context.GoalContext.key_document`), and
    both build the key the same way, through :meth:`KeyDocument.key`.
    """
    return KeyDocument.of(script).key(model_revision=model_revision, start=start)


def solution_nbytes(solution: Solution) -> int:
    """Estimated memory [bytes] that a decoded solution holds (CPython object sizes).

    Per trajectory point: the point object, its three tuples and a float object per value
    and for the time (each counted, although zeros are often shared: an upper estimate);
    per segment the segment object and its tuples. Computed from counts, not by walking
    the objects, so it is cheap on every :meth:`PlanCache.put`.
    """
    float_size = sys.getsizeof(0.0)
    total = sys.getsizeof(solution) + sys.getsizeof(solution.segments)
    for segment in solution.segments:
        total += sys.getsizeof(segment)
        if isinstance(segment, ArmSegment):
            joints = len(segment.joint_names)
            tuple_size = sys.getsizeof((0.0,) * joints)
            point_size = _POINT_SIZE + 3 * tuple_size + (3 * joints + 1) * float_size
            total += sys.getsizeof(segment.points) + len(segment.points) * point_size
    return total


_POINT_SIZE = sys.getsizeof(TrajectoryPoint((), (), (), 0.0))


def _is_frozen(solution: Solution) -> bool:
    """True when every container of ``solution`` is a tuple (so the whole object is immutable)."""
    if not isinstance(solution.segments, tuple):
        return False
    if solution.start_positions is not None and not isinstance(solution.start_positions, tuple):
        return False
    for segment in solution.segments:
        if isinstance(segment, ArmSegment):
            if not isinstance(segment.points, tuple) or not isinstance(segment.joint_names, tuple):
                return False
            for point in segment.points:
                if not (
                    type(point.positions) is tuple
                    and type(point.velocities) is tuple
                    and type(point.accelerations) is tuple
                ):
                    return False
    return True


@dataclass(frozen=True)
class CacheEntry:
    """One stored solution and what a replay reports about it, computed when it is stored.

    Attributes:
        solution: the decoded, immutable solution (``planning_time`` 0).
        digest: :meth:`CacheKey.digest` of the key it is stored under (equal keys have
            equal digests, so it is the digest of any key that finds it).
        duration: the solution's motion time [s] (:attr:`Solution.duration`).
        nbytes: its estimated memory [bytes] (:func:`solution_nbytes`).
    """

    solution: Solution
    digest: str
    duration: float
    nbytes: int


class PlanCache:
    """A thread-safe LRU of decoded, immutable :class:`Solution` objects.

    Args:
        capacity: the most entries kept; the least recently used is evicted first.
        max_bytes: the most memory the entries may hold [bytes] (estimated with
            :func:`solution_nbytes`); least recently used entries are evicted until the
            total fits. A single solution larger than this is not stored.

    Raises:
        ValueError: ``capacity`` < 1 or ``max_bytes`` < 1.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if capacity < 1:
            raise ValueError(f"cache capacity must be >= 1 (got {capacity})")
        if max_bytes < 1:
            raise ValueError(f"cache max_bytes must be >= 1 (got {max_bytes})")
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._entries: OrderedDict[CacheKey, CacheEntry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey) -> Solution | None:
        """Return the stored solution for ``key`` (marking it most recently used), or ``None``.

        The object returned is the stored one (immutable); ``planning_time`` is 0, since
        replaying it costs no planning.
        """
        entry = self.lookup(key)
        return entry.solution if entry is not None else None

    def lookup(self, key: CacheKey) -> CacheEntry | None:
        """As :meth:`get` (a hit or a miss is counted, a hit becomes the most recently used),
        but the whole entry: the solution with its key digest and motion time, so that a
        replay computes neither."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry

    def peek(self, key: CacheKey) -> Solution | None:
        """The stored solution for ``key``, or ``None``, without marking it used or counting a
        hit or miss (for viewers: the live view shows the trajectory a replay executes)."""
        with self._lock:
            entry = self._entries.get(key)
            return entry.solution if entry is not None else None

    def put(self, key: CacheKey, solution: Solution) -> None:
        """Store (or replace) the solution for ``key``; evict LRU entries past either bound.

        A solution that is not made of tuples throughout is normalised through its
        serialised form first, so the stored object can never be changed by its creator.
        The key's digest and the motion time are computed here, once per entry.
        """
        if not _is_frozen(solution):
            solution = Solution.from_bytes(solution.to_bytes())
        elif solution.planning_time != 0.0:
            solution = replace(solution, planning_time=0.0)
        size = solution_nbytes(solution)
        entry = CacheEntry(solution, key.digest(), solution.duration, size)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            if size > self.max_bytes:
                _LOG.info(
                    "plan cache: solution of %d bytes exceeds max_bytes %d; not stored", size, self.max_bytes
                )
                return
            self._entries[key] = entry
            self._bytes += size
            while len(self._entries) > self.capacity or self._bytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.nbytes

    def clear(self) -> int:
        """Drop every entry; returns how many were dropped."""
        with self._lock:
            count = len(self._entries)
            self._entries.clear()
            self._bytes = 0
            return count

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def nbytes(self) -> int:
        """Estimated memory held by the stored solutions [bytes] (:func:`solution_nbytes`)."""
        with self._lock:
            return self._bytes

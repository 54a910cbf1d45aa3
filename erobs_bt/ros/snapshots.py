"""Tree snapshots for viewers: the structure once per goal, then only what changed.

A snapshot is a plain copy of the compiled tree's statuses (one :class:`BehaviourState`
per behaviour, parents before children), so it can be compared, summarised and
converted to messages without holding on to live behaviours.

Cost (docs/design.md §2: "viewers get the structure once per goal and then only what
changed"). Copying the whole tree is linear in its size (a 1,000-unit script has about
6,500 behaviours), so doing it ten times a second made a long goal several times slower
through the node than in-process. Instead:

* :class:`TreeTracker` walks the tree **once per goal** (ids, names, types, parents,
  children, subtree extents: a :class:`TreeStructure`, shared by every tracker of the
  same tree) and afterwards re-reads only the part that can have changed. The compiled
  root is a :class:`~erobs_bt.tree.compile.UnitSequence`, a memory sequence that runs
  its children in order, so between two refreshes only the children
  from the one running at the previous refresh up to the one running now (and the root)
  can have changed: a refresh costs O(behaviours of those units), not O(tree). The
  units a refresh covers add up to each unit about once per goal. Any other root is
  re-read whole (correct for any tree, linear).
* Per behaviour, as little Python as possible runs: the walk reads each behaviour once;
  a refresh reads statuses and messages with C-level getters mapped over the re-read range
  and compares them list against list; every state change is logged
  (:attr:`TreeTracker.changes`) so that an encoder re-encodes only the changed behaviours
  (:class:`~erobs_bt.ros.convert.TreeSnapshotEncoder`).
* :class:`SnapshotThrottle` sends the goal's **full** snapshot first, then **deltas**
  (only the behaviours whose status, message or activity changed, with a per-goal
  ``sequence``), at most ``rate`` per second, a full one again on request (a new viewer
  connected) and always the **final** full snapshot (exact: it re-reads the whole tree
  after the goal thread stopped ticking).
* :class:`SnapshotAssembler` rebuilds the current full snapshot on the receiving side
  from a full snapshot and the deltas that follow it (a gap in ``sequence`` makes it wait
  for the next full one).

Reading statuses from the timer thread while the goal thread ticks is safe in CPython
(the structure is fixed once compiled; attribute reads are atomic); a snapshot taken in
the middle of a tick can mix two ticks, and the next one corrects it.

This module does not import rclpy: it is unit-testable without a ROS context.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
import threading
import time
import uuid
import weakref
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np
import py_trees

from erobs_bt.tree.compile import UnitSequence, collector_paused


class BehaviourState(NamedTuple):
    """One behaviour in a snapshot (immutable; a tuple, so thousands are cheap to make).

    Attributes:
        id: the behaviour's UUID as text.
        parent_id: the parent's UUID as text, ``""`` for the root.
        name: the behaviour's name (``unit 2: batch[3]: moveto, moveto, end_effector``).
        type_name: its class name (``UnitBoundary``, ``PlanUnit``, ``Sequence``, …).
        status: ``INVALID``, ``RUNNING``, ``SUCCESS`` or ``FAILURE``.
        message: its ``feedback_message``.
        child_ids: the children's UUIDs, in order.
        is_active: on the path from the root to the tip (the deepest active behaviour).
    """

    id: str
    parent_id: str
    name: str
    type_name: str
    status: str
    message: str
    child_ids: tuple[str, ...]
    is_active: bool = False


@dataclass(frozen=True)
class TreeState:
    """A snapshot of a goal's tree, full or a delta.

    Attributes:
        goal_id: the orchestrator's goal id (``goal-<n>``).
        behaviours: full: every behaviour, pre-order (a parent before its children),
            empty when the goal never got a tree (its script was rejected); delta: only
            the behaviours that changed since the previous snapshot of the goal, pre-order.
        tip_id: UUID of the deepest active behaviour, ``""`` when none.
        final: the goal has ended; this is its last snapshot (always full).
        stamp: wall time the snapshot was taken [s since the epoch].
        unit_index: 1-based index of the running (or last started) unit, 0 when none.
        full: ``behaviours`` is the whole tree.
        sequence: counts the goal's snapshots from 0.
        status: the root's status when the snapshot was taken, in a delta too (whose
            ``behaviours`` list the root only when it changed); ``""``: not recorded (then
            :attr:`root_status` reads it from a full snapshot's first behaviour).
    """

    goal_id: str
    behaviours: tuple[BehaviourState, ...]
    tip_id: str
    final: bool
    stamp: float
    unit_index: int = 0
    full: bool = True
    sequence: int = 0
    status: str = ""

    @property
    def root_status(self) -> str:
        """The root's status (``TreeSnapshot.state``): :attr:`status` when recorded, else
        the first behaviour's of a full snapshot; ``INVALID`` for a goal without a tree."""
        if self.status:
            return self.status
        return self.behaviours[0].status if self.behaviours and self.full else "INVALID"

    def counts(self) -> dict[str, int]:
        """How many behaviours have each status."""
        return dict(Counter(b.status for b in self.behaviours))

    def tip(self) -> BehaviourState | None:
        """The deepest active behaviour, if it is listed."""
        for behaviour in self.behaviours:
            if behaviour.id == self.tip_id:
                return behaviour
        return None

    def summary(self) -> str:
        """One line for people, e.g. ``goal-2 RUNNING (final): 14 behaviours
        [RUNNING 3, SUCCESS 4, INVALID 7]; tip: ExecuteSolution 'executing'``."""
        counts = ", ".join(f"{status} {n}" for status, n in sorted(self.counts().items()))
        tip = self.tip()
        tip_text = f"{tip.type_name} {tip.name!r}" if tip is not None else "none"
        final = " (final)" if self.final else ""
        kind = "behaviours" if self.full else "changed behaviours"
        return (
            f"{self.goal_id} {self.root_status}{final}: {len(self.behaviours)} {kind} "
            f"[{counts}]; tip: {tip_text}"
        )


def take_snapshot(
    goal_id: str, root: py_trees.behaviour.Behaviour | None, *, final: bool, unit_index: int = 0
) -> TreeState:
    """Copy the statuses of the whole tree under ``root`` (linear in its size).

    Args:
        goal_id: the goal the tree belongs to.
        root: the compiled tree's root, or ``None`` for a goal that got no tree.
        final: mark the snapshot as the goal's last.
        unit_index: the running unit (1-based), recorded as given.
    """
    if root is None:
        return TreeState(goal_id, (), "", final, time.time(), unit_index)
    tracker = TreeTracker(goal_id, root)
    return tracker.full(final=final, unit_index=unit_index)


#: A behaviour's status text and feedback message, read from the live behaviour (C-level
#: getters, mapped over a list of behaviours: no Python code runs per behaviour).
_READ_STATUS = operator.attrgetter("status._value_")
_READ_MESSAGE = operator.attrgetter("feedback_message")
#: A :class:`BehaviourState`'s status and message.
_STATE_STATUS = operator.itemgetter(4)
_STATE_MESSAGE = operator.itemgetter(5)
#: Most state changes per behaviour :attr:`TreeTracker.changes` keeps before it starts afresh.
_KEPT_CHANGES_PER_BEHAVIOUR = 4
#: A :class:`BehaviourState` from a tuple of its fields (``tuple.__new__``: no Python code).
_make_state = functools.partial(tuple.__new__, BehaviourState)


def uuid_texts(values: Sequence[object]) -> list[str]:
    """``[str(v) for v in values]`` for a list of :class:`uuid.UUID` (py_trees' behaviour
    ids), formatted together (one hex string, the dashes put in by numpy): about a quarter
    of the time of ``str`` per UUID. Anything that is not a ``uuid.UUID`` goes through ``str``.
    """
    count = len(values)
    if count == 0 or not all(type(v) is uuid.UUID for v in values):
        return [str(v) for v in values]
    digits = b"".join([v.int.to_bytes(16, "big") for v in values]).hex().encode("ascii")  # type: ignore[attr-defined]
    hexed = np.frombuffer(digits, dtype=np.uint8).reshape(count, 32)
    text = np.empty((count, 36), dtype=np.uint8)
    text[:, 8] = text[:, 13] = text[:, 18] = text[:, 23] = ord("-")
    text[:, 0:8], text[:, 9:13], text[:, 14:18] = hexed[:, 0:8], hexed[:, 8:12], hexed[:, 12:16]
    text[:, 19:23], text[:, 24:36] = hexed[:, 16:20], hexed[:, 20:32]
    joined = text.tobytes().decode("ascii")
    return [joined[i : i + 36] for i in range(0, 36 * count, 36)]


class TreeStructure:
    """The fixed part of a compiled tree, walked once: behaviours in pre-order, their
    positions, parents, children, subtree sizes, the root's children, and the initial
    states (ids, names, types, parents, children).

    Read-only once built, so every consumer of one goal's tree (the node's snapshots, the
    py_trees_ros streams, the ROS 2 bag) shares it: :meth:`of` keeps the latest few.
    ``encoded`` is a slot for what :class:`~erobs_bt.ros.convert.TreeSnapshotEncoder`
    derives from the structure (the same for every encoder of the tree).

    Cost: linear. Everything read from a behaviour is read in one recursive visit (a tree
    deeper than the interpreter's recursion limit raises ``RecursionError``; compiled trees
    are a few levels deep); the rest is C-level maps and joins over whole lists (ids:
    :func:`uuid_texts`).

    Attributes:
        nodes: the live behaviours, pre-order.
        parents: each one's parent position, ``-1`` for the root.
        children: each one's children's positions, in order (``()`` for a leaf).
        ids: each one's UUID text.
        size: each one's subtree size (itself included).
        states: the states at the walk, pre-order.
        child_start: pre-order position of each child of the root.

    Args:
        root: the tree's root (its structure must not change afterwards: a compiled tree).
    """

    _cache: ClassVar[deque[tuple[weakref.ref[py_trees.behaviour.Behaviour], TreeStructure]]] = deque(maxlen=4)
    _cache_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, root: py_trees.behaviour.Behaviour) -> None:
        nodes: list[py_trees.behaviour.Behaviour] = []
        parents: list[int] = []
        size: list[int] = []
        children: list[tuple[int, ...]] = []
        uuids: list[object] = []
        names: list[str] = []
        classes: list[type] = []
        statuses: list[str] = []
        messages: list[str] = []

        def visit(behaviour: py_trees.behaviour.Behaviour, parent: int) -> None:
            # Everything read from a behaviour is read here, once.
            own = len(nodes)
            nodes.append(behaviour)
            parents.append(parent)
            uuids.append(behaviour.id)
            names.append(behaviour.name)
            classes.append(type(behaviour))
            statuses.append(behaviour.status._value_)
            messages.append(behaviour.feedback_message)
            size.append(1)
            children.append(())
            positions = []
            for child in behaviour.children:
                positions.append(len(nodes))
                visit(child, own)
            if positions:
                size[own] = len(nodes) - own
                children[own] = tuple(positions)

        visit(root, -1)  # recursive: the fastest walk in CPython (trees are shallow)
        self.nodes = nodes
        self.parents = parents
        self.size = size
        self.children = children
        self.position = dict(zip(map(id, nodes), itertools.count()))
        ids = self.ids = uuid_texts(uuids)
        child_ids = [tuple(map(ids.__getitem__, c)) if c else () for c in children]
        class_names = {c: c.__name__ for c in set(classes)}
        parent_ids = [""]
        parent_ids += map(ids.__getitem__, parents[1:])
        self.states: tuple[BehaviourState, ...] = tuple(
            map(
                _make_state,
                zip(
                    ids,
                    parent_ids,
                    names,
                    map(class_names.__getitem__, classes),
                    statuses,
                    messages,
                    child_ids,
                    itertools.repeat(False),
                ),
            )
        )
        # Pre-order position of each child of the root.
        self.child_start = list(children[0])
        self.encoded: object = None

    @classmethod
    def of(cls, root: py_trees.behaviour.Behaviour) -> TreeStructure:
        """The structure of ``root``: one of the latest few built, else a new one (linear).

        The statuses in :attr:`states` are those at the first build; a tracker re-reads
        them before its first snapshot.
        """
        return cls.kept_or_built(root)[0]

    @classmethod
    def kept_or_built(cls, root: py_trees.behaviour.Behaviour) -> tuple[TreeStructure, bool]:
        """:meth:`of`, and whether the structure was built by this call (its :attr:`states`
        were read just now)."""
        with cls._cache_lock:
            for ref, structure in cls._cache:
                if ref() is root:
                    return structure, False
        # Thousands of new objects, none in a cycle: a collection here would walk the
        # whole heap (the live tree included) on the caller's thread, holding the GIL.
        with collector_paused():
            structure = cls(root)
        with cls._cache_lock:
            cls._cache.append((weakref.ref(root), structure))
        return structure, True

    @classmethod
    def forget(cls) -> None:
        """Drop the kept structures (the next :meth:`of` builds afresh; for benchmarks)."""
        with cls._cache_lock:
            cls._cache.clear()


class TreeTracker:
    """The statuses of one goal's tree, re-read incrementally (see the module docstring).

    Not thread-safe: one caller at a time (:class:`SnapshotThrottle` holds a lock).

    Args:
        goal_id: the goal the tree belongs to.
        root: its root; walked once per tree, at the tracker's first snapshot or first use
            of :attr:`structure` or :attr:`states` (:meth:`TreeStructure.of`, linear in the
            tree size; a second tracker of the same tree shares the walk). A snapshot that
            walked the tree does not read it again.
    """

    def __init__(self, goal_id: str, root: py_trees.behaviour.Behaviour) -> None:
        self.goal_id = goal_id
        self.root = root
        self._structure: TreeStructure | None = None
        self._low = 0
        # The kept states may be stale: the first refresh re-reads every behaviour (unless
        # the structure was walked by that same call).
        self._fresh = True
        self._active: list[int] = []
        self._tip = -1
        self.sequence = -1
        #: Behaviours the last refresh re-read (its cost, in behaviours).
        self.last_scanned = 0
        #: The last delta taken and the pre-order positions of its behaviours.
        self.last_delta: tuple[TreeState, list[int]] | None = None
        #: Pre-order positions of every state change, in the order of the refreshes that
        #: found them (a reader keeps how far it has read: :class:`TreeSnapshotEncoder`).
        #: Started afresh, with :attr:`changes_epoch` counted up, when it holds more than
        #: a few changes per behaviour (a reader of an older epoch re-reads every state).
        self.changes: list[int] = []
        self.changes_epoch = 0

    def _load(self) -> bool:
        """Get the tree's structure (once); whether it was walked just now, by this call."""
        if self._structure is not None:
            return False
        structure, built = TreeStructure.kept_or_built(self.root)
        self._nodes = structure.nodes
        self._position = structure.position
        self._size = structure.size
        self._child_start = structure.child_start
        self._states = list(structure.states)
        self._statuses: list[str] = list(map(_STATE_STATUS, structure.states))
        self._messages: list[str] = list(map(_STATE_MESSAGE, structure.states))
        self._structure = structure
        return built

    @property
    def structure(self) -> TreeStructure:
        """The tree's structure (walked at the first use, shared: :meth:`TreeStructure.of`)."""
        self._load()
        assert self._structure is not None
        return self._structure

    @property
    def size(self) -> int:
        """Number of behaviours in the tree."""
        return len(self.structure.nodes)

    @property
    def behaviours(self) -> list[py_trees.behaviour.Behaviour]:
        """The live behaviours, pre-order (read-only use)."""
        return self.structure.nodes

    @property
    def states(self) -> list[BehaviourState]:
        """Their states as of the last refresh, pre-order (a changed one is a new object)."""
        self._load()
        return self._states

    @property
    def active_path(self) -> list[int]:
        """Pre-order positions from the tip up to the root, as of the last refresh."""
        return self._active

    def _window(self) -> range | None:
        """Pre-order positions that may have changed since the last refresh (None: all)."""
        root = self.root
        if not isinstance(root, UnitSequence) or not self._child_start:
            return None
        current = min(root.position, len(self._child_start) - 1)
        low = min(self._low, current)
        self._low = current
        start = self._child_start[low]
        end = self._child_start[current] + self._size[self._child_start[current]]
        return range(start, end)

    def _refresh(self, positions: range | None) -> list[int]:
        """Re-read statuses; the positions whose state changed, in pre-order.

        The statuses and messages of the re-read range are read by C-level getters mapped
        over its behaviours and compared with the kept ones list against list (no Python
        code per behaviour); the root and the old and new active paths (whose
        ``is_active`` may change) are checked one by one.
        """
        tip = self.root.tip()
        active: list[int] = []
        node = tip
        position = self._position
        while node is not None:
            active.append(position[id(node)])
            node = node.parent
        nodes, states = self._nodes, self._states
        if positions is None or self._fresh:
            self._fresh = False
            positions = range(len(nodes))
        start, stop = positions.start, positions.stop
        window = nodes[start:stop]
        statuses = list(map(_READ_STATUS, window))
        messages = list(map(_READ_MESSAGE, window))
        kept_statuses, kept_messages = self._statuses, self._messages
        if statuses == kept_statuses[start:stop] and messages == kept_messages[start:stop]:
            changed = []
        else:
            changed = list(
                itertools.compress(
                    positions,
                    map(
                        operator.or_,
                        map(operator.ne, statuses, kept_statuses[start:stop]),
                        map(operator.ne, messages, kept_messages[start:stop]),
                    ),
                )
            )
            kept_statuses[start:stop] = statuses
            kept_messages[start:stop] = messages
        # Outside the range: the root and the active paths; anywhere: their active flags.
        previous = self._active
        self.last_scanned = len(window)
        extra = False
        for i in {0, *previous, *active}:
            if start <= i < stop:
                continue
            self.last_scanned += 1
            b = nodes[i]
            status, message = b.status._value_, b.feedback_message
            if status != kept_statuses[i] or message != kept_messages[i]:
                kept_statuses[i], kept_messages[i] = status, message
                changed.append(i)
                extra = True
        active_set = set(active)
        flips = [i for i in {*previous, *active} if (i in active_set) != states[i][7]]
        if flips or extra:
            changed = sorted({*changed, *flips})
        for i in changed:
            old = states[i]
            states[i] = _make_state(
                (old[0], old[1], old[2], old[3], kept_statuses[i], kept_messages[i], old[6], i in active_set)
            )
        if len(self.changes) > _KEPT_CHANGES_PER_BEHAVIOUR * len(nodes) + 1024:
            self.changes, self.changes_epoch = [], self.changes_epoch + 1
        self.changes += changed
        self._active = active
        self._tip = active[0] if active else -1
        return changed

    def _state(
        self, behaviours: tuple[BehaviourState, ...], *, final: bool, full: bool, unit_index: int
    ) -> TreeState:
        self.sequence += 1
        tip_id = self._states[self._tip].id if self._tip >= 0 else ""
        return TreeState(
            self.goal_id,
            behaviours,
            tip_id,
            final,
            time.time(),
            unit_index,
            full=full,
            sequence=self.sequence,
            status=self._statuses[0] if self._statuses else "INVALID",
        )

    def full(self, *, final: bool = False, unit_index: int = 0) -> TreeState:
        """A full snapshot (re-reads the whole tree: linear; but the first one of a tracker
        whose structure was just walked)."""
        with collector_paused():  # thousands of new states, none in a cycle
            if self._load():
                # Walked by this call: the statuses were read just now; only the root and
                # the active path (which the walk does not record) are read again.
                self._fresh = False
                self._refresh(range(0))
            else:
                self._refresh(None)
        return self._state(tuple(self._states), final=final, full=True, unit_index=unit_index)

    def delta(self, *, unit_index: int = 0) -> TreeState | None:
        """What changed since the previous snapshot, or ``None`` when nothing did.

        Cost: the behaviours of the units run since the previous refresh (see the
        module docstring), independent of the tree's size.
        """
        previous_tip = self._tip
        with collector_paused():  # a new state per changed behaviour, none in a cycle
            if self._load():
                self._fresh = False  # walked by this call: the statuses were read just now
            changed = self._refresh(self._window())
        if not changed and self._tip == previous_tip:
            return None
        states = self._states
        state = self._state(
            tuple(map(states.__getitem__, changed)), final=False, full=False, unit_index=unit_index
        )
        self.last_delta = (state, changed)
        return state


class SnapshotThrottle:
    """Decides which snapshots to send: the goal's structure first, then what changed (at
    most ``rate`` per second), a full one on request, and always the final one.

    Thread-safe: :meth:`ticked` is called on the orchestrator's goal thread (O(1), never
    waits for a snapshot being taken), :meth:`poll` on a timer thread, :meth:`finish` when
    a goal ended, :meth:`request_full` when a viewer connected.

    Args:
        publish: receives every snapshot to send (called with the snapshot lock held, so
            publications are ordered; keep it short).
        rate: the most snapshots per second [Hz], > 0 (the final one is never held back).
        unit_index: gives the running unit (1-based) of a goal id, recorded in each snapshot.
        clock: monotonic time source [s] (injectable for tests).

    Raises:
        ValueError: ``rate`` is not positive.
    """

    def __init__(
        self,
        publish: Callable[[TreeState], None],
        *,
        rate: float,
        unit_index: Callable[[str], int] = lambda goal_id: 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not rate > 0:
            raise ValueError(f"snapshot rate must be > 0 Hz (got {rate})")
        self._publish = publish
        self._period = 1.0 / rate
        self._clock = clock
        self._unit_index = unit_index
        self._tick_lock = threading.Lock()  # the goal thread's fields only
        self._work_lock = threading.Lock()  # taking and sending snapshots
        self._goal_id = ""
        self._root: py_trees.behaviour.Behaviour | None = None
        self._dirty = False
        self._full_requested = False
        self._finished: deque[str] = deque(maxlen=32)
        self._tracker: TreeTracker | None = None
        self._last_time = -float("inf")
        self.published = 0

    @property
    def tracker(self) -> TreeTracker | None:
        """The tracker of the current (or last) goal."""
        return self._tracker

    @property
    def goal_id(self) -> str:
        """The goal last ticked (``""`` before the first)."""
        return self._goal_id

    def ticked(self, goal_id: str, root: py_trees.behaviour.Behaviour) -> None:
        """Note that ``root`` (of ``goal_id``) was ticked; O(1)."""
        with self._tick_lock:
            self._goal_id, self._root, self._dirty = goal_id, root, True

    def request_full(self) -> None:
        """Send a full snapshot at the next poll (a new viewer needs the structure)."""
        with self._tick_lock:
            self._full_requested = True

    def poll(self) -> TreeState | None:
        """Send a snapshot when the tree changed and the rate allows.

        Returns:
            The snapshot sent, or ``None``.
        """
        with self._work_lock:
            with self._tick_lock:
                goal_id, root = self._goal_id, self._root
                if root is None or goal_id in self._finished:
                    return None
                tracker = self._tracker
                new_goal = tracker is None or tracker.goal_id != goal_id or tracker.root is not root
                want_full = self._full_requested or new_goal
                if not (self._dirty or want_full):
                    return None
                now = self._clock()
                if now - self._last_time < self._period:
                    return None
                self._dirty = False
                self._full_requested = False
            if new_goal:
                tracker = self._tracker = TreeTracker(goal_id, root)
            assert tracker is not None
            unit = self._unit_index(goal_id)
            state = tracker.full(unit_index=unit) if want_full else tracker.delta(unit_index=unit)
            if state is None:
                return None
            self._send(state, now)
            return state

    def finish(self, goal_id: str, root: py_trees.behaviour.Behaviour | None) -> TreeState | None:
        """Send the final full snapshot of ``goal_id`` (once; later calls do nothing).

        Returns:
            The snapshot sent, or ``None`` when the goal's final one was already sent.
        """
        with self._work_lock:
            with self._tick_lock:
                if goal_id in self._finished:
                    return None
                self._finished.append(goal_id)
                if self._goal_id == goal_id:
                    self._root, self._dirty = None, False
            unit = self._unit_index(goal_id)
            if root is None:
                state = TreeState(goal_id, (), "", True, time.time(), unit)
            else:
                tracker = self._tracker
                if tracker is None or tracker.goal_id != goal_id or tracker.root is not root:
                    tracker = self._tracker = TreeTracker(goal_id, root)
                state = tracker.full(final=True, unit_index=unit)
            self._send(state, self._clock())
            return state

    def _send(self, state: TreeState, now: float) -> None:
        self._last_time = now
        self.published += 1
        self._publish(state)


class SnapshotAssembler:
    """Rebuilds full snapshots from what :class:`SnapshotThrottle` sends.

    Feed every received :class:`TreeState` to :meth:`add`. A full one replaces the
    picture; a delta of the same goal with the next ``sequence`` updates it; anything
    else (a delta before any full one, after a gap, or of another goal) is ignored until
    the next full snapshot.
    """

    def __init__(self) -> None:
        self._goal_id = ""
        self._sequence = -1
        self._order: list[str] = []
        self._by_id: dict[str, BehaviourState] = {}
        self._latest: TreeState | None = None
        self.ignored = 0

    def add(self, state: TreeState) -> TreeState | None:
        """Take one snapshot.

        Returns:
            The current full snapshot after it, or ``None`` when ``state`` could not be
            applied (the picture is incomplete until the next full snapshot).
        """
        if state.full:
            self._goal_id, self._sequence = state.goal_id, state.sequence
            self._order = [b.id for b in state.behaviours]
            self._by_id = {b.id: b for b in state.behaviours}
            self._latest = state
            return state
        if state.goal_id != self._goal_id or state.sequence != self._sequence + 1 or self._latest is None:
            self.ignored += 1
            self._goal_id, self._latest = "", None
            return None
        self._sequence = state.sequence
        for b in state.behaviours:
            old = self._by_id.get(b.id)
            if old is not None:
                self._by_id[b.id] = old._replace(status=b.status, message=b.message, is_active=b.is_active)
        self._latest = dataclasses.replace(
            state,
            behaviours=tuple(self._by_id[i] for i in self._order),
            full=True,
        )
        return self._latest

    @property
    def latest(self) -> TreeState | None:
        """The current full snapshot, or ``None``."""
        return self._latest

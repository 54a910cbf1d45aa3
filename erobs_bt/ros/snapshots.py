"""Tree snapshots for viewers: what ``~/tree_snapshot`` carries, and when it is sent.

A snapshot is a plain copy of the compiled tree's statuses (one :class:`BehaviourState`
per behaviour, parents before children), so it can be compared, summarised and
converted to a ``erobs_bt_interfaces/msg/TreeSnapshot`` without holding on to live
behaviours.

When: taking a snapshot walks the whole tree, which is linear in its size; DESIGN.md §2
keeps that off the orchestrator's tick path. So :meth:`SnapshotThrottle.ticked` (called
on the goal thread after every tick) only records that the tree may have changed, which
costs O(1); :meth:`SnapshotThrottle.poll` (called by a timer) takes at most ``rate``
snapshots per second and hands one on only when a status, a message or the tip changed;
:meth:`SnapshotThrottle.finish` always hands on the final snapshot of a goal, also when
the goal ended with an exception or never got a tree (a rejected script), and makes the
poller ignore that goal afterwards so a late timer never publishes an older picture
after the final one.

Reading statuses from the timer thread while the goal thread ticks is safe in CPython
(the tree's structure is fixed once compiled; attribute reads are atomic); a snapshot
taken in the middle of a tick can mix two ticks, and the next one corrects it. The final
snapshot is taken after the goal thread stopped ticking, so it is exact.

This module does not import rclpy: it is unit-testable without a ROS context.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import py_trees


@dataclass(frozen=True)
class BehaviourState:
    """One behaviour in a snapshot.

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
    """A snapshot of a goal's tree.

    Attributes:
        goal_id: the orchestrator's goal id (``goal-<n>``).
        behaviours: every behaviour, pre-order (a parent before its children);
            empty when the goal never got a tree (its script was rejected).
        tip_id: UUID of the deepest active behaviour, ``""`` when none.
        final: the goal has ended; this is its last snapshot.
        stamp: wall time the snapshot was taken [s since the epoch].
        unit_index: 1-based index of the running (or last started) unit, 0 when none.
    """

    goal_id: str
    behaviours: tuple[BehaviourState, ...]
    tip_id: str
    final: bool
    stamp: float
    unit_index: int = 0

    @property
    def root_status(self) -> str:
        """The root's status, ``INVALID`` for an empty snapshot."""
        return self.behaviours[0].status if self.behaviours else "INVALID"

    def counts(self) -> dict[str, int]:
        """How many behaviours have each status."""
        return dict(Counter(b.status for b in self.behaviours))

    def tip(self) -> BehaviourState | None:
        """The deepest active behaviour, if any."""
        for behaviour in self.behaviours:
            if behaviour.id == self.tip_id:
                return behaviour
        return None

    def signature(self) -> tuple[object, ...]:
        """What counts as a change: statuses, messages, the tip and finality."""
        return (
            self.goal_id,
            self.final,
            self.tip_id,
            self.unit_index,
            tuple((b.status, b.message) for b in self.behaviours),
        )

    def summary(self) -> str:
        """One line for people, e.g. ``goal-2 RUNNING (final): 14 behaviours
        [RUNNING 3, SUCCESS 4, INVALID 7]; tip: ExecuteSolution 'executing'``."""
        counts = ", ".join(f"{status} {n}" for status, n in sorted(self.counts().items()))
        tip = self.tip()
        tip_text = f"{tip.type_name} {tip.name!r}" if tip is not None else "none"
        final = " (final)" if self.final else ""
        return (
            f"{self.goal_id} {self.root_status}{final}: {len(self.behaviours)} behaviours "
            f"[{counts}]; tip: {tip_text}"
        )


def _walk(
    root: py_trees.behaviour.Behaviour,
) -> Iterator[tuple[py_trees.behaviour.Behaviour, str]]:
    stack: list[tuple[py_trees.behaviour.Behaviour, str]] = [(root, "")]
    while stack:
        behaviour, parent_id = stack.pop()
        yield behaviour, parent_id
        own = str(behaviour.id)
        stack.extend((child, own) for child in reversed(behaviour.children))


def take_snapshot(
    goal_id: str, root: py_trees.behaviour.Behaviour | None, *, final: bool, unit_index: int = 0
) -> TreeState:
    """Copy the statuses of the tree under ``root``.

    Args:
        goal_id: the goal the tree belongs to.
        root: the compiled tree's root, or ``None`` for a goal that got no tree.
        final: mark the snapshot as the goal's last.
        unit_index: the running unit (1-based), recorded as given.

    Returns:
        The snapshot; cost is linear in the number of behaviours.
    """
    if root is None:
        return TreeState(goal_id, (), "", final, time.time(), unit_index)
    tip = root.tip()
    active: set[str] = set()
    node = tip
    while node is not None:
        active.add(str(node.id))
        node = node.parent
    behaviours = tuple(
        BehaviourState(
            id=str(b.id),
            parent_id=parent_id,
            name=b.name,
            type_name=type(b).__name__,
            status=b.status.value,
            message=b.feedback_message,
            child_ids=tuple(str(c.id) for c in b.children),
            is_active=str(b.id) in active,
        )
        for b, parent_id in _walk(root)
    )
    tip_id = str(tip.id) if tip is not None else ""
    return TreeState(goal_id, behaviours, tip_id, final, time.time(), unit_index)


class SnapshotThrottle:
    """Decides which snapshots to publish: on change, at most ``rate`` per second,
    and always the final one of a goal.

    Thread-safe: :meth:`ticked` and :meth:`finish` are called on the orchestrator's goal
    thread, :meth:`poll` on a timer thread.

    Args:
        publish: receives every snapshot to send (called with an internal lock held,
            so publications are ordered; keep it short).
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
        self._lock = threading.Lock()
        self._goal_id = ""
        self._root: py_trees.behaviour.Behaviour | None = None
        self._dirty = False
        self._finished: deque[str] = deque(maxlen=32)
        self._last_time = -float("inf")
        self._last_signature: tuple[object, ...] | None = None
        self.published = 0

    def ticked(self, goal_id: str, root: py_trees.behaviour.Behaviour) -> None:
        """Note that ``root`` (of ``goal_id``) was ticked; O(1)."""
        with self._lock:
            if goal_id in self._finished:
                return
            self._goal_id, self._root, self._dirty = goal_id, root, True

    def poll(self) -> TreeState | None:
        """Publish a snapshot when the tree changed and the rate allows.

        Returns:
            The snapshot published, or ``None``.
        """
        with self._lock:
            if not self._dirty or self._root is None:
                return None
            now = self._clock()
            if now - self._last_time < self._period:
                return None
            self._dirty = False
            state = take_snapshot(
                self._goal_id, self._root, final=False, unit_index=self._unit_index(self._goal_id)
            )
            if state.signature() == self._last_signature:
                return None
            self._send(state, now)
            return state

    def finish(self, goal_id: str, root: py_trees.behaviour.Behaviour | None) -> TreeState | None:
        """Publish the final snapshot of ``goal_id`` (once; later calls do nothing).

        Returns:
            The snapshot published, or ``None`` when the goal's final one was already sent.
        """
        with self._lock:
            if goal_id in self._finished:
                return None
            self._finished.append(goal_id)
            if self._goal_id == goal_id:
                self._root, self._dirty = None, False
            state = take_snapshot(goal_id, root, final=True, unit_index=self._unit_index(goal_id))
            self._send(state, self._clock())
            return state

    def _send(self, state: TreeState, now: float) -> None:
        self._last_time = now
        self._last_signature = state.signature()
        self.published += 1
        self._publish(state)

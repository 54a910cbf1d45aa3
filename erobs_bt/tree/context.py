"""Per-goal shared state handed to every behaviour of a compiled tree.

py_trees' blackboard is process-global; two orchestrators (or two tests) in one
process would see each other's keys. Instead, each goal gets one :class:`GoalContext`
that its behaviours hold a reference to: the backend, the plan cache and the goal's
cache key, the pause/cancel/halt :class:`Controls` shared with the orchestrator, the
:class:`GoalEvents` sink that turns progress into feedback, and the few values
behaviours pass to each other (the planned solution of a unit, the unit's cache key,
the goal's one typed failure and the fault latched by the fault decorator).
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from erobs_bt.backends.base import MotionBackend, MotionError, Solution
from erobs_bt.batching import Unit
from erobs_bt.cache import CacheKey, PlanCache, make_key, round_start
from erobs_bt.script.model import Script


class Mode(enum.Enum):
    """What a compiled tree does with motion units."""

    EXECUTE = "execute"
    """Replay a cached solution when one matches, else plan and execute."""
    PREVIEW = "preview"
    """Plan only (never replay, never execute); a successful eligible preview is cached."""


class CacheStatus(enum.Enum):
    """The cache decision for one motion unit (feedback field ``cache_status``)."""

    HIT = "HIT"
    MISS = "MISS"
    INELIGIBLE = "INELIGIBLE"


class FinishReason(enum.Enum):
    """Why a goal's tree stopped other than by success."""

    FAILED = "FAILED"
    CANCELED = "CANCELED"


#: Default execution timeouts per task type [s]. ``TIMEOUT:`` is reported past them.
#: The 120 s motion value is EROBS's per-type motion timeout (erobs-semantics.md §3).
DEFAULT_TIMEOUTS: Mapping[str, float] = MappingProxyType(
    {
        "moveto": 120.0,
        "end_effector": 30.0,
        "tool_exchange": 240.0,
        "pipettor": 60.0,
        "vision": 240.0,
        "planning": 60.0,
    }
)


class HaltReason(enum.Enum):
    """Why a goal is halted at once (motion stopped mid-unit), as its ``error_code``."""

    STOPPED = "STOPPED"
    """:meth:`erobs_bt.orchestrator.Orchestrator.stop`: the operator asked to stop now."""
    SHUTDOWN = "SHUTDOWN"
    """:meth:`erobs_bt.orchestrator.Orchestrator.shutdown`: the node is shutting down."""


@dataclass(frozen=True)
class Halt:
    """A request to halt the goal now (not at a unit boundary).

    Attributes:
        reason: stop or shutdown; becomes the result's ``error_code``.
        message: for people, e.g. ``stopped by operator request`` or ``node shutting down``.
    """

    reason: HaltReason
    message: str


class Controls:
    """Pause, resume, cancel and halt requests, shared by the orchestrator and the tree.

    All methods are thread-safe; ``on_change`` (typically the orchestrator's wake-up)
    is called after every change so the tree is ticked promptly. Pause and cancel are
    seen by the tree at unit boundaries; a halt is acted on by the orchestrator, which
    halts the tree before its next tick (the leaves then stop the motion they started).
    """

    def __init__(self, on_change: Callable[[], None] = lambda: None) -> None:
        self._lock = threading.Lock()
        self._on_change = on_change
        self.pause_requested = False
        self.resume_requested = False
        self.cancel_requested = False
        self.halt: Halt | None = None

    def request_pause(self) -> None:
        """Ask the tree to pause at the next unit boundary.

        A resume that is still pending (accepted but not yet seen by the tree) is kept:
        it releases the goal from where it is parked, and the new pause then takes effect
        at the next boundary.
        """
        with self._lock:
            self.pause_requested = True
        self._on_change()

    def request_resume(self) -> None:
        """Release a paused boundary or a ``pause`` step; drops a pending pause request."""
        with self._lock:
            self.resume_requested = True
            self.pause_requested = False
        self._on_change()

    def request_cancel(self) -> None:
        """Ask the tree to stop at the next unit boundary (or now, when paused)."""
        with self._lock:
            self.cancel_requested = True
        self._on_change()

    def request_halt(self, halt: Halt) -> None:
        """Ask for the goal to be halted now; the first halt request wins."""
        with self._lock:
            if self.halt is None:
                self.halt = halt
        self._on_change()

    def take_pause(self) -> bool:
        """Consume a pending pause request; True when there was one."""
        with self._lock:
            pending, self.pause_requested = self.pause_requested, False
            if pending:
                self.resume_requested = False
            return pending

    def take_resume(self) -> bool:
        """Consume a pending resume request; True when there was one."""
        with self._lock:
            pending, self.resume_requested = self.resume_requested, False
            return pending


class GoalEvents:
    """Receiver of a goal's progress; the orchestrator subclasses it.

    Every method has a no-op default so a tree can run with bare events (tests,
    the ``render`` command).
    """

    def unit_started(self, unit: Unit) -> None:
        """``unit`` is about to run (after its boundary let it through)."""

    def unit_succeeded(self, unit: Unit) -> None:
        """``unit`` completed; its steps count as completed."""

    def cache_decision(self, unit: Unit, status: CacheStatus, digest: str = "") -> None:
        """The replay-or-plan decision for a motion unit (``digest``: the key looked up)."""

    def phase(self, unit: Unit, phase: str, seconds: float | None = None, detail: str = "") -> None:
        """A phase of a unit began or ended (``plan``, ``execute``, ``replay``, ``run``)."""

    def paused(self, reason: str) -> None:
        """The goal is now paused (at a boundary or a ``pause`` step)."""

    def resumed(self) -> None:
        """The goal left the paused state."""

    def preview(self, unit: Unit, solution: Solution) -> None:
        """A preview trajectory for ``unit`` was planned."""


@dataclass
class GoalContext:
    """Everything the behaviours of one goal share.

    Attributes:
        script: the validated script.
        units: its units, in order.
        mode: execute or preview.
        backend: the motion backend.
        cache: the plan cache shared across goals.
        eligible: the goal forms exactly one batched unit, so it may replay and store.
        controls: pause/resume/cancel/halt requests.
        events: progress receiver.
        timeouts: per-type timeouts [s] (keys of :data:`DEFAULT_TIMEOUTS`).
        wake: called from backend threads when a future completes, to tick again.
        solutions: planned solutions by unit index (filled by ``PlanUnit``).
        unit_key: the cache key of the running unit, taken from the live robot state
            when the unit started (:meth:`begin_unit`); the one key used for both lookup
            and store. ``None`` for an ineligible goal.
        failure: the first error that failed the goal (typed; its ``code`` is the
            result's ``error_code``). A non-fatal replay error is not a failure: the unit
            is planned afresh.
        failed_while_canceling: ``failure`` happened while a cancel was pending (the fault
            decorator then latches the fault, erobs-semantics.md §3).
        fault: the reason the orchestrator goes to FAULTED, latched only by
            :class:`erobs_bt.tree.decorators.FaultOnFatal`.
        finish_reason: set when the tree stops on purpose (cancel) or fails.
        cancel_message: how the cancel was observed ("cancelled", "cancelled while paused").
    """

    script: Script
    units: list[Unit]
    mode: Mode
    backend: MotionBackend
    cache: PlanCache
    eligible: bool
    controls: Controls
    events: GoalEvents = field(default_factory=GoalEvents)
    timeouts: Mapping[str, float] = field(default_factory=lambda: DEFAULT_TIMEOUTS)
    wake: Callable[[], None] = lambda: None
    solutions: dict[int, Solution] = field(default_factory=dict)
    unit_key: CacheKey | None = None
    failure: MotionError | None = None
    failed_while_canceling: bool = False
    fault: str | None = None
    finish_reason: FinishReason | None = None
    cancel_message: str = ""

    def fail(self, error: MotionError) -> None:
        """Record a failure; the first one wins (a later fatal error cannot hide behind it
        because a fatal error ends the unit, and so the goal, at once)."""
        if self.failure is None:
            self.failure = error
            self.failed_while_canceling = self.controls.cancel_requested

    @property
    def fatal(self) -> bool:
        """True when the recorded failure is ``TIMEOUT:``/``REPLAY_TIMEOUT:``."""
        return self.failure is not None and self.failure.fatal

    def begin_unit(self, unit: Unit) -> None:
        """Take the cache key of ``unit`` from the robot as it is now (eligible goals only).

        Called when the unit starts, after its boundary let it through (so after a pause,
        from where the arm is then). The same key is used to look the unit up and to
        store its solution: with no complete six-joint state it is the start-less key
        (batching-and-caches.txt, "When a plan can be reused").
        """
        self.unit_key = None
        if self.eligible and unit.is_motion:
            self.unit_key = make_key(
                self.script,
                model_revision=self.backend.model_revision(),
                start=self.backend.joint_positions(),
            )

    def store(self, solution: Solution) -> bool:
        """Store ``solution`` under :attr:`unit_key`; returns whether it was stored.

        Nothing is stored for an ineligible goal, nor when the solution does not begin
        where the unit began (a fresh plan after a replay that stopped part-way): filed
        under the unit's key it would be replayed from a start it does not begin at.
        """
        key = self.unit_key
        if key is None:
            return False
        begins = round_start(solution.start_positions)
        if key.start is not None and begins is not None and begins != key.start:
            return False
        if solution.model_revision != key.model_revision:
            return False
        self.cache.put(key, solution)
        return True

    def timeout_for(self, unit: Unit) -> float:
        """Execution timeout of ``unit`` [s]: the sum of its steps' per-type timeouts."""
        total = 0.0
        for step in unit.steps:
            total += self.timeouts.get(step.task_type, self.timeouts["moveto"])
        return total

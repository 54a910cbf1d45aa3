"""Per-goal shared state handed to every behaviour of a compiled tree.

py_trees' blackboard is process-global; two orchestrators (or two tests) in one
process would see each other's keys. Instead, each goal gets one :class:`GoalContext`
that its behaviours hold a reference to: the backend, the plan cache and the goal's
cache key, the pause/cancel :class:`Controls` shared with the orchestrator, the
:class:`GoalEvents` sink that turns progress into feedback, and the few values
behaviours pass to each other (the planned solution of a unit, the first error, the
fatal error that faults the orchestrator).
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from erobs_bt.backends.base import MotionBackend, MotionError, Solution, is_fatal_message
from erobs_bt.batching import Unit
from erobs_bt.cache import CacheKey, PlanCache, make_key
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


class Controls:
    """Pause, resume and cancel requests, shared by the orchestrator and the tree.

    All methods are thread-safe; ``on_change`` (typically the orchestrator's wake-up)
    is called after every change so the tree is ticked promptly.
    """

    def __init__(self, on_change: Callable[[], None] = lambda: None) -> None:
        self._lock = threading.Lock()
        self._on_change = on_change
        self.pause_requested = False
        self.resume_requested = False
        self.cancel_requested = False

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
        controls: pause/resume/cancel requests.
        events: progress receiver.
        timeouts: per-type timeouts [s] (keys of :data:`DEFAULT_TIMEOUTS`).
        wake: called from backend threads when a future completes, to tick again.
        solutions: planned solutions by unit index (filled by ``PlanUnit``).
        error: the first error that failed the goal, with its prefix.
        fatal_error: a ``TIMEOUT:``/``REPLAY_TIMEOUT:`` error.
        failed_while_canceling: a unit failed while a cancel was pending (faults the
            orchestrator); recorded when the failure happens.
        faulted: latched by the fault decorator when a unit failed fatally; the
            orchestrator then goes to FAULTED.
        replay_error: the non-fatal error of a failed replay (the unit is planned afresh).
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
    error: str | None = None
    fatal_error: str | None = None
    failed_while_canceling: bool = False
    faulted: bool = False
    replay_error: str | None = None
    finish_reason: FinishReason | None = None
    cancel_message: str = ""

    def fail(self, error: MotionError | str) -> None:
        """Record a unit failure; the first error wins, a fatal one is kept separately."""
        text = str(error)
        if self.error is None:
            self.error = text
            self.failed_while_canceling = self.controls.cancel_requested
        fatal = error.fatal if isinstance(error, MotionError) else is_fatal_message(text)
        if fatal and self.fatal_error is None:
            self.fatal_error = text

    def live_key(self) -> CacheKey:
        """The cache key of this goal for the robot as it is now (model revision, live joints)."""
        return make_key(
            self.script, model_revision=self.backend.model_revision(), start=self.backend.joint_positions()
        )

    def store(self, solution: Solution) -> None:
        """Store ``solution`` for an eligible goal, under the key of the state it starts from.

        The key is built from the solution itself (its model revision and start joints),
        not from the state the goal started in: a fresh plan made after a partial replay,
        or after the arm moved during a pause, must not be filed under a start it does
        not begin at.
        """
        if self.eligible:
            key = make_key(
                self.script, model_revision=solution.model_revision, start=solution.start_positions
            )
            self.cache.put(key, solution)

    def timeout_for(self, unit: Unit) -> float:
        """Execution timeout of ``unit`` [s]: the sum of its steps' per-type timeouts."""
        total = 0.0
        for step in unit.steps:
            total += self.timeouts.get(step.task_type, self.timeouts["moveto"])
        return total

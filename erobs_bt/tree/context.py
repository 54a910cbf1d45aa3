"""Per-goal shared state handed to every behaviour of a compiled tree.

py_trees' blackboard is process-global; two orchestrators (or two tests) in one
process would see each other's keys. Instead, each goal gets one :class:`GoalContext`
that its behaviours hold a reference to: the backend, the plan cache and the goal's
cache key, the pause/cancel/halt :class:`Controls` shared with the orchestrator, the
:class:`GoalEvents` sink that turns progress into feedback, and the few values
behaviours pass to each other (the planned solution of a unit, the unit's cache key,
the goal's one typed failure and the fault latched by the fault decorator), and the
goal's one pending plan-ahead (:class:`~erobs_bt.tree.plan_ahead.PlannedAhead`).

Plan-ahead's policy (issue 13: what is planned ahead, when, and when its plan may be used) is
:mod:`erobs_bt.tree.plan_ahead`; the context keeps its state and calls it through the
methods of the same names.
"""

from __future__ import annotations

import enum
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from erobs_bt.backends.base import DetectedPose, MotionBackend, MotionError, Solution
from erobs_bt.batching import Unit
from erobs_bt.cache import CacheKey, KeyDocument, PlanCache, round_start
from erobs_bt.plan import GoalPlan
from erobs_bt.script.model import Script, Step
from erobs_bt.settings import EngineSettings
from erobs_bt.timeouts import PLANNING_STEPS_PER_TIMEOUT, timeout_key
from erobs_bt.tree import plan_ahead
from erobs_bt.tree.plan_ahead import PlannedAhead


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

    def replay_unchecked(self, unit: Unit, notice: str) -> None:
        """``unit``'s cache hit, planned in another planning-scene revision, is replayed
        without a scene check (``replay_scene_check`` off); ``notice`` says so
        (:func:`erobs_bt.goal.unchecked_replay_notice`). Reported before the replay is sent."""

    def paused(self, reason: str) -> None:
        """The goal is now paused (at a boundary or a ``pause`` step)."""

    def resumed(self) -> None:
        """The goal left the paused state."""

    def preview(self, unit: Unit, solution: Solution) -> None:
        """A preview trajectory for ``unit`` was planned."""

    def plan_ahead(self, unit: Unit, status: str, detail: str = "") -> None:
        """A plan-ahead of ``unit`` changed: ``started``, ``used``, ``discarded`` or ``dropped``.

        Called on the goal's tick thread only; it is a run-log record, not feedback (the
        unit running now is another one).
        """


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
        settings: the engine's options (:class:`~erobs_bt.settings.EngineSettings`), passed
            whole by the orchestrator: the per-type :attr:`timeouts`, the replay's scene check
            (:class:`erobs_bt.tree.behaviours.ReplayCached`), plan-ahead.
        wake: called from backend threads when a future completes, to tick again.
        solutions: planned solutions by unit index (filled by ``PlanUnit``).
        unit_key: the cache key of the running unit, taken from the live robot state
            when the unit started (:meth:`begin_unit`); the one key used for both lookup
            and store. ``None`` for an ineligible goal.
        failure: the first error that failed the goal (typed; its ``code`` is the
            result's ``error_code``). A non-fatal replay error is not a failure: the unit
            is planned afresh.
        failed_while_canceling: ``failure`` happened while a cancel was pending (the fault
            decorator then latches the fault, docs/behaviour.md §3).
        fault: the reason the orchestrator goes to FAULTED, latched only by
            :class:`erobs_bt.tree.decorators.FaultOnFatal`.
        finish_reason: set when the tree stops on purpose (cancel) or fails.
        cancel_message: how the cancel was observed ("cancelled", "cancelled while paused").
        plan_ahead_enabled: plan the next motion unit while this one executes (module
            docstring); the settings' ``plan_ahead``, never in preview mode.
        ahead: the pending plan-ahead, if any (touched on the goal's tick thread only).
        detected: the pose the goal's last ``detect_only`` vision step detected, if any
            (the result reports it).
        key_document: the goal-content part of the goal's cache keys, built once when
            the context is made (before the tree is compiled) for an eligible goal, so a
            unit's start only rounds the live arm state into it (:meth:`cache_key`);
            ``None`` for an ineligible goal.
    """

    script: Script
    units: list[Unit]
    mode: Mode
    backend: MotionBackend
    cache: PlanCache
    eligible: bool
    controls: Controls
    events: GoalEvents = field(default_factory=GoalEvents)
    settings: EngineSettings = field(default_factory=EngineSettings)
    wake: Callable[[], None] = lambda: None
    solutions: dict[int, Solution] = field(default_factory=dict)
    unit_key: CacheKey | None = None
    detected: DetectedPose | None = None
    failure: MotionError | None = None
    failed_while_canceling: bool = False
    fault: str | None = None
    finish_reason: FinishReason | None = None
    cancel_message: str = ""
    plan_ahead_enabled: bool = False
    ahead: PlannedAhead | None = None
    key_document: KeyDocument | None = None
    _next_motion: list[Unit | None] | None = field(default=None, repr=False)
    _next_across: list[tuple[Unit, tuple[Step, ...]] | None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        """Build :attr:`key_document` for an eligible goal (compile time, not tick time)."""
        if self.eligible and self.key_document is None:
            self.key_document = KeyDocument.of(self.script)

    @property
    def executes(self) -> bool:
        """True in execute mode (:attr:`Mode.EXECUTE`): plan-ahead runs only then."""
        return self.mode is Mode.EXECUTE

    @property
    def timeouts(self) -> Mapping[str, float]:
        """Per-type timeouts [s], every key of :data:`erobs_bt.timeouts.DEFAULT_TIMEOUTS` (the settings')."""
        return self.settings.timeouts

    @classmethod
    def for_plan(
        cls,
        plan: GoalPlan,
        *,
        mode: Mode,
        backend: MotionBackend,
        cache: PlanCache,
        controls: Controls,
        events: GoalEvents | None = None,
        settings: EngineSettings | None = None,
        wake: Callable[[], None] | None = None,
    ) -> GoalContext:
        """The context of a goal made from its plan: the one way a goal's context is built
        (the orchestrator's goals, :mod:`erobs_bt.compose` subtrees, the ``render`` command).

        Args:
            plan: the goal plan (:func:`erobs_bt.plan.plan_goal`): its script, units and cache
                eligibility.
            mode: execute or preview.
            backend: the motion backend the behaviours call.
            cache: the plan cache shared across goals.
            controls: the pause/resume/cancel/halt requests of the goal.
            events: progress receiver (default: bare :class:`GoalEvents`, which does nothing).
            settings: the engine's options, kept whole (default: :class:`EngineSettings`'s
                defaults with plan-ahead off); its ``plan_ahead`` is taken only in execute
                mode (a preview plans every unit from the live state).
            wake: called when a backend future completes, to tick again (default: nothing).

        Returns:
            The goal's context, its :attr:`key_document` built for an eligible goal.
        """
        settings = settings if settings is not None else _NO_PLAN_AHEAD
        return cls(
            script=plan.script,
            units=list(plan.units),
            mode=mode,
            backend=backend,
            cache=cache,
            eligible=plan.eligible,
            controls=controls,
            events=events if events is not None else GoalEvents(),
            settings=settings,
            wake=wake if wake is not None else _nothing,
            plan_ahead_enabled=settings.plan_ahead and mode is Mode.EXECUTE,
        )

    def cache_key(self, *, model_revision: str, start: Sequence[float] | None) -> CacheKey:
        """The goal's cache key for a model revision and an arm state [rad]: the same key
        as :func:`erobs_bt.cache.make_key` of :attr:`script`, from :attr:`key_document`."""
        if self.key_document is None:
            self.key_document = KeyDocument.of(self.script)
        return self.key_document.key(model_revision=model_revision, start=start)

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
        (docs/script-format.md, "Cache eligibility").
        """
        self.unit_key = None
        if self.eligible and unit.is_motion:
            self.unit_key = self.cache_key(
                model_revision=self.backend.model_revision(), start=self.backend.joint_positions()
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

    # -- plan-ahead ----------------------------------------------------------------------
    # -- plan-ahead (the policy: erobs_bt.tree.plan_ahead) -------------------------------
    def next_motion_unit(self, unit: Unit) -> Unit | None:
        """The motion unit a plan-ahead started during ``unit`` would plan, or ``None``.

        The first motion unit after ``unit`` with only
        :data:`~erobs_bt.tree.plan_ahead.PLAN_AHEAD_TRANSPARENT` units in between; ``None`` at
        the end of the script or when a tool exchange, a vision step (or any other step)
        comes first.
        """
        if self._next_motion is None:
            self._next_motion = plan_ahead.next_motion_units(self.units)
        return self._next_motion[unit.index]

    def next_motion_across(self, unit: Unit) -> tuple[Unit, tuple[Step, ...]] | None:
        """The motion unit a plan-ahead started during ``unit`` would plan when the backend can
        forecast tool exchanges, and the exchange steps between (:mod:`erobs_bt.tree.plan_ahead`).

        As :meth:`next_motion_unit`, but units of :data:`~erobs_bt.tree.plan_ahead.PLAN_AHEAD_ACROSS`
        may lie between too.
        """
        if self._next_across is None:
            self._next_across = plan_ahead.next_motion_across(self.units)
        return self._next_across[unit.index]

    def start_plan_ahead(self, unit: Unit, solution: Solution | None) -> None:
        """Start planning the next motion unit while ``unit`` executes
        (:func:`erobs_bt.tree.plan_ahead.start_plan_ahead`)."""
        plan_ahead.start_plan_ahead(self, unit, solution)

    def plan_ahead_from_final_plan(self, unit: Unit) -> plan_ahead.FinalPlanAhead | None:
        """The plan-ahead a vision step starts from its final motion's plan, or ``None``
        (:func:`erobs_bt.tree.plan_ahead.plan_ahead_from_final_plan`)."""
        return plan_ahead.plan_ahead_from_final_plan(self, unit)

    def adopt_plan_ahead(self, made: PlannedAhead, unit: Unit, how: str) -> None:
        """Make ``made`` the goal's pending plan-ahead
        (:func:`erobs_bt.tree.plan_ahead.adopt_plan_ahead`). Tick thread only."""
        plan_ahead.adopt_plan_ahead(self, made, unit, how)

    def take_plan_ahead(self, unit: Unit) -> Future[Solution] | None:
        """The plan-ahead of ``unit`` if it may be used now, else ``None``: plan afresh
        (:func:`erobs_bt.tree.plan_ahead.take_plan_ahead`)."""
        return plan_ahead.take_plan_ahead(self, unit)

    def drop_plan_ahead(self, reason: str) -> None:
        """Drop the pending plan-ahead, if any (:func:`erobs_bt.tree.plan_ahead.drop_plan_ahead`).
        Idempotent."""
        plan_ahead.drop_plan_ahead(self, reason)

    def planning_timeout_for(self, unit: Unit) -> float:
        """Planning timeout of ``unit`` [s]: ``timeouts["planning"]`` per started block of
        :data:`PLANNING_STEPS_PER_TIMEOUT` steps, so a large batch the limits allow gets the
        time its size needs (a fixed 60 s failed every 5,000-step batch)."""
        blocks = max(1, math.ceil(len(unit.steps) / PLANNING_STEPS_PER_TIMEOUT))
        return self.timeouts["planning"] * blocks

    def timeout_for(self, unit: Unit) -> float:
        """Execution timeout of ``unit`` [s]: the sum of its steps' per-type timeouts
        (:func:`erobs_bt.timeouts.timeout_key` picks each step's)."""
        total = 0.0
        for step in unit.steps:
            total += self.timeouts.get(timeout_key(step), self.timeouts["moveto"])
        return total


#: :meth:`GoalContext.for_plan`'s settings when none are given: the defaults, no plan-ahead.
_NO_PLAN_AHEAD = EngineSettings(plan_ahead=False)


def _nothing() -> None:
    """A wake-up that wakes nobody (a context no orchestrator ticks)."""

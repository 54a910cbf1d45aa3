"""Per-goal shared state handed to every behaviour of a compiled tree.

py_trees' blackboard is process-global; two orchestrators (or two tests) in one
process would see each other's keys. Instead, each goal gets one :class:`GoalContext`
that its behaviours hold a reference to: the backend, the plan cache and the goal's
cache key, the pause/cancel/halt :class:`Controls` shared with the orchestrator, the
:class:`GoalEvents` sink that turns progress into feedback, and the few values
behaviours pass to each other (the planned solution of a unit, the unit's cache key,
the goal's one typed failure and the fault latched by the fault decorator), and the
goal's one pending plan-ahead (:class:`PlannedAhead`).

Plan-ahead (issue 13): while unit ``k`` executes, the next motion unit is planned from
the state unit ``k`` is planned to end in (its solution's final joints and the tool state
its tool commands leave), with the same model revision, so that the robot does not wait
for the planner at the boundary. The rules, all in :meth:`GoalContext.start_plan_ahead`
and :meth:`GoalContext.take_plan_ahead`:

* only in execute mode (a preview plans every unit from the live state, unchanged);
* the planned-ahead unit is the next motion unit; only units that neither move the arm
  nor change the robot model may lie between (``pipettor``, ``pause``), and tool exchanges
  (:data:`PLAN_AHEAD_ACROSS`) when the backend can forecast them (:class:`PlansAcross`:
  the script names the tool, the cell the dock, so the backend plans the exchange's own
  motions from the planned end state and then the unit with the model the exchange will
  leave); never across a vision step (its target is known only at run time): the unit
  after one is planned only once the step has detected its marker and planned its final
  motion, from that plan's end, while the motion executes (:class:`FinalPlanAhead`, with a
  backend that reports that plan, :class:`ReportsFinalPlan`);
* with a slow planner (:class:`PlansChained`, ``plan_ahead_depth`` 2: MoveIt) the motion unit
  after the planned-ahead one is planned too, from its planned end, as soon as its plan is
  made, so a short unit in between does not leave too little time (:meth:`_chain`);
* a unit whose cache key already has an entry (it will replay) is not planned ahead;
* at the unit's start the plan is used only when the model revision is the live one and
  every live joint is within :data:`PLAN_AHEAD_TOLERANCE` of the plan's start (and, for
  an eligible goal, the start gives the same cache key as the live state); otherwise it
  is discarded and the unit plans afresh from the live state, exactly as without
  plan-ahead. A plan-ahead that failed is discarded the same way: the fresh plan's
  result, success or failure, is what the unit reports;
* the cache sees a plan-ahead only through the unit that uses it (stored where that plan
  would have been, under the unit's key), and a goal that ends for any reason (success,
  cancel, failure, stop, shutdown) drops its pending plan-ahead (:meth:`drop_plan_ahead`).
"""

from __future__ import annotations

import enum
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from erobs_bt.backends.base import (
    DetectedPose,
    ErrorCode,
    MotionBackend,
    MotionError,
    PlansAcross,
    PlansChained,
    ReportsFinalPlan,
    Solution,
)
from erobs_bt.batching import Unit
from erobs_bt.cache import CacheKey, KeyDocument, PlanCache, round_start
from erobs_bt.plan import GoalPlan
from erobs_bt.script.model import JointPositions, Script, Step
from erobs_bt.settings import EngineSettings
from erobs_bt.timeouts import PLANNING_STEPS_PER_TIMEOUT, timeout_key

#: [rad] Largest live-state deviation (any joint) from a plan-ahead's start at which the
#: plan is still used (issue 13). The same figure as the controllers' start tolerance
#: (``erobs_bt.backends.sim.controller.DEFAULT_START_TOLERANCE``, the hardware YAML's
#: ``start_tolerance``): a trajectory that starts further away would be rejected anyway.
PLAN_AHEAD_TOLERANCE = 0.01

#: Task types of units a plan-ahead may look across: they neither move the arm nor change
#: the robot model (a ``pause`` waits for the operator; the live-state check at the next
#: unit's start catches an arm jogged meanwhile).
PLAN_AHEAD_TRANSPARENT = frozenset({"pipettor", "pause"})

#: Task types of units a plan-ahead may plan across when the backend forecasts them
#: (:class:`PlansAcross`): a tool exchange ends with the tool the script names attached and
#: the arm out of the dock the cell describes. A vision step never: its end depends on a
#: detection made when it runs.
PLAN_AHEAD_ACROSS = frozenset({"tool_exchange"})


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
class PlannedAhead:
    """The one pending plan-ahead of a goal.

    Attributes:
        unit: the motion unit being planned ahead.
        future: the backend's planning future.
        start: the arm state the plan starts from [rad] (the previous unit's planned end);
            ``None`` across tool exchanges: the solution's ``start_positions`` then.
        model_revision: the model revision it is planned with; ``None`` across tool
            exchanges: the solution's.
        after: index of the unit during whose execution it was started.
        started: ``time.monotonic()`` when it was requested.
        crossed: how many tool exchanges lie between (0: none).
        then: the plan-ahead of the motion unit after this one, planned from this one's
            planned end (depth 2, :class:`PlansChained`), or ``None``; its ``start`` and
            ``model_revision`` are ``None`` (the solution's, checked when it is taken).
    """

    unit: Unit
    future: Future[Solution]
    start: JointPositions | None
    model_revision: str | None
    after: int
    started: float
    crossed: int = 0
    then: PlannedAhead | None = None

    def cancel(self) -> None:
        """Cancel this plan-ahead's future and those chained after it (:attr:`then`)."""
        ahead: PlannedAhead | None = self
        while ahead is not None:
            ahead.future.cancel()
            ahead = ahead.then


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
    def next_motion_unit(self, unit: Unit) -> Unit | None:
        """The motion unit a plan-ahead started during ``unit`` would plan, or ``None``.

        The first motion unit after ``unit`` with only :data:`PLAN_AHEAD_TRANSPARENT` units
        in between; ``None`` at the end of the script or when a tool exchange, a vision step
        (or any other step) comes first.
        """
        if self._next_motion is None:
            self._next_motion = _next_motion_units(self.units)
        return self._next_motion[unit.index]

    def next_motion_across(self, unit: Unit) -> tuple[Unit, tuple[Step, ...]] | None:
        """The motion unit a plan-ahead started during ``unit`` would plan when the backend can
        forecast tool exchanges, and the exchange steps between (module docstring).

        As :meth:`next_motion_unit`, but units of :data:`PLAN_AHEAD_ACROSS` may lie between too.
        """
        if self._next_across is None:
            self._next_across = _next_motion_across(self.units)
        return self._next_across[unit.index]

    def start_plan_ahead(self, unit: Unit, solution: Solution | None) -> None:
        """Start planning the next motion unit while ``unit`` executes (module docstring).

        Args:
            unit: the unit that is about to execute.
            solution: its solution, about to be dispatched (the plan-ahead starts from its
                end state); ``None`` for a unit that does not move the arm, or a tool exchange
                (the plan-ahead starts from the live state). Call it *before* dispatching
                ``solution`` or the step: the backend takes the tool state at this call as the
                one the unit starts in.

        Nothing is started when plan-ahead is off, in preview mode, while the goal is being
        cancelled or halted, with no known arm state, when the next motion unit is already
        being planned ahead, or when it would replay a cached solution.
        """
        if not self.plan_ahead_enabled or self.mode is not Mode.EXECUTE:
            return
        if self.controls.cancel_requested or self.controls.halt is not None:
            return
        across = isinstance(self.backend, PlansAcross)
        own: tuple[Step, ...] = ()
        if solution is None and not all(step.task_type in PLAN_AHEAD_TRANSPARENT for step in unit.steps):
            if not (across and all(step.task_type in PLAN_AHEAD_ACROSS for step in unit.steps)):
                return  # a vision step: its end state is known only when it ends
            own = tuple(unit.steps)  # a tool exchange about to run: plan across it
        found = self.next_motion_across(unit) if across else None
        if found is not None:
            target, between = found
            crossed = own + between
        else:
            next_unit = self.next_motion_unit(unit)
            if next_unit is None:
                return
            target, crossed = next_unit, own
        if self.ahead is not None:
            if self.ahead.unit is target:
                self._chain(self.ahead, unit, solution)
                return
            self.drop_plan_ahead("superseded")
        revision = self.backend.model_revision()
        if solution is not None:
            if solution.model_revision != revision:
                return
            planned_end: tuple[float, ...] | None = solution.final_positions()
        else:
            planned_end = self.backend.joint_positions()
        if planned_end is None or len(planned_end) != 6 or self.backend.joint_positions() is None:
            return  # no known start: the unit's start could not check the live state against it
        a, b, c, d, e, f = (float(x) for x in planned_end)
        start: JointPositions = (a, b, c, d, e, f)
        if self.eligible:
            if crossed:
                return  # an eligible goal is one unit: nothing to cross (never reached)
            key = self.cache_key(model_revision=revision, start=start)
            if key in self.cache:
                return  # the unit will replay: a plan-ahead would be wasted work
        try:
            if crossed:
                assert isinstance(self.backend, PlansAcross)
                future = self.backend.plan_across(crossed, target.steps, start=start, after=solution)
            else:
                future = self.backend.plan(target.steps, start=start, after=solution)
        except Exception as exc:  # the unit plans afresh at its start and reports its own result
            self.events.plan_ahead(target, "discarded", f"could not start: {exc}")
            return
        if crossed:
            self.ahead = PlannedAhead(target, future, None, None, unit.index, time.monotonic(), len(crossed))
            exchanges = f"{len(crossed)} tool exchange{'s' if len(crossed) > 1 else ''}"
            self.events.plan_ahead(target, "started", f"during unit {unit.index + 1}, across {exchanges}")
        else:
            self.ahead = PlannedAhead(target, future, start, revision, unit.index, time.monotonic())
            self.events.plan_ahead(target, "started", f"during unit {unit.index + 1}")
            self._chain(self.ahead, unit, solution)

    def _chain(self, ahead: PlannedAhead, unit: Unit, solution: Solution | None) -> None:
        """Plan-ahead depth 2 (:class:`PlansChained`): also plan the motion unit after
        ``ahead``'s, from ``ahead``'s planned end, while ``unit`` executes, so a short unit
        between does not leave a slow planner too little time.

        Only with a backend that asks for it, for a plan-ahead not planned across tool
        exchanges, when only :data:`PLAN_AHEAD_TRANSPARENT` units lie between, never for an
        eligible goal (one unit). The chained plan is checked like any plan-ahead when its
        unit starts (:meth:`take_plan_ahead`).
        """
        backend = self.backend
        if ahead.then is not None or ahead.crossed or self.eligible:
            return
        if not isinstance(backend, PlansChained) or backend.plan_ahead_depth < 2:
            return
        target = self.next_motion_unit(ahead.unit)
        if target is None:
            return
        try:
            future = backend.plan_chained(ahead.future, target.steps, after=solution)
        except Exception as exc:  # its unit plans afresh at its start
            self.events.plan_ahead(target, "discarded", f"could not start: {exc}")
            return
        ahead.then = PlannedAhead(target, future, None, None, unit.index, time.monotonic())
        self.events.plan_ahead(
            target, "started", f"during unit {unit.index + 1}, after unit {ahead.unit.index + 1}'s plan"
        )

    def plan_ahead_from_final_plan(self, unit: Unit) -> FinalPlanAhead | None:
        """The plan-ahead a vision step starts from its final motion's plan, or ``None``.

        A vision step's end is known only when it runs: once its detection is made and its
        final motion (the approach over the detection and its tail) is planned, the next
        motion unit is planned from that plan's end while the motion executes, with the same
        rules as any plan-ahead (checked against the live state when its unit starts). Only
        with a backend that reports that plan (:class:`ReportsFinalPlan`), in execute mode
        with plan-ahead on, for a unit of one step that is neither transparent nor a tool
        exchange, with only :data:`PLAN_AHEAD_TRANSPARENT` units up to the next motion unit,
        and never for an eligible goal. With :class:`PlansChained` depth 2 the unit after
        that one is planned too. Call on the tick thread, before the step starts.
        """
        if not self.plan_ahead_enabled or self.mode is not Mode.EXECUTE or self.eligible:
            return None
        if self.controls.cancel_requested or self.controls.halt is not None:
            return None
        if not isinstance(self.backend, ReportsFinalPlan) or len(unit.steps) != 1:
            return None
        if unit.steps[0].task_type in PLAN_AHEAD_TRANSPARENT | PLAN_AHEAD_ACROSS or unit.is_motion:
            return None
        target = self.next_motion_unit(unit)
        if target is None:
            return None
        then = None
        backend = self.backend
        if isinstance(backend, PlansChained) and backend.plan_ahead_depth >= 2:
            then = self.next_motion_unit(target)
        return FinalPlanAhead(self, unit, target, then)

    def adopt_plan_ahead(self, made: PlannedAhead, unit: Unit, how: str) -> None:
        """Make ``made`` (started on a backend thread, see :class:`FinalPlanAhead`) the goal's
        pending plan-ahead; dropped at once while the goal is being cancelled or halted.
        Tick thread only."""
        if self.controls.cancel_requested or self.controls.halt is not None or not self.plan_ahead_enabled:
            made.cancel()
            return
        if self.ahead is not None:
            self.drop_plan_ahead("superseded")
        self.ahead = made
        self.events.plan_ahead(made.unit, "started", f"during unit {unit.index + 1}, {how}")
        if made.then is not None:
            self.events.plan_ahead(
                made.then.unit,
                "started",
                f"during unit {unit.index + 1}, after unit {made.unit.index + 1}'s plan",
            )

    def take_plan_ahead(self, unit: Unit) -> Future[Solution] | None:
        """The plan-ahead of ``unit`` if it may be used now, else ``None`` (plan afresh).

        Used only when it is for ``unit``, has not failed, was planned with the live model
        revision, starts within :data:`PLAN_AHEAD_TOLERANCE` of the live arm state on every
        joint and, for an eligible goal, gives the unit's own cache key. Anything else is
        discarded (a plan-ahead for another unit is dropped). The future may still be
        running: the unit then waits only for the rest of it.
        """
        ahead, self.ahead = self.ahead, None
        if ahead is None:
            return None
        if ahead.unit is not unit:
            self.ahead = ahead
            self.drop_plan_ahead(f"unit {unit.index + 1} plans first")
            return None
        # The plan-ahead of the unit after this one (depth 2) stays pending, whatever becomes
        # of this one: it is checked against the live state when its own unit starts.
        self.ahead, ahead.then = ahead.then, None
        future = ahead.future
        if ahead.start is None and not future.done():
            # Planned across tool exchanges and still planning: its start and model are known
            # when it ends; check them then (a failure makes the unit plan afresh).
            checked: Future[Solution] = Future()
            checked.set_running_or_notify_cancel()

            def check(done: Future[Solution]) -> None:
                if done.cancelled():
                    checked.set_exception(MotionError(ErrorCode.PLANNING_FAILED, "cancelled"))
                elif done.exception() is not None:
                    checked.set_exception(done.exception())  # type: ignore[arg-type]
                else:
                    solution = done.result()
                    problem = self._unusable(solution.model_revision, solution.start_positions)
                    if problem:
                        checked.set_exception(MotionError(ErrorCode.PLANNING_FAILED, problem))
                    else:
                        checked.set_result(solution)

            future.add_done_callback(check)
            self.events.plan_ahead(
                unit,
                "used",
                f"requested {time.monotonic() - ahead.started:.3f} s before it was needed, "
                "still planning (checked when done)",
            )
            return checked
        reason = ""
        if future.done() and (future.cancelled() or future.exception() is not None):
            reason = "failed: " + (str(future.exception()) if not future.cancelled() else "cancelled")
        else:
            revision, start = ahead.model_revision, ahead.start
            if start is None:
                solution = future.result()
                revision, start = solution.model_revision, solution.start_positions
            reason = self._unusable(revision, start)
        if reason:
            if not future.done():
                future.cancel()
            self.events.plan_ahead(unit, "discarded", f"{reason}; planning afresh")
            return None
        waited = "" if future.done() else ", still planning"
        self.events.plan_ahead(
            unit, "used", f"requested {time.monotonic() - ahead.started:.3f} s before it was needed{waited}"
        )
        return future

    def _unusable(self, revision: str | None, start: Sequence[float] | None) -> str:
        """Why a plan-ahead planned with ``revision`` from ``start`` [rad] may not be used now
        (``""``: it may): another model revision, a live arm state further than
        :data:`PLAN_AHEAD_TOLERANCE` from ``start``, or another cache key."""
        live_revision = self.backend.model_revision()
        if revision != live_revision:
            return f"model revision is now {live_revision}, planned for {revision}"
        live = self.backend.joint_positions()
        if live is None or len(live) != 6:
            return "the live arm state is unknown"
        if start is None or len(start) != 6:
            return "its start state is unknown"
        deviation = max(abs(float(a) - b) for a, b in zip(live, start, strict=True))
        if deviation > PLAN_AHEAD_TOLERANCE:
            return (
                f"the live arm state is {deviation:.4f} rad from its start "
                f"(tolerance {PLAN_AHEAD_TOLERANCE} rad)"
            )
        if self.unit_key is not None:
            a, b, c, d, e, f = (float(x) for x in start)
            key = self.cache_key(model_revision=revision, start=(a, b, c, d, e, f))
            if key != self.unit_key:
                return "its start gives another cache key than the live state"
        return ""

    def drop_plan_ahead(self, reason: str) -> None:
        """Drop the pending plan-ahead, if any: its future is cancelled (a plan not yet
        started never runs; one that is running finishes on the backend's planner and its
        result is ignored). Idempotent."""
        ahead, self.ahead = self.ahead, None
        while ahead is not None:
            ahead.future.cancel()
            self.events.plan_ahead(ahead.unit, "dropped", reason)
            following, ahead.then = ahead.then, None
            ahead = following

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


class FinalPlanAhead:
    """The plan-ahead a vision step starts from its final motion's plan
    (:meth:`GoalContext.plan_ahead_from_final_plan`).

    The backend calls it (:class:`ReportsFinalPlan`, on its own thread) with that plan before
    the motion is dispatched: the next motion unit's plan is requested then, from the plan's
    end and with the tool state executing it will leave (and, at depth 2, the unit after it,
    :meth:`PlansChained.plan_chained`). The tick thread then adopts it as the goal's pending
    plan-ahead (:meth:`adopt`), or drops it when the step is halted (:meth:`discard`).
    """

    def __init__(self, context: GoalContext, unit: Unit, target: Unit, then: Unit | None) -> None:
        self._context = context
        self._unit = unit
        self._target = target
        self._then = then
        self._lock = threading.Lock()
        self._made: PlannedAhead | None = None

    def __call__(self, solution: Solution) -> None:
        """The step's final motion is planned (``solution``): request the plans (backend thread)."""
        end = solution.final_positions()
        if end is None or len(end) != 6:
            return
        a, b, c, d, e, f = (float(x) for x in end)
        start: JointPositions = (a, b, c, d, e, f)
        backend = self._context.backend
        future = backend.plan(self._target.steps, start=start, after=solution)
        made = PlannedAhead(
            self._target, future, start, solution.model_revision, self._unit.index, time.monotonic()
        )
        if self._then is not None and isinstance(backend, PlansChained):
            chained = backend.plan_chained(future, self._then.steps, after=solution)
            made.then = PlannedAhead(self._then, chained, None, None, self._unit.index, time.monotonic())
        with self._lock:
            self._made = made
        self._context.wake()

    def adopt(self) -> None:
        """Hand a requested plan-ahead to the goal (tick thread; nothing when none is requested)."""
        with self._lock:
            made, self._made = self._made, None
        if made is not None:
            self._context.adopt_plan_ahead(made, self._unit, "from its final motion's plan")

    def discard(self) -> None:
        """Cancel a requested plan-ahead the goal has not adopted (the step was halted)."""
        with self._lock:
            made, self._made = self._made, None
        if made is not None:
            made.cancel()


#: :meth:`GoalContext.for_plan`'s settings when none are given: the defaults, no plan-ahead.
_NO_PLAN_AHEAD = EngineSettings(plan_ahead=False)


def _nothing() -> None:
    """A wake-up that wakes nobody (a context no orchestrator ticks)."""


def _next_motion_across(units: Sequence[Unit]) -> list[tuple[Unit, tuple[Step, ...]] | None]:
    """:meth:`GoalContext.next_motion_across` of every unit, by unit index (one backward pass)."""
    answers: list[tuple[Unit, tuple[Step, ...]] | None] = [None] * len(units)
    following: tuple[Unit, tuple[Step, ...]] | None = None
    for index in range(len(units) - 1, -1, -1):
        answers[index] = following
        later = units[index]
        if later.is_motion:
            following = (later, ())
        elif following is not None and all(step.task_type in PLAN_AHEAD_ACROSS for step in later.steps):
            following = (following[0], tuple(later.steps) + following[1])
        elif not all(step.task_type in PLAN_AHEAD_TRANSPARENT for step in later.steps):
            following = None
    return answers


def _next_motion_units(units: Sequence[Unit]) -> list[Unit | None]:
    """:meth:`GoalContext.next_motion_unit` of every unit, by unit index, in one backward
    pass over the units (asking each unit to scan the ones after it was quadratic in the
    script's length: minutes for 10,000 units of ``SET_LED``)."""
    answers: list[Unit | None] = [None] * len(units)
    following: Unit | None = None  # the answer for the unit before the one looked at
    for index in range(len(units) - 1, -1, -1):
        answers[index] = following
        later = units[index]
        if later.is_motion:
            following = later
        elif not all(step.task_type in PLAN_AHEAD_TRANSPARENT for step in later.steps):
            following = None
    return answers

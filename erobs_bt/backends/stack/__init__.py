"""The motion stack: the one :class:`~erobs_bt.backends.base.MotionBackend`, assembled from parts.

:class:`MotionStack` ties a :class:`~erobs_bt.planning.base.Planner`, an
:class:`~erobs_bt.backends.parts.ArmDriver`, one :class:`~erobs_bt.backends.parts.ToolDriver`
per tool, a :class:`~erobs_bt.backends.parts.ToolChanger` and a
:class:`~erobs_bt.backends.parts.Detector` (:mod:`erobs_bt.backends.parts`) to the cell's
tool bookkeeping (:mod:`erobs_bt.world.tools`), which it keeps on every backend. The
assemblies (``backend: sim``, ``backend: ros2_control``) are in
:mod:`erobs_bt.backends.factory`.

Threads: the tree's tick thread only ever receives futures. Planning runs in one worker
thread (``<name>-plan``), executions and single steps in another (``<name>-action``), and
the arm driver in its own. Tool commands during execution change the live tool state (its
own lock) and tell the planner (:meth:`~erobs_bt.planning.base.Planner.follow`), which
never waits for a plan running ahead (issue 13, plan-ahead): every plan brings the model
to its own tool state anyway. Every public method is thread-safe.

Planning a unit (:meth:`MotionStack.plan`): ``moveto`` and ``end_effector`` steps are
planned as ONE connected sequence from ``start`` (or the live state), carrying the
planned joint and tool state forward from step to step (docs/script-format.md,
"Preview start states"). A plan ahead (``after=``) starts from the tool state that
executing ``after`` from the tool state at the call leaves
(:meth:`MotionStack.predict_tools`). The solution records the model revision it was
planned with; executing a solution planned for another revision fails
(``EXECUTION_FAILED``) instead of moving with the wrong tool model.

Executing: before any trajectory of a solution is sent, fresh or replayed, the arm driver
checks that the live state is at its first point (nothing of the solution runs otherwise,
tool commands ahead of it included). Tool segments are checked against the bookkeeping's
rules, sent to the tool's driver, then recorded. A replay's ``TIMEOUT:`` is reported as
``REPLAY_TIMEOUT:``. Tool exchange, as EROBS does it: the tool voltage is switched off
before the first docking motion, the changer is unlocked in the dock, and after a load the
changer is locked and the tool voltage switched back on, before the arm leaves the dock.

Fault injection (the simulated cell's, :class:`~erobs_bt.backends.parts.FaultInjection`)
has its cut points here: a plan, a dispatch before anything moves, part-way through its
motion (``after_fraction`` of the dispatch's arm motion), at its end.

Start gripper: a goal's ``start_gripper`` is the tool the operator mounted
(:meth:`MotionStack.prepare_goal`): when it differs, the stack mounts it by hand in its
bookkeeping (logged), which changes the model revision, unless a part is held.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from erobs_bt.backends.base import (
    ArmSegment,
    ErrorCode,
    JointStateListener,
    MotionError,
    PlanListener,
    Segment,
    Solution,
    ToolSegment,
    WorldListener,
    as_motion_error,
)
from erobs_bt.backends.parts import (
    ArmDriver,
    Detector,
    FaultInjection,
    InjectedFault,
    ToolChanger,
    ToolDriver,
)
from erobs_bt.backends.vision import run_vision
from erobs_bt.planning.base import Planner, RemotePlanner, SceneKeeper, TrajectoryChecker
from erobs_bt.planning.forecast import forecast_exchanges
from erobs_bt.script.model import (
    EndEffector,
    JointPositions,
    MoveTo,
    Pause,
    Pipettor,
    Step,
    ToolExchange,
    Vision,
)
from erobs_bt.world.cell import CellConfig, Obstacle
from erobs_bt.world.scene import TagObject, World, tag_objects
from erobs_bt.world.tools import (
    DEFAULT_CONTACT_TOLERANCE,
    PipettorState,
    ToolState,
    after_motion,
    gripper_command,
    mount_tool,
    pipettor_command,
    planning_tip,
    resolve_end_effector,
    run_tool_exchange,
)
from erobs_bt.world.vision import detector_markers

_LOG = logging.getLogger(__name__)

#: How many planning-scene revisions the stack remembers the world of (the ones it planned
#: in most recently): a cached solution planned in one of them is scene-checked against only
#: the objects added or moved since (:meth:`MotionStack.check_replay`).
SCENE_HISTORY = 64
#: How many motions of tool-exchange forecasts the stack keeps for the exchanges to use when
#: they run (:meth:`MotionStack.plan_across`); a forecast of two exchanges plans about 16.
FORECAST_PLANS = 64

#: [rad] Largest gap (any joint) between where a move's plan really ends and where the next
#: move, planned concurrently from a prediction (:class:`~erobs_bt.planning.base.RemotePlanner`),
#: starts, at which the two are kept as one connected sequence: a hundredth of the
#: controllers' start tolerance (0.01 rad, MoveIt's ``allowed_start_tolerance``), about
#: 0.05 mm at the tool of a UR5e. A larger gap plans the move again from the real end.
JOIN_TOLERANCE = 1e-4

_T = TypeVar("_T")


@dataclass
class _Dispatch:
    """One execution (a solution, or the motions of a single step) and its injected fault."""

    fault: InjectedFault | None
    stop_generation: int
    fired: bool = False
    cut_placed: bool = False
    on_final_plan: Callable[[Solution], None] | None = None


class MotionStack:
    """A robot behind the :class:`~erobs_bt.backends.base.MotionBackend` protocol, from parts,
    with every optional ability of :data:`erobs_bt.backends.base.ABILITIES` (a ``reset``-less
    assembly refuses :meth:`reset_simulation` in its own words: :attr:`resettable`).

    Args:
        cell: the cell description (:func:`erobs_bt.world.config.load_cell`): the tools'
            bookkeeping, docks, parts, markers.
        planner: plans the ``moveto`` steps.
        arm: plays the trajectories and reports the arm's state.
        tool_drivers: tool name -> its driver, for every tool of the cell.
        changer: the tool changer's voltage and lock.
        detector: finds markers for vision steps.
        tool_state: the tool state at start (:func:`~erobs_bt.world.tools.initial_tool_state`).
        faults: fault injection, or ``None``.
        contact_tolerance: [m] TCP-to-part distance that counts as touching.
        publishes_joint_states: True when the robot's own driver publishes ``/joint_states``.
        name: prefix of the worker threads' names (``sim`` -> ``sim-plan``, ``sim-action``).
        label: what the stack is, for messages (``simulated cell``).
        on_close: called in order after the workers and the arm driver shut down
            (e.g. closing a ROS link).
        reset: puts a simulated cell's hardware back as it started (the arm at the cell's
            initial joint state, the tools' outputs) and returns the cell's initial tool
            state (:meth:`reset_simulation`); ``None``: the stack drives no simulation and
            refuses a reset.
    """

    def __init__(
        self,
        cell: CellConfig,
        *,
        planner: Planner,
        arm: ArmDriver,
        tool_drivers: Mapping[str, ToolDriver],
        changer: ToolChanger,
        detector: Detector,
        tool_state: ToolState,
        faults: FaultInjection | None = None,
        contact_tolerance: float = DEFAULT_CONTACT_TOLERANCE,
        publishes_joint_states: bool = False,
        name: str = "sim",
        label: str = "simulated cell",
        on_close: Sequence[Callable[[], None]] = (),
        reset: Callable[[], ToolState] | None = None,
    ) -> None:
        self._cell = cell
        self._reset = reset
        self._planner = planner
        self._arm = arm
        self._tool_drivers = dict(tool_drivers)
        self._changer = changer
        self._detector = detector
        self._faults = faults
        self._contact_tolerance = float(contact_tolerance)
        self._publishes = bool(publishes_joint_states)
        self._label = label
        self._on_close = tuple(on_close)
        self._state_lock = threading.Lock()
        self._scene_history: OrderedDict[str, tuple[Obstacle, ...]] = OrderedDict()
        self._tools_memo: tuple[Solution, ToolState, list[ToolState]] | None = None
        # Motions the tool-exchange forecasts planned: (step, start, tool state, world
        # revision, segment), newest last (see plan_across).
        self._forecast_plans: deque[tuple[MoveTo, tuple[float, ...], ToolState, str, ArmSegment]] = deque(
            maxlen=FORECAST_PLANS
        )
        self._tools = tool_state
        self._revision: tuple[ToolState | None, str] = (None, "")  # see model_revision()
        self._cup_override: str | None = None  # see set_cup_override()
        self._world = World.of(cell.obstacles, where=f"{cell.source or 'cell'}: obstacles")
        self._tag_objects = tag_objects(cell)
        self._placed: dict[str, Obstacle] = {}  # tag objects put into a SceneKeeper's scene
        self._world_listeners: list[WorldListener] = []
        self._plan_listeners: list[PlanListener] = []
        self._detectors = detector_markers(cell)
        self._tag_cache: dict[int, NDArray[np.float64]] = {}
        # A tool exchange in progress (action thread only): its operation, and whether the
        # tool voltage was cut and the changer switched (the tool-changer hooks).
        self._exchange: str | None = None
        self._voltage_cut = False
        self._changer_moved = False
        self._stop_generation = 0
        self._motion_lock = threading.Lock()  # stop() vs. starting a trajectory
        self._plan_pool = _Worker(f"{name}-plan")
        self._name = name
        #: Moves of concurrently planned units: ``joined`` (kept), ``replanned`` (their predicted
        #: start missed the previous move's real end; planned again in order).
        self.speculation = {"joined": 0, "replanned": 0}
        #: Motions a running step took from a tool-exchange forecast instead of planning them.
        self.forecast_plans_used = 0
        self._action_pool = _Worker(f"{name}-action")
        self._closed = False

    # -- MotionBackend ---------------------------------------------------------------------
    def joint_positions(self) -> JointPositions | None:
        """The live arm state [rad], or ``None`` when the arm driver knows none (a stale stream)."""
        try:
            return self._arm.joint_positions()
        except RuntimeError:
            return None

    def current_gripper(self) -> str:
        """The attached tool."""
        with self._state_lock:
            return self._tools.gripper

    def dock_contents(self) -> Mapping[int, str | None]:
        """What each dock holds now (the live tool state's ``docks``; ``None``: empty)."""
        with self._state_lock:
            return self._tools.docks

    def model_revision(self) -> str:
        """``<prefix>__<gripper>[__<cup_profile>]`` of the attached tool (from configuration only).

        Built once per tool state (a :class:`ToolState` is immutable, every change is a new
        object): every unit's cache key reads it.
        """
        with self._state_lock:
            tools = self._tools
            known, revision = self._revision
            if known is not tools:
                revision = self._planner.model_revision(tools)
                self._revision = (tools, revision)
            return revision

    def world_obstacles(self) -> tuple[Obstacle, ...]:
        """The obstacles the next plan avoids: the cell's plus those added at run time, in
        ``base_link``, sorted by name. With a planner that keeps its own scene (``backend:
        moveit``) these are the cell's obstacles as configured; move_group's scene may hold
        more (read it with ``get_planning_scene``)."""
        with self._state_lock:
            return self._world.obstacles

    def scene_revision(self) -> str:
        """The revision of :meth:`world_obstacles` (:func:`erobs_bt.world.scene.scene_revision`:
        12 hex digits; the same obstacles, in any order, give the same revision)."""
        with self._state_lock:
            return self._world.revision

    def world(self) -> World:
        """The current planning-scene world (obstacles and revision, one snapshot)."""
        with self._state_lock:
            return self._world

    def set_world_obstacles(self, obstacles: Sequence[Obstacle]) -> str:
        """Replace the planning scene's world from the next plan on.

        A plan already asked for (:meth:`plan`, a tool exchange's or vision step's motions
        already started) keeps the world it started with, and a motion in flight is not
        touched: only plans asked for after this call avoid the new obstacles.

        Args:
            obstacles: the whole world (the cell's obstacles too, when they are to stay), in
                ``base_link`` or ``base``.

        Returns:
            The new scene revision (:meth:`scene_revision`).

        Raises:
            ValueError: the planner keeps its own planning scene (``backend: moveit``: change
                move_group's), or the obstacles are malformed (a name used twice, a robot
                link's name, another frame); nothing changes.
        """
        owner = self._planner.scene_owner
        if owner is not None:
            raise ValueError(
                f"{self._label}: the planning scene belongs to {owner}; change it there "
                "(its collision_object, planning_scene and apply_planning_scene)"
            )
        return self._replace_world(World.of(obstacles, where="set_world_obstacles"), "set_world_obstacles")

    def add_world_listener(self, listener: WorldListener) -> None:
        """Call ``listener(world, source)`` after every change of the world (a
        :meth:`set_world_obstacles`, source ``set_world_obstacles``, or a detected tag's
        collision object, source ``tag <id>``), from the thread that made it."""
        with self._state_lock:
            self._world_listeners.append(listener)

    def add_plan_listener(self, listener: PlanListener) -> None:
        """Call ``listener(steps, planned, moves)`` as a unit's plan progresses: after each of
        its moves is planned (in step order; moves planned side by side are reported as they
        are joined), from the planning thread, before the plan's future completes. ``steps``
        is the tuple given to :meth:`plan` (its elements are the unit's own steps). A slow
        planner (move_group: one request per move) is then seen move by move."""
        with self._state_lock:
            self._plan_listeners.append(listener)

    def remove_world_listener(self, listener: WorldListener) -> None:
        """Stop calling ``listener`` (no error when it was not added)."""
        with self._state_lock:
            if listener in self._world_listeners:
                self._world_listeners.remove(listener)

    @property
    def tag_objects(self) -> Mapping[int, TagObject]:
        """The cell's tag-mapped collision objects by tag id (:func:`erobs_bt.world.scene.tag_objects`)."""
        return self._tag_objects

    def _replace_world(self, world: World, source: str) -> str:
        with self._state_lock:
            previous = self._world
            self._world = world
            listeners = tuple(self._world_listeners)
        if world.revision != previous.revision:
            added = sorted(set(world.names) - set(previous.names))
            removed = sorted(set(previous.names) - set(world.names))
            _LOG.info(
                "planning scene %s -> %s by %s (added %s, removed %s)",
                previous.revision,
                world.revision,
                source,
                ", ".join(added) or "none",
                ", ".join(removed) or "none",
            )
            for listener in listeners:
                try:
                    listener(world, source)
                except Exception:  # a listener never fails the change
                    _LOG.exception("world listener failed")
        return world.revision

    def _detected(self, marker_id: int, T_base_link_marker: NDArray[np.float64]) -> None:
        """A vision step saw ``marker_id``: a tag the cell maps to a collision object puts the
        object into the planning scene at the detection (replacing its previous placement), as
        EROBS does; the next plan avoids it. With a planner that keeps its own scene
        (:class:`~erobs_bt.planning.base.SceneKeeper`: move_group) the object goes into that
        scene, once per new placement; the stack's world stays the cell's.

        Raises:
            MotionError: ``EXECUTION_FAILED: tag <id>: …`` when the planner's scene refuses the
                object (the vision step fails before it moves on what it saw).
        """
        mapped = self._tag_objects.get(marker_id)
        if mapped is None:
            return
        obstacle = mapped.obstacle(T_base_link_marker)
        owner = self._planner.scene_owner
        if owner is not None:
            if not isinstance(self._planner, SceneKeeper):
                _LOG.warning(
                    "tag %d: collision object %s not added: the planning scene belongs to %s",
                    marker_id,
                    mapped.name,
                    owner,
                )
                return
            with self._state_lock:
                if self._placed.get(obstacle.name) == obstacle:
                    return
            self._planner.put_object(obstacle, where=f"tag {marker_id}: collision object {obstacle.name}")
            with self._state_lock:
                self._placed[obstacle.name] = obstacle
            _LOG.info(
                "tag %d: collision object %s put into %s's planning scene at %s m",
                marker_id,
                obstacle.name,
                owner,
                [round(v, 4) for v in obstacle.pose.xyz],
            )
            return
        with self._state_lock:
            current = self._world
        others = [o for o in current.obstacles if o.name != obstacle.name]
        self._replace_world(World.of([*others, obstacle], where=f"tag {marker_id}"), f"tag {marker_id}")

    def prepare_goal(self, start_gripper: str) -> None:
        """Mount the script's ``start_gripper`` by hand when another tool is attached.

        Raises:
            MotionError: ``EXECUTION_FAILED`` for an unknown gripper, a held part, or an arm
                that is moving.
        """
        with self._state_lock:
            state = self._tools
        if start_gripper != state.gripper:
            if self._arm.is_busy():
                raise MotionError(
                    ErrorCode.EXECUTION_FAILED, f"cannot mount {start_gripper}: the arm is moving"
                )
            state = mount_tool(self._cell, state, start_gripper)
            _LOG.info(
                "start_gripper %s: the operator mounted it in place of %s", start_gripper, state.gripper
            )
            self._set_tool_state(state)
        if self._cell.gripper(state.gripper).cup_profiles:
            wanted = (
                self.cup_profile_for(state.gripper) or self._cell.gripper(state.gripper).default_cup_profile
            )
            if wanted is not None and wanted != state.cup_profile:
                _LOG.info("%s: suction cup %s fitted (was %s)", state.gripper, wanted, state.cup_profile)
                self.set_cup_profile(wanted)

    def plan(
        self,
        steps: Sequence[Step],
        *,
        start: JointPositions | None = None,
        after: Solution | None = None,
        crossed: Sequence[Step] = (),
    ) -> Future[Solution]:
        """Plan a unit's ``moveto``/``end_effector`` steps as one connected sequence.

        Args:
            steps: the unit's steps, in order.
            start: the arm state to plan from [rad]; ``None``: the live state.
            after: plan ahead of this solution's execution: the tool state starts as
                :meth:`predict_tools` says executing it from the tool state *now* leaves
                it (call before dispatching it). ``None``: from the live tool state.
            crossed: ``tool_exchange`` steps that run before ``steps`` (:meth:`plan_across`).

        Returns:
            A future resolving to the :class:`Solution` (arm segments and tool segments
            in step order), or failing with ``PLANNING_FAILED:``. Cancelled before the
            planner thread reaches it, it never runs.
        """
        self._check_open()
        steps = tuple(steps)
        crossed = tuple(crossed)
        fault = self._faults.on_plan(steps) if self._faults is not None else None
        with self._state_lock:
            base = self._tools
            world = self._world  # the plan keeps the world of this call
        if after is not None:
            revision = self._planner.model_revision(base)
            if after.model_revision != revision:
                failed: Future[Solution] = Future()
                failed.set_exception(
                    MotionError(
                        ErrorCode.PLANNING_FAILED,
                        f"cannot plan ahead of a solution for model revision {after.model_revision} "
                        f"with {revision} attached",
                    )
                )
                return failed

        def job() -> Solution:
            if fault is not None:
                _wait(fault.delay)
                raise fault.error
            tools = self.predict_tools(base, after) if after is not None else None
            if crossed:
                q, tools = forecast_exchanges(
                    self._cell,
                    self._planner,
                    crossed,
                    start if start is not None else self._arm.joint_positions(),
                    tools if tools is not None else base,
                    cup_profile_for=self.cup_profile_for,
                    contact_tolerance=self._contact_tolerance,
                    world=world,
                    on_plan=functools.partial(self._keep_forecast, world),
                )
                a, b, c, d, e, f = q
                return self._plan_now(steps, (a, b, c, d, e, f), tools=tools, world=world)
            return self._plan_now(steps, start, tools=tools, world=world)

        return self._submit(self._plan_pool, job, ErrorCode.PLANNING_FAILED, cancellable=True)

    def plan_across(
        self,
        crossed: Sequence[Step],
        steps: Sequence[Step],
        *,
        start: JointPositions,
        after: Solution | None = None,
    ) -> Future[Solution]:
        """Plan a unit ahead of the tool exchanges before it (plan-ahead across them, issue 24;
        :class:`erobs_bt.backends.base.PlansAcross`).

        The exchanges are forecast first (:func:`erobs_bt.planning.forecast.forecast_exchanges`:
        their motions planned from ``start`` [rad] with the tool state :meth:`plan` would start
        from, their bookkeeping applied, nothing moves); ``steps`` are then planned from the
        state they leave, with the model they leave. The solution's ``start_positions`` is the
        forecast arm state, its ``model_revision`` the forecast model's.

        The exchanges' own motions are kept (the last :data:`FORECAST_PLANS`): when an exchange
        runs and reaches one of them from exactly the start it was forecast from, with the same
        tool state, in the same world, it plays the forecast's plan instead of planning it
        again (the planner plans a motion from those inputs alone, so it would plan the same
        one), and the arm does not stand still for it.

        Returns:
            As :meth:`plan`.
        """
        return self.plan(steps, start=start, after=after, crossed=crossed)

    @property
    def plan_ahead_depth(self) -> int:
        """How many motion units the engine plans ahead while one executes: the planner's
        :attr:`~erobs_bt.planning.base.RemotePlanner.plan_ahead_depth` for a slow remote
        planner, else 1 (the embedded planner plans a unit in milliseconds)."""
        planner = self._planner
        return max(1, int(planner.plan_ahead_depth)) if isinstance(planner, RemotePlanner) else 1

    def plan_chained(
        self, first: Future[Solution], steps: Sequence[Step], *, after: Solution | None = None
    ) -> Future[Solution]:
        """Plan a unit ahead of a unit that is itself still being planned ahead (plan-ahead
        depth 2, :class:`erobs_bt.backends.base.PlansChained`).

        Args:
            first: the future of the earlier unit's plan; ``steps`` are planned from the end of
                the solution it resolves to, once it does.
            steps: the later unit's steps.
            after: the solution about to be dispatched now, before the earlier unit (``None``:
                none). The tool state is the live one now, then what executing ``after`` and
                the earlier unit's solution leave (:meth:`predict_tools`).

        Returns:
            A future of the later unit's solution, pending until its plan starts (cancelling it
            before then skips the plan); it fails with ``PLANNING_FAILED`` when ``first``
            fails or is cancelled.
        """
        self._check_open()
        steps = tuple(steps)
        with self._state_lock:
            base = self._tools
        chained: Future[Solution] = Future()

        def when_planned(done: Future[Solution]) -> None:
            if chained.done():
                return  # dropped meanwhile
            if done.cancelled() or done.exception() is not None:
                reason = "cancelled" if done.cancelled() else str(done.exception())
                if chained.set_running_or_notify_cancel():
                    chained.set_exception(
                        MotionError(
                            ErrorCode.PLANNING_FAILED, f"the unit before it was not planned: {reason}"
                        )
                    )
                return
            before = done.result()
            fault = self._faults.on_plan(steps) if self._faults is not None else None

            def job() -> Solution:
                if fault is not None:
                    _wait(fault.delay)
                    raise fault.error
                tools = self.predict_tools(base, after) if after is not None else base
                tools = self.predict_tools(tools, before)
                end = before.final_positions()
                a, b, c, d, e, f = (
                    float(x) for x in (end if end is not None else self._arm.joint_positions())
                )
                return self._plan_now(steps, (a, b, c, d, e, f), tools=tools)

            try:
                self._submit(self._plan_pool, job, ErrorCode.PLANNING_FAILED, cancellable=True, into=chained)
            except RuntimeError as exc:  # closed meanwhile
                if chained.set_running_or_notify_cancel():
                    chained.set_exception(MotionError(ErrorCode.PLANNING_FAILED, str(exc)))

        first.add_done_callback(when_planned)
        return chained

    def predict_tools(self, state: ToolState, solution: Solution) -> ToolState:
        """The tool state that executing ``solution`` from ``state`` leaves (nothing moves).

        The effects :meth:`execute` applies, in order: an arm segment's end
        (:func:`~erobs_bt.world.tools.after_motion`: a pipettor picks up a tip it
        touches) and a tool segment's command (a ``vacuum_on`` picks up the part under
        the cup). The same functions as planning and execution, so the three agree.

        Raises:
            MotionError: a tool command the bookkeeping refuses (the plan then fails and the
                unit plans afresh when it starts).
        """
        start = solution.start_positions
        q: tuple[float, ...] = tuple(start if start is not None else self._arm.joint_positions())
        for segment in solution.segments:
            if isinstance(segment, ArmSegment):
                if segment.points:
                    q = segment.points[-1].positions
                    state = self._after_move(state, q)
            else:
                state = self._after_tool(state, segment, q, f"step {segment.step_index}")
        return state

    def _after_move(self, state: ToolState, q: Sequence[float]) -> ToolState:
        """The tool state once the arm reaches ``q`` [rad] (:func:`~erobs_bt.world.tools.after_motion`
        with the stack's contact tolerance: a pipettor picks up a tip it touches)."""
        return after_motion(self._cell, state, q, contact_tolerance=self._contact_tolerance)

    def _after_tool(self, state: ToolState, tool: ToolSegment, q: Sequence[float], where: str) -> ToolState:
        """The tool state after ``tool``'s command with the arm at ``q`` [rad]
        (:func:`~erobs_bt.world.tools.gripper_command` with the stack's contact tolerance).

        Raises:
            MotionError: the bookkeeping refuses the command (``where`` names the step).
        """
        state, _ = gripper_command(
            self._cell,
            state,
            tool.gripper,
            tool.command,
            q,
            contact_tolerance=self._contact_tolerance,
            where=where,
        )
        return state

    @property
    def checks_replay(self) -> bool:
        """True when :meth:`check_replay` can check a trajectory here: the planner checks
        trajectories in its own world (the embedded planner; not MoveIt, whose scene lives
        in move_group)."""
        return isinstance(self._planner, TrajectoryChecker)

    def check_replay(self, solution: Solution, steps: Sequence[Step]) -> str | None:
        """Check a cached solution densely against the planning scene as it is now, before a
        replay sends it (the opt-in ``replay_scene_check``; the specification's replay runs no
        collision pass otherwise).

        Every arm segment is checked by the planner (:meth:`TrajectoryChecker.check_trajectory`:
        the same allowed-contact rules as planning) with the tool state it would run with: the
        live tool state carried through the solution as :meth:`predict_tools` carries it (a
        part picked up by a ``vacuum_on`` is checked with the arm from there). When the stack
        remembers the world the solution was planned in (its ``scene_revision``, one of the
        last :data:`SCENE_HISTORY` revisions it planned in), only the objects added or moved
        since are checked (a removed object cannot make a motion collide; the rest was checked
        when it was planned), else every check of planning against the whole world. Runs in
        the caller's thread; nothing moves.

        Args:
            solution: the cached solution.
            steps: the unit's steps (an arm segment's ``step_index`` names one of them).

        Returns:
            ``None`` when the whole solution is valid now, else what is wrong, naming the step.

        Raises:
            ValueError: the planner cannot check trajectories (:attr:`checks_replay` is false),
                or a segment names a step that is not a ``moveto`` of ``steps``.
        """
        planner = self._planner
        if not isinstance(planner, TrajectoryChecker):
            raise ValueError(
                f"the {type(planner).__name__} planner cannot check a stored trajectory against the "
                "planning scene (replay_scene_check needs the embedded planner)"
            )
        by_index = {step.index: step for step in steps}
        with self._state_lock:
            state = self._tools
            world = self._world
        only = self._added_since(solution.scene_revision, world)
        if only is not None and not only:
            return None  # objects were only removed since it was planned
        tools = self._tools_along(solution, state)
        if isinstance(tools, str):
            return tools
        for segment, before in zip(solution.segments, tools, strict=True):
            if isinstance(segment, ArmSegment):
                step = by_index.get(segment.step_index)
                if not isinstance(step, MoveTo):
                    raise ValueError(f"segment of step {segment.step_index} is not a moveto of this unit")
                problem = planner.check_trajectory(step, segment.points, tools=before, world=world, only=only)
                if problem is not None:
                    return problem
        return None

    def _tools_along(self, solution: Solution, state: ToolState) -> list[ToolState] | str:
        """The tool state at the start of each of ``solution``'s segments when it runs from
        ``state`` (carried as :meth:`predict_tools` carries it), or why the bookkeeping refuses
        a tool command. The last answer is kept: a solution replayed again from the same
        tool state is not carried through again."""
        with self._state_lock:
            memo = self._tools_memo
        if memo is not None and memo[0] is solution and memo[1] == state:
            return memo[2]
        start = solution.start_positions
        q: tuple[float, ...] = tuple(start if start is not None else self._arm.joint_positions())
        along: list[ToolState] = []
        current = state
        for segment in solution.segments:
            along.append(current)
            if isinstance(segment, ArmSegment):
                if segment.points:
                    q = segment.points[-1].positions
                    current = self._after_move(current, q)
            else:
                try:
                    current = self._after_tool(current, segment, q, f"step {segment.step_index}")
                except MotionError as exc:
                    return exc.detail
        with self._state_lock:
            self._tools_memo = (solution, state, along)
        return along

    def _added_since(self, revision: str | None, world: World) -> tuple[Obstacle, ...] | None:
        """The objects of ``world`` that were not in the world of scene ``revision`` (added,
        or moved: a moved object differs from its old self); ``None`` when that world is not
        remembered."""
        with self._state_lock:
            then = self._scene_history.get(revision) if revision is not None else None
        if then is None:
            return None
        before = set(then)
        return tuple(obstacle for obstacle in world.obstacles if obstacle not in before)

    def _remember_world(self, world: World) -> str:
        """Remember ``world`` (a plan is made in it) among the last :data:`SCENE_HISTORY` for
        :meth:`check_replay`; returns its revision, the one the solution records."""
        with self._state_lock:
            history = self._scene_history
            history[world.revision] = world.obstacles
            history.move_to_end(world.revision)
            while len(history) > SCENE_HISTORY:
                history.popitem(last=False)
        return world.revision

    def execute(self, solution: Solution, *, replay: bool) -> Future[None]:
        """Play a solution: arm segments on the arm driver, tool segments on the tools, in order.

        Args:
            solution: from :meth:`plan` or the plan cache.
            replay: ``True`` for a cached solution (a ``TIMEOUT:`` becomes ``REPLAY_TIMEOUT:``).

        Returns:
            A future completing when the last segment has finished, or failing with
            ``EXECUTION_FAILED:`` (start-state deviation, model revision mismatch, tool
            mismatch, stop), ``TIMEOUT:``/``REPLAY_TIMEOUT:`` or an injected error.
        """
        self._check_open()
        kind = "replay" if replay else "execute"
        dispatch = self._dispatch(
            kind,
            replay=replay,
            step_types=(),
            step_indices=lambda: sorted({s.step_index for s in solution.segments}),
        )

        def job() -> None:
            try:
                self._before_motion(dispatch)
                if solution.model_revision != self.model_revision():
                    raise MotionError(
                        ErrorCode.EXECUTION_FAILED,
                        f"solution planned for model revision {solution.model_revision}, "
                        f"the robot model is {self.model_revision()}",
                    )
                # Refuse a solution that does not start here before anything of it runs, tool
                # commands ahead of its first trajectory included.
                first = next((s for s in solution.segments if isinstance(s, ArmSegment)), None)
                if first is not None and first.points:
                    self._arm.check_start(first.points[0].positions, first.step_index)
                self._play(solution.segments, dispatch)
                self._after_dispatch(dispatch)
            except MotionError as exc:
                injected = dispatch.fault is not None and exc is dispatch.fault.error
                if replay and exc.code is ErrorCode.TIMEOUT and not injected:
                    raise MotionError(ErrorCode.REPLAY_TIMEOUT, exc.detail) from exc
                raise

        return self._submit(self._action_pool, job, ErrorCode.EXECUTION_FAILED)

    def run_step(self, step: Step) -> Future[str]:
        """Run one non-batched step: ``tool_exchange``, ``pipettor`` or a vision-family step.

        ``moveto``/``end_effector`` are planned and executed on the spot; ``pause`` is a
        no-op here (the tree waits for Resume).

        Returns:
            A future resolving to a status message, or failing with a :class:`MotionError`.
        """
        return self.run_step_reporting(step, on_final_plan=None)

    def run_step_reporting(
        self, step: Step, *, on_final_plan: Callable[[Solution], None] | None
    ) -> Future[str]:
        """:meth:`run_step`, reporting the plan of the step's final motion
        (:class:`erobs_bt.backends.base.ReportsFinalPlan`).

        Args:
            step: the step.
            on_final_plan: called on the action thread with the plan of a vision step's final
                motion (the approach over the detection and its tail, after which the arm does
                not move again in the step), after it is planned and before it is dispatched:
                the end of a vision step is known only then. Not called for a step that does
                not move at its end (a pipettor step, ``detect_only``, ``vision_scan``, a tool
                exchange). Its exceptions are logged and ignored.

        Returns:
            As :meth:`run_step`.
        """
        self._check_open()
        dispatch = self._dispatch(
            "run_step", replay=False, step_types=(step.task_type, step.script_type), step_indices=[step.index]
        )
        dispatch.on_final_plan = on_final_plan

        def job() -> str:
            self._before_motion(dispatch)
            message = self._run_step_now(step, dispatch)
            self._after_dispatch(dispatch)
            return message

        return self._submit(self._action_pool, job, ErrorCode.EXECUTION_FAILED)

    def stop(self) -> None:
        """Ramp the arm down and drop the trajectory; cancel the tools' commands in flight;
        pending segments of the dispatch are dropped.

        Non-blocking and idempotent. Every dispatch started before the stop fails with
        ``EXECUTION_FAILED: stopped by request`` at its next segment; the check and the
        start of a trajectory are atomic with respect to this call, so a segment cannot
        slip onto the arm just after a stop.
        """
        with self._motion_lock:
            with self._state_lock:
                self._stop_generation += 1
            self._arm.stop()
        for driver in self._tool_drivers.values():
            driver.stop()

    # -- extras ----------------------------------------------------------------------------
    @property
    def cell(self) -> CellConfig:
        """The cell description."""
        return self._cell

    @property
    def planner(self) -> Planner:
        """The planner."""
        return self._planner

    @property
    def arm(self) -> ArmDriver:
        """The arm driver."""
        return self._arm

    @property
    def detector(self) -> Detector:
        """The marker detector of vision steps."""
        return self._detector

    @property
    def publishes_joint_states(self) -> bool:
        """True when the robot's own driver publishes ``/joint_states`` (ros2_control); False for
        the embedded cell, whose joint states exist only in this process."""
        return self._publishes

    @property
    def faults(self) -> FaultInjection | None:
        """The fault injection (the simulated cell's lists what fired), or ``None``."""
        return self._faults

    @property
    def model_reloads(self) -> int:
        """How often the planner reloaded the robot model because its revision changed.

        A reload happens when a plan first needs the new tool: a tool mounted and nothing
        planned since is not counted yet.
        """
        return self._planner.model_reloads

    def add_joint_state_listener(self, listener: JointStateListener, *, rate: float | None = None) -> bool:
        """Call ``listener(names, positions, velocities)`` with joint states (for ``/joint_states``).

        Args:
            listener: the callback.
            rate: [Hz] notifications per wall second while moving (default: the arm
                driver's state rate), on the driver's own clock.

        Returns:
            True (the arm driver notifies, and after every trajectory).
        """
        self._arm.add_listener(listener, rate=rate)
        return True

    def remove_joint_state_listener(self, listener: JointStateListener) -> None:
        """Stop calling ``listener``."""
        self._arm.remove_listener(listener)

    def tool_state(self) -> ToolState:
        """The live tool state (attached tool, held part, parts, pipettor, docks)."""
        with self._state_lock:
            return self._tools

    def pipettor_state(self) -> PipettorState:
        """The pipettor's bookkeeping (tip, aspirated volume, LED)."""
        with self._state_lock:
            return self._tools.pipettor

    def cup_profiles(self) -> tuple[str, ...]:
        """Every suction-cup profile of the cell's vacuum grippers, sorted."""
        return tuple(sorted({name for g in self._cell.grippers.values() for name in g.cup_profiles}))

    def set_cup_override(self, cup_profile: str) -> None:
        """The suction cup to fit on a vacuum gripper at each goal's start (EROBS's
        ``cup_profile`` parameter); ``""``: the gripper's default profile from the cell.

        Takes effect at the next :meth:`prepare_goal` (the goal's start, as EROBS applies
        it when it starts the goal's MoveIt) and whenever a ``tool_exchange`` loads a
        vacuum gripper, so a running goal's model never changes under a planned motion; the
        model revision (``<prefix>__epick__<cup_profile>``) changes with it.

        Raises:
            ValueError: ``Unknown cup profile: <name> (available: …)`` when no gripper of
                the cell has that profile.
        """
        available = self.cup_profiles()
        if cup_profile and cup_profile not in available:
            raise ValueError(
                f"Unknown cup profile: {cup_profile} (available: {', '.join(available) or 'none'})"
            )
        with self._state_lock:
            self._cup_override = cup_profile or None

    def cup_profile_for(self, gripper: str) -> str | None:
        """The cup :meth:`set_cup_override` asks for, when ``gripper`` has that profile; else
        ``None`` (its default). Fitted at a goal's start and when a ``tool_exchange`` loads it."""
        with self._state_lock:
            override = self._cup_override
        return override if override in self._cell.gripper(gripper).cup_profiles else None

    def set_cup_profile(self, cup_profile: str) -> None:
        """Fit another suction cup on the attached vacuum gripper (changes the model revision).

        Raises:
            MotionError: ``EXECUTION_FAILED`` when the attached tool has no such cup profile.
        """
        with self._state_lock:
            state = self._tools
        try:
            cup = self._cell.gripper(state.gripper).cup(cup_profile)
        except ValueError as exc:
            raise MotionError(ErrorCode.EXECUTION_FAILED, str(exc)) from None
        if cup is None:
            raise MotionError(ErrorCode.EXECUTION_FAILED, f"the {state.gripper} has no cup profiles")
        self._set_tool_state(replace(state, cup_profile=cup.name))

    @property
    def resettable(self) -> bool:
        """True when :meth:`reset_simulation` can reset this stack (a simulation it runs)."""
        return self._reset is not None

    def reset_simulation(self) -> str:
        """Put the simulated cell back in its initial state (``~/reset_simulation``).

        The arm is placed at rest at the cell config's initial joint state, the tools are
        as the cell config starts them (:func:`~erobs_bt.world.tools.initial_tool_state`:
        the start tool attached, the others in their docks, no part held, the parts where
        the ``parts:`` section puts them, the pipettor's tip and volume from ``pipettor:``)
        and the planner follows the new tool state. The cup override
        (:meth:`set_cup_override`), the fault injection and the plan cache are kept.

        The caller makes sure no goal runs (:meth:`erobs_bt.orchestrator.Orchestrator.reset_simulation`).

        Returns:
            What the cell is now, for people (``epick attached; docks 1: hande, ...``).

        Raises:
            MotionError: ``EXECUTION_FAILED`` when the stack drives no simulation (a real or
                external robot: the message says so), when the arm is moving, or after
                :meth:`close`.
        """
        self._check_open()
        if self._reset is None:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"the {self._label} is not a simulation this engine runs: nothing to reset "
                "(put the cell back by hand, or restart the simulator that drives it)",
            )
        with self._motion_lock:
            if self._arm.is_busy():
                raise MotionError(
                    ErrorCode.EXECUTION_FAILED, "cannot reset the simulation: the arm is moving"
                )
            state = self._reset()
            with self._state_lock:
                self._tools = state
        self._planner.follow(state)
        docks = ", ".join(f"{n}: {tool or 'empty'}" for n, tool in sorted(state.docks.items()))
        pipettor = state.pipettor
        return (
            f"{state.gripper} attached; docks {docks or 'none'}; no part held; pipettor "
            f"{'with' if pipettor.tip else 'without'} tip, {pipettor.volume * pipettor.stroke_ul:g} µL"
        )

    def close(self) -> None:
        """Stop the arm and the tools, shut the workers and the arm driver down, then run the
        ``on_close`` calls. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.stop()
        self._plan_pool.shutdown()
        self._action_pool.shutdown()
        self._arm.shutdown()
        for driver in self._tool_drivers.values():
            driver.stop()
        for call in self._on_close:
            call()

    def __enter__(self) -> MotionStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- planning ----------------------------------------------------------------------------
    def _plan_now(
        self,
        steps: Sequence[Step],
        start: JointPositions | None,
        *,
        tools: ToolState | None = None,
        world: World | None = None,
    ) -> Solution:
        """Plan ``steps`` in this thread (the planning core of :meth:`plan` and of single steps).

        ``tools``: the tool state to start from (a plan ahead); ``None``: the live one.
        ``world``: the planning scene's world for every step; ``None``: the current one.
        """
        began = time.monotonic()
        with self._state_lock:
            state = tools if tools is not None else self._tools
            world = world if world is not None else self._world
        revision = self._planner.model_revision(state)
        scene = self._remember_world(world)
        q0 = tuple(float(x) for x in (start if start is not None else self._arm.joint_positions()))
        q: tuple[float, ...] = q0
        segments: list[Segment] = []
        ahead = self._plan_concurrently(steps, q0, state, world)
        with self._state_lock:
            listeners = tuple(self._plan_listeners)
        steps = tuple(steps)
        moves = sum(1 for step in steps if isinstance(step, MoveTo))
        planned = 0
        try:
            for index, step in enumerate(steps):
                if isinstance(step, MoveTo):
                    pending = ahead.pop(index, None)
                    segment = self._forecast_plan(step, q, state, world)
                    if segment is not None and pending is not None:
                        pending[2].cancel()
                    elif segment is None:
                        segment = self._joined(pending, q, state)
                    if segment is None:
                        segment = self._planner.plan_move(step, q, tools=state, world=world)
                    segments.append(segment)
                    q = segment.points[-1].positions
                    state = self._after_move(state, q)
                    planned += 1
                    self._tell_plan_listeners(listeners, steps, planned, moves)
                elif isinstance(step, EndEffector):
                    tool = resolve_end_effector(self._cell, state, step)
                    if tool is None:
                        continue
                    segments.append(tool)
                    state = self._after_tool(state, tool, q, step.path)
                else:
                    raise MotionError(
                        ErrorCode.PLANNING_FAILED,
                        f"{step.path}: a {step.script_type} step cannot be planned in a motion unit",
                    )
        except MotionError as exc:
            if exc.code is ErrorCode.PLANNING_FAILED:
                raise
            raise MotionError(ErrorCode.PLANNING_FAILED, exc.detail) from exc
        finally:
            for _, _, future in ahead.values():  # a failure ended the unit: the rest is not needed
                future.cancel()
            with self._state_lock:
                live = self._tools
            self._planner.follow(live)
        return Solution(
            segments=tuple(segments),
            model_revision=revision,
            start_positions=q0,  # type: ignore[arg-type]
            planning_time=time.monotonic() - began,
            scene_revision=scene,
        )

    @staticmethod
    def _tell_plan_listeners(
        listeners: tuple[PlanListener, ...], steps: tuple[Step, ...], planned: int, moves: int
    ) -> None:
        for listener in listeners:
            try:
                listener(steps, planned, moves)
            except Exception:  # a listener's bug never fails a plan
                _LOG.exception("plan listener failed")

    def _keep_forecast(
        self, world: World, step: MoveTo, q: tuple[float, ...], state: ToolState, segment: ArmSegment
    ) -> None:
        """Keep a motion a tool-exchange forecast planned (:meth:`plan_across`)."""
        with self._state_lock:
            self._forecast_plans.append((step, q, state, world.revision, segment))

    def _forecast_plan(
        self, step: MoveTo, q: Sequence[float], state: ToolState, world: World
    ) -> ArmSegment | None:
        """A forecast's plan of ``step`` from exactly ``q`` [rad] with ``state`` in ``world``
        (the newest such), or ``None``: plan it."""
        start = tuple(float(x) for x in q)
        with self._state_lock:
            for kept, kept_q, kept_state, kept_world, segment in reversed(self._forecast_plans):
                if kept_q != start or kept_world != world.revision:
                    continue
                try:
                    same = bool(kept == step and kept_state == state)
                except (TypeError, ValueError):  # a field without a plain equality: plan it
                    same = False
                if same:
                    self.forecast_plans_used += 1
                    return segment
        return None

    def _plan_concurrently(
        self, steps: Sequence[Step], q0: tuple[float, ...], state: ToolState, world: World
    ) -> dict[int, tuple[tuple[float, ...], ToolState, Future[ArmSegment]]]:
        """Send a unit's moves to a :class:`~erobs_bt.planning.base.RemotePlanner` side by
        side, each from the end the previous move is predicted to reach, with the tool state
        the steps before it are predicted to leave; ``{step index: (start [rad], tool state,
        future of the move's plan)}``. Empty for any other planner, or a unit of one move.

        Predicting stops at the first move whose end cannot be told or the first tool command
        that fails: those moves and the ones after them are planned in order by
        :meth:`_plan_now`, which also reports the failure.
        """
        planner = self._planner
        if not isinstance(planner, RemotePlanner) or planner.concurrent_requests < 2:
            return {}
        if sum(1 for step in steps if isinstance(step, MoveTo)) < 2:
            return {}
        # A pool per unit: the planning thread (a plan-ahead, a forecast) and the action thread
        # (a tool exchange's or a vision step's own motions) each get their own requests in.
        pool = ThreadPoolExecutor(planner.concurrent_requests, thread_name_prefix=f"{self._name}-plan-move")
        ahead: dict[int, tuple[tuple[float, ...], ToolState, Future[ArmSegment]]] = {}
        q = q0
        try:
            for index, step in enumerate(steps):
                if isinstance(step, MoveTo):
                    ahead[index] = (
                        q,
                        state,
                        pool.submit(planner.plan_move, step, q, tools=state, world=world),
                    )
                    end = planner.predict_end(step, q, tools=state)
                    if end is None:
                        break
                    q = tuple(float(x) for x in end)
                    state = self._after_move(state, q)
                elif isinstance(step, EndEffector):
                    tool = resolve_end_effector(self._cell, state, step)
                    if tool is not None:
                        state = self._after_tool(state, tool, q, step.path)
        except MotionError:  # the ordered plan reports it
            pass
        finally:
            pool.shutdown(wait=False)  # its threads end when their requests are answered
        return ahead

    def _joined(
        self,
        ahead: tuple[tuple[float, ...], ToolState, Future[ArmSegment]] | None,
        q: Sequence[float],
        state: ToolState,
    ) -> ArmSegment | None:
        """The concurrently planned move ``ahead`` if it continues the sequence: planned with the
        tool state ``state`` from within :data:`JOIN_TOLERANCE` of ``q`` [rad], where the
        previous move really ends (waits for it); ``None``: plan it again from ``q``.

        Raises:
            MotionError: the move's own planning failed (from the right start: the error is
                the unit's).
        """
        if ahead is None:
            return None
        start, planned_state, future = ahead
        gap = max(abs(float(a) - float(b)) for a, b in zip(start, q, strict=True))
        if planned_state != state or gap > JOIN_TOLERANCE:
            future.cancel()
            with self._state_lock:
                self.speculation["replanned"] += 1
            _LOG.info(
                "a move planned side by side starts %.2e rad from where the one before ends "
                "(tolerance %g rad)%s: planned again from there",
                gap,
                JOIN_TOLERANCE,
                "" if planned_state == state else " with another tool state",
            )
            return None
        segment = future.result()
        with self._state_lock:
            self.speculation["joined"] += 1
        return segment

    # -- execution -----------------------------------------------------------------------------
    def _dispatch(
        self,
        kind: str,
        *,
        replay: bool,
        step_types: Sequence[str],
        step_indices: Sequence[int] | Callable[[], Sequence[int]],
    ) -> _Dispatch:
        """Count a dispatch for fault injection.

        ``step_indices``: the steps involved, or a call that lists them (made only when
        faults are configured).
        """
        if self._faults is None or not self._faults.active:  # nothing to count or fire (the usual case)
            with self._state_lock:
                return _Dispatch(fault=None, stop_generation=self._stop_generation)
        if callable(step_indices):
            step_indices = step_indices()
        fault = self._faults.on_dispatch(
            kind, replay=replay, step_types=step_types, step_indices=step_indices
        )
        with self._state_lock:
            generation = self._stop_generation
        return _Dispatch(fault=fault, stop_generation=generation)

    def _before_motion(self, dispatch: _Dispatch) -> None:
        """Injected faults that end a dispatch before anything moves."""
        fault = dispatch.fault
        if fault is not None and fault.after_fraction is None:
            _wait(fault.delay)
            dispatch.fired = True
            raise fault.error

    def _after_dispatch(self, dispatch: _Dispatch) -> None:
        """A motion fault whose cut point was never reached (no motion, or after_fraction 1) fires now."""
        if dispatch.fault is not None and not dispatch.fired:
            _wait(dispatch.fault.delay)
            dispatch.fired = True
            raise dispatch.fault.error

    def _check_stopped(self, dispatch: _Dispatch) -> None:
        with self._state_lock:
            stopped = self._stop_generation != dispatch.stop_generation
        if stopped:
            raise MotionError(ErrorCode.EXECUTION_FAILED, "stopped by request")

    def _play(self, segments: Sequence[Segment], dispatch: _Dispatch) -> None:
        """Execute segments in order in this thread; a motion fault stops the arm part-way."""
        if (
            self._exchange == "dock"
            and not self._voltage_cut
            and any(isinstance(s, ArmSegment) for s in segments)
        ):
            # Before the first docking motion: the tool voltage off (EROBS's order).
            self._changer.set_power(False, what="tool_exchange dock")
            self._voltage_cut = True
        fault = dispatch.fault
        cut: float | None = None
        if fault is not None and fault.after_fraction is not None and not dispatch.cut_placed:
            total = sum(s.duration for s in segments if isinstance(s, ArmSegment))
            if total > 0.0:
                cut = fault.after_fraction * total
                dispatch.cut_placed = True
        elapsed = 0.0
        for segment in segments:
            self._check_stopped(dispatch)
            if isinstance(segment, ToolSegment):
                self._apply_tool(segment)
                continue
            fault_at: tuple[float, MotionError] | None = None
            if (
                fault is not None
                and cut is not None
                and not dispatch.fired
                and cut <= elapsed + segment.duration
            ):
                fault_at = (max(0.0, cut - elapsed), fault.error)
            with self._motion_lock:
                self._check_stopped(dispatch)
                started = self._arm.execute(segment, fault=fault_at)
            error = started.exception()
            if error is not None:
                if fault is not None and fault_at is not None and error is fault_at[1]:
                    dispatch.fired = True
                    _wait(fault.delay)  # the simulated wait before the failure is reported
                raise error
            elapsed += segment.duration
            with self._state_lock:
                self._tools = after_motion(
                    self._cell,
                    self._tools,
                    self._arm.joint_positions(),
                    contact_tolerance=self._contact_tolerance,
                )

    def _tool_driver(self, gripper: str, what: str) -> ToolDriver:
        driver = self._tool_drivers.get(gripper)
        if driver is None:
            raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: no driver for the {gripper}")
        return driver

    def _apply_tool(self, segment: ToolSegment) -> None:
        """Check the command against the bookkeeping, send it to the tool, record its effect."""
        what = f"step {segment.step_index}"
        q = self._arm.joint_positions()

        def effect(state: ToolState) -> tuple[ToolState, str]:
            return gripper_command(
                self._cell,
                state,
                segment.gripper,
                segment.command,
                q,
                contact_tolerance=self._contact_tolerance,
                where=what,
            )

        with self._state_lock:
            before = self._tools
        new, message = effect(before)  # refused by the bookkeeping: nothing is sent
        sent = self._tool_driver(segment.gripper, what).command(segment.command, what=what)
        if sent is not None:
            _LOG.info("%s: %s", what, sent)
        with self._state_lock:
            if self._tools is not before:  # changed meanwhile (a goal's start): apply to the new state
                new, message = effect(self._tools)
            self._tools = new
        self._planner.follow(new)
        _LOG.info("%s: %s", what, message)

    def _set_tool_state(self, state: ToolState) -> None:
        """Replace the live tool state; in a tool exchange, switch the changer first (unlock
        in the dock; lock and power the new tool after a load)."""
        if self._exchange == "dock" and state.gripper == "none":
            self._changer.set_locked(False, what="tool_exchange dock")
            self._changer_moved = True
        elif self._exchange == "load" and state.gripper != "none":
            self._changer.set_locked(True, what="tool_exchange load")
            self._changer.set_power(True, what="tool_exchange load")
            self._changer_moved = True
        with self._state_lock:
            self._tools = state
        self._planner.follow(state)

    # -- single steps --------------------------------------------------------------------------
    def _run_step_now(self, step: Step, dispatch: _Dispatch) -> str:
        port = _Port(self, dispatch)
        if isinstance(step, ToolExchange):
            return self._tool_exchange(step, port)
        if isinstance(step, Vision):
            return run_vision(
                self._cell,
                step,
                port,
                detector=self._detector,
                tag_cache=self._tag_cache,
                detectors=self._detectors,
                on_detected=self._detected if self._tag_objects else None,
            )
        if isinstance(step, Pipettor):
            return self._pipettor(step)
        if isinstance(step, MoveTo | EndEffector):
            port.move([step])
            return f"{step.task_type}: done"
        if isinstance(step, Pause):
            return "pause: nothing to run (the tree waits for Resume)"
        raise MotionError(ErrorCode.EXECUTION_FAILED, f"{step.path}: cannot run a {step.script_type} step")

    def _tool_exchange(self, step: ToolExchange, port: _Port) -> str:
        self._exchange, self._voltage_cut, self._changer_moved = step.operation, False, False
        try:
            return run_tool_exchange(self._cell, step, port)
        finally:
            restore = self._exchange == "dock" and self._voltage_cut and not self._changer_moved
            self._exchange = None
            if restore:
                # The dock failed with the tool still locked on: give it its power back.
                try:
                    self._changer.set_power(True, what="tool_exchange dock (restore)")
                except MotionError as exc:
                    _LOG.error("could not restore the tool voltage: %s", exc)

    def _pipettor(self, step: Pipettor) -> str:
        with self._state_lock:
            state = self._tools
        if state.gripper != "pipettor":
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{step.path}: pipettor {step.operation}: the pipettor is not attached "
                f"(attached: {state.gripper})",
            )
        # The bookkeeping's rules first: nothing is sent for a command they refuse.
        pipettor, message = pipettor_command(
            state.pipettor,
            step.operation,
            volume_pct=step.volume_pct,
            led_color=step.led_color,
            where=step.path,
        )
        sent = self._tool_driver("pipettor", step.path).run(step)
        if sent is not None:
            _LOG.info("%s: %s", step.path, sent)
        self._set_tool_state(replace(state, pipettor=pipettor))
        return f"pipettor {step.operation}: {message}"

    # -- helpers -------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise MotionError(ErrorCode.EXECUTION_FAILED, f"the {self._label} is closed")

    def _submit(
        self,
        pool: _Worker,
        job: Callable[[], _T],
        default: ErrorCode,
        *,
        cancellable: bool = False,
        into: Future[_T] | None = None,
    ) -> Future[_T]:
        """Run ``job`` on ``pool``; any exception becomes a :class:`MotionError` (``default`` code).

        ``cancellable``: the future stays pending until the job starts, so cancelling it
        before then skips the job (a dropped plan-ahead); otherwise it is running at once.
        A job the worker never starts (the stack closed first) fails its future with
        ``EXECUTION_FAILED`` (or is cancelled when still pending). ``into``: a pending future
        to resolve (one handed out before the job could be submitted), else a new one.
        """
        future: Future[_T] = into if into is not None else Future()
        if not cancellable:
            future.set_running_or_notify_cancel()

        def run() -> None:
            if cancellable and not future.set_running_or_notify_cancel():
                return
            try:
                result = job()
            except BaseException as exc:
                future.set_exception(as_motion_error(exc, default=default))
            else:
                future.set_result(result)

        def drop() -> None:
            if not future.cancel() and not future.done():
                future.set_exception(MotionError(ErrorCode.EXECUTION_FAILED, f"the {self._label} is closed"))

        pool.submit(run, drop)
        return future


#: A call for a :class:`_Worker` and what to call instead when it is dropped.
_Call = tuple[Callable[[], None], Callable[[], None]]


class _Worker:
    """One thread that runs the calls submitted to it, in order (the stack's planning
    worker and its action worker).

    What a one-worker ``ThreadPoolExecutor`` does here, with less per call: a submit is a
    put on a ``SimpleQueue`` (no work item, no executor future, no idle semaphore), which is
    most of the hand-over of a replayed solution to its execution (BENCHMARKS.md, "Plan
    cache"). The thread starts with the first call.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, call: Callable[[], None], drop: Callable[[], None]) -> None:
        """Queue ``call``; ``drop`` is called instead when the worker shuts down before it starts.

        Raises:
            RuntimeError: the worker was shut down.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name}: the worker is shut down")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._queue.put((call, drop))

    def shutdown(self) -> None:
        """Start no more calls (the queued ones are dropped), wait for the running one. Idempotent."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._queue.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                break
            call, drop = item
            if self._closed:
                drop()
            else:
                call()
        while True:  # calls queued behind the shutdown
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                item[1]()


class _Port:
    """The stack as seen by the tool changer and vision: blocking moves from the live state."""

    def __init__(self, stack: MotionStack, dispatch: _Dispatch) -> None:
        self._stack = stack
        self._dispatch = dispatch

    def joint_positions(self) -> tuple[float, ...]:
        return self._stack.arm.joint_positions()

    def tool_state(self) -> ToolState:
        return self._stack.tool_state()

    def planning_tip(self) -> NDArray[np.float64]:
        return planning_tip(self._stack.cell, self._stack.tool_state())

    def move(self, steps: Sequence[Step], *, last: bool = False) -> None:
        self._stack._check_stopped(self._dispatch)
        solution = self._stack._plan_now(steps, None)
        report = self._dispatch.on_final_plan
        if last and report is not None:
            self._dispatch.on_final_plan = None
            try:
                report(solution)
            except Exception:  # a plan-ahead that cannot start never fails the step
                _LOG.exception("reporting the final motion's plan failed")
        self._stack._play(solution.segments, self._dispatch)

    def set_tool_state(self, state: ToolState) -> None:
        self._stack._set_tool_state(state)

    def cup_profile_for(self, gripper: str) -> str | None:
        return self._stack.cup_profile_for(gripper)


def _wait(seconds: float) -> None:
    if seconds > 0.0:
        threading.Event().wait(seconds)

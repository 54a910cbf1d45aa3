"""The assembly of a motion stack: :class:`MotionStack`, the backend protocols implemented by
delegating to the stack's parts (:mod:`erobs_bt.backends.stack`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import replace

from erobs_bt.backends.base import (
    ErrorCode,
    JointStateListener,
    MotionError,
    PlanListener,
    Segment,
    Solution,
    WorldListener,
)
from erobs_bt.backends.parts import ArmDriver, Detector, FaultInjection, ToolChanger, ToolDriver
from erobs_bt.backends.stack.core import StackCore
from erobs_bt.backends.stack.execution import Dispatch, Execution
from erobs_bt.backends.stack.planning import UnitPlanner
from erobs_bt.backends.stack.replay import ReplayCheck
from erobs_bt.backends.stack.speculation import Speculation
from erobs_bt.backends.stack.state import LiveState
from erobs_bt.backends.stack.steps import StepRunner
from erobs_bt.backends.stack.workers import Worker
from erobs_bt.planning.base import Planner
from erobs_bt.script.model import JointPositions, Step
from erobs_bt.world.cell import CellConfig, Obstacle
from erobs_bt.world.scene import TagObject, World
from erobs_bt.world.tools import (
    DEFAULT_CONTACT_TOLERANCE,
    PipettorState,
    ToolState,
    initial_tool_state,
    mount_tool,
)

_LOG = logging.getLogger(__name__)


class MotionStack:
    """A robot behind the :class:`~erobs_bt.backends.base.MotionBackend` protocol, from parts,
    with every optional ability of :data:`erobs_bt.backends.base.ABILITIES` (a ``reset``-less
    assembly refuses :meth:`reset_simulation` in its own words: :attr:`resettable`).

    Why this class has more than 25 methods: it is the one implementation of the backend
    protocol and of every optional ability (each a protocol of its own in
    :mod:`erobs_bt.backends.base`), so it has one member per member of those protocols. Each
    is a delegation of a line or a few to the part that does the work: the live state
    (:class:`~erobs_bt.backends.stack.state.LiveState`), the planning of units
    (:class:`~erobs_bt.backends.stack.planning.UnitPlanner`) and its speculation
    (:class:`~erobs_bt.backends.stack.speculation.Speculation`), the replay check
    (:class:`~erobs_bt.backends.stack.replay.ReplayCheck`), the execution
    (:class:`~erobs_bt.backends.stack.execution.Execution`) and the single steps
    (:class:`~erobs_bt.backends.stack.steps.StepRunner`). The few methods with more are the
    glue between two parts (:meth:`prepare_goal`, :meth:`set_cup_profile`, :meth:`close`).
    Its length (over 400 lines) is the public documentation of those members, kept where a
    backend's user reads it.

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
        scene_owner: the ROS node that owns the planning scene's names (``/move_group`` when
            the planner is MoveIt's), or ``None``: the stack's world is its own
            (:attr:`scene_owner`).
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
        scene_owner: str | None = None,
    ) -> None:
        core = StackCore(
            cell=cell,
            planner=planner,
            arm=arm,
            contact_tolerance=float(contact_tolerance),
            name=name,
            label=label,
        )
        self._core = core
        self._reset = reset
        self._scene_owner = scene_owner
        self._detector = detector
        self._faults = faults
        self._publishes = bool(publishes_joint_states)
        self._on_close = tuple(on_close)
        self._closed = False
        # No goal has started since the stack was built or reset: the tool on the arm is the
        # cell's guess until the first goal's start_gripper says which it is (prepare_goal).
        self._at_start = True
        self._plan_pool = Worker(f"{name}-plan")
        self._action_pool = Worker(f"{name}-action")
        self._state = LiveState(core, tool_state)
        self._speculation = Speculation(core)
        self._planning = UnitPlanner(
            core,
            self._state,
            self._speculation,
            faults=faults,
            pool=self._plan_pool,
            check_open=self._check_open,
        )
        self._replay = ReplayCheck(core, self._state)
        self._execution = Execution(
            core,
            self._state,
            tool_drivers=tool_drivers,
            changer=changer,
            faults=faults,
            pool=self._action_pool,
            check_open=self._check_open,
        )
        # The steps plan through self._plan_now and play through self._play, looked up on
        # every call: the one place each passes (an instrument may wrap them on the instance,
        # as bench_planahead and test_forecast_reuse do).
        self._steps = StepRunner(
            core,
            self._state,
            self._execution,
            plan_now=lambda steps, start: self._plan_now(steps, start),
            play=lambda segments, dispatch: self._play(segments, dispatch),
            detector=detector,
        )

    # -- the live state ----------------------------------------------------------------------
    def joint_positions(self) -> JointPositions | None:
        """The live arm state [rad], or ``None`` when the arm driver knows none (a stale stream)."""
        try:
            return self._core.arm.joint_positions()
        except RuntimeError:
            return None

    def current_gripper(self) -> str:
        """The attached tool."""
        return self._state.tools().gripper

    def dock_contents(self) -> Mapping[int, str | None]:
        """What each dock holds now (the live tool state's ``docks``; ``None``: empty)."""
        return self._state.tools().docks

    def tool_state(self) -> ToolState:
        """The live tool state (attached tool, held part, parts, pipettor, docks)."""
        return self._state.tools()

    def pipettor_state(self) -> PipettorState:
        """The pipettor's bookkeeping (tip, aspirated volume, LED)."""
        return self._state.pipettor()

    def model_revision(self) -> str:
        """``<prefix>__<gripper>[__<cup_profile>]`` of the attached tool (:meth:`LiveState.model_revision
        <erobs_bt.backends.stack.state.LiveState.model_revision>`)."""
        return self._state.model_revision()

    def world_obstacles(self) -> tuple[Obstacle, ...]:
        """The obstacles the next plan avoids: the cell's plus those added at run time, in
        ``base_link``, sorted by name. With a planner that keeps its own scene (``backend:
        moveit``) these are the cell's obstacles as configured; move_group's scene may hold
        more (read it with ``get_planning_scene``)."""
        return self._state.world().obstacles

    def scene_revision(self) -> str:
        """The revision of :meth:`world_obstacles` (:func:`erobs_bt.world.scene.scene_revision`:
        12 hex digits; the same obstacles, in any order, give the same revision)."""
        return self._state.world().revision

    def world(self) -> World:
        """The current planning-scene world (obstacles and revision, one snapshot)."""
        return self._state.world()

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
        return self._state.set_world_obstacles(obstacles)

    def add_world_listener(self, listener: WorldListener) -> None:
        """Call ``listener(world, source)`` after every change of the world (a
        :meth:`set_world_obstacles`, source ``set_world_obstacles``, or a detected tag's
        collision object, source ``tag <id>``), from the thread that made it."""
        self._state.add_world_listener(listener)

    def remove_world_listener(self, listener: WorldListener) -> None:
        """Stop calling ``listener`` (no error when it was not added)."""
        self._state.remove_world_listener(listener)

    @property
    def tag_objects(self) -> Mapping[int, TagObject]:
        """The cell's tag-mapped collision objects by tag id (:func:`erobs_bt.world.scene.tag_objects`)."""
        return self._state.tag_objects

    def cup_profiles(self) -> tuple[str, ...]:
        """Every suction-cup profile of the cell's vacuum grippers, sorted."""
        return self._state.cup_profiles()

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
        self._state.set_cup_override(cup_profile)

    def cup_profile_for(self, gripper: str) -> str | None:
        """The cup :meth:`set_cup_override` asks for, when ``gripper`` has that profile; else
        ``None`` (its default). Fitted at a goal's start and when a ``tool_exchange`` loads it."""
        return self._state.cup_profile_for(gripper)

    def set_cup_profile(self, cup_profile: str) -> None:
        """Fit another suction cup on the attached vacuum gripper (changes the model revision).

        Raises:
            MotionError: ``EXECUTION_FAILED`` when the attached tool has no such cup profile.
        """
        state = self._state.tools()
        try:
            cup = self._core.cell.gripper(state.gripper).cup(cup_profile)
        except ValueError as exc:
            raise MotionError(ErrorCode.EXECUTION_FAILED, str(exc)) from None
        if cup is None:
            raise MotionError(ErrorCode.EXECUTION_FAILED, f"the {state.gripper} has no cup profiles")
        self._execution.set_tool_state(replace(state, cup_profile=cup.name))

    def prepare_goal(self, start_gripper: str) -> None:
        """Mount the script's ``start_gripper`` by hand when another tool is attached (logged;
        it changes the model revision), then fit the cup the override asks for.

        The first goal since the stack was built or reset names the tool on the arm at start:
        the docks are then the cell's less that tool
        (:func:`~erobs_bt.script.vocabulary.start_docks`, what ``erobs-bt validate`` assumes)
        and the tool the stack guessed (:func:`~erobs_bt.world.tools.mounted_at_start`) is
        not racked. Later goals swap by hand (:func:`~erobs_bt.world.tools.mount_tool`: the
        old tool goes back to a dock).

        Raises:
            MotionError: ``EXECUTION_FAILED`` for an unknown gripper, a held part, or an arm
                that is moving.
        """
        cell = self._core.cell
        state = self._state.tools()
        at_start, self._at_start = self._at_start, False
        if start_gripper != state.gripper:
            if self._core.arm.is_busy():
                raise MotionError(
                    ErrorCode.EXECUTION_FAILED, f"cannot mount {start_gripper}: the arm is moving"
                )
            if at_start and state.held is None:
                # The first goal names the tool on the arm: the docks are the cell's less that
                # tool (start_docks, as validate says); the guessed tool is not racked.
                fresh = initial_tool_state(cell, start_gripper)
                state = replace(
                    state, gripper=start_gripper, cup_profile=fresh.cup_profile, docks=fresh.docks
                )
            else:
                state = mount_tool(cell, state, start_gripper)
            _LOG.info(
                "start_gripper %s: the operator mounted it in place of %s", start_gripper, state.gripper
            )
            self._execution.set_tool_state(state)
        if cell.gripper(state.gripper).cup_profiles:
            wanted = self.cup_profile_for(state.gripper) or cell.gripper(state.gripper).default_cup_profile
            if wanted is not None and wanted != state.cup_profile:
                _LOG.info("%s: suction cup %s fitted (was %s)", state.gripper, wanted, state.cup_profile)
                self.set_cup_profile(wanted)

    # -- planning ----------------------------------------------------------------------------
    def plan(
        self,
        steps: Sequence[Step],
        *,
        start: JointPositions | None = None,
        after: Solution | None = None,
        crossed: Sequence[Step] = (),
    ) -> Future[Solution]:
        """Plan a unit's ``moveto``/``end_effector`` steps as one connected sequence
        (:meth:`UnitPlanner.plan <erobs_bt.backends.stack.planning.UnitPlanner.plan>`)."""
        return self._planning.plan(steps, start=start, after=after, crossed=crossed)

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

        The exchanges' own motions are kept (the last
        :data:`~erobs_bt.backends.stack.speculation.FORECAST_PLANS`): when an exchange runs and
        reaches one of them from exactly the start it was forecast from, with the same tool
        state, in the same world, it plays the forecast's plan instead of planning it again
        (the planner plans a motion from those inputs alone, so it would plan the same one),
        and the arm does not stand still for it.

        Returns:
            As :meth:`plan`.
        """
        return self._planning.plan(steps, start=start, after=after, crossed=crossed)

    @property
    def plan_ahead_depth(self) -> int:
        """How many motion units the engine plans ahead while one executes
        (:attr:`UnitPlanner.plan_ahead_depth
        <erobs_bt.backends.stack.planning.UnitPlanner.plan_ahead_depth>`)."""
        return self._planning.plan_ahead_depth

    def plan_chained(
        self, first: Future[Solution], steps: Sequence[Step], *, after: Solution | None = None
    ) -> Future[Solution]:
        """Plan a unit ahead of a unit that is itself still being planned ahead
        (:meth:`UnitPlanner.plan_chained <erobs_bt.backends.stack.planning.UnitPlanner.plan_chained>`)."""
        return self._planning.plan_chained(first, steps, after=after)

    def add_plan_listener(self, listener: PlanListener) -> None:
        """Call ``listener(steps, planned, moves)`` as a unit's plan progresses
        (:meth:`UnitPlanner.add_plan_listener
        <erobs_bt.backends.stack.planning.UnitPlanner.add_plan_listener>`)."""
        self._planning.add_plan_listener(listener)

    def predict_tools(self, state: ToolState, solution: Solution) -> ToolState:
        """The tool state that executing ``solution`` from ``state`` leaves (nothing moves;
        :meth:`StackCore.predict_tools <erobs_bt.backends.stack.core.StackCore.predict_tools>`)."""
        return self._core.predict_tools(state, solution)

    @property
    def checks_replay(self) -> bool:
        """True when :meth:`check_replay` can check a trajectory here (the embedded planner)."""
        return self._replay.checks_replay

    def check_replay(self, solution: Solution, steps: Sequence[Step]) -> str | None:
        """Check a cached solution against the planning scene as it is now
        (:meth:`ReplayCheck.check_replay <erobs_bt.backends.stack.replay.ReplayCheck.check_replay>`)."""
        return self._replay.check_replay(solution, steps)

    @property
    def speculation(self) -> dict[str, int]:
        """Moves of concurrently planned units: ``joined`` (kept), ``replanned`` (their predicted
        start missed the previous move's real end; planned again in order)."""
        return self._speculation.counts

    @property
    def forecast_plans_used(self) -> int:
        """Motions a running step took from a tool-exchange forecast instead of planning them."""
        return self._speculation.forecast_plans_used

    # -- execution ---------------------------------------------------------------------------
    def execute(self, solution: Solution, *, replay: bool) -> Future[None]:
        """Play a solution: arm segments on the arm driver, tool segments on the tools, in order
        (:meth:`Execution.execute <erobs_bt.backends.stack.execution.Execution.execute>`).

        Args:
            solution: from :meth:`plan` or the plan cache.
            replay: ``True`` for a cached solution (a ``TIMEOUT:`` becomes ``REPLAY_TIMEOUT:``).
        """
        return self._execution.execute(
            solution, replay=replay, play=lambda segments, dispatch: self._play(segments, dispatch)
        )

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
        dispatch = self._execution.dispatch(
            "run_step", replay=False, step_types=(step.task_type, step.script_type), step_indices=[step.index]
        )
        dispatch.on_final_plan = on_final_plan
        return self._execution.run(dispatch, lambda: self._steps.run(step, dispatch))

    def stop(self) -> None:
        """Ramp the arm down and drop the trajectory; cancel the tools' commands in flight;
        pending segments of the dispatch are dropped.

        Non-blocking and idempotent. Every dispatch started before the stop fails with
        ``EXECUTION_FAILED: stopped by request`` at its next segment; the check and the
        start of a trajectory are atomic with respect to this call, so a segment cannot
        slip onto the arm just after a stop.
        """
        self._execution.stop()

    def _plan_now(self, steps: Sequence[Step], start: JointPositions | None) -> Solution:
        """Plan a single step's motions in this thread (:meth:`UnitPlanner.plan_now
        <erobs_bt.backends.stack.planning.UnitPlanner.plan_now>`): every step's plan passes here."""
        return self._planning.plan_now(steps, start)

    def _play(self, segments: Sequence[Segment], dispatch: Dispatch) -> None:
        """Execute segments in order in this thread (:meth:`Execution.play
        <erobs_bt.backends.stack.execution.Execution.play>`): everything the stack plays passes here."""
        self._execution.play(segments, dispatch)

    # -- the parts ---------------------------------------------------------------------------
    @property
    def cell(self) -> CellConfig:
        """The cell description."""
        return self._core.cell

    @property
    def planner(self) -> Planner:
        """The planner."""
        return self._core.planner

    @property
    def _planner(self) -> Planner:
        """The planner, replaceable (``stack._planner = wrapped``: the parts read it on every use)."""
        return self._core.planner

    @_planner.setter
    def _planner(self, planner: Planner) -> None:
        self._core.planner = planner

    @property
    def arm(self) -> ArmDriver:
        """The arm driver."""
        return self._core.arm

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
        return self._core.planner.model_reloads

    def add_joint_state_listener(self, listener: JointStateListener, *, rate: float | None = None) -> bool:
        """Call ``listener(names, positions, velocities)`` with joint states (for ``/joint_states``).

        Args:
            listener: the callback.
            rate: [Hz] notifications per wall second while moving (default: the arm
                driver's state rate), on the driver's own clock.

        Returns:
            True (the arm driver notifies, and after every trajectory).
        """
        self._core.arm.add_listener(listener, rate=rate)
        return True

    def remove_joint_state_listener(self, listener: JointStateListener) -> None:
        """Stop calling ``listener``."""
        self._core.arm.remove_listener(listener)

    # -- simulation and lifetime -----------------------------------------------------------------
    @property
    def resettable(self) -> bool:
        """True when :meth:`reset_simulation` can reset this stack (a simulation it runs)."""
        return self._reset is not None

    @property
    def scene_owner(self) -> str | None:
        """The ROS node that owns the planning scene's names, or ``None`` when the stack's world
        is its own (:class:`~erobs_bt.backends.base.KnowsSceneOwner`)."""
        return self._scene_owner

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
                f"the {self._core.label} is not a simulation this engine runs: nothing to reset "
                "(put the cell back by hand, or restart the simulator that drives it)",
            )
        message = self._state.reset(self._reset, self._execution.motion_lock)
        self._at_start = True
        return message

    def close(self) -> None:
        """Stop the arm and the tools, shut the workers and the arm driver down, then run the
        ``on_close`` calls. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.stop()
        self._plan_pool.shutdown()
        self._action_pool.shutdown()
        self._core.arm.shutdown()
        self._execution.stop_tools()
        for call in self._on_close:
            call()

    def __enter__(self) -> MotionStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise MotionError(ErrorCode.EXECUTION_FAILED, f"the {self._core.label} is closed")

"""The embedded simulated UR5e cell as a :class:`~erobs_bt.backends.base.MotionBackend`.

:class:`SimBackend` ties the cell together: the cell config (:mod:`.cell`), the collision
model kept in step with the attached tool (:class:`.tools.RobotModel`), the motion
planner (:mod:`.planner`), the controller that plays trajectories in simulated time
(:mod:`.controller`), the tools (:mod:`.tools`), vision (:mod:`.vision`) and fault
injection (:mod:`.faults`).

Threads: the tree's tick thread only ever receives futures. Planning runs in one worker
thread (``sim-plan``), executions and single steps in another (``sim-action``), and the
controller in its own. The collision model belongs to planning: a plan holds the
model's lock for a whole unit, brings the model to the tool state it plans from (it
temporarily attaches the parts a planned ``vacuum_on`` would pick up, so later moves of
the unit are checked with them) and restores the live state at the end. Tool commands
during execution change the live tool state (its own lock) and bring the model along only
when no plan holds it, so an execution never waits for a plan running ahead (issue 13,
plan-ahead): the plan that holds the model restores the live state when it ends, and
every plan syncs the model to its own start anyway. Every public method is thread-safe.

Planning a unit (:meth:`SimBackend.plan`): ``moveto`` and ``end_effector`` steps are
planned as ONE connected sequence from ``start`` (or the live state), carrying the
planned joint and tool state forward from step to step (docs/script-format.md,
"Preview start states"). A plan ahead (``after=``) starts from the tool state that
executing ``after`` from the tool state at the call leaves
(:meth:`SimBackend.predict_tools`). The solution records the model revision it was
planned with; executing a solution planned for another revision fails
(``EXECUTION_FAILED``) instead of moving with the wrong tool model.

Start gripper: the simulated cell starts with the one tool that the cell config stores
in no dock (``epick`` in the packaged cell), or ``none``. A goal's ``start_gripper`` is
the tool the operator mounted (:meth:`SimBackend.prepare_goal`): when it differs, the
sim mounts it by hand (logged), which changes the model revision, unless a part is held.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from erobs_bt.backends.base import (
    ArmSegment,
    CellVocabulary,
    ErrorCode,
    MotionError,
    Segment,
    Solution,
    ToolSegment,
    as_motion_error,
)
from erobs_bt.backends.sim.controller import DEFAULT_CONTROL_RATE, JointStateListener, SimController
from erobs_bt.backends.sim.faults import FaultInjector, FaultSpec, parse_fault_section
from erobs_bt.backends.sim.vision import camera_from_cell, detector_markers, run_vision
from erobs_bt.planning.planner import MotionPlanner, PlannerConfig
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
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.kinematics import T_BASE_LINK_BASE
from erobs_bt.world.tools import (
    DEFAULT_CONTACT_TOLERANCE,
    PipettorState,
    RobotModel,
    ToolState,
    after_motion,
    gripper_command,
    initial_tool_state,
    mount_tool,
    pipettor_command,
    planning_tip,
    resolve_end_effector,
    run_tool_exchange,
)

_LOG = logging.getLogger(__name__)

_T = TypeVar("_T")

#: The simulated action servers, for messages (EROBS/MoveIt names).
_SERVERS = {
    "execute": "execute_task_solution",
    "replay": "execute_task_solution",
    "tool_exchange": "tool_exchange",
    "pipettor": "pipettor",
    "vision": "vision_task",
}
#: Fault outcomes that fail before anything moves.
_BEFORE_MOTION = frozenset({"goal_rejected", "acceptance_timeout", "server_unavailable", "replay_error"})


class ArmController(Protocol):
    """What :class:`SimBackend` needs from the arm's controller.

    :class:`~erobs_bt.backends.sim.controller.SimController` (the embedded simulated arm)
    and the ``ros2_control`` backend's FollowJointTrajectory client
    (:class:`erobs_bt.backends.ros2_control.FollowJointTrajectoryArm`) implement it.
    """

    def joint_positions(self) -> JointPositions:
        """The live arm state [rad].

        Raises:
            RuntimeError: no live state is known (a stale or missing joint-state stream).
        """
        ...

    def is_busy(self) -> bool:
        """True while a trajectory is executing."""
        ...

    def check_start(self, positions: Sequence[float], step_index: int) -> None:
        """Raise ``EXECUTION_FAILED`` unless ``positions`` [rad] is within the start tolerance."""
        ...

    def execute(self, segment: ArmSegment, *, fault: tuple[float, MotionError] | None = None) -> Future[None]:
        """Execute one arm trajectory; the future fails with a :class:`MotionError`."""
        ...

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no trajectory executes; False on timeout [s]."""
        ...

    def stop(self) -> None:
        """Decelerate within the acceleration limits and drop the trajectory. Idempotent."""
        ...

    def add_listener(self, listener: JointStateListener, *, rate: float | None = None) -> None:
        """Call ``listener(names, positions, velocities)`` with joint-state updates
        (``rate`` [Hz] per wall second while moving, where the controller sets the pace)."""
        ...

    def remove_listener(self, listener: JointStateListener) -> None:
        """Stop notifying ``listener``."""
        ...

    def shutdown(self) -> None:
        """Drop any trajectory and release the controller's resources. Idempotent."""
        ...


def mounted_at_start(cell: CellConfig) -> str:
    """The tool on the arm when the cell starts: the one tool stored in no dock, else ``none``."""
    docked = {d.gripper for d in cell.docks if d.gripper is not None}
    loose = [name for name in cell.grippers if name != "none" and name not in docked]
    return loose[0] if len(loose) == 1 else "none"


@dataclass
class _Dispatch:
    """One execution (a solution, or the motions of a single step) and its injected fault."""

    fault: FaultSpec | None
    error: MotionError | None
    stop_generation: int
    fired: bool = False
    cut_placed: bool = False


class SimBackend:
    """The simulated UR5e cell behind the :class:`~erobs_bt.backends.base.MotionBackend` protocol.

    Args:
        cell: the cell description (:func:`erobs_bt.world.cell.load_cell`).
        speed: simulated seconds per wall second of the controller (1.0 = real time,
            e.g. 10.0 in tests; ``math.inf`` = no waiting).
        faults: fault injection: an injector, fault specs, or ``None`` for the
            ``faults`` section of the cell YAML (none when it is absent or empty).
        seed: seed of the sampling planner (OMPL's process-wide RNG; only the first
            seed of a process takes effect). ``None`` keeps the planner's default.
        gripper: the tool mounted at start (default :func:`mounted_at_start`).
        planner_config: planner settings (``seed`` overrides its ``ompl_seed``).
        control_rate: controller rate [Hz of simulated time].
        contact_tolerance: [m] TCP-to-part distance that counts as touching.
        controller: the arm's controller; ``None`` for the simulated one
            (:class:`SimController` with ``speed`` and ``control_rate``).

    Raises:
        ValueError: invalid configuration (the message names the file and key).
    """

    def __init__(
        self,
        cell: CellConfig,
        *,
        speed: float = 1.0,
        faults: FaultInjector | Iterable[FaultSpec] | None = None,
        seed: int | None = None,
        gripper: str | None = None,
        planner_config: PlannerConfig | None = None,
        control_rate: float = DEFAULT_CONTROL_RATE,
        contact_tolerance: float = DEFAULT_CONTACT_TOLERANCE,
        controller: ArmController | None = None,
    ) -> None:
        self._cell = cell
        self._contact_tolerance = float(contact_tolerance)
        self._faults = _injector(cell, faults)
        self._state_lock = threading.Lock()
        self._tools = initial_tool_state(cell, gripper if gripper is not None else mounted_at_start(cell))
        self._revision: tuple[ToolState | None, str] = (None, "")  # see model_revision()
        self._cup_override: str | None = None  # see set_cup_override()
        self._model = RobotModel(cell, self._tools)
        config = planner_config if planner_config is not None else PlannerConfig()
        if seed is not None:
            config = replace(config, ompl_seed=int(seed))
        self._planner = MotionPlanner(
            collision=self._model.collision,
            named_states=cell.named_states,
            config=config,
            resolve_frame=self._resolve_frame,
        )
        self._camera = camera_from_cell(cell)
        self._detectors = detector_markers(cell)
        self._tag_cache: dict[int, NDArray[np.float64]] = {}
        self._controller: ArmController = (
            controller
            if controller is not None
            else SimController(cell.initial_joint_state, speed=speed, control_rate=control_rate)
        )
        self._stop_generation = 0
        self._motion_lock = threading.Lock()  # stop() vs. starting a trajectory
        self._plan_pool = _Worker("sim-plan")
        self._action_pool = _Worker("sim-action")
        self._closed = False

    # -- MotionBackend ---------------------------------------------------------------------
    def joint_positions(self) -> JointPositions:
        """The live arm state [rad] (always known in the simulation)."""
        return self._controller.joint_positions()

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
                revision = self._cell.model_revision(tools.gripper, tools.cup_profile)
                self._revision = (tools, revision)
            return revision

    def prepare_goal(self, start_gripper: str) -> None:
        """Mount the script's ``start_gripper`` by hand when another tool is attached.

        Raises:
            MotionError: ``EXECUTION_FAILED`` for an unknown gripper, a held part, or an arm
                that is moving.
        """
        with self._state_lock:
            state = self._tools
        if start_gripper != state.gripper:
            if self._controller.is_busy():
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
    ) -> Future[Solution]:
        """Plan a unit's ``moveto``/``end_effector`` steps as one connected sequence.

        Args:
            steps: the unit's steps, in order.
            start: the arm state to plan from [rad]; ``None``: the live state.
            after: plan ahead of this solution's execution: the tool state starts as
                :meth:`predict_tools` says executing it from the tool state *now* leaves
                it (call before dispatching it). ``None``: from the live tool state.

        Returns:
            A future resolving to the :class:`Solution` (arm segments and tool segments
            in step order), or failing with ``PLANNING_FAILED:``. Cancelled before the
            planner thread reaches it, it never runs.
        """
        self._check_open()
        fault = self._faults.check(
            "plan", step_types=[_step_type(s) for s in steps], step_indices=[s.index for s in steps]
        )
        steps = tuple(steps)
        with self._state_lock:
            base = self._tools
        if after is not None:
            revision = self._cell.model_revision(base.gripper, base.cup_profile)
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
                raise self._fault_error(fault, "plan", replay=False)
            tools = self.predict_tools(base, after) if after is not None else None
            return self._plan_now(steps, start, tools=tools)

        return self._submit(self._plan_pool, job, ErrorCode.PLANNING_FAILED, cancellable=True)

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
        q: tuple[float, ...] = tuple(start if start is not None else self._controller.joint_positions())
        for segment in solution.segments:
            if isinstance(segment, ArmSegment):
                if segment.points:
                    q = segment.points[-1].positions
                    state = after_motion(self._cell, state, q, contact_tolerance=self._contact_tolerance)
            else:
                state, _ = gripper_command(
                    self._cell,
                    state,
                    segment.gripper,
                    segment.command,
                    q,
                    contact_tolerance=self._contact_tolerance,
                    where=f"step {segment.step_index}",
                )
        return state

    def execute(self, solution: Solution, *, replay: bool) -> Future[None]:
        """Play a solution: arm segments on the controller, tool segments on the tools, in order.

        Args:
            solution: from :meth:`plan` or the plan cache.
            replay: ``True`` for a cached solution (timeouts become ``REPLAY_TIMEOUT:``).

        Returns:
            A future completing when the last segment has finished, or failing with
            ``EXECUTION_FAILED:`` (start-state deviation, model revision mismatch, tool
            mismatch, stop) or an injected error.
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
                self._controller.check_start(first.points[0].positions, first.step_index)
            self._play(solution.segments, dispatch)
            self._after_dispatch(dispatch)

        return self._submit(self._action_pool, job, ErrorCode.EXECUTION_FAILED)

    def run_step(self, step: Step) -> Future[str]:
        """Run one non-batched step: ``tool_exchange``, ``pipettor`` or a vision-family step.

        ``moveto``/``end_effector`` are planned and executed on the spot; ``pause`` is a
        no-op here (the tree waits for Resume).

        Returns:
            A future resolving to a status message, or failing with a :class:`MotionError`.
        """
        self._check_open()
        kind = _step_type(step)
        dispatch = self._dispatch(
            "run_step", replay=False, step_types=(step.task_type, kind), step_indices=[step.index]
        )

        def job() -> str:
            self._before_motion(dispatch)
            message = self._run_step_now(step, dispatch)
            self._after_dispatch(dispatch)
            return message

        return self._submit(self._action_pool, job, ErrorCode.EXECUTION_FAILED)

    def stop(self) -> None:
        """Ramp the arm down and drop the trajectory; pending segments of the dispatch are dropped.

        Non-blocking and idempotent. Every dispatch started before the stop fails with
        ``EXECUTION_FAILED: stopped by request`` at its next segment; the check and the
        start of a trajectory are atomic with respect to this call, so a segment cannot
        slip onto the controller just after a stop.
        """
        with self._motion_lock:
            with self._state_lock:
                self._stop_generation += 1
            self._controller.stop()

    # -- extras ----------------------------------------------------------------------------
    @property
    def cell(self) -> CellConfig:
        """The cell description."""
        return self._cell

    @property
    def controller(self) -> ArmController:
        """The arm controller (the simulated one unless another was given)."""
        return self._controller

    def cell_vocabulary(self) -> CellVocabulary:
        """The cell config's grippers and named states."""
        return CellVocabulary(tuple(self._cell.grippers), tuple(self._cell.named_states))

    @property
    def publishes_joint_states(self) -> bool:
        """False: the embedded cell's joint states exist only in this process."""
        return False

    @property
    def faults(self) -> FaultInjector:
        """The fault injector (its :meth:`~FaultInjector.fired` lists what fired)."""
        return self._faults

    @property
    def model_reloads(self) -> int:
        """How often the robot model was reloaded because its revision changed.

        A reload happens when a plan first needs the new tool (:meth:`_sync_model`): a
        tool mounted and nothing planned since is not counted yet.
        """
        return self._model.reloads

    def add_joint_state_listener(self, listener: JointStateListener, *, rate: float | None = None) -> bool:
        """Call ``listener(names, positions, velocities)`` with joint states (for ``/joint_states``).

        Args:
            listener: the callback.
            rate: [Hz] notifications per wall second while moving (default: the
                controller's state rate), on the controller's own clock.

        Returns:
            True (the controller notifies, and after every trajectory).
        """
        self._controller.add_listener(listener, rate=rate)
        return True

    def remove_joint_state_listener(self, listener: JointStateListener) -> None:
        """Stop calling ``listener``."""
        self._controller.remove_listener(listener)

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

    def shutdown(self) -> None:
        """Same as :meth:`close` (the name the engine's session uses)."""
        self.close()

    def close(self) -> None:
        """Stop the arm, shut the workers and the controller down. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.stop()
        self._plan_pool.shutdown()
        self._action_pool.shutdown()
        self._controller.shutdown()

    def __enter__(self) -> SimBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- planning ----------------------------------------------------------------------------
    def _plan_now(
        self, steps: Sequence[Step], start: JointPositions | None, *, tools: ToolState | None = None
    ) -> Solution:
        """Plan ``steps`` in this thread (the planning core of :meth:`plan` and of single steps).

        ``tools``: the tool state to start from (a plan ahead); ``None``: the live one.
        """
        began = time.monotonic()
        with self._model.lock:
            if tools is not None:
                state = tools
            else:
                with self._state_lock:
                    state = self._tools
            # The model follows the live tools only when no plan holds it: bring it to ours.
            self._model.sync(state)
            revision = self._cell.model_revision(state.gripper, state.cup_profile)
            q0 = tuple(float(x) for x in (start if start is not None else self._controller.joint_positions()))
            q: tuple[float, ...] = q0
            segments: list[Segment] = []
            try:
                for step in steps:
                    if isinstance(step, MoveTo):
                        segment = self._planner.plan_move(
                            step,
                            q,
                            T_flange_tip=planning_tip(self._cell, state),
                            tip_link=self._cell.gripper(state.gripper).tip_frame,
                        )
                        segments.append(segment)
                        q = segment.points[-1].positions
                        state = after_motion(self._cell, state, q, contact_tolerance=self._contact_tolerance)
                    elif isinstance(step, EndEffector):
                        tool = resolve_end_effector(self._cell, state, step)
                        if tool is None:
                            continue
                        segments.append(tool)
                        state, _ = gripper_command(
                            self._cell,
                            state,
                            tool.gripper,
                            tool.command,
                            q,
                            contact_tolerance=self._contact_tolerance,
                            where=step.path,
                        )
                        self._model.sync(state)
                    else:
                        raise MotionError(
                            ErrorCode.PLANNING_FAILED,
                            f"{step.path}: a {_step_type(step)} step cannot be planned in a motion unit",
                        )
            except MotionError as exc:
                if exc.code is ErrorCode.PLANNING_FAILED:
                    raise
                raise MotionError(ErrorCode.PLANNING_FAILED, exc.detail) from exc
            finally:
                with self._state_lock:
                    live = self._tools
                self._model.sync(live)
        return Solution(
            segments=tuple(segments),
            model_revision=revision,
            start_positions=q0,  # type: ignore[arg-type]
            planning_time=time.monotonic() - began,
        )

    def _resolve_frame(self, frame_id: str) -> NDArray[np.float64]:
        """``T_base_link_frame`` of a fixed frame: ``base``, an obstacle, or ``marker_<id>``."""
        if frame_id == "base":
            return T_BASE_LINK_BASE.copy()
        if frame_id.startswith("marker_") and frame_id[7:].isdigit():
            return self._cell.marker(int(frame_id[7:])).pose.matrix()
        return self._cell.obstacle(frame_id).T_base_link_obstacle()

    # -- execution -----------------------------------------------------------------------------
    def _dispatch(
        self,
        kind: str,
        *,
        replay: bool,
        step_types: Sequence[str],
        step_indices: Sequence[int] | Callable[[], Sequence[int]],
    ) -> _Dispatch:
        """Count a dispatch for fault injection (acceptance first, then its own kind).

        ``step_indices``: the steps involved, or a call that lists them (made only when
        faults are configured).
        """
        if not self._faults.specs:  # nothing to count or fire (the usual case)
            with self._state_lock:
                return _Dispatch(fault=None, error=None, stop_generation=self._stop_generation)
        if callable(step_indices):
            step_indices = step_indices()
        fault = self._faults.check("acceptance", step_types=step_types, step_indices=step_indices)
        own = self._faults.check(kind, step_types=step_types, step_indices=step_indices)
        fault = fault if fault is not None else own
        server = _SERVERS.get(kind if kind != "run_step" else _server_of(step_types), "execute_task_solution")
        error = self._fault_error(fault, server, replay=replay) if fault is not None else None
        with self._state_lock:
            generation = self._stop_generation
        return _Dispatch(fault=fault, error=error, stop_generation=generation)

    def _fault_error(self, fault: FaultSpec, server: str, *, replay: bool) -> MotionError:
        return self._faults.error(fault, replay=replay, server=server)

    def _before_motion(self, dispatch: _Dispatch) -> None:
        """Injected faults that end a dispatch before anything moves."""
        fault = dispatch.fault
        if fault is None:
            return
        if fault.outcome in _BEFORE_MOTION or fault.outcome == "planning_failure":
            _wait(fault.delay)
            dispatch.fired = True
            assert dispatch.error is not None
            raise dispatch.error

    def _after_dispatch(self, dispatch: _Dispatch) -> None:
        """A motion fault whose cut point was never reached (no motion, or after_fraction 1) fires now."""
        if dispatch.fault is not None and not dispatch.fired:
            _wait(dispatch.fault.delay)
            dispatch.fired = True
            assert dispatch.error is not None
            raise dispatch.error

    def _check_stopped(self, dispatch: _Dispatch) -> None:
        with self._state_lock:
            stopped = self._stop_generation != dispatch.stop_generation
        if stopped:
            raise MotionError(ErrorCode.EXECUTION_FAILED, "stopped by request")

    def _play(self, segments: Sequence[Segment], dispatch: _Dispatch) -> None:
        """Execute segments in order in this thread; a motion fault stops the arm part-way."""
        cut: float | None = None
        if dispatch.fault is not None and dispatch.fault.moves and not dispatch.cut_placed:
            total = sum(s.duration for s in segments if isinstance(s, ArmSegment))
            if total > 0.0:
                cut = dispatch.fault.after_fraction * total
                dispatch.cut_placed = True
        elapsed = 0.0
        for segment in segments:
            self._check_stopped(dispatch)
            if isinstance(segment, ToolSegment):
                self._apply_tool(segment)
                continue
            fault_at: tuple[float, MotionError] | None = None
            if cut is not None and not dispatch.fired and cut <= elapsed + segment.duration:
                assert dispatch.error is not None
                fault_at = (max(0.0, cut - elapsed), dispatch.error)
            with self._motion_lock:
                self._check_stopped(dispatch)
                started = self._controller.execute(segment, fault=fault_at)
            error = started.exception()
            if error is not None:
                if fault_at is not None and error is fault_at[1]:
                    dispatch.fired = True
                    if dispatch.fault is not None:
                        _wait(dispatch.fault.delay)  # the simulated wait before the failure is reported
                raise error
            elapsed += segment.duration
            with self._state_lock:
                self._tools = after_motion(
                    self._cell,
                    self._tools,
                    self._controller.joint_positions(),
                    contact_tolerance=self._contact_tolerance,
                )

    def _apply_tool(self, segment: ToolSegment) -> None:
        with self._state_lock:
            new, message = gripper_command(
                self._cell,
                self._tools,
                segment.gripper,
                segment.command,
                self._controller.joint_positions(),
                contact_tolerance=self._contact_tolerance,
                where=f"step {segment.step_index}",
            )
            self._tools = new
        self._sync_model()
        _LOG.info("step %d: %s", segment.step_index, message)

    def _set_tool_state(self, state: ToolState) -> None:
        with self._state_lock:
            self._tools = state
        self._sync_model()

    def _sync_model(self) -> None:
        """Bring the collision model's held part to the live tool state, unless a plan holds it.

        Never waits for a plan (one may be running ahead of this execution): the plan
        holding the model restores the live state when it ends, and every plan syncs the
        model to its own start first. That is also why a new tool or cup profile (a reload:
        the tool's geometry, collision scene and matrix, milliseconds) is left to the next
        plan: a step that plans nothing after it (a pipettor step, the mount of a goal's
        ``start_gripper`` by hand) does not pay for a model it does not use, and
        :attr:`model_reloads` counts the reloads planning needed.
        """
        if not self._model.lock.acquire(blocking=False):
            return
        try:
            with self._state_lock:
                live = self._tools
            if self._model.revision != self._cell.model_revision(live.gripper, live.cup_profile):
                return  # another tool: the next plan reloads the model
            self._model.sync(live)
        finally:
            self._model.lock.release()

    # -- single steps --------------------------------------------------------------------------
    def _run_step_now(self, step: Step, dispatch: _Dispatch) -> str:
        port = _Port(self, dispatch)
        if isinstance(step, ToolExchange):
            return run_tool_exchange(self._cell, step, port)
        if isinstance(step, Vision):
            return run_vision(
                self._cell,
                step,
                port,
                camera=self._camera,
                tag_cache=self._tag_cache,
                detectors=self._detectors,
            )
        if isinstance(step, Pipettor):
            with self._state_lock:
                state = self._tools
            if state.gripper != "pipettor":
                raise MotionError(
                    ErrorCode.EXECUTION_FAILED,
                    f"{step.path}: pipettor {step.operation}: the pipettor is not attached "
                    f"(attached: {state.gripper})",
                )
            pipettor, message = pipettor_command(
                state.pipettor,
                step.operation,
                volume_pct=step.volume_pct,
                led_color=step.led_color,
                where=step.path,
            )
            self._set_tool_state(replace(state, pipettor=pipettor))
            return f"pipettor {step.operation}: {message}"
        if isinstance(step, MoveTo | EndEffector):
            port.move([step])
            return f"{step.task_type}: done"
        if isinstance(step, Pause):
            return "pause: nothing to run (the tree waits for Resume)"
        raise MotionError(ErrorCode.EXECUTION_FAILED, f"{step.path}: cannot run a {_step_type(step)} step")

    # -- helpers -------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise MotionError(ErrorCode.EXECUTION_FAILED, "the simulated cell is closed")

    def _submit(
        self,
        pool: _Worker,
        job: Callable[[], _T],
        default: ErrorCode,
        *,
        cancellable: bool = False,
    ) -> Future[_T]:
        """Run ``job`` on ``pool``; any exception becomes a :class:`MotionError` (``default`` code).

        ``cancellable``: the future stays pending until the job starts, so cancelling it
        before then skips the job (a dropped plan-ahead); otherwise it is running at once.
        A job the worker never starts (the backend closed first) fails its future with
        ``EXECUTION_FAILED`` (or is cancelled when still pending).
        """
        future: Future[_T] = Future()
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
                future.set_exception(MotionError(ErrorCode.EXECUTION_FAILED, "the simulated cell is closed"))

        pool.submit(run, drop)
        return future


#: A call for a :class:`_Worker` and what to call instead when it is dropped.
_Call = tuple[Callable[[], None], Callable[[], None]]


class _Worker:
    """One thread that runs the calls submitted to it, in order (the backend's planning
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
    """The backend as seen by the tool changer and vision: blocking moves from the live state."""

    def __init__(self, backend: SimBackend, dispatch: _Dispatch) -> None:
        self._backend = backend
        self._dispatch = dispatch

    def joint_positions(self) -> tuple[float, ...]:
        return self._backend.controller.joint_positions()

    def tool_state(self) -> ToolState:
        return self._backend.tool_state()

    def planning_tip(self) -> NDArray[np.float64]:
        return planning_tip(self._backend.cell, self._backend.tool_state())

    def move(self, steps: Sequence[Step]) -> None:
        self._backend._check_stopped(self._dispatch)
        solution = self._backend._plan_now(steps, None)
        self._backend._play(solution.segments, self._dispatch)

    def set_tool_state(self, state: ToolState) -> None:
        self._backend._set_tool_state(state)

    def cup_profile_for(self, gripper: str) -> str | None:
        return self._backend.cup_profile_for(gripper)


def _step_type(step: Step) -> str:
    """The script's task type of a step (:attr:`Step.script_type`)."""
    return step.script_type


def _server_of(step_types: Sequence[str]) -> str:
    for step_type in step_types:
        if step_type in ("tool_exchange", "pipettor"):
            return step_type
    return "vision"


def _wait(seconds: float) -> None:
    if seconds > 0.0:
        threading.Event().wait(seconds)


def _injector(cell: CellConfig, faults: FaultInjector | Iterable[FaultSpec] | None) -> FaultInjector:
    if isinstance(faults, FaultInjector):
        return faults
    if faults is not None:
        return FaultInjector(faults)
    return parse_fault_section(cell.extra.get("faults"), source=cell.source or "cell")

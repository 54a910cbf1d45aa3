"""The execution of a motion stack: dispatching a solution or a step's motions, playing their
segments on the arm and the tools, halting (stop), and the tool changer's order during a tool
exchange.

Executing: before any trajectory of a solution is sent, fresh or replayed, the arm driver
checks that the live state is at its first point (nothing of the solution runs otherwise,
tool commands ahead of it included). Tool segments are checked against the bookkeeping's
rules, sent to the tool's driver, then recorded. A replay's ``TIMEOUT:`` is reported as
``REPLAY_TIMEOUT:``. Tool exchange, as EROBS does it: the tool voltage is switched off
before the first docking motion, the changer is unlocked in the dock, and after a load the
changer is locked and the tool voltage switched back on, before the arm leaves the dock.

Fault injection (the simulated cell's, :class:`~erobs_bt.backends.parts.FaultInjection`)
has its cut points here: a dispatch before anything moves, part-way through its motion
(``after_fraction`` of the dispatch's arm motion), at its end (a plan's is in
:mod:`erobs_bt.backends.stack.planning`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass

from erobs_bt.backends.base import ArmSegment, ErrorCode, MotionError, Segment, Solution, ToolSegment
from erobs_bt.backends.parts import FaultInjection, InjectedFault, ToolChanger, ToolDriver
from erobs_bt.backends.stack.core import StackCore
from erobs_bt.backends.stack.state import LiveState
from erobs_bt.backends.stack.workers import Worker, submit, wait
from erobs_bt.world.tools import ToolState, gripper_command

_LOG = logging.getLogger(__name__)


@dataclass
class Dispatch:
    """One execution (a solution, or the motions of a single step) and its injected fault."""

    fault: InjectedFault | None
    stop_generation: int
    fired: bool = False
    cut_placed: bool = False
    on_final_plan: Callable[[Solution], None] | None = None


#: How the segments of a dispatch are played (:meth:`Execution.play`, or what the stack
#: routes it through).
Play = Callable[[Sequence[Segment], Dispatch], None]


class Execution:
    """Plays dispatches on the arm driver and the tool drivers, on the stack's action worker.

    Args:
        core: the stack's shared parts.
        state: the live tool state (recorded as segments play).
        tool_drivers: tool name -> its driver.
        changer: the tool changer's voltage and lock.
        faults: fault injection, or ``None``.
        pool: the action worker (``<name>-action``).
        check_open: raises when the stack is closed.
    """

    def __init__(
        self,
        core: StackCore,
        state: LiveState,
        *,
        tool_drivers: Mapping[str, ToolDriver],
        changer: ToolChanger,
        faults: FaultInjection | None,
        pool: Worker,
        check_open: Callable[[], None],
    ) -> None:
        self._core = core
        self._state = state
        self._tool_drivers = dict(tool_drivers)
        self._changer = changer
        self._faults = faults
        self._pool = pool
        self._check_open = check_open
        # A tool exchange in progress (action thread only): its operation, and whether the
        # tool voltage was cut and the changer switched (the tool-changer hooks).
        self._exchange: str | None = None
        self._voltage_cut = False
        self._changer_moved = False
        self._stop_generation = 0
        #: Held by :meth:`stop` and while a trajectory starts (and by a simulation reset).
        self.motion_lock = threading.Lock()

    # -- dispatches ------------------------------------------------------------------------------
    def execute(self, solution: Solution, *, replay: bool, play: Play) -> Future[None]:
        """Play a solution through ``play`` (:meth:`MotionStack.execute
        <erobs_bt.backends.stack.MotionStack.execute>`).

        Returns:
            A future completing when the last segment has finished, or failing with
            ``EXECUTION_FAILED:`` (start-state deviation, model revision mismatch, tool
            mismatch, stop), ``TIMEOUT:``/``REPLAY_TIMEOUT:`` or an injected error.
        """
        self._check_open()
        kind = "replay" if replay else "execute"
        dispatch = self.dispatch(
            kind,
            replay=replay,
            step_types=(),
            step_indices=lambda: sorted({s.step_index for s in solution.segments}),
        )

        def job() -> None:
            try:
                self.before_motion(dispatch)
                if solution.model_revision != self._state.model_revision():
                    raise MotionError(
                        ErrorCode.EXECUTION_FAILED,
                        f"solution planned for model revision {solution.model_revision}, "
                        f"the robot model is {self._state.model_revision()}",
                    )
                # Refuse a solution that does not start here before anything of it runs, tool
                # commands ahead of its first trajectory included.
                first = next((s for s in solution.segments if isinstance(s, ArmSegment)), None)
                if first is not None and first.points:
                    self._core.arm.check_start(first.points[0].positions, first.step_index)
                play(solution.segments, dispatch)
                self.after_dispatch(dispatch)
            except MotionError as exc:
                injected = dispatch.fault is not None and exc is dispatch.fault.error
                if replay and exc.code is ErrorCode.TIMEOUT and not injected:
                    raise MotionError(ErrorCode.REPLAY_TIMEOUT, exc.detail) from exc
                raise

        return submit(self._pool, job, ErrorCode.EXECUTION_FAILED, label=self._core.label)

    def run(self, dispatch: Dispatch, run: Callable[[], str]) -> Future[str]:
        """Run a single step's ``run()`` on the action worker as ``dispatch``, with its cut
        points before and after."""
        self._check_open()

        def job() -> str:
            self.before_motion(dispatch)
            message = run()
            self.after_dispatch(dispatch)
            return message

        return submit(self._pool, job, ErrorCode.EXECUTION_FAILED, label=self._core.label)

    def dispatch(
        self,
        kind: str,
        *,
        replay: bool,
        step_types: Sequence[str],
        step_indices: Sequence[int] | Callable[[], Sequence[int]],
    ) -> Dispatch:
        """Count a dispatch for fault injection.

        ``step_indices``: the steps involved, or a call that lists them (made only when
        faults are configured).
        """
        lock = self._core.lock
        if self._faults is None or not self._faults.active:  # nothing to count or fire (the usual case)
            with lock:
                return Dispatch(fault=None, stop_generation=self._stop_generation)
        if callable(step_indices):
            step_indices = step_indices()
        fault = self._faults.on_dispatch(
            kind, replay=replay, step_types=step_types, step_indices=step_indices
        )
        with lock:
            generation = self._stop_generation
        return Dispatch(fault=fault, stop_generation=generation)

    def before_motion(self, dispatch: Dispatch) -> None:
        """Injected faults that end a dispatch before anything moves."""
        fault = dispatch.fault
        if fault is not None and fault.after_fraction is None:
            wait(fault.delay)
            dispatch.fired = True
            raise fault.error

    def after_dispatch(self, dispatch: Dispatch) -> None:
        """A motion fault whose cut point was never reached (no motion, or after_fraction 1) fires now."""
        if dispatch.fault is not None and not dispatch.fired:
            wait(dispatch.fault.delay)
            dispatch.fired = True
            raise dispatch.fault.error

    def check_stopped(self, dispatch: Dispatch) -> None:
        """Raises:
        MotionError: ``EXECUTION_FAILED: stopped by request`` when :meth:`stop` was called
            after ``dispatch`` began."""
        with self._core.lock:
            stopped = self._stop_generation != dispatch.stop_generation
        if stopped:
            raise MotionError(ErrorCode.EXECUTION_FAILED, "stopped by request")

    def stop(self) -> None:
        """Ramp the arm down and drop the trajectory; cancel the tools' commands in flight
        (:meth:`MotionStack.stop <erobs_bt.backends.stack.MotionStack.stop>`)."""
        with self.motion_lock:
            with self._core.lock:
                self._stop_generation += 1
            self._core.arm.stop()
        self.stop_tools()

    def stop_tools(self) -> None:
        """Cancel the tools' commands in flight and interrupt the tool changer (a relaunch)."""
        for driver in self._tool_drivers.values():
            driver.stop()
        self._changer.stop()

    # -- playing ---------------------------------------------------------------------------------
    def play(self, segments: Sequence[Segment], dispatch: Dispatch) -> None:
        """Execute segments in order in this thread; a motion fault stops the arm part-way."""
        core = self._core
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
            self.check_stopped(dispatch)
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
            with self.motion_lock:
                self.check_stopped(dispatch)
                started = core.arm.execute(segment, fault=fault_at)
            error = started.exception()
            if error is not None:
                if fault is not None and fault_at is not None and error is fault_at[1]:
                    dispatch.fired = True
                    wait(fault.delay)  # the simulated wait before the failure is reported
                raise error
            elapsed += segment.duration
            self._state.update_tools(lambda live: core.after_move(live, core.arm.joint_positions()))

    def tool_driver(self, gripper: str, what: str) -> ToolDriver:
        """The driver of ``gripper``.

        Raises:
            MotionError: ``EXECUTION_FAILED: <what>: no driver for the <gripper>``.
        """
        driver = self._tool_drivers.get(gripper)
        if driver is None:
            raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: no driver for the {gripper}")
        return driver

    def _apply_tool(self, segment: ToolSegment) -> None:
        """Check the command against the bookkeeping, send it to the tool, record its effect."""
        core = self._core
        what = f"step {segment.step_index}"
        q = core.arm.joint_positions()

        def effect(state: ToolState) -> tuple[ToolState, str]:
            return gripper_command(
                core.cell,
                state,
                segment.gripper,
                segment.command,
                q,
                contact_tolerance=core.contact_tolerance,
                where=what,
            )

        before = self._state.tools()
        outcome = effect(before)  # refused by the bookkeeping: nothing is sent
        sent = self.tool_driver(segment.gripper, what).command(segment.command, what=what)
        if sent is not None:
            _LOG.info("%s: %s", what, sent)

        def record(live: ToolState) -> ToolState:
            nonlocal outcome
            if live is not before:  # changed meanwhile (a goal's start): apply to the new state
                outcome = effect(live)
            return outcome[0]

        new = self._state.update_tools(record)
        core.planner.follow(new)
        _LOG.info("%s: %s", what, outcome[1])

    # -- tool exchanges --------------------------------------------------------------------------
    def set_tool_state(self, state: ToolState) -> None:
        """Replace the live tool state; in a tool exchange, switch the changer first (unlock
        in the dock; lock and power the new tool after a load)."""
        if self._exchange == "dock" and state.gripper == "none":
            self._changer.set_locked(False, what="tool_exchange dock")
            self._changer_moved = True
        elif self._exchange == "load" and state.gripper != "none":
            self._changer.set_locked(True, what="tool_exchange load")
            self._changer.set_power(True, what="tool_exchange load")
            self._changer_moved = True
        self._state.follow_tools(state)

    @contextmanager
    def exchange(self, operation: str) -> Iterator[None]:
        """A tool exchange (``dock`` or ``load``) runs inside: :meth:`play` and
        :meth:`set_tool_state` switch the changer in EROBS's order; once it has ended, the
        changer's ``exchanged`` lets the cell's drivers follow the new tool. A dock that fails
        with the tool still locked on gives the tool its voltage back."""
        self._exchange, self._voltage_cut, self._changer_moved = operation, False, False
        try:
            yield
            # Ended with the arm at rest: the drivers follow the new tool (EROBS relaunches).
            self._changer.exchanged(self._state.tools().gripper, what=f"tool_exchange {operation}")
        finally:
            restore = self._exchange == "dock" and self._voltage_cut and not self._changer_moved
            self._exchange = None
            if restore:
                # The dock failed with the tool still locked on: give it its power back.
                try:
                    self._changer.set_power(True, what="tool_exchange dock (restore)")
                except MotionError as exc:
                    _LOG.error("could not restore the tool voltage: %s", exc)

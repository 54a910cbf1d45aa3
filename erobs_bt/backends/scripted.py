"""A deterministic, scripted motion backend for tests and dry runs of the engine.

:class:`ScriptedBackend` implements :class:`~erobs_bt.backends.base.MotionBackend`
without any robot: it records every call (so a test can count dispatches) and answers
each one with the next queued :class:`Outcome` for that kind of call, or success when
none is queued. An outcome can succeed, fail with any error text (``REPLAY_TIMEOUT:
…``, ``EXECUTION_FAILED: …``), raise from the call itself, complete after a delay, or
wait on a :class:`threading.Event` that the test sets, which holds a unit "running"
for as long as the test needs to send pause or cancel.

Plans are straight two-point joint segments to each target's resolved joints (or a
zero-length segment when the target has none) and a tool segment per end_effector;
a plan's ``start_positions`` is the arm state it was planned from, ``None`` when that is
unknown; executing a solution moves the recorded arm state to its final point, and
:meth:`ScriptedBackend.stop` fails the execution in flight as a real stop would.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from erobs_bt.backends.base import (
    ArmSegment,
    ErrorCode,
    JointStateListener,
    MotionError,
    Segment,
    Solution,
    ToolSegment,
    TrajectoryPoint,
    as_motion_error,
)
from erobs_bt.script.model import EndEffector, JointPositions, MoveTo, Step, ToolExchange
from erobs_bt.world.cell import Obstacle
from erobs_bt.world.scene import World

#: Call kinds that can be scripted: ``plan``, ``execute`` (fresh), ``replay``
#: (execute with ``replay=True``), ``run_step``, ``prepare`` and ``scene_check`` (the
#: replay scene check: an outcome that fails refuses the replay with its error text).
CALL_KINDS = ("plan", "execute", "replay", "run_step", "prepare", "scene_check")

_ZERO6 = (0.0,) * 6


@dataclass(frozen=True)
class Outcome:
    """How one scripted call ends.

    Attributes:
        error: ``None`` for success, else the error text with its prefix.
        raises: an exception raised by the call itself instead of returning a future.
        fail_with: an exception (of any type) the future fails with.
        delay: [s] before the future completes.
        gate: when set, the future completes only after the event is set.
    """

    error: str | None = None
    raises: BaseException | None = None
    fail_with: BaseException | None = None
    delay: float = 0.0
    gate: threading.Event | None = None

    @staticmethod
    def ok(*, delay: float = 0.0, gate: threading.Event | None = None) -> Outcome:
        """Succeed (after ``delay`` seconds and/or once ``gate`` is set)."""
        return Outcome(delay=delay, gate=gate)

    @staticmethod
    def fail(error: str, *, delay: float = 0.0, gate: threading.Event | None = None) -> Outcome:
        """Fail with ``error`` (e.g. ``"REPLAY_TIMEOUT: controller did not answer"``)."""
        return Outcome(error=error, delay=delay, gate=gate)


@dataclass(frozen=True)
class Call:
    """One recorded backend call: its kind and what it was given."""

    kind: str
    detail: dict[str, Any] = field(default_factory=dict)


class ScriptedBackend:
    """A :class:`MotionBackend` whose outcomes are queued by the test.

    Why this class has more than 25 methods: it is a test double of the whole MotionBackend protocol (one
    method per protocol member) plus the few calls a test uses to queue outcomes and count dispatches.

    Args:
        start: initial arm state [rad], or ``None`` for "unknown" (as with mock hardware).
        gripper: the attached gripper.
        revision_prefix: model-revision prefix.
        cup_profile: ePick cup profile appended to the revision when the ePick is attached.
    """

    def __init__(
        self,
        *,
        start: JointPositions | None = _ZERO6,  # type: ignore[assignment]
        gripper: str = "epick",
        revision_prefix: str = "robot_models",
        cup_profile: str | None = "3mm_dia",
    ) -> None:
        self._lock = threading.Lock()
        self._positions = start
        self._gripper = gripper
        self._prefix = revision_prefix
        self._cup_profile = cup_profile
        self._queues: dict[str, deque[Outcome]] = defaultdict(deque)
        self.calls: list[Call] = []
        self.gripper_states: list[tuple[str, str]] = []
        self.stops = 0
        self._in_flight: set[Future[Any]] = set()
        self._world = World.of(())

    # -- scripting ---------------------------------------------------------------
    def script(self, kind: str, *outcomes: Outcome) -> None:
        """Queue outcomes for the next calls of ``kind`` (one of :data:`CALL_KINDS`).

        Raises:
            ValueError: unknown kind.
        """
        if kind not in CALL_KINDS:
            raise ValueError(f"unknown call kind {kind!r}; expected one of {CALL_KINDS}")
        with self._lock:
            self._queues[kind].extend(outcomes)

    def count(self, kind: str) -> int:
        """How many calls of ``kind`` were made (``execute`` and ``replay`` counted apart)."""
        with self._lock:
            return sum(1 for c in self.calls if c.kind == kind)

    def dispatches(self) -> int:
        """Trajectories sent to the robot: fresh executions plus replays."""
        return self.count("execute") + self.count("replay")

    def set_positions(self, positions: JointPositions | None) -> None:
        """Move the recorded arm state (as if someone jogged the robot)."""
        with self._lock:
            self._positions = positions

    # -- MotionBackend -------------------------------------------------------------
    def joint_positions(self) -> JointPositions | None:
        with self._lock:
            return self._positions

    def current_gripper(self) -> str:
        with self._lock:
            return self._gripper

    def model_revision(self) -> str:
        with self._lock:
            return self._revision()

    def dock_contents(self) -> None:
        """Unknown: no tool changer is modelled."""
        return None

    def world_obstacles(self) -> tuple[Obstacle, ...]:
        """The world last set (none at first); the scripted backend plans nothing in it."""
        with self._lock:
            return self._world.obstacles

    def set_world_obstacles(self, obstacles: Sequence[Obstacle]) -> str:
        """Keep ``obstacles`` as the world (checked as the motion stack checks them).

        Raises:
            ValueError: malformed obstacles (:func:`erobs_bt.world.scene.check_obstacles`).
        """
        world = World.of(obstacles, where="set_world_obstacles")
        with self._lock:
            self._world = world
        return world.revision

    def scene_revision(self) -> str:
        """The revision of :meth:`world_obstacles`."""
        with self._lock:
            return self._world.revision

    def prepare_goal(self, start_gripper: str) -> None:
        outcome = self._next("prepare", {"start_gripper": start_gripper})
        if outcome.raises is not None:
            raise outcome.raises
        if outcome.error is not None:
            raise as_motion_error(RuntimeError(outcome.error), default=ErrorCode.EXECUTION_FAILED)
        with self._lock:
            self._gripper = start_gripper

    def plan(
        self, steps: Sequence[Step], *, start: JointPositions | None, after: Solution | None = None
    ) -> Future[Solution]:
        """Straight segments from ``start`` (or the recorded state); ``after`` is recorded
        (``detail["ahead"]``) and changes nothing else (no tool state is modelled).

        The future honours cancellation until the outcome is applied: a cancelled gated
        plan never completes.
        """
        outcome = self._next(
            "plan", {"steps": [s.index for s in steps], "start": start, "ahead": after is not None}
        )
        with self._lock:
            known = start if start is not None else self._positions
            gripper = self._gripper
            revision = self._revision()
            scene = self._world.revision
        # With no known arm state the trajectory is drawn from zeros, but the solution
        # does not pretend to know where it starts (start_positions stays None).
        origin = known if known is not None else _ZERO6
        solution = Solution(_straight_segments(steps, origin, gripper), revision, known, scene_revision=scene)
        return self._complete(outcome, lambda: solution, cancellable=True)

    def execute(self, solution: Solution, *, replay: bool) -> Future[None]:
        kind = "replay" if replay else "execute"
        outcome = self._next(kind, {"segments": len(solution.segments), "replay": replay})

        def apply() -> None:
            final = solution.final_positions()
            with self._lock:
                # An unknown arm state (mock hardware) stays unknown.
                if final is not None and self._positions is not None:
                    self._positions = tuple(final)  # type: ignore[assignment]
                for segment in solution.segments:
                    if isinstance(segment, ToolSegment):
                        self.gripper_states.append((segment.gripper, segment.command))

        return self._complete(outcome, apply, moves=True)

    @property
    def checks_replay(self) -> bool:
        """Always true: the check answers with the next ``scene_check`` outcome."""
        return True

    def check_replay(self, solution: Solution, steps: Sequence[Step]) -> str | None:
        """The next queued ``scene_check`` outcome: ``None`` for success (the default), else
        its error text (what a refused replay reports). Delays and gates do not apply."""
        outcome = self._next("scene_check", {"segments": len(solution.segments)})
        return outcome.error

    def run_step(self, step: Step) -> Future[str]:
        outcome = self._next("run_step", {"step": step.index, "task_type": step.task_type})

        def apply() -> str:
            if isinstance(step, ToolExchange):
                with self._lock:
                    self._gripper = "none" if step.operation == "dock" else step.gripper
                return f"{step.operation} {step.gripper}: done"
            return f"{step.task_type}: done"

        return self._complete(outcome, apply, moves=True)

    def stop(self) -> None:
        """Count the stop and fail every execution in flight (``EXECUTION_FAILED``), as a
        controller that decelerates and drops its trajectory would."""
        with self._lock:
            self.stops += 1
            in_flight, self._in_flight = self._in_flight, set()
        for future in in_flight:
            self._settle(future, MotionError(ErrorCode.EXECUTION_FAILED, "stopped by request"))

    def close(self) -> None:
        """Nothing to release (no threads of its own)."""

    def add_joint_state_listener(self, listener: JointStateListener, *, rate: float | None = None) -> bool:
        """False: no joint-state stream (callers poll :meth:`joint_positions`)."""
        return False

    def remove_joint_state_listener(self, listener: JointStateListener) -> None:
        """No-op (listeners are never added)."""

    @property
    def publishes_joint_states(self) -> bool:
        """False: no driver publishes this backend's joint states."""
        return False

    # -- internals -------------------------------------------------------------------
    def _revision(self) -> str:
        parts = [self._prefix, self._gripper]
        if self._gripper == "epick" and self._cup_profile:
            parts.append(self._cup_profile)
        return "__".join(parts)

    def _next(self, kind: str, detail: dict[str, Any]) -> Outcome:
        with self._lock:
            self.calls.append(Call(kind, detail))
            queue = self._queues[kind]
            return queue.popleft() if queue else Outcome()

    def _settle(self, future: Future[Any], error: BaseException | None, result: Any = None) -> None:
        """Complete ``future`` unless it already is (a stop and the outcome may race)."""
        with self._lock:
            if future.done():
                return
            self._in_flight.discard(future)
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

    def _complete(
        self, outcome: Outcome, on_success: Any, *, moves: bool = False, cancellable: bool = False
    ) -> Future[Any]:
        if outcome.raises is not None:
            raise outcome.raises
        future: Future[Any] = Future()
        if not cancellable:
            future.set_running_or_notify_cancel()
        if moves:
            with self._lock:
                self._in_flight.add(future)

        def finish() -> None:
            if outcome.gate is not None:
                outcome.gate.wait()
            if outcome.delay > 0:
                threading.Event().wait(outcome.delay)
            if future.done():
                return  # stopped (or cancelled) meanwhile: nothing of it is applied
            if cancellable and not future.set_running_or_notify_cancel():
                return
            if outcome.fail_with is not None:
                self._settle(future, outcome.fail_with)
            elif outcome.error is not None:
                self._settle(
                    future, as_motion_error(RuntimeError(outcome.error), default=ErrorCode.EXECUTION_FAILED)
                )
            else:
                try:
                    value = on_success()
                except MotionError as exc:
                    self._settle(future, exc)
                else:
                    self._settle(future, None, value)

        if outcome.gate is None and outcome.delay <= 0:
            finish()
        else:
            threading.Thread(target=finish, name="scripted-outcome", daemon=True).start()
        return future


def _straight_segments(steps: Sequence[Step], origin: Sequence[float], gripper: str) -> tuple[Segment, ...]:
    segments: list[Segment] = []
    here = tuple(float(a) for a in origin)
    for step in steps:
        if isinstance(step, MoveTo):
            goal = tuple(step.target_joints) if step.target_joints is not None else here
            points = (
                TrajectoryPoint(here, _ZERO6, _ZERO6, 0.0),
                TrajectoryPoint(goal, _ZERO6, _ZERO6, 1.0),
            )
            segments.append(ArmSegment(step.index, points))
            here = goal
        elif isinstance(step, EndEffector):
            segments.append(ToolSegment(step.index, step.gripper or gripper, step.action))
    return tuple(segments)

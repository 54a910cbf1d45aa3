"""The simulated arm controller: plays time-parameterised trajectories in simulated time.

Why a kinematic simulator (``docs/motion-planning.md`` §6): the planner hands over
trajectories that were collision-checked sample by sample, so the simulated robot must
stay *exactly* on them. :class:`SimController` therefore never integrates dynamics; it
advances a trajectory-time pointer ``τ`` at a fixed control rate of simulated time and
evaluates the trajectory at ``τ``. Between two samples it uses the cubic Hermite spline
through their positions and velocities, as ``joint_trajectory_controller`` does when
velocities are given (ROS 2 ``ros2_controllers``, "Trajectory Representation"). Samples
that lie on one straight joint segment (every sample of
:func:`~erobs_bt.planning.timing.time_parameterize`) have velocities parallel to
that segment, so the spline between them stays on it too.

Time: ``speed`` is simulated seconds per wall second (1.0 = real time, 10.0 for tests,
``math.inf`` = as fast as the CPU allows). The control loop keeps a wall-clock deadline
per iteration, so the simulated clock tracks ``speed`` × wall time without drift. One
iteration costs tens of microseconds of CPU, more than a 2 ms control period lasts at
``speed`` 1000, so at high speed one iteration advances several periods at once
(:data:`MIN_WALL_STEP`): playing a trajectory needs no integration (the arm *is* the
trajectory at ``τ = k·dt``), so this changes only how often the state is computed, not
the states. Faults fire and trajectories end at the same period at every speed, and the
stop ramp is still integrated period by period, so the final states do not depend on
``speed``.

A trajectory's clock starts when :meth:`SimController.execute` is called (not when the
controller thread wakes up for it), an iteration that finds the loop behind its deadline
advances the lag's worth of periods at once, and a trajectory's future completes no
earlier than ``duration / speed`` after the call: the wake-up and set-up costs of a goal
are absorbed instead of capping the speed, and the speed is never exceeded.
:meth:`SimController.playback` reports what was delivered (simulated seconds of motion
against the wall time they took), measured, so a front end can say it.

Stopping, like UR's speed slider (motion-planning.md §6): a time-scaling factor ``s``
(1 while playing) is ramped to 0, so the arm decelerates along the trajectory path and
stays on it. Joint velocity is ``s·q′(τ)`` and acceleration ``s²·q″(τ) + ṡ·q′(τ)``; each
control period picks the largest ``|ṡ|`` with ``|ṡ·q′_i| ≤ a_i − s²·|q″_i|`` for every
joint, so the ramp respects the acceleration limits ``a`` whenever the trajectory itself
stays below 95 % of them (the remaining 5 % is a floor that guarantees the ramp ends).
When ``s`` reaches 0 the trajectory is dropped and its future fails with
``EXECUTION_FAILED``. Injected execution faults use the same ramp.

Joint states come from the controller's own clock: while a trajectory plays, each
listener is called every ``speed / rate`` seconds of *simulated* time, counted in control
periods (so ``rate`` per wall second at the nominal speed). A thread that is starved for a
while (heavy planning) catches up in simulated time, so no state of the schedule is lost
and the rate per simulated second is exact; a wall-clock throttle would drop states instead.

Start-state tolerance: like a real controller, a trajectory whose first point is more
than ``start_tolerance`` (default 0.01 rad) from the live state is rejected with
``EXECUTION_FAILED``; this is what protects a cached trajectory replayed from a slightly
different start (docs/behaviour.md §4).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from erobs_bt.backends.base import ArmSegment, ErrorCode, JointStateListener, MotionError
from erobs_bt.motion import START_TOLERANCE
from erobs_bt.script.model import JOINT_NAMES, JointPositions
from erobs_bt.world.kinematics import ACCELERATION_LIMITS

_LOG = logging.getLogger(__name__)

#: Default control rate [Hz of simulated time] (the UR e-series control rate, 500 Hz).
DEFAULT_CONTROL_RATE = 500.0
#: Default start-state tolerance [rad] (max-norm over the joints): :data:`erobs_bt.motion.START_TOLERANCE`.
DEFAULT_START_TOLERANCE = START_TOLERANCE
#: Default rate of joint-state notifications [Hz of wall time].
DEFAULT_STATE_RATE = 50.0
#: Least wall time [s] one control-loop iteration stands for; at high ``speed`` an
#: iteration advances several control periods at once (see :meth:`SimController._advance`).
MIN_WALL_STEP = 0.0005
#: Most control periods one loop iteration advances (10 s of simulated time at 500 Hz).
MAX_PERIODS_PER_STEP = 5000
#: Wall time [s] before a trajectory's end that the loop stops sleeping and polls the clock.
_END_SPIN = 0.0002
#: Fraction of the acceleration limit always available to the stop ramp.
_RAMP_FLOOR = 0.05
#: Velocities below this [rad/s] do not constrain the stop ramp.
_TINY_VELOCITY = 1e-9

__all__ = [
    "JointState",
    "JointStateListener",
    "PathToleranceViolation",
    "Playback",
    "SimController",
    "Tracking",
    "TrajectoryReplaced",
]

#: :meth:`SimController.tracking`: ``(τ, duration, since_end, desired, actual, velocity)``.
Tracking = tuple[float, float, float | None, tuple[float, ...], tuple[float, ...], tuple[float, ...]]


class PathToleranceViolation(MotionError):
    """The arm left the path tolerance of the commanded trajectory (a joint trajectory
    controller's PATH_TOLERANCE_VIOLATED); the arm holds where it was then.

    Attributes:
        joint: the index of the first joint out of tolerance.
        error: its distance from the commanded sample [rad].
        tolerance: its path tolerance [rad].
        tau: the trajectory time of the sample [s].
    """

    def __init__(self, joint: int, error: float, tolerance: float, tau: float, step_index: int) -> None:
        super().__init__(
            ErrorCode.EXECUTION_FAILED,
            f"trajectory of step {step_index}: joint {joint} is {error:.4f} rad from the trajectory at "
            f"{tau:.3f} s (path tolerance {tolerance:g} rad)",
        )
        self.joint, self.error, self.tolerance, self.tau = joint, error, tolerance, tau


class TrajectoryReplaced(MotionError):
    """A trajectory dropped for another one (:meth:`SimController.replace`, :meth:`SimController.hold`)."""


@dataclass
class _Subscriber:
    """A listener and its schedule on the simulated clock."""

    listener: JointStateListener
    period: float  # [s of simulated time] between notifications while moving
    due: float = 0.0  # simulated time of the next notification


@dataclass(frozen=True)
class JointState:
    """A snapshot of the simulated arm.

    Attributes:
        names: joint names (:data:`~erobs_bt.script.model.JOINT_NAMES` order).
        positions: [rad].
        velocities: [rad/s].
        sim_time: simulated time since the controller started [s].
    """

    names: tuple[str, ...]
    positions: tuple[float, ...]
    velocities: tuple[float, ...]
    sim_time: float


@dataclass(frozen=True)
class Playback:
    """What the controller delivered, measured: simulated time of motion against wall time.

    Attributes:
        trajectories: trajectories played to their end or to a stop (rejected ones excluded).
        simulated: simulated seconds of motion they took (a stop ramp included).
        wall: wall seconds from each :meth:`SimController.execute` call to the end of its
            motion, summed (time between trajectories is not counted).
    """

    trajectories: int = 0
    simulated: float = 0.0
    wall: float = 0.0

    @property
    def factor(self) -> float:
        """Delivered simulated seconds per wall second (``math.inf`` when no wall time
        elapsed, ``nan`` when nothing was played)."""
        if self.simulated <= 0.0:
            return math.nan
        return self.simulated / self.wall if self.wall > 0.0 else math.inf


class _Active:
    """The trajectory being played (owned by the controller, guarded by its lock)."""

    def __init__(
        self,
        times: NDArray[np.float64],
        positions: NDArray[np.float64],
        velocities: NDArray[np.float64],
        future: Future[None],
        fault: tuple[float, MotionError] | None,
        step_index: int,
        called: float,
    ) -> None:
        self.called = called  # time.monotonic() of the execute() call: the clock's origin
        self.started: float | None = None  # simulated time when the controller took it
        self.times = times
        self.positions = positions
        self.velocities = velocities
        self.future = future
        self.fault = fault
        self.step_index = step_index
        self.duration = float(times[-1])
        self.tau = 0.0
        self.steps = 0  # periods of full-speed play since ``base``
        self.base = 0.0  # τ where the present stretch of full-speed play began
        self.scaled = True  # False: a hold (the arm's own stop), which speed scaling does not slow
        self.ended_at: float | None = None  # simulated time when τ reached the end
        self.path_tolerance: NDArray[np.float64] | None = None  # checked while moving (tracking)
        self.scale = 1.0
        self.index = 0
        self.stop_error: MotionError | None = None

    def periods_until(self, fault_time: float, dt: float) -> int:
        """Periods of normal play (at least 1) until ``τ = min(duration, k·dt)`` first
        reaches ``fault_time`` or the end."""
        target = min(fault_time, self.duration)
        k = max(self.steps + 1, math.ceil((target - self.base) / dt) - 1)
        while k > self.steps + 1 and min(self.duration, self.base + (k - 1) * dt) >= target:
            k -= 1
        while min(self.duration, self.base + k * dt) < target:
            k += 1
        return k - self.steps

    def locate(self, tau: float) -> int:
        """Index ``k`` with ``times[k] <= tau <= times[k + 1]`` (the pointer only moves forward)."""
        last = len(self.times) - 2
        while self.index < last and self.times[self.index + 1] <= tau:
            self.index += 1
        return self.index

    def evaluate(self, tau: float) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Position, velocity (d/dτ) and acceleration (d²/dτ²) of the Hermite spline at ``tau``."""
        if len(self.times) == 1 or tau >= self.duration:
            zeros = np.zeros_like(self.positions[-1])
            return self.positions[-1].copy(), zeros, zeros
        k = self.locate(tau)
        t0, t1 = self.times[k], self.times[k + 1]
        h = t1 - t0
        p0, p1 = self.positions[k], self.positions[k + 1]
        v0, v1 = self.velocities[k], self.velocities[k + 1]
        u = (tau - t0) / h
        u2, u3 = u * u, u * u * u
        position = (
            (2 * u3 - 3 * u2 + 1) * p0
            + (u3 - 2 * u2 + u) * h * v0
            + (-2 * u3 + 3 * u2) * p1
            + (u3 - u2) * h * v1
        )
        velocity = ((6 * u2 - 6 * u) * p0 + (3 * u2 - 4 * u + 1) * h * v0 + (-6 * u2 + 6 * u) * p1) / h + (
            3 * u2 - 2 * u
        ) * v1
        acceleration = (
            (12 * u - 6) * p0 + (6 * u - 4) * h * v0 + (-12 * u + 6) * p1 + (6 * u - 2) * h * v1
        ) / (h * h)
        return position, velocity, acceleration


class SimController:
    """A kinematic joint-trajectory controller for the simulated UR5e, in its own thread.

    Why this class is long: it is one control loop (a thread advancing simulated time) and every public
    method reads or changes that loop's state under one condition variable: trajectory admission, hold,
    replace, stop ramps, the speed slider and the playback measure. Splitting it would put the loop's state
    behind a second lock.

    Thread safety: every public method may be called from any thread. Listeners and
    future callbacks run on the controller thread, outside its lock.

    Args:
        initial_positions: the arm state at start-up [rad], six values.
        joint_names: the controlled joints, in the order of the position vectors.
        speed: simulated seconds per wall second (> 0; ``math.inf`` = no waiting).
        control_rate: control-loop rate [Hz of simulated time].
        acceleration_limits: per-joint limits for the stop ramp [rad/s²]
            (default :data:`~erobs_bt.world.kinematics.ACCELERATION_LIMITS`).
        start_tolerance: largest allowed distance [rad] (any joint) between the live
            state and a trajectory's first point.
        state_rate: default joint-state notifications per wall second at the nominal
            ``speed`` (per listener: :meth:`add_listener`); the final state of every
            trajectory is always notified.
        velocity_limits: per-joint speed limits of the arm [rad/s], or ``None`` (default) for
            an arm that is exactly where the trajectory says. With limits, the arm follows the
            commanded position no faster than them: a trajectory that asks more leaves a
            tracking error (:meth:`tracking`), and a trajectory ends once the arm is at its last
            point.

    Raises:
        ValueError: bad arguments (the message names the argument).
    """

    def __init__(
        self,
        initial_positions: Sequence[float],
        *,
        joint_names: Sequence[str] = JOINT_NAMES,
        speed: float = 1.0,
        control_rate: float = DEFAULT_CONTROL_RATE,
        acceleration_limits: Sequence[float] | NDArray[np.float64] = ACCELERATION_LIMITS,
        start_tolerance: float = DEFAULT_START_TOLERANCE,
        state_rate: float = DEFAULT_STATE_RATE,
        velocity_limits: Sequence[float] | NDArray[np.float64] | None = None,
    ) -> None:
        names = tuple(str(n) for n in joint_names)
        q0 = np.asarray(initial_positions, dtype=float)
        if q0.shape != (len(names),) or not np.all(np.isfinite(q0)):
            raise ValueError(f"initial_positions: expected {len(names)} finite values, got {list(q0)}")
        if not (speed > 0.0) or math.isnan(speed):
            raise ValueError(f"speed: must be > 0 (math.inf for no waiting), got {speed}")
        if not (math.isfinite(control_rate) and control_rate > 0.0):
            raise ValueError(f"control_rate: must be finite and > 0 Hz, got {control_rate}")
        accel = np.broadcast_to(np.asarray(acceleration_limits, dtype=float), (len(names),)).copy()
        if not np.all(np.isfinite(accel)) or np.any(accel <= 0.0):
            raise ValueError(f"acceleration_limits: must be finite and > 0, got {accel.tolist()}")
        if not (math.isfinite(start_tolerance) and start_tolerance >= 0.0):
            raise ValueError(f"start_tolerance: must be finite and >= 0 rad, got {start_tolerance}")
        if not (math.isfinite(state_rate) and state_rate > 0.0):
            raise ValueError(f"state_rate: must be finite and > 0 Hz, got {state_rate}")
        self._names = names
        self._speed = float(speed)
        self._speed_scaling = 1.0
        self._vmax = (
            None
            if velocity_limits is None
            else np.broadcast_to(np.asarray(velocity_limits, dtype=float), (len(names),)).copy()
        )
        if self._vmax is not None and (not np.all(np.isfinite(self._vmax)) or np.any(self._vmax <= 0.0)):
            raise ValueError(f"velocity_limits: must be finite and > 0, got {self._vmax.tolist()}")
        self._period = 1.0 / control_rate
        self._accel = accel
        self._start_tolerance = float(start_tolerance)
        self._state_rate = float(state_rate)
        self._state_period = 1.0 / state_rate
        self._cond = threading.Condition()
        self._positions = q0
        self._desired = q0.copy()
        self._velocities = np.zeros_like(q0)
        self._sim_time = 0.0
        self._active: _Active | None = None
        self._listeners: list[_Subscriber] = []
        self._playback = Playback()
        self._shutdown = False
        self._idle = threading.Event()
        self._idle.set()
        self._thread = threading.Thread(target=self._run, name="sim-controller", daemon=True)
        self._thread.start()

    # -- state ---------------------------------------------------------------------------
    @property
    def joint_names(self) -> tuple[str, ...]:
        """The controlled joints."""
        return self._names

    @property
    def speed(self) -> float:
        """Simulated seconds per wall second."""
        return self._speed

    def playback(self) -> Playback:
        """What the controller has delivered since it started (see :class:`Playback`)."""
        with self._cond:
            return self._playback

    def joint_positions(self) -> JointPositions:
        """The live arm state [rad], :attr:`joint_names` order."""
        with self._cond:
            return tuple(self._positions.tolist())  # type: ignore[return-value]  # Python floats

    def joint_state(self) -> JointState:
        """Names, positions [rad], velocities [rad/s] and simulated time [s], taken together."""
        with self._cond:
            return self._snapshot()

    def is_busy(self) -> bool:
        """True while a trajectory is playing (including a stop ramp)."""
        with self._cond:
            return self._active is not None

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no trajectory is playing; returns False on timeout [s of wall time]."""
        return self._idle.wait(timeout)

    def set_joint_positions(self, positions: Sequence[float]) -> None:
        """Place the arm at ``positions`` [rad] at rest (an operator jogging the robot).

        Raises:
            RuntimeError: a trajectory is playing.
            ValueError: not one finite value per joint.
        """
        q = np.asarray(positions, dtype=float)
        if q.shape != (len(self._names),) or not np.all(np.isfinite(q)):
            raise ValueError(f"positions: expected {len(self._names)} finite values, got {list(q)}")
        with self._cond:
            if self._active is not None:
                raise RuntimeError("cannot set joint positions while a trajectory is executing")
            self._positions = q.copy()
            self._velocities = np.zeros_like(q)
            snapshot = self._snapshot()
        self._notify(snapshot)

    # -- listeners -----------------------------------------------------------------------
    def check_start(self, positions: Sequence[float], step_index: int) -> None:
        """Raise unless ``positions`` [rad] is within the start tolerance of the live state.

        The same test :meth:`execute` applies to a trajectory's first point; a caller that
        has other effects to apply before the first trajectory (tool commands) checks first.

        Raises:
            MotionError: ``EXECUTION_FAILED: goal rejected: trajectory of step … starts …``.
        """
        with self._cond:
            rejection = self._start_rejection(np.asarray(positions, dtype=float), step_index)
        if rejection is not None:
            raise rejection

    def _start_rejection(self, first: NDArray[np.float64], step_index: int) -> MotionError | None:
        deviation = np.abs(first - self._positions)
        worst = int(np.argmax(deviation))
        if deviation[worst] <= self._start_tolerance:
            return None
        return MotionError(
            ErrorCode.EXECUTION_FAILED,
            f"goal rejected: trajectory of step {step_index} starts "
            f"{deviation[worst]:.4f} rad from the robot state at {self._names[worst]} "
            f"(start tolerance {self._start_tolerance} rad)",
        )

    def add_listener(self, listener: JointStateListener, *, rate: float | None = None) -> None:
        """Call ``listener(names, positions, velocities)`` with joint-state updates.

        While a trajectory plays, updates come every ``speed / rate`` seconds of simulated
        time (``rate`` per wall second at the nominal speed; every simulated second when
        ``speed`` is infinite), on the controller's own clock, plus the final state of every
        trajectory. While idle, the resting state is repeated ``state_rate`` times per wall
        second. Called on the controller thread, outside its lock.

        Args:
            listener: the callback.
            rate: [Hz] notifications per wall second at the nominal speed, > 0
                (default: the controller's ``state_rate``).

        Raises:
            ValueError: ``rate`` is not finite and > 0.
        """
        hertz = self._state_rate if rate is None else float(rate)
        if not (math.isfinite(hertz) and hertz > 0.0):
            raise ValueError(f"rate: must be finite and > 0 Hz, got {rate}")
        period = (self._speed if math.isfinite(self._speed) else 1.0) / hertz
        with self._cond:
            self._listeners.append(_Subscriber(listener, period, self._sim_time))
            self._cond.notify_all()

    def remove_listener(self, listener: JointStateListener) -> None:
        """Stop notifying ``listener`` (no error when it was not registered)."""
        with self._cond:
            self._listeners = [s for s in self._listeners if s.listener is not listener]

    # -- commands ------------------------------------------------------------------------
    def execute(
        self,
        segment: ArmSegment,
        *,
        fault: tuple[float, MotionError] | None = None,
        path_tolerance: Sequence[float] | None = None,
    ) -> Future[None]:
        """Start playing an arm trajectory.

        Args:
            segment: the trajectory; ``points[0]`` must be within the start tolerance
                of the live state. Joint names may come in any order of the same set.
            fault: ``(t, error)`` to simulate a failure: at trajectory time ``t`` [s]
                the arm ramps down as for :meth:`stop` and the future fails with
                ``error`` (fault injection).
            path_tolerance: per joint [rad] (0: not enforced), with ``velocity_limits`` only:
                while the trajectory plays, an arm further than this from the commanded sample
                stops where it is and the future fails with :class:`PathToleranceViolation`.

        Returns:
            A future that completes when the last point is reached (the arm is then
            exactly there), or fails with :class:`MotionError`: ``EXECUTION_FAILED`` for
            a rejected trajectory (busy controller, start-state deviation, malformed
            points) or a stop, or the injected ``error``.
        """
        called = time.monotonic()
        future: Future[None] = Future()
        future.set_running_or_notify_cancel()
        try:
            times, positions, velocities = self._arrays(segment)
        except MotionError as exc:
            future.set_exception(exc)
            return future
        with self._cond:
            if self._shutdown:
                future.set_exception(MotionError(ErrorCode.EXECUTION_FAILED, "controller is shut down"))
                return future
            if self._active is not None:
                future.set_exception(
                    MotionError(
                        ErrorCode.EXECUTION_FAILED,
                        f"goal rejected: the controller is executing the trajectory of step "
                        f"{self._active.step_index}",
                    )
                )
                return future
            rejection = self._start_rejection(positions[0], segment.step_index)
            if rejection is not None:
                future.set_exception(rejection)
                return future
            if times[0] > 0.0:
                # ROS semantics: a first point after t = 0 is reached from the live state.
                times = np.concatenate(([0.0], times))
                positions = np.vstack((self._positions, positions))
                velocities = np.vstack((np.zeros_like(self._positions), velocities))
            self._active = _Active(times, positions, velocities, future, fault, segment.step_index, called)
            if path_tolerance is not None:
                self._active.path_tolerance = np.asarray(path_tolerance, dtype=float)
            for subscriber in self._listeners:
                subscriber.due = self._sim_time  # the first control period notifies
            self._idle.clear()
            self._cond.notify_all()
        return future

    def stop(self) -> None:
        """Decelerate along the current trajectory within the acceleration limits, then drop it.

        The trajectory's future fails with ``EXECUTION_FAILED`` once the arm is at rest.
        Non-blocking and idempotent (no effect when idle); see :meth:`wait_idle`.
        """
        with self._cond:
            active = self._active
            if active is not None and active.stop_error is None:
                active.stop_error = MotionError(
                    ErrorCode.EXECUTION_FAILED,
                    f"trajectory of step {active.step_index} stopped at "
                    f"{active.tau:.3f} s of {active.duration:.3f} s",
                )
                self._cond.notify_all()

    def speed_scaling(self) -> float:
        """The speed scaling a trajectory plays at now, in [0, 1] (it follows
        :meth:`set_speed_scaling` within the acceleration limits; 1 while idle)."""
        with self._cond:
            active = self._active
            return active.scale if active is not None and active.stop_error is None else self._speed_scaling

    def set_speed_scaling(self, factor: float) -> None:
        """Play trajectories at ``factor`` × their own speed, like UR's speed scaling (the
        speed slider times 0 while the program is paused): trajectory time advances
        ``factor`` × simulated time, so the arm stays on the path; a change is ramped within
        the acceleration limits (joint velocity ``s·q′(τ)``, as for :meth:`stop`). At 0 the
        trajectory stays in play, the arm at rest on its path, until the factor rises again.

        Raises:
            ValueError: ``factor`` is not in [0, 1].
        """
        if not (0.0 <= factor <= 1.0):
            raise ValueError(f"speed scaling: must be in [0, 1], got {factor}")
        with self._cond:
            self._speed_scaling = float(factor)
            self._cond.notify_all()

    def hold(self, positions: Sequence[float], step_index: int = -1) -> Future[None]:
        """Command a step to ``positions`` [rad] at once, dropping the trajectory in play
        (joint_trajectory_controller's hold command on a cancel: the position measured then).

        The simulated arm cannot stop in zero time: from its present velocity ``v`` it brakes
        at constant deceleration (each joint within its acceleration limit, all stopping
        together at ``t1 = max |v_i| / a_i``), then returns rest to rest to ``positions`` (a
        cubic whose peak acceleration ``6 d / T²`` is within the limits), as one trajectory, so
        the joint states show motion until it is there. The dropped trajectory's future fails
        with ``EXECUTION_FAILED``.

        Returns:
            A future that completes when the arm is at ``positions``, at rest.

        Raises:
            ValueError: not one finite value per joint.
        """
        target = np.asarray(positions, dtype=float)
        if target.shape != (len(self._names),) or not np.all(np.isfinite(target)):
            raise ValueError(f"positions: expected {len(self._names)} finite values, got {list(target)}")
        with self._cond:
            q, v = self._positions.copy(), self._velocities.copy()
            brake = float(np.max(np.abs(v) / self._accel))
            times, points, speeds = [0.0], [q], [v]
            if brake > 0.0:
                times.append(brake)
                points.append(q + 0.5 * v * brake)
                speeds.append(np.zeros_like(q))
            distance = float(np.max(np.abs(target - points[-1]) / self._accel))
            if distance > 0.0:
                times.append(times[-1] + math.sqrt(6.0 * distance))
                points.append(target)
                speeds.append(np.zeros_like(q))
            return self._swap(np.array(times), np.array(points), np.array(speeds), step_index, scaled=False)

    def replace(
        self,
        segment: ArmSegment,
        *,
        fault: tuple[float, MotionError] | None = None,
        path_tolerance: Sequence[float] | None = None,
    ) -> Future[None]:
        """Play ``segment`` at once in place of the trajectory in play, from the present state
        (joint_trajectory_controller on a new goal or a trajectory from its topic: no stop
        between, a first point after ``t = 0`` is reached from where the arm is, at its present
        velocity); no start check. The dropped trajectory's future fails with
        :class:`TrajectoryReplaced`. ``fault`` and ``path_tolerance`` as for :meth:`execute`.

        Returns:
            A future that completes when the segment's last point is reached.

        Raises:
            MotionError: ``EXECUTION_FAILED`` for a malformed segment (nothing is replaced).
        """
        times, positions, velocities = self._arrays(segment)
        with self._cond:
            if times[0] > 0.0:
                times = np.concatenate(([0.0], times))
                positions = np.vstack((self._positions, positions))
                velocities = np.vstack((self._velocities, velocities))
            future = self._swap(times, positions, velocities, segment.step_index, scaled=True)
            if self._active is not None and self._active.future is future:
                self._active.fault = fault
                if path_tolerance is not None:
                    self._active.path_tolerance = np.asarray(path_tolerance, dtype=float)
            return future

    def _swap(
        self,
        times: NDArray[np.float64],
        positions: NDArray[np.float64],
        velocities: NDArray[np.float64],
        step_index: int,
        *,
        scaled: bool,
    ) -> Future[None]:
        """Put a new trajectory in play at once and fail the dropped one's future. Caller holds
        the lock (reentrant: a future's done-callback may call back into the controller)."""
        future: Future[None] = Future()
        future.set_running_or_notify_cancel()
        dropped = self._active
        if len(times) == 1:
            self._active = None
        else:
            self._active = _Active(times, positions, velocities, future, None, step_index, time.monotonic())
            self._active.scaled = scaled
            for subscriber in self._listeners:
                subscriber.due = self._sim_time
            self._idle.clear()
        self._cond.notify_all()
        if dropped is not None:
            dropped.future.set_exception(
                TrajectoryReplaced(
                    ErrorCode.EXECUTION_FAILED,
                    f"trajectory of step {dropped.step_index} replaced at "
                    f"{dropped.tau:.3f} s of {dropped.duration:.3f} s",
                )
            )
        if len(times) == 1:
            future.set_result(None)
            self._idle.set()
        return future

    def shutdown(self, timeout: float | None = 5.0) -> None:
        """Drop any trajectory at once (its future fails) and join the controller thread.

        Idempotent. After shutdown :meth:`execute` fails at once.
        """
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # -- internals -----------------------------------------------------------------------
    def _periods_until_due(self, periods: int) -> int:
        """At most ``periods``, and no further than the next listener's scheduled state (at
        least 1), so coarse steps never skip a state of a listener's schedule. Caller holds
        the lock."""
        if not self._listeners:
            return periods
        next_due = min(s.due for s in self._listeners)
        until = math.ceil((next_due - self._sim_time) / self._period - 1e-9)
        return max(1, min(periods, until))

    def _periods_per_iteration(self, lag: float = 0.0) -> int:
        """Control periods for the next loop iteration: enough that an iteration spans at least
        :data:`MIN_WALL_STEP` of wall time (1 up to ``speed`` 7; 250 at ``speed`` 1000), so the
        loop's own cost (tens of µs) never caps the speed, plus the periods of ``lag`` [s of wall
        time the loop is behind its deadline], so a late start or a starved thread is made up in
        one step; at most :data:`MAX_PERIODS_PER_STEP` (always that at ``speed = inf``)."""
        if not math.isfinite(self._speed):
            return MAX_PERIODS_PER_STEP
        periods = (MIN_WALL_STEP + max(0.0, lag)) * self._speed / self._period
        return max(1, min(MAX_PERIODS_PER_STEP, int(periods)))

    def _arrays(
        self, segment: ArmSegment
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Validate a segment and return (times, positions, velocities) in controller joint order."""
        where = f"trajectory of step {segment.step_index}"
        if not segment.points:
            raise MotionError(ErrorCode.EXECUTION_FAILED, f"goal rejected: {where} has no points")
        names = tuple(segment.joint_names)
        if sorted(names) != sorted(self._names) or len(set(names)) != len(names):
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"goal rejected: {where} has joints {list(names)}, the controller {list(self._names)}",
            )
        order = [names.index(n) for n in self._names]
        try:
            times = np.array([p.time_from_start for p in segment.points], dtype=float)
            positions = np.array([p.positions for p in segment.points], dtype=float)[:, order]
            velocities = np.array(
                [p.velocities if p.velocities else (0.0,) * len(names) for p in segment.points], dtype=float
            )[:, order]
        except (ValueError, IndexError) as exc:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED, f"goal rejected: {where} is malformed ({exc})"
            ) from exc
        if not (
            np.all(np.isfinite(times)) and np.all(np.isfinite(positions)) and np.all(np.isfinite(velocities))
        ):
            raise MotionError(ErrorCode.EXECUTION_FAILED, f"goal rejected: {where} contains NaN or infinity")
        if times[0] < 0.0 or np.any(np.diff(times) < 0.0):
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"goal rejected: {where} has time_from_start values that are negative or decreasing",
            )
        # Zero-length intervals carry no motion: keep the later sample of each.
        keep = np.concatenate((np.diff(times) > 0.0, [True]))
        keep[0] = True
        return times[keep], positions[keep], velocities[keep]

    def _snapshot(self) -> JointState:
        return JointState(
            self._names,
            tuple(self._positions.tolist()),  # Python floats, as float(x) each gave, in one call
            tuple(self._velocities.tolist()),
            self._sim_time,
        )

    def _due(self, finished: bool) -> list[JointStateListener]:
        """The listeners whose simulated-time schedule is due (all when ``finished``);
        advances their schedules. Caller holds the lock."""
        due: list[JointStateListener] = []
        # Half a control period of slack absorbs the float sum of the simulated clock.
        now = self._sim_time + 0.5 * self._period
        for subscriber in self._listeners:
            if finished or subscriber.due <= now:
                due.append(subscriber.listener)
                subscriber.due += subscriber.period
                if subscriber.due <= now:
                    subscriber.due = self._sim_time + subscriber.period
        return due

    def _notify(self, snapshot: JointState, listeners: list[JointStateListener] | None = None) -> None:
        if listeners is None:
            with self._cond:
                listeners = [s.listener for s in self._listeners]
        for listener in listeners:
            try:
                listener(snapshot.names, snapshot.positions, snapshot.velocities)
            except Exception:
                _LOG.exception("joint-state listener %r failed", listener)

    def _advance(self, active: _Active, periods: int) -> MotionError | bool | None:
        """Advance ``periods`` control periods. Returns False while playing, True when done,
        or the failure.

        Normal play needs no integration: ``τ`` is ``k·dt`` after ``k`` periods and the arm
        is the trajectory evaluated there, so many periods are taken in one jump and the
        trajectory is evaluated once, at the end of the jump (the coarse integration that
        lets high ``speed`` values be honoured). The jump never passes the period at which
        an injected fault fires or the trajectory ends, so those happen at the same ``τ``
        at any speed. A stop ramp is integrated period by period.
        """
        dt = self._period
        remaining = periods
        began = self._sim_time
        while remaining > 0:
            if active.stop_error is None and active.fault is not None and active.tau >= active.fault[0]:
                active.stop_error = active.fault[1]
            target = 0.0 if active.stop_error is not None else self._speed_scaling if active.scaled else 1.0
            if target == 1.0 and active.scale == 1.0:
                jump = min(remaining, active.periods_until(active.fault[0] if active.fault else math.inf, dt))
                active.steps += jump
                active.tau = min(active.duration, active.base + active.steps * dt)
                self._sim_time += jump * dt
                remaining -= jump
                if active.tau >= active.duration:
                    break
                continue
            self._sim_time += dt
            remaining -= 1
            _, qd, qdd = active.evaluate(active.tau)
            room = np.maximum(self._accel - active.scale**2 * np.abs(qdd), _RAMP_FLOOR * self._accel)
            moving = np.abs(qd) > _TINY_VELOCITY
            rate = float(np.min(room[moving] / np.abs(qd[moving]))) if np.any(moving) else math.inf
            if active.scale > target:
                new_scale = max(target, active.scale - rate * dt)
            else:
                new_scale = min(target, active.scale + rate * dt)
            active.tau = min(active.duration, active.tau + 0.5 * (active.scale + new_scale) * dt)
            active.scale = new_scale
            active.base, active.steps = active.tau, 0
            if active.tau >= active.duration or (active.stop_error is not None and active.scale <= 0.0):
                break
        position, qd, _ = active.evaluate(active.tau)
        if self._vmax is not None:
            return self._track(active, position, active.scale * qd, self._sim_time - began)
        if active.tau >= active.duration:
            self._positions = active.positions[-1].copy()
            self._velocities = np.zeros_like(self._positions)
            return active.stop_error if active.stop_error is not None else True
        self._positions = position
        self._velocities = active.scale * qd
        if active.stop_error is not None and active.scale <= 0.0:
            self._velocities = np.zeros_like(self._positions)
            return active.stop_error
        return False

    def _track(
        self, active: _Active, desired: NDArray[np.float64], velocity: NDArray[np.float64], elapsed: float
    ) -> MotionError | bool | None:
        """The arm follows the commanded ``desired`` no faster than its velocity limits (a
        trajectory that asks more leaves a tracking error, as on a real arm); past the end it
        goes on to the last point, and the trajectory is done once it is there."""
        ended = active.tau >= active.duration
        if ended:
            desired, velocity = active.positions[-1], np.zeros_like(desired)
            if active.ended_at is None:
                active.ended_at = self._sim_time
        assert self._vmax is not None
        previous = self._positions
        reach = self._vmax * max(elapsed, 1e-12)
        actual = previous + np.clip(desired - previous, -reach, reach)
        lagging = bool(np.any(np.abs(desired - previous) > reach))
        self._desired = np.asarray(desired, dtype=float).copy()
        self._positions = actual
        tolerance = active.path_tolerance
        if not ended and tolerance is not None:
            error = np.abs(actual - desired)
            out = np.flatnonzero((tolerance > 0.0) & (error > tolerance))
            if out.size:
                # The controller holds the position measured now; the arm, following no faster
                # than its limits, stops there.
                i = int(out[0])
                self._desired = actual.copy()
                self._velocities = np.zeros_like(actual)
                return PathToleranceViolation(
                    i, float(error[i]), float(tolerance[i]), active.tau, active.step_index
                )
        self._velocities = (actual - previous) / max(elapsed, 1e-12) if lagging else velocity
        if ended and not lagging:
            self._velocities = np.zeros_like(actual)
            return active.stop_error if active.stop_error is not None else True
        if not ended and active.stop_error is not None and active.scale <= 0.0 and not lagging:
            self._velocities = np.zeros_like(actual)
            return active.stop_error
        return False

    def tracking(
        self,
    ) -> tuple[float, float, float | None, tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
        """What the controller commands and where the arm is, taken together: ``(τ, duration,
        simulated seconds since τ reached the end or None, desired [rad], actual [rad], actual
        velocity [rad/s])``; when idle, ``τ == duration == 0`` and desired is the arm's state."""
        with self._cond:
            active = self._active
            actual = tuple(self._positions.tolist())
            velocity = tuple(self._velocities.tolist())
            if active is None:
                return 0.0, 0.0, None, actual, actual, velocity
            desired = tuple(self._desired.tolist())
            since = None if active.ended_at is None else self._sim_time - active.ended_at
            return active.tau, active.duration, since, desired, actual, velocity

    def _run(self) -> None:
        finite = math.isfinite(self._speed)
        deadline = time.monotonic()  # wall time [monotonic s] the simulated clock has reached
        current: _Active | None = None  # the trajectory ``deadline`` is counted for
        while True:
            finished: tuple[_Active, MotionError | None] | None = None
            snapshot: JointState | None = None
            due: list[JointStateListener] | None = None
            advanced = 0.0  # simulated seconds this iteration
            with self._cond:
                if self._shutdown:
                    break
                active = self._active
                if active is None:
                    if self._listeners:
                        self._cond.wait(self._state_period)
                    else:
                        self._cond.wait()
                    if self._shutdown:
                        break
                    if self._active is None and self._listeners:
                        snapshot = self._snapshot()
                else:
                    if active is not current:
                        # The trajectory's clock starts at the execute() call: the thread's
                        # wake-up and the goal's set-up are made up, not lost.
                        current, deadline, active.started = active, active.called, self._sim_time
                    lag = time.monotonic() - deadline if finite else 0.0
                    before = self._sim_time
                    outcome = self._advance(active, self._periods_until_due(self._periods_per_iteration(lag)))
                    advanced = self._sim_time - before
                    if outcome is not False:
                        self._active = None
                        finished = (active, None if outcome is True else outcome)  # type: ignore[assignment]
                    due = self._due(finished is not None)
                    if due:
                        snapshot = self._snapshot()
            if active is not None and finite:
                deadline += advanced / self._speed
            if snapshot is not None:
                self._notify(snapshot, due)
            if finished is not None:
                done, error = finished
                if finite:
                    # The motion ends at its wall time, never earlier: the speed is not exceeded.
                    _sleep_until(deadline)
                self._record(done)
                if error is None:
                    done.future.set_result(None)
                else:
                    done.future.set_exception(error)
                with self._cond:
                    if self._active is None:
                        self._idle.set()
                continue
            if active is not None and finite:
                delay = deadline - time.monotonic()
                if delay > 0.0:
                    time.sleep(delay)
                elif delay < -0.25:
                    deadline = time.monotonic()  # far behind (e.g. a debugger): do not sprint
        with self._cond:
            active = self._active
            self._active = None
            self._velocities = np.zeros_like(self._positions)
        if active is not None:
            active.future.set_exception(
                MotionError(
                    ErrorCode.EXECUTION_FAILED, f"controller shut down during step {active.step_index}"
                )
            )
        self._idle.set()

    def _record(self, done: _Active) -> None:
        """Add a finished (or stopped) trajectory to :meth:`playback`: its simulated time and
        the wall time from its execute() call until now."""
        wall = time.monotonic() - done.called
        with self._cond:
            simulated = self._sim_time - (done.started if done.started is not None else self._sim_time)
            total = self._playback
            self._playback = Playback(total.trajectories + 1, total.simulated + simulated, total.wall + wall)


def _sleep_until(deadline: float) -> None:
    """Return at ``deadline`` [time.monotonic() s] (at once when it has passed): sleep to within
    :data:`_END_SPIN` of it, then poll the clock, because ``time.sleep`` wakes tens of µs late,
    which is a tenth of a 1 s trajectory's wall time at ``speed`` 10,000."""
    delay = deadline - time.monotonic() - _END_SPIN
    if delay > 0.0:
        time.sleep(delay)
    while time.monotonic() < deadline:
        pass

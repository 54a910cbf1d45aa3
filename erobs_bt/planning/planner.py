"""Motion planning for the simulated UR5e cell: one ``moveto`` step in, one timed trajectory out.

The planner reproduces the EROBS planning types (docs/behaviour.md §1) with the embedded
stack recommended in ``docs/motion-planning.md`` (§7):

* **Joint goals** (a pose name resolved to joints, or a named robot state):
  ``auto`` (``""``/``auto``/``joint``) tries the straight joint line first and falls back
  to OMPL RRTConnect when it is blocked (EROBS's chain "PTP, then OMPL");
  ``pilz_ptp`` is the straight joint line only; ``cartesian``/``pilz`` move the tool tip
  on a straight line to the goal joints' tip pose.
* **Relative moves** (``direction`` + ``distance``, a vector in the **flange** frame):
  EROBS plans them as Cartesian moves, and so does this planner for ``auto``,
  ``cartesian`` and ``pilz``: a relative move is nearly always an approach or retreat
  whose straightness matters, so ``auto`` never swaps it for a sampled joint path.
  ``pilz_ptp`` moves on the straight joint line to the IK solution of the goal pose.
  A straight relative move **along the tool axis** (approach, press, retreat) is the one
  motion in which the tool's ``contact`` shapes may touch obstacles (a pipettor cone
  pressed onto a tip, fingers on a part): :meth:`MotionPlanner._contact_allowed`.
* **Cartesian targets** (tool-tip position, optionally orientation, in ``frame_id``):
  ``auto`` and ``pilz_ptp`` solve IK for all branches and plan in joint space
  (straight line, then for ``auto`` OMPL with every valid branch as a goal);
  ``cartesian``/``pilz`` follow the straight tip line.

Straight tip lines step about 0.5 mm (or 0.005 rad of rotation) at a time through the
IK, seeded by the previous solution, with a joint-jump threshold; ``cartesian`` accepts
a path that achieves at least 90 % of the line and stops there (EROBS/MoveIt semantics),
``pilz`` requires the whole line, as the Pilz LIN planner does.

Validity of a state = inside the joint limits, collision-free (the cell's collision
model) and satisfying the step's path constraints (joint and orientation). Paths are
checked at most ``check_step`` (0.01 rad) apart in every joint. OMPL sees the same
validity function; its planning space is the joint limits intersected with a window of
± π around the start and goal (so it does not wander into the 2π-equivalent components
of the ±2π joints), and its checking resolution is ``check_step`` divided by the space's
maximum extent (the default 1 % would be 0.29 rad). Every returned trajectory is
re-checked (start state, limits, spacing, collisions, constraints) before it is returned.

Process-wide OMPL settings: OMPL keeps its log level and its random seed in C++
globals, and only the first ``RNG.setSeed`` call of a process has an effect
(motion-planning.md §1). OMPL is imported and configured when a plan first needs it
(most moves are straight lines). :func:`configure_ompl` is guarded by the one piece of
module-level state in this package, a lock-protected record of what the process has
already set. Planning itself keeps no state between calls and can run in a worker
thread (OMPL releases the GIL between validity callbacks).

Failures raise :class:`~erobs_bt.motion.MotionError` with
``ErrorCode.PLANNING_FAILED`` and a reason that names the step (``tasks[3]: ...``). Where
MoveIt would answer with a specific error code, the reason starts with that code's name, as
EROBS propagates it (its MCP agent's error table matches them): ``GOAL_IN_COLLISION``,
``START_STATE_IN_COLLISION``, ``NO_IK_SOLUTION``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from erobs_bt.motion import ArmSegment, ErrorCode, MotionError, TrajectoryPoint
from erobs_bt.planning.cartesian import (
    CartesianPath,
    IkBranchesFunction,
    distance_from_segment,
    follow_line,
    interpolate_poses,
)
from erobs_bt.planning.timing import (
    DEFAULT_SAMPLE_PERIOD,
    DEFAULT_SPEED_SCALING,
    time_parameterize,
    time_parameterize_path,
)
from erobs_bt.script.model import JOINT_NAMES, Constraints, MoveTo
from erobs_bt.world import kinematics
from erobs_bt.world.cell import CellConfig, Obstacle
from erobs_bt.world.collision import AttachedObject
from erobs_bt.world.scene import World
from erobs_bt.world.tools import RobotModel, ToolState, planning_tip

if TYPE_CHECKING:
    from ompl import base as ob

_LOG = logging.getLogger(__name__)

#: The canonical planning types of :class:`~erobs_bt.script.model.MoveTo`.
PLANNING_TYPES: frozenset[str] = frozenset({"auto", "cartesian", "pilz", "pilz_ptp"})

#: Tolerance on joint limits for given states [rad] (a start read back from a
#: controller may sit a rounding error outside).
_LIMIT_TOLERANCE = 1e-6
#: Relative slack on velocity/acceleration limits in the final re-check.
_RATE_SLACK = 1e-6
#: Trajectories whose sample arrays :meth:`CellPlanner.check_trajectory` keeps.
_KEPT_SAMPLES = 64


class CollisionChecker(Protocol):
    """What the planner needs from the cell's collision model.

    :class:`erobs_bt.world.collision.CollisionModel` implements it; tests may use
    analytic stand-ins. Both methods take joint positions [rad] in
    :data:`~erobs_bt.script.model.JOINT_NAMES` order. When the model also has
    ``first_contact(q) -> (body_a, body_b) | None``, failure reasons name the pair.
    """

    def in_collision(self, q: np.ndarray) -> bool:
        """True when the arm (with its tool and attached objects) collides at ``q`` (6,)."""
        ...

    def check_path(self, qs: np.ndarray, max_step: float) -> int | None:
        """The index of the first invalid state of the polyline ``qs`` (M, 6), checked at
        most ``max_step`` rad apart, or ``None`` when the whole polyline is free."""
        ...


@dataclass(frozen=True)
class PlannerConfig:
    """Tunable settings of :class:`MotionPlanner` (defaults: EROBS and the research note).

    Attributes:
        check_step: largest joint change between collision/constraint checks [rad].
        planning_time: OMPL ``solve`` budget per attempt [s].
        simplify_time: OMPL ``simplifySolution`` budget [s] of the ``"full"``
            simplification; ``0`` simplifies nothing (either mode).
        simplification: ``"shortcut"`` (default): OMPL ``PathSimplifier.reduceVertices``
            and ``ropeShortcutPath`` (checked at ``ompl_check_step``), then
            ``partialShortcutPath`` and ``reduceVertices`` (checked at ``check_step``: a
            shortcut in some joints hugs the obstacles), each bounded by its own step
            count: about 1,250 validity checks on this cell's obstructed moves against about
            5,000 for the full loop at ``check_step``, and shorter motions (every kept vertex
            is a stop of the timed trajectory); ``"full"``: OMPL's whole ``simplifySolution``
            loop (shortcuts, perturbation, B-spline) for ``simplify_time``.
        ompl_check_step: resolution of OMPL's motion checks during the search and the
            simplification [rad, Euclidean in joint space]. Coarser than ``check_step``
            on purpose: every path OMPL returns is re-checked at ``check_step`` per joint
            (the same re-check as for a straight line) and a path that fails it is another
            attempt, so this trades validity checks for the odd extra attempt, not safety.
        ompl_attempts: OMPL attempts when a solution fails the re-check.
        window: half-width of the OMPL planning space around start and goal [rad].
        cartesian_step: tip translation between IK solves on a line [m] (EROBS 0.5 mm).
        cartesian_rotation_step: tip rotation between IK solves on a line [rad].
        jump_threshold: largest joint change between consecutive IK solves [rad].
        min_cartesian_fraction: least share of a ``cartesian`` line to accept (EROBS 0.9).
        cartesian_tolerance: largest distance of the timed tip path from the line [m].
        speed_scaling: velocity/acceleration/jerk scaling (EROBS default 0.2).
        sample_period: largest time between trajectory samples [s].
        ompl_seed: seed for OMPL's process-wide RNG (applied once per process), or
            ``None`` to leave OMPL's own random seed.
    """

    check_step: float = 0.01
    planning_time: float = 5.0
    simplify_time: float = 1.0
    simplification: str = "shortcut"
    ompl_check_step: float = 0.03
    ompl_attempts: int = 2
    window: float = math.pi
    cartesian_step: float = 0.0005
    cartesian_rotation_step: float = 0.005
    jump_threshold: float = 0.05
    min_cartesian_fraction: float = 0.9
    cartesian_tolerance: float = 0.001
    speed_scaling: float = DEFAULT_SPEED_SCALING
    sample_period: float = DEFAULT_SAMPLE_PERIOD
    ompl_seed: int | None = 1

    def __post_init__(self) -> None:
        positive = {
            "check_step": self.check_step,
            "ompl_check_step": self.ompl_check_step,
            "planning_time": self.planning_time,
            "window": self.window,
            "cartesian_step": self.cartesian_step,
            "cartesian_rotation_step": self.cartesian_rotation_step,
            "jump_threshold": self.jump_threshold,
            "cartesian_tolerance": self.cartesian_tolerance,
            "sample_period": self.sample_period,
        }
        for name, value in positive.items():
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"PlannerConfig.{name}: must be finite and > 0, got {value}")
        if not (math.isfinite(self.simplify_time) and self.simplify_time >= 0.0):
            raise ValueError(f"PlannerConfig.simplify_time: must be >= 0, got {self.simplify_time}")
        if self.simplification not in ("shortcut", "full"):
            raise ValueError(
                f"PlannerConfig.simplification: 'shortcut' or 'full', got {self.simplification!r}"
            )
        if self.ompl_seed is not None and self.ompl_seed <= 0:
            raise ValueError(f"PlannerConfig.ompl_seed: OMPL needs a seed > 0, got {self.ompl_seed}")
        if self.ompl_attempts < 1:
            raise ValueError(f"PlannerConfig.ompl_attempts: must be >= 1, got {self.ompl_attempts}")
        if not 0.0 < self.min_cartesian_fraction <= 1.0:
            raise ValueError(
                f"PlannerConfig.min_cartesian_fraction: must be in (0, 1], got {self.min_cartesian_fraction}"
            )
        if not 0.0 < self.speed_scaling <= 1.0:
            raise ValueError(f"PlannerConfig.speed_scaling: must be in (0, 1], got {self.speed_scaling}")


class _OmplProcessSettings:
    """What this process has already told OMPL (log level, RNG seed); see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._log_level_set = False
        self._seed: int | None = None

    def apply(self, seed: int | None) -> None:
        from ompl import util as ou

        with self._lock:
            if not self._log_level_set:
                ou.setLogLevel(ou.LogLevel.LOG_WARN)
                self._log_level_set = True
            if seed is None:
                return
            if self._seed is None:
                ou.RNG.setSeed(int(seed))
                self._seed = int(seed)
            elif self._seed != seed:
                _LOG.warning(
                    "OMPL's RNG was already seeded with %d in this process; seed %d is ignored",
                    self._seed,
                    seed,
                )


_OMPL_PROCESS = _OmplProcessSettings()


def configure_ompl(seed: int | None) -> None:
    """Set OMPL's log level to WARN and, the first time a seed is given, seed its RNG.

    OMPL's seed is process-wide and only the first ``setSeed`` takes effect, so later
    calls with another seed log a warning and change nothing. Thread-safe.

    Args:
        seed: RNG seed, or ``None`` to only set the log level.
    """
    _OMPL_PROCESS.apply(seed)


def _planning_failed(where: str, reason: str) -> MotionError:
    return MotionError(ErrorCode.PLANNING_FAILED, f"{where}: {reason}" if where else reason)


def _invalid_state(which: str, q: np.ndarray, problem: str) -> str:
    """Why the ``start`` or ``goal`` state ``q`` is invalid; a collision carries MoveIt's code
    (``START_STATE_IN_COLLISION`` / ``GOAL_IN_COLLISION``)."""
    reason = f"{which} state {_fmt(q)} is invalid: {problem}"
    if problem.startswith("in collision"):
        return f"{which.upper()}{'_STATE' if which == 'start' else ''}_IN_COLLISION: {reason}"
    return reason


def _fmt(q: np.ndarray) -> str:
    return "[" + ", ".join(f"{x:.4f}" for x in q) + "]"


class _Validity:
    """Validity of states and polylines for one planning request (limits, constraints, collisions)."""

    def __init__(
        self,
        *,
        collision: CollisionChecker,
        joint_limits: np.ndarray,
        fk: Callable[[np.ndarray], np.ndarray],
        check_step: float,
        joint_bounds: list[tuple[int, float, float, str]],
        orientation_bounds: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]],
    ) -> None:
        self.collision = collision
        self.limits = joint_limits
        self.fk = fk
        self.check_step = check_step
        self.joint_bounds = joint_bounds
        # (R_flange_link, R_frame_base, R_target (in frame), tolerance (3,), label)
        self.orientation_bounds = orientation_bounds
        self.callback_error: BaseException | None = None
        #: No path constraints: a state is valid when it is collision free (within OMPL's bounds).
        self.plain = not joint_bounds and not orientation_bounds
        self._query: Callable[[np.ndarray], bool] | None = None

    def constraint_problem(self, q: np.ndarray) -> str | None:
        """Why ``q`` violates a path constraint, or ``None``."""
        for index, low, high, label in self.joint_bounds:
            if not low - 1e-12 <= q[index] <= high + 1e-12:
                return f"{label} (joint at {q[index]:.4f} rad)"
        if self.orientation_bounds:
            R_base_flange = self.fk(q)[:3, :3]
            for R_flange_link, R_frame_base, R_target, tolerance, label in self.orientation_bounds:
                R_frame_link = R_frame_base @ R_base_flange @ R_flange_link
                error = np.abs(kinematics.rotvec_from_matrix(R_target.T @ R_frame_link))
                if np.any(error > tolerance + 1e-9):
                    return f"{label} (error {_fmt(error)} rad)"
        return None

    def state_problem(self, q: np.ndarray) -> str | None:
        """Why ``q`` is invalid (limits, constraints, collision), or ``None``."""
        outside = (q < self.limits[:, 0] - _LIMIT_TOLERANCE) | (q > self.limits[:, 1] + _LIMIT_TOLERANCE)
        if np.any(outside):
            j = int(np.argmax(outside))
            return f"{JOINT_NAMES[j]} at {q[j]:.4f} rad is outside its limits {_fmt(self.limits[j])}"
        problem = self.constraint_problem(q)
        if problem is not None:
            return f"violates path constraint {problem}"
        if self.collision.in_collision(q):
            return self.collision_detail(q)
        return None

    def collision_detail(self, q: np.ndarray) -> str:
        """``"in collision"``, naming the colliding pair when the model can tell it."""
        first_contact = getattr(self.collision, "first_contact", None)
        pair = first_contact(q) if callable(first_contact) else None
        return f"in collision ({pair[0]} with {pair[1]})" if pair else "in collision"

    def ompl_callback(self, state: ob.State) -> bool:
        """OMPL state validity: limits are OMPL's bounds; constraints and collisions here.

        Without path constraints, a collision model that offers ``collision_query`` (the
        cell's :class:`~erobs_bt.world.collision.CollisionModel`) is asked through it: the
        same check, bound once per request on the planning thread.
        """
        try:
            q = np.array(state[0:6])
            if self.plain:
                query = self._query
                if query is None:
                    make = getattr(self.collision, "collision_query", None)
                    query = self._query = make() if callable(make) else self.collision.in_collision
                return not query(q)
            return self.constraint_problem(q) is None and not self.collision.in_collision(q)
        except Exception as exc:  # an exception must not cross into OMPL's C++ stack
            if self.callback_error is None:
                self.callback_error = exc
            return False

    def first_bad(self, qs: np.ndarray) -> tuple[int, str] | None:
        """First invalid vertex of the polyline ``qs`` (M, 6) at ≤ ``check_step`` spacing.

        Returns:
            ``(k, reason)`` such that the polyline ``qs[:k]`` is valid and the motion into
            ``qs[k]`` (or ``qs[k]`` itself) is not; ``None`` when all of it is valid.
        """
        dense, owner = _densify(qs, self.check_step)
        candidates: list[tuple[int, str]] = []
        outside = np.any(
            (dense < self.limits[:, 0] - _LIMIT_TOLERANCE) | (dense > self.limits[:, 1] + _LIMIT_TOLERANCE),
            axis=1,
        )
        if np.any(outside):
            i = int(np.argmax(outside))
            candidates.append((i, "outside the joint limits"))
        for index, low, high, label in self.joint_bounds:
            bad = (dense[:, index] < low - 1e-12) | (dense[:, index] > high + 1e-12)
            if np.any(bad):
                i = int(np.argmax(bad))
                candidates.append((i, f"violates path constraint {label}"))
        hit = self.collision.check_path(dense, self.check_step)
        if hit is not None:
            candidates.append((int(hit), self.collision_detail(dense[int(hit)])))
        if self.orientation_bounds:
            limit = min((i for i, _ in candidates), default=dense.shape[0])
            for i in range(limit):
                problem = self.constraint_problem(dense[i])
                if problem is not None:
                    candidates.append((i, f"violates path constraint {problem}"))
                    break
        if not candidates:
            return None
        i, reason = min(candidates, key=lambda c: c[0])
        return int(owner[i]), f"{reason} at {_fmt(dense[i])}"


def _densify(qs: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Polyline ``qs`` resampled so that no joint changes more than ``step`` between rows.

    Returns:
        ``(dense, owner)``: the rows (every vertex of ``qs`` included) and, per row, the
        index of the vertex of ``qs`` that ends the segment it lies on.
    """
    if qs.shape[0] == 1:
        return qs.copy(), np.zeros(1, dtype=int)
    delta = np.diff(qs, axis=0)
    counts = np.maximum(1, np.ceil(np.max(np.abs(delta), axis=1) / step - 1e-9).astype(int))
    owner = np.repeat(np.arange(1, qs.shape[0]), counts)
    first_of_segment = np.repeat(np.cumsum(counts) - counts, counts)
    t = (np.arange(owner.shape[0]) - first_of_segment + 1)[:, None] / np.repeat(counts, counts)[:, None]
    dense = qs[owner - 1] + t * delta[owner - 1]
    dense[np.cumsum(counts) - 1] = qs[1:]  # every vertex exactly
    return np.vstack([qs[:1], dense]), np.concatenate([[0], owner])


class MotionPlanner:
    """Plans single ``moveto`` steps for the simulated UR5e cell.

    Why this class is long: it is the embedded planner's one entry point for every moveto mode (joint, pose,
    relative, Cartesian, named state) and each mode's path ends in the same validity check, time
    parameterisation and verification against one collision model and one set of settings. Kinematics,
    Cartesian lines and timing are modules of their own (world/kinematics.py, planning/cartesian.py,
    planning/timing.py).

    Args:
        collision: the cell's collision model (see :class:`CollisionChecker`); called
            from the planning thread.
        fk: ``fk(q) -> (4, 4)`` pose of the ``flange`` in ``base_link`` [m]
            (default :func:`erobs_bt.world.kinematics.fk`).
        ik: ``ik(T_base_link_flange, seed=q) -> [q, ...]`` all solutions within the joint
            limits, unwrapped towards and sorted by distance to the seed
            (default :func:`erobs_bt.world.kinematics.ik`).
        ik_branches: the vectorised form of ``ik`` for straight tip lines
            (:data:`~erobs_bt.planning.cartesian.IkBranchesFunction`); default
            :func:`~erobs_bt.world.kinematics.ik_branches` when ``ik`` is the default,
            else ``None`` (lines are then solved pose by pose with ``ik``).
        joint_limits: (6, 2) position limits [rad] (default UR5e: ±2π, elbow ±π).
        velocity_limits: (6,) unscaled [rad/s] (default π).
        acceleration_limits: (6,) unscaled [rad/s²] (default 5).
        config: planner settings.
        resolve_frame: ``resolve_frame(frame_id) -> (4, 4) T_base_link_frame`` for
            ``frame_id`` values other than ``base_link``; it raises ``KeyError`` or
            ``ValueError`` for an unknown frame. ``None``: only ``base_link`` is known.
        named_states: joint positions [rad] of the cell's named robot states (e.g.
            ``moveit_home``), used when a ``moveto.target`` has no resolved joints.
        link_frames: ``T_flange_link`` (4, 4) of links that orientation constraints
            may name, in addition to ``flange`` and ``tool0`` (and the tool tip given
            per call).

    Raises:
        ValueError: malformed limits or link frames.
    """

    def __init__(
        self,
        *,
        collision: CollisionChecker,
        fk: Callable[[np.ndarray], np.ndarray] = kinematics.fk,
        ik: Callable[..., Sequence[np.ndarray]] = kinematics.ik,
        ik_branches: IkBranchesFunction | None = None,
        joint_limits: ArrayLike = kinematics.JOINT_LIMITS,
        velocity_limits: ArrayLike = kinematics.VELOCITY_LIMITS,
        acceleration_limits: ArrayLike = kinematics.ACCELERATION_LIMITS,
        config: PlannerConfig | None = None,
        resolve_frame: Callable[[str], ArrayLike] | None = None,
        named_states: Mapping[str, Sequence[float]] | None = None,
        link_frames: Mapping[str, ArrayLike] | None = None,
    ) -> None:
        self._collision = collision
        self._fk = fk
        self._ik = ik
        self._ik_branches = ik_branches
        if ik_branches is None and ik is kinematics.ik:
            self._ik_branches = kinematics.ik_branches
        self._limits = np.array(joint_limits, dtype=float)
        if self._limits.shape != (6, 2) or np.any(self._limits[:, 0] >= self._limits[:, 1]):
            raise ValueError(f"joint_limits: expected (6, 2) with lower < upper, got {self._limits.tolist()}")
        self._v_max = np.broadcast_to(np.asarray(velocity_limits, dtype=float), (6,)).copy()
        self._a_max = np.broadcast_to(np.asarray(acceleration_limits, dtype=float), (6,)).copy()
        if np.any(self._v_max <= 0.0) or np.any(self._a_max <= 0.0):
            raise ValueError("velocity_limits and acceleration_limits must be > 0")
        self._config = config if config is not None else PlannerConfig()
        self._resolve_frame = resolve_frame
        self._named_states = {name: tuple(float(x) for x in q) for name, q in (named_states or {}).items()}
        frames: dict[str, np.ndarray] = {
            "flange": np.eye(4),
            "tool0": kinematics.invert_pose(kinematics.T_TOOL0_FLANGE),
        }
        for name, T in (link_frames or {}).items():
            matrix = np.array(T, dtype=float)
            if matrix.shape != (4, 4):
                raise ValueError(f"link_frames[{name!r}]: expected a (4, 4) transform, got {matrix.shape}")
            frames[name] = matrix
        self._link_frames = frames

    @property
    def config(self) -> PlannerConfig:
        """The planner settings."""
        return self._config

    # ------------------------------------------------------------------------------------
    # Entry point for a script step
    # ------------------------------------------------------------------------------------

    def plan_move(
        self,
        step: MoveTo,
        start: Sequence[float],
        *,
        T_flange_tip: ArrayLike | None = None,
        tip_link: str | None = None,
    ) -> ArmSegment:
        """Plan one ``moveto`` step from ``start``.

        Args:
            step: the step (its mode, ``planning_type`` and ``constraints``).
            start: six joint positions [rad] the motion starts from.
            T_flange_tip: (4, 4) pose of the tool tip in the flange frame [m];
                ``cartesian_target`` goals and straight lines are for this tip.
                ``None``: the flange itself.
            tip_link: the tip's link name (e.g. ``epick_tip``), for orientation
                constraints that name it.

        Returns:
            The timed trajectory, ``step_index = step.index``, starting exactly at
            ``start``.

        Raises:
            MotionError: ``PLANNING_FAILED: <step.path>: <reason>``.
        """
        where = step.path
        if step.target is not None:
            goal: Sequence[float] | None = step.target_joints
            if goal is None:
                goal = self._named_states.get(step.target)
            if goal is None:
                known = ", ".join(sorted(self._named_states)) or "none"
                raise _planning_failed(
                    where, f"target {step.target!r} is neither a pose nor a named state (known: {known})"
                )
            return self.plan_to_joints(
                start,
                goal,
                step_index=step.index,
                planning_type=step.planning_type,
                constraints=step.constraints,
                T_flange_tip=T_flange_tip,
                tip_link=tip_link,
                where=where,
            )
        if step.direction_vector is not None and step.distance is not None:
            return self.plan_relative(
                start,
                step.direction_vector,
                step.distance,
                step_index=step.index,
                planning_type=step.planning_type,
                constraints=step.constraints,
                T_flange_tip=T_flange_tip,
                tip_link=tip_link,
                where=where,
            )
        if step.cartesian_target is not None:
            return self.plan_cartesian_target(
                start,
                step.cartesian_target,
                frame_id=step.frame_id,
                step_index=step.index,
                planning_type=step.planning_type,
                constraints=step.constraints,
                T_flange_tip=T_flange_tip,
                tip_link=tip_link,
                where=where,
            )
        raise _planning_failed(where, "moveto has no target, direction/distance or cartesian_target")

    # ------------------------------------------------------------------------------------
    # The three goal kinds
    # ------------------------------------------------------------------------------------

    def plan_to_joints(
        self,
        start: Sequence[float],
        goal: Sequence[float],
        *,
        step_index: int,
        planning_type: str = "auto",
        constraints: Constraints | None = None,
        T_flange_tip: ArrayLike | None = None,
        tip_link: str | None = None,
        where: str = "",
    ) -> ArmSegment:
        """Plan to a joint goal.

        ``auto``: straight joint line when valid, else OMPL RRTConnect + simplification;
        ``pilz_ptp``: straight joint line only; ``cartesian``/``pilz``: straight tip line
        to the goal's tip pose, which must end at the goal joints.

        Args:
            start: six joint positions [rad].
            goal: six joint positions [rad].
            step_index: the script step index of the returned segment.
            planning_type: ``auto``, ``cartesian``, ``pilz`` or ``pilz_ptp``.
            constraints: path constraints to hold along the whole motion.
            T_flange_tip: (4, 4) tool tip in the flange frame [m], for straight lines.
            tip_link: link name of the tip, for orientation constraints.
            where: prefix of error reasons (the step's path, e.g. ``tasks[2]``).

        Returns:
            The timed trajectory.

        Raises:
            MotionError: ``PLANNING_FAILED`` with the reason.
        """
        request = self._request(start, planning_type, constraints, T_flange_tip, tip_link, where)
        q_goal = self._joint_vector(goal, "goal", where)
        problem = request.validity.state_problem(q_goal)
        if problem is not None:
            raise _planning_failed(where, _invalid_state("goal", q_goal, problem))
        if planning_type in ("cartesian", "pilz"):
            T_goal_tip = self._fk(q_goal) @ request.T_flange_tip
            segment = self._plan_line(request, T_goal_tip, step_index)
            end = np.array(segment.points[-1].positions)
            if float(np.max(np.abs(end - q_goal))) > 1e-6:
                raise _planning_failed(
                    where,
                    f"the straight tip line reaches the goal pose in configuration {_fmt(end)}, "
                    f"not in the goal joints {_fmt(q_goal)} (another IK branch); use planning_type joint",
                )
            return segment
        return self._plan_joint_goals(request, [q_goal], step_index)

    def plan_relative(
        self,
        start: Sequence[float],
        direction: Sequence[float],
        distance: float,
        *,
        step_index: int,
        planning_type: str = "auto",
        constraints: Constraints | None = None,
        T_flange_tip: ArrayLike | None = None,
        tip_link: str | None = None,
        where: str = "",
    ) -> ArmSegment:
        """Plan a relative move of ``distance`` along ``direction`` in the **flange** frame.

        The orientation is kept, so the tool tip moves by the same vector as the flange.
        ``auto``/``cartesian``: straight line, at least ``min_cartesian_fraction``
        achieved (EROBS plans relative moves as Cartesian moves); ``pilz``: the whole
        straight line; ``pilz_ptp``: straight joint line to the IK solution of the goal
        pose nearest the start.

        Args:
            start: six joint positions [rad].
            direction: (3,) unit vector in the flange frame at the start.
            distance: [m], finite and > 0.
            step_index: the script step index of the returned segment.
            planning_type: ``auto``, ``cartesian``, ``pilz`` or ``pilz_ptp``.
            constraints: path constraints.
            T_flange_tip: (4, 4) tool tip in the flange frame [m].
            tip_link: link name of the tip, for orientation constraints.
            where: prefix of error reasons.

        Returns:
            The timed trajectory.

        Raises:
            MotionError: ``PLANNING_FAILED`` with the reason.
        """
        vector = np.asarray(direction, dtype=float)
        if (
            vector.shape != (3,)
            or not np.all(np.isfinite(vector))
            or abs(np.linalg.norm(vector) - 1.0) > 1e-6
        ):
            raise _planning_failed(where, f"direction must be a unit 3-vector, got {vector.tolist()}")
        if not (math.isfinite(distance) and distance > 0.0):
            raise _planning_failed(where, f"distance must be finite and > 0 m, got {distance}")
        with self._contact_allowed(vector, planning_type, T_flange_tip):
            request = self._request(start, planning_type, constraints, T_flange_tip, tip_link, where)
            T_start_flange = self._fk(request.start)
            T_goal_flange = T_start_flange.copy()
            T_goal_flange[:3, 3] += T_start_flange[:3, :3] @ (vector * distance)
            T_goal_tip = T_goal_flange @ request.T_flange_tip
            if planning_type == "pilz_ptp":
                return self._plan_pose_in_joint_space(request, T_goal_tip, step_index)
            return self._plan_line(request, T_goal_tip, step_index)

    def _contact_allowed(
        self, direction: np.ndarray, planning_type: str, T_flange_tip: ArrayLike | None
    ) -> contextlib.AbstractContextManager[None]:
        """The allowed-contact rule of one relative move (the one place it is decided).

        A straight line (not ``pilz_ptp``) along the tool axis (the tip frame's z, the
        approach direction, either way: a press or a retreat) may bring the tool's ``contact``
        shapes onto obstacles: the collision model's
        :meth:`~erobs_bt.world.collision.CollisionModel.allowing_tool_contact` for this
        motion only. Any other move, or a checker without that method, checks everything.
        """
        allowing = getattr(self._collision, "allowing_tool_contact", None)
        if not callable(allowing) or not self.allows_tool_contact(direction, planning_type, T_flange_tip):
            return contextlib.nullcontext()
        context: contextlib.AbstractContextManager[None] = allowing()
        return context

    @staticmethod
    def allows_tool_contact(direction: ArrayLike, planning_type: str, T_flange_tip: ArrayLike | None) -> bool:
        """Whether a relative move along ``direction`` (a unit vector in the flange frame) with
        ``planning_type`` may bring the tool's contact shapes onto obstacles: a straight line
        (not ``pilz_ptp``) along the tool axis (the tip frame's z), either way (the rule of
        :meth:`_contact_allowed`)."""
        if planning_type == "pilz_ptp":
            return False
        T = np.eye(4) if T_flange_tip is None else np.asarray(T_flange_tip, dtype=float)
        return abs(float(np.dot(np.asarray(direction, dtype=float), T[:3, 2]))) >= 1.0 - 1e-6

    def check_trajectory(
        self,
        step: MoveTo,
        points: Sequence[TrajectoryPoint],
        *,
        T_flange_tip: ArrayLike | None = None,
        tip_link: str | None = None,
    ) -> str | None:
        """Check a stored trajectory of ``step`` against the collision model as it is now.

        The checks of planning, applied to samples that were planned earlier (a cache
        entry's segment, before a replay sends it): the first sample is a valid state, and
        every sample and the motion between samples, densified to ``check_step`` [rad], is
        within the joint limits and the step's path constraints and collision-free. A
        straight line along the tool axis may touch with the tool's contact shapes, as when
        it was planned (:meth:`_contact_allowed`, the one place that rule lives).

        Args:
            step: the step the samples implement (its planning type, direction, constraints).
            points: the samples, positions [rad] in :data:`JOINT_NAMES` order.
            T_flange_tip: (4, 4) tool tip in the flange frame [m]; ``None``: the flange.
            tip_link: the tip's link name, for orientation constraints that name it.

        Returns:
            ``None`` when valid, else ``"<step.path>: <what> at t = <s> s ..."``.
        """
        where = step.path
        if not points:
            return f"{where}: the trajectory has no points"
        q = np.array([p.positions for p in points], dtype=float)
        if q.ndim != 2 or q.shape[1] != 6 or not np.all(np.isfinite(q)):
            return f"{where}: malformed samples"
        vector = step.direction_vector
        if vector is not None and step.distance is not None:
            allowed = self._contact_allowed(np.asarray(vector, dtype=float), step.planning_type, T_flange_tip)
        else:
            allowed = contextlib.nullcontext()
        with allowed:
            try:
                request = self._request(
                    q[0], step.planning_type, step.constraints, T_flange_tip, tip_link, where
                )
            except MotionError as exc:
                return exc.detail
            bad = request.validity.first_bad(q)
        if bad is None:
            return None
        index, reason = bad
        return f"{where}: sample {index} at t = {points[index].time_from_start:.3f} s {reason}"

    def plan_cartesian_target(
        self,
        start: Sequence[float],
        target: Sequence[float],
        *,
        frame_id: str = "base_link",
        step_index: int,
        planning_type: str = "auto",
        constraints: Constraints | None = None,
        T_flange_tip: ArrayLike | None = None,
        tip_link: str | None = None,
        where: str = "",
    ) -> ArmSegment:
        """Plan the tool tip to a Cartesian target.

        Args:
            start: six joint positions [rad].
            target: ``(x, y, z)`` [m] (the tip keeps its current orientation in
                ``base_link``) or ``(x, y, z, roll, pitch, yaw)`` [m, rad] (ROS fixed-axis
                RPY), in ``frame_id``.
            frame_id: ``base_link`` or a frame the cell's ``resolve_frame`` knows.
            step_index: the script step index of the returned segment.
            planning_type: ``auto``/``pilz_ptp``: IK, then joint-space planning (straight
                joint line; ``auto`` falls back to OMPL with every valid IK branch as a
                goal); ``cartesian``/``pilz``: straight tip line.
            constraints: path constraints.
            T_flange_tip: (4, 4) tool tip in the flange frame [m].
            tip_link: link name of the tip, for orientation constraints.
            where: prefix of error reasons.

        Returns:
            The timed trajectory.

        Raises:
            MotionError: ``PLANNING_FAILED`` with the reason.
        """
        values = np.asarray(target, dtype=float)
        if values.shape not in ((3,), (6,)) or not np.all(np.isfinite(values)):
            raise _planning_failed(
                where, f"cartesian_target must be 3 or 6 finite numbers, got {list(target)}"
            )
        request = self._request(start, planning_type, constraints, T_flange_tip, tip_link, where)
        T_base_frame = self._frame(frame_id, where)
        T_goal_tip = np.eye(4)
        if values.shape == (6,):
            T_frame_goal = kinematics.pose_from_xyz_rpy(values[:3], values[3:], degrees=False)
            T_goal_tip = T_base_frame @ T_frame_goal
        else:
            T_goal_tip[:3, :3] = (self._fk(request.start) @ request.T_flange_tip)[:3, :3]
            T_goal_tip[:3, 3] = (T_base_frame @ np.append(values, 1.0))[:3]
        if planning_type in ("cartesian", "pilz"):
            return self._plan_line(request, T_goal_tip, step_index)
        return self._plan_pose_in_joint_space(request, T_goal_tip, step_index)

    # ------------------------------------------------------------------------------------
    # Request set-up
    # ------------------------------------------------------------------------------------

    def _joint_vector(self, values: Sequence[float], name: str, where: str) -> np.ndarray:
        q = np.asarray(values, dtype=float)
        if q.shape != (6,) or not np.all(np.isfinite(q)):
            raise _planning_failed(
                where, f"{name} must be 6 finite joint positions [rad], got {list(values)}"
            )
        return q

    def _frame(self, frame_id: str, where: str) -> np.ndarray:
        if frame_id == "base_link":
            return np.eye(4)
        if self._resolve_frame is None:
            raise _planning_failed(where, f"unknown frame_id {frame_id!r} (this cell knows only base_link)")
        try:
            T = np.array(self._resolve_frame(frame_id), dtype=float)
        except (KeyError, ValueError) as exc:
            raise _planning_failed(where, f"unknown frame_id {frame_id!r}: {exc}") from exc
        if T.shape != (4, 4) or not np.all(np.isfinite(T)):
            raise _planning_failed(where, f"frame {frame_id!r} resolved to an invalid transform")
        return T

    def _request(
        self,
        start: Sequence[float],
        planning_type: str,
        constraints: Constraints | None,
        T_flange_tip: ArrayLike | None,
        tip_link: str | None,
        where: str,
    ) -> _Request:
        if planning_type not in PLANNING_TYPES:
            raise _planning_failed(
                where, f"unknown planning_type {planning_type!r} (one of {', '.join(sorted(PLANNING_TYPES))})"
            )
        q_start = self._joint_vector(start, "start", where)
        tip = np.eye(4) if T_flange_tip is None else np.array(T_flange_tip, dtype=float)
        if tip.shape != (4, 4) or not np.all(np.isfinite(tip)):
            raise _planning_failed(where, "T_flange_tip must be a finite (4, 4) transform")
        links = dict(self._link_frames)
        if tip_link is not None:
            links[tip_link] = tip
        validity = self._validity(q_start, constraints, links, where)
        problem = validity.state_problem(q_start)
        if problem is not None:
            raise _planning_failed(where, _invalid_state("start", q_start, problem))
        return _Request(
            start=q_start,
            planning_type=planning_type,
            T_flange_tip=tip,
            validity=validity,
            where=where,
        )

    def _validity(
        self,
        start: np.ndarray,
        constraints: Constraints | None,
        links: Mapping[str, np.ndarray],
        where: str,
    ) -> _Validity:
        joint_bounds: list[tuple[int, float, float, str]] = []
        orientation_bounds: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]] = []
        if constraints is not None:
            for n, jc in enumerate(constraints.joint):
                if jc.joint_name not in JOINT_NAMES:
                    raise _planning_failed(
                        where,
                        f"constraints.joint[{n}]: unknown joint {jc.joint_name!r} "
                        f"(one of {', '.join(JOINT_NAMES)})",
                    )
                low = jc.position - abs(jc.tolerance_below)
                high = jc.position + abs(jc.tolerance_above)
                label = f"constraints.joint[{n}] {jc.joint_name} in [{low:.4f}, {high:.4f}] rad"
                joint_bounds.append((JOINT_NAMES.index(jc.joint_name), low, high, label))
            for n, oc in enumerate(constraints.orientation):
                if oc.link_name not in links:
                    raise _planning_failed(
                        where,
                        f"constraints.orientation[{n}]: unknown link {oc.link_name!r} "
                        f"(known: {', '.join(sorted(links))})",
                    )
                R_base_frame = self._frame(oc.frame_id, f"{where}: constraints.orientation[{n}]")[:3, :3]
                R_flange_link = links[oc.link_name][:3, :3]
                if oc.orientation is None:
                    R_target = R_base_frame.T @ self._fk(start)[:3, :3] @ R_flange_link
                else:
                    quat = np.asarray(oc.orientation, dtype=float)
                    if quat.shape != (4,) or not np.isfinite(quat).all() or np.linalg.norm(quat) < 1e-9:
                        raise _planning_failed(
                            where, f"constraints.orientation[{n}]: invalid quaternion {oc.orientation}"
                        )
                    R_target = kinematics.quat_matrix(quat)
                tolerance = np.abs(np.asarray(oc.absolute_tolerance, dtype=float))
                label = (
                    f"constraints.orientation[{n}] ({oc.link_name} in {oc.frame_id}, "
                    f"tolerance {_fmt(tolerance)} rad)"
                )
                orientation_bounds.append((R_flange_link, R_base_frame.T, R_target, tolerance, label))
        return _Validity(
            collision=self._collision,
            joint_limits=self._limits,
            fk=self._fk,
            check_step=self._config.check_step,
            joint_bounds=joint_bounds,
            orientation_bounds=orientation_bounds,
        )

    # ------------------------------------------------------------------------------------
    # Joint-space planning
    # ------------------------------------------------------------------------------------

    def _plan_joint_goals(
        self, request: _Request, goals: Sequence[np.ndarray], step_index: int
    ) -> ArmSegment:
        """A timed joint-space motion to one of ``goals`` (valid states, preferred first).

        Straight joint lines first (each goal in order); then, unless ``pilz_ptp``, OMPL.
        A candidate is accepted only once its timed trajectory passed :meth:`_verify`; a
        path that grazes an obstacle between checks can pass one set of check points and
        fail another, and is then treated like a blocked one (another attempt).
        """
        reasons: list[str] = []
        for goal in goals:
            line = np.stack([request.start, goal])
            bad = request.validity.first_bad(line)
            if bad is not None:
                reasons.append(bad[1])
                continue
            points, problem = self._timed_joint_path(request, line)
            if points is not None:
                return ArmSegment(step_index=step_index, points=tuple(points))
            reasons.append(f"timed trajectory {problem}")
        if len(reasons) == 1:
            line_problem = reasons[0]
        else:
            line_problem = "; ".join(f"to IK solution {i}: {r}" for i, r in enumerate(reasons))
        if request.planning_type == "pilz_ptp":
            raise _planning_failed(
                request.where, f"pilz_ptp: the straight joint line is blocked ({line_problem})"
            )
        cfg = self._config
        failures: list[str] = []
        for attempt in range(1, cfg.ompl_attempts + 1):
            path, status = self._ompl_solve(request, goals)
            if path is None:
                failures.append(f"attempt {attempt}: {status}")
                break
            # The timed trajectory's samples lie on the path's segments, every waypoint among
            # them, at most check_step apart: its re-check (_verify) is the path's re-check.
            points, problem = self._timed_joint_path(request, path)
            if points is not None:
                return ArmSegment(step_index=step_index, points=tuple(points))
            failures.append(f"attempt {attempt}: the timed solution failed the re-check ({problem})")
        raise _planning_failed(
            request.where,
            f"OMPL RRTConnect found no valid path ({'; '.join(failures)}); "
            f"the straight joint line is blocked: {line_problem}",
        )

    def _ompl_solve(self, request: _Request, goals: Sequence[np.ndarray]) -> tuple[np.ndarray | None, str]:
        """One RRTConnect query plus simplification: ``(waypoints (K, 6), status)``.

        The waypoints are ``None`` when there is no exact solution within
        ``planning_time``; ``status`` is OMPL's status text.
        """
        # OMPL is imported (and configured) on first use: most moves never need it, and
        # importing it is part of every process's start-up otherwise.
        from ompl import base as ob
        from ompl import geometric as og

        cfg = self._config
        configure_ompl(cfg.ompl_seed)
        everything = np.vstack([request.start, *goals])
        low = np.maximum(self._limits[:, 0], everything.min(axis=0) - cfg.window)
        high = np.minimum(self._limits[:, 1], everything.max(axis=0) + cfg.window)
        low = np.minimum(low, everything.min(axis=0))
        high = np.maximum(high, everything.max(axis=0))
        space = ob.RealVectorStateSpace(6)
        bounds = ob.RealVectorBounds(6)
        for j in range(6):
            bounds.setLow(j, float(low[j]))
            bounds.setHigh(j, float(high[j]))
        space.setBounds(bounds)
        setup = og.SimpleSetup(space)
        setup.setStateValidityChecker(request.validity.ompl_callback)
        info = setup.getSpaceInformation()
        info.setStateValidityCheckingResolution(cfg.ompl_check_step / space.getMaximumExtent())
        setup.setPlanner(og.RRTConnect(info))
        start_state = info.allocState()
        for j in range(6):
            start_state[j] = float(request.start[j])
        goal_states = ob.GoalStates(info)
        for goal in goals:
            state = info.allocState()
            for j in range(6):
                state[j] = float(goal[j])
            goal_states.addState(state)
        setup.setStartState(start_state)
        setup.setGoal(goal_states)
        status = setup.solve(cfg.planning_time)
        error = request.validity.callback_error
        if error is not None:
            raise _planning_failed(
                request.where, f"validity check raised {type(error).__name__}: {error}"
            ) from error
        if status.getStatus() != ob.PlannerStatus.EXACT_SOLUTION or not setup.haveExactSolutionPath():
            return None, f"{status.asString()} after {cfg.planning_time:g} s"
        if cfg.simplify_time > 0.0:
            if cfg.simplification == "full":
                setup.simplifySolution(cfg.simplify_time)
            else:
                simplifier = og.PathSimplifier(info)
                solution = setup.getSolutionPath()
                simplifier.reduceVertices(solution)
                simplifier.ropeShortcutPath(solution)
                # Shortcuts in some joints hug the obstacles: checked at the re-check's
                # resolution, so that the path does not graze one between coarser checks.
                info.setStateValidityCheckingResolution(cfg.check_step / space.getMaximumExtent())
                space.setup()  # the state space takes a new resolution in its setup
                simplifier.partialShortcutPath(solution)
                simplifier.reduceVertices(solution)
        path = np.array([state[0:6] for state in setup.getSolutionPath().getStates()])
        path[0] = request.start
        return path, status.asString()

    def _goal_candidates(self, request: _Request, T_goal_tip: np.ndarray) -> list[np.ndarray]:
        """Valid IK solutions for a tip goal, nearest the start first."""
        T_goal_flange = T_goal_tip @ np.linalg.inv(request.T_flange_tip)
        solutions = [np.asarray(q, dtype=float) for q in self._ik(T_goal_flange, seed=request.start)]
        position = _fmt(T_goal_tip[:3, 3])
        if not solutions:
            raise _planning_failed(
                request.where,
                f"NO_IK_SOLUTION: goal pose unreachable: no IK solution within the joint limits "
                f"(tip at {position} m)",
            )
        valid: list[np.ndarray] = []
        problems: list[str] = []
        for q in solutions:
            problem = request.validity.state_problem(q)
            if problem is None:
                valid.append(q)
            else:
                problems.append(problem)
        if not valid:
            raise _planning_failed(
                request.where,
                f"goal pose (tip at {position} m): all {len(solutions)} IK solutions are invalid "
                f"({'; '.join(sorted(set(problems)))})",
            )
        return valid

    def _plan_pose_in_joint_space(
        self, request: _Request, T_goal_tip: np.ndarray, step_index: int
    ) -> ArmSegment:
        return self._plan_joint_goals(request, self._goal_candidates(request, T_goal_tip), step_index)

    def _timed_joint_path(
        self, request: _Request, waypoints: np.ndarray
    ) -> tuple[list[TrajectoryPoint] | None, str | None]:
        """Time-parameterise waypoints and re-check: ``(points, None)`` or ``(None, problem)``."""
        cfg = self._config
        points = time_parameterize(
            waypoints,
            velocity_limits=self._v_max,
            acceleration_limits=self._a_max,
            speed_scaling=cfg.speed_scaling,
            sample_period=cfg.sample_period,
            max_sample_step=cfg.check_step,
        )
        problem = self._verify(request, points, line=None)
        return (points, None) if problem is None else (None, problem)

    # ------------------------------------------------------------------------------------
    # Straight tip lines
    # ------------------------------------------------------------------------------------

    def _plan_line(self, request: _Request, T_goal_tip: np.ndarray, step_index: int) -> ArmSegment:
        """A straight tip line: IK along the line, timing, and ONE validity check of the result.

        The timed trajectory is what the controller plays, so it is the path that is
        checked (:meth:`_verify`). Only when that check fails is the IK path itself
        checked, to find how far along the line it stays valid: ``cartesian`` then keeps
        that prefix when it is long enough (and checks the re-timed prefix), ``pilz``
        fails naming where.
        """
        cfg = self._config
        T_start_tip = self._fk(request.start) @ request.T_flange_tip
        u, poses = interpolate_poses(
            T_start_tip,
            T_goal_tip,
            max_translation_step=cfg.cartesian_step,
            max_rotation_step=cfg.cartesian_rotation_step,
        )
        path = follow_line(
            request.start,
            u,
            poses,
            ik=self._ik,
            T_flange_tip=request.T_flange_tip,
            jump_threshold=cfg.jump_threshold,
            ik_branches=self._ik_branches,
        )
        required = 1.0 if request.planning_type == "pilz" else cfg.min_cartesian_fraction
        self._check_fraction(request, path, required)
        points, problem = self._timed_line(request, T_start_tip, T_goal_tip, path)
        if problem is None:
            return ArmSegment(step_index=step_index, points=tuple(points))
        bad = request.validity.first_bad(path.joints)
        if bad is None:
            raise _planning_failed(
                request.where, f"the timed straight-line trajectory failed the re-check: {problem}"
            )
        keep = max(1, bad[0])
        path = CartesianPath(
            joints=path.joints[:keep],
            parameter=path.parameter[:keep],
            fraction=float(path.parameter[keep - 1]),
            stop_reason=f"{bad[1]} ({u[bad[0]] * 100:.1f}% along the line)",
        )
        self._check_fraction(request, path, required)
        points, problem = self._timed_line(request, T_start_tip, T_goal_tip, path)
        if problem is not None:
            raise _planning_failed(
                request.where, f"the timed straight-line trajectory failed the re-check: {problem}"
            )
        return ArmSegment(step_index=step_index, points=tuple(points))

    def _check_fraction(self, request: _Request, path: CartesianPath, required: float) -> None:
        """Fail unless ``path`` covers ``required`` of the line; log a partial line."""
        if path.fraction < required - 1e-12:
            label = (
                "pilz (LIN) needs the whole line"
                if request.planning_type == "pilz"
                else (f"needs at least {required * 100:.0f}%")
            )
            raise _planning_failed(
                request.where,
                f"Cartesian path achieved only {path.fraction * 100:.1f}% of the straight line ({label}); "
                f"stopped: {path.stop_reason}",
            )
        if path.fraction < 1.0:
            _LOG.info(
                "%s: Cartesian path achieved %.1f%% of the line (stopped: %s)",
                request.where or "moveto",
                path.fraction * 100,
                path.stop_reason,
            )

    def _timed_line(
        self, request: _Request, T_start_tip: np.ndarray, T_goal_tip: np.ndarray, path: CartesianPath
    ) -> tuple[list[TrajectoryPoint], str | None]:
        """Time-parameterise a line's joint path and re-check it: ``(points, problem or None)``."""
        cfg = self._config
        line_start = T_start_tip[:3, 3]
        line_end = line_start + path.fraction * (T_goal_tip[:3, 3] - line_start)
        if path.joints.shape[0] == 1:
            points = [TrajectoryPoint(tuple(float(x) for x in request.start), (0.0,) * 6, (0.0,) * 6, 0.0)]
        else:
            points = time_parameterize_path(
                path.joints,
                path_parameter=path.parameter,
                velocity_limits=self._v_max,
                acceleration_limits=self._a_max,
                speed_scaling=cfg.speed_scaling,
                sample_period=cfg.sample_period,
                max_sample_step=cfg.check_step,
            )
        return points, self._verify(request, points, line=(line_start, line_end))

    # ------------------------------------------------------------------------------------
    # The final re-check
    # ------------------------------------------------------------------------------------

    def _verify(
        self,
        request: _Request,
        points: Sequence[TrajectoryPoint],
        *,
        line: tuple[np.ndarray, np.ndarray] | None,
    ) -> str | None:
        """Re-check a timed trajectory before it leaves the planner.

        Checks: it starts exactly at the start state, at rest, and ends at rest; time
        increases; no joint changes more than ``check_step`` between samples; velocities
        and accelerations within the scaled limits; every sample and the motion between
        samples valid (limits, constraints, collisions); for a straight line, the tip
        stays within ``cartesian_tolerance`` of it.

        Returns:
            ``None`` when all checks pass, else what failed.
        """
        cfg = self._config
        q = np.array([p.positions for p in points])
        qd = np.array([p.velocities for p in points])
        qdd = np.array([p.accelerations for p in points])
        t = np.array([p.time_from_start for p in points])
        if q.shape != (len(points), 6) or not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
            return "malformed samples"
        if not np.array_equal(q[0], request.start) or t[0] != 0.0:
            return "does not start exactly at the start state"
        if np.any(qd[0] != 0.0) or np.any(qd[-1] != 0.0):
            return "does not start and end at rest"
        if np.any(np.diff(t) <= 0.0):
            return "time_from_start does not increase"
        if q.shape[0] > 1:
            gap = float(np.max(np.abs(np.diff(q, axis=0))))
            if gap > cfg.check_step + 1e-9:
                return f"samples {gap:.4f} rad apart (more than {cfg.check_step} rad)"
        v_cap = self._v_max * cfg.speed_scaling * (1.0 + _RATE_SLACK) + 1e-9
        a_cap = self._a_max * cfg.speed_scaling * (1.0 + _RATE_SLACK) + 1e-9
        if np.any(np.abs(qd) > v_cap):
            return f"velocity {float(np.max(np.abs(qd))):.4f} rad/s over the scaled limit"
        if np.any(np.abs(qdd) > a_cap):
            return f"acceleration {float(np.max(np.abs(qdd))):.4f} rad/s² over the scaled limit"
        bad = request.validity.first_bad(q)
        if bad is not None:
            return f"sample {bad[0]} at t = {t[bad[0]]:.3f} s {bad[1]}"
        if line is not None:
            if self._fk is kinematics.fk:
                tips = (kinematics.fk_batch(q) @ request.T_flange_tip)[:, :3, 3]
            else:
                tips = np.array([(self._fk(row) @ request.T_flange_tip)[:3, 3] for row in q])
            deviation = float(np.max(distance_from_segment(tips, line[0], line[1])))
            if deviation > cfg.cartesian_tolerance:
                return (
                    f"tool tip leaves the straight line by {deviation * 1000:.2f} mm "
                    f"(tolerance {cfg.cartesian_tolerance * 1000:.2f} mm)"
                )
        return None


@dataclass(frozen=True, eq=False)
class _Request:
    """One planning request: the start, the planning type, the tool tip and validity."""

    start: NDArray[np.float64]
    planning_type: str
    T_flange_tip: NDArray[np.float64]
    validity: _Validity
    where: str


class CellPlanner:
    """The embedded planner as a :class:`~erobs_bt.planning.base.Planner`: a
    :class:`MotionPlanner` on the cell's collision model, kept in step with the tools.

    The collision model (:class:`~erobs_bt.world.tools.RobotModel`) belongs to planning:
    :meth:`plan_move` holds its lock while it brings the model to the step's tool state
    (the attached tool and the held part) and plans; :meth:`follow` brings the held part
    along with the live tool state only when no plan holds the model and the tool is the
    same (a new tool, a reload of its geometry, is left to the next plan, so a step that
    plans nothing after a tool change does not pay for it).

    Args:
        cell: the cell (named states, obstacles and markers as frames, the tools' tip frames).
        tools: the tool state to build the model for.
        config: planner settings (default :class:`PlannerConfig`).
        seed: overrides the settings' ``ompl_seed`` (OMPL's process-wide RNG: only the first
            seed of a process takes effect); ``None`` keeps it.

    Raises:
        ValueError: malformed planner settings.
    """

    def __init__(
        self,
        cell: CellConfig,
        tools: ToolState,
        *,
        config: PlannerConfig | None = None,
        seed: int | None = None,
    ) -> None:
        config = config if config is not None else PlannerConfig()
        if seed is not None:
            config = replace(config, ompl_seed=int(seed))
        self._cell = cell
        self._model = RobotModel(cell, tools)
        self._samples_lock = threading.Lock()
        self._kept_samples: dict[int, tuple[Sequence[TrajectoryPoint], NDArray[np.float64]]] = {}
        self._planner = MotionPlanner(
            collision=self._model.collision,
            named_states=cell.named_states,
            config=config,
            resolve_frame=self.resolve_frame,
        )

    @property
    def motion_planner(self) -> MotionPlanner:
        """The planner itself (for measurements; it plans with the model's current tools)."""
        return self._planner

    @property
    def model(self) -> RobotModel:
        """The collision model with the tools; hold :attr:`RobotModel.lock` to keep it still."""
        return self._model

    @property
    def named_states(self) -> Mapping[str, tuple[float, ...]]:
        """The cell's named states: name -> six joint positions [rad]."""
        return self._cell.named_states

    @property
    def model_reloads(self) -> int:
        """How often the model was reloaded because the tool (the model revision) changed."""
        return self._model.reloads

    def model_revision(self, tools: ToolState) -> str:
        """``<prefix>__<gripper>[__<cup_profile>]`` of ``tools`` (from the cell config)."""
        return self._cell.model_revision(tools.gripper, tools.cup_profile)

    @property
    def scene_owner(self) -> None:
        """``None``: the embedded planner plans in the world it is given."""
        return None

    def plan_move(
        self, step: MoveTo, start: Sequence[float], *, tools: ToolState, world: World | None = None
    ) -> ArmSegment:
        """Plan ``step`` from ``start`` [rad] with ``tools`` on the model (:meth:`MotionPlanner.plan_move`
        for the tool's IK frame, :func:`~erobs_bt.world.tools.planning_tip`), in ``world``
        (``None``: the model's current world).

        Raises:
            MotionError: ``PLANNING_FAILED: <step.path>: <reason>``.
        """
        with self._model.lock:
            if world is not None:
                try:
                    self._model.set_world(world)
                except ValueError as exc:
                    raise MotionError(ErrorCode.PLANNING_FAILED, f"{step.path}: world: {exc}") from None
            self._model.sync(tools)
            return self._planner.plan_move(
                step,
                start,
                T_flange_tip=planning_tip(self._cell, tools),
                tip_link=self._cell.gripper(tools.gripper).tip_frame,
            )

    def check_trajectory(
        self,
        step: MoveTo,
        points: Sequence[TrajectoryPoint],
        *,
        tools: ToolState,
        world: World | None = None,
        only: Sequence[Obstacle] | None = None,
    ) -> str | None:
        """:meth:`MotionPlanner.check_trajectory` with ``tools`` on the model (its tool tip,
        the held part) in ``world`` (``None``: the model's current one), under the model's lock
        (:class:`~erobs_bt.planning.base.TrajectoryChecker`)."""
        if only is not None:
            # Only the robot against what changed: the model is not brought to ``tools`` (no
            # rebuild); the tool and held part are described to the query instead.
            q = self._samples(points)
            vector = step.direction_vector
            contact = (
                vector is not None
                and step.distance is not None
                and self._planner.allows_tool_contact(
                    vector, step.planning_type, planning_tip(self._cell, tools)
                )
            )
            held = tools.held
            hit = self._model.collision.first_hit_of(
                q,
                only,
                gripper=tools.gripper,
                cup_profile=tools.cup_profile,
                held=None
                if held is None
                else AttachedObject(held.part.name, held.part.shape, held.T_tcp_part),
                allow_contact=contact,
            )
            if hit is None:
                return None
            index, body, obstacle = hit
            return (
                f"{step.path}: sample {index} at t = {points[index].time_from_start:.3f} s in collision "
                f"({body} with {obstacle}) at {_fmt(q[index])}"
            )
        with self._model.lock:
            if world is not None:
                try:
                    self._model.set_world(world)
                except ValueError as exc:
                    return f"{step.path}: world: {exc}"
            self._model.sync(tools)
            return self._planner.check_trajectory(
                step,
                points,
                T_flange_tip=planning_tip(self._cell, tools),
                tip_link=self._cell.gripper(tools.gripper).tip_frame,
            )

    def _samples(self, points: Sequence[TrajectoryPoint]) -> NDArray[np.float64]:
        """``points``' positions as an (N, 6) array [rad], kept for the last
        :data:`_KEPT_SAMPLES` trajectories (a cached solution's segments are the same objects
        at every replay)."""
        with self._samples_lock:
            kept = self._kept_samples.get(id(points))
            if kept is not None and kept[0] is points:
                return kept[1]
        q = np.array([p.positions for p in points], dtype=float)
        with self._samples_lock:
            if len(self._kept_samples) >= _KEPT_SAMPLES:
                self._kept_samples.clear()
            self._kept_samples[id(points)] = (points, q)
        return q

    def follow(self, tools: ToolState) -> None:
        """Bring the model's held part to the live ``tools``, unless a plan holds the model or
        the tool differs (then the next plan does it). Never waits."""
        if not self._model.lock.acquire(blocking=False):
            return
        try:
            if self._model.revision == self.model_revision(tools):
                self._model.sync(tools)
        finally:
            self._model.lock.release()

    def resolve_frame(self, frame_id: str) -> NDArray[np.float64]:
        """(4, 4) ``T_base_link_frame`` [m] of a fixed frame a ``cartesian_target`` may name:
        ``base``, an obstacle, or ``marker_<id>``.

        Raises:
            ValueError: an unknown obstacle or marker.
        """
        if frame_id == "base":
            return kinematics.T_BASE_LINK_BASE.copy()
        if frame_id.startswith("marker_") and frame_id[7:].isdigit():
            return self._cell.marker(int(frame_id[7:])).pose.matrix()
        for obstacle in self._model.world.obstacles:  # the cell's and those added at run time
            if obstacle.name == frame_id:
                return obstacle.T_base_link_obstacle()
        return self._cell.obstacle(frame_id).T_base_link_obstacle()

"""The replay's scene check: a cached solution checked against the planning scene as it is now,
before a replay sends it (the opt-in ``replay_scene_check``)."""

from __future__ import annotations

from collections.abc import Sequence

from erobs_bt.backends.base import ArmSegment, MotionError, Solution
from erobs_bt.backends.stack.core import StackCore
from erobs_bt.backends.stack.state import LiveState
from erobs_bt.planning.base import TrajectoryChecker
from erobs_bt.script.model import MoveTo, Step
from erobs_bt.world.tools import ToolState


class ReplayCheck:
    """Checks cached solutions against the live planning scene with the live tool state.

    Args:
        core: the stack's shared parts (the planner checks).
        state: the live tool state and world, and the worlds recently planned in.
    """

    def __init__(self, core: StackCore, state: LiveState) -> None:
        self._core = core
        self._state = state
        self._tools_memo: tuple[Solution, ToolState, list[ToolState]] | None = None

    @property
    def checks_replay(self) -> bool:
        """True when :meth:`check_replay` can check a trajectory here: the planner checks
        trajectories in its own world (the embedded planner; not MoveIt, whose scene lives
        in move_group)."""
        return isinstance(self._core.planner, TrajectoryChecker)

    def check_replay(self, solution: Solution, steps: Sequence[Step]) -> str | None:
        """Check a cached solution densely against the planning scene as it is now, before a
        replay sends it (the opt-in ``replay_scene_check``; the specification's replay runs no
        collision pass otherwise).

        Every arm segment is checked by the planner (:meth:`TrajectoryChecker.check_trajectory`:
        the same allowed-contact rules as planning) with the tool state it would run with: the
        live tool state carried through the solution as :meth:`StackCore.predict_tools
        <erobs_bt.backends.stack.core.StackCore.predict_tools>` carries it (a part picked up by
        a ``vacuum_on`` is checked with the arm from there). When the stack remembers the world
        the solution was planned in (its ``scene_revision``, one of the last
        :data:`~erobs_bt.backends.stack.state.SCENE_HISTORY` revisions it planned in), only the
        objects added or moved since are checked (a removed object cannot make a motion collide;
        the rest was checked when it was planned), else every check of planning against the
        whole world. Runs in the caller's thread; nothing moves.

        Args:
            solution: the cached solution.
            steps: the unit's steps (an arm segment's ``step_index`` names one of them).

        Returns:
            ``None`` when the whole solution is valid now, else what is wrong, naming the step.

        Raises:
            ValueError: the planner cannot check trajectories (:attr:`checks_replay` is false),
                or a segment names a step that is not a ``moveto`` of ``steps``.
        """
        planner = self._core.planner
        if not isinstance(planner, TrajectoryChecker):
            raise ValueError(
                f"the {type(planner).__name__} planner cannot check a stored trajectory against the "
                "planning scene (replay_scene_check needs the embedded planner)"
            )
        by_index = {step.index: step for step in steps}
        state, world = self._state.snapshot()
        only = self._state.added_since(solution.scene_revision, world)
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
        ``state`` (carried as :meth:`StackCore.predict_tools` carries it), or why the
        bookkeeping refuses a tool command. The last answer is kept: a solution replayed again
        from the same tool state is not carried through again."""
        core = self._core
        with core.lock:
            memo = self._tools_memo
        if memo is not None and memo[0] is solution and memo[1] == state:
            return memo[2]
        start = solution.start_positions
        q: tuple[float, ...] = tuple(start if start is not None else core.arm.joint_positions())
        along: list[ToolState] = []
        current = state
        for segment in solution.segments:
            along.append(current)
            if isinstance(segment, ArmSegment):
                if segment.points:
                    q = segment.points[-1].positions
                    current = core.after_move(current, q)
            else:
                try:
                    current = core.after_tool(current, segment, q, f"step {segment.step_index}")
                except MotionError as exc:
                    return exc.detail
        with core.lock:
            self._tools_memo = (solution, state, along)
        return along

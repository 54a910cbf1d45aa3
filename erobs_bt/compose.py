"""Compose scripts into your own py_trees tree: the public subtree API.

:func:`script_subtree` compiles a script into the same tree a goal runs (unit boundaries,
ReplayOrPlan per motion unit, the fault decorator; docs/design.md §2), bound to a motion
backend, and returns a :class:`ScriptSubtree`. Insert its :attr:`~ScriptSubtree.root` into
any tree and tick it the py_trees way, with ``py_trees.trees.BehaviourTree.tick()`` or your
own loop::

    from erobs_bt.backends.factory import create_backend
    from erobs_bt.compose import script_subtree

    backend = create_backend("sim", speed=5.0)
    load = script_subtree(Path("load_sample.json"), backend=backend, poses=Path("poses.yaml"))
    root = py_trees.composites.Sequence("beamline", memory=True, children=[warm_up, load.root, measure])
    tree = py_trees.trees.BehaviourTree(root)
    while root.status in (Status.INVALID, Status.RUNNING):
        tree.tick()
        load.wait_for_work(0.5)      # returns early when a backend future completes

Behaviour, as documented for goals (docs/behaviour.md §3): ``pause()`` and ``cancel()`` take
effect at the next unit boundary; a ``pause`` step returns RUNNING until ``resume()``;
``resume()`` releases either. A *halt* of the subtree (a parent preempts it, e.g. a reactive
e-stop selector above it, or ``root.stop()``) stops the motion its running leaf started
(controlled stop, docs/design.md §2 and "Engine safety"); ticking it again afterwards starts the
script over from its first unit. A fatal error (``TIMEOUT:``/``REPLAY_TIMEOUT:``) fails the
subtree and sets :attr:`ScriptSubtree.faulted`: nothing more is dispatched, and it is up to the
surrounding tree what to do next (there is no orchestrator to fault).

The root is a decorator (:class:`RunScript`) around the script's unit sequence: its
``initialise()`` mounts the script's ``start_gripper`` on the backend
(``MotionBackend.prepare_goal``), so callers need no setup call. One backend drives one arm:
subtrees sharing a backend must not run in parallel (a Sequence of them is fine).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import py_trees
from py_trees.common import Status

from erobs_bt.backends.base import MotionBackend
from erobs_bt.batching import Unit
from erobs_bt.cache import PlanCache
from erobs_bt.plan import GoalPlan, ScriptParser, plan_goal, plan_script
from erobs_bt.script.model import Script
from erobs_bt.settings import EngineSettings
from erobs_bt.tree.compile import compile_tree
from erobs_bt.tree.context import Controls, FinishReason, GoalContext, GoalEvents, Mode

#: GoalContext fields a subtree sets once (``key_document`` is derived from the script when the
#: context is made); every other field is per goal (reset on a restart).
_GOAL_INPUTS = frozenset(
    {
        "script",
        "units",
        "mode",
        "backend",
        "cache",
        "eligible",
        "controls",
        "events",
        "settings",
        "wake",
        "key_document",
    }
)


@dataclass(frozen=True)
class SubtreeOutcome:
    """What a script subtree has done so far.

    Attributes:
        status: the root's py_trees status (INVALID before the first tick).
        completed_steps: steps of the units that completed (a failed batch counts none).
        total_steps: steps after macro expansion.
        error: the first error with its prefix (``PLANNING_FAILED: …``), ``"cancelled"`` or
            ``"cancelled while paused"`` after a cancel, ``""`` otherwise.
        paused: the script is paused (at a boundary or a ``pause`` step).
    """

    status: Status
    completed_steps: int
    total_steps: int
    error: str
    paused: bool


class _Progress(GoalEvents):
    """Counts completed steps and tracks pausing (the tree's events)."""

    def __init__(self) -> None:
        self.completed_steps = 0
        self.paused_now = False
        self.current: Unit | None = None

    def unit_started(self, unit: Unit) -> None:
        self.current = unit

    def unit_succeeded(self, unit: Unit) -> None:
        self.completed_steps += len(unit.steps)

    def paused(self, reason: str) -> None:
        self.paused_now = True

    def resumed(self) -> None:
        self.paused_now = False


class RunScript(py_trees.decorators.Decorator):
    """The root of a script subtree: prepares the backend, then passes its child's status through.

    Args:
        name: shown in the tree (default: ``script``).
        child: the compiled unit sequence.
        subtree: the owner, whose goal state is reset when the script starts again.
    """

    def __init__(self, name: str, child: py_trees.behaviour.Behaviour, subtree: ScriptSubtree) -> None:
        super().__init__(name=name, child=child)
        self._subtree = subtree

    def initialise(self) -> None:
        """Start (or restart) the script: fresh goal state, then mount ``start_gripper``."""
        self._subtree._restart()
        self._subtree.context.backend.prepare_goal(self._subtree.script.start_gripper)

    def update(self) -> Status:
        """The unit sequence's status."""
        return self.decorated.status


class ScriptSubtree:
    """A compiled script bound to a backend, to be inserted into a py_trees tree.

    Create with :func:`script_subtree`. Thread-safe controls: :meth:`pause`, :meth:`resume`,
    :meth:`cancel` (from any thread, e.g. a GUI or a ROS callback).

    Attributes:
        root: the behaviour to insert (:class:`RunScript`).
        plan: the goal plan (:func:`erobs_bt.plan.plan_goal`: script, units, eligibility).
        script: the parsed script.
        units: its units.
        context: the goal context its behaviours share.
    """

    def __init__(
        self,
        plan: GoalPlan,
        *,
        backend: MotionBackend,
        cache: PlanCache,
        settings: EngineSettings,
        mode: Mode,
        name: str,
        work: threading.Event,
    ) -> None:
        self.plan = plan
        self.script = plan.script
        self._work = work
        self._progress = _Progress()
        self.context = GoalContext.for_plan(
            plan,
            mode=mode,
            backend=backend,
            cache=cache,
            controls=Controls(on_change=self._work.set),
            events=self._progress,
            settings=settings,
            wake=self._work.set,
        )
        self.units = self.context.units
        self.root = RunScript(name, compile_tree(self.context), self)
        self._starts = 0

    def _restart(self) -> None:
        """Reset the per-goal state of the context in place (its behaviours hold the object)."""
        context = self.context
        for item in dataclasses.fields(context):
            if item.name in _GOAL_INPUTS:
                continue
            if item.default_factory is not dataclasses.MISSING:
                setattr(context, item.name, item.default_factory())
            elif item.default is not dataclasses.MISSING:
                setattr(context, item.name, item.default)
        if self._starts:
            # A request left over from the previous run (a cancel that ended it) must not end
            # this one; requests made before the first start are kept.
            context.controls = Controls(on_change=self._work.set)
        self._starts += 1
        self._progress.completed_steps = 0
        self._progress.paused_now = False
        self._progress.current = None

    # -- controls ----------------------------------------------------------------------
    def pause(self) -> None:
        """Pause at the next unit boundary (the running unit completes first)."""
        self.context.controls.request_pause()

    def resume(self) -> None:
        """Release a paused boundary or a ``pause`` step."""
        self.context.controls.request_resume()

    def cancel(self) -> None:
        """End the script at the next unit boundary (at once while paused); it then fails."""
        self.context.controls.request_cancel()

    # -- state -------------------------------------------------------------------------
    @property
    def faulted(self) -> bool:
        """A fatal error failed the script (nothing more was dispatched)."""
        return self.context.fault is not None

    def outcome(self) -> SubtreeOutcome:
        """The root's status, progress and first error (see :class:`SubtreeOutcome`)."""
        context = self.context
        if context.finish_reason is FinishReason.CANCELED:
            error = context.cancel_message
        else:
            error = str(context.failure) if context.failure is not None else ""
        return SubtreeOutcome(
            status=self.root.status,
            completed_steps=self._progress.completed_steps,
            total_steps=len(self.script.steps),
            error=error,
            paused=self._progress.paused_now,
        )

    @property
    def current_unit(self) -> int:
        """1-based index of the unit running or last run (0 before the first)."""
        unit = self._progress.current
        return unit.index + 1 if unit is not None else 0

    def wake(self) -> None:
        """Wake a loop blocked in :meth:`wait_for_work` (e.g. after an outside event)."""
        self._work.set()

    def wait_for_work(self, timeout: float) -> bool:
        """Block until a backend future completed or a control changed, at most ``timeout`` s.

        For tick loops that should tick at once when something happened instead of at a fixed
        rate (subtrees made with the same ``work`` event share it). Returns True when woken by
        an event (and clears it).
        """
        woken = self._work.wait(timeout)
        self._work.clear()
        return woken


def script_subtree(
    script: str | bytes | Path | Script,
    *,
    backend: MotionBackend,
    parser: ScriptParser | None = None,
    poses: Path | None = None,
    cell: Path | None = None,
    cache: PlanCache | None = None,
    enable_batching: bool = True,
    timeouts: Mapping[str, float] | None = None,
    mode: Mode = Mode.EXECUTE,
    name: str = "script",
    work: threading.Event | None = None,
) -> ScriptSubtree:
    """Compile ``script`` into a subtree bound to ``backend``.

    The script goes through the same goal plan as a goal (:func:`erobs_bt.plan.plan_goal`):
    validation with the cell's vocabulary and the pose registry, macro expansion, units,
    cache eligibility.

    Args:
        script: JSON text, a path to a JSON file, or an already parsed :class:`Script`.
        backend: what moves the robot (``erobs_bt.backends.factory.create_backend``).
        parser: the configured parser; default ``ScriptParser.from_files(cell=cell, poses=poses)``.
        poses: the pose-registry YAML (degrees), when no ``parser`` is given.
        cell: the cell YAML whose vocabulary the script is checked against (default: the
            packaged cell), when no ``parser`` is given.
        cache: a plan cache to share between subtrees (default: a new one).
        enable_batching: group consecutive moveto/end_effector steps into one unit.
        timeouts: per-type timeouts [s] overriding :data:`~erobs_bt.timeouts.DEFAULT_TIMEOUTS`.
        mode: execute (default) or preview (plan only).
        name: the root behaviour's name.
        work: the event set when a backend future completes or a control changes (share one
            between subtrees to wake a single tick loop; default: a new one).

    Returns:
        The subtree; insert ``subtree.root`` into your tree.

    Raises:
        ScriptError: the script is invalid (the message names where, e.g. ``tasks[3].distance``).
        NotPreviewableError: preview of a script with steps other than moveto/end_effector.
        OSError: a file cannot be read.
        ValueError: an unknown timeout key.
    """
    # plan-ahead stays off: a subtree's units are planned as the tree reaches them
    settings = EngineSettings(enable_batching=enable_batching, timeouts=timeouts or {}, plan_ahead=False)
    preview = mode is Mode.PREVIEW
    if isinstance(script, Script):
        plan = plan_script(script, enable_batching=enable_batching)
        if preview:
            plan.check_previewable()
    else:
        configured = parser if parser is not None else ScriptParser.from_files(cell=cell, poses=poses)
        text = script.read_bytes() if isinstance(script, Path) else script
        plan = plan_goal(text, parser=configured, enable_batching=enable_batching, preview=preview)
    return ScriptSubtree(
        plan,
        backend=backend,
        cache=cache if cache is not None else PlanCache(),
        settings=settings,
        mode=mode,
        name=name,
        work=work if work is not None else threading.Event(),
    )

"""The world and tool state a motion stack keeps: the live tool state and its model revision,
the suction-cup override, the planning scene's world (run-time obstacles, tag objects put
there by vision, the revisions recently planned in) and the simulation reset."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from erobs_bt.backends.base import ErrorCode, MotionError, WorldListener
from erobs_bt.backends.stack.core import StackCore
from erobs_bt.planning.base import SceneKeeper
from erobs_bt.world.cell import Obstacle
from erobs_bt.world.scene import TagObject, World, tag_objects
from erobs_bt.world.tools import PipettorState, ToolState

_LOG = logging.getLogger(__name__)

#: How many planning-scene revisions the stack remembers the world of (the ones it planned
#: in most recently): a cached solution planned in one of them is scene-checked against only
#: the objects added or moved since (:meth:`MotionStack.check_replay
#: <erobs_bt.backends.stack.MotionStack.check_replay>`).
SCENE_HISTORY = 64


class LiveState:
    """The stack's live tool state and planning-scene world (thread-safe).

    Args:
        core: the stack's shared parts (its lock guards this state).
        tool_state: the tool state at start (:func:`~erobs_bt.world.tools.initial_tool_state`).
    """

    def __init__(self, core: StackCore, tool_state: ToolState) -> None:
        self._core = core
        self._lock = core.lock
        self._tools = tool_state
        self._revision: tuple[ToolState | None, str] = (None, "")  # see model_revision()
        self._cup_override: str | None = None  # see set_cup_override()
        cell = core.cell
        self._world = World.of(cell.obstacles, where=f"{cell.source or 'cell'}: obstacles")
        self._tag_objects = tag_objects(cell)
        self._placed: dict[str, Obstacle] = {}  # tag objects put into a SceneKeeper's scene
        self._world_listeners: list[WorldListener] = []
        self._scene_history: OrderedDict[str, tuple[Obstacle, ...]] = OrderedDict()

    # -- tools -----------------------------------------------------------------------------
    def tools(self) -> ToolState:
        """The live tool state (attached tool, held part, parts, pipettor, docks)."""
        with self._lock:
            return self._tools

    def pipettor(self) -> PipettorState:
        """The pipettor's bookkeeping (tip, aspirated volume, LED)."""
        with self._lock:
            return self._tools.pipettor

    def set_tools(self, state: ToolState) -> None:
        """Replace the live tool state (the planner is not told: :meth:`follow_tools`)."""
        with self._lock:
            self._tools = state

    def follow_tools(self, state: ToolState) -> None:
        """Replace the live tool state and have the planner follow it."""
        with self._lock:
            self._tools = state
        self._core.planner.follow(state)

    def update_tools(self, change: Callable[[ToolState], ToolState]) -> ToolState:
        """Replace the live tool state with ``change(live)`` atomically; returns the new one."""
        with self._lock:
            self._tools = change(self._tools)
            return self._tools

    def model_revision(self) -> str:
        """``<prefix>__<gripper>[__<cup_profile>]`` of the attached tool (from configuration only).

        Built once per tool state (a :class:`ToolState` is immutable, every change is a new
        object): every unit's cache key reads it.
        """
        with self._lock:
            tools = self._tools
            known, revision = self._revision
            if known is not tools:
                revision = self._core.planner.model_revision(tools)
                self._revision = (tools, revision)
            return revision

    # -- cup profiles ----------------------------------------------------------------------
    def cup_profiles(self) -> tuple[str, ...]:
        """Every suction-cup profile of the cell's vacuum grippers, sorted."""
        return tuple(sorted({name for g in self._core.cell.grippers.values() for name in g.cup_profiles}))

    def set_cup_override(self, cup_profile: str) -> None:
        """The suction cup to fit on a vacuum gripper at each goal's start; ``""``: the
        gripper's default (:meth:`MotionStack.set_cup_override
        <erobs_bt.backends.stack.MotionStack.set_cup_override>`).

        Raises:
            ValueError: ``Unknown cup profile: <name> (available: …)`` when no gripper of
                the cell has that profile.
        """
        available = self.cup_profiles()
        if cup_profile and cup_profile not in available:
            raise ValueError(
                f"Unknown cup profile: {cup_profile} (available: {', '.join(available) or 'none'})"
            )
        with self._lock:
            self._cup_override = cup_profile or None

    def cup_profile_for(self, gripper: str) -> str | None:
        """The cup :meth:`set_cup_override` asks for, when ``gripper`` has that profile; else
        ``None`` (its default)."""
        with self._lock:
            override = self._cup_override
        return override if override in self._core.cell.gripper(gripper).cup_profiles else None

    # -- world -----------------------------------------------------------------------------
    def world(self) -> World:
        """The current planning-scene world (obstacles and revision, one snapshot)."""
        with self._lock:
            return self._world

    def snapshot(self) -> tuple[ToolState, World]:
        """The live tool state and world, read together."""
        with self._lock:
            return self._tools, self._world

    @property
    def tag_objects(self) -> Mapping[int, TagObject]:
        """The cell's tag-mapped collision objects by tag id (:func:`erobs_bt.world.scene.tag_objects`)."""
        return self._tag_objects

    def set_world_obstacles(self, obstacles: Sequence[Obstacle]) -> str:
        """Replace the planning scene's world from the next plan on (:meth:`MotionStack.set_world_obstacles
        <erobs_bt.backends.stack.MotionStack.set_world_obstacles>`).

        Raises:
            ValueError: the planner keeps its own planning scene, or the obstacles are
                malformed; nothing changes.
        """
        owner = self._core.planner.scene_owner
        if owner is not None:
            raise ValueError(
                f"{self._core.label}: the planning scene belongs to {owner}; change it there "
                "(its collision_object, planning_scene and apply_planning_scene)"
            )
        return self._replace_world(World.of(obstacles, where="set_world_obstacles"), "set_world_obstacles")

    def add_world_listener(self, listener: WorldListener) -> None:
        """Call ``listener(world, source)`` after every change of the world, from the thread
        that made it."""
        with self._lock:
            self._world_listeners.append(listener)

    def remove_world_listener(self, listener: WorldListener) -> None:
        """Stop calling ``listener`` (no error when it was not added)."""
        with self._lock:
            if listener in self._world_listeners:
                self._world_listeners.remove(listener)

    def _replace_world(self, world: World, source: str) -> str:
        with self._lock:
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

    def detected(self, marker_id: int, T_base_link_marker: NDArray[np.float64]) -> None:
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
        planner = self._core.planner
        owner = planner.scene_owner
        if owner is not None:
            if not isinstance(planner, SceneKeeper):
                _LOG.warning(
                    "tag %d: collision object %s not added: the planning scene belongs to %s",
                    marker_id,
                    mapped.name,
                    owner,
                )
                return
            with self._lock:
                if self._placed.get(obstacle.name) == obstacle:
                    return
            planner.put_object(obstacle, where=f"tag {marker_id}: collision object {obstacle.name}")
            with self._lock:
                self._placed[obstacle.name] = obstacle
            _LOG.info(
                "tag %d: collision object %s put into %s's planning scene at %s m",
                marker_id,
                obstacle.name,
                owner,
                [round(v, 4) for v in obstacle.pose.xyz],
            )
            return
        with self._lock:
            current = self._world
        others = [o for o in current.obstacles if o.name != obstacle.name]
        self._replace_world(World.of([*others, obstacle], where=f"tag {marker_id}"), f"tag {marker_id}")

    def remember_world(self, world: World) -> str:
        """Remember ``world`` (a plan is made in it) among the last :data:`SCENE_HISTORY` for
        the replay check; returns its revision, the one the solution records."""
        with self._lock:
            history = self._scene_history
            history[world.revision] = world.obstacles
            history.move_to_end(world.revision)
            while len(history) > SCENE_HISTORY:
                history.popitem(last=False)
        return world.revision

    def added_since(self, revision: str | None, world: World) -> tuple[Obstacle, ...] | None:
        """The objects of ``world`` that were not in the world of scene ``revision`` (added,
        or moved: a moved object differs from its old self); ``None`` when that world is not
        remembered."""
        with self._lock:
            then = self._scene_history.get(revision) if revision is not None else None
        if then is None:
            return None
        before = set(then)
        return tuple(obstacle for obstacle in world.obstacles if obstacle not in before)

    # -- simulation reset ------------------------------------------------------------------
    def reset(self, reset: Callable[[], ToolState], motion_lock: threading.Lock) -> str:
        """Put the simulated cell back in its initial state (:meth:`MotionStack.reset_simulation
        <erobs_bt.backends.stack.MotionStack.reset_simulation>`): ``reset()`` puts the hardware
        back and returns the cell's initial tool state, under ``motion_lock`` (no trajectory
        starts meanwhile); the planner follows it.

        Returns:
            What the cell is now, for people (``epick attached; docks 1: hande, ...``).

        Raises:
            MotionError: ``EXECUTION_FAILED`` when the arm is moving.
        """
        with motion_lock:
            if self._core.arm.is_busy():
                raise MotionError(
                    ErrorCode.EXECUTION_FAILED, "cannot reset the simulation: the arm is moving"
                )
            state = reset()
            self.set_tools(state)
        self._core.planner.follow(state)
        docks = ", ".join(f"{n}: {tool or 'empty'}" for n, tool in sorted(state.docks.items()))
        pipettor = state.pipettor
        return (
            f"{state.gripper} attached; docks {docks or 'none'}; no part held; pipettor "
            f"{'with' if pipettor.tip else 'without'} tip, {pipettor.volume * pipettor.stroke_ul:g} µL"
        )

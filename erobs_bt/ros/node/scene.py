"""The node's live planning scene, with MoveIt's names and types (erobs_bt issue 23).

The ``erobs_bt`` node keeps the world its embedded planner avoids (the motion stack's
:meth:`~erobs_bt.backends.base.MotionBackend.set_world_obstacles`) and lets clients change it
as they change a ``move_group``'s:

* subscribes to ``collision_object`` (``moveit_msgs/msg/CollisionObject``: ADD, REMOVE,
  APPEND, MOVE) and ``planning_scene`` (``moveit_msgs/msg/PlanningScene``: with ``is_diff``
  its world objects are applied in order; without, they replace the whole world);
* serves ``apply_planning_scene`` (``moveit_msgs/srv/ApplyPlanningScene``; ``success`` false
  with the reason logged when the scene is refused) and ``get_planning_scene``
  (``moveit_msgs/srv/GetPlanningScene``: the world and the robot state, joints and the
  attached tool as an ``AttachedCollisionObject`` on ``flange``, as the simulated
  move_group answers; sent back in a whole scene, the tool is accepted as it is);
* publishes the whole scene on ``monitored_planning_scene`` (latched, as move_group does)
  after every change, so a late subscriber and the run's bag get the scene in force.

The conversions and MoveIt's rules (frames, shapes, operations, names) are
:mod:`erobs_bt.backends.moveit.planning_scene`'s, shared with the simulated move_group. A message is
applied as a whole or not at all: a refused one (unknown frame, a cone or mesh, REMOVE of an
unknown id, a robot link's name, an attached object) is logged as ``<topic>: refused:
<reason>`` naming the object, changes nothing, and the node keeps serving. A change reaches the
next plan only: a plan already asked for and a motion in flight keep the world they started
with. The cell's obstacles are objects of the world too (ids = their names; REMOVE with an empty
id clears the world, as in MoveIt); the links allowed to touch one (``touch_links``, e.g. the
table under the base) stay with its name when it is added again.

A tag that the cell maps to a collision object (:func:`erobs_bt.world.scene.tag_objects`) is
added by the motion stack when a vision step detects it; the scene here follows (source
``tag <id>``).

Records: each change is a ``scene_changed`` record in the running goal's run log (``revision``,
``objects``, ``added``, ``removed``, ``source``) and its ``monitored_planning_scene`` message in
the goal's bag; each goal's log starts with a ``scene`` record of the world in force. A refusal
is a ``scene_refused`` record (``source``, ``id``, ``message``).

``backend: moveit``: the scene is move_group's, and the node serves none of these names (they
would duplicate move_group's in the same namespace): clients, and ``erobs-bt scene``, change
move_group's scene directly (:class:`~erobs_bt.backends.moveit.planner.MoveItPlanner` plans in
it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
from moveit_msgs.msg import AttachedCollisionObject, CollisionObject, PlanningScene, RobotState
from moveit_msgs.srv import ApplyPlanningScene, GetPlanningScene
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node

from erobs_bt.backends.base import JOINT_NAMES, HasCell, MotionBackend, TracksTools, WatchesWorld
from erobs_bt.backends.moveit.planning_scene import SceneError, SceneWorld, attached_message
from erobs_bt.orchestrator import Orchestrator, OrchestratorListener
from erobs_bt.ros.convert import ros_text
from erobs_bt.ros.node.nodelog import NodeLog
from erobs_bt.ros.node.runlogs import NodeRunLogs
from erobs_bt.rosqos import latched_qos
from erobs_bt.world.cell import Obstacle
from erobs_bt.world.description import TIP_LINK
from erobs_bt.world.scene import World

#: The topics and services of the live scene: key → MoveIt's (relative) name.
SCENE_NAMES: Mapping[str, str] = {
    "collision_object": "collision_object",
    "planning_scene": "planning_scene",
    "apply_planning_scene": "apply_planning_scene",
    "get_planning_scene": "get_planning_scene",
    "monitored_planning_scene": "monitored_planning_scene",
}

#: Links that move with the flange: the attached tool may touch them (as the simulated
#: move_group reports it).
_FLANGE_LINKS = ("wrist_3_link", "flange", "tool0")

#: The scene's name in its messages.
SCENE_NAME = "erobs_bt"


def _ids(world: SceneWorld) -> list[str]:
    return sorted(world.objects)


class NodeScene(OrchestratorListener):
    """The node's live planning scene (module docstring).

    Thread-safe: message callbacks, service calls and the stack's world listener may run
    at once; one lock orders the changes.

    Args:
        node: the node (its namespace holds the names).
        backend: the motion stack whose world this is (must accept
            :meth:`~erobs_bt.backends.base.MotionBackend.set_world_obstacles`).
        orchestrator: for the running goal (its run log takes the records).
        log: the node's logger.
        run_logs: the node's run logs and bags, or ``None``.
    """

    def __init__(
        self,
        node: Node,
        backend: MotionBackend,
        orchestrator: Orchestrator,
        *,
        log: NodeLog,
        run_logs: NodeRunLogs | None,
    ) -> None:
        self._node = node
        self._backend = backend
        self._orchestrator = orchestrator
        self._log = log
        self._run_logs = run_logs
        self._lock = threading.RLock()
        self._closed = False
        start = backend.world_obstacles()
        # The links allowed to touch the cell's obstacles stay with their names.
        self._touch = {o.name: o.touch_links for o in start if o.touch_links}
        self._world = SceneWorld.of(start)
        self._revision = backend.scene_revision()
        self._applying = False  # set while this class changes the backend's world
        group = MutuallyExclusiveCallbackGroup()  # changes in order, one at a time
        self._publisher = node.create_publisher(
            PlanningScene, SCENE_NAMES["monitored_planning_scene"], latched_qos()
        )
        self._subscriptions = [
            node.create_subscription(
                CollisionObject,
                SCENE_NAMES["collision_object"],
                self._on_collision_object,
                100,
                callback_group=group,
            ),
            node.create_subscription(
                PlanningScene,
                SCENE_NAMES["planning_scene"],
                self._on_planning_scene,
                100,
                callback_group=group,
            ),
        ]
        self._services = [
            node.create_service(
                ApplyPlanningScene,
                SCENE_NAMES["apply_planning_scene"],
                self._on_apply,
                callback_group=group,
            ),
            node.create_service(
                GetPlanningScene,
                SCENE_NAMES["get_planning_scene"],
                self._on_get,
                callback_group=MutuallyExclusiveCallbackGroup(),
            ),
        ]
        self._remove_listener: Callable[[], None] | None = None
        if isinstance(backend, WatchesWorld):
            backend.add_world_listener(self._on_backend_world)
            self._remove_listener = lambda: backend.remove_world_listener(self._on_backend_world)
        self._publish()

    # -- queries ---------------------------------------------------------------------------
    @property
    def revision(self) -> str:
        """The scene revision in force (:meth:`MotionBackend.scene_revision`)."""
        with self._lock:
            return self._revision

    def object_ids(self) -> list[str]:
        """The ids of the world's collision objects, sorted."""
        with self._lock:
            return _ids(self._world)

    def scene_message(self) -> PlanningScene:
        """The whole scene (``is_diff`` false): the world's objects in ``base_link`` and the
        robot state (joint positions [rad])."""
        with self._lock:
            objects = self._world.collision_objects()
        scene = PlanningScene(name=SCENE_NAME, robot_model_name="ur5e", is_diff=False)
        scene.robot_state = RobotState(is_diff=False)
        positions = self._backend.joint_positions()
        if positions is not None:
            scene.robot_state.joint_state.name = list(JOINT_NAMES)
            scene.robot_state.joint_state.position = [float(v) for v in positions]
        tool = self._tool_message()
        if tool is not None:
            scene.robot_state.attached_collision_objects = [tool]
        scene.world.collision_objects = objects
        return scene

    def _tool_message(self) -> AttachedCollisionObject | None:
        """The attached tool as MoveIt reports it (the simulated move_group's form): object
        ``<gripper>`` on ``flange`` with the tool's and its cup's primitives; ``None`` for the
        bare flange or a backend without a cell."""
        backend = self._backend
        gripper = backend.current_gripper()
        if not isinstance(backend, HasCell) or gripper == "none":
            return None
        cell = backend.cell
        cup = backend.tool_state().cup_profile if isinstance(backend, TracksTools) else None
        shapes = tuple(
            replace(s, name=f"{gripper}/{s.name}") for s in cell.gripper(gripper).collision_shapes(cup)
        )
        if not shapes:
            return None
        return attached_message(TIP_LINK, gripper, shapes, np.eye(4), _FLANGE_LINKS)

    # -- changes ---------------------------------------------------------------------------
    def _obstacles(self, world: SceneWorld) -> tuple[Obstacle, ...]:
        return tuple(
            replace(o, touch_links=self._touch[o.name]) if not o.touch_links and o.name in self._touch else o
            for o in world.obstacles()
        )

    def apply(self, source: str, ident: str, change: Callable[[SceneWorld], SceneWorld]) -> str | None:
        """Apply one change of the world (all or nothing).

        Args:
            source: the topic or service it came by (for the log and the records).
            ident: the object id or scene name it concerns.
            change: the new world from the current one (raises :class:`SceneError`).

        Returns:
            ``None`` when applied, else why it was refused (logged, recorded).
        """
        with self._lock:
            if self._closed:
                return "the node is shutting down"
            before = self._world
            try:
                after = change(before)
                self._applying = True
                try:
                    revision = self._backend.set_world_obstacles(self._obstacles(after))
                finally:
                    self._applying = False
            except (SceneError, ValueError, TypeError) as exc:
                reason = ros_text(str(exc))
                self._log.warning(f"{source}: refused: {reason}")
                self._record({"event": "scene_refused", "source": source, "id": ident, "message": reason})
                return reason
            self._world = after
            changed = revision != self._revision
            self._revision = revision
        if changed:
            self._changed(before, after, source)
        return None

    def _changed(self, before: SceneWorld, after: SceneWorld, source: str) -> None:
        added = sorted(set(after.objects) - set(before.objects))
        removed = sorted(set(before.objects) - set(after.objects))
        moved = sorted(
            k for k in set(after.objects) & set(before.objects) if after.objects[k] != before.objects[k]
        )
        self._log.info(
            f"planning scene {self.revision} by {source}: added {', '.join(added) or 'none'}, "
            f"removed {', '.join(removed) or 'none'}, changed {', '.join(moved) or 'none'}"
        )
        message = self._publish()
        self._record(
            {
                "event": "scene_changed",
                "source": source,
                "revision": self.revision,
                "objects": _ids(after),
                "added": added,
                "removed": removed,
                "changed": moved,
            },
            message,
        )

    def _on_backend_world(self, world: World, source: str) -> None:
        """The stack changed its world itself (a detected tag's object): follow it."""
        with self._lock:
            if self._applying:
                return  # our own change; recorded by apply()
            before = self._world
            current = {o.name: o for o in world.obstacles}
            objects: dict[str, tuple[Obstacle, ...]] = {}
            for key, obstacles in before.objects.items():  # unchanged objects keep their grouping
                if all(current.get(o.name) is not None for o in obstacles):
                    objects[key] = tuple(current.pop(o.name) for o in obstacles)
            after = SceneWorld.of(current.values())
            for key, obstacles in objects.items():
                after = after.with_object(key, obstacles, before.poses[key])
            self._world = after
            self._revision = world.revision
        self._changed(before, after, source)

    # -- ROS callbacks ------------------------------------------------------------------------
    def _on_collision_object(self, msg: CollisionObject) -> None:
        self.apply("collision_object", msg.id, lambda world: world.apply(msg))

    def _on_planning_scene(self, msg: PlanningScene) -> None:
        self.apply("planning_scene", msg.name, lambda world: self._scene_change(world, msg))

    def _on_apply(self, request: Any, response: Any) -> Any:
        reason = self.apply(
            "apply_planning_scene", request.scene.name, lambda world: self._scene_change(world, request.scene)
        )
        response.success = reason is None
        return response

    def _on_get(self, request: Any, response: Any) -> Any:
        response.scene = self.scene_message()
        return response

    def _scene_change(self, world: SceneWorld, scene: Any) -> SceneWorld:
        # The attached tool as get_planning_scene reports it comes back in a round trip.
        tool = self._backend.current_gripper()
        attached = [a for a in scene.robot_state.attached_collision_objects if a.object.id != tool]
        if attached:
            ids = ", ".join(repr(a.object.id) for a in attached)
            raise SceneError(
                f"planning_scene {scene.name!r}: robot_state.attached_collision_objects ({ids}) are not "
                "applied: the node's tools and held parts are its own bookkeeping (tool_exchange, "
                "end_effector steps)"
            )
        return world.apply_scene(scene)

    # -- records ----------------------------------------------------------------------------
    def _publish(self) -> PlanningScene | None:
        if self._closed or not self._node.context.ok():
            return None
        message = self.scene_message()
        self._publisher.publish(message)
        return message

    def _record(
        self, record: dict[str, Any], message: PlanningScene | None = None, goal_id: str = ""
    ) -> None:
        if self._run_logs is None:
            return
        if not goal_id:
            goal = self._orchestrator.active_goal
            goal_id = goal.goal_id if goal is not None else ""
        if not goal_id:
            return  # between goals: the next goal's log starts with the scene in force
        now = time.time()
        self._run_logs.event(goal_id, {"t": now, **record})
        if message is not None:
            self._run_logs.scene(goal_id, message, now)

    def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
        """A goal started: its run log and bag start with the scene in force."""
        if record.get("event") != "goal_started" or not goal_id:
            return
        with self._lock:
            entry = {"event": "scene", "revision": self._revision, "objects": _ids(self._world)}
        self._record(entry, self.scene_message() if self._node.context.ok() else None, goal_id)

    def close(self) -> None:
        """Stop following the backend's world and applying changes. Idempotent."""
        with self._lock:
            self._closed = True
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None

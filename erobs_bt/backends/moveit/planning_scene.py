"""MoveIt's planning-scene world ⇄ the world model's obstacles (pure conversion, no rclpy).

MoveIt describes the objects around the robot as ``moveit_msgs/CollisionObject`` messages
(an ``id``, a frame, an object pose, solid primitives placed relative to it, and an
``operation``: ADD, REMOVE, APPEND, MOVE) and objects carried by the robot as
``AttachedCollisionObject`` (a link, the object, ``touch_links``). The world model
(:mod:`erobs_bt.world`) describes them as :class:`~erobs_bt.world.cell.Obstacle` (a
primitive in ``base_link``) and :class:`~erobs_bt.world.cell.ToolShape` (a primitive in
``flange``). This module converts between the two, so that every ROS-side user of a planning
scene (the simulated move_group, the node's live planning scene) applies MoveIt's rules in
one place:

* **Frames**: poses may be given in ``base_link``, ``world`` (the SRDF's fixed virtual joint:
  the same frame) or ``base`` (``Rz(π)`` of ``base_link``, ROS ``ur_description``), and an
  empty ``frame_id`` means the planning frame ``base_link``. Any other frame is refused
  (:class:`SceneError` naming the object), as a move_group refuses a frame it cannot transform.
* **Poses**: the object pose is in the header frame and each primitive pose is relative to the
  object pose (moveit_msgs 2.x; a missing primitive pose is the identity).
* **Shapes**: BOX ``(x, y, z)``, SPHERE ``(radius,)``, CYLINDER ``(height, radius)`` [m], as
  :class:`~erobs_bt.world.cell.Shape`. CONE, meshes and planes are refused: the world model's
  collision checker has no such shapes, and silently dropping an object would plan through it.
* **Names**: an object with one primitive becomes one obstacle named by its ``id``; with
  several, ``<id>/<i>`` (:func:`object_id` maps a body name back to the id), so a collision
  report names the object the client added.
* **Operations** (:meth:`SceneWorld.apply`): ADD replaces an object of the same id; REMOVE with
  an empty id clears the world; APPEND adds primitives to an object (creating it when absent);
  MOVE moves an existing object to the new object pose (keeping its primitives).

Errors raise :class:`SceneError` (a ``ValueError``) whose message starts with where:
``collision_object 'box1': ...``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from moveit_msgs.msg import (
    AllowedCollisionEntry,
    AllowedCollisionMatrix,
    AttachedCollisionObject,
    CollisionObject,
)
from numpy.typing import NDArray

from erobs_bt.backends.moveit.model import SHAPE_TYPES, collision_object_msg
from erobs_bt.world.cell import Obstacle, Shape, ToolShape
from erobs_bt.world.cell import Pose as WorldPose
from erobs_bt.world.kinematics import (
    T_BASE_LINK_BASE,
    pose_from_xyz_quat,
    rpy_from_matrix,
)

#: The planning frame of the simulated cell.
PLANNING_FRAME = "base_link"
#: Frames an object pose may be given in → ``T_base_link_frame``.
SCENE_FRAMES: Mapping[str, NDArray[np.float64]] = MappingProxyType(
    {"": np.eye(4), "base_link": np.eye(4), "world": np.eye(4), "base": np.array(T_BASE_LINK_BASE)}
)
#: SolidPrimitive type → world-model shape kind.
_KINDS: Mapping[int, str] = MappingProxyType({code: kind for kind, code in SHAPE_TYPES.items()})
_OPERATIONS: Mapping[str, str] = MappingProxyType(
    {"ADD": "ADD", "REMOVE": "REMOVE", "APPEND": "APPEND", "MOVE": "MOVE"}
)


def operation_code(value: bytes | int) -> int:
    """The ``CollisionObject.operation`` as an integer (the field is a ROS ``byte``: Python
    ``bytes`` of length 1, as are the ADD/REMOVE/APPEND/MOVE constants)."""
    return value[0] if isinstance(value, bytes | bytearray) else int(value)


def operation_name(value: bytes | int) -> str | None:
    """``ADD``, ``REMOVE``, ``APPEND``, ``MOVE``, or ``None`` for another value."""
    code = operation_code(value)
    for name in _OPERATIONS:
        if operation_code(getattr(CollisionObject, name)) == code:
            return name
    return None


class SceneError(ValueError):
    """A planning-scene message the world model cannot represent (the message says where)."""


def pose_matrix(pose: Any) -> NDArray[np.float64]:
    """(4, 4) transform of a ``geometry_msgs/Pose`` [m]; a zero quaternion is the identity.

    Raises:
        SceneError: a non-finite value.
    """
    p, q = pose.position, pose.orientation
    xyz = np.array([p.x, p.y, p.z], dtype=float)
    quat = np.array([q.x, q.y, q.z, q.w], dtype=float)
    if not (np.all(np.isfinite(xyz)) and np.all(np.isfinite(quat))):
        raise SceneError(f"pose: non-finite values {xyz.tolist()} {quat.tolist()}")
    norm = float(np.linalg.norm(quat))
    if norm < 1e-9:
        quat, norm = np.array([0.0, 0.0, 0.0, 1.0]), 1.0
    return pose_from_xyz_quat(xyz, quat / norm)


def frame_transform(frame_id: str, where: str) -> NDArray[np.float64]:
    """``T_base_link_frame`` of a scene frame (:data:`SCENE_FRAMES`).

    Raises:
        SceneError: ``<where>: unknown frame ...``.
    """
    try:
        return np.array(SCENE_FRAMES[frame_id])
    except KeyError:
        known = ", ".join(sorted(f for f in SCENE_FRAMES if f))
        raise SceneError(f"{where}: unknown frame {frame_id!r} (known: {known})") from None


def _world_pose(T: NDArray[np.float64]) -> WorldPose:
    r, p, y = (float(v) for v in rpy_from_matrix(T[:3, :3]))
    return WorldPose(xyz=(float(T[0, 3]), float(T[1, 3]), float(T[2, 3])), rpy=(r, p, y))


def _shape(primitive: Any, where: str) -> Shape:
    kind = _KINDS.get(int(primitive.type))
    if kind is None:
        raise SceneError(
            f"{where}: primitive type {int(primitive.type)} is not supported "
            "(box, sphere and cylinder are; the world model has no cones)"
        )
    try:
        return Shape(kind, tuple(float(v) for v in primitive.dimensions))  # type: ignore[arg-type]
    except ValueError as exc:
        raise SceneError(f"{where}: {exc}") from None


def primitives_in_frame(
    obj: Any, T_target_header: NDArray[np.float64]
) -> list[tuple[Shape, NDArray[np.float64]]]:
    """The primitives of a ``CollisionObject`` with their poses in a target frame.

    Args:
        obj: the ``moveit_msgs/CollisionObject``.
        T_target_header: (4, 4) pose of the object's header frame in the target frame.

    Returns:
        ``(shape, T_target_primitive)`` per primitive, in message order.

    Raises:
        SceneError: meshes, planes, an unsupported primitive or a bad pose.
    """
    where = f"collision_object {obj.id!r}"
    if len(obj.meshes) or len(obj.planes):
        raise SceneError(
            f"{where}: meshes and planes are not supported (use box, sphere or cylinder primitives)"
        )
    if len(obj.primitive_poses) not in (0, len(obj.primitives)):
        raise SceneError(
            f"{where}: {len(obj.primitives)} primitives but {len(obj.primitive_poses)} primitive poses"
        )
    T_object = T_target_header @ pose_matrix(obj.pose)
    out = []
    for i, primitive in enumerate(obj.primitives):
        local = pose_matrix(obj.primitive_poses[i]) if len(obj.primitive_poses) else np.eye(4)
        out.append((_shape(primitive, f"{where}.primitives[{i}]"), T_object @ local))
    return out


def _names(object_id: str, count: int) -> list[str]:
    return [object_id] if count == 1 else [f"{object_id}/{i}" for i in range(count)]


def object_id(body: str) -> str:
    """The collision object id of a world-model body name (``box1/2`` → ``box1``)."""
    return body.split("/", 1)[0]


def obstacles_from_collision_object(obj: Any) -> tuple[Obstacle, ...]:
    """The obstacles (in ``base_link``) of a ``CollisionObject`` to ADD.

    Raises:
        SceneError: empty id, no primitives, unknown frame, unsupported geometry.
    """
    where = f"collision_object {obj.id!r}"
    if not obj.id:
        raise SceneError("collision_object: an object needs an id")
    shapes = primitives_in_frame(obj, frame_transform(obj.header.frame_id, where))
    if not shapes:
        raise SceneError(f"{where}: no primitives")
    return tuple(
        Obstacle(name=name, shape=shape, frame=PLANNING_FRAME, pose=_world_pose(T))
        for name, (shape, T) in zip(_names(obj.id, len(shapes)), shapes, strict=True)
    )


def touch_matrix(obstacles: Iterable[Obstacle]) -> AllowedCollisionMatrix:
    """The ``moveit_msgs/AllowedCollisionMatrix`` that lets each world object touch its
    obstacles' ``touch_links`` (the pedestal the base stands on), as move_group reports its
    matrix: ``entry_names`` and a symmetric ``entry_values[i].enabled[j]`` that is true where the
    pair is always allowed (moveit2 jazzy @4d84106 ``collision_matrix.cpp`` 394-423).

    Only these pairs are listed: the robot's own pairs come from an SRDF's
    ``disabled_collisions``, and a robot description without collision geometry has none.
    """
    pairs = {(object_id(o.name), link) for o in obstacles for link in o.touch_links}
    names = sorted({name for pair in pairs for name in pair})
    index = {name: i for i, name in enumerate(names)}
    rows = [[False] * len(names) for _ in names]
    for a, b in pairs:
        rows[index[a]][index[b]] = rows[index[b]][index[a]] = True
    return AllowedCollisionMatrix(
        entry_names=names, entry_values=[AllowedCollisionEntry(enabled=row) for row in rows]
    )


def allowed_touches(matrix: Any, objects: Iterable[str], links: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Which of ``links`` each of ``objects`` may touch in a ``moveit_msgs/AllowedCollisionMatrix``
    (pairs whose entry is true; default entries are not read). Object id -> links, sorted.

    Raises:
        SceneError: ``entry_values`` do not match ``entry_names`` (MoveIt refuses such a matrix:
            ``collision_matrix.cpp`` 82-100).
    """
    names = list(matrix.entry_names)
    if len(matrix.entry_values) != len(names) or any(
        len(e.enabled) != len(names) for e in matrix.entry_values
    ):
        raise SceneError("allowed_collision_matrix: entry_values do not match entry_names")
    wanted, robot = set(objects), set(links)
    touches: dict[str, set[str]] = {}
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if matrix.entry_values[i].enabled[j] and a in wanted and b in robot:
                touches.setdefault(a, set()).add(b)
    return {name: tuple(sorted(found)) for name, found in touches.items()}


def collision_object_from_obstacles(name: str, obstacles: Iterable[Obstacle]) -> CollisionObject:
    """One ``CollisionObject`` (ADD, frame ``base_link``, identity object pose) holding the
    primitives of ``obstacles``, each at its pose in ``base_link``."""
    return collision_object_msg(
        name, PLANNING_FRAME, [(o.shape, o.T_base_link_obstacle()) for o in obstacles]
    )


def tool_shapes_from_attached(
    attached: Any,
    T_flange_link: Callable[[str], NDArray[np.float64]],
    T_base_link_flange: NDArray[np.float64],
) -> tuple[ToolShape, ...]:
    """The primitives of an ``AttachedCollisionObject`` as tool shapes in ``flange``.

    The object's header frame is its link (or empty: the link) or a scene frame; a pose in a
    scene frame is carried into the link with the arm state ``T_base_link_flange``, as MoveIt
    does when it attaches an object at the current state.

    Args:
        attached: the ``moveit_msgs/AttachedCollisionObject``.
        T_flange_link: ``(4, 4)`` pose of a robot link in ``flange``; raises ``KeyError`` for
            a link that does not move with the flange.
        T_base_link_flange: (4, 4) flange pose of the arm state [m].

    Raises:
        SceneError: ``attached_collision_object '<id>': ...``.
    """
    obj = attached.object
    where = f"attached_collision_object {obj.id!r}"
    if not obj.id:
        raise SceneError("attached_collision_object: an object needs an id")
    try:
        T_flange_attach_link = T_flange_link(attached.link_name)
    except KeyError:
        raise SceneError(
            f"{where}: link {attached.link_name!r} does not move with the flange (attach to flange, tool0, "
            "wrist_3_link or a tool tip frame)"
        ) from None
    frame = obj.header.frame_id
    if frame in ("", attached.link_name):
        T_flange_header = T_flange_attach_link
    else:
        try:
            T_flange_header = T_flange_link(frame)
        except KeyError:
            T_flange_header = np.linalg.inv(T_base_link_flange) @ frame_transform(frame, where)
    shapes = primitives_in_frame(obj, T_flange_header)
    if not shapes:
        raise SceneError(f"{where}: no primitives")
    return tuple(
        ToolShape(name=name, shape=shape, pose=_world_pose(T))
        for name, (shape, T) in zip(_names(obj.id, len(shapes)), shapes, strict=True)
    )


def attached_message(
    link_name: str,
    name: str,
    shapes: Iterable[ToolShape],
    T_flange_link: NDArray[np.float64],
    touch_links: Iterable[str] = (),
) -> AttachedCollisionObject:
    """The ``AttachedCollisionObject`` (ADD) of tool shapes, in its link's frame as MoveIt
    reports attached objects.

    Args:
        link_name: the link it is attached to.
        name: the object id.
        shapes: the primitives, placed in ``flange``.
        T_flange_link: (4, 4) pose of ``link_name`` in ``flange``.
        touch_links: links it may touch.
    """
    T_link_flange = np.linalg.inv(T_flange_link)
    return AttachedCollisionObject(
        link_name=link_name,
        touch_links=list(touch_links),
        object=collision_object_msg(
            name, link_name, [(s.shape, T_link_flange @ s.pose.matrix()) for s in shapes]
        ),
    )


def world_object(
    name: str, shapes: Iterable[ToolShape], T_base_link_flange: NDArray[np.float64]
) -> CollisionObject:
    """The ``CollisionObject`` (ADD, ``base_link``) that tool shapes leave in the world when the
    flange is at ``T_base_link_flange`` (MoveIt's detach: the object stays where it is)."""
    return collision_object_from_obstacles(
        name,
        (
            Obstacle(
                name=s.name,
                shape=s.shape,
                frame=PLANNING_FRAME,
                pose=_world_pose(T_base_link_flange @ s.pose.matrix()),
            )
            for s in shapes
        ),
    )


def _key(T: NDArray[np.float64]) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(float(v) for v in row) for row in T)


@dataclass(frozen=True)
class SceneWorld:
    """The collision objects of a planning scene's world, by id (immutable; apply returns a new one).

    Attributes:
        objects: id → its obstacles in ``base_link``.
        poses: id → the object pose in ``base_link`` (rows of a (4, 4) transform), which MOVE
            replaces.
    """

    objects: Mapping[str, tuple[Obstacle, ...]] = field(default_factory=lambda: MappingProxyType({}))
    poses: Mapping[str, tuple[tuple[float, ...], ...]] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, obstacles: Iterable[Obstacle]) -> SceneWorld:
        """A world holding ``obstacles``, one object per obstacle (ids = obstacle names)."""
        listed = tuple(obstacles)
        return cls(
            MappingProxyType({o.name: (o,) for o in listed}),
            MappingProxyType({o.name: _key(o.T_base_link_obstacle()) for o in listed}),
        )

    def obstacles(self) -> tuple[Obstacle, ...]:
        """Every obstacle, objects in id order."""
        return tuple(o for key in sorted(self.objects) for o in self.objects[key])

    def apply(self, obj: Any) -> SceneWorld:
        """The world after one ``CollisionObject`` (its ``operation``; module docstring).

        Raises:
            SceneError: an unknown operation, REMOVE/MOVE of an unknown id, or what
                :func:`obstacles_from_collision_object` refuses.
        """
        where = f"collision_object {obj.id!r}"
        operation = operation_name(obj.operation)
        objects, poses = dict(self.objects), dict(self.poses)
        if operation is None:
            raise SceneError(f"{where}: unknown operation {operation_code(obj.operation)}")
        if operation in ("REMOVE", "MOVE") and obj.id and obj.id not in objects:
            raise SceneError(f"{where}: {operation} of an object that is not in the scene")
        if operation == "REMOVE":
            if not obj.id:
                return SceneWorld()
            del objects[obj.id], poses[obj.id]
        elif operation == "MOVE":
            # The object pose changes; the primitives keep their placement in the object.
            T_new = frame_transform(obj.header.frame_id, where) @ pose_matrix(obj.pose)
            delta = T_new @ np.linalg.inv(np.array(poses[obj.id]))
            objects[obj.id] = tuple(
                Obstacle(
                    name=o.name,
                    shape=o.shape,
                    frame=PLANNING_FRAME,
                    pose=_world_pose(delta @ o.T_base_link_obstacle()),
                    touch_links=o.touch_links,
                )
                for o in objects[obj.id]
            )
            poses[obj.id] = _key(T_new)
        else:
            added = obstacles_from_collision_object(obj)
            old = objects.get(obj.id, ()) if operation == "APPEND" else ()
            everything = [(o.shape, o.pose) for o in (*old, *added)]
            objects[obj.id] = tuple(
                Obstacle(name=name, shape=shape, frame=PLANNING_FRAME, pose=pose)
                for name, (shape, pose) in zip(_names(obj.id, len(everything)), everything, strict=True)
            )
            if not old:
                poses[obj.id] = _key(frame_transform(obj.header.frame_id, where) @ pose_matrix(obj.pose))
        return SceneWorld(MappingProxyType(objects), MappingProxyType(poses))

    def apply_scene(self, scene: Any) -> SceneWorld:
        """The world after the world part of a ``PlanningScene``: with ``is_diff`` its
        ``world.collision_objects`` applied in order (:meth:`apply`); without, the same on an
        empty world (the world is replaced, as MoveIt's ``setPlanningSceneMsg``). The scene's
        robot state is not looked at.

        Raises:
            SceneError: the first object refused; the world is unchanged (it is immutable).
        """
        world = self if scene.is_diff else SceneWorld()
        for obj in scene.world.collision_objects:
            world = world.apply(obj)
        return world

    def with_object(
        self, key: str, obstacles: Iterable[Obstacle], pose: tuple[tuple[float, ...], ...]
    ) -> SceneWorld:
        """This world with object ``key`` set to ``obstacles`` (in ``base_link``) at object
        pose ``pose`` (rows of a (4, 4) transform in ``base_link``)."""
        objects, poses = dict(self.objects), dict(self.poses)
        objects[key] = tuple(obstacles)
        poses[key] = pose
        return SceneWorld(MappingProxyType(objects), MappingProxyType(poses))

    def collision_objects(self) -> list[CollisionObject]:
        """The world as ``CollisionObject`` messages (ADD), in id order."""
        return [collision_object_from_obstacles(key, self.objects[key]) for key in sorted(self.objects)]

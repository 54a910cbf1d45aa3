"""The planning scene's world: the obstacles the next plan avoids, and its revision.

A :class:`World` is an immutable snapshot: the cell's fixed obstacles plus the collision
objects added at run time (a ``collision_object`` message, a detected tag mapped to an
object), every one placed in ``base_link``. Its :attr:`World.revision` is a short digest of
the obstacles (names, shapes, poses, touch links) that does not depend on their order, so
the same world always has the same revision: a solution can record the world it was planned
in, and a replay can tell whether the world changed since.

The motion stack (:class:`~erobs_bt.backends.stack.MotionStack`) keeps the current world; a
plan takes the world of the moment it is asked for and keeps it to its end, so a change never
reaches a plan or a motion in flight.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from erobs_bt.world.cell import ROBOT_LINKS, CellConfig, CellConfigError, Obstacle, Pose, Shape
from erobs_bt.world.kinematics import xyz_rpy_from_pose

#: The frame every obstacle of a :class:`World` is placed in (MoveIt's planning frame).
WORLD_FRAME = "base_link"

#: Number of hex digits of a scene revision.
REVISION_DIGITS = 12

#: Rounding of lengths [m] and angles [rad] in the revision document (below any tolerance).
_DECIMALS = 9


def in_base_link(obstacle: Obstacle) -> Obstacle:
    """``obstacle`` with its pose given in ``base_link`` (an obstacle in ``base`` is turned
    by ``T_base_link_base``; one in ``base_link`` is returned as it is)."""
    if obstacle.frame == WORLD_FRAME:
        return obstacle
    xyz, rpy = xyz_rpy_from_pose(obstacle.T_base_link_obstacle(), degrees=False)
    pose = Pose(
        xyz=(float(xyz[0]), float(xyz[1]), float(xyz[2])), rpy=(float(rpy[0]), float(rpy[1]), float(rpy[2]))
    )
    return replace(obstacle, frame=WORLD_FRAME, pose=pose)


def _document(obstacle: Obstacle) -> dict[str, object]:
    T = obstacle.T_base_link_obstacle()
    return {
        "name": obstacle.name,
        "kind": obstacle.shape.kind,
        "size": [round(float(v), _DECIMALS) for v in obstacle.shape.size],
        # the matrix rather than roll-pitch-yaw: one pose has one document
        "pose": [round(float(v), _DECIMALS) + 0.0 for v in np.asarray(T)[:3, :].ravel()],
        "touch_links": sorted(obstacle.touch_links),
    }


def scene_revision(obstacles: Iterable[Obstacle]) -> str:
    """The revision of a world: :data:`REVISION_DIGITS` hex digits of the SHA-256 of a
    canonical JSON document of the obstacles sorted by name (order-independent; poses
    compared in ``base_link``, rounded to 1e-9 m/rad).

    Raises:
        ValueError: two obstacles share a name (:func:`check_obstacles`).
    """
    checked = check_obstacles(obstacles)
    document = [_document(o) for o in checked]
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:REVISION_DIGITS]


def check_obstacles(obstacles: Iterable[Obstacle], *, where: str = "world") -> tuple[Obstacle, ...]:
    """Check a world's obstacles and return them in ``base_link``, sorted by name.

    Raises:
        ValueError: not an :class:`Obstacle`, an empty name, a frame other than ``base_link``
            or ``base``, a name used twice or a robot link's name (the message starts with
            ``where`` and names the obstacle).
    """
    seen: dict[str, Obstacle] = {}
    for obstacle in obstacles:
        if not isinstance(obstacle, Obstacle):
            raise ValueError(f"{where}: expected obstacles, got {type(obstacle).__name__}")
        if not obstacle.name:
            raise ValueError(f"{where}: an obstacle has an empty name")
        if obstacle.frame not in (WORLD_FRAME, "base"):
            raise ValueError(
                f"{where}: obstacle {obstacle.name!r}: frame {obstacle.frame!r} (base_link or base)"
            )
        if obstacle.name in seen:
            raise ValueError(f"{where}: obstacle name {obstacle.name!r} is used twice")
        if obstacle.name in ROBOT_LINKS:
            raise ValueError(f"{where}: obstacle name {obstacle.name!r} is the name of a robot link")
        seen[obstacle.name] = in_base_link(obstacle)
    return tuple(seen[name] for name in sorted(seen))


@dataclass(frozen=True)
class World:
    """One planning-scene world: obstacles in ``base_link`` sorted by name, and their revision.

    Build it with :meth:`of` (which checks and normalises); equal worlds have equal revisions.
    """

    obstacles: tuple[Obstacle, ...]
    revision: str

    @classmethod
    def of(cls, obstacles: Iterable[Obstacle], *, where: str = "world") -> World:
        """The world of ``obstacles`` (any frame :func:`check_obstacles` accepts).

        Raises:
            ValueError: see :func:`check_obstacles`.
        """
        checked = check_obstacles(obstacles, where=where)
        return cls(obstacles=checked, revision=scene_revision(checked))

    @property
    def names(self) -> tuple[str, ...]:
        """The obstacles' names, sorted."""
        return tuple(o.name for o in self.obstacles)


# ---------------------------------------------------------------------------------------------
# Tag-mapped collision objects
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TagObject:
    """A collision object that a detected ArUco tag puts into the world (as EROBS does).

    Attributes:
        tag: the ArUco tag id (marker id).
        name: the object's id in the planning scene (an obstacle name).
        shape: the primitive (``shape_msgs/SolidPrimitive`` dimensions).
        tag_offset: [m] the object centre in the tag's frame.
    """

    tag: int
    name: str
    shape: Shape
    tag_offset: tuple[float, float, float]

    def obstacle(self, T_base_link_tag: NDArray[np.float64]) -> Obstacle:
        """The obstacle for a detection of the tag at ``T_base_link_tag`` ((4, 4), [m]): the
        tag's orientation, centred at ``tag_offset`` in the tag frame; in ``base_link``."""
        shift = np.eye(4)
        shift[:3, 3] = self.tag_offset
        xyz, rpy = xyz_rpy_from_pose(np.asarray(T_base_link_tag, dtype=float) @ shift, degrees=False)
        pose = Pose(
            xyz=(float(xyz[0]), float(xyz[1]), float(xyz[2])),
            rpy=(float(rpy[0]), float(rpy[1]), float(rpy[2])),
        )
        return Obstacle(name=self.name, shape=self.shape, frame=WORLD_FRAME, pose=pose)


def tag_objects(cell: CellConfig) -> dict[int, TagObject]:
    """The cell's tag-mapped collision objects, by tag id.

    Read from the cell file's top-level ``collision_objects`` section (erobs_bt's cell format,
    docs/cell-config.md) or, for a beamline file, its ``collision_objects`` (kept in
    ``CellConfig.extra["beamline"]``); both map an ArUco tag id to ``{name, shape: box |
    cylinder | sphere, dimensions, tag_offset: [x, y, z]}``.

    Raises:
        CellConfigError: a malformed entry (naming the cell file and the key), or a name
            used by two tags.
    """
    from erobs_bt.world.beamline import check_collision_objects

    source = cell.source or "cell"
    raw: Any = cell.extra.get("collision_objects")
    if raw is None:
        beamline = cell.extra.get("beamline")
        raw = beamline.get("collision_objects") if isinstance(beamline, Mapping) else None
    if not raw:
        return {}
    check_collision_objects(raw, source)
    found: dict[int, TagObject] = {}
    names: dict[str, int] = {}
    for tag, entry in raw.items():
        name = str(entry["name"])
        if name in names:
            key = f"collision_objects.{tag}.name"
            raise CellConfigError(source, key, f"{name!r} is the name of tag {names[name]}'s object too")
        names[name] = int(tag)
        offset = entry.get("tag_offset", [0.0, 0.0, 0.0])
        found[int(tag)] = TagObject(
            tag=int(tag),
            name=name,
            shape=Shape(entry["shape"], tuple(float(v) for v in entry["dimensions"])),
            tag_offset=(float(offset[0]), float(offset[1]), float(offset[2])),
        )
    return found

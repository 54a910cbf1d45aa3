"""The simulated cell: what is around the UR5e, which tools it can carry, where they are docked.

Why a separate, declarative file: the planning scene is data, not code. A beamline cell is
rearranged often (a hot plate moves, a rack is added), and the same engine must run against
several layouts in tests. Keeping the layout in YAML, loaded into frozen dataclasses that are
validated once, lets the collision model, the tool-exchange logic, the vision simulation and
the fault injection read one consistent description.

Schema of ``config/cell.yaml`` (all poses in ``base_link`` unless a ``frame`` says otherwise;
lengths in metres; **every angle key names its unit**: ``rpy`` is radians, ``rpy_deg`` is
degrees, ``*_deg`` joint lists are degrees; a pose takes exactly one of ``rpy``/``rpy_deg``,
roll-pitch-yaw about fixed x, y, z as in URDF)::

    name: <str>                                 cell name, informational
    model_revision_prefix: <str>                e.g. robot_models
    initial_joint_state_deg: [6 numbers]        start of the simulated arm [deg]
    named_states_deg: {<name>: [6 numbers]}     named robot states (SRDF group states) [deg]
    collision:                                  optional; defaults shown
      padding: 0.01                             [m] ≥ 0, added between robot/tool and obstacles
      self_collision_samples: 10000             configurations sampled to build the ACM
      seed: 0                                   RNG seed of that sampling
      link_geometry: convex                     convex (mesh hulls) | mesh
    grippers:                                   required; at least ``none``
      <name>:
        tip_frame: <str>                        e.g. epick_tip
        tip: {xyz: [3], rpy_deg: [3]}           T_flange_tip: tip frame in ``flange``
        z_offset: <m>                           optional, default 0; along tip z, see tcp()
        actions: [<str>, ...]                   optional gripper states (end_effector_action)
        roles: {grasp: <state>, release: <state>}  optional role names of those states
        collision: [<shape>, ...]               tool geometry in ``flange``
        contact: [<shape name>, ...]            optional; shapes (of collision or a cup profile)
                                                that press onto or grasp parts: allowed to touch
                                                obstacles in straight moves along the tool axis
                                                only (erobs_bt.world.collision)
        cup_profiles:                           optional (vacuum grippers)
          <profile>: {length: <m>, collision: [<shape>, ...]}
        default_cup_profile: <profile>          required when cup_profiles is non-empty
    obstacles:                                  list
      - name: <str>                             unique
        shape: box | cylinder | sphere
        size: [...]                             box [x, y, z]; cylinder [height, radius];
                                                sphere [radius] (shape_msgs/SolidPrimitive)
        frame: base_link | base                 optional, default base_link
        pose: {xyz: [3], rpy: [3]}              centre of the shape (spec: xyz m, rpy rad)
        touch_links: [<link>, ...]              optional robot links allowed to touch it
    docks:                                      list (tool changer)
      - number: <int ≥ 1>                       unique
        gripper: <gripper> | null               tool stored there at start
    tool_exchange:                              the dock geometry, in EROBS's beamline form
                                                (required with docks; ToolChanger)
      dock_spacing_m: <m > 0>                   docks on a uniform spacing along the IK
                                                frame's (flange) Y
      reference_dock: <int ≥ 1>                 the dock centred on the approach pose
      load_sequence: [{direction, distance}]    relative moves (flange frame, metres) after
      dock_sequence: [{direction, distance}]    the lateral shift, as in a moveto
      approach_deg: [6 numbers]                 optional, erobs_bt's: the load approach pose
                                                the simulated docks are placed from [deg]
    markers:                                    list (fiducials for the vision tasks)
      - id: <int ≥ 0>                           unique
        family: <str>                           optional, default aruco_4x4_50
        size: <m>                               edge length
        pose: {xyz: [3], rpy_deg: [3]}          marker centre, z out of the printed face
    <anything else>:                            kept verbatim in CellConfig.extra (e.g. faults)

A ``<shape>`` of a tool is ``{name, shape, size, pose: {xyz, rpy|rpy_deg}}`` in ``flange``.

The script vocabulary (gripper states and roles, named states, dock numbers) is read by
:class:`erobs_bt.script.vocabulary.CellVocabulary` (the one reader of it, shared with the
parser) and kept as :attr:`CellConfig.vocabulary`. Every ``{xyz, rpy|rpy_deg}`` pose of the
cell's files, including the ``parts``/``camera`` sections other modules read, is parsed by
:func:`read_pose`.

Errors are :class:`CellConfigError` (a :class:`ValueError`) whose message starts with the file
and the key, e.g. ``cell.yaml: obstacles[2].size: expected 3 positive numbers``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Literal, cast

import numpy as np
from numpy.typing import NDArray

from erobs_bt.script.errors import ScriptError
from erobs_bt.script.parse import DIRECTION_VECTORS
from erobs_bt.script.vocabulary import DEFAULT_CELL_PATH as _VOCABULARY_CELL_PATH
from erobs_bt.script.vocabulary import CellVocabulary
from erobs_bt.validation import Checker, ConfigError, ErrorFactory
from erobs_bt.world.kinematics import T_BASE_LINK_BASE, fk, pose_from_xyz_rpy

#: The packaged cell description of this repository.
DEFAULT_CELL_PATH: Path = _VOCABULARY_CELL_PATH

#: Frames an obstacle pose may be given in.
OBSTACLE_FRAMES: tuple[str, ...] = ("base_link", "base")

#: Robot links of the collision model (airo-models UR5e URDF names).
ROBOT_LINKS: tuple[str, ...] = (
    "base_link_inertia",
    "shoulder_link",
    "upper_arm_link",
    "forearm_link",
    "wrist_1_link",
    "wrist_2_link",
    "wrist_3_link",
)

ShapeKind = Literal["box", "cylinder", "sphere"]
_SIZE_LEN: Mapping[str, int] = MappingProxyType({"box": 3, "cylinder": 2, "sphere": 1})
_SIZE_DOC: Mapping[str, str] = MappingProxyType(
    {"box": "[x, y, z]", "cylinder": "[height, radius]", "sphere": "[radius]"}
)
_KNOWN_SECTIONS = frozenset(
    {
        "name",
        "model_revision_prefix",
        "initial_joint_state_deg",
        "named_states_deg",
        "collision",
        "grippers",
        "obstacles",
        "docks",
        "markers",
        "tool_exchange",
    }
)


class CellConfigError(ConfigError):
    """An invalid cell description (the cell's :class:`~erobs_bt.validation.ConfigError`).

    Attributes:
        file: the file the problem is in (as given to :func:`erobs_bt.world.config.load_cell`).
        key: where in the file, e.g. ``obstacles[2].size`` (also :attr:`path`).
        reason: what is wrong.
    """

    def __init__(self, file: str, key: str, reason: str) -> None:
        super().__init__(key, reason, file=file)
        self.key = key


@dataclass(frozen=True)
class Pose:
    """A rigid pose: translation [m] and roll-pitch-yaw [rad] about fixed x, y, z (URDF).

    Attributes:
        xyz: translation [m].
        rpy: roll, pitch, yaw [rad].
    """

    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def matrix(self) -> NDArray[np.float64]:
        """(4, 4) homogeneous transform of this pose."""
        return pose_from_xyz_rpy(self.xyz, self.rpy, degrees=False)


@dataclass(frozen=True)
class Shape:
    """A solid primitive (``shape_msgs/SolidPrimitive`` dimension order).

    Attributes:
        kind: ``box``, ``cylinder`` (axis = local z, centred) or ``sphere``.
        size: box ``(x, y, z)`` edge lengths; cylinder ``(height, radius)``; sphere
            ``(radius,)``; all [m] and positive.
    """

    kind: ShapeKind
    size: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.kind not in _SIZE_LEN:
            raise ValueError(f"shape: expected box, cylinder or sphere, got {self.kind!r}")
        if len(self.size) != _SIZE_LEN[self.kind] or not all(math.isfinite(v) and v > 0 for v in self.size):
            raise ValueError(
                f"size: expected {_SIZE_LEN[self.kind]} positive numbers {_SIZE_DOC[self.kind]} "
                f"for a {self.kind}, got {list(self.size)}"
            )


@dataclass(frozen=True)
class ToolShape:
    """One collision primitive of a tool, placed in the ``flange`` frame.

    Attributes:
        name: unique within the tool.
        shape: the primitive.
        pose: centre of the primitive in ``flange``.
    """

    name: str
    shape: Shape
    pose: Pose


@dataclass(frozen=True)
class CupProfile:
    """A suction-cup profile of a vacuum gripper.

    Attributes:
        name: e.g. ``3mm_dia``; part of the model revision.
        length: [m] cup height from the tool's tip frame to the cup lip, along tip z.
        collision: cup geometry in ``flange``.
    """

    name: str
    length: float
    collision: tuple[ToolShape, ...]


@dataclass(frozen=True)
class GripperConfig:
    """A tool the arm can carry.

    Attributes:
        name: ``none``, ``epick``, ``hande``, ``2fg7``, ``pipettor``, ….
        tip_frame: name of the tip frame (e.g. ``epick_tip``).
        tip: ``T_flange_tip`` as a pose in ``flange``.
        z_offset: [m] along tip z, added to get the TCP (ePick: −0.007, the cup compresses).
        actions: gripper states an ``end_effector`` step may request (empty: no group).
        roles: role (``grasp``, ``release``) → one of ``actions``.
        collision: tool geometry in ``flange`` (without the cup).
        cup_profiles: profile name → cup (vacuum grippers only).
        default_cup_profile: the profile fitted at start, or ``None``.
        contact: names of the shapes (of ``collision`` or a cup profile) that press onto or
            grasp parts (the pipettor's cone, fingers, a cup): allowed to touch obstacles during
            straight moves along the tool axis only
            (:meth:`erobs_bt.world.collision.CollisionModel.allowing_tool_contact`).
    """

    name: str
    tip_frame: str
    tip: Pose
    z_offset: float = 0.0
    actions: tuple[str, ...] = ()
    roles: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    collision: tuple[ToolShape, ...] = ()
    cup_profiles: Mapping[str, CupProfile] = field(default_factory=lambda: MappingProxyType({}))
    default_cup_profile: str | None = None
    contact: tuple[str, ...] = ()

    @property
    def T_flange_tip(self) -> NDArray[np.float64]:
        """(4, 4) pose of the tip frame in ``flange``."""
        return self.tip.matrix()

    def cup(self, cup_profile: str | None) -> CupProfile | None:
        """The cup profile to use: ``cup_profile``, else the default, else ``None``.

        Raises:
            ValueError: the gripper has no such cup profile (message lists the available ones).
        """
        if cup_profile is None:
            cup_profile = self.default_cup_profile
        if cup_profile is None:
            return None
        if cup_profile not in self.cup_profiles:
            available = ", ".join(sorted(self.cup_profiles)) or "none"
            raise ValueError(f"Unknown cup profile for {self.name}: {cup_profile} (available: {available})")
        return self.cup_profiles[cup_profile]

    def T_flange_tcp(self, cup_profile: str | None = None) -> NDArray[np.float64]:
        """(4, 4) tool centre point in ``flange``: ``T_flange_tip · Tz(cup length + z_offset)``.

        Args:
            cup_profile: the fitted cup (``None``: the default profile, if any).

        Raises:
            ValueError: unknown cup profile.
        """
        cup = self.cup(cup_profile)
        shift = np.eye(4)
        shift[2, 3] = (cup.length if cup is not None else 0.0) + self.z_offset
        return self.T_flange_tip @ shift

    def collision_shapes(self, cup_profile: str | None = None) -> tuple[ToolShape, ...]:
        """Tool geometry plus the cup geometry of ``cup_profile`` (default profile if ``None``)."""
        cup = self.cup(cup_profile)
        return self.collision + (cup.collision if cup is not None else ())


@dataclass(frozen=True)
class Obstacle:
    """A fixed object of the cell.

    Attributes:
        name: unique.
        shape: the primitive.
        frame: ``base_link`` or ``base`` (the frame ``pose`` is given in).
        pose: centre of the primitive in ``frame``.
        touch_links: robot links allowed to touch it (e.g. the base on the table).
    """

    name: str
    shape: Shape
    frame: str
    pose: Pose
    touch_links: tuple[str, ...] = ()

    def T_base_link_obstacle(self) -> NDArray[np.float64]:
        """(4, 4) pose of the obstacle centre in ``base_link``."""
        T = self.pose.matrix()
        return T_BASE_LINK_BASE @ T if self.frame == "base" else T


@dataclass(frozen=True)
class Dock:
    """A tool-changer dock (where it is: :meth:`ToolChanger.seat`).

    Attributes:
        number: the ``dock_number`` of ``tool_exchange`` steps.
        gripper: the tool stored there when the cell starts, or ``None``.
    """

    number: int
    gripper: str | None


@dataclass(frozen=True)
class RelativeMove:
    """One straight move of a tool exchange: ``distance`` [m] along ``direction``.

    Attributes:
        direction: ``forward``, ``up``, … (a ``moveto`` direction).
        vector: its unit vector in the flange frame (the IK frame EROBS moves in).
        distance: [m] > 0.
    """

    direction: str
    vector: tuple[float, float, float]
    distance: float

    def matrix(self) -> NDArray[np.float64]:
        """(4, 4) the move as a flange-frame translation (right-multiplied onto the flange pose)."""
        T = np.eye(4)
        T[:3, 3] = np.asarray(self.vector) * self.distance
        return T


@dataclass(frozen=True)
class ToolChanger:
    """The dock geometry of ``tool_exchange``, as EROBS computes its motions
    (``beambot/stages/tool_exchange_stages.py``): from the step's approach pose, a lateral
    shift of ``dock_spacing · (reference_dock − dock_number)`` along the flange's Y
    (``right`` when positive, else ``left``; none under 0.1 mm), then ``load_sequence`` or
    ``dock_sequence`` move by move.

    Attributes:
        dock_spacing: [m] between dock centres (``dock_spacing_m``).
        reference_dock: the dock centred on the approach pose.
        load_sequence: the moves of a load, after the shift.
        dock_sequence: the moves of a dock, after the shift.
        approach: [rad] the load approach pose the simulated docks are placed from
            (``approach_deg``), or ``None`` (the docks have no place in the simulated world).
    """

    dock_spacing: float
    reference_dock: int
    load_sequence: tuple[RelativeMove, ...]
    dock_sequence: tuple[RelativeMove, ...]
    approach: tuple[float, ...] | None = None

    #: A lateral shift shorter than this [m] is not made (EROBS's 1e-4).
    MIN_SHIFT: ClassVar[float] = 1e-4

    def shift(self, number: int) -> RelativeMove | None:
        """The lateral move from the approach pose to dock ``number``'s line, or ``None``."""
        offset = self.dock_spacing * (self.reference_dock - number)
        if abs(offset) < self.MIN_SHIFT:
            return None
        direction = "right" if offset >= 0 else "left"
        return RelativeMove(direction, DIRECTION_VECTORS[direction], abs(offset))

    def sequence(self, operation: str) -> tuple[RelativeMove, ...]:
        """``load_sequence`` for ``load``, ``dock_sequence`` for ``dock``.

        Raises:
            ValueError: another operation.
        """
        if operation == "load":
            return self.load_sequence
        if operation == "dock":
            return self.dock_sequence
        raise ValueError(f"Unknown tool exchange operation: {operation!r} (expected 'load' or 'dock')")

    def seat(
        self, number: int, T_base_approach: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64] | None:
        """(4, 4) flange pose in ``base_link`` where a load from dock ``number`` takes hold of
        the tool: the approach pose, the shift, then the load's first move (``attach``).

        Args:
            number: the dock.
            T_base_approach: the flange at the approach pose (default: forward kinematics
                of :attr:`approach`).

        Returns:
            The pose, or ``None`` without an approach pose.
        """
        if T_base_approach is None:
            if self.approach is None:
                return None
            T_base_approach = fk(self.approach)
        T = np.array(T_base_approach, dtype=float)
        shift = self.shift(number)
        if shift is not None:
            T = T @ shift.matrix()
        if self.load_sequence:
            T = T @ self.load_sequence[0].matrix()
        return T


@dataclass(frozen=True)
class Marker:
    """A fiducial marker the vision tasks can detect.

    Attributes:
        id: marker id (``tag_id``/``marker_id`` of vision steps).
        family: marker dictionary, e.g. ``aruco_4x4_50``.
        size: edge length [m].
        pose: centre in ``base_link``; z out of the printed face.
    """

    id: int
    family: str
    size: float
    pose: Pose


@dataclass(frozen=True)
class CollisionSettings:
    """Collision-checking settings.

    Attributes:
        padding: [m] distance kept between the robot/tool and obstacles.
        self_collision_samples: configurations sampled to build the allowed-collision matrix.
        seed: RNG seed of that sampling (deterministic matrix).
        link_geometry: ``convex`` (hull of each link's collision mesh, contains the mesh) or
            ``mesh`` (the collision mesh itself).
    """

    padding: float = 0.01
    self_collision_samples: int = 10000
    seed: int = 0
    link_geometry: Literal["convex", "mesh"] = "convex"


@dataclass(frozen=True)
class CellConfig:
    """The whole cell, validated (see the module docstring for the YAML schema).

    Joint values are radians here (converted from the ``*_deg`` keys).

    Attributes:
        source: the file it was loaded from (``""`` when built in code).
        name: informational.
        model_revision_prefix: first part of the model revision.
        initial_joint_state: [rad], six values.
        named_states: name → six joint values [rad].
        grippers: name → gripper.
        obstacles: fixed objects.
        docks: tool-changer docks, by ascending number.
        tool_changer: their geometry (``tool_exchange``), or ``None`` (a cell without one).
        markers: fiducials.
        collision: collision settings.
        extra: top-level sections this module does not interpret (e.g. ``faults``).
        vocabulary: the names scripts may use in this cell (gripper states and roles,
            named states [deg], docks), as the parser reads them.
    """

    source: str
    name: str
    model_revision_prefix: str
    initial_joint_state: tuple[float, ...]
    named_states: Mapping[str, tuple[float, ...]]
    grippers: Mapping[str, GripperConfig]
    obstacles: tuple[Obstacle, ...]
    docks: tuple[Dock, ...]
    markers: tuple[Marker, ...]
    collision: CollisionSettings
    extra: Mapping[str, Any]
    vocabulary: CellVocabulary | None = None
    tool_changer: ToolChanger | None = None

    def gripper(self, name: str) -> GripperConfig:
        """The gripper called ``name``.

        Raises:
            ValueError: ``Unknown gripper: <name> (available: …)``.
        """
        try:
            return self.grippers[name]
        except KeyError:
            available = ", ".join(sorted(self.grippers))
            raise ValueError(f"Unknown gripper: {name} (available: {available})") from None

    def model_revision(self, gripper: str, cup_profile: str | None = None) -> str:
        """The robot-model revision ``<prefix>__<gripper>[__<cup_profile>]``.

        Args:
            gripper: the attached tool.
            cup_profile: the fitted cup; ``None`` uses the gripper's default; ignored for a
                gripper without cup profiles.

        Raises:
            ValueError: unknown gripper or cup profile.
        """
        cup = self.gripper(gripper).cup(cup_profile)
        parts = [self.model_revision_prefix, gripper] + ([cup.name] if cup is not None else [])
        return "__".join(parts)

    def dock(self, number: int) -> Dock:
        """The dock with ``number``.

        Raises:
            ValueError: no such dock (message lists the available numbers).
        """
        for dock in self.docks:
            if dock.number == number:
                return dock
        available = ", ".join(str(d.number) for d in self.docks) or "none"
        raise ValueError(f"Unknown dock: {number} (available: {available})")

    def dock_seat(self, number: int) -> NDArray[np.float64] | None:
        """(4, 4) flange pose in ``base_link`` with the tool seated in dock ``number``
        (:meth:`ToolChanger.seat`), or ``None`` when the cell places its docks nowhere.

        Raises:
            ValueError: no such dock.
        """
        self.dock(number)
        return self.tool_changer.seat(number) if self.tool_changer is not None else None

    def marker(self, marker_id: int) -> Marker:
        """The marker with ``marker_id``.

        Raises:
            ValueError: no such marker.
        """
        for marker in self.markers:
            if marker.id == marker_id:
                return marker
        available = ", ".join(str(m.id) for m in self.markers) or "none"
        raise ValueError(f"Unknown marker: {marker_id} (available: {available})")

    def obstacle(self, name: str) -> Obstacle:
        """The obstacle called ``name``.

        Raises:
            ValueError: no such obstacle.
        """
        for obstacle in self.obstacles:
            if obstacle.name == name:
                return obstacle
        raise ValueError(f"Unknown obstacle: {name}")


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def _cell_error(file: str, path: str, reason: str) -> CellConfigError:
    return CellConfigError(file, path, reason)


@dataclass(frozen=True)
class _Reader(Checker):
    """The toolkit's checker (:class:`~erobs_bt.validation.Checker`) raising
    :class:`CellConfigError`, plus the cell's composite values (poses, shapes)."""

    error: ErrorFactory = _cell_error
    string_keys: bool = True

    def pose(self, value: Any, key: str) -> Pose:
        raw = self.mapping(value, key)
        self.only_keys(raw, key, ("xyz", "rpy", "rpy_deg"))
        xyz = self.numbers(self.required(raw, "xyz", key), f"{key}.xyz", 3, unit="m")
        if ("rpy" in raw) == ("rpy_deg" in raw):
            raise self.fail(key, "expected exactly one of rpy [rad] or rpy_deg [deg]")
        if "rpy" in raw:
            rpy = self.numbers(raw["rpy"], f"{key}.rpy", 3, unit="rad")
        else:
            degrees = self.numbers(raw["rpy_deg"], f"{key}.rpy_deg", 3, unit="deg")
            rpy = tuple(math.radians(v) for v in degrees)
        return Pose(xyz=(xyz[0], xyz[1], xyz[2]), rpy=(rpy[0], rpy[1], rpy[2]))

    def shape(self, raw: Mapping[str, Any], key: str) -> Shape:
        kind = self.choice(self.required(raw, "shape", key), f"{key}.shape", tuple(_SIZE_LEN), what="shape")
        count = _SIZE_LEN[kind]
        size = self.numbers(self.required(raw, "size", key), f"{key}.size", count, unit="m", positive=True)
        return Shape(kind=cast(ShapeKind, kind), size=size)

    def joints_deg(self, value: Any, key: str) -> tuple[float, ...]:
        return tuple(math.radians(v) for v in self.numbers(value, key, 6, unit="deg"))

    def tool_shapes(self, value: Any, key: str) -> tuple[ToolShape, ...]:
        shapes: list[ToolShape] = []
        for i, item in enumerate(self.array(value, key)):
            k = f"{key}[{i}]"
            raw = self.mapping(item, k)
            self.only_keys(raw, k, ("name", "shape", "size", "pose"))
            name = self.string(self.required(raw, "name", k), f"{k}.name")
            if any(s.name == name for s in shapes):
                raise self.fail(f"{k}.name", f"duplicate name {name!r}")
            shapes.append(
                ToolShape(name, self.shape(raw, k), self.pose(self.required(raw, "pose", k), f"{k}.pose"))
            )
        return tuple(shapes)


def read_pose(value: Any, key: str, *, file: str) -> Pose:
    """Parse a ``{xyz: [3] m, rpy: [3] rad | rpy_deg: [3] deg}`` pose of a cell file.

    The one parser of this pose format: the cell's obstacles, tools, docks and markers, and
    the ``parts`` and ``camera`` sections read by :mod:`erobs_bt.world.tools` and
    :mod:`erobs_bt.world.vision`.

    Args:
        value: the decoded YAML value.
        key: where it is in the file (``parts[1].pose``).
        file: the file, for the message.

    Raises:
        CellConfigError: ``<file>: <key>[.xyz|.rpy|.rpy_deg]: <reason>``.
    """
    return _Reader(file=file).pose(value, key)


def _read_grippers(r: _Reader, value: Any, vocabulary: CellVocabulary) -> Mapping[str, GripperConfig]:
    raw_all = r.mapping(value, "grippers")
    if "none" not in raw_all:
        raise r.fail("grippers.none", "missing (the bare flange must be described)")
    grippers: dict[str, GripperConfig] = {}
    for name, item in raw_all.items():
        k = f"grippers.{name}"
        raw = r.mapping(item, k)
        r.only_keys(
            raw,
            k,
            (
                "tip_frame",
                "tip",
                "z_offset",
                "actions",
                "roles",
                "collision",
                "cup_profiles",
                "default_cup_profile",
                "contact",
            ),
        )
        words = vocabulary.grippers[name]
        cups: dict[str, CupProfile] = {}
        for cup_name, cup_item in r.mapping(raw.get("cup_profiles", {}), f"{k}.cup_profiles").items():
            ck = f"{k}.cup_profiles.{cup_name}"
            cup_raw = r.mapping(cup_item, ck)
            r.only_keys(cup_raw, ck, ("length", "collision"))
            cups[cup_name] = CupProfile(
                name=cup_name,
                length=r.number(r.required(cup_raw, "length", ck), f"{ck}.length", unit="m", minimum=0.0),
                collision=r.tool_shapes(cup_raw.get("collision", []), f"{ck}.collision"),
            )
        default_cup = raw.get("default_cup_profile")
        if cups and default_cup is None:
            raise r.fail(f"{k}.default_cup_profile", "missing (required with cup_profiles)")
        if default_cup is not None:
            default_cup = r.string(default_cup, f"{k}.default_cup_profile")
            if default_cup not in cups:
                raise r.fail(
                    f"{k}.default_cup_profile",
                    f"{default_cup!r} is not a cup profile (available: {', '.join(sorted(cups)) or 'none'})",
                )
        collision = r.tool_shapes(raw.get("collision", []), f"{k}.collision")
        shape_names = {s.name for s in collision} | {s.name for c in cups.values() for s in c.collision}
        contact = tuple(
            r.string(c, f"{k}.contact[{j}]")
            for j, c in enumerate(r.array(raw.get("contact", []), f"{k}.contact"))
        )
        for j, c in enumerate(contact):
            if c not in shape_names:
                raise r.fail(
                    f"{k}.contact[{j}]",
                    f"{c!r} is not a shape of the tool (shapes: {', '.join(sorted(shape_names))})",
                )
        grippers[name] = GripperConfig(
            name=name,
            tip_frame=r.string(r.required(raw, "tip_frame", k), f"{k}.tip_frame"),
            tip=r.pose(r.required(raw, "tip", k), f"{k}.tip"),
            z_offset=r.number(raw.get("z_offset", 0.0), f"{k}.z_offset", unit="m"),
            actions=words.states,
            roles=words.roles,
            collision=collision,
            cup_profiles=MappingProxyType(cups),
            default_cup_profile=default_cup,
            contact=contact,
        )
    return MappingProxyType(grippers)


def _read_obstacles(r: _Reader, value: Any) -> tuple[Obstacle, ...]:
    obstacles: list[Obstacle] = []
    for i, item in enumerate(r.array(value, "obstacles")):
        k = f"obstacles[{i}]"
        raw = r.mapping(item, k)
        r.only_keys(raw, k, ("name", "shape", "size", "frame", "pose", "touch_links"))
        name = r.string(r.required(raw, "name", k), f"{k}.name")
        if any(o.name == name for o in obstacles):
            raise r.fail(f"{k}.name", f"duplicate obstacle name {name!r}")
        frame = r.choice(raw.get("frame", "base_link"), f"{k}.frame", OBSTACLE_FRAMES, what="frame")
        touch = tuple(
            r.string(t, f"{k}.touch_links[{j}]")
            for j, t in enumerate(r.array(raw.get("touch_links", []), f"{k}.touch_links"))
        )
        for j, link in enumerate(touch):
            if link not in ROBOT_LINKS:
                raise r.fail(
                    f"{k}.touch_links[{j}]", f"unknown link {link!r} (links: {', '.join(ROBOT_LINKS)})"
                )
        obstacles.append(
            Obstacle(
                name=name,
                shape=r.shape(raw, k),
                frame=frame,
                pose=r.pose(r.required(raw, "pose", k), f"{k}.pose"),
                touch_links=touch,
            )
        )
    return tuple(obstacles)


def _read_docks(r: _Reader, value: Any, grippers: Mapping[str, GripperConfig]) -> tuple[Dock, ...]:
    docks: list[Dock] = []
    for i, item in enumerate(r.array(value, "docks")):
        k = f"docks[{i}]"
        raw = r.mapping(item, k)
        r.only_keys(raw, k, ("number", "gripper"))
        number = r.integer(r.required(raw, "number", k), f"{k}.number", minimum=1)
        if any(d.number == number for d in docks):
            raise r.fail(f"{k}.number", f"duplicate dock number {number}")
        gripper = raw.get("gripper")
        if gripper is not None:
            gripper = r.string(gripper, f"{k}.gripper")
            if gripper not in grippers or gripper == "none":
                raise r.fail(
                    f"{k}.gripper", f"unknown gripper {gripper!r} (available: {', '.join(sorted(grippers))})"
                )
            other = next((d.number for d in docks if d.gripper == gripper), None)
            if other is not None:
                raise r.fail(f"{k}.gripper", f"the {gripper} is also in dock {other}")
        docks.append(Dock(number=number, gripper=gripper))
    return tuple(sorted(docks, key=lambda d: d.number))


def _read_moves(r: _Reader, value: Any, key: str) -> tuple[RelativeMove, ...]:
    moves: list[RelativeMove] = []
    for i, item in enumerate(r.array(value, key, non_empty=True)):
        k = f"{key}[{i}]"
        raw = r.mapping(item, k)
        r.only_keys(raw, k, ("direction", "distance"))
        direction = r.choice(
            r.required(raw, "direction", k), f"{k}.direction", tuple(DIRECTION_VECTORS), what="direction"
        )
        distance = r.number(r.required(raw, "distance", k), f"{k}.distance", unit="m", positive=True)
        moves.append(RelativeMove(direction, DIRECTION_VECTORS[direction], distance))
    return tuple(moves)


def _read_tool_changer(r: _Reader, value: Any) -> ToolChanger | None:
    if value is None:
        return None
    k = "tool_exchange"
    raw = r.mapping(value, k)
    r.only_keys(
        raw, k, ("dock_spacing_m", "reference_dock", "load_sequence", "dock_sequence", "approach_deg")
    )
    approach = raw.get("approach_deg")
    return ToolChanger(
        dock_spacing=r.number(
            r.required(raw, "dock_spacing_m", k), f"{k}.dock_spacing_m", unit="m", positive=True
        ),
        reference_dock=r.integer(r.required(raw, "reference_dock", k), f"{k}.reference_dock", minimum=1),
        load_sequence=_read_moves(r, r.required(raw, "load_sequence", k), f"{k}.load_sequence"),
        dock_sequence=_read_moves(r, r.required(raw, "dock_sequence", k), f"{k}.dock_sequence"),
        approach=None if approach is None else r.joints_deg(approach, f"{k}.approach_deg"),
    )


def _read_markers(r: _Reader, value: Any) -> tuple[Marker, ...]:
    markers: list[Marker] = []
    for i, item in enumerate(r.array(value, "markers")):
        k = f"markers[{i}]"
        raw = r.mapping(item, k)
        r.only_keys(raw, k, ("id", "family", "size", "pose"))
        marker_id = r.integer(r.required(raw, "id", k), f"{k}.id", minimum=0)
        if any(m.id == marker_id for m in markers):
            raise r.fail(f"{k}.id", f"duplicate marker id {marker_id}")
        markers.append(
            Marker(
                id=marker_id,
                family=r.string(raw.get("family", "aruco_4x4_50"), f"{k}.family"),
                size=r.number(r.required(raw, "size", k), f"{k}.size", unit="m", positive=True),
                pose=r.pose(r.required(raw, "pose", k), f"{k}.pose"),
            )
        )
    return tuple(markers)


def _read_collision(r: _Reader, value: Any) -> CollisionSettings:
    raw = r.mapping(value, "collision")
    r.only_keys(raw, "collision", ("padding", "self_collision_samples", "seed", "link_geometry"))
    defaults = CollisionSettings()
    link_geometry = r.choice(
        raw.get("link_geometry", defaults.link_geometry),
        "collision.link_geometry",
        ("convex", "mesh"),
        what="link geometry",
    )
    return CollisionSettings(
        padding=r.number(raw.get("padding", defaults.padding), "collision.padding", unit="m", minimum=0.0),
        self_collision_samples=r.integer(
            raw.get("self_collision_samples", defaults.self_collision_samples),
            "collision.self_collision_samples",
            minimum=100,
        ),
        seed=r.integer(raw.get("seed", defaults.seed), "collision.seed", minimum=0),
        link_geometry=cast(Literal["convex", "mesh"], link_geometry),
    )


def parse_cell(document: Any, *, source: str) -> CellConfig:
    """Validate an already-parsed YAML document (see the module docstring for the schema).

    Args:
        document: the result of ``yaml.safe_load``.
        source: file name used in error messages.

    Returns:
        The validated cell.

    Raises:
        CellConfigError: the first problem found, naming ``source`` and the key.
    """
    r = _Reader(file=source)
    root = r.mapping(document, "")
    for key in ("model_revision_prefix", "initial_joint_state_deg", "grippers"):
        r.required(root, key, "")
    try:
        vocabulary = CellVocabulary.from_document(document, source=source)
    except ScriptError as exc:
        key = exc.path.split(": ", 1)[1] if ": " in exc.path else ""
        raise CellConfigError(source, key, exc.reason) from None
    grippers = _read_grippers(r, root["grippers"], vocabulary)
    named = {
        state: tuple(math.radians(a) for a in joints) for state, joints in vocabulary.named_states.items()
    }
    return CellConfig(
        source=source,
        name=r.string(root.get("name", Path(source).stem or "cell"), "name"),
        model_revision_prefix=r.string(root["model_revision_prefix"], "model_revision_prefix"),
        initial_joint_state=r.joints_deg(root["initial_joint_state_deg"], "initial_joint_state_deg"),
        named_states=MappingProxyType(named),
        grippers=grippers,
        obstacles=_read_obstacles(r, root.get("obstacles", [])),
        docks=_read_docks(r, root.get("docks", []), grippers),
        tool_changer=_read_tool_changer(r, root.get("tool_exchange")),
        markers=_read_markers(r, root.get("markers", [])),
        collision=_read_collision(r, root.get("collision", {})),
        extra=MappingProxyType({k: v for k, v in root.items() if k not in _KNOWN_SECTIONS}),
        vocabulary=vocabulary,
    )

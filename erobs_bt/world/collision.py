"""Collision checking of the simulated UR5e cell with pinocchio and coal.

Why pinocchio + coal: one C++ call (``pinocchio.computeCollisions``) does forward kinematics,
broad phase and narrow phase for every active pair, at about 20 µs per configuration, fast
enough for a sampling planner with a Python validity callback (``docs/motion-planning.md``
§3). The robot model is the UR5e URDF shipped by ``airo-models`` with its collision meshes,
so the geometry is UR's and not hand-sized.

The model, in ``base_link`` (the URDF root, pinocchio's universe):

* **Arm links**: the convex hull of each link's collision mesh (``collision.link_geometry:
  convex``, default) or the mesh itself (``mesh``). A hull contains its mesh, so it can only
  report more collisions than the mesh, never fewer; it is also a closed solid, which a
  triangle soup is not. The base uses UR's base mesh instead of the URDF's two spheres.
  ``collision.padding`` [m] is kept between arm links and obstacles.
* **Tool**: the primitives of the attached gripper (and its cup profile) from the cell config,
  fixed to ``flange``. Tool and held object are checked against obstacles without padding:
  tips are meant to come close to surfaces, and the tool geometry is authored with its own
  clearance.
* **Held object** (:meth:`CollisionModel.attach_object`): a primitive fixed to the tool
  centre point.
* **Obstacles**: the boxes, cylinders and spheres of the cell config.

**Allowed contact, for one motion only** (:meth:`CollisionModel.allowing_tool_contact`): a
tool's ``contact`` shapes (the pipettor's cone pressed onto a disposable tip, a gripper's
fingers or cup on the part it grasps) may touch obstacles during the motions the planner runs
inside that context, and nowhere else: the planner opens it only for a straight move along
the tool axis (an approach, a press, a retreat), as MoveIt Task Constructor's allow-collision
stages do around a grasp. Every other pair (arm links, the tool's body, held objects) stays
checked in those motions too, and every other motion checks the contact shapes as usual.

Self-collision pairs follow the MoveIt Setup Assistant recipe: all pairs of bodies that are
not adjacent in the chain, minus the pairs that collided in every or in none of
``collision.self_collision_samples`` random configurations (seeded, so deterministic). The
matrix depends only on the geometry, so it is computed **once per cell geometry**
(:class:`AcmStore`): keyed by a SHA-256 of everything it is computed from (the URDF text
and the bytes of its collision meshes, the link-geometry mode, the tool and cup primitives,
the sampling settings, the pinocchio and coal versions and :data:`ACM_FORMAT`), kept in
memory for the process and as a small JSON file in the user's cache directory
(:func:`default_cache_dir`; ``EROBS_BT_CACHE_DIR`` overrides it), like the SRDF that
MoveIt's Setup Assistant writes once per robot. A changed geometry gives another key, so a
stale matrix is never used; an unreadable or unwritable cache only costs the recomputation.

Threads: planning runs off the tick thread, so every thread gets its own ``pinocchio.Data``
and ``GeometryData`` (``threading.local``). The model itself is an immutable snapshot that
:meth:`CollisionModel.set_gripper`, :meth:`~CollisionModel.attach_object` and
:meth:`~CollisionModel.detach_object` replace as a whole; a check that is already running
finishes on the snapshot it started with.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import math
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

import coal
import numpy as np
import pinocchio as pin
from numpy.typing import ArrayLike, NDArray

from erobs_bt.world.cell import ROBOT_LINKS, CellConfig, Obstacle, Shape, ToolShape
from erobs_bt.world.kinematics import JOINT_LIMITS

_LOG = logging.getLogger(__name__)

#: Version of the allowed-collision-matrix computation; part of every ACM key. Bump it when
#: the candidate pairs or the sampling rule change, so matrices cached on disk are recomputed.
ACM_FORMAT = 1
#: Environment variable naming the directory of erobs_bt's on-disk caches.
CACHE_DIR_ENV = "EROBS_BT_CACHE_DIR"

#: Pairs of arm links joined by a joint (never checked), airo-models URDF names.
ADJACENT_LINKS: tuple[tuple[str, str], ...] = tuple(pairwise(ROBOT_LINKS))

#: Link that carries the tool, and the frame the tool geometry is given in.
TOOL_LINK = "wrist_3_link"
TOOL_FRAME = "flange"

LinkGeometry = Literal["convex", "mesh"]

_DRAKE_ATTRIBUTE = re.compile(r'\s+drake:[A-Za-z_]+="[^"]*"')
_BASE_LINK_BLOCK = re.compile(r'<link name="base_link_inertia">.*?</link>', re.S)
_COLLISION_BLOCK = re.compile(r"<collision>.*?</collision>", re.S)
_BASE_MESH_COLLISION = (
    '<collision><origin rpy="0 0 3.141592653589793" xyz="0 0 0"/>'
    '<geometry><mesh filename="collision/base.obj"/></geometry></collision>'
)


def ur5e_urdf_path() -> Path:
    """Path of the UR5e URDF shipped by ``airo-models`` (meshes beside it).

    Found without importing ``airo_models`` (its ``__init__`` imports its URDF tooling,
    about 0.1 s of start-up this package does not need).

    Raises:
        RuntimeError: ``airo-models`` is not installed.
    """
    spec = importlib.util.find_spec("airo_models")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the airo-models package (UR5e URDF and meshes) is not installed")
    return Path(next(iter(spec.submodule_search_locations))).resolve() / "arms" / "ur5e" / "ur5e.urdf"


def ur5e_urdf_text(*, base_mesh: bool) -> str:
    """The airo-models UR5e URDF, ready for pinocchio.

    The ``drake:acceleration`` attributes carry no namespace declaration, which strict XML
    parsers reject, so they are removed.

    Args:
        base_mesh: replace the two spheres the URDF uses for ``base_link_inertia`` with UR's
            base collision mesh (shipped next to the URDF, same origin as ``ur_description``).
    """
    text = _DRAKE_ATTRIBUTE.sub("", ur5e_urdf_path().read_text(encoding="utf-8"))
    if base_mesh:
        match = _BASE_LINK_BLOCK.search(text)
        if match is None or not _COLLISION_BLOCK.search(match.group(0)):
            raise RuntimeError("airo-models UR5e URDF: base_link_inertia collision block not found")
        block = _COLLISION_BLOCK.sub("", match.group(0)).replace("</link>", _BASE_MESH_COLLISION + "</link>")
        text = text[: match.start()] + block + text[match.end() :]
    return text


def build_robot_model(*, base_mesh: bool = True) -> tuple[pin.Model, pin.GeometryModel]:
    """Kinematic model and collision-mesh geometry of the UR5e (airo-models URDF).

    Returns:
        ``(model, geometry)``; joints in UR order, universe = ``base_link``; geometry objects
        are the raw collision meshes (``BVHModelOBBRSS``), one per link.
    """
    text = ur5e_urdf_text(base_mesh=base_mesh)
    model = pin.buildModelFromXML(text)
    geometry = pin.buildGeomFromUrdfString(
        model, text, pin.GeometryType.COLLISION, package_dirs=[str(ur5e_urdf_path().parent)]
    )
    return model, geometry


def convex_robot_geometry() -> pin.GeometryModel:
    """The arm's collision geometry with every link mesh replaced by its convex hull (coal/qhull).

    Loads the meshes and builds the hulls (about 0.1 s); :meth:`AcmStore.hulls` keeps the
    result, so a process normally reads it instead.
    """
    _, geometry = build_robot_model()
    for obj in geometry.geometryObjects:
        if isinstance(obj.geometry, coal.BVHModelBase):
            obj.geometry.buildConvexRepresentation(False)
            obj.geometry = obj.geometry.convex
    return geometry


def default_cache_dir() -> Path:
    """The directory of erobs_bt's on-disk caches (the allowed-collision matrices).

    ``$EROBS_BT_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/erobs_bt``, else
    ``~/.cache/erobs_bt`` (the XDG Base Directory default). Nothing in it is precious:
    deleting it only costs a recomputation.
    """
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "erobs_bt"


_COLLISION_MESH = re.compile(r'<collision>.*?filename="([^"]+)".*?</collision>', re.S)
_ROBOT_DIGESTS: dict[str, str] = {}
_ROBOT_DIGESTS_LOCK = threading.Lock()


def robot_geometry_digest(link_geometry: LinkGeometry) -> str:
    """SHA-256 of the arm's collision geometry: the URDF as loaded, its collision meshes' bytes
    and the link-geometry mode (computed once per process; about 1 ms)."""
    with _ROBOT_DIGESTS_LOCK:
        cached = _ROBOT_DIGESTS.get(link_geometry)
        if cached is not None:
            return cached
        text = ur5e_urdf_text(base_mesh=True)
        digest = hashlib.sha256(text.encode())
        digest.update(link_geometry.encode())
        root = ur5e_urdf_path().parent
        for filename in _COLLISION_MESH.findall(text):
            digest.update(filename.encode())
            digest.update((root / filename).read_bytes())
        _ROBOT_DIGESTS[link_geometry] = digest.hexdigest()
        return _ROBOT_DIGESTS[link_geometry]


def acm_key_document(cell: CellConfig, gripper: str, cup_profile: str | None) -> dict[str, Any]:
    """Everything the allowed-collision matrix of a tool is computed from (JSON-ready).

    The arm geometry (:func:`robot_geometry_digest`), the tool's and cup's primitives with
    their placements in ``flange`` (rounded to 1e-12 m/rad), the sampling settings, the
    pinocchio and coal versions and :data:`ACM_FORMAT`. Obstacles and padding are not in it:
    the matrix covers self-collision pairs only.
    """
    settings = cell.collision
    tool = [
        {
            "name": f"{gripper}/{s.name}",
            "kind": s.shape.kind,
            "size": [round(float(v), 12) for v in s.shape.size],
            "pose": [round(float(v), 12) for v in (*s.pose.xyz, *s.pose.rpy)],
        }
        for s in cell.gripper(gripper).collision_shapes(cup_profile)
    ]
    return {
        "format": ACM_FORMAT,
        "robot": robot_geometry_digest(settings.link_geometry),
        "tool": tool,
        "samples": int(settings.self_collision_samples),
        "seed": int(settings.seed),
        "pinocchio": str(pin.__version__),
        "coal": str(coal.__version__),
    }


def acm_key(document: dict[str, Any]) -> str:
    """The SHA-256 hex digest of an :func:`acm_key_document` (canonical JSON)."""
    return hashlib.sha256(json.dumps(document, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


PairSet = frozenset[tuple[str, str]]

#: Version of the stored convex link geometry (part of its key).
HULLS_FORMAT = 1


def _hulls_key() -> str:
    """SHA-256 of what the convex link geometry is built from: the arm geometry (URDF and
    mesh bytes), the pinocchio and coal versions (their serialisation) and :data:`HULLS_FORMAT`."""
    document = {
        "format": HULLS_FORMAT,
        "robot": robot_geometry_digest("convex"),
        "pinocchio": str(pin.__version__),
        "coal": str(coal.__version__),
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


class AcmStore:
    """Allowed-collision matrices by geometry key: in memory for the process, and on disk.

    Files are ``<directory>/acm/<key>.json`` (the key document, for people, and the
    disabled pairs), written atomically; a file that does not parse or does not match its
    key is ignored and rewritten. Disk errors are logged and cost only the recomputation.
    Thread-safe.

    Args:
        directory: the cache directory; ``None`` uses :func:`default_cache_dir` at each
            lookup (so ``EROBS_BT_CACHE_DIR`` set later still applies).
        persist: ``False`` keeps matrices in memory only.

    The store also keeps the arm's convex link hulls (:meth:`hulls`), which the matrices are
    computed against: ``<directory>/hulls/<key>.bin``, pinocchio's binary serialisation of the
    geometry model, keyed by the arm geometry (:func:`robot_geometry_digest`) and the pinocchio
    and coal versions, so that a process does not load the meshes and rebuild the hulls either.

    Attributes:
        computed: matrices computed by sampling in this store.
        loaded: matrices read from disk.
        reused: lookups answered from memory.
        hulls_built: convex link geometries built from the meshes.
        hulls_loaded: convex link geometries read from disk.
    """

    def __init__(self, directory: Path | None = None, *, persist: bool = True) -> None:
        self._directory = directory
        self._persist = persist
        self._memory: dict[str, PairSet] = {}
        self._hulls: dict[str, pin.GeometryModel] = {}
        self._lock = threading.Lock()
        self.computed = 0
        self.loaded = 0
        self.reused = 0
        self.hulls_built = 0
        self.hulls_loaded = 0

    def hulls_path(self) -> Path:
        """Where the convex link geometry of the current arm geometry is (or would be) stored."""
        directory = self._directory if self._directory is not None else default_cache_dir()
        return directory / "hulls" / f"{_hulls_key()}.bin"

    def hulls(self, build: Callable[[], pin.GeometryModel]) -> pin.GeometryModel:
        """The arm's convex link geometry: memory, else disk, else ``build()`` (then stored).

        The returned model is shared by every caller of this store and must not be changed
        (:class:`CollisionModel` copies its objects into each scene).
        """
        key = _hulls_key()
        with self._lock:
            cached = self._hulls.get(key)
            if cached is not None:
                return cached
            path = self.hulls_path()
            geometry = self._load_hulls(path) if self._persist else None
            if geometry is not None:
                self.hulls_loaded += 1
            else:
                geometry = build()
                self.hulls_built += 1
                if self._persist:
                    self._save_hulls(path, geometry)
            self._hulls[key] = geometry
            return geometry

    @staticmethod
    def _load_hulls(path: Path) -> pin.GeometryModel | None:
        if not path.is_file():
            return None
        geometry = pin.GeometryModel()
        try:
            geometry.loadFromBinary(str(path))
        except (RuntimeError, OSError, ValueError) as exc:
            _LOG.warning("convex link geometry %s unreadable (%s); rebuilding it", path, exc)
            return None
        if geometry.ngeoms == 0 or not all(
            isinstance(obj.geometry, coal.ConvexBase) for obj in geometry.geometryObjects
        ):
            _LOG.warning("convex link geometry %s is not a set of hulls; rebuilding it", path)
            return None
        return geometry

    @staticmethod
    def _save_hulls(path: Path, geometry: pin.GeometryModel) -> None:
        temporary: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".hulls-", suffix=".tmp")
            os.close(descriptor)
            geometry.saveToBinary(temporary)
            os.replace(temporary, path)
        except (OSError, RuntimeError) as exc:
            _LOG.warning("cannot store the convex link geometry in %s (%s)", path, exc)
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)

    def path(self, key: str) -> Path:
        """Where the matrix of ``key`` is (or would be) stored."""
        directory = self._directory if self._directory is not None else default_cache_dir()
        return directory / "acm" / f"{key}.json"

    def get(self, document: dict[str, Any], compute: Callable[[], PairSet]) -> PairSet:
        """The matrix for ``document`` (:func:`acm_key_document`): memory, else disk, else ``compute()``."""
        key = acm_key(document)
        with self._lock:
            cached = self._memory.get(key)
            if cached is not None:
                self.reused += 1
                return cached
            pairs = self._load(key) if self._persist else None
            if pairs is not None:
                self.loaded += 1
            else:
                pairs = compute()
                self.computed += 1
                if self._persist:
                    self._save(key, document, pairs)
            self._memory[key] = pairs
            return pairs

    def _load(self, key: str) -> PairSet | None:
        path = self.path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            _LOG.warning("allowed-collision matrix %s unreadable (%s); recomputing", path, exc)
            return None
        pairs = data.get("disabled") if isinstance(data, dict) else None
        if not (
            isinstance(data, dict)
            and data.get("key") == key
            and isinstance(pairs, list)
            and all(isinstance(p, list) and len(p) == 2 and all(isinstance(n, str) for n in p) for p in pairs)
        ):
            _LOG.warning("allowed-collision matrix %s does not match its key; recomputing", path)
            return None
        return frozenset((a, b) for a, b in pairs)

    def _save(self, key: str, document: dict[str, Any], pairs: PairSet) -> None:
        path = self.path(key)
        payload = {"key": key, "inputs": document, "disabled": sorted([a, b] for a, b in pairs)}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(
                "w", encoding="utf-8", dir=path.parent, prefix=".acm-", suffix=".tmp", delete=False
            ) as handle:
                json.dump(payload, handle, indent=1)
            os.replace(handle.name, path)
        except OSError as exc:
            _LOG.warning("cannot store the allowed-collision matrix in %s (%s)", path, exc)


#: The process-wide store (default cache directory) that :class:`CollisionModel` uses.
DEFAULT_ACM_STORE = AcmStore()


def coal_shape(shape: Shape) -> coal.CollisionGeometry:
    """The coal primitive of a cell shape (cylinder axis = local z, centred)."""
    if shape.kind == "box":
        return coal.Box(*shape.size)
    if shape.kind == "cylinder":
        height, radius = shape.size
        return coal.Cylinder(radius, height)
    return coal.Sphere(shape.size[0])


@dataclass(frozen=True)
class AttachedObject:
    """A held object, fixed to the tool centre point.

    Attributes:
        name: unique among the scene's bodies.
        shape: the primitive.
        T_tip_object: (4, 4) object centre in the TCP frame (tuple of rows, immutable).
        touch_obstacles: obstacles it may touch (e.g. the surface it was picked from).
    """

    name: str
    shape: Shape
    T_tip_object: tuple[tuple[float, ...], ...]
    touch_obstacles: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Scene:
    """One immutable snapshot of the collision world (shared read-only by threads)."""

    model: pin.Model
    geometry: pin.GeometryModel
    names: tuple[str, ...]
    pair_margins: tuple[float, ...]
    revision: str
    gripper: str
    cup_profile: str | None
    attached: AttachedObject | None
    disabled_pairs: frozenset[tuple[str, str]]
    contact_variant: bool = False


@dataclass
class _ThreadState:
    scene: _Scene
    data: Any
    geometry_data: Any


class CollisionModel:
    """Collision model of the UR5e, its tool, a held object and the cell's obstacles.

    Why this class is long: every query (in_collision, first_contact, check_path, first_hit_of, reach) runs
    on one coal scene that the tool, the held object and the obstacles change, kept per thread with the
    allowed-collision matrix; splitting the queries from the scene would expose that per-thread state.

    Body names used in :meth:`first_contact` and :attr:`disabled_pairs`: arm links by their
    URDF names (``forearm_link``), tool primitives as ``<gripper>/<shape>`` (``epick/body``),
    obstacles and the held object by their own names.

    Args:
        cell: the cell description.
        gripper: the attached tool (a key of ``cell.grippers``).
        cup_profile: the fitted cup (``None``: the gripper's default profile).
        acm_store: where allowed-collision matrices are looked up and kept
            (default :data:`DEFAULT_ACM_STORE`: process memory and the user cache directory).

    Raises:
        ValueError: unknown gripper or cup profile.
    """

    def __init__(
        self,
        cell: CellConfig,
        *,
        gripper: str,
        cup_profile: str | None = None,
        acm_store: AcmStore | None = None,
    ) -> None:
        self._cell = cell
        self._acm_store = acm_store if acm_store is not None else DEFAULT_ACM_STORE
        self._lock = threading.Lock()
        self._local = threading.local()
        self._contact_cache: tuple[_Scene, _Scene] | None = None
        link_geometry: LinkGeometry = cell.collision.link_geometry
        if link_geometry == "convex":
            # The kinematic model from the URDF text (about 1 ms); the hulls from the store, so
            # that only the first process ever loads the meshes and builds them (~0.1 s).
            self._robot_model = pin.buildModelFromXML(ur5e_urdf_text(base_mesh=True))
            self._robot_geometry = self._acm_store.hulls(convex_robot_geometry)
        else:
            self._robot_model, self._robot_geometry = build_robot_model()
        flange = self._robot_model.getFrameId(TOOL_FRAME)
        self._T_joint_flange: pin.SE3 = self._robot_model.frames[flange].placement
        self._tool_joint = self._robot_model.frames[flange].parentJoint
        self._chain_length, self._arm_reach = _arm_reach(self._robot_model, self._robot_geometry)
        self._hit_queries: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        cup = cell.gripper(gripper).cup(cup_profile)
        self._scene: _Scene = self._build_scene(gripper, cup.name if cup is not None else None, None)

    # -- configuration ---------------------------------------------------------------------

    @property
    def cell(self) -> CellConfig:
        """The cell description this model was built from."""
        return self._cell

    @property
    def gripper(self) -> str:
        """The attached tool."""
        return self._scene.gripper

    @property
    def cup_profile(self) -> str | None:
        """The fitted cup profile (``None`` for a tool without cups)."""
        return self._scene.cup_profile

    @property
    def model_revision(self) -> str:
        """``<prefix>__<gripper>[__<cup_profile>]`` of the current tool."""
        return self._scene.revision

    @property
    def attached_object(self) -> AttachedObject | None:
        """The held object, if any."""
        return self._scene.attached

    @property
    def T_flange_tcp(self) -> NDArray[np.float64]:
        """(4, 4) tool centre point of the current tool in ``flange`` (cup and z offset included)."""
        scene = self._scene
        return self._cell.gripper(scene.gripper).T_flange_tcp(scene.cup_profile)

    @property
    def disabled_pairs(self) -> frozenset[tuple[str, str]]:
        """Self-collision pairs of the current tool that are not checked.

        Sorted name pairs: bodies of one link, adjacent links, and pairs that collided in
        every or in none of the sampled configurations.
        """
        return self._scene.disabled_pairs

    @property
    def body_names(self) -> tuple[str, ...]:
        """Names of all bodies in the current scene."""
        return self._scene.names

    def set_gripper(self, name: str, *, cup_profile: str | None = None) -> None:
        """Change the attached tool (a tool exchange); drops any held object.

        Args:
            name: a key of ``cell.grippers``.
            cup_profile: the fitted cup (``None``: the gripper's default).

        Raises:
            ValueError: unknown gripper or cup profile.
        """
        gripper = self._cell.gripper(name)
        cup = gripper.cup(cup_profile)
        with self._lock:
            self._scene = self._build_scene(name, cup.name if cup is not None else None, None)

    def attach_object(
        self,
        name: str,
        shape: Shape,
        T_tip_object: ArrayLike,
        *,
        touch_obstacles: Sequence[str] = (),
    ) -> None:
        """Hold an object at the tool centre point (e.g. after ``vacuum_on``).

        The object is not checked against the tool or ``wrist_3_link``, nor against
        ``touch_obstacles``; it is checked against everything else without padding.

        Args:
            name: unique among the scene's bodies.
            shape: the primitive.
            T_tip_object: (4, 4) object centre in the TCP frame (:attr:`T_flange_tcp`) [m].
            touch_obstacles: obstacle names the object may touch (the surface it lies on).

        Raises:
            ValueError: name clash, unknown obstacle, or a bad transform.
        """
        T = np.asarray(T_tip_object, dtype=float)
        if T.shape != (4, 4) or not np.all(np.isfinite(T)):
            raise ValueError(f"T_tip_object: expected a finite 4x4 transform, got shape {T.shape}")
        obstacle_names = {o.name for o in self._cell.obstacles}
        for touched in touch_obstacles:
            if touched not in obstacle_names:
                raise ValueError(f"touch_obstacles: unknown obstacle {touched!r}")
        with self._lock:
            scene = self._scene
            clash = set(scene.names) - ({scene.attached.name} if scene.attached else set())
            if name in clash:
                raise ValueError(f"attach_object: name {name!r} is already a body of the scene")
            attached = AttachedObject(
                name=name,
                shape=shape,
                T_tip_object=tuple(tuple(float(v) for v in row) for row in T),
                touch_obstacles=tuple(touch_obstacles),
            )
            self._scene = self._build_scene(scene.gripper, scene.cup_profile, attached)

    @property
    def obstacles(self) -> tuple[Obstacle, ...]:
        """The obstacles the model checks against (the cell's, or the last :meth:`set_obstacles`)."""
        return self._cell.obstacles

    def set_obstacles(self, obstacles: Sequence[Obstacle]) -> None:
        """Replace the obstacles (the planning scene's world); tool and held object stay.

        Queries already running finish on the scene they started with (each thread takes
        the new scene at its next query). A held object's ``touch_obstacles`` keep only the
        obstacles that are still there.

        Args:
            obstacles: the new world (names unique among the scene's bodies).

        Raises:
            ValueError: an obstacle name used twice or equal to a robot or tool body's name.
        """
        obstacles = tuple(obstacles)
        with self._lock:
            scene = self._scene
            robot = set(scene.names) - {o.name for o in self._cell.obstacles}  # the held object too
            seen: set[str] = set()
            for obstacle in obstacles:
                if obstacle.name in robot:
                    raise ValueError(f"obstacle {obstacle.name!r}: the name of a body of the robot model")
                if obstacle.name in seen:
                    raise ValueError(f"obstacle {obstacle.name!r}: the name is used twice")
                seen.add(obstacle.name)
            attached = scene.attached
            if attached is not None:
                attached = replace(
                    attached, touch_obstacles=tuple(n for n in attached.touch_obstacles if n in seen)
                )
            self._cell = replace(self._cell, obstacles=obstacles)
            self._scene = self._build_scene(scene.gripper, scene.cup_profile, attached)

    def detach_object(self) -> None:
        """Release the held object (no-op when nothing is held)."""
        with self._lock:
            scene = self._scene
            if scene.attached is not None:
                self._scene = self._build_scene(scene.gripper, scene.cup_profile, None)

    @contextlib.contextmanager
    def allowing_tool_contact(self) -> Iterator[None]:
        """Within this context (on this thread only), the current tool's ``contact`` shapes
        (:attr:`~erobs_bt.world.cell.GripperConfig.contact`) are not checked against obstacles.

        The planner opens it for one motion: a straight move along the tool axis (pressing a
        pipettor cone onto a tip, closing in on a part to grasp, and the retreat after). All
        other pairs stay checked. The previous setting is restored on exit (it nests).
        """
        previous = getattr(self._local, "contact", False)
        self._local.contact = True
        try:
            yield
        finally:
            self._local.contact = previous

    # -- queries ---------------------------------------------------------------------------

    def in_collision(self, q: ArrayLike) -> bool:
        """True when configuration ``q`` collides (self, tool, held object or obstacles).

        Args:
            q: six joint angles [rad], UR order.

        Raises:
            ValueError: ``q`` is not six finite numbers.
        """
        state = self._thread_state()
        return bool(
            pin.computeCollisions(
                state.scene.model, state.data, state.scene.geometry, state.geometry_data, _as_q(q), True
            )
        )

    def collision_query(self) -> Callable[[NDArray[np.float64]], bool]:
        """:meth:`in_collision` for a run of queries on this thread (a sampling planner's
        validity callback): bound now to this thread's scene (its tool contact setting
        included, :meth:`allowing_tool_contact`), so each query is the one C++ call alone.

        The returned callable takes a (6,) float64 array [rad] that the caller guarantees is
        finite (OMPL's states within their bounds are); it does not check its input, and it
        keeps the scene of this call for as long as it is used (a scene replaced meanwhile is
        seen by the next :meth:`collision_query`).
        """
        state = self._thread_state()
        scene = state.scene
        model, geometry, data, geometry_data = scene.model, scene.geometry, state.data, state.geometry_data
        compute = pin.computeCollisions

        def collides(q: NDArray[np.float64]) -> bool:
            return bool(compute(model, data, geometry, geometry_data, q, True))

        return collides

    def first_contact(self, q: ArrayLike) -> tuple[str, str] | None:
        """The first colliding pair at ``q`` (for error messages), or ``None`` when free.

        Returns:
            ``(body_a, body_b)``; an arm link or tool part first when one is involved.
        """
        state = self._thread_state()
        scene = state.scene
        if not pin.computeCollisions(
            scene.model, state.data, scene.geometry, state.geometry_data, _as_q(q), True
        ):
            return None
        for k, result in enumerate(state.geometry_data.collisionResults):
            if result.isCollision():
                pair = scene.geometry.collisionPairs[k]
                return scene.names[pair.first], scene.names[pair.second]
        return None

    def contacts(self, q: ArrayLike) -> list[tuple[str, str]]:
        """All colliding pairs at ``q`` (each as in :meth:`first_contact`)."""
        state = self._thread_state()
        scene = state.scene
        pin.computeCollisions(scene.model, state.data, scene.geometry, state.geometry_data, _as_q(q), False)
        out = []
        for k, result in enumerate(state.geometry_data.collisionResults):
            if result.isCollision():
                pair = scene.geometry.collisionPairs[k]
                out.append((scene.names[pair.first], scene.names[pair.second]))
        return out

    def is_valid(self, q: ArrayLike) -> bool:
        """True when ``q`` is within :data:`~erobs_bt.world.kinematics.JOINT_LIMITS` and free."""
        qa = _as_q(q)
        if np.any(qa < JOINT_LIMITS[:, 0]) or np.any(qa > JOINT_LIMITS[:, 1]):
            return False
        return not self.in_collision(qa)

    def check_path(self, qs: ArrayLike, max_step: float = 0.01) -> int | None:
        """Check a joint-space polyline, densified so that checks are at most ``max_step`` apart.

        Args:
            qs: (N, 6) waypoints [rad], N ≥ 1, joined by straight joint-space segments.
            max_step: [rad] largest change of any joint between two consecutive checks.

        Returns:
            ``None`` when every waypoint and every segment is free; otherwise the smallest
            index ``i`` such that waypoint ``i`` collides or the segment from ``i - 1`` to
            ``i`` does (``0``: the first waypoint itself collides).

        Raises:
            ValueError: bad shape, non-finite values or ``max_step <= 0``.
        """
        path = np.asarray(qs, dtype=float)
        if path.ndim != 2 or path.shape[1] != 6 or path.shape[0] == 0:
            raise ValueError(f"qs: expected shape (N, 6) with N >= 1, got {path.shape}")
        if not np.all(np.isfinite(path)):
            raise ValueError("qs: joint values must be finite")
        if not max_step > 0:
            raise ValueError(f"max_step: expected > 0, got {max_step}")
        state = self._thread_state()
        scene = state.scene
        model, geometry, data, geometry_data = scene.model, scene.geometry, state.data, state.geometry_data
        if pin.computeCollisions(model, data, geometry, geometry_data, path[0], True):
            return 0
        deltas = np.diff(path, axis=0)
        counts = np.maximum(1, np.ceil(np.max(np.abs(deltas), axis=1) / max_step - 1e-12).astype(int))
        for i in range(1, path.shape[0]):
            steps = int(counts[i - 1])
            if steps == 1:  # already dense (the common case): no interpolation
                if pin.computeCollisions(model, data, geometry, geometry_data, path[i], True):
                    return i
                continue
            delta = deltas[i - 1]
            for s in range(1, steps + 1):
                q = path[i - 1] + delta * (s / steps)
                if pin.computeCollisions(model, data, geometry, geometry_data, q, True):
                    return i
        return None

    def first_hit_of(
        self,
        qs: ArrayLike,
        obstacles: Sequence[Obstacle],
        *,
        gripper: str,
        cup_profile: str | None = None,
        held: AttachedObject | None = None,
        allow_contact: bool = False,
    ) -> tuple[int, str, str] | None:
        """The first sample of ``qs`` at which the robot touches one of ``obstacles``.

        Only the robot's bodies (arm links with ``collision.padding``, the tool ``gripper``
        with ``cup_profile``, the ``held`` object) against the given obstacles are checked,
        with the rules of the full model (an obstacle's ``touch_links``; the tool's contact
        shapes left out when ``allow_contact``, as :meth:`allowing_tool_contact` does for
        one motion); no self-collision and no other obstacle. This is the check of a
        trajectory that was valid in an earlier planning scene against the objects added or
        moved since (a replay's scene check): everything else it was checked against when
        planned is unchanged. The model's own state (its tool, held object, world) is
        neither used nor changed, so it runs beside planning.

        Conservative advancement (the classic continuous-collision method): at a checked
        sample the robot's clearance ``c`` to the obstacles is measured (coal distance
        queries, less the largest padding); no point of the robot moves farther than
        :meth:`reach` [m] times the joint-space path length (the sum of ``|Δq|`` over the
        joints, [rad]), so every configuration along the polyline closer than ``c / reach``
        in path length is collision-free and is skipped. Where the clearance is gone, each
        sample is collision-checked as planning checked it. A path far from the objects thus
        costs a few queries; the whole motion between skipped samples is covered, not only
        the samples. The geometry of a query is kept for the next one with the same tool,
        held object and obstacles (the last :data:`_HIT_QUERIES`).

        Args:
            qs: (N, 6) joint positions [rad], N >= 1.
            obstacles: the objects to check against, in ``base_link`` or ``base``; their
                names must differ from the robot's bodies.
            gripper: the attached tool (a key of ``cell.grippers``).
            cup_profile: its fitted cup (``None``: the gripper's default).
            held: the held object, fixed to the tool centre point, or ``None``.
            allow_contact: leave the tool's contact shapes out (a press or retreat along the
                tool axis).

        Returns:
            ``(index, body, obstacle)`` of the first colliding sample, or ``None``.

        Raises:
            ValueError: bad ``qs``, an unknown gripper or cup, or an obstacle named like a
                body of the robot.
        """
        path = np.asarray(qs, dtype=float)
        if path.ndim != 2 or path.shape[1] != 6 or path.shape[0] == 0 or not np.all(np.isfinite(path)):
            raise ValueError(f"qs: expected finite joint values of shape (N, 6), N >= 1, got {path.shape}")
        if not obstacles:
            return None
        cup = self._cell.gripper(gripper).cup(cup_profile)
        query = self._hit_query(
            gripper, cup.name if cup is not None else None, held, bool(allow_contact), tuple(obstacles)
        )
        if query is None:
            return None
        geometry, names, margins, reach = query
        model = self._robot_model
        # Per-thread query data (pinocchio's Data and GeometryData), kept with the geometry.
        kept: dict[int, tuple[Any, Any, Any]] | None = getattr(self._local, "hit_data", None)
        if kept is None:
            kept = self._local.hit_data = {}
        entry = kept.get(id(geometry))
        if entry is None or entry[0] is not geometry:
            geometry_data = pin.GeometryData(geometry)
            for k, margin in enumerate(margins):
                if margin > 0:
                    geometry_data.collisionRequests[k].security_margin = margin
            if len(kept) >= _HIT_QUERIES:
                kept.clear()
            entry = kept[id(geometry)] = (geometry, model.createData(), geometry_data)
        _, data, geometry_data = entry
        worst_margin = max(margins)
        # Path length [rad, summed over joints] from the first sample to each sample.
        length = np.concatenate(([0.0], np.cumsum(np.sum(np.abs(np.diff(path, axis=0)), axis=1))))
        count = path.shape[0]
        i = 0
        while i < count:
            closest = pin.computeDistances(model, data, geometry, geometry_data, path[i])
            clearance = geometry_data.distanceResults[closest].min_distance - worst_margin
            if clearance <= _CLEARANCE_FLOOR:
                if pin.computeCollisions(model, data, geometry, geometry_data, path[i], True):
                    for k, result in enumerate(geometry_data.collisionResults):
                        if result.isCollision():
                            pair = geometry.collisionPairs[k]
                            return i, names[pair.first], names[pair.second]
                i += 1
                continue
            # Samples (and the motion to them) closer than clearance / reach are free.
            i = max(i + 1, int(np.searchsorted(length, length[i] + clearance / reach, side="left")))
        return None

    def _hit_query(
        self,
        gripper: str,
        cup_profile: str | None,
        held: AttachedObject | None,
        allow_contact: bool,
        obstacles: tuple[Obstacle, ...],
    ) -> tuple[pin.GeometryModel, tuple[str, ...], tuple[float, ...], float] | None:
        """The geometry of a :meth:`first_hit_of` query (robot bodies, the obstacles, their
        pairs), the pairs' padding and the reach; ``None`` when no pair is checked. Cached."""
        key = (gripper, cup_profile, held, allow_contact, obstacles)
        with self._lock:
            cached = self._hit_queries.get(key)
            if cached is not None:
                self._hit_queries.move_to_end(key)
                return cached
        geometry, names = self._base_geometry(gripper, cup_profile)
        n_tool = len(names)
        reach = self.reach(gripper, cup_profile, held)
        if held is not None:
            flange = self._robot_model.getFrameId(TOOL_FRAME)
            T_flange_object = self._cell.gripper(gripper).T_flange_tcp(cup_profile) @ np.array(
                held.T_tip_object
            )
            geometry.addGeometryObject(
                pin.GeometryObject(
                    held.name,
                    self._tool_joint,
                    flange,
                    self._T_joint_flange * pin.SE3(T_flange_object),
                    coal_shape(held.shape),
                )
            )
            names.append(held.name)
        n_robot = len(names)
        contact_bodies = (
            {f"{gripper}/{name}" for name in self._cell.gripper(gripper).contact} if allow_contact else set()
        )
        universe = self._robot_model.getFrameId("base_link")
        padding = self._cell.collision.padding
        margins: list[float] = []
        for obstacle in obstacles:
            if obstacle.name in names[:n_robot]:
                raise ValueError(f"obstacle {obstacle.name!r} is named like a body of the robot")
            index = geometry.addGeometryObject(
                pin.GeometryObject(
                    obstacle.name,
                    0,
                    universe,
                    pin.SE3(obstacle.T_base_link_obstacle()),
                    coal_shape(obstacle.shape),
                )
            )
            names.append(obstacle.name)
            for i in range(n_robot):
                if names[i] in obstacle.touch_links or (i < n_tool and names[i] in contact_bodies):
                    continue
                geometry.addCollisionPair(pin.CollisionPair(i, index))
                margins.append(padding if names[i] in ROBOT_LINKS else 0.0)
        query = (geometry, tuple(names), tuple(margins), reach) if margins else None
        with self._lock:
            self._hit_queries[key] = query
            while len(self._hit_queries) > _HIT_QUERIES:
                self._hit_queries.popitem(last=False)
        return query

    def reach(
        self, gripper: str | None = None, cup_profile: str | None = None, held: AttachedObject | None = None
    ) -> float:
        """An upper bound [m] on how far any point of the robot (arm links, the tool, the held
        object) moves per radian of joint motion, summed over the joints.

        A revolute joint ``j`` turning by ``Δq_j`` moves a point ``p`` beyond it by at most
        ``|Δq_j| * |p - o_j|`` (``o_j`` on its axis), and ``|p - o_j|`` is at most the sum of
        the joint offsets from joint 1 to the point's joint (the URDF's joint placements) plus
        the point's distance from that joint (each body's bounding box corners; a tool shape's
        or the held object's bounding sphere). The largest such sum over the bodies bounds
        every ``|p - o_j|``, so a motion of ``Δq`` moves no point farther than
        ``reach * sum(|Δq|)`` (the conservative-advancement bound of :meth:`first_hit_of`).

        Args:
            gripper: the tool (``None``: the model's current tool, cup and held object).
            cup_profile: its cup (``None``: the default).
            held: the held object, or ``None``.
        """
        if gripper is None:
            scene = self._scene
            gripper, cup_profile, held = scene.gripper, scene.cup_profile, scene.attached
        bound = self._arm_reach
        wrist = self._chain_length[self._tool_joint]
        for _name, shape in self._tool_objects(gripper, cup_profile):
            placement = self._T_joint_flange.homogeneous @ shape.pose.matrix()
            bound = max(
                bound, wrist + float(np.linalg.norm(placement[:3, 3])) + _bounding_radius(shape.shape)
            )
        if held is not None:
            T_flange_object = self._cell.gripper(gripper).T_flange_tcp(cup_profile) @ np.array(
                held.T_tip_object
            )
            placement = self._T_joint_flange.homogeneous @ T_flange_object
            bound = max(bound, wrist + float(np.linalg.norm(placement[:3, 3])) + _bounding_radius(held.shape))
        return bound

    def body_placements(self, q: ArrayLike) -> dict[str, NDArray[np.float64]]:
        """(4, 4) pose in ``base_link`` of every body at ``q`` (for viewers and tests)."""
        state = self._thread_state()
        scene = state.scene
        pin.updateGeometryPlacements(scene.model, state.data, scene.geometry, state.geometry_data, _as_q(q))
        return {
            name: np.asarray(state.geometry_data.oMg[i].homogeneous) for i, name in enumerate(scene.names)
        }

    def frame_pose(self, q: ArrayLike, frame: str) -> NDArray[np.float64]:
        """(4, 4) pose of a URDF frame (``flange``, ``tool0``, ``base``, …) in ``base_link``.

        Raises:
            ValueError: unknown frame.
        """
        state = self._thread_state()
        model = state.scene.model
        if not model.existFrame(frame):
            raise ValueError(f"unknown frame {frame!r}")
        fid = model.getFrameId(frame)
        pin.framesForwardKinematics(model, state.data, _as_q(q))
        return np.asarray(state.data.oMf[fid].homogeneous)

    # -- internals -------------------------------------------------------------------------

    def _thread_state(self) -> _ThreadState:
        scene = self._scene
        if getattr(self._local, "contact", False) and self._cell.gripper(scene.gripper).contact:
            scene = self._contact_scene(scene)
        state: _ThreadState | None = getattr(self._local, "state", None)
        if state is None or state.scene is not scene:
            data = scene.model.createData()
            geometry_data = pin.GeometryData(scene.geometry)
            for k, margin in enumerate(scene.pair_margins):
                if margin > 0:
                    geometry_data.collisionRequests[k].security_margin = margin
            state = _ThreadState(scene=scene, data=data, geometry_data=geometry_data)
            self._local.state = state
        return state

    def _contact_scene(self, scene: _Scene) -> _Scene:
        """``scene`` without the pairs (tool contact shape, obstacle); built once per scene."""
        with self._lock:
            cached = self._contact_cache
            if cached is not None and cached[0] is scene:
                return cached[1]
            variant = self._build_scene(scene.gripper, scene.cup_profile, scene.attached, allow_contact=True)
            self._contact_cache = (scene, variant)
            return variant

    def _tool_objects(self, gripper: str, cup_profile: str | None) -> list[tuple[str, ToolShape]]:
        shapes = self._cell.gripper(gripper).collision_shapes(cup_profile)
        return [(f"{gripper}/{s.name}", s) for s in shapes]

    def _base_geometry(self, gripper: str, cup_profile: str | None) -> tuple[pin.GeometryModel, list[str]]:
        """Arm links plus tool primitives, no pairs."""
        geometry = pin.GeometryModel()
        names: list[str] = []
        for obj in self._robot_geometry.geometryObjects:
            link = self._robot_model.frames[obj.parentFrame].name
            copy = pin.GeometryObject(link, obj.parentJoint, obj.parentFrame, obj.placement, obj.geometry)
            geometry.addGeometryObject(copy)
            names.append(link)
        flange = self._robot_model.getFrameId(TOOL_FRAME)
        for name, tool_shape in self._tool_objects(gripper, cup_profile):
            placement = self._T_joint_flange * pin.SE3(tool_shape.pose.matrix())
            geometry.addGeometryObject(
                pin.GeometryObject(name, self._tool_joint, flange, placement, coal_shape(tool_shape.shape))
            )
            names.append(name)
        return geometry, names

    def _candidate_self_pairs(self, names: Sequence[str]) -> list[tuple[int, int]]:
        adjacent = {frozenset(p) for p in ADJACENT_LINKS}
        pairs = []
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                a, b = names[i], names[j]
                a_link = a if a in ROBOT_LINKS else TOOL_LINK
                b_link = b if b in ROBOT_LINKS else TOOL_LINK
                if a_link == b_link or frozenset((a_link, b_link)) in adjacent:
                    continue
                pairs.append((i, j))
        return pairs

    def _acm(self, gripper: str, cup_profile: str | None) -> PairSet:
        """Disabled self pairs of a tool, from the store or computed (:meth:`_sample_acm`)."""
        document = acm_key_document(self._cell, gripper, cup_profile)
        return self._acm_store.get(document, lambda: self._sample_acm(gripper, cup_profile))

    def _sample_acm(self, gripper: str, cup_profile: str | None) -> PairSet:
        """Disabled self pairs: adjacent, and always/never colliding in seeded sampling."""
        geometry, names = self._base_geometry(gripper, cup_profile)
        candidates = self._candidate_self_pairs(names)
        for i, j in candidates:
            geometry.addCollisionPair(pin.CollisionPair(i, j))
        data = self._robot_model.createData()
        geometry_data = pin.GeometryData(geometry)
        settings = self._cell.collision
        rng = np.random.default_rng(settings.seed)
        samples = rng.uniform(-np.pi, np.pi, size=(settings.self_collision_samples, 6))
        hits = np.zeros(len(candidates), dtype=np.int64)
        results = geometry_data.collisionResults
        for q in samples:
            if pin.computeCollisions(self._robot_model, data, geometry, geometry_data, q, False):
                hits += np.fromiter((r.isCollision() for r in results), dtype=bool, count=len(candidates))
        enabled = {
            _pair_key(names[i], names[j])
            for (i, j), h in zip(candidates, hits, strict=True)
            if 0 < h < len(samples)
        }
        every = {_pair_key(names[i], names[j]) for i in range(len(names)) for j in range(i + 1, len(names))}
        return frozenset(every - enabled)

    def _build_scene(
        self,
        gripper: str,
        cup_profile: str | None,
        attached: AttachedObject | None,
        *,
        allow_contact: bool = False,
    ) -> _Scene:
        disabled = self._acm(gripper, cup_profile)
        contact_bodies = (
            {f"{gripper}/{name}" for name in self._cell.gripper(gripper).contact} if allow_contact else set()
        )
        geometry, names = self._base_geometry(gripper, cup_profile)
        margins: list[float] = []
        n_robot = len(names)
        for i in range(n_robot):
            for j in range(i + 1, n_robot):
                if _pair_key(names[i], names[j]) not in disabled:
                    geometry.addCollisionPair(pin.CollisionPair(i, j))
                    margins.append(0.0)
        universe = self._robot_model.getFrameId("base_link")
        padding = self._cell.collision.padding
        obstacle_index: dict[str, int] = {}
        for obstacle in self._cell.obstacles:
            index = geometry.addGeometryObject(
                pin.GeometryObject(
                    obstacle.name,
                    0,
                    universe,
                    pin.SE3(obstacle.T_base_link_obstacle()),
                    coal_shape(obstacle.shape),
                )
            )
            names.append(obstacle.name)
            obstacle_index[obstacle.name] = index
            for i in range(n_robot):
                if names[i] in obstacle.touch_links or names[i] in contact_bodies:
                    continue
                geometry.addCollisionPair(pin.CollisionPair(i, index))
                margins.append(padding if names[i] in ROBOT_LINKS else 0.0)
        if attached is not None:
            flange = self._robot_model.getFrameId(TOOL_FRAME)
            T_flange_object = self._cell.gripper(gripper).T_flange_tcp(cup_profile) @ np.array(
                attached.T_tip_object
            )
            index = geometry.addGeometryObject(
                pin.GeometryObject(
                    attached.name,
                    self._tool_joint,
                    flange,
                    self._T_joint_flange * pin.SE3(T_flange_object),
                    coal_shape(attached.shape),
                )
            )
            names.append(attached.name)
            for i in range(n_robot):
                if names[i] == TOOL_LINK or names[i] not in ROBOT_LINKS:
                    continue
                geometry.addCollisionPair(pin.CollisionPair(i, index))
                margins.append(0.0)
            for obstacle_name, k in obstacle_index.items():
                if obstacle_name not in attached.touch_obstacles:
                    geometry.addCollisionPair(pin.CollisionPair(k, index))
                    margins.append(0.0)
        return _Scene(
            model=self._robot_model,
            geometry=geometry,
            names=tuple(names),
            pair_margins=tuple(margins),
            revision=self._cell.model_revision(gripper, cup_profile),
            gripper=gripper,
            cup_profile=cup_profile,
            attached=attached,
            disabled_pairs=disabled,
            contact_variant=allow_contact,
        )


#: [m] below this clearance :meth:`CollisionModel.first_hit_of` checks each sample for contact.
_CLEARANCE_FLOOR = 1e-4
#: How many query geometries :meth:`CollisionModel.first_hit_of` keeps (tool, held object,
#: obstacles): a solution's segments alternate between a few.
_HIT_QUERIES = 8


def _arm_reach(model: pin.Model, geometry: pin.GeometryModel) -> tuple[list[float], float]:
    """Per joint, the summed length of the joint offsets from the root to it [m]; and the
    largest of that plus a body's distance from its joint over the arm's bodies [m] (the
    corners of each collision geometry's local bounding box): :meth:`CollisionModel.reach`."""
    chain = [0.0] * model.njoints
    for j in range(1, model.njoints):
        chain[j] = chain[model.parents[j]] + float(np.linalg.norm(model.jointPlacements[j].translation))
    bound = 0.0
    for obj in geometry.geometryObjects:
        shape = obj.geometry
        shape.computeLocalAABB()
        low, high = np.array(shape.aabb_local.min_), np.array(shape.aabb_local.max_)
        corners = np.array(
            [[x, y, z] for x in (low[0], high[0]) for y in (low[1], high[1]) for z in (low[2], high[2])]
        )
        T = obj.placement.homogeneous
        farthest = float(np.max(np.linalg.norm(corners @ T[:3, :3].T + T[:3, 3], axis=1)))
        bound = max(bound, chain[obj.parentJoint] + farthest)
    return chain, bound


def _bounding_radius(shape: Shape) -> float:
    """[m] radius of the smallest sphere about the shape's centre that contains it."""
    if shape.kind == "box":
        return 0.5 * float(np.linalg.norm(shape.size))
    if shape.kind == "cylinder":
        height, radius = shape.size
        return float(math.hypot(0.5 * height, radius))
    return float(shape.size[0])


def _pair_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _as_q(q: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(q, dtype=float)
    if arr.shape != (6,) or not np.all(np.isfinite(arr)):
        raise ValueError(f"q: expected 6 finite joint values [rad], got {np.asarray(q).tolist()}")
    return arr

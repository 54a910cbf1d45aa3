"""EROBS's beamline configuration (``cms_beamline.yaml``, ``lix_beamline.yaml``) as the cell.

A beamline that runs EROBS already describes itself: one YAML file (robot, velocity and
acceleration scaling, grippers with tip frames, z offsets, states and dock numbers, vision
targets, tool-exchange geometry, collision objects keyed by ArUco tag) that names a scene
file (static obstacles) and a pose registry, beside the robot and tool descriptions of its
MoveIt configuration package (an SRDF xacro with named states and disabled collision pairs).
This module reads them and produces the ONE internal cell model: a document in erobs_bt's
cell format, validated by :func:`erobs_bt.world.cell.parse_cell` (so every rule of the cell
lives in one reader), plus the pose registry and the grid vision targets beside it.

Paths are resolved as EROBS resolves them (``config_loader.resolve_beamline_path``): an
absolute path is used as is; a relative one is joined to the workspace root, the nearest
directory above the beamline file that has a ``src/`` folder (or the ``workspace`` given,
``--workspace``), else to the beamline file's directory. ``BEAMBOT_BEAMLINE_CONFIG`` names
the beamline file when no cell is given (:func:`cell_from_environment`).

What comes from where (beamline keys → the cell)::

    grippers.<g>.states {grasp, release}  → grippers.<g>.actions and roles (plus the gripper
                                            group's group_states of the SRDF)
    grippers.<g>.tip_frame, z_offset      → grippers.<g>.tip_frame, z_offset
    grippers.<g>.cup_profile              → grippers.<g>.default_cup_profile
    grippers.<g>.dock_number              → docks[number].gripper: stored there at start
                                            (docks 1 .. the highest number named)
    tool_exchange {dock_spacing_m, reference_dock, load_sequence, dock_sequence}
                                          → tool_exchange (the dock and load motions), placed
                                            in the simulated world from the registry's
                                            load_approach pose (approach_deg)
    robot.velocity_scaling, acceleration_scaling, tool_exchange, collision_objects,
    cameras, vision_targets (all modes)   → kept in CellConfig.extra["beamline"]
    vision_targets (mode grid)            → vision_targets.yaml beside the compiled cell
    scene_file obstacles                  → obstacles (box [x, y, z]; cylinder height/radius
                                            or size [height, radius]; sphere radius or
                                            size [radius]); frames map/world/base_link →
                                            base_link, base → base
    poses_file                            → poses.yaml beside the compiled cell
    SRDF xacro (robot.moveit_config_package/srdf/ur.srdf.xacro, gripper:=<g>, expanded with
    xacrodoc, no ROS): group_states of robot.arm_group → named_states_deg; disabled
    collision pairs                       → CellConfig.extra["beamline"]["disabled_collisions"]

What a beamline file does not say and the simulator needs (each tool's primitives and tip
pose in ``flange``, the initial joint state, the simulated markers and parts)
is taken from the packaged cell (``config/cell.yaml``) by gripper name; a
beamline gripper the packaged cell does not know gets a bare tip at the flange (no tool
geometry) and a warning. MoveIt's default padding is none, so the compiled cell's collision
padding is 0 unless the packaged cell's is asked for.

Every file that cannot be read (the beamline file, its scene file or SRDF) is a
:class:`~erobs_bt.world.cell.CellConfigError` naming it, raised before anything moves. A
``poses_file`` that does not exist is, as in EROBS (``orchestrator._load_poses_registry``),
an empty registry and a warning (:func:`beamline_warnings`; ``validate``/``run`` print it,
the node logs it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
import threading
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from erobs_bt.script._values import safe_load_yaml
from erobs_bt.script.vocabulary import dock_conflict, dock_contents_text
from erobs_bt.world.cell import DEFAULT_CELL_PATH, CellConfig, CellConfigError, parse_cell

_LOG = logging.getLogger(__name__)
_XACRO_LOCK = threading.Lock()

#: The environment variable EROBS reads the beamline file from.
BEAMLINE_ENV_VAR = "BEAMBOT_BEAMLINE_CONFIG"

#: Scene frames that are the robot's root frame (EROBS's SRDF: virtual joint map → base_link).
_ROOT_FRAMES = {"map": "base_link", "world": "base_link", "base_link": "base_link", "base": "base"}


def is_beamline_document(document: Any) -> bool:
    """True when a decoded YAML document is an EROBS beamline file (has ``beamline`` and
    ``grippers`` and none of erobs_bt's required cell keys)."""
    return (
        isinstance(document, dict)
        and "beamline" in document
        and "grippers" in document
        and "model_revision_prefix" not in document
    )


def is_beamline_file(path: str | Path) -> bool:
    """True when ``path`` is a readable YAML file in EROBS's beamline format."""
    try:
        return is_beamline_document(safe_load_yaml(Path(path).read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, ValueError):
        return False


def workspace_root(config_path: str | Path) -> Path:
    """The workspace root of a beamline file: the nearest directory above it with ``src/``,
    else the file's own directory (EROBS's rule)."""
    config_dir = Path(os.path.realpath(config_path)).parent
    for candidate in (config_dir, *config_dir.parents):
        if (candidate / "src").is_dir():
            return candidate
    return config_dir


def resolve_path(value: str, config_path: str | Path, workspace: str | Path | None = None) -> Path:
    """A path declared in a beamline file: absolute as is, else under the workspace root
    (``workspace`` when given, else :func:`workspace_root`)."""
    expanded = Path(os.path.expanduser(value))
    if expanded.is_absolute():
        return expanded
    root = Path(workspace) if workspace is not None else workspace_root(config_path)
    return root / expanded


def _read_yaml(path: Path, *, what: str, source: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CellConfigError(source, what, f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return safe_load_yaml(text)
    except yaml.YAMLError as exc:
        raise CellConfigError(str(path), "", f"invalid YAML: {exc}") from exc


def _number(value: Any, source: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CellConfigError(source, key, f"expected a finite number, got {value!r}")
    return float(value)


def _scene_obstacles(path: Path, source: str) -> list[dict[str, Any]]:
    """The obstacles of an EROBS scene file, in erobs_bt's obstacle format."""
    document = _read_yaml(path, what="scene_file", source=source)
    name = str(path)
    if not isinstance(document, dict) or not isinstance(document.get("obstacles", []), list):
        raise CellConfigError(name, "obstacles", "expected a list of obstacles")
    out: list[dict[str, Any]] = []
    for i, raw in enumerate(document.get("obstacles") or []):
        key = f"obstacles[{i}]"
        if not isinstance(raw, dict):
            raise CellConfigError(name, key, f"expected a mapping, got {type(raw).__name__}")
        kind = raw.get("type", raw.get("shape"))
        frame = raw.get("frame", "base_link")
        if frame not in _ROOT_FRAMES:
            raise CellConfigError(
                name, f"{key}.frame", f"unknown frame {frame!r} (known: {', '.join(sorted(_ROOT_FRAMES))})"
            )
        if kind == "box":
            size = raw.get("size")
        elif kind == "cylinder":
            size = raw.get("size", [raw.get("height"), raw.get("radius")])
        elif kind == "sphere":
            size = raw.get("size", [raw.get("radius")])
        else:
            raise CellConfigError(name, f"{key}.type", f"expected box, cylinder or sphere, got {kind!r}")
        pose = raw.get("pose") or {}
        if not isinstance(pose, dict):
            raise CellConfigError(name, f"{key}.pose", "expected {x, y, z, roll, pitch, yaw}")
        xyz = [_number(pose.get(k, 0.0), name, f"{key}.pose.{k}") for k in ("x", "y", "z")]
        rpy = [_number(pose.get(k, 0.0), name, f"{key}.pose.{k}") for k in ("roll", "pitch", "yaw")]
        out.append(
            {
                "name": raw.get("name", f"obstacle_{i}"),
                "shape": kind,
                "size": size,
                "frame": _ROOT_FRAMES[frame],
                "pose": {"xyz": xyz, "rpy": rpy},
            }
        )
    return out


def _find_package(workspace: Path, package: str) -> Path | None:
    """The directory of ROS package ``package`` under ``workspace/src`` (its package.xml)."""
    src = workspace / "src"
    if not src.is_dir():
        return None
    for manifest in sorted(src.rglob("package.xml")):
        try:
            name = ET.parse(manifest).getroot().findtext("name")
        except ET.ParseError:
            continue
        if name is not None and name.strip() == package:
            return manifest.parent
    return None


def expand_srdf(xacro_file: Path, gripper: str, workspace: Path, *, source: str) -> ET.Element:
    """Expand an SRDF xacro with ``gripper:=<gripper>`` (xacrodoc; ``$(find pkg)`` resolved
    under ``workspace/src``).

    Raises:
        CellConfigError: the file cannot be read or expanded (naming it).
    """
    try:
        from xacrodoc import XacroDoc, packages
    except ImportError as exc:  # pragma: no cover - a pinned dependency
        raise CellConfigError(
            source, "robot.moveit_config_package", f"xacrodoc is not installed: {exc}"
        ) from exc
    if not xacro_file.is_file():
        raise CellConfigError(
            source, "robot.moveit_config_package", f"cannot read {xacro_file}: no such file"
        )
    # xacrodoc's package finder is process-global: one expansion at a time, each looking in
    # this workspace only (not in one that an earlier load looked in).
    with _XACRO_LOCK:
        packages.reset()
        packages.look_in([str(workspace / "src")])
        try:
            doc = XacroDoc.from_file(str(xacro_file), subargs={"gripper": gripper}, walk_up=False)
            return ET.fromstring(doc.to_urdf_string())
        except Exception as exc:  # xacro raises many kinds; the file must be named either way
            raise CellConfigError(str(xacro_file), "", f"cannot expand (gripper:={gripper}): {exc}") from exc
        finally:
            packages.reset()


def missing_poses_warning(source: str, poses: Path) -> str:
    """The warning for a ``poses_file`` that does not exist (the registry is then empty)."""
    return (
        f"{source}: poses_file: {poses} does not exist; the pose registry is empty, as in EROBS "
        "(pose names resolve from a script's poses and the named states only)"
    )


def beamline_warnings(cell: str | Path | None) -> tuple[str, ...]:
    """What compiling a beamline file warned of (``beamline.warnings`` of the compiled
    ``cell.yaml``: a missing ``poses_file``), for the front ends to show; ``()`` for the
    packaged cell, a cell in erobs_bt's own format, or a file that cannot be read (its
    reader reports that)."""
    if cell is None:
        return ()
    try:
        document = safe_load_yaml(Path(cell).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError):
        return ()
    info = document.get("beamline") if isinstance(document, dict) else None
    found = info.get("warnings") if isinstance(info, dict) else None
    return tuple(str(w) for w in found) if isinstance(found, list) else ()


def compile_beamline(
    path: str | Path,
    *,
    workspace: str | Path | None = None,
    base_cell: str | Path = DEFAULT_CELL_PATH,
) -> tuple[dict[str, Any], Path | None, dict[str, Any]]:
    """Read a beamline file into erobs_bt's cell format.

    Args:
        path: the beamline YAML.
        workspace: the workspace root relative paths are under (default: EROBS's rule,
            :func:`workspace_root`).
        base_cell: the erobs_bt cell that supplies what a beamline file does not say.

    Returns:
        ``(cell document, pose registry file or None, grid vision targets)``; the document is
        not yet validated (:func:`load_beamline` validates it).

    Raises:
        CellConfigError: a file cannot be read, or a value is invalid (naming file and key).
    """
    source = str(path)
    beamline = _read_yaml(Path(path), what="", source=source)
    if not is_beamline_document(beamline):
        raise CellConfigError(source, "", "not an EROBS beamline file (needs `beamline` and `grippers`)")
    base = _read_yaml(Path(base_cell), what="", source=str(base_cell))
    root = Path(workspace) if workspace is not None else workspace_root(path)
    robot = beamline.get("robot") or {}
    grippers_in = beamline["grippers"]
    if not isinstance(grippers_in, dict) or not isinstance(robot, dict):
        raise CellConfigError(source, "grippers", "expected a mapping of grippers")

    # The SRDF: named states of the arm group, gripper group states, disabled pairs.
    named_states = dict(base.get("named_states_deg") or {})
    gripper_states: dict[str, list[str]] = {}
    disabled: set[tuple[str, str]] = set()
    srdf_files: list[str] = []
    package = robot.get("moveit_config_package")
    if package:
        package_dir = _find_package(root, str(package))
        if package_dir is None:
            raise CellConfigError(
                source, "robot.moveit_config_package", f"package {package!r} not found under {root / 'src'}"
            )
        xacro_file = package_dir / "srdf" / "ur.srdf.xacro"
        srdf_files.append(str(xacro_file))
        arm_group = str(robot.get("arm_group", "ur_arm"))
        for name in grippers_in:
            srdf = expand_srdf(xacro_file, str(name), root, source=source)
            group = str((grippers_in[name] or {}).get("gripper_group") or "")
            for state in srdf.iter("group_state"):
                joints = {j.get("name"): float(j.get("value", "nan")) for j in state.iter("joint")}
                if state.get("group") == arm_group:
                    order = robot.get("arm_joints") or list(joints)
                    if all(j in joints for j in order) and len(order) == 6:
                        named_states[str(state.get("name"))] = [
                            round(math.degrees(joints[j]), 6) for j in order
                        ]
                elif group and state.get("group") == group:
                    gripper_states.setdefault(str(name), []).append(str(state.get("name")))
            for pair in srdf.iter("disable_collisions"):
                a, b = str(pair.get("link1")), str(pair.get("link2"))
                disabled.add((a, b) if a <= b else (b, a))

    # Grippers: the beamline's names, states, tip frames and offsets; geometry from the base.
    base_grippers = base.get("grippers") or {}
    grippers: dict[str, Any] = {}
    docks_by_number: dict[int, str | None] = {}
    for name, raw in grippers_in.items():
        key = f"grippers.{name}"
        if not isinstance(raw, dict):
            raise CellConfigError(source, key, f"expected a mapping, got {type(raw).__name__}")
        states = raw.get("states") or {}
        if not isinstance(states, dict):
            raise CellConfigError(source, f"{key}.states", "expected a mapping {grasp, release}")
        actions: list[str] = []
        for state in [*states.values(), *gripper_states.get(name, [])]:
            if state not in actions:
                actions.append(str(state))
        entry: dict[str, Any] = {}
        known = base_grippers.get(name)
        if known is not None:
            for k in ("tip", "collision", "cup_profiles", "contact"):
                if k in known:
                    entry[k] = known[k]
        else:
            _LOG.warning("%s: %s: no tool geometry known; a bare tip at the flange", source, key)
            entry["tip"] = {"xyz": [0.0, 0.0, 0.0], "rpy_deg": [0, 90, 0]}
        entry["tip_frame"] = str(raw.get("tip_frame") or (known or {}).get("tip_frame") or "flange")
        entry["z_offset"] = _number(raw.get("z_offset", 0.0), source, f"{key}.z_offset")
        if actions:
            entry["actions"] = actions
        if states:
            entry["roles"] = {str(k): str(v) for k, v in states.items()}
        if "cup_profile" in raw and "cup_profiles" in entry:
            entry["default_cup_profile"] = str(raw["cup_profile"])
        elif "cup_profiles" in entry:
            entry["default_cup_profile"] = known.get("default_cup_profile") if known else None
        grippers[str(name)] = entry
        if raw.get("dock_number") is not None:
            number = raw["dock_number"]
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise CellConfigError(
                    source, f"{key}.dock_number", f"expected an integer >= 1, got {number!r}"
                )
            if number in docks_by_number:
                raise CellConfigError(
                    source, f"{key}.dock_number", f"dock {number} is also {docks_by_number[number]!r}'s"
                )
            docks_by_number[number] = str(name)
    if "none" not in grippers:  # erobs_bt's bare flange (LiX declares no `none`)
        grippers["none"] = dict(base_grippers["none"])

    # Obstacles: the scene file's.
    obstacles: list[dict[str, Any]] = []
    scene_file = beamline.get("scene_file")
    if scene_file:
        obstacles = _scene_obstacles(resolve_path(str(scene_file), path, root), source)
    poses_file = beamline.get("poses_file")
    poses = resolve_path(str(poses_file), path, root) if poses_file else None
    warnings: list[str] = []
    if poses is not None and not poses.is_file():
        # EROBS reads a missing registry as an empty one (orchestrator._load_poses_registry).
        # Said by the front ends (beamline_warnings), not logged here: a CLI has no handler.
        warnings.append(missing_poses_warning(source, poses))
        poses = None

    # The tool changer: EROBS's tool_exchange block (its keys; EROBS ignores others), placed in
    # the simulated world from the registry's load approach pose. Docks: 1 .. the highest
    # number the file names; each gripper's dock_number is where it is stored at start.
    changer_in = beamline.get("tool_exchange")
    changer = None
    if changer_in is not None:
        if not isinstance(changer_in, dict):
            raise CellConfigError(source, "tool_exchange", "expected a mapping")
        changer = {k: changer_in[k] for k in TOOL_EXCHANGE_KEYS if k in changer_in}
        approach = (
            _registry_pose(poses, LOAD_APPROACH_POSE, source)
            if poses is not None and poses.is_file()
            else None
        )
        if approach is not None:
            changer["approach_deg"] = approach
    numbers = set(docks_by_number)
    if changer is not None and isinstance(changer.get("reference_dock"), int):
        numbers.add(int(changer["reference_dock"]))
    docks = [{"number": n, "gripper": docks_by_number.get(n)} for n in range(1, max(numbers, default=0) + 1)]
    targets_in = beamline.get("vision_targets") or {}
    if not isinstance(targets_in, dict):
        raise CellConfigError(source, "vision_targets", "expected a mapping of targets")
    grid_targets = {k: v for k, v in targets_in.items() if isinstance(v, dict) and v.get("mode") == "grid"}

    collision_objects = beamline.get("collision_objects") or {}
    check_collision_objects(collision_objects, source)
    info = {
        "beamline": str(beamline["beamline"]),
        "file": str(Path(path).resolve()),
        "workspace": str(root),
        "poses_file": str(poses) if poses is not None else None,
        "scene_file": str(resolve_path(str(scene_file), path, root)) if scene_file else None,
        "srdf": srdf_files,
        "velocity_scaling": robot.get("velocity_scaling"),
        "acceleration_scaling": robot.get("acceleration_scaling"),
        "ik_frame": robot.get("ik_frame"),
        "arm_joints": robot.get("arm_joints"),
        "cameras": beamline.get("cameras") or {},
        "vision_targets": targets_in,
        "tool_exchange": beamline.get("tool_exchange") or {},
        "collision_objects": collision_objects,
        "disabled_collisions": sorted([list(p) for p in disabled]),
        "warnings": warnings,
    }
    for key in ("velocity_scaling", "acceleration_scaling"):
        if info[key] is not None:
            value = _number(info[key], source, f"robot.{key}")
            if not 0.0 < value <= 1.0:
                raise CellConfigError(source, f"robot.{key}", f"expected a number in (0, 1], got {value}")
    document: dict[str, Any] = {
        "name": f"{beamline['beamline']}_beamline",
        "model_revision_prefix": base["model_revision_prefix"],
        "initial_joint_state_deg": base["initial_joint_state_deg"],
        "named_states_deg": named_states,
        "collision": {**(base.get("collision") or {}), "padding": 0.0},
        "grippers": grippers,
        "obstacles": obstacles,
        "docks": docks,
        "markers": base.get("markers") or [],
    }
    if changer is not None:
        document["tool_exchange"] = changer
    for key in ("parts", "camera", "vision", "faults"):
        if key in base:
            document[key] = base[key]
    document["beamline"] = info
    return document, poses, grid_targets


#: Dimensions of a tag's collision object, by shape (shape_msgs/SolidPrimitive order).
_TAG_DIMENSIONS = {"box": 3, "cylinder": 2, "sphere": 1}


def check_collision_objects(objects: Any, source: str) -> None:
    """``collision_objects``: ArUco tag id → ``{name, shape, dimensions, tag_offset}``
    (:func:`erobs_bt.world.scene.tag_objects` reads them).

    Raises:
        CellConfigError: naming ``source`` and the key.
    """
    if not isinstance(objects, dict):
        raise CellConfigError(source, "collision_objects", "expected a mapping of tag id to object")
    for tag, raw in objects.items():
        key = f"collision_objects.{tag}"
        if isinstance(tag, bool) or not isinstance(tag, int) or tag < 0:
            raise CellConfigError(source, key, f"expected an ArUco tag id (integer >= 0), got {tag!r}")
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise CellConfigError(source, key, "expected {name, shape, dimensions, tag_offset}")
        shape = raw.get("shape")
        if shape not in _TAG_DIMENSIONS:
            raise CellConfigError(source, f"{key}.shape", f"expected box, cylinder or sphere, got {shape!r}")
        dims = raw.get("dimensions")
        if not isinstance(dims, list) or len(dims) != _TAG_DIMENSIONS[shape]:
            raise CellConfigError(
                source,
                f"{key}.dimensions",
                f"expected {_TAG_DIMENSIONS[shape]} numbers for a {shape}, got {dims!r}",
            )
        for j, value in enumerate(dims):
            if _number(value, source, f"{key}.dimensions[{j}]") <= 0:
                raise CellConfigError(source, f"{key}.dimensions[{j}]", f"expected > 0, got {value!r}")
        offset = raw.get("tag_offset", [0.0, 0.0, 0.0])
        if not isinstance(offset, list) or len(offset) != 3:
            raise CellConfigError(
                source, f"{key}.tag_offset", f"expected [x, y, z] in metres, got {offset!r}"
            )
        for j, value in enumerate(offset):
            _number(value, source, f"{key}.tag_offset[{j}]")


#: The keys of EROBS's ``tool_exchange`` block (``tool_exchange_stages.py`` requires them all).
TOOL_EXCHANGE_KEYS = ("dock_spacing_m", "reference_dock", "load_sequence", "dock_sequence")

#: The pose of the registry the simulated docks are placed from (EROBS's CMS scripts load
#: their tools from it; :class:`erobs_bt.world.cell.ToolChanger`'s ``approach``).
LOAD_APPROACH_POSE = "load_approach"


def _registry_pose(path: Path, name: str, source: str) -> list[float] | None:
    """Pose ``name`` [deg] of the registry at ``path``, or ``None`` when it has none."""
    document = _read_yaml(path, what="poses_file", source=source)
    value = document.get(name) if isinstance(document, dict) else None
    if (
        isinstance(value, list)
        and len(value) == 6
        and all(isinstance(a, int | float) and not isinstance(a, bool) for a in value)
    ):
        return [float(a) for a in value]
    return None


def load_beamline(
    path: str | Path, *, workspace: str | Path | None = None, base_cell: str | Path = DEFAULT_CELL_PATH
) -> CellConfig:
    """The cell of a beamline file (validated; errors name the beamline file and key).

    Raises:
        CellConfigError: unreadable file or invalid value.
    """
    document, _, _ = compile_beamline(path, workspace=workspace, base_cell=base_cell)
    return parse_cell(document, source=str(path))


def compiled_cell_path(
    path: str | Path,
    *,
    workspace: str | Path | None = None,
    directory: str | Path | None = None,
    base_cell: str | Path = DEFAULT_CELL_PATH,
) -> Path:
    """A beamline file compiled to erobs_bt's cell files, for every reader of ``--cell``.

    Writes ``cell.yaml`` (validated first, so errors name the beamline file), ``poses.yaml``
    (a copy of the beamline's pose registry, when it has one) and ``vision_targets.yaml``
    (its grid targets) into ``directory`` (default: a folder named after the content's
    SHA-256 under the user's cache directory) and returns the ``cell.yaml``: the parser, the
    simulator and the node then read one cell model, whichever format was given.

    Raises:
        CellConfigError: unreadable file or invalid value.
    """
    document, poses, targets = compile_beamline(path, workspace=workspace, base_cell=base_cell)
    parse_cell(document, source=str(path))  # validate before writing: messages name the beamline
    poses_text = poses.read_text(encoding="utf-8") if poses is not None else None
    cell_text = yaml.safe_dump(document, sort_keys=False)
    targets_text = yaml.safe_dump(targets, sort_keys=False) if targets else None
    return _write_cell_files(
        document["name"],
        {"poses.yaml": poses_text, "vision_targets.yaml": targets_text, "cell.yaml": cell_text},
        directory,
    )


def _write_cell_files(name: str, texts: Mapping[str, str | None], directory: str | Path | None) -> Path:
    """Write a cell directory (``cell.yaml`` last; a ``None`` text removes its file) into
    ``directory`` (default: a folder named after the content's SHA-256 under the user's cache
    directory) and return its ``cell.yaml``."""
    if directory is None:
        from erobs_bt.world.collision import default_cache_dir

        digest = hashlib.sha256(json.dumps(dict(texts), sort_keys=True).encode()).hexdigest()[:16]
        directory = default_cache_dir() / "beamline" / f"{name}-{digest}"
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for file, text in sorted(texts.items(), key=lambda item: item[0] == "cell.yaml"):
        if text is None:
            (out / file).unlink(missing_ok=True)
            continue
        # Atomic: another process compiling the same cell never reads half a file.
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{file}.")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, out / file)
    return out / "cell.yaml"


def with_dock_contents(
    cell_file: str | Path | None, docks: Mapping[int, str | None], *, directory: str | Path | None = None
) -> Path:
    """A cell file like ``cell_file`` (erobs_bt's format; ``None``: the packaged cell) whose
    docks hold ``docks`` at start, without editing it (``--docks``, the node's ``docks``).

    The given docks replace what the file stores: a dock not named is empty. Written as
    :func:`compiled_cell_path` writes a compiled beamline (with the ``poses.yaml`` and
    ``vision_targets.yaml`` beside the source file, so the cell's defaults stay the same),
    so every reader of the cell sees the same docks.

    Raises:
        CellConfigError: an unknown dock or gripper, or a tool named in two docks
            (:func:`~erobs_bt.script.vocabulary.dock_conflict`; naming
            the option and the source file).
    """
    source = Path(cell_file) if cell_file is not None else DEFAULT_CELL_PATH
    document = _read_yaml(source, what="", source=str(source))
    if not isinstance(document, dict):
        raise CellConfigError(str(source), "", "expected a mapping")
    numbers = [
        int(d["number"])
        for d in document.get("docks") or []
        if isinstance(d, dict) and isinstance(d.get("number"), int)
    ]
    for number in docks:
        if number not in numbers:
            raise CellConfigError(
                "docks option",
                str(number),
                f"{source} has no dock {number} (docks: {', '.join(map(str, numbers)) or 'none'})",
            )
    conflict = dock_conflict(docks)  # a tool in two docks
    if conflict is not None:
        raise CellConfigError("docks option", "", conflict)
    document = {**document, "docks": [{"number": n, "gripper": docks.get(n)} for n in numbers]}
    try:
        parse_cell(document, source=f"{source} with docks {dock_contents_text(docks)}")
    except CellConfigError as exc:
        raise CellConfigError("docks option", "", str(exc)) from None
    texts: dict[str, str | None] = {"cell.yaml": yaml.safe_dump(document, sort_keys=False)}
    for name in ("poses.yaml", "vision_targets.yaml"):
        beside = source.parent / name
        texts[name] = beside.read_text(encoding="utf-8") if beside.is_file() else None
    return _write_cell_files(f"{document.get('name', 'cell')}-docks", texts, directory)


def compiled_from(cell: str | Path) -> Mapping[str, Any] | None:
    """What a cell file compiled by :func:`compiled_cell_path` was made from: its ``beamline``
    section (``file``: the beamline file, ``poses_file``: the beamline's pose registry or
    ``None``, …); ``None`` for a cell written in erobs_bt's format or a file that cannot be
    read. The front ends name these, not the compiled copies in the cache directory."""
    try:
        document = yaml.safe_load(Path(cell).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
    info = document.get("beamline") if isinstance(document, dict) else None
    return info if isinstance(info, dict) and isinstance(info.get("file"), str) else None


def resolve_cell_file(
    path: str | Path | None,
    *,
    workspace: str | Path | None = None,
    docks: Mapping[int, str | None] | None = None,
) -> Path | None:
    """What ``--cell`` / ``cell_config`` name, as a file in erobs_bt's cell format.

    ``None`` means the packaged cell, unless ``BEAMBOT_BEAMLINE_CONFIG`` names a beamline
    file (as EROBS reads it); a beamline file is compiled (:func:`compiled_cell_path`); any
    other file is returned as is (its reader reports its problems). ``docks`` (``--docks``,
    the node's ``docks``) sets what the docks hold at start (:func:`with_dock_contents`).

    Raises:
        CellConfigError: the beamline file (or the one the variable names) is unreadable
            or invalid, or ``docks`` does not fit the cell.
    """
    if path is None:
        env = os.environ.get(BEAMLINE_ENV_VAR, "").strip()
        if env:
            path = Path(os.path.abspath(os.path.expanduser(env)))
            if not path.is_file():
                raise CellConfigError(str(path), "", f"{BEAMLINE_ENV_VAR} names a file that does not exist")
    resolved: Path | None = None
    if path is not None:
        resolved = compiled_cell_path(path, workspace=workspace) if is_beamline_file(path) else Path(path)
    if docks:
        return with_dock_contents(resolved, docks)
    return resolved

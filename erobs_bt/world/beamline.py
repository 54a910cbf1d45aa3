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
    grippers.<g>.dock_number              → docks[number].gripper
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
pose in ``flange``, the dock seats, the initial joint state, the simulated markers and parts)
is taken from the packaged cell (``config/cell.yaml``) by gripper name and dock number; a
beamline gripper the packaged cell does not know gets a bare tip at the flange (no tool
geometry) and a warning. MoveIt's default padding is none, so the compiled cell's collision
padding is 0 unless the packaged cell's is asked for.

Every file that cannot be read (the beamline file, its scene file, poses file or SRDF) is a
:class:`~erobs_bt.world.cell.CellConfigError` naming it, raised before anything moves.
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
    docks_by_number: dict[int, str] = {}
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

    # Docks: the base cell's seats by number, holding the beamline's tools. The tool on the
    # arm at start (the base's empty dock) stays on the arm.
    docks = []
    for dock in base.get("docks") or []:
        number = dock["number"]
        holder = docks_by_number.get(number)
        if dock.get("gripper") is None and holder is not None:
            holder = None if holder == _mounted_at_start(base) else holder
        docks.append({**dock, "gripper": holder})
    for number in sorted(set(docks_by_number) - {d["number"] for d in base.get("docks") or []}):
        raise CellConfigError(
            source,
            f"grippers.{docks_by_number[number]}.dock_number",
            f"dock {number} has no seat pose in {base_cell} (docks: "
            f"{', '.join(str(d['number']) for d in base.get('docks') or [])})",
        )

    # Obstacles: the scene file's.
    obstacles: list[dict[str, Any]] = []
    scene_file = beamline.get("scene_file")
    if scene_file:
        obstacles = _scene_obstacles(resolve_path(str(scene_file), path, root), source)
    poses_file = beamline.get("poses_file")
    poses = resolve_path(str(poses_file), path, root) if poses_file else None
    if poses is not None and not poses.is_file():
        raise CellConfigError(source, "poses_file", f"cannot read {poses}: no such file")

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


def _mounted_at_start(base: Mapping[str, Any]) -> str | None:
    """The tool on the arm when the base cell starts: the one gripper with no dock holding it."""
    docked = {d.get("gripper") for d in base.get("docks") or []}
    loose = [g for g in (base.get("grippers") or {}) if g != "none" and g not in docked]
    return loose[0] if len(loose) == 1 else None


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
    if directory is None:
        from erobs_bt.world.collision import default_cache_dir

        digest = hashlib.sha256(
            json.dumps([cell_text, poses_text, targets_text], sort_keys=True).encode()
        ).hexdigest()[:16]
        directory = default_cache_dir() / "beamline" / f"{document['name']}-{digest}"
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("poses.yaml", poses_text),
        ("vision_targets.yaml", targets_text),
        ("cell.yaml", cell_text),
    ):
        if text is None:
            (out / name).unlink(missing_ok=True)
            continue
        # Atomic: another process compiling the same beamline never reads half a file.
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, out / name)
    return out / "cell.yaml"


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


def resolve_cell_file(path: str | Path | None, *, workspace: str | Path | None = None) -> Path | None:
    """What ``--cell`` / ``cell_config`` name, as a file in erobs_bt's cell format.

    ``None`` means the packaged cell, unless ``BEAMBOT_BEAMLINE_CONFIG`` names a beamline
    file (as EROBS reads it); a beamline file is compiled (:func:`compiled_cell_path`); any
    other file is returned as is (its reader reports its problems).

    Raises:
        CellConfigError: the beamline file (or the one the variable names) is unreadable
            or invalid.
    """
    if path is None:
        env = os.environ.get(BEAMLINE_ENV_VAR, "").strip()
        if not env:
            return None
        path = Path(os.path.abspath(os.path.expanduser(env)))
        if not path.is_file():
            raise CellConfigError(str(path), "", f"{BEAMLINE_ENV_VAR} names a file that does not exist")
    if is_beamline_file(path):
        return compiled_cell_path(path, workspace=workspace)
    return Path(path)

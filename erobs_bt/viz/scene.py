"""The 3D cell view's server side: the scene JSON, the robot's meshes and the JavaScript libraries.

The operator's console draws the cell with three.js and urdf-loader (``static/cell3d.js``).
This module gives it, as Starlette routes (:func:`scene_routes`) that the console's app
includes:

* ``GET /api/scene`` — the scene (:func:`build_scene`): the UR5e URDF's URL, the obstacles,
  docks, tools, markers and parts of the simulated cell's description
  (:class:`~erobs_bt.world.cell.CellConfig`, loaded from ``config/cell.yaml``; the
  one source the collision model, the tool exchange and the vision simulation read too),
  and the live tool state and joint positions when the app knows them;
* ``GET /meshes/ur5e/ur5e.urdf`` — airo-models' UR5e URDF, made loadable by a browser's XML
  parser (:func:`erobs_bt.world.collision.ur5e_urdf_text` drops its undeclared
  ``drake:`` attributes), and ``GET /meshes/ur5e/visual/...`` — its OBJ/MTL/PNG visual meshes,
  served from the installed ``airo_models`` package;
* ``GET /vendor/...`` — three.js and urdf-loader (npm, pinned by ``package-lock.json``),
  copied by :func:`install_vendor` into ``static/vendor/``;
* ``GET /static/cell3d.js`` — the view itself (an ES module, see its header).

Why copy the JavaScript into ``static/vendor/`` (gitignored) at set-up, not serve
``node_modules`` at run time: the package then serves one directory of its own, also from
a wheel built after set-up and without knowing where the checkout is; only the files the
page loads are copied (:data:`VENDOR_FILES`), not the 30 MB of three's package; and the copy
turns the libraries' bare module specifiers (``from 'three'``) into relative paths, so the
browser loads them as plain ES modules without an inline import map, which the console's
``Content-Security-Policy: script-src 'self'`` would refuse. ``scripts/setup.sh`` runs
``npm ci`` and then ``python -m erobs_bt.viz.scene vendor``.

Frames and units of the scene JSON: everything is in ``base_link`` (the URDF root; z up),
lengths in metres, angles in radians. A pose is ``{"xyz": [x, y, z], "quat_xyzw": [x, y,
z, w]}``. A shape is ``{"name", "shape": "box" | "cylinder" | "sphere", "size", "pose"}``
with the sizes of ``shape_msgs/SolidPrimitive`` (box ``[x, y, z]``, cylinder ``[height,
radius]`` with its axis along local z, sphere ``[radius]``).

Trajectories: ``showTrajectory`` of ``cell3d.js`` plays the trajectory JSON of the console's
event stream as a ghost: ``{"joint_names", "time_from_start": [s], "positions": [[rad]],
"segments", "duration", ...}``, made by :func:`erobs_bt.viz.model.trajectory_json` and
documented in :mod:`erobs_bt.viz.web` ("Trajectories"); the run log's ``trajectory``
records (previews) have the same shape.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.world.cell import CellConfig, Obstacle, Pose, Shape, ToolShape
from erobs_bt.world.config import load_cell
from erobs_bt.world.kinematics import xyz_quat_from_pose

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

_LOG = logging.getLogger(__name__)

#: URL of the robot description; the visual meshes it names (``visual/*.obj``) are beside it.
URDF_URL = "/meshes/ur5e/ur5e.urdf"
#: Link of the URDF that carries the tools (the cell's tool geometry is in this frame).
FLANGE_LINK = "flange"

#: The files of ``node_modules`` that the page loads, copied to ``static/vendor/`` by
#: :func:`install_vendor`, each package's ``package.json`` with them (it names the licence:
#: three MIT, also in its LICENSE file; urdf-loader Apache-2.0, its npm package has no LICENSE
#: file). urdf-loader imports three's STL and Collada loaders itself; the cell view uses the
#: OBJ/MTL loaders and the orbit controls.
VENDOR_FILES: tuple[str, ...] = (
    "three/LICENSE",
    "three/package.json",
    "three/build/three.module.js",
    "three/build/three.core.js",
    "three/examples/jsm/controls/OrbitControls.js",
    "three/examples/jsm/loaders/OBJLoader.js",
    "three/examples/jsm/loaders/MTLLoader.js",
    "three/examples/jsm/loaders/STLLoader.js",
    "three/examples/jsm/loaders/ColladaLoader.js",
    "three/examples/jsm/loaders/TGALoader.js",
    "three/examples/jsm/loaders/collada/ColladaComposer.js",
    "three/examples/jsm/loaders/collada/ColladaParser.js",
    "urdf-loader/package.json",
    "urdf-loader/src/URDFLoader.js",
    "urdf-loader/src/URDFClasses.js",
)
#: Bare module specifiers of the vendored files → their path under ``static/vendor/``.
_BARE_SPECIFIERS: Mapping[str, str] = {
    "three": "three/build/three.module.js",
    "three/examples/jsm/": "three/examples/jsm/",
    "three/addons/": "three/examples/jsm/",
}
_IMPORT = re.compile(r"""(\bfrom\s*|\bimport\s*\(?\s*)(['"])(three(?:/(?:examples/jsm|addons)/[^'"]*)?)\2""")
#: Suffixes served from the airo-models mesh folder.
_MESH_SUFFIXES = frozenset({".obj", ".mtl", ".png"})


def static_dir() -> Path:
    """The ``erobs_bt/viz/static`` folder (pages, scripts, ``vendor/``)."""
    return Path(str(resources.files("erobs_bt.viz").joinpath("static")))


def vendor_dir() -> Path:
    """Where :func:`install_vendor` puts the JavaScript libraries: ``static/vendor``."""
    return static_dir() / "vendor"


def vendor_ready() -> bool:
    """True when every file of :data:`VENDOR_FILES` is in :func:`vendor_dir`."""
    folder = vendor_dir()
    return all((folder / name).is_file() for name in VENDOR_FILES)


def _relative_specifier(importer: str, target: str) -> str:
    """``target`` (a path under vendor/) as a relative module specifier from ``importer``."""
    depth = importer.count("/")
    prefix = "../" * depth if depth else "./"
    return prefix + target


def rewrite_bare_imports(text: str, importer: str) -> str:
    """Replace the bare specifiers ``'three'`` and ``'three/examples/jsm/...'`` of a vendored
    module by relative paths (``importer`` is its path under ``static/vendor/``)."""

    def replace(match: re.Match[str]) -> str:
        lead, quote, specifier = match.groups()
        for bare, target in _BARE_SPECIFIERS.items():
            if specifier == bare or (bare.endswith("/") and specifier.startswith(bare)):
                path = target + specifier[len(bare) :] if bare.endswith("/") else target
                return f"{lead}{quote}{_relative_specifier(importer, path)}{quote}"
        return match.group(0)

    return _IMPORT.sub(replace, text)


def install_vendor(node_modules: Path, destination: Path | None = None) -> list[Path]:
    """Copy :data:`VENDOR_FILES` from ``node_modules`` (after ``npm ci``) into ``destination``.

    JavaScript files get their bare imports rewritten (:func:`rewrite_bare_imports`); the
    destination is replaced as a whole, so no file of an older version stays behind.

    Args:
        node_modules: the ``node_modules`` folder ``npm ci`` filled.
        destination: default :func:`vendor_dir`.

    Returns:
        The written files.

    Raises:
        FileNotFoundError: a listed file is missing (``npm ci`` did not run, or a package
            version without it is installed); the message names the file.
    """
    destination = vendor_dir() if destination is None else destination
    missing = [name for name in VENDOR_FILES if not (node_modules / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{node_modules}: missing {', '.join(missing)} (run `npm ci` at the repository root)"
        )
    staging = destination.with_name(destination.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    written = []
    for name in VENDOR_FILES:
        source, target = node_modules / name, staging / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".js"):
            target.write_text(
                rewrite_bare_imports(source.read_text(encoding="utf-8"), name), encoding="utf-8"
            )
        else:
            shutil.copyfile(source, target)
        written.append(destination / name)
    shutil.rmtree(destination, ignore_errors=True)
    staging.rename(destination)
    return written


def airo_ur5e_dir() -> Path:
    """The UR5e folder of the installed ``airo_models`` package (URDF, ``visual/`` meshes).

    Raises:
        RuntimeError: ``airo-models`` is not installed.
    """
    spec = importlib.util.find_spec("airo_models")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the airo-models package (UR5e URDF and meshes) is not installed")
    return Path(next(iter(spec.submodule_search_locations))).resolve() / "arms" / "ur5e"


# ---------------------------------------------------------------------------------------------
# The scene
# ---------------------------------------------------------------------------------------------


def pose_json(matrix: Any) -> dict[str, list[float]]:
    """A (4, 4) transform as ``{"xyz": [m], "quat_xyzw": [...]}`` (rounded to 1 µm / 1e-9)."""
    xyz, quat = xyz_quat_from_pose(matrix)
    return {"xyz": [round(float(v), 6) for v in xyz], "quat_xyzw": [round(float(v), 9) for v in quat]}


def _shape_json(name: str, shape: Shape, pose: Pose | Any) -> dict[str, Any]:
    matrix = pose.matrix() if isinstance(pose, Pose) else pose
    return {"name": name, "shape": shape.kind, "size": list(shape.size), "pose": pose_json(matrix)}


def obstacles_json(obstacles: Iterable[Obstacle]) -> list[dict[str, Any]]:
    """The scene JSON's shapes of ``obstacles`` (placed in ``base_link``), in their order."""
    return [_shape_json(o.name, o.shape, o.T_base_link_obstacle()) for o in obstacles]


def _tool_json(cell: CellConfig, name: str) -> dict[str, Any]:
    gripper = cell.gripper(name)
    shapes: list[ToolShape] = list(gripper.collision_shapes())
    return {
        "name": name,
        "tip_frame": gripper.tip_frame,
        "tcp": pose_json(gripper.T_flange_tcp()),
        "actions": list(gripper.actions),
        "shapes": [_shape_json(s.name, s.shape, s.pose) for s in shapes],
    }


def build_scene(
    cell: CellConfig,
    *,
    gripper: str | None = None,
    docks: Mapping[int, str | None] | None = None,
    joint_positions: Sequence[float] | None = None,
    obstacles: Iterable[Obstacle] | None = None,
) -> dict[str, Any]:
    """The scene JSON of ``cell`` (frames and units: see the module docstring).

    Args:
        cell: the cell description.
        gripper: the attached tool (``None``: ``none``, the bare flange).
        docks: dock number → stored tool now (``None``: what the cell file says, less the
            attached tool).
        joint_positions: the arm state [rad], :data:`~erobs_bt.script.model.JOINT_NAMES`
            order (``None``: the cell's initial state).
        obstacles: the planning scene's world now (the backend's
            :meth:`~erobs_bt.backends.base.MotionBackend.world_obstacles`; ``None``: the
            cell's obstacles).

    Returns:
        ``{"frame": "base_link", "robot": {"urdf", "joint_names", "flange_link"},
        "joint_positions", "tool": {"gripper"}, "tools": {name: {"name", "tip_frame",
        "tcp", "actions", "shapes"}}, "obstacles": [shape], "docks": [{"number",
        "gripper", "pose"}], "markers": [{"id", "size", "pose"}], "parts": [shape]}``; a
        dock's ``pose`` is the flange pose with the tool seated
        (:meth:`~erobs_bt.world.cell.CellConfig.dock_seat`, from the cell's ``tool_exchange``
        block), so a stored tool is drawn by putting its shapes (given in the flange frame)
        under that pose; ``null`` when the cell places its docks nowhere (the tool is listed,
        not drawn).

    Raises:
        ValueError: an unknown gripper, or ``joint_positions`` is not six numbers.
    """
    from erobs_bt.world.tools import parse_parts

    attached = gripper or "none"
    cell.gripper(attached)
    if docks is None:
        docks = {d.number: (None if d.gripper == attached else d.gripper) for d in cell.docks}
    q = list(cell.initial_joint_state if joint_positions is None else joint_positions)
    if len(q) != len(JOINT_NAMES):
        raise ValueError(f"joint_positions: expected {len(JOINT_NAMES)} values [rad], got {len(q)}")
    return {
        "frame": "base_link",
        "name": cell.name,
        "robot": {"urdf": URDF_URL, "joint_names": list(JOINT_NAMES), "flange_link": FLANGE_LINK},
        "joint_positions": [float(v) for v in q],
        "tool": {"gripper": attached},
        "tools": {name: _tool_json(cell, name) for name in cell.grippers},
        "obstacles": obstacles_json(cell.obstacles if obstacles is None else obstacles),
        "docks": [
            {"number": d.number, "gripper": docks.get(d.number), "pose": _seat_json(cell, d.number)}
            for d in cell.docks
        ],
        "markers": [{"id": m.id, "size": m.size, "pose": pose_json(m.pose.matrix())} for m in cell.markers],
        "parts": [_shape_json(p.name, p.shape, p.matrix()) for p in parse_parts(cell)],
    }


def _seat_json(cell: CellConfig, number: int) -> dict[str, Any] | None:
    seat = cell.dock_seat(number)
    return None if seat is None else pose_json(seat)


# ---------------------------------------------------------------------------------------------
# Routes
# ---------------------------------------------------------------------------------------------

#: What a scene provider returns: any of ``gripper``, ``docks``, ``joint_positions``, ``obstacles`` (the
#: keyword arguments of :func:`build_scene`), read on every ``/api/scene`` request.
SceneState = Callable[[], Mapping[str, Any]]


def scene_routes(cell: CellConfig | None = None, *, state: SceneState | None = None) -> list[BaseRoute]:
    """The Starlette routes of the 3D view (see the module docstring).

    Args:
        cell: the cell to show (``None``: ``config/cell.yaml``, loaded now).
        state: called on each ``/api/scene`` request for the live tool state and arm
            state (e.g. from the simulated backend's ``tool_state()`` and
            ``joint_positions()``); ``None`` shows the cell as it starts.

    Returns:
        Routes to put into the app's route list (before a catch-all mount).

    Raises:
        RuntimeError: ``airo-models`` is not installed.
        OSError, ValueError: the cell file cannot be read or is invalid.
    """
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    cell = load_cell() if cell is None else cell
    meshes = airo_ur5e_dir()
    if not vendor_ready():
        _LOG.warning(
            "3D view: the JavaScript libraries are missing from %s; run `make setup` (npm ci)", vendor_dir()
        )
    urdf_body: list[bytes] = []

    async def scene(request: Request) -> Response:
        live = dict(state()) if state is not None else {}
        return JSONResponse(build_scene(cell, **live))

    async def urdf(request: Request) -> Response:
        if not urdf_body:
            from erobs_bt.world.collision import ur5e_urdf_text

            urdf_body.append(ur5e_urdf_text(base_mesh=False).encode("utf-8"))
        return Response(urdf_body[0], media_type="application/xml")

    async def mesh(request: Request) -> Response:
        name = request.path_params["name"]
        path = (meshes / "visual" / name).resolve()
        if (
            path.parent != (meshes / "visual").resolve()
            or path.suffix not in _MESH_SUFFIXES
            or not path.is_file()
        ):
            raise HTTPException(404, f"no such mesh: {name}")
        return FileResponse(path, headers={"Cache-Control": "max-age=3600"})

    async def cell3d(request: Request) -> Response:
        return FileResponse(static_dir() / "cell3d.js", media_type="text/javascript")

    return [
        Route("/api/scene", scene),
        Route(URDF_URL, urdf),
        Route("/meshes/ur5e/visual/{name}", mesh),
        Route("/static/cell3d.js", cell3d),
        Mount("/vendor", StaticFiles(directory=vendor_dir(), check_dir=False), name="vendor"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m erobs_bt.viz.scene vendor [NODE_MODULES]``: :func:`install_vendor`."""
    parser = argparse.ArgumentParser(prog="python -m erobs_bt.viz.scene")
    commands = parser.add_subparsers(dest="command", required=True)
    vendor = commands.add_parser("vendor", help="copy three.js and urdf-loader into static/vendor")
    vendor.add_argument("node_modules", nargs="?", type=Path, default=Path("node_modules"))
    args = parser.parse_args(argv)
    try:
        written = install_vendor(args.node_modules)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"erobs_bt.viz.scene: {exc}", file=sys.stderr)
        return 1
    print(f"copied {len(written)} files to {vendor_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

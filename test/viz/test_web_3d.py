"""The 3D cell view: the scene JSON comes from the cell description, the robot's URDF and
meshes and the JavaScript libraries are served offline, and in a real Chromium the UR5e
renders from its meshes, follows joint states exactly as our kinematics does, and plays a
trajectory as a ghost with a scrubber that seeks."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from erobs_bt.backends.base import ArmSegment, Solution, ToolSegment, TrajectoryPoint
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.viz.history import RunIndex, history_routes
from erobs_bt.viz.model import trajectory_json
from erobs_bt.viz.scene import VENDOR_FILES, build_scene, rewrite_bare_imports, scene_routes
from erobs_bt.viz.web import build_app
from erobs_bt.world.config import load_cell
from erobs_bt.world.kinematics import fk, quat_matrix

from browser import needs_chromium
from web3d_fixtures import CANVAS_STATS, LOAD_TIMEOUT_MS, canvas_png, chromium_page, serve


def make_app(tmp_path: Path, *, state: Any = None) -> Any:
    """The 3D view's and the history's routes in the console's app (no live view)."""
    return build_app(routes=[*scene_routes(state=state), *history_routes(RunIndex([tmp_path / "runs"]))])


def get(url: str) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers.get("Content-Type", "")


def test_the_scene_is_the_cell_description_in_base_link() -> None:
    cell = load_cell()
    scene = build_scene(cell, gripper="epick")
    assert scene["frame"] == "base_link" and scene["robot"]["joint_names"] == list(JOINT_NAMES)
    assert [o["name"] for o in scene["obstacles"]] == [o.name for o in cell.obstacles]
    table = next(o for o in scene["obstacles"] if o["name"] == "table")
    assert table["shape"] == "box" and table["size"] == [1.70, 1.40, 0.05]
    assert table["pose"]["xyz"] == [-0.10, -0.15, -0.275] and table["pose"]["quat_xyzw"] == [0, 0, 0, 1]
    assert scene["joint_positions"] == pytest.approx(list(cell.initial_joint_state))
    # The ePick is attached, so its dock (4) is empty; the others hold what cell.yaml says.
    assert {d["number"]: d["gripper"] for d in scene["docks"]} == {
        1: "hande",
        2: "2fg7",
        3: "pipettor",
        4: None,
    }
    # A dock is drawn at its seat (config/cell.yaml's tool_exchange block: dock 1 lies
    # 2 x 0.15 m to the right of dock 3, which is centred on load_approach).
    dock = next(d for d in scene["docks"] if d["number"] == 1)
    seat = cell.dock_seat(1)
    assert seat is not None and dock["pose"]["xyz"] == pytest.approx(list(seat[:3, 3]), abs=1e-6)
    assert dock["pose"]["xyz"] == pytest.approx([0.308, -0.692, -0.015], abs=3e-3)
    epick = scene["tools"]["epick"]
    assert [s["name"] for s in epick["shapes"]] == ["body", "extension", "cup"]
    # TCP = tip (0.125 along flange x) + cup 0.017 - compression 0.007.
    assert epick["tcp"]["xyz"] == pytest.approx([0.135, 0.0, 0.0])
    assert {m["id"] for m in scene["markers"]} == {m.id for m in cell.markers}
    assert [p["name"] for p in scene["parts"]] == ["sample_on_spin_coater", "sample_on_hot_plate"]
    with pytest.raises(ValueError, match="Unknown gripper"):
        build_scene(cell, gripper="laser")
    with pytest.raises(ValueError, match="joint_positions"):
        build_scene(cell, joint_positions=[0.0] * 5)


def test_bare_imports_of_the_vendored_libraries_become_relative_paths() -> None:
    text = (
        "import * as THREE from 'three';\n"
        "import { STLLoader } from 'three/examples/jsm/loaders/STLLoader.js';"
    )
    out = rewrite_bare_imports(text, "urdf-loader/src/URDFLoader.js")
    assert "from '../../three/build/three.module.js'" in out
    assert "from '../../three/examples/jsm/loaders/STLLoader.js'" in out
    nested = rewrite_bare_imports('} from "three";', "three/examples/jsm/loaders/OBJLoader.js")
    assert nested == '} from "../../../../three/build/three.module.js";'
    assert rewrite_bare_imports("import x from './three.core.js';", "three/build/three.module.js").endswith(
        "'./three.core.js';"
    ), "relative imports stay"


def test_the_robot_model_meshes_and_libraries_are_served_offline(tmp_path: Path) -> None:
    with serve(make_app(tmp_path)) as url:
        status, body, kind = get(url + "/meshes/ur5e/ur5e.urdf")
        assert status == 200 and kind.startswith("application/xml")
        robot = ET.fromstring(body)  # a browser's XML parser needs the undeclared drake: attributes gone
        revolute = [j.get("name") for j in robot.iter("joint") if j.get("type") == "revolute"]
        assert revolute == list(JOINT_NAMES)
        meshes = [m.get("filename") for visual in robot.iter("visual") for m in visual.iter("mesh")]
        assert len(meshes) == 7 and all(name.startswith("visual/") for name in meshes)
        for name in meshes:
            status, body, _ = get(f"{url}/meshes/ur5e/{name}")
            assert status == 200 and body.startswith(b"#"), name
        assert get(url + "/meshes/ur5e/visual/..%2Fur5e.urdf")[0] == 404
        assert get(url + "/meshes/ur5e/visual/base.blend1")[0] == 404
        for name in VENDOR_FILES:
            status, body, kind = get(f"{url}/vendor/{name}")
            assert status == 200, name
            if name.endswith(".js"):
                assert "javascript" in kind and b"from 'three'" not in body and b'from "three"' not in body
        status, body, _ = get(url + "/api/scene")
        assert status == 200 and json.loads(body)["robot"]["urdf"] == "/meshes/ur5e/ur5e.urdf"


def _two_segment_solution() -> Solution:
    """Two 2 s joint-space segments (10 steps each) from the cell's start, and a tool command."""
    start = np.array(load_cell().initial_joint_state)
    middle = start + np.radians([-30.0, 15.0, 20.0, -10.0, 25.0, 40.0])
    end = middle + np.radians([-25.0, -20.0, 10.0, 30.0, -15.0, -60.0])

    def segment(index: int, a: np.ndarray, b: np.ndarray) -> ArmSegment:
        points = tuple(
            TrajectoryPoint(tuple(a + (b - a) * (k / 10)), (0.0,) * 6, (0.0,) * 6, 0.2 * k) for k in range(11)
        )
        return ArmSegment(index, points)

    return Solution(
        segments=(segment(0, start, middle), ToolSegment(1, "epick", "vacuum_on"), segment(2, middle, end)),
        model_revision="robot_models__epick__3mm_dia",
        start_positions=tuple(start),
    )


def _assert_pose(seen: dict[str, list[float]], q: Any, what: str) -> None:
    """A three.js world pose of the flange agrees with erobs_bt's forward kinematics."""
    expected = fk(np.asarray(q, dtype=float))
    error_mm = 1000 * float(np.linalg.norm(np.array(seen["xyz"]) - expected[:3, 3]))
    R = quat_matrix(seen["quat_xyzw"])
    angle = math.degrees(math.acos(max(-1.0, min(1.0, (np.trace(R.T @ expected[:3, :3]) - 1) / 2))))
    assert error_mm < 1.0, f"{what}: flange {error_mm:.3f} mm from the kinematics"
    assert angle < 0.1, f"{what}: flange rotated {angle:.3f} deg from the kinematics"


@needs_chromium
def test_browser_renders_the_ur5e_and_its_flange_follows_our_kinematics(tmp_path: Path) -> None:
    cell = load_cell()
    with serve(make_app(tmp_path, state=lambda: {"gripper": "epick"})) as url, chromium_page() as page:
        page.goto(url + "/history")
        page.wait_for_function(
            "() => Boolean(window.erobsHistory && window.erobsHistory.view)", timeout=LOAD_TIMEOUT_MS
        )
        page.evaluate("window.erobsHistory.view.ready.then(() => true)")
        info = page.evaluate("window.erobsHistory.view.info()")
        assert info["loaded"] and info["joints"] == list(JOINT_NAMES)
        assert info["meshFiles"] == 7 and info["tool"] == "epick"
        visual_links = ["base_link_inertia", "shoulder_link", "upper_arm_link", "forearm_link"]
        visual_links += ["wrist_1_link", "wrist_2_link", "wrist_3_link"]
        for link in visual_links:
            assert info["links"][link] > 500, f"{link}: its mesh did not load ({info['links']})"
        _assert_pose(
            page.evaluate("window.erobsHistory.view.linkPose('flange')"), cell.initial_joint_state, "start"
        )

        stats = page.eval_on_selector("canvas.cell3d-canvas", CANVAS_STATS)
        assert stats["width"] >= 400 and stats["differing"] > 0.3, f"the canvas is mostly blank: {stats}"
        assert stats["dark"] > 0.002, f"no dark pixels: the UR's black joint covers are missing ({stats})"
        before = canvas_png(page)
        (tmp_path / "cell3d_start.png").write_bytes(before)
        page.screenshot(path=str(tmp_path / "page_start.png"))

        rng = np.random.default_rng(7)
        for trial in range(5):
            q = rng.uniform(-math.pi, math.pi, 6)
            page.evaluate(
                "([names, q]) => window.erobsHistory.view.setJointPositions(names, q)",
                [list(JOINT_NAMES), q.tolist()],
            )
            _assert_pose(page.evaluate("window.erobsHistory.view.linkPose('flange')"), q, f"trial {trial}")
        # Names in another order are matched by name.
        q = np.radians([20.0, -100.0, 80.0, -70.0, -90.0, 30.0])
        order = [5, 3, 1, 0, 2, 4]
        page.evaluate(
            "([names, q]) => window.erobsHistory.view.setJointPositions(names, q)",
            [[JOINT_NAMES[i] for i in order], [float(q[i]) for i in order]],
        )
        _assert_pose(page.evaluate("window.erobsHistory.view.linkPose('flange')"), q, "reordered names")
        page.evaluate("window.erobsHistory.view.render()")
        after = canvas_png(page)
        assert after != before, "setting joint states changes the picture"
        (tmp_path / "cell3d_moved.png").write_bytes(after)


@needs_chromium
def test_browser_plays_a_trajectory_ghost_and_the_scrubber_seeks(tmp_path: Path) -> None:
    solution = _two_segment_solution()
    trajectory = trajectory_json(solution, unit=1)  # the console's trajectory JSON
    points = trajectory["positions"]
    assert len(points) == 21 and trajectory["time_from_start"][15] == pytest.approx(3.0)
    with serve(make_app(tmp_path, state=lambda: {"gripper": "epick"})) as url, chromium_page() as page:
        page.goto(url + "/history")
        page.wait_for_function(
            "() => Boolean(window.erobsHistory && window.erobsHistory.view)", timeout=LOAD_TIMEOUT_MS
        )
        page.evaluate("window.erobsHistory.view.ready.then(() => true)")
        page.evaluate("(t) => window.erobsHistory.view.showTrajectory(t, {title: 'preview'})", trajectory)
        assert page.is_visible(".cell3d-bar") and page.text_content(".cell3d-label") == "preview"
        assert page.evaluate("window.erobsHistory.view.duration") == pytest.approx(4.0)
        ghost = "window.erobsHistory.view.linkPose('flange', {ghostArm: true})"
        _assert_pose(page.evaluate(ghost), points[0], "ghost at 0 s")
        live = page.evaluate("window.erobsHistory.view.linkPose('flange')")
        _assert_pose(live, load_cell().initial_joint_state, "the live arm stays where it is")

        page.evaluate("window.erobsHistory.view.seek(2.0)")
        _assert_pose(page.evaluate(ghost), points[10], "ghost at 2 s (end of segment 1)")
        assert page.input_value(".cell3d-scrubber") == "500"
        assert page.text_content(".cell3d-time") == "2.00 / 4.00 s"
        page.evaluate("window.erobsHistory.view.seek(1.1)")  # between samples 5 (1.0 s) and 6 (1.2 s)
        halfway = [(a + b) / 2 for a, b in zip(points[5], points[6], strict=True)]
        _assert_pose(page.evaluate(ghost), halfway, "ghost interpolated at 1.1 s")

        # Dragging the scrubber seeks (an input event at 3/4 of its range).
        page.eval_on_selector(
            ".cell3d-scrubber", "(s) => { s.value = '750'; s.dispatchEvent(new Event('input')); }"
        )
        assert page.evaluate("window.erobsHistory.view.time") == pytest.approx(3.0)
        _assert_pose(page.evaluate(ghost), points[15], "ghost at 3 s after the scrubber")
        page.screenshot(path=str(tmp_path / "ghost_scrubbed.png"))

        # Play runs to the end (at 8x) and stops there.
        page.evaluate("window.erobsHistory.view.speed = 8; window.erobsHistory.view.seek(0)")
        page.click(".cell3d-play")
        assert page.evaluate("window.erobsHistory.view.playing")
        page.wait_for_function(
            "() => !window.erobsHistory.view.playing && window.erobsHistory.view.time >= 4.0", timeout=60_000
        )
        _assert_pose(page.evaluate(ghost), points[-1], "ghost at the end")
        assert page.text_content(".cell3d-play") == "Play"
        (tmp_path / "ghost_end.png").write_bytes(canvas_png(page))

        page.evaluate("window.erobsHistory.view.clearTrajectory()")
        assert not page.is_visible(".cell3d-bar")
        assert not page.evaluate("window.erobsHistory.view.info().trajectory")


@needs_chromium
def test_each_tool_has_its_colour_and_the_legend_names_the_tools_and_the_ghost(tmp_path: Path) -> None:
    """An ePick and a pipettor (both cylinders on the flange) are drawn in colours of their
    own, docked tools lighter; the legend names the attached tool, the docked ones and,
    while a trajectory is shown, the ghost arm and its tool path."""
    trajectory = trajectory_json(_two_segment_solution(), unit=1)
    with serve(make_app(tmp_path, state=lambda: {"gripper": "epick"})) as url, chromium_page() as page:
        page.goto(url + "/history")
        page.wait_for_function(
            "() => Boolean(window.erobsHistory && window.erobsHistory.view)", timeout=LOAD_TIMEOUT_MS
        )
        page.evaluate("window.erobsHistory.view.ready.then(() => true)")
        view = "window.erobsHistory.view"

        def legend() -> list[dict[str, str]]:
            return page.eval_on_selector_all(
                ".cell3d-legend [data-legend]",
                """(items) => items.map((item) => ({
                   kind: item.dataset.legend, tool: item.dataset.tool || "", text: item.textContent,
                   swatch: getComputedStyle(item.querySelector('.cell3d-swatch')).backgroundColor}))""",
            )

        def rgb(hex_colour: str) -> str:
            r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
            return f"rgb({r}, {g}, {b})"

        colours = {}
        for tool in ("epick", "pipettor", "hande", "2fg7"):
            page.evaluate(f"{view}.setTool('{tool}')")
            info = page.evaluate(f"{view}.info()")
            assert info["tool"] == tool and info["toolColor"].startswith("#"), info
            colours[tool] = info["toolColor"]
            (attached,) = [item for item in legend() if item["kind"] == "tool"]
            assert attached["tool"] == tool and f"{tool} — attached tool" in attached["text"], attached
            assert attached["swatch"] == rgb(info["toolColor"]), "the legend's swatch is the drawn colour"
        assert len(set(colours.values())) == 4, f"every tool its own colour: {colours}"
        page.screenshot(path=str(tmp_path / "tool_colours.png"))

        docked = {item["tool"]: item for item in legend() if item["kind"] == "docked"}
        assert set(docked) == {"hande", "2fg7", "pipettor"} and "in dock 3" in docked["pipettor"]["text"]
        assert docked["pipettor"]["swatch"] != rgb(colours["pipettor"]), "docked tools are drawn lighter"
        assert {item["kind"] for item in legend()} == {"tool", "docked"}, "no ghost in the legend without one"

        page.evaluate(f"(t) => {view}.showTrajectory(t, {{title: 'preview of unit 1'}})", trajectory)
        kinds = {item["kind"]: item["text"] for item in legend()}
        assert "ghost arm — preview of unit 1" in kinds["ghost"] and "not the robot" in kinds["ghost"], kinds
        assert "tool path" in kinds["path"], kinds
        page.screenshot(path=str(tmp_path / "legend_ghost.png"))
        page.evaluate(f"{view}.clearTrajectory()")
        assert {item["kind"] for item in legend()} == {"tool", "docked"}


def test_the_console_serves_the_3d_view_of_its_backend_and_the_history(
    tmp_path: Path, monkeypatch: Any
) -> None:
    from erobs_bt.backends.scripted import ScriptedBackend
    from erobs_bt.viz.web import console_pages, start_live_view

    from helpers import make_orchestrator

    monkeypatch.setenv("EROBS_BT_LOG_DIR", str(tmp_path / "runs"))
    backend = ScriptedBackend()
    orchestrator = make_orchestrator(backend)
    view = start_live_view(orchestrator, routes=console_pages(orchestrator))
    try:
        status, body, _ = get(view.url + "api/scene")
        scene = json.loads(body)
        assert status == 200 and scene["tool"]["gripper"] == backend.current_gripper()
        if backend.joint_positions() is not None:
            assert scene["joint_positions"] == pytest.approx(list(backend.joint_positions()))
        assert get(view.url + "history")[0] == 200
        status, body, _ = get(view.url + "api/runs")
        assert status == 200 and json.loads(body)["folders"] == [str(tmp_path / "runs")]
        assert get(view.url + "static/cell3d.js")[2].startswith("text/javascript")
    finally:
        view.close()


def test_the_console_shows_the_planning_scene_of_its_backend_as_it_changes(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Objects added to the backend's world (the node's live planning scene) reach /api/scene
    and the picture's ``scene``; removing them takes them out again."""
    from erobs_bt.backends.sim.backend import SimBackend
    from erobs_bt.viz.web import console_pages, start_live_view
    from erobs_bt.world.cell import Obstacle, Pose, Shape

    from helpers import make_orchestrator, wait_for

    monkeypatch.setenv("EROBS_BT_LOG_DIR", str(tmp_path / "runs"))
    cell = load_cell()
    with SimBackend(cell, speed=math.inf) as backend:
        orchestrator = make_orchestrator(backend)
        view = start_live_view(orchestrator, routes=console_pages(orchestrator))
        try:

            def picture_scene() -> dict[str, Any]:
                return json.loads(get(view.url + "api/state")[1])["scene"]

            assert picture_scene()["revision"] == backend.scene_revision()
            box = Obstacle(
                name="crate",
                shape=Shape("box", (0.2, 0.2, 0.3)),
                frame="base_link",
                pose=Pose(xyz=(0.4, 0.3, 0.15)),
            )
            cell_world = backend.world_obstacles()
            revision = backend.set_world_obstacles((*cell_world, box))
            wait_for(lambda: picture_scene()["revision"] == revision, 10.0, "the picture's new scene")
            (drawn,) = [o for o in picture_scene()["obstacles"] if o["name"] == "crate"]
            assert drawn["shape"] == "box" and drawn["pose"]["xyz"] == pytest.approx([0.4, 0.3, 0.15])
            scene = json.loads(get(view.url + "api/scene")[1])
            assert "crate" in {o["name"] for o in scene["obstacles"]}

            backend.set_world_obstacles(cell_world)
            wait_for(
                lambda: "crate" not in {o["name"] for o in picture_scene()["obstacles"]}, 10.0, "removal"
            )
            assert "crate" not in {o["name"] for o in json.loads(get(view.url + "api/scene")[1])["obstacles"]}
        finally:
            view.close()


@needs_chromium
def test_browser_draws_the_obstacles_the_scene_sets(tmp_path: Path) -> None:
    with serve(make_app(tmp_path, state=lambda: {"gripper": "epick"})) as url, chromium_page() as page:
        page.goto(url + "/history")
        page.wait_for_function(
            "() => Boolean(window.erobsHistory && window.erobsHistory.view)", timeout=LOAD_TIMEOUT_MS
        )
        page.evaluate("window.erobsHistory.view.ready.then(() => true)")
        view = "window.erobsHistory.view"
        cell_names = {o.name for o in load_cell().obstacles}
        assert set(page.evaluate(f"{view}.info().obstacles")) == cell_names
        crate = {
            "name": "crate",
            "shape": "box",
            "size": [0.2, 0.2, 0.3],
            "pose": {"xyz": [0.4, 0.3, 0.15], "quat_xyzw": [0, 0, 0, 1]},
        }
        page.evaluate(f"(list) => {view}.setObstacles(list)", [crate])
        assert page.evaluate(f"{view}.info().obstacles") == ["crate"]
        page.evaluate(f"(list) => {view}.setObstacles(list)", [])
        assert page.evaluate(f"{view}.info().obstacles") == []

"""Shared builders for the tests (no fixtures with hidden behaviour), and the test tiers' guard.

* Engine tests: steps (:func:`moveto`, ...) and scripts on four inline poses (:func:`script_json`).
* Node tests: scripts on poses of EROBS's samples (:data:`POSES`, :func:`script`, :data:`LED`).
* :func:`require_marker`: ROS and browser helpers refuse to run inside a test that is not
  marked ``ros`` / ``browser``, so ``make test-fast`` (``-m "not ros and not browser and not
  slow"``) cannot pick up a test that starts ROS processes or Chromium unnoticed.
"""

from __future__ import annotations

import json
import math
import socket
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import py_trees

from erobs_bt.script.model import EndEffector, MoveTo, Pause, Pipettor, Step, ToolExchange, Vision
from erobs_bt.world.cell import CellConfig

HOME_DEG = [0.0, -90.0, -90.0, -90.0, 90.0, 0.0]


def moveto(index: int, target: str = "home", joints: tuple[float, ...] | None = None) -> MoveTo:
    """A ``moveto`` step to a named pose (joints in rad, optional)."""
    return MoveTo(
        index=index,
        path=f"tasks[{index}]",
        spec={"task_type": "moveto", "target": target},
        target=target,
        target_joints=joints,  # type: ignore[arg-type]
    )


def end_effector(index: int, action: str = "vacuum_on") -> EndEffector:
    return EndEffector(
        index=index,
        path=f"tasks[{index}]",
        spec={"task_type": "end_effector", "end_effector_action": action},
        action=action,
    )


def pause(index: int) -> Pause:
    return Pause(index=index, path=f"tasks[{index}]", spec={"task_type": "pause"})


def pipettor(index: int) -> Pipettor:
    return Pipettor(
        index=index,
        path=f"tasks[{index}]",
        spec={"task_type": "pipettor", "operation": "SUCK", "volume_pct": 0.5},
        operation="SUCK",
        volume_pct=0.5,
    )


def tool_exchange(index: int, operation: str = "dock", gripper: str = "epick") -> ToolExchange:
    return ToolExchange(
        index=index,
        path=f"tasks[{index}]",
        spec={"task_type": "tool_exchange", "operation": operation, "gripper": gripper, "dock_number": 1},
        operation=operation,
        gripper=gripper,
        dock_number=1,
    )


#: ``sample_scan_1`` of the packaged cell, where the camera sees marker 1 (the sample bar) [rad].
SAMPLE_SCAN_1 = tuple(math.radians(d) for d in (13.38, -112.45, -65.22, -90.98, -267.33, -166.94))
#: A tag-1 collision object (``collision_objects`` format): a box 3 cm above the tag.
BAR_GUARD: dict[str, Any] = {
    "name": "bar_guard",
    "shape": "box",
    "dimensions": [0.1, 0.05, 0.04],
    "tag_offset": [0, 0, 0.03],
}


def detect_tag_1(index: int = 3) -> Vision:
    """A ``vision_moveto`` step that only detects marker 1 from ``sample_scan_1``."""
    return Vision(
        index=index,
        path=f"tasks[{index}]",
        spec={},
        kind="vision_moveto",  # type: ignore[arg-type]
        detector="marker",
        tag_id=1,
        scan_poses=("sample_scan_1",),
        scan_joints=(SAMPLE_SCAN_1,),
        detect_only=True,
    )


def tagged_cell(cell: CellConfig, objects: object) -> CellConfig:
    """``cell`` with a top-level ``collision_objects`` section (erobs_bt's cell format)."""
    return replace(cell, extra=MappingProxyType({**cell.extra, "collision_objects": objects}))


def renumber(steps: list[Step]) -> list[Step]:
    """Steps built with arbitrary indices, renumbered 0..n-1 in order."""
    out: list[Step] = []
    for i, step in enumerate(steps):
        out.append(type(step)(**{**step.__dict__, "index": i, "path": f"tasks[{i}]"}))
    return out


def script_json(tasks: list[dict[str, Any]], *, start_gripper: str = "pipettor", **extra: Any) -> str:
    """A script document with inline poses for ``home``, ``a``, ``b`` and ``c``.

    The default tool is the pipettor, so :data:`SUCK` steps are valid; on it the
    ``vacuum`` gripper steps are the no-ops a gripper without a gripper group makes them.
    """
    poses = {
        "home": HOME_DEG,
        "a": [10.0, -90.0, -90.0, -90.0, 90.0, 0.0],
        "b": [20.0, -90.0, -90.0, -90.0, 90.0, 0.0],
        "c": [30.0, -90.0, -90.0, -90.0, 90.0, 0.0],
    }
    return json.dumps({"start_gripper": start_gripper, "poses": poses, "tasks": tasks, **extra})


def move(target: str) -> dict[str, Any]:
    """A joint ``moveto`` task to the named pose."""
    return {"task_type": "moveto", "target": target, "planning_type": "joint"}


#: Poses (joint angles in degrees, UR order shoulder_pan … wrist_3) of EROBS's sample registry
#: (``cms_poses.yaml``), all free in the packaged cell (``config/cell.yaml``) with the pipettor.
POSES: dict[str, list[float]] = {
    "safe_sample_transport": [79.72, -69.5, -81.91, -117.92, -268.05, -157.15],
    "sample_scan_1": [13.38, -112.45, -65.22, -90.98, -267.33, -166.94],
    "pipettor_scan": [112.19, -63.37, -140.83, -65.82, -269.73, -229.5],
    "vial_scan": [90.95, -55.09, -134.23, -80.7, -269.7, -182.8],
    "pre_hotplate": [65.63, -106.91, -69.8, -93.6, -270.12, -206.3],
}
#: A no-motion step: the pipettor's LED green.
LED: dict[str, Any] = {"task_type": "pipettor", "operation": "SET_LED", "led_color": {"r": 0, "g": 1, "b": 0}}


def script(tasks: list[dict[str, Any]], *, gripper: str = "pipettor") -> str:
    """A script document with :data:`POSES` inline, starting with ``gripper`` attached."""
    return json.dumps({"start_gripper": gripper, "poses": POSES, "tasks": tasks})


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for a server a test starts)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def vacuum(action: str) -> dict[str, Any]:
    """A gripper step for the attached gripper (a no-op on the default pipettor of :func:`script_json`)."""
    return {"task_type": "end_effector", "end_effector_action": action}


PAUSE: dict[str, Any] = {"task_type": "pause"}
SUCK: dict[str, Any] = {"task_type": "pipettor", "operation": "SUCK", "volume_pct": 0.5}


def show(root: py_trees.behaviour.Behaviour | None) -> str:
    """The tree with statuses, for assertion messages."""
    if root is None:
        return "<no tree>"
    return py_trees.display.unicode_tree(root, show_status=True)


def make_orchestrator(backend: Any, **kwargs: Any) -> Any:
    """An orchestrator parsing with the real parser (inline poses only); the keywords that
    are :class:`~erobs_bt.settings.EngineSettings` fields make its settings, the others go
    to the orchestrator."""
    import dataclasses

    from erobs_bt.orchestrator import Orchestrator
    from erobs_bt.script.parse import parse_script
    from erobs_bt.settings import EngineSettings

    names = {item.name for item in dataclasses.fields(EngineSettings)}
    settings = EngineSettings(**{name: kwargs.pop(name) for name in names & set(kwargs)})
    return Orchestrator(backend, parser=parse_script, settings=settings, **kwargs)


class Recorder:
    """An OrchestratorListener that keeps everything it is told."""

    def __init__(self) -> None:
        import threading

        self.states: list[str] = []
        self.feedbacks: list[Any] = []
        self.events: list[dict[str, Any]] = []
        self.previews: list[Any] = []
        self._lock = threading.Lock()

    def state_changed(self, state: Any, message: str) -> None:
        with self._lock:
            self.states.append(state.value)

    def feedback(self, goal_id: str, feedback: Any) -> None:
        with self._lock:
            self.feedbacks.append(feedback)

    def event(self, goal_id: str, record: Any) -> None:
        with self._lock:
            self.events.append(dict(record))

    def preview(self, goal_id: str, solution: Any) -> None:
        with self._lock:
            self.previews.append(solution)

    def ticked(self, goal_id: str, root: Any) -> None:
        pass

    def finished(self, goal_id: str, result: Any) -> None:
        pass

    def cache_statuses(self) -> list[str]:
        with self._lock:
            return [e["status"] for e in self.events if e["event"] == "cache"]


def wait_for(predicate: Any, timeout: float = 10.0, message: str = "condition") -> None:
    """Poll ``predicate`` until true (the engine runs on its own thread)."""
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        time.sleep(0.005)


def error_of(future: Any) -> Any:
    """The :class:`MotionError` a backend future failed with (fails the test otherwise)."""
    from erobs_bt.backends.base import MotionError

    error = future.exception(timeout=60)
    assert isinstance(error, MotionError), f"expected a MotionError, got {error!r}"
    return error


#: The markers of the test being set up or run (conftest sets it before each test; ``None``
#: outside pytest, e.g. in bench/, where nothing is checked).
RUNNING_MARKERS: frozenset[str] | None = None


def require_marker(name: str, what: str) -> None:
    """Refuse ``what`` (starting ROS, a browser) inside a test without the marker ``name``.

    Raises:
        RuntimeError: a test is running and is not marked ``name``.
    """
    if RUNNING_MARKERS is not None and name not in RUNNING_MARKERS:
        raise RuntimeError(
            f"{what} in a test that is not marked {name!r}: add @pytest.mark.{name} (or a module "
            f"pytestmark) so that `make test-fast` leaves it out"
        )


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs: it exists and is not a zombie (a killed grandchild
    waits as one until init reaps it). A PID reused since is not told apart (rare; the tests
    check within seconds of the process's end)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"

"""A ``moveto`` with more than one mode is refused, and the refusal says what to keep and
what EROBS ``jazzy_dev`` made of the step (issue 38, item 1).

EROBS's newest parser (``task_script.py``, ``moveto_goal_error``) refuses such a step as
erobs_bt does; ``jazzy_dev`` @ 739cc0c had no check and ran it in the mode
``MoveToStages.add_to_task`` tried first: the relative move when ``direction`` is set and
``distance`` is not 0, else the Cartesian move (``cartesian_target`` of 3 or more values),
else the named move. Six of EROBS's CMS scripts carry ``target`` with ``direction`` and
``distance``; jazzy_dev ran those as relative moves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES_DIR, require_samples

from erobs_bt.script.errors import ScriptError
from erobs_bt.script.parse import parse_script

#: EROBS's text, kept first: users and tools match on it.
EROBS_TEXT = "MoveTo goal must specify exactly one of target, direction/distance, or cartesian_target"


def refusal(**fields: Any) -> ScriptError:
    text = json.dumps({"start_gripper": "epick", "tasks": [{"task_type": "moveto", **fields}]})
    with pytest.raises(ScriptError) as caught:
        parse_script(text)
    return caught.value


@pytest.mark.parametrize(
    ("fields", "tail"),
    [
        (
            {"target": "moveit_home", "direction": "forward", "distance": 0.03},
            "; this step gives target and direction/distance. EROBS jazzy_dev made the relative move "
            "of direction and distance with it and ignored target: keep direction and distance for that "
            "move, or keep only target for a move to 'moveit_home'",
        ),
        (
            {"target": "transport", "cartesian_target": [0.3, 0.0, 0.4]},
            "; this step gives target and cartesian_target. EROBS jazzy_dev made the Cartesian move to "
            "cartesian_target with it and ignored target: keep cartesian_target for that move, or keep "
            "only target for a move to 'transport'",
        ),
        (
            {"direction": "up", "distance": 0.1, "cartesian_target": [0.3, 0.0, 0.4]},
            "; this step gives direction/distance and cartesian_target. EROBS jazzy_dev made the relative "
            "move of direction and distance with it and ignored cartesian_target: keep direction and "
            "distance for that move, or keep only cartesian_target for the Cartesian move",
        ),
        (
            # A direction without a distance: jazzy_dev's relative case needs both, so it moved
            # to the target.
            {"target": "transport", "direction": "up"},
            "; this step gives target and direction/distance. EROBS jazzy_dev made the move to "
            "'transport' with it and ignored direction: keep target for that move, or keep only "
            "direction and distance for the relative move",
        ),
        (
            {"target": "transport", "direction": "down", "distance": 0.01, "cartesian_target": [0.3, 0, 0.4]},
            "; this step gives target and direction/distance and cartesian_target. EROBS jazzy_dev made "
            "the relative move of direction and distance with it and ignored target and cartesian_target: "
            "keep direction and distance for that move, or keep only target for a move to 'transport' or "
            "only cartesian_target for the Cartesian move",
        ),
        (
            # Neither mode complete for jazzy_dev (no distance, 2 coordinates): it refused the step.
            {"direction": "up", "cartesian_target": [0.3, 0.0]},
            "; this step gives direction/distance and cartesian_target. Keep only direction and "
            "distance for the relative move or only cartesian_target for the Cartesian move",
        ),
    ],
)
def test_two_modes_name_what_to_keep_and_what_jazzy_dev_did(fields: dict[str, Any], tail: str) -> None:
    error = refusal(**fields)
    assert error.path == "tasks[0]"
    assert str(error) == f"tasks[0]: {EROBS_TEXT}{tail}"


@pytest.mark.parametrize(
    "fields", [{}, {"target": "", "direction": "", "distance": 0, "cartesian_target": []}]
)
def test_no_mode_keeps_erobs_text_alone(fields: dict[str, Any]) -> None:
    assert str(refusal(**fields)) == f"tasks[0]: {EROBS_TEXT}"


def test_a_huge_target_is_cut_in_the_message() -> None:
    error = refusal(target="p" * 100_000, direction="up", distance=0.1)
    assert str(error).startswith(f"tasks[0]: {EROBS_TEXT}; this step gives target")
    assert len(str(error)) < 600


def cms_scripts() -> list[Path]:
    workspace = SAMPLES_DIR / "workspace" / "src" / "cms"
    return sorted([*(workspace / "runs").glob("*.json"), *(workspace / "tasks").glob("*.json")])


def test_every_two_mode_step_of_erobs_cms_scripts_is_refused_naming_the_relative_move() -> None:
    require_samples()
    scripts = cms_scripts()
    assert len(scripts) == 21, scripts
    refused: dict[str, list[int]] = {}
    for path in scripts:
        document = json.loads(path.read_text(encoding="utf-8"))
        for index, task in enumerate(document["tasks"]):
            if task.get("task_type") != "moveto" or not task.get("target") or not task.get("direction"):
                continue
            # Each such step on its own (the scripts' other steps need the CMS cell).
            step = {k: v for k, v in task.items() if k in ("task_type", "target", "direction", "distance")}
            error = refusal(**{k: v for k, v in step.items() if k != "task_type"})
            assert str(error) == (
                f"tasks[0]: {EROBS_TEXT}; this step gives target and direction/distance. EROBS jazzy_dev "
                "made the relative move of direction and distance with it and ignored target: keep "
                f"direction and distance for that move, or keep only target for a move to {task['target']!r}"
            ), path
            refused.setdefault(f"{path.parent.name}/{path.name}", []).append(index)
    assert refused == {
        "runs/hotplate_to_garage.json": [0, 2],
        "runs/manual_spincoater_pickup.json": [4, 7],
        "runs/new1spincoater_pickup.json": [1, 4],
        "runs/pickup_from_spincoater.json": [4],
        "runs/place_on_hotplate.json": [0, 2],
        "tasks/sample_to_spincoater.json": [5],
    }

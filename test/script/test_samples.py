"""The EROBS sample scripts validate to the outcome their README states.

The samples are verbatim scripts from the public EROBS repository
(``../shared/samples/erobs/README.md`` gives each one's expected behaviour under the
newest EROBS parser). Grouping into units is computed here from the task types with
the specification's rule (consecutive ``moveto``/``end_effector`` steps form one unit,
any other step is a unit of its own), so these tests pin the parser's output, not the
batching module.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from erobs_bt.script.errors import ScriptError
from erobs_bt.script.model import EndEffector, MoveTo, Pipettor, ToolExchange, Vision
from erobs_bt.script.parse import parse_script
from erobs_bt.script.poses import PoseRegistry

MOTION = {"moveto", "end_effector"}


def unit_count(task_types: list[str]) -> int:
    """Units under the batching rule (docs/script-format.md, "Units of execution and batching")."""
    units = 0
    in_batch = False
    for task_type in task_types:
        if task_type in MOTION:
            if not in_batch:
                units += 1
            in_batch = True
        else:
            units += 1
            in_batch = False
    return units


def test_the_unit_rule_of_the_specification_example() -> None:
    # "MoveTo → End effector → Pause → MoveTo creates three units".
    assert unit_count(["moveto", "end_effector", "pause", "moveto"]) == 3


def test_every_sample_script_has_an_expectation_here(samples_dir: Path) -> None:
    assert {path.name for path in samples_dir.glob("*.json")} == {
        "FULL_EXPERIMENT_RUN.json",
        "anti_solvent_dispense.json",
        "legacy_place_on_hotplate.json",
        "perf_safe_transport_to_safe_exchange.json",
        "spincoat_to_hotplate.json",
    }


def test_full_experiment_run_expands_30_tasks_to_37_steps_in_18_units(samples_dir: Path) -> None:
    script = parse_script((samples_dir / "FULL_EXPERIMENT_RUN.json").read_bytes())
    types = [step.task_type for step in script.steps]
    assert script.task_count == 30
    assert len(script.steps) == 37
    assert unit_count(types) == 18
    assert [step.index for step in script.steps] == list(range(37))
    assert types == (
        ["moveto"] * 3
        + ["tool_exchange"] * 2
        + ["moveto", "moveto", "vision", "moveto", "moveto", "moveto", "moveto", "pipettor", "moveto"]
        + ["moveto", "pause", "moveto", "moveto", "pipettor", "pause"]
        + ["moveto"] * 3
        + ["tool_exchange"] * 2
        + ["moveto"] * 5
        + ["end_effector", "moveto", "moveto", "pause", "moveto", "end_effector", "moveto"]
    )


def test_full_experiment_pickup_vial_expands_to_the_eight_documented_steps(samples_dir: Path) -> None:
    script = parse_script((samples_dir / "FULL_EXPERIMENT_RUN.json").read_bytes())
    macro = [step for step in script.steps if step.path.startswith("tasks[6] ")]
    assert [step.path for step in macro] == [f"tasks[6] (pickup_vial step {k})" for k in range(1, 9)]
    assert [dict(step.spec) for step in macro] == [
        {"task_type": "moveto", "target": "pipettor_scan"},
        {"task_type": "vision_moveto", "tag_id": 25},
        {"task_type": "moveto", "planning_type": "cartesian", "direction": "backward", "distance": 0.02},
        {"task_type": "moveto", "planning_type": "cartesian", "direction": "right", "distance": 0.003},
        {"task_type": "moveto", "planning_type": "cartesian", "direction": "up", "distance": 0.082},
        {"task_type": "moveto", "planning_type": "cartesian", "direction": "forward", "distance": 0.063},
        {"task_type": "pipettor", "operation": "SUCK", "volume_pct": 0.5},
        {"task_type": "moveto", "planning_type": "cartesian", "direction": "backward", "distance": 0.073},
    ]
    vision = macro[1]
    assert isinstance(vision, Vision) and vision.kind == "vision_moveto" and vision.tag_id == 25
    assert vision.detector == "marker"


def test_full_experiment_tracks_the_gripper_through_both_tool_exchanges(samples_dir: Path) -> None:
    script = parse_script((samples_dir / "FULL_EXPERIMENT_RUN.json").read_bytes())
    exchanges = [(s.operation, s.gripper) for s in script.steps if isinstance(s, ToolExchange)]
    assert exchanges == [("dock", "epick"), ("load", "pipettor"), ("dock", "pipettor"), ("load", "epick")]
    suck = [s for s in script.steps if isinstance(s, Pipettor) and s.led_color is not None]
    assert suck[0].operation == "SUCK" and suck[0].led_color == (0.0, 1.0, 0.0)


def test_full_experiment_resolves_the_same_with_the_registry_because_inline_poses_win(
    samples_dir: Path,
) -> None:
    text = (samples_dir / "FULL_EXPERIMENT_RUN.json").read_bytes()
    registry = PoseRegistry.load(samples_dir / "cms_poses.yaml")
    plain, with_registry = parse_script(text), parse_script(text, registry=registry)
    assert plain.key_document() == with_registry.key_document()
    # pipettor_pre_dispense differs between the script (63.87) and the registry (63.82).
    assert with_registry.poses["pipettor_pre_dispense"][0] == 63.87


def test_legacy_place_on_hotplate_is_rejected_with_the_erobs_text(samples_dir: Path) -> None:
    with pytest.raises(ScriptError) as caught:
        parse_script((samples_dir / "legacy_place_on_hotplate.json").read_bytes())
    assert str(caught.value) == (
        "tasks[0]: MoveTo goal must specify exactly one of target, direction/distance, or cartesian_target; "
        "this step gives target and direction/distance. EROBS jazzy_dev made the relative move of direction "
        "and distance with it and ignored target: keep direction and distance for that move, or keep only "
        "target for a move to 'moveit_home'"
    )
    assert caught.value.path == "tasks[0]"


def test_anti_solvent_dispense_is_one_pipettor_step(samples_dir: Path) -> None:
    script = parse_script((samples_dir / "anti_solvent_dispense.json").read_bytes())
    assert script.start_gripper == "pipettor"
    (step,) = script.steps
    assert isinstance(step, Pipettor)
    assert (step.operation, step.volume_pct, step.led_color) == ("EXPEL", 0.5, (0.0, 1.0, 0.0))
    assert unit_count([step.task_type]) == 1 and not step.is_motion
    assert dict(script.poses) == {}, "a pipettor step uses no pose"


def test_perf_safe_transport_is_two_joint_moves_in_one_unit(samples_dir: Path) -> None:
    script = parse_script((samples_dir / "perf_safe_transport_to_safe_exchange.json").read_bytes())
    assert script.start_gripper == "epick"
    assert [type(step) for step in script.steps] == [MoveTo, MoveTo]
    first = script.steps[0]
    assert isinstance(first, MoveTo) and first.planning_type == "auto"
    assert first.target_joints is not None
    assert first.target_joints[0] == pytest.approx(math.radians(79.72))
    assert unit_count([s.task_type for s in script.steps]) == 1
    assert all(step.is_motion for step in script.steps)


def test_spincoat_to_hotplate_is_one_batch_of_nine_with_vacuum_on_and_off(samples_dir: Path) -> None:
    script = parse_script((samples_dir / "spincoat_to_hotplate.json").read_bytes())
    assert len(script.steps) == 9
    assert unit_count([s.task_type for s in script.steps]) == 1
    actions = [(s.gripper, s.action) for s in script.steps if isinstance(s, EndEffector)]
    assert actions == [("epick", "vacuum_on"), ("epick", "vacuum_off")]
    # Unused inline poses (sample_scan, load/dock approach) are not part of the key input.
    assert set(script.poses) == {"pre_spincoat", "spincoat", "post_spincoat", "pre_hotplate", "hotplate"}


def test_the_sample_registry_loads_fourteen_poses(samples_dir: Path) -> None:
    registry = PoseRegistry.load(samples_dir / "cms_poses.yaml")
    assert len(registry) == 14
    assert registry.get("vial_scan") == (90.95, -55.09, -134.23, -80.7, -269.7, -182.8)

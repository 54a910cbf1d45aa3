"""Fields a script or task does not read (issue 38, item 6).

EROBS ignores every key it does not read, at the top and inside tasks. erobs_bt does too,
with a warning (``validate``, ``run``, the run log and the node log show it), and leaves
the field out of the step (so out of the plan-cache key and the exports), unless the key
is a near miss of a field that is read (``planing_type``): that stays an error with "did
you mean", since the step would otherwise run with the default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from erobs_bt.cli import main
from erobs_bt.plan import DEFAULT_POSES_PATH
from erobs_bt.script.errors import ScriptError
from erobs_bt.script.parse import MAX_FIELD_WARNINGS, TASK_FIELDS, near_miss, parse_script
from erobs_bt.script.poses import PoseRegistry
from erobs_bt.script.schema import UNKNOWN_FIELD, script_schema

HOME = [0.0, -90.0, -90.0, -90.0, 90.0, 0.0]


def doc(tasks: list[dict[str, Any]], *, start_gripper: str = "epick", **extra: Any) -> str:
    return json.dumps({"start_gripper": start_gripper, "poses": {"home": HOME}, "tasks": tasks, **extra})


def move(**fields: Any) -> dict[str, Any]:
    return {"task_type": "moveto", "target": "home", **fields}


def rejects(text: str) -> ScriptError:
    with pytest.raises(ScriptError) as caught:
        parse_script(text)
    return caught.value


@pytest.mark.parametrize(
    ("text", "path", "meant"),
    [
        (doc([move(planing_type="cartesian")]), "tasks[0].planing_type", "planning_type"),
        (doc([move(planningType="cartesian")]), "tasks[0].planningType", "planning_type"),
        (doc([move(Planning_Type="cartesian")]), "tasks[0].Planning_Type", "planning_type"),
        (doc([move(contraints={})]), "tasks[0].contraints", "constraints"),
        (doc([{"task_type": "moveto", "direction": "up", "distnace": 0.1}]), "tasks[0].distnace", "distance"),
        (doc([move(), {"task_type": "moveto", "targt": "home"}]), "tasks[1].targt", "target"),
        (doc([move(), move(), move(**{"task-type": "x"})]), "tasks[2].task-type", "task_type"),
        (
            doc([{"task_type": "pipettor", "operation": "SUCK", "volume": 0.2}], start_gripper="pipettor"),
            "tasks[0].volume",
            "volume_pct",
        ),
        (
            doc([{"task_type": "pick_sample", "tag_id": 1, "scan_pose": "home", "tagid": 2}]),
            "tasks[0].tagid",
            "tag_id",
        ),
        (doc([move()], pose={"x": HOME}), "pose", "poses"),
        (doc([move()], start_griper="epick"), "start_griper", "start_gripper"),
    ],
)
def test_a_near_miss_of_a_known_field_is_an_error_naming_its_path_and_the_field(
    text: str, path: str, meant: str
) -> None:
    error = rejects(text)
    assert error.path == path
    assert f"did you mean {meant!r}?" in str(error)


@pytest.mark.parametrize("name", ["notes", "description", "comment", "speed", "operator", "label", "gripper"])
def test_near_miss_is_a_misspelling_not_another_name(name: str) -> None:
    assert near_miss(name, ("task_type", *TASK_FIELDS["moveto"])) is None
    assert near_miss("planing_type", ("task_type", *TASK_FIELDS["moveto"])) == "planning_type"


def test_other_unknown_fields_are_ignored_with_a_warning_and_stay_out_of_the_key() -> None:
    plain = parse_script(doc([move(), {"task_type": "end_effector", "end_effector_action": "vacuum_on"}]))
    noted = parse_script(
        doc(
            [
                move(notes="to the home pose", speed=0.5),
                {"task_type": "end_effector", "end_effector_action": "vacuum_on", "description": {"why": 1}},
            ],
            operator="beamline staff",
        )
    )
    assert noted.warnings == (
        "operator: unknown field of the script, ignored (EROBS ignores it too; it is not part of the "
        "plan-cache key)",
        "tasks[0].notes: unknown field of moveto, ignored (EROBS ignores it too; it is not part of the "
        "plan-cache key)",
        "tasks[0].speed: unknown field of moveto, ignored (EROBS ignores it too; it is not part of the "
        "plan-cache key)",
        "tasks[1].description: unknown field of end_effector, ignored (EROBS ignores it too; it is not part "
        "of the plan-cache key)",
    )
    assert plain.warnings == ()
    assert noted.key_document() == plain.key_document()
    assert "notes" not in noted.steps[0].spec and "description" not in noted.steps[1].spec


def test_the_cache_key_is_the_same_with_and_without_unknown_fields() -> None:
    from erobs_bt.cache import KeyDocument, make_key

    start = (0.0, -1.57, -1.57, -1.57, 1.57, 0.0)
    keys = [
        make_key(parse_script(text), model_revision="epick", start=start)
        for text in (doc([move()]), doc([move(notes="a", speed=1)], operator="x"))
    ]
    assert keys[0] == keys[1] and keys[0].digest() == keys[1].digest()
    noted = parse_script(doc([move(notes="a")]))
    assert KeyDocument.of(noted).key(model_revision="epick", start=start) == keys[0]


@pytest.mark.parametrize("task_type", sorted(set(TASK_FIELDS) - {"pause"}))
def test_every_task_type_but_pause_ignores_an_unknown_field(task_type: str) -> None:
    task = {"task_type": task_type, "comment": "x"}
    fields = {
        "moveto": {"target": "home"},
        "end_effector": {"end_effector_action": "vacuum_on"},
        "tool_exchange": {"operation": "dock", "gripper": "epick", "dock_number": 4},
        "pipettor": {"operation": "SUCK"},
        "vision_scan": {"scan_positions": ["home"]},
        "pick_spincoater": {"scan_pose": "home", "target_pose": "home"},
        "place_spincoater": {"scan_pose": "home", "target_pose": "home"},
    }
    start = "pipettor" if task_type in ("pipettor", "pickup_tip", "pickup_vial") else "epick"
    registry = PoseRegistry.load(DEFAULT_POSES_PATH)  # the macros' scan poses
    script = parse_script(
        doc([{**task, **fields.get(task_type, {})}], start_gripper=start), registry=registry
    )
    assert script.warnings[0].startswith(f"tasks[0].comment: unknown field of {task_type}, ignored"), (
        task_type
    )
    assert all("comment" not in step.spec for step in script.steps)


def test_a_pause_still_takes_no_fields() -> None:
    error = rejects(doc([{"task_type": "pause", "seconds": 3}]))
    assert error.path == "tasks[0].seconds" and "pause takes no fields" in str(error)


def test_many_unknown_fields_give_a_bounded_number_of_warnings() -> None:
    script = parse_script(doc([move(**{f"x{i}": i for i in range(500)})]))
    assert len(script.warnings) == MAX_FIELD_WARNINGS + 1
    assert (
        script.warnings[-1]
        == f"tasks[0].x{MAX_FIELD_WARNINGS}: and {500 - MAX_FIELD_WARNINGS} more unknown fields, ignored"
    )


def test_hostile_unknown_keys_give_a_safe_warning_or_a_path_specific_error() -> None:
    huge = parse_script(doc([move(**{"k" * 200_000: "v" * 200_000})]))
    (warning,) = huge.warnings
    assert warning.startswith("tasks[0].'" + "k" * 60 + "'… (200000 characters): unknown field of moveto")
    assert len(warning) < 300
    escaped = parse_script(doc([move(**{"\x1b[31mred\nline": 1})]))
    assert escaped.warnings[0].startswith("tasks[0].'\\x1b[31mred\\nline': unknown field of moveto")
    assert escaped.warnings[0].isprintable()
    # A lone surrogate or a NUL in a key: an error naming the key, as before.
    for key, said in (("\ud800x", "lone UTF-16 surrogate"), ("a\x00b", "NUL")):
        text = doc([move(**{key: 1})])
        error = rejects(text)
        assert error.path.startswith("tasks[0].") and said in str(error)
    # A key far longer than any field cannot be a near miss of one (nothing is compared).
    assert rejects(doc([move(planing_typ=1)])).path == "tasks[0].planing_typ"
    assert parse_script(doc([move(**{"planning_type_" * 5: 1})])).warnings


def test_the_schema_accepts_an_unknown_field_marked_and_the_parser_refuses_a_near_miss() -> None:
    validator = jsonschema.Draft202012Validator(script_schema())
    unknown = json.loads(doc([move(notes="x")], operator="me"))
    misspelled = json.loads(doc([move(planing_type="cartesian")]))
    assert validator.is_valid(unknown) and parse_script(json.dumps(unknown)).warnings
    # The schema cannot say "near miss": it is looser there, never stricter than the parser.
    assert validator.is_valid(misspelled)
    rejects(json.dumps(misspelled))
    assert UNKNOWN_FIELD["deprecated"] is True
    assert script_schema()["additionalProperties"] == UNKNOWN_FIELD


def test_validate_prints_the_warning_and_lists_it_in_json(tmp_path: Path) -> None:
    script = tmp_path / "noted.json"
    script.write_text(doc([move(notes="x")]), encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(script)])
    assert result.exit_code == 0, result.output
    assert "warning tasks[0].notes: unknown field of moveto, ignored" in result.stderr
    report = CliRunner().invoke(main, ["validate", str(script), "--json"])
    assert report.exit_code == 0
    assert json.loads(report.stdout)["warnings"][0].startswith("tasks[0].notes: unknown field of moveto")
    misspelled = tmp_path / "misspelled.json"
    misspelled.write_text(doc([move(planing_type="joint")]), encoding="utf-8")
    refused = CliRunner().invoke(main, ["validate", str(misspelled)])
    assert refused.exit_code == 2
    assert "tasks[0].planing_type: unknown field of moveto; did you mean 'planning_type'?" in refused.stderr


def test_run_prints_the_warning_and_the_run_log_records_it(tmp_path: Path) -> None:
    script = tmp_path / "noted.json"
    script.write_text(doc([move(notes="x")]), encoding="utf-8")
    log = tmp_path / "run.jsonl"
    result = CliRunner().invoke(main, ["run", str(script), "--speed", "100", "--no-mcap", "--log", str(log)])
    assert result.exit_code == 0, result.output
    assert "warning tasks[0].notes: unknown field of moveto, ignored" in result.stderr
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    warnings = [r["message"] for r in records if r["event"] == "script_warning"]
    assert warnings == [
        "tasks[0].notes: unknown field of moveto, ignored (EROBS ignores it too; it is not part of the "
        "plan-cache key)"
    ]


def test_the_number_of_unknown_fields_is_bounded_by_the_limits() -> None:
    from erobs_bt.script.limits import Limits

    text = doc([move(a=1), move(b=2)], c=3)
    assert len(parse_script(text, limits=Limits(max_unknown_fields=3)).warnings) == 3
    with pytest.raises(ScriptError) as caught:
        parse_script(text, limits=Limits(max_unknown_fields=2))
    assert caught.value.path == "tasks[1].b" and "Limits.max_unknown_fields" in str(caught.value)

"""The JSON Schema of scripts: valid draft 2020-12, accepts every good script, never stricter
than the parser (whatever the schema rejects, the parser rejects)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from malformed_corpus import CASES

from erobs_bt.cli import main
from erobs_bt.plan import ScriptParser, plan_goal
from erobs_bt.script.errors import ScriptError
from erobs_bt.script.schema import script_schema
from erobs_bt.script.vocabulary import CellVocabulary

REPO = Path(__file__).resolve().parents[2]
POSES = REPO / "config" / "poses.yaml"
PARSER = ScriptParser.from_files(poses=POSES)
SCHEMA = script_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def examples() -> list[Path]:
    """The scripts of this repository: the full experiment and trees/."""
    return [REPO / "config" / "full_experiment.json", *sorted((REPO / "trees").glob("*.json"))]


def parser_accepts(document: Any) -> bool:
    try:
        plan_goal(json.dumps(document), parser=PARSER)
    except ScriptError:
        return False
    return True


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_erobs_bt_schema_prints_the_schema_of_the_cell(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == SCHEMA
    assert SCHEMA["properties"]["start_gripper"]["enum"] == list(CellVocabulary.default().grippers)
    out = tmp_path / "schema.json"
    assert CliRunner().invoke(main, ["schema", "-o", str(out)]).exit_code == 0
    assert json.loads(out.read_text()) == SCHEMA


def test_the_schema_follows_the_cells_vocabulary(tmp_path: Path) -> None:
    cell = tmp_path / "cell.yaml"
    cell.write_text(
        "grippers: {none: {}, vac: {actions: [grab, drop]}}\ndocks: [{number: 7, gripper: vac}]\n"
    )
    result = CliRunner().invoke(main, ["schema", "--cell", str(cell)])
    schema = json.loads(result.stdout)
    assert schema["properties"]["start_gripper"]["enum"] == ["none", "vac"]
    assert '"enum": [7]' in json.dumps(schema)


@pytest.mark.parametrize("path", examples(), ids=lambda p: p.name)
def test_every_example_validates_against_the_schema(path: Path) -> None:
    document = json.loads(path.read_text())
    VALIDATOR.validate(document)
    assert parser_accepts(document)


def test_every_sample_validates_against_the_schema_as_the_parser_says(samples_dir: Path) -> None:
    parser = ScriptParser.from_files(poses=samples_dir / "cms_poses.yaml")
    for path in sorted(samples_dir.glob("*.json")):
        document = json.loads(path.read_text())
        try:
            plan_goal(path.read_bytes(), parser=parser)
            valid = True
        except ScriptError:
            valid = False
        if valid:
            VALIDATOR.validate(document)
        elif path.name == "legacy_place_on_hotplate.json":
            # Two moveto modes at once: the schema's mode rule is "at least one", so only
            # the parser rejects it (looser is allowed; stricter is not).
            assert VALIDATOR.is_valid(document)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_what_the_schema_rejects_in_the_corpus_the_parser_rejects(case: Any) -> None:
    try:
        document = json.loads(case.data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return  # not JSON: nothing for the schema to say
    if not VALIDATOR.is_valid(document):
        assert not parser_accepts(document)


def test_the_schema_catches_the_field_level_mistakes() -> None:
    bad = [
        {"start_gripper": "vacuum", "tasks": [{"task_type": "pause"}]},
        {"start_gripper": "epick", "tasks": []},
        {"start_gripper": "epick", "tasks": [{"task_type": "move"}]},
        {"start_gripper": "epick", "tasks": [{"task_type": "moveto", "direction": "up", "distance": 1e308}]},
        {"start_gripper": "epick", "poses": {"a": [0, 0, 400, 0, 0, 0]}, "tasks": [{"task_type": "pause"}]},
        {
            "start_gripper": "epick",
            "tasks": [
                {"task_type": "tool_exchange", "operation": "dock", "gripper": "epick", "dock_number": 99}
            ],
        },
        {"start_gripper": "epick", "tasks": [{"task_type": "pause", "seconds": 3}]},
        {"start_gripper": "epick", "tasks": [{"task_type": "moveto", "planning_type": "joint"}]},
    ]
    for document in bad:
        assert not VALIDATOR.is_valid(document), document
        assert not parser_accepts(document), document


# -- property: schema-rejected documents are parser-rejected ------------------------------------
names = st.sampled_from(["a", "transport", "nowhere", "", "tool_exchange_safe"])
numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.integers(-10, 10),
    st.just(1e308),
    st.booleans(),
)
values = st.one_of(st.none(), numbers, names, st.lists(numbers, max_size=7))
fields = st.sampled_from(
    [
        "target",
        "direction",
        "distance",
        "cartesian_target",
        "planning_type",
        "end_effector_action",
        "end_effector_type",
        "operation",
        "gripper",
        "dock_number",
        "approach_pose",
        "volume_pct",
        "tag_id",
        "scan_pose",
        "marker_offset_x",
        "timeout",
        "offset_direction",
        "offset_distance",
        "row",
        "col",
    ]
)
task_types = st.sampled_from(
    [
        "moveto",
        "end_effector",
        "tool_exchange",
        "pipettor",
        "pause",
        "vision_moveto",
        "pick_sample",
        "pickup_vial",
    ]
)
tasks = st.builds(
    lambda kind, extra: {"task_type": kind, **extra}, task_types, st.dictionaries(fields, values, max_size=4)
)
documents = st.builds(
    lambda gripper, items: {
        "start_gripper": gripper,
        "poses": {"a": [10.0, -90.0, -90.0, -90.0, 90.0, 0.0]},
        "tasks": items,
    },
    st.sampled_from(["epick", "pipettor", "hande", "none", "x"]),
    st.lists(tasks, min_size=1, max_size=3),
)


@given(documents)
@settings(max_examples=400, deadline=None)
def test_random_documents_the_schema_rejects_the_parser_rejects(document: dict[str, Any]) -> None:
    if not VALIDATOR.is_valid(document):
        assert not parser_accepts(document), next(VALIDATOR.iter_errors(document)).message


def test_the_schema_lists_the_parsers_fields_and_marks_any_other() -> None:
    # Issue 27 (5): one truth for a task type's fields (parse.TASK_FIELDS), in the parser and
    # the schema alike; the fields EROBS writes and does not read are accepted by both.
    # Issue 38 (6): any other field is ignored with a warning by the parser, so the schema
    # accepts it, marked deprecated (editors warn); a pause still takes none.
    from erobs_bt.script.parse import EROBS_TASK_FIELDS, TASK_FIELDS
    from erobs_bt.script.schema import UNKNOWN_FIELD

    for rule in SCHEMA["properties"]["tasks"]["items"]["allOf"]:
        task_type = rule["if"]["properties"]["task_type"]["const"]
        allowed = {"task_type", *TASK_FIELDS[task_type], *EROBS_TASK_FIELDS.get(task_type, ())}
        assert set(rule["then"]["properties"]) == allowed, task_type
        assert rule["then"]["additionalProperties"] == (False if task_type == "pause" else UNKNOWN_FIELD)
    for task_type in TASK_FIELDS:
        document = {"start_gripper": "pipettor", "tasks": [{"task_type": task_type, "speed": 2}]}
        if task_type == "pause":
            assert not VALIDATOR.is_valid(document) and not parser_accepts(document)
        else:
            # The unknown field changes nothing: the step is as valid (or not, for a missing
            # operation) to both as it is without it.
            bare = {"start_gripper": "pipettor", "tasks": [{"task_type": task_type}]}
            assert VALIDATOR.is_valid(document) == VALIDATOR.is_valid(bare), task_type
            assert parser_accepts(document) == parser_accepts(bare), task_type
    noted = {"start_gripper": "epick", "tasks": [{"task_type": "moveto", "target": "transport", "speed": 2}]}
    assert VALIDATOR.is_valid(noted) and parser_accepts(noted)
    misspelled = {
        "start_gripper": "epick",
        "tasks": [{"task_type": "moveto", "target": "transport", "planing_type": ""}],
    }
    # A near miss: the parser refuses it; the schema cannot tell one (looser, never stricter).
    assert VALIDATOR.is_valid(misspelled) and not parser_accepts(misspelled)
    erobs = {
        "run_name": "oscan",
        "$schema": "./erobs-task-script.schema.json",
        "start_gripper": "pipettor",
        "tasks": [{"task_type": "pickup_tip", "row": 0, "col": 1, "position": "A2"}],
    }
    assert VALIDATOR.is_valid(erobs) and parser_accepts(erobs)
    assert not parser_accepts({"start_gripper": "epick", "tasks": [{"task_type": "pause"}], "pose": {}})
    named = {"start_gripper": "epick", "tasks": [{"task_type": "pause"}], "name": "x"}
    assert VALIDATOR.is_valid(named) and parser_accepts(named)

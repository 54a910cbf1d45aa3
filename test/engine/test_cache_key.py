"""The plan-cache key: one test per row of the specification's matching table and per
sentence of "What does not invalidate a plan"."""

from __future__ import annotations

import json
import math
from pathlib import Path

from erobs_bt.backends.scripted import ScriptedBackend
from erobs_bt.batching import group_into_batches
from erobs_bt.cache import KeyDocument, is_eligible, make_key, round_start
from erobs_bt.script.parse import parse_script
from erobs_bt.script.poses import PoseRegistry

from helpers import Recorder, make_orchestrator, move, script_json, vacuum

REV = "robot_models__epick__3mm_dia"
START = (0.1, -1.57, 1.57, -1.57, -1.57, 0.0)


def key_of(text: str, *, registry: PoseRegistry | None = None, revision: str = REV, start=START):
    """The key of ``text``; every test here also checks that the key a goal builds from its
    once-built document (:class:`KeyDocument`) is the same key, with the same digest."""
    script = parse_script(text, registry=registry)
    key = make_key(script, model_revision=revision, start=start)
    cached = KeyDocument.of(script).key(model_revision=revision, start=start)
    assert cached == key and hash(cached) == hash(key)
    assert cached.digest() == key.digest()
    return key


def registry_file(tmp_path: Path, entries: dict[str, list[float]]) -> PoseRegistry:
    path = tmp_path / "poses.yaml"
    path.write_text("".join(f"{name}: {values}\n" for name, values in entries.items()))
    return PoseRegistry.load(path)


# -- Row 1: expanded tasks and resolved poses ------------------------------------------
def test_whitespace_and_object_key_order_are_normalised() -> None:
    text = script_json([move("a"), vacuum("vacuum_on")])
    document = json.loads(text)
    reordered = {"tasks": [dict(reversed(list(t.items()))) for t in document["tasks"]], **document}
    reordered["tasks"] = [dict(reversed(list(t.items()))) for t in document["tasks"]]
    spaced = json.dumps(dict(reversed(list(reordered.items()))), indent=7)
    assert key_of(spaced) == key_of(text)


def test_task_order_is_preserved() -> None:
    assert key_of(script_json([move("a"), move("b")])) != key_of(script_json([move("b"), move("a")]))


def test_pose_values_are_preserved() -> None:
    document = json.loads(script_json([move("a")]))
    changed = json.loads(script_json([move("a")]))
    changed["poses"]["a"][0] += 0.01
    assert key_of(json.dumps(document)) != key_of(json.dumps(changed))


# -- Row 2: MoveIt model ------------------------------------------------------------------
def test_model_revision_must_match() -> None:
    text = script_json([move("a")])
    assert key_of(text, revision="robot_models__epick__3mm_dia") != key_of(
        text, revision="robot_models__epick__5mm_dia"
    )
    assert key_of(text, revision="robot_models__hande") != key_of(text)


# -- Row 3: starting arm joints -----------------------------------------------------------
def test_start_joints_are_rounded_to_two_decimals() -> None:
    text = script_json([move("a")])
    assert key_of(text, start=(0.101, -1.571, 1.569, -1.57, -1.57, 0.0)) == key_of(text)
    assert key_of(text, start=(0.12, -1.57, 1.57, -1.57, -1.57, 0.0)) != key_of(text)


def test_whole_turn_differences_remain_distinct() -> None:
    text = script_json([move("a")])
    turned = (START[0] + 2 * math.pi, *START[1:])
    assert key_of(text, start=turned) != key_of(text)


def test_negative_zero_equals_zero() -> None:
    assert round_start((-0.0, -0.001, 0.0, 0.0, 0.0, 0.0)) == (0.0,) * 6
    assert str(round_start((-0.001,) * 6)) == str((0.0,) * 6)


def test_unknown_or_incomplete_start_has_no_known_position() -> None:
    text = script_json([move("a")])
    assert key_of(text, start=None).start is None
    assert key_of(text, start=(0.0, 0.0, 0.0)).start is None
    assert key_of(text, start=None) != key_of(text)


# -- Eligibility ---------------------------------------------------------------------------
def test_only_a_goal_forming_one_batch_is_eligible() -> None:
    one_batch = parse_script(script_json([move("a"), vacuum("vacuum_on"), move("b")]))
    several = parse_script(script_json([move("a"), {"task_type": "pause"}, move("b")]))
    assert is_eligible(group_into_batches(one_batch.steps, enabled=True))
    assert not is_eligible(group_into_batches(several.steps, enabled=True))


def test_with_batching_disabled_even_a_single_moveto_is_ineligible() -> None:
    single = parse_script(script_json([move("a")]))
    assert not is_eligible(group_into_batches(single.steps, enabled=False))
    backend = ScriptedBackend()
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, enable_batching=False, listener=recorder)
    for _ in range(2):
        backend.set_positions((0.0,) * 6)
        assert orchestrator.submit(script_json([move("a")]), dry_run=False).wait(10).success
    assert recorder.cache_statuses() == ["INELIGIBLE", "INELIGIBLE"]
    assert backend.count("replay") == 0 and len(orchestrator.cache) == 0


# -- What does not invalidate a plan ------------------------------------------------------
def test_a_changed_registry_pose_value_changes_the_key(tmp_path: Path) -> None:
    text = json.dumps({"start_gripper": "epick", "tasks": [move("safe")]})
    before = key_of(text, registry=registry_file(tmp_path, {"safe": [1, -90, -90, -90, 90, 0]}))
    after = key_of(text, registry=registry_file(tmp_path, {"safe": [2, -90, -90, -90, 90, 0]}))
    assert before != after


def test_unused_registry_entries_do_not_affect_the_key(tmp_path: Path) -> None:
    text = json.dumps({"start_gripper": "epick", "tasks": [move("safe")]})
    lean = key_of(text, registry=registry_file(tmp_path, {"safe": [1, -90, -90, -90, 90, 0]}))
    rich = key_of(
        text,
        registry=registry_file(tmp_path, {"safe": [1, -90, -90, -90, 90, 0], "other": [5, 5, 5, 5, 5, 5]}),
    )
    assert lean == rich


def test_registry_entries_overridden_by_inline_poses_do_not_affect_the_key(tmp_path: Path) -> None:
    text = script_json([move("a")])
    one = key_of(text, registry=registry_file(tmp_path, {"a": [1, 1, 1, 1, 1, 1]}))
    two = key_of(text, registry=registry_file(tmp_path, {"a": [2, 2, 2, 2, 2, 2]}))
    assert one == two == key_of(text)


def test_ignored_envelope_fields_such_as_run_name_are_not_in_the_key() -> None:
    assert key_of(script_json([move("a")], run_name="first")) == key_of(
        script_json([move("a")], run_name="x")
    )


def test_the_key_excludes_the_planning_scene_so_replay_runs_no_planning_pass() -> None:
    # The key has no scene input at all; a repeat from the same start replays without a plan call,
    # whatever happened to the obstacles in between.
    backend = ScriptedBackend(start=START)
    orchestrator = make_orchestrator(backend)
    text = script_json([move("a"), move("b")])
    assert orchestrator.submit(text, dry_run=False).wait(10).success
    backend.set_positions(START)
    assert orchestrator.submit(text, dry_run=False).wait(10).success
    assert backend.count("plan") == 1 and backend.count("replay") == 1


def test_relaunching_the_same_tool_and_cup_profile_keeps_the_model_identity() -> None:
    first, relaunched = ScriptedBackend(), ScriptedBackend()
    assert first.model_revision() == relaunched.model_revision() == REV
    text = script_json([move("a")])
    assert key_of(text, revision=first.model_revision()) == key_of(text, revision=relaunched.model_revision())

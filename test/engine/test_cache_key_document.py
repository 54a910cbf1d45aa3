"""The key document built once per goal (issue 13, item 3): the key a goal builds from it
is exactly the key built from scratch, its digest is unchanged, and everything that made a
key differ still does (a changed pose file or script misses)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from erobs_bt.backends.scripted import ScriptedBackend
from erobs_bt.batching import group_into_batches
from erobs_bt.cache import CacheKey, KeyDocument, PlanCache, _round2, make_key, round_start
from erobs_bt.orchestrator import Orchestrator
from erobs_bt.plan import ScriptParser
from erobs_bt.script.parse import parse_script
from erobs_bt.settings import EngineSettings
from erobs_bt.tree.context import Controls, GoalContext, Mode

from helpers import Recorder, make_orchestrator, move, script_json, vacuum

REV = "robot_models__epick__3mm_dia"
START = (0.1, -1.57, 1.57, -1.57, -1.57, 0.0)
SCRIPT = script_json([move("a"), vacuum("vacuum_on"), move("b")])


def reference_digest(key: CacheKey) -> str:
    """The digest as it was defined before the document was hashed once per goal."""
    start = "none" if key.start is None else ",".join(f"{a:.2f}" for a in key.start)
    return hashlib.sha256(f"{key.document}\n{key.model_revision}\n{start}".encode()).hexdigest()


@pytest.mark.parametrize("start", [START, None, (0.004, -0.005, 0.015, 6.29, -3.14159, -0.0), (1.0,) * 5])
def test_the_key_from_the_document_equals_the_freshly_built_key(start) -> None:
    script = parse_script(SCRIPT)
    document = KeyDocument.of(script)
    assert document.text == script.key_document()
    cached = document.key(model_revision=REV, start=start)
    fresh = make_key(script, model_revision=REV, start=start)
    assert cached == fresh and hash(cached) == hash(fresh)
    assert {cached: 1}[fresh] == 1  # interchangeable as dictionary keys
    assert cached.digest() == fresh.digest() == reference_digest(fresh)
    # the document's hash state is copied, never consumed: the digest is stable
    assert cached.digest() == cached.digest()
    assert document.key(model_revision="robot_models__hande", start=start).digest() != cached.digest()


def test_a_changed_script_gives_another_document_and_key() -> None:
    one = KeyDocument.of(parse_script(SCRIPT))
    other = KeyDocument.of(parse_script(script_json([move("b"), vacuum("vacuum_on"), move("a")])))
    assert one != other
    key, other_key = (d.key(model_revision=REV, start=START) for d in (one, other))
    assert key != other_key and key.digest() != other_key.digest()


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_rounding_is_exactly_python_round_to_two_decimals(angle: float) -> None:
    expected = round(angle, 2) + 0.0 if math.isfinite(angle) else angle
    got = _round2(angle)
    if math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected and math.copysign(1.0, got) == math.copysign(1.0, expected)


@given(st.integers(min_value=-100_000, max_value=100_000), st.sampled_from([-1, 0, 1]))
def test_rounding_matches_round_at_and_next_to_ties(thousandths: int, nudge: int) -> None:
    tie = (10 * thousandths + 5) / 10_000  # x.xx5: a decimal tie, not exact in binary
    angle = math.nextafter(tie, math.inf) if nudge > 0 else math.nextafter(tie, -math.inf) if nudge else tie
    assert _round2(angle) == round(angle, 2) + 0.0


def test_round_start_folds_negative_zero_and_needs_six_joints() -> None:
    assert round_start((-0.001, -0.0, 0.004, 0.005, 0.015, 0.025)) == (0.0, 0.0, 0.0, 0.01, 0.01, 0.03)
    assert all(math.copysign(1.0, a) == 1.0 for a in round_start((-0.001,) * 6) or ())
    assert round_start((0.0,) * 5) is None and round_start(None) is None


def _context(text: str, backend: ScriptedBackend, cache: PlanCache) -> GoalContext:
    script = parse_script(text)
    units = group_into_batches(script.steps, enabled=True)
    return GoalContext(script, units, Mode.EXECUTE, backend, cache, len(units) == 1, Controls())


def test_an_eligible_goal_builds_its_document_once_and_keys_its_unit_from_the_live_state() -> None:
    backend = ScriptedBackend(start=START)
    context = _context(SCRIPT, backend, PlanCache())
    assert context.key_document == KeyDocument.of(context.script)
    document = context.key_document
    context.begin_unit(context.units[0])
    assert context.unit_key == make_key(context.script, model_revision=backend.model_revision(), start=START)
    backend.set_positions((0.5, -1.0, 1.0, -1.0, -1.0, 0.2))
    context.begin_unit(context.units[0])
    assert context.key_document is document  # not rebuilt
    assert context.unit_key == make_key(
        context.script, model_revision=backend.model_revision(), start=(0.5, -1.0, 1.0, -1.0, -1.0, 0.2)
    )


def test_an_ineligible_goal_builds_no_document_and_has_no_key() -> None:
    backend = ScriptedBackend(start=START)
    context = _context(script_json([move("a"), {"task_type": "pause"}, move("b")]), backend, PlanCache())
    assert not context.eligible and context.key_document is None
    context.begin_unit(context.units[0])
    assert context.unit_key is None


def test_an_entry_keeps_the_digest_and_motion_time_of_what_it_stores() -> None:
    backend = ScriptedBackend(start=START)
    cache = PlanCache()
    context = _context(SCRIPT, backend, cache)
    context.begin_unit(context.units[0])
    key = context.unit_key
    assert key is not None
    solution = backend.plan(context.script.steps, start=None).result()
    cache.put(key, solution)
    probe = make_key(context.script, model_revision=backend.model_revision(), start=START)
    entry = cache.lookup(probe)
    assert entry is not None and (cache.hits, cache.misses) == (1, 0)
    assert entry.digest == probe.digest() == key.digest()
    assert entry.duration == solution.duration
    assert entry.solution is cache.get(probe)
    assert cache.lookup(make_key(context.script, model_revision=REV, start=None)) is None
    assert cache.misses == 1


def test_a_repeat_replays_and_a_changed_script_misses_through_the_orchestrator() -> None:
    backend = ScriptedBackend(start=START)
    recorder = Recorder()
    orchestrator = make_orchestrator(backend, listener=recorder)
    changed = script_json([move("a"), vacuum("vacuum_on"), move("c")])
    for text in (SCRIPT, SCRIPT, changed, changed):
        assert orchestrator.submit(text, dry_run=False).wait(10).success
        backend.set_positions(START)
    assert recorder.cache_statuses() == ["MISS", "HIT", "MISS", "HIT"]
    keys = [e["key"] for e in recorder.events if e["event"] == "cache"]
    assert keys[0] == keys[1] != keys[2] == keys[3]
    revision = backend.model_revision()
    assert keys[0] == reference_digest(make_key(parse_script(SCRIPT), model_revision=revision, start=START))


def test_a_changed_pose_file_misses(tmp_path: Path) -> None:
    text = json.dumps({"start_gripper": "pipettor", "tasks": [move("safe"), move("other")]})
    poses = tmp_path / "poses.yaml"
    backend = ScriptedBackend(start=START)
    recorder = Recorder()
    statuses = []
    cache = PlanCache()
    for first in (10, 10, 11):
        poses.write_text(f"safe: [{first}, -90, -90, -90, 90, 0]\nother: [20, -90, -90, -90, 90, 0]\n")
        parser = ScriptParser.from_files(poses=poses)
        orchestrator = Orchestrator(
            backend, parser=parser, settings=EngineSettings(), cache=cache, listener=recorder
        )
        assert orchestrator.submit(text, dry_run=False).wait(10).success
        backend.set_positions(START)
        statuses = recorder.cache_statuses()
    assert statuses == ["MISS", "HIT", "MISS"]

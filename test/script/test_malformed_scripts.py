"""Every malformed script of the corpus is rejected the same way by every front end.

For each case of ``malformed_corpus.py`` (wrong types, missing fields, huge and NaN
numbers, deep nesting, unicode, BOM, non-UTF-8, duplicate keys, unknown poses and docks,
steps the attached tool cannot do, a 5 MB file):

* the goal plan (:func:`erobs_bt.plan.plan_goal`) raises a :class:`ScriptError` naming the
  case's path;
* ``erobs-bt validate``, ``run``, ``preview``, ``render`` and ``export`` exit 2 with exactly
  ``invalid <file>: <that message>`` on stderr, no traceback, and ``run``/``preview``
  build nothing and write no run log;
* the ROS node's ``~/execute`` action (one node process for the whole corpus) aborts the
  goal with ``INVALID_SCRIPT``, the same message and ``completed_steps == 0``; the node
  never leaves IDLE, the arm does not move, and the node then runs a valid goal.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from malformed_corpus import CASES, Case
from ros_fixtures import REPO, NodeProcess, RosEnvironment

from erobs_bt.cli import main
from erobs_bt.plan import ScriptParser, plan_goal
from erobs_bt.script.errors import ScriptError

POSES = REPO / "config" / "poses.yaml"
PARSER = ScriptParser.from_files(poses=POSES)
IDS = [case.name for case in CASES]


def expected_message(case: Case) -> str:
    with pytest.raises(ScriptError) as caught:
        plan_goal(case.data, parser=PARSER)
    return str(caught.value)


def test_the_corpus_has_at_least_80_distinct_cases() -> None:
    assert len(CASES) >= 80
    assert len(set(IDS)) == len(IDS)
    assert len({case.data for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_goal_plan_rejects_the_case_with_its_path(case: Case) -> None:
    with pytest.raises(ScriptError) as caught:
        plan_goal(case.data, parser=PARSER)
    error = caught.value
    assert error.path == case.path
    assert case.contains in str(error)
    assert str(error).encode("utf-8"), "the message is valid UTF-8"
    for internal in (
        "Traceback",
        "OverflowError",
        "KeyError",
        "RecursionError",
        "UnicodeDecodeError",
        "4300",
    ):
        assert internal not in str(error)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_validate_run_preview_render_and_export_give_the_same_rejection(case: Case, tmp_path: Path) -> None:
    message = expected_message(case)
    script = tmp_path / "case.json"
    script.write_bytes(case.data)
    runner = CliRunner()
    for verb in ("validate", "run", "preview", "render", "export"):
        log = tmp_path / f"{verb}.jsonl"
        args = [verb, str(script), "--poses", str(POSES)]
        if verb in ("run", "preview"):
            args += ["--log", str(log), "--speed", "100"]
        elif verb == "render":
            args += ["-o", str(tmp_path / "tree.txt")]
        elif verb == "export":
            args += ["--format", "btcpp"]
        result = runner.invoke(main, args)
        assert result.exit_code == 2, (verb, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), (verb, result.exception)
        assert result.stderr == f"invalid {script}: {message}\n", verb
        assert "Traceback" not in result.output
        assert not log.exists(), f"{verb} wrote a run log for an invalid script"


def test_validate_json_reports_the_same_message(tmp_path: Path) -> None:
    import json

    runner = CliRunner()
    for case in CASES[::7]:
        script = tmp_path / "case.json"
        script.write_bytes(case.data)
        result = runner.invoke(main, ["validate", str(script), "--poses", str(POSES), "--json"])
        assert result.exit_code == 2
        assert json.loads(result.stdout) == {"valid": False, "error": expected_message(case)}


# -- the node --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def node(ros_env: RosEnvironment) -> Iterator[NodeProcess]:
    process = NodeProcess(ros_env, {"speed": 50.0, "poses_file": str(POSES)})
    process.start()
    yield process
    process.stop()


def test_the_node_aborts_every_case_with_the_same_message_and_moves_nothing(node: NodeProcess) -> None:
    from erobs_bt.ros.client.client import ErobsBtClient

    with ErobsBtClient(joint_states=True, domain_id=node.environment.domain_id) as client:
        assert client.wait_for_server(30.0), node.output
        assert client.wait_for_state_stream(30.0), node.output
        first = client.joint_states.wait_for(lambda m: True, 30.0)
        assert first is not None, node.output
        start = list(first.position)
        states_before = len(client.states.items())
        checked = 0
        for case in CASES:
            if not case.ros:
                continue  # bytes a ROS string cannot carry (non-UTF-8, NUL): files only
            message = expected_message(case)
            for dry_run in (False, True):
                run = client.send(case.data.decode("utf-8"), dry_run=dry_run)
                assert run.accepted, (case.name, run.rejection)
                result = run.wait(60.0)
                assert run.status_name == "ABORTED", case.name
                assert (result.success, result.error_code, result.completed_steps) == (
                    False,
                    "INVALID_SCRIPT",
                    0,
                )
                assert result.error_message == message, case.name
            checked += 1
        assert checked >= 80
        new_states = {message.state for message in client.states.items()[states_before:]}
        assert new_states <= {"IDLE"}, f"the node left IDLE for an invalid script: {new_states}"
        latest = client.joint_states.latest()
        assert latest is not None
        assert all(math.isclose(a, b, abs_tol=1e-9) for a, b in zip(latest.position, start, strict=True)), (
            "the arm moved"
        )
        good = client.send(
            '{"start_gripper": "epick", "tasks": [{"task_type": "moveto", "target": "transport"}]}'
        )
        assert good.accepted and good.wait(120.0).success, "the node serves the next goal"
    assert node.running()

"""The run log keeps every orchestrator event as a JSON line, flushed as it happens, and
reads back as a timeline with durations and errors in red."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.orchestrator import GoalStatus, ListenerGroup, State
from erobs_bt.viz.commands import log_command
from erobs_bt.viz.runlog import REPLAY_EVENTS, RunLogWriter, read_run_log, timeline

from helpers import SUCK, Recorder, make_orchestrator, move, script_json, vacuum, wait_for

THREE_UNITS = script_json([move("a"), vacuum("vacuum_on"), SUCK, move("b")])


def lines(path: Path) -> list[dict]:
    """The orchestrator's event records of a run log (without the writer's replay records)."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in records if r["event"] not in REPLAY_EVENTS]


def render_ansi(table) -> str:
    console = Console(force_terminal=True, color_system="standard", width=240, record=False)
    with console.capture() as capture:
        console.print(table)
    return capture.get()


def test_every_event_is_written_as_it_happens(tmp_path: Path) -> None:
    backend = ScriptedBackend()
    gate = threading.Event()
    backend.script("execute", Outcome.ok(gate=gate))
    recorder = Recorder()
    writer = RunLogWriter(tmp_path / "logs" / "run.jsonl")
    orchestrator = make_orchestrator(backend, listener=ListenerGroup(recorder, writer))
    handle = orchestrator.submit(THREE_UNITS, dry_run=False)
    wait_for(lambda: backend.count("execute") == 1, message="unit 1 executing")
    so_far = lines(writer.path)
    assert [r["event"] for r in so_far][-1] == "execute_started", "flushed per line, before the goal ends"
    gate.set()
    assert handle.wait(10).success
    writer.close()
    records = lines(writer.path)
    assert len(records) == len(recorder.events)
    for written, seen in zip(records, recorder.events, strict=True):
        assert written == {"goal_id": written["goal_id"], **seen}
        assert list(written)[:3] == ["t", "goal_id", "event"]
    events = [r["event"] for r in records]
    for expected in (
        "state",
        "goal_started",
        "unit_started",
        "cache",
        "plan_started",
        "plan_finished",
        "execute_started",
        "execute_finished",
        "run_started",
        "run_finished",
        "unit_succeeded",
        "goal_finished",
    ):
        assert expected in events, expected
    assert [r["unit"] for r in records if r["event"] == "unit_succeeded"] == [1, 2, 3]
    assert all(
        isinstance(r["seconds"], float) for r in records if r["event"].endswith("_finished") and "unit" in r
    )
    assert {r["goal_id"] for r in records if r["event"] != "state" or r["state"] != "IDLE"} <= {"goal-1", ""}
    assert records[-1]["event"] == "goal_finished" and records[-1]["status"] == "SUCCEEDED"


def test_a_failed_goal_shows_its_error_in_red(tmp_path: Path) -> None:
    backend = ScriptedBackend()
    backend.script("execute", Outcome.fail("EXECUTION_FAILED: controller rejected the trajectory"))
    path = tmp_path / "run.jsonl"
    with RunLogWriter(path) as writer:
        orchestrator = make_orchestrator(backend, listener=writer)
        result = orchestrator.submit(THREE_UNITS, dry_run=False).wait(10)
    assert result.status is GoalStatus.ABORTED
    records = read_run_log(path)
    finished = [r for r in records if r["event"] == "goal_finished"]
    assert finished[0]["error"].startswith("EXECUTION_FAILED: controller rejected")
    text = render_ansi(timeline(records))
    red = [line for line in text.splitlines() if "\x1b[1;31m" in line]
    assert any("goal_finished" in line for line in red)
    assert any("execute_finished" in line and "failed" in line for line in red)
    assert not any("unit_started" in line for line in red)


def test_the_timeline_is_relative_and_has_durations(tmp_path: Path) -> None:
    backend = ScriptedBackend()
    backend.script("execute", Outcome.ok(delay=0.05))
    path = tmp_path / "run.jsonl"
    with RunLogWriter(path) as writer:
        assert make_orchestrator(backend, listener=writer).submit(THREE_UNITS, dry_run=False).wait(10).success
    records = read_run_log(path)
    console = Console(width=240, color_system=None)
    with console.capture() as capture:
        console.print(timeline(records))
    rows = [line for line in capture.get().splitlines() if "│" in line]
    assert rows[0].startswith("│ +0.000 "), rows[0]
    unit_done = next(line for line in rows if "unit_succeeded" in line)
    seconds = float(unit_done.rsplit("│", 2)[-2].strip().removesuffix(" s"))
    assert seconds >= 0.05, "unit 1's duration includes its 0.05 s execution"
    assert any("execute_finished" in line and " s " in line for line in rows)


def test_reading_a_damaged_log_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    good = json.dumps({"t": 1.0, "goal_id": "goal-1", "event": "goal_started"})
    path.write_text(good + "\n" + '{"t": 2.0, "goal_id": "goal-1", "ev')
    assert [r["event"] for r in read_run_log(path)] == ["goal_started"], "a torn last line is ignored"
    path.write_text(good + "\nnot json\n" + good + "\n")
    with pytest.raises(ValueError, match=r"run.jsonl:2: not JSON"):
        read_run_log(path)
    path.write_text(json.dumps({"event": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"run.jsonl:1: a record needs a numeric 't'"):
        read_run_log(path)


def test_a_closed_writer_drops_records_without_failing_the_goal(tmp_path: Path) -> None:
    writer = RunLogWriter(tmp_path / "run.jsonl")
    writer.close()
    writer.close()
    writer.event("goal-1", {"t": 1.0, "event": "state", "state": State.RUNNING.value})
    assert writer.lines == 0 and writer.error == "closed"
    assert (tmp_path / "run.jsonl").read_text() == ""


def test_log_command_prints_the_timeline_of_one_goal(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with RunLogWriter(path) as writer:
        orchestrator = make_orchestrator(ScriptedBackend(), listener=writer)
        assert orchestrator.submit(THREE_UNITS, dry_run=False).wait(10).success
        assert orchestrator.submit(THREE_UNITS, dry_run=False).wait(10).success
    runner = CliRunner()
    result = runner.invoke(log_command, [str(path), "--goal", "goal-2"])
    assert result.exit_code == 0, result.output
    assert "goal-2" in result.output and "goal-1" not in result.output
    assert "goal_finished" in result.output and "SUCCEEDED" in result.output
    (tmp_path / "bad.jsonl").write_text("nope\n")
    result = runner.invoke(log_command, [str(tmp_path / "bad.jsonl")])
    assert result.exit_code == 2 and "bad.jsonl:1: not JSON" in result.output


def test_text_utf8_cannot_encode_is_logged_escaped(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with RunLogWriter(path) as writer:
        writer.event("goal-1", {"t": 1.0, "event": "rejected_script", "error": "Unknown gripper: \ud800"})
    assert writer.error == "closed" and writer.lines == 1
    assert read_run_log(path)[0]["error"] == "Unknown gripper: \ud800"


def test_the_node_closes_a_rejected_scripts_log_and_bag_at_once(tmp_path: Path) -> None:
    from mcap.reader import make_reader

    from erobs_bt.ros.node.runlogs import NodeRunLogs

    backend = ScriptedBackend()
    logs = NodeRunLogs(tmp_path / "runs")
    logs.attach(backend)
    orchestrator = make_orchestrator(backend, listener=logs)
    try:
        text = script_json([{"task_type": "moveto", "target": "a", "distance": "far"}])
        logs.expect(text)
        handle = orchestrator.submit(text, dry_run=False)
        assert handle.wait(10).error_code == "INVALID_SCRIPT"
        log = logs.path_of(handle.goal_id)
        bag = logs.bag_paths.get(handle.goal_id)
        assert log is not None and bag is not None
        assert handle.goal_id not in logs._bags and not logs.recording(handle.goal_id), "the bag is closed"
        with bag.open("rb") as stream:
            summary = make_reader(stream).get_summary()
        assert summary is not None, "closed with its summary, not left recording joint states"
        events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
        assert "rejected_script" in events
        # The next goal gets its own log and bag; the rejected goal's stay as they were.
        size = bag.stat().st_size
        ok = script_json([move("a")])
        logs.expect(ok)
        assert orchestrator.submit(ok, dry_run=False).wait(10).success
        assert bag.stat().st_size == size
    finally:
        orchestrator.shutdown()
        logs.close()


def test_values_json_has_no_type_for_are_logged_as_text_and_big_integers_exactly(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with RunLogWriter(path) as writer:
        writer.event("goal-1", {"t": 1.0, "event": "x", "where": Path("/cell/a"), "state": State.PAUSED})
        writer.event("goal-1", {"t": 2.0, "event": "y", "count": 2**70})  # beyond orjson's 64 bits
    first, second = read_run_log(path)
    assert first["where"] == "/cell/a" and first["state"] == "PAUSED"
    assert second["count"] == 2**70 and writer.lines == 2


def test_the_nodes_log_is_complete_at_the_result_and_ends_with_every_final_status(tmp_path: Path) -> None:
    from erobs_bt.ros.node.runlogs import NodeRunLogs

    def pre_order(node: object) -> list[object]:
        return [node, *(n for child in node.children for n in pre_order(child))]  # type: ignore[attr-defined]

    backend = ScriptedBackend()
    logs = NodeRunLogs(tmp_path / "runs", mcap=False)
    orchestrator = make_orchestrator(backend, listener=logs)
    try:
        logs.expect(THREE_UNITS)
        handle = orchestrator.submit(THREE_UNITS, dry_run=False)
        assert handle.wait(10).status is GoalStatus.SUCCEEDED
        path = logs.path_of(handle.goal_id)
        assert path is not None
        # Written by the goal's own end, not by the writer thread later: complete already.
        records = read_run_log(path)
        assert "goal_finished" in [r["event"] for r in records]
        assert [r["unit"] for r in records if r["event"] == "unit_succeeded"] == [1, 2, 3]
        tree = next(r["nodes"] for r in records if r["event"] == "tree")
        statuses = ["INVALID"] * len(tree)
        for record in records:
            if record["event"] == "tree_status":
                for index, status in record["changes"]:
                    statuses[index] = status
        live = pre_order(handle.root)
        assert [name for _, name, _ in tree] == [node.name for node in live]  # type: ignore[attr-defined]
        assert statuses == [node.status.value for node in live]  # type: ignore[attr-defined]
    finally:
        orchestrator.shutdown()
        logs.close()


def test_a_node_running_many_goals_keeps_the_file_names_of_the_latest_ones_only(tmp_path: Path) -> None:
    """Issue 27 §2: the per-goal names (run log, bag, bags closed) never shrank (~0.75 KB a
    goal): a node running for months grew with its goal count. The latest ``keep`` stay."""
    from erobs_bt.ros.node.runlogs import KEPT_GOALS, NodeRunLogs

    assert KEPT_GOALS >= 100, "a client can still ask for the files of its recent goals"
    backend = ScriptedBackend()
    logs = NodeRunLogs(tmp_path / "runs", keep=5)
    logs.attach(backend)
    orchestrator = make_orchestrator(backend, listener=logs)
    text = script_json([move("a")])
    goals = []
    try:
        for _ in range(20):
            logs.expect(text)
            handle = orchestrator.submit(text, dry_run=False)
            assert handle.wait(10).success
            goals.append(handle.goal_id)
    finally:
        orchestrator.shutdown()
        logs.close()
    assert list(logs.paths) == goals[-5:] and list(logs.bag_paths) == goals[-5:]
    assert not logs._open_bags and not logs._writers and not logs._bag_files and not logs._trees
    assert logs.path_of(goals[0]) is None and logs.path_of(goals[-1]) is not None
    # Forgotten names, not files: every goal's log and bag is still on disk, complete.
    assert len(list((tmp_path / "runs").glob("*.jsonl"))) == 20
    assert len(list((tmp_path / "runs").glob("*.mcap"))) == 20
    for path in (tmp_path / "runs").glob("*.jsonl"):
        assert "goal_finished" in [r["event"] for r in read_run_log(path)]
    with pytest.raises(ValueError, match="keep"):
        NodeRunLogs(tmp_path / "other", keep=0)


def test_the_nodes_fault_reset_is_appended_to_the_faulted_goals_run_log(tmp_path: Path) -> None:
    """Issue 27 item 9: the README says the reset (when, which fault) is in the run log; the
    node's run logs dropped it (no goal runs at a reset). It goes to the faulted goal's log,
    after its end, with who asked; the next goal's log does not get it."""
    from erobs_bt.ros.node.runlogs import NodeRunLogs

    backend = ScriptedBackend()
    logs = NodeRunLogs(tmp_path / "runs", mcap=False)
    orchestrator = make_orchestrator(backend, listener=logs)
    backend.script("execute", Outcome.fail("TIMEOUT: execution over 120 s"))
    text = script_json([move("a"), vacuum("vacuum_on"), move("b")])
    try:
        logs.expect(text)
        faulted = orchestrator.submit(text, dry_run=False)
        assert faulted.wait(10).error_code == "TIMEOUT"
        assert orchestrator.state is State.FAULTED
        assert orchestrator.reset_fault(by="web console (127.0.0.1:4242)").success
        logs.expect(THREE_UNITS)
        after = orchestrator.submit(THREE_UNITS, dry_run=False)
        assert after.wait(10).success
    finally:
        orchestrator.shutdown()
        logs.close()
    faulted_path, after_path = logs.path_of(faulted.goal_id), logs.path_of(after.goal_id)
    assert faulted_path is not None and after_path is not None
    records = read_run_log(faulted_path)
    events = [r["event"] for r in records]
    assert events[-1] == "fault_reset" and events.count("fault_reset") == 1, "the last record, after the end"
    reset, finished = records[-1], records[events.index("goal_finished")]
    assert reset["fault"] == "TIMEOUT: execution over 120 s"
    assert reset["faulted_goal_id"] == faulted.goal_id
    assert reset["by"] == "web console (127.0.0.1:4242)"
    assert reset["t"] >= finished["t"]
    assert "fault_reset" not in [r["event"] for r in read_run_log(after_path)]

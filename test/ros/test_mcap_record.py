"""Runs recorded to MCAP, the ROS 2 bag format: a CLI run and a node goal read back with the
mcap reader (mcap-ros2-support decodes every ``msg`` channel from the file's own schemas),
on the node's topics, with UR joint names, increasing times, and a last state, feedback,
status and snapshot that agree with the result; and the CDR is the rmw's (rclpy reads it)."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from ros_fixtures import idle_after_goal

from erobs_bt.backends.scripted import Outcome, ScriptedBackend
from erobs_bt.cli import main
from erobs_bt.ros.record.mcap_record import (
    TOPIC_TYPES,
    McapRecorder,
    message_definition,
    read_recording,
    topic_names,
)
from erobs_bt.rosdistro import ros_distro
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.viz.runlog import read_run_log

from helpers import SUCK, make_orchestrator, move, script_json, vacuum, wait_for

MCAP_MAGIC = b"\x89MCAP0\r\n"
REPO = Path(__file__).resolve().parents[2]


def by_topic(path: Path) -> dict[str, list[tuple[int, Any]]]:
    topics: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    for topic, log_time, message in read_recording(path):
        topics[topic].append((log_time, message))
    return topics


def summary(path: Path) -> Any:
    from mcap.reader import make_reader

    with path.open("rb") as stream:
        reader = make_reader(stream)
        return reader.get_header(), reader.get_summary(), list(reader.iter_metadata())


def check_bag_layout(path: Path, topics: dict[str, str]) -> dict[str, Any]:
    """rosbag2's MCAP layout; returns the decoded ``rosbag2`` metadata."""
    header, file_summary, metadata = summary(path)
    assert header.profile == "ros2"
    channels = {channel.topic: channel for channel in file_summary.channels.values()}
    assert set(channels) == set(topics.values())
    for key, topic in topics.items():
        channel = channels[topic]
        schema = file_summary.schemas[channel.schema_id]
        assert (channel.message_encoding, schema.encoding, schema.name) == (
            "cdr",
            "ros2msg",
            TOPIC_TYPES[key],
        )
        assert schema.data.decode() == message_definition(TOPIC_TYPES[key])
        (qos,) = yaml.safe_load(channel.metadata["offered_qos_profiles"])
        latched = key in ("execution_state", "tree_snapshot", "status", "planning_scene")
        assert qos["durability"] == ("transient_local" if latched else "volatile"), topic
        assert qos["reliability"] == "reliable"
    (record,) = [m for m in metadata if m.name == "rosbag2"]
    bag = yaml.safe_load(record.metadata["serialized_metadata"])
    assert bag["version"] == 9 and bag["storage_identifier"] == "mcap"
    counts = {t["topic_metadata"]["name"]: t["message_count"] for t in bag["topics_with_message_count"]}
    assert counts == {
        channels[topic].topic: file_summary.statistics.channel_message_counts.get(channels[topic].id, 0)
        for topic in topics.values()
    }
    assert bag["message_count"] == file_summary.statistics.message_count
    return bag


def check_times_increase(topics: dict[str, list[tuple[int, Any]]]) -> None:
    for topic, messages in topics.items():
        times = [log_time for log_time, _ in messages]
        assert times == sorted(times), f"{topic}: log times go back"
    joint_stamps = [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for _, m in topics["/joint_states"]]
    assert all(b > a for a, b in itertools.pairwise(joint_stamps)), "joint stamps increase"


def test_message_definitions_come_from_the_installed_interface_files() -> None:
    text = message_definition("erobs_bt_interfaces/msg/TreeSnapshot")
    own = (REPO / "interfaces/erobs_bt_interfaces/msg/TreeSnapshot.msg").read_text()
    status = (REPO / "interfaces/erobs_bt_interfaces/msg/BehaviourStatus.msg").read_text()
    assert text.startswith(own)
    assert f"{'=' * 80}\nMSG: erobs_bt_interfaces/BehaviourStatus\n{status}" in text
    assert "\nMSG: builtin_interfaces/Time\n" in text
    joint_state = message_definition("sensor_msgs/msg/JointState")
    assert [line for line in joint_state.splitlines() if line.startswith("MSG: ")] == [
        "MSG: std_msgs/Header",
        "MSG: builtin_interfaces/Time",
    ]
    feedback = message_definition("erobs_bt_interfaces/action/ExecuteScript_FeedbackMessage")
    action = (REPO / "interfaces/erobs_bt_interfaces/action/ExecuteScript.action").read_text()
    assert feedback.startswith(
        "unique_identifier_msgs/UUID goal_id\nerobs_bt_interfaces/ExecuteScript_Feedback feedback\n"
    )
    assert action.split("---\n")[2] in feedback
    with pytest.raises(ValueError, match=r"not installed|no .*NoSuchType"):
        message_definition("erobs_bt_interfaces/msg/NoSuchType")


def test_the_cdr_of_a_joint_state_is_what_rclpy_reads_and_writes(tmp_path: Path) -> None:
    from mcap.reader import make_reader
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import JointState

    from erobs_bt.ros import convert

    path = tmp_path / "joints.mcap"
    positions = (0.1, -1.5707963, 1.2, -3.0, 1.5707963, 6.25)
    velocities = (0.0, 0.5, -0.25, 1e-9, 2.0, -1.0)
    with McapRecorder(path) as recorder:
        recorder.joint_state(JOINT_NAMES, positions, velocities)
    with path.open("rb") as stream:
        ((schema, channel, message),) = list(make_reader(stream).iter_messages())
    assert channel.topic == "/joint_states" and schema.name == "sensor_msgs/msg/JointState"
    decoded = deserialize_message(message.data, JointState)
    assert tuple(decoded.name) == JOINT_NAMES
    assert tuple(decoded.position) == positions and tuple(decoded.velocity) == velocities
    assert list(decoded.effort) == []
    assert message.publish_time == decoded.header.stamp.sec * 10**9 + decoded.header.stamp.nanosec
    # And the other way: what a ROS publisher sends (the rmw's serializer) decodes with the
    # recorded schema. (The bytes differ only in padding: the rmw leaves alignment bytes
    # uninitialised and pads the end to 4; CDR readers ignore both.)
    from mcap_ros2.decoder import DecoderFactory

    sent = serialize_message(
        convert.joint_state_msg(JOINT_NAMES, positions, velocities, stamp=decoded.header.stamp)
    )
    read = DecoderFactory().decoder_for("cdr", schema)(sent)
    assert tuple(read.name) == JOINT_NAMES and tuple(read.position) == positions
    assert tuple(read.velocity) == velocities and read.header.stamp.nanosec == decoded.header.stamp.nanosec


def test_a_scripted_goal_records_state_feedback_status_and_the_final_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "goal.mcap"
    backend = ScriptedBackend()
    backend.script("execute", Outcome.fail("EXECUTION_FAILED: controller rejected the trajectory"))
    with McapRecorder(path) as recorder:
        orchestrator = make_orchestrator(backend, listener=recorder)
        result = orchestrator.submit(script_json([move("a"), vacuum("vacuum_on"), SUCK]), dry_run=False).wait(
            10
        )
    assert result.error_code == "EXECUTION_FAILED"
    topics = by_topic(path)
    check_bag_layout(path, topic_names())
    states = [m.state for _, m in topics["/erobs_bt/execution_state"]]
    assert states[0] == "RUNNING" and states[-1] == "IDLE"
    statuses = [m.status_list[0].status for _, m in topics["/erobs_bt/execute/_action/status"]]
    assert statuses == [2, 6], "EXECUTING, then ABORTED"
    (_, final), *_ = [x for x in reversed(topics["/erobs_bt/tree_snapshot"])]
    assert final.final and final.state == "FAILURE" and final.goal_id == "goal-1"
    assert recorder.error == ""


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path, Path]:
    """``erobs-bt run trees/pause_between_units.json --speed 5 --auto-resume --log run.jsonl``,
    once for the module: (the CLI result, the run log, the bag written beside it)."""
    folder = tmp_path_factory.mktemp("cli_run")
    log = folder / "run.jsonl"
    script = str(REPO / "trees/pause_between_units.json")
    result = CliRunner().invoke(main, ["run", script, "--speed", "5", "--auto-resume", "--log", str(log)])
    assert result.exit_code == 0, result.output
    return result, log, folder / "run.mcap"


def test_a_cli_run_is_recorded_beside_its_run_log(cli_run: tuple[Any, Path, Path]) -> None:
    result, log, bag = cli_run
    assert f"ROS 2 bag: {bag}" in result.output.replace("\n", "")
    records = read_run_log(log)
    finished = [r for r in records if r["event"] == "goal_finished"][-1]
    assert finished["status"] == "SUCCEEDED"

    metadata = check_bag_layout(bag, topic_names())
    assert metadata["ros_distro"] == ros_distro()  # the rclpy this venv runs (no ROS_DISTRO here)
    topics = by_topic(bag)
    check_times_increase(topics)
    joints = [m for _, m in topics["/joint_states"]]
    assert len(joints) > 20 and all(tuple(m.name) == JOINT_NAMES for m in joints)
    assert any(any(abs(v) > 1e-3 for v in m.velocity) for m in joints), "the arm moved"

    feedback = [m for _, m in topics["/erobs_bt/execute/_action/feedback"]]
    last = feedback[-1].feedback
    assert (last.total_steps, last.progress_percentage) == (finished["total_steps"], 100.0)
    assert last.unit_index == 3, "three units: batch, pause, batch"
    assert {bytes(m.goal_id.uuid) for m in feedback} == {
        bytes(m.status_list[0].goal_info.goal_id.uuid) for _, m in topics["/erobs_bt/execute/_action/status"]
    }
    states = [m for _, m in topics["/erobs_bt/execution_state"]]
    assert "PAUSED" in [m.state for m in states] and states[-1].state == "IDLE"
    assert states[-1].goal_id == finished["goal_id"]
    assert topics["/erobs_bt/execute/_action/status"][-1][1].status_list[0].status == 4  # SUCCEEDED

    snapshots = [m for _, m in topics["/erobs_bt/tree_snapshot"]]
    assert len(snapshots) >= 3, "the full tree, what changed, the final tree"
    assert not snapshots[0].delta and snapshots[0].behaviours[0].name == "script"
    assert [m.sequence for m in snapshots] == list(range(len(snapshots)))
    final = snapshots[-1]
    assert final.final and not final.delta and final.state == "SUCCESS"
    units = [b for b in final.behaviours if b.name.startswith("unit ")]
    assert [b.status for b in units] == ["SUCCESS"] * 3


def test_no_mcap_records_nothing(tmp_path: Path) -> None:
    script = tmp_path / "one.json"
    script.write_text(script_json([SUCK]))
    log = tmp_path / "one.jsonl"
    result = CliRunner().invoke(
        main, ["run", str(script), "--backend", "scripted", "--log", str(log), "--no-mcap"]
    )
    assert result.exit_code == 0, result.output
    assert log.exists() and not (tmp_path / "one.mcap").exists()
    chosen = tmp_path / "bags" / "chosen.mcap"
    result = CliRunner().invoke(
        main, ["run", str(script), "--backend", "scripted", "--log", str(log), "--mcap", str(chosen)]
    )
    assert result.exit_code == 0, result.output
    assert chosen.read_bytes().endswith(MCAP_MAGIC)


def test_a_node_goal_is_recorded_beside_its_run_log_on_the_node_topics(cells: Any) -> None:
    from erobs_bt.ros.client.client import ErobsBtClient

    poses = {
        "sample_scan_1": [13.38, -112.45, -65.22, -90.98, -267.33, -166.94],
        "vial_scan": [90.95, -55.09, -134.23, -80.7, -269.7, -182.8],
    }
    tasks = [
        {"task_type": "moveto", "target": t, "planning_type": "joint"} for t in ("vial_scan", "sample_scan_1")
    ]
    text = json.dumps(
        {"run_name": "bag_of_one_goal", "start_gripper": "pipettor", "poses": poses, "tasks": tasks}
    )
    client = ErobsBtClient("/cell1/erobs_bt")
    try:
        assert client.wait_for_server(30.0), cells.nodes["cell1"].output
        assert client.wait_for_state_stream(30.0)
        before = client.states.count
        run = client.send(text)
        assert run.accepted, run.rejection
        result = run.wait(120.0)
        assert run.status_name == "SUCCEEDED"
        idle = idle_after_goal(client, before, 10.0)
        assert idle is not None
    finally:
        client.close()
    (log,) = sorted(cells.run_logs["cell1"].glob(f"*_{idle.goal_id}_bag_of_one_goal.jsonl"))
    bag = log.with_suffix(".mcap")
    wait_for(lambda: bag.exists() and bag.read_bytes().endswith(MCAP_MAGIC), 10.0, "the goal's bag closed")

    names = topic_names(
        lambda name: f"/cell1/erobs_bt/{name[2:]}" if name.startswith("~/") else f"/cell1/{name}"
    )
    assert names["joint_states"] == "/cell1/joint_states"
    check_bag_layout(bag, names)
    topics = by_topic(bag)
    check_times_increase(topics)
    joints = [m for _, m in topics["/cell1/joint_states"]]
    assert joints and all(tuple(m.name) == JOINT_NAMES for m in joints)
    assert any(any(abs(v) > 1e-3 for v in m.velocity) for m in joints), "the arm moved"
    feedback = topics["/cell1/erobs_bt/execute/_action/feedback"][-1][1].feedback
    assert (feedback.total_steps, feedback.progress_percentage) == (result.total_steps, 100.0)
    state = topics["/cell1/erobs_bt/execution_state"][-1][1]
    assert (state.state, state.goal_id) == ("IDLE", idle.goal_id)
    final = topics["/cell1/erobs_bt/tree_snapshot"][-1][1]
    assert final.final and final.state == "SUCCESS" and final.goal_id == idle.goal_id
    # The last joint state is where the last unit ended (the arm at rest at sample_scan_1).
    import math

    last = joints[-1].position
    assert max(abs(a - math.radians(d)) for a, d in zip(last, poses["sample_scan_1"], strict=True)) < 1e-3


def test_the_bag_printed_beside_the_log_reads_with_erobs_bt_log(
    cli_run: tuple[Any, Path, Path], tmp_path: Path
) -> None:
    # Issue 27 (8): `erobs-bt log X.mcap` (the file `run` prints) failed with a raw "'utf-8'
    # codec can't decode byte 0x89", and `run` pointed at `ros2 bag play`, which the PyPI
    # install does not have.
    import shutil

    result, log, bag = cli_run
    said = result.output.replace("\n", "")
    assert f"ROS 2 bag: {bag}  (open it with Foxglove, erobs-bt log {bag}, or " in said
    if shutil.which("ros2") is None:
        assert "ros2 bag play where ROS 2 is installed (not on this machine)" in said

    shown = CliRunner().invoke(main, ["log", str(bag)])
    assert shown.exit_code == 0, shown.output
    text = shown.output
    assert "codec" not in text
    assert "/joint_states" in text and "sensor_msgs/msg/JointState" in text
    assert "/erobs_bt/tree_snapshot" in text
    assert "is the run's ROS 2 bag (MCAP)" in text and f"its run log: {log}" in text.replace("\n", "")
    assert "goal_finished" in text  # the timeline of the run log beside it

    alone_bag = tmp_path / "run.mcap"  # the same bag without its run log
    shutil.copyfile(bag, alone_bag)
    alone = CliRunner().invoke(main, ["log", str(alone_bag)])
    assert alone.exit_code == 2 and "no run log beside the bag" in alone.output


def test_log_of_a_binary_file_that_is_no_bag_says_what_it_is_not(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b'{"t": 1, "event": "x"}\n\x89\xff\x00binary')
    result = CliRunner().invoke(main, ["log", str(junk)])
    assert result.exit_code == 2
    assert "codec" not in result.output
    assert (
        "junk.bin:2: not a run log (a run log is JSON Lines text; byte 0x89 at offset 23 is not UTF-8)"
        in (result.output.replace("\n", ""))
    )

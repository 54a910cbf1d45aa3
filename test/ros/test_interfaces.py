"""The erobs_bt_interfaces types as built by scripts/setup.sh.

These tests need no ROS process: they import the generated Python types (which loads their C
typesupport, so a broken build fails here first) and push messages through rclpy's CDR
serialisation, exactly as they travel between the node and its clients. The field lists are
the contract that ``erobs_bt.ros`` and any other client rely on (docs/behaviour.md §3,
docs/design.md §4), so a changed .action/.msg file shows up here.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Time
from erobs_bt_interfaces.action import ExecuteScript
from erobs_bt_interfaces.msg import BehaviourStatus, ExecutionState, TreeSnapshot
from rclpy.serialization import deserialize_message, serialize_message
from unique_identifier_msgs.msg import UUID


def round_trip(message: Any) -> Any:
    """Serialise ``message`` to CDR bytes and back into a new instance of its type."""
    data = serialize_message(message)
    assert isinstance(data, bytes) and data, "serialisation produced no bytes"
    return deserialize_message(data, type(message))


def test_action_fields_are_the_documented_contract() -> None:
    assert ExecuteScript.Goal.get_fields_and_field_types() == {
        "full_json": "string",
        "dry_run": "boolean",
    }
    assert ExecuteScript.Result.get_fields_and_field_types() == {
        "success": "boolean",
        "error_message": "string",
        "error_code": "string",
        "completed_steps": "uint32",
        "total_steps": "uint32",
    }
    assert ExecuteScript.Feedback.get_fields_and_field_types() == {
        "current_step": "uint32",
        "total_steps": "uint32",
        "current_action": "string",
        "progress_percentage": "float",
        "status_message": "string",
        "current_gripper": "string",
        "unit_index": "uint32",
        "cache_status": "string",
    }


def test_goal_carries_a_real_script_unchanged(samples_dir: Path) -> None:
    full_json = (samples_dir / "FULL_EXPERIMENT_RUN.json").read_text(encoding="utf-8")
    goal = ExecuteScript.Goal(full_json=full_json, dry_run=True)

    back = round_trip(goal)

    assert back == goal
    assert back.dry_run is True
    assert json.loads(back.full_json) == json.loads(full_json)


def test_non_ascii_text_survives_as_utf8() -> None:
    goal = ExecuteScript.Goal(full_json='{"note": "10 µL — ok"}', dry_run=False)
    assert round_trip(goal).full_json == '{"note": "10 µL — ok"}'


def test_feedback_round_trip_keeps_every_field() -> None:
    feedback = ExecuteScript.Feedback(
        current_step=4,
        total_steps=12,
        current_action="batch[3]: moveto, moveto, end_effector",
        progress_percentage=25.0,
        status_message="executing unit 2",
        current_gripper="epick",
        unit_index=2,
        cache_status="HIT",
    )
    assert round_trip(feedback) == feedback


def test_progress_percentage_is_single_precision() -> None:
    feedback = ExecuteScript.Feedback(progress_percentage=100.0 / 3.0)
    back = round_trip(feedback)
    assert back.progress_percentage == float(np.float32(100.0 / 3.0))
    assert back.progress_percentage != 100.0 / 3.0


def test_failed_result_round_trip_keeps_the_error_prefix() -> None:
    result = ExecuteScript.Result(
        success=False,
        error_message="REPLAY_TIMEOUT: controller did not finish within 120 s",
        error_code="REPLAY_TIMEOUT",
        completed_steps=7,
        total_steps=12,
    )
    back = round_trip(result)
    assert back == result
    assert back.error_message.startswith("REPLAY_TIMEOUT:")


def test_wire_messages_of_the_action_wrap_goal_feedback_and_result() -> None:
    """What rclpy's ActionServer actually sends: goal/feedback/result inside the action's
    SendGoal, FeedbackMessage and GetResult types, keyed by the goal UUID."""
    goal_id = UUID(uuid=list(uuid.uuid4().bytes))

    request = ExecuteScript.Impl.SendGoalService.Request(
        goal_id=goal_id, goal=ExecuteScript.Goal(full_json="{}", dry_run=True)
    )
    assert round_trip(request) == request

    feedback_message = ExecuteScript.Impl.FeedbackMessage(
        goal_id=goal_id, feedback=ExecuteScript.Feedback(unit_index=3, cache_status="MISS")
    )
    back = round_trip(feedback_message)
    assert bytes(back.goal_id.uuid) == bytes(goal_id.uuid)
    assert back.feedback.unit_index == 3 and back.feedback.cache_status == "MISS"

    response = ExecuteScript.Impl.GetResultService.Response(
        status=GoalStatus.STATUS_CANCELED,
        result=ExecuteScript.Result(
            success=False, error_message="cancelled while paused", error_code="CANCELED"
        ),
    )
    assert round_trip(response) == response


def test_execution_state_names_every_orchestrator_state() -> None:
    names = {"IDLE", "RUNNING", "COMPLETING_TASK", "PAUSED", "CANCELING", "FAULTED"}
    assert {name: getattr(ExecutionState, name) for name in names} == {name: name for name in names}

    state = ExecutionState(
        stamp=Time(sec=1_700_000_000, nanosec=5),
        state=ExecutionState.COMPLETING_TASK,
        goal_id="goal-3",
        current_step=5,
        total_steps=9,
        unit_index=2,
        message="pause requested; completing the current unit",
    )
    assert round_trip(state) == state


def test_tree_snapshot_round_trip_keeps_behaviours_in_order() -> None:
    root, unit, leaf = (str(uuid.uuid4()) for _ in range(3))
    behaviours = [
        BehaviourStatus(
            id=root, name="script", type="Sequence", parent_id="", status="RUNNING", is_active=True
        ),
        BehaviourStatus(
            id=unit,
            name="unit 1: batch[2]: moveto, end_effector",
            type="Sequence",
            parent_id=root,
            status=BehaviourStatus.RUNNING,
            is_active=True,
        ),
        BehaviourStatus(
            id=leaf,
            name="ExecuteSolution",
            type="ExecuteSolution",
            parent_id=unit,
            status=BehaviourStatus.RUNNING,
            message="executing segment 1/2",
            is_active=True,
        ),
    ]
    snapshot = TreeSnapshot(
        stamp=Time(sec=12, nanosec=500_000_000),
        goal_id="goal-1",
        state=BehaviourStatus.RUNNING,
        unit_index=1,
        final=False,
        tip_id=leaf,
        behaviours=behaviours,
        tree_json=json.dumps({"id": root, "children": [unit]}),
    )

    back = round_trip(snapshot)

    assert back == snapshot
    assert [b.id for b in back.behaviours] == [root, unit, leaf]
    assert back.behaviours[2].parent_id == unit
    assert back.tip_id == leaf


def test_empty_snapshot_of_a_rejected_goal_round_trips() -> None:
    snapshot = TreeSnapshot(goal_id="goal-9", state=BehaviourStatus.INVALID, final=True)
    back = round_trip(snapshot)
    assert back == snapshot
    assert list(back.behaviours) == []

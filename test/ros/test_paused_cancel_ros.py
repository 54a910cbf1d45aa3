"""The node's cancel of a paused goal says where the goal ended and that the arm is at rest
(issue u41, item 4): in the CANCELING state's message and in the goal's result."""

from __future__ import annotations

import json
from pathlib import Path

PAUSED_AT = "at unit 2 of 3, pause (1 of 3 steps done)"


def test_a_paused_goal_cancelled_through_the_node_says_where_it_ended(
    ros_env: object, tmp_path: Path
) -> None:
    from ros_fixtures import NodeProcess, ready_client

    node = NodeProcess(ros_env, {"run_log_dir": str(tmp_path)})  # type: ignore[arg-type]
    node.start()
    try:
        with ready_client(node) as client:
            script = {
                "start_gripper": "none",
                "tasks": [
                    {"task_type": "moveto", "target": "tool_exchange_safe"},
                    {"task_type": "pause"},
                    {"task_type": "moveto", "target": "transport"},
                ],
            }
            since = client.states.count
            run = client.send(json.dumps(script))
            assert run.accepted, run.rejection
            assert client.wait_for_state("PAUSED", 120.0, since=since) is not None, node.output
            run.cancel()
            assert run.cancel_accepted
            result = run.wait(60.0)
            # The latched state topic keeps one message: a paused goal passes CANCELING on its way
            # to IDLE at once, so a client may see IDLE only. Where CANCELING arrived, its message
            # says where the goal ends; the result (below) says it always.
            canceling = client.wait_for_state("CANCELING", 1.0, since=since)
            if canceling is not None:
                assert canceling.message == (
                    f"cancel accepted: the goal is paused {PAUSED_AT}, so it ends there at once; "
                    "the arm is at rest"
                )
            assert run.status_name == "CANCELED" and result.completed_steps == 1
            assert result.error_message == f"cancelled while paused {PAUSED_AT}; the arm is at rest"
    finally:
        node.stop()

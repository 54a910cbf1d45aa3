"""``erobs-bt send`` prints a goal's feedback after "accepted", never before (issue 40, item 6).

A goal's feedback can reach the client before the server's accept answer does (the action's
feedback topic and its send_goal service are separate channels; an answer can also be lost,
test_ros_client_lost_answer.py). The server here is that test's hand-made action server,
which publishes one feedback of the accepted goal before answering and then holds the answer
back past the client's timeout, so the feedback is certainly first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from action_msgs.msg import GoalStatus, GoalStatusArray
from erobs_bt_interfaces.action import ExecuteScript
from ros_fixtures import REPO, RosEnvironment
from test_ros_client_lost_answer import SERVER, SilentServer

pytestmark = pytest.mark.ros


class EagerServer(SilentServer):
    """Accepts a goal, publishes its status and one feedback of it, then holds the answer."""

    async def _send_goal(self, request: Any, response: Any) -> Any:
        self.accepted.append(bytes(request.goal_id.uuid))
        status = GoalStatus(status=GoalStatus.STATUS_EXECUTING)
        status.goal_info.goal_id = request.goal_id
        self.status.publish(GoalStatusArray(status_list=[status]))
        deadline = time.monotonic() + 30.0  # the client's feedback reader matched, so none is lost
        while self.feedback.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        message = ExecuteScript.Impl.FeedbackMessage(goal_id=request.goal_id)
        message.feedback.status_message = "planning before the answer"
        self.feedback.publish(message)
        await self.released
        response.accepted = True
        return response


@pytest.fixture()
def server(ros_env: RosEnvironment) -> Iterator[EagerServer]:
    made = EagerServer(ros_env.domain_id)
    yield made
    made.close()


def test_send_prints_feedback_only_after_accepted(
    server: EagerServer, ros_env: RosEnvironment, tmp_path: Path
) -> None:
    script = tmp_path / "empty.json"
    script.write_text('{"tasks": []}', encoding="utf-8")
    env = {
        **ros_env.env,
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-m", "erobs_bt", "send", "--node", SERVER, "--timeout", "3", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines and lines[0].startswith("accepted execute"), done.stdout
    assert any("planning before the answer" in line for line in lines[1:]), done.stdout

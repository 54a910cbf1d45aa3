"""ErobsBtClient.send when the server's answer to a goal request does not come.

Fast DDS drops a service response to a client whose reply reader the server has not matched
yet; right after a node starts, the client can have discovered the server while the server
has not discovered it back. The goal then runs and its accept response is lost (seen in CI:
``goal request: no response within 10.0 s`` while the node's log said ``accepted``). Here a
server made of the action's plain services and topics accepts the goal, publishes its status
and its feedback, and holds the answer back past the client's timeout; the client must follow
the accepted goal from its status. A goal the status does not list still times out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from action_msgs.msg import GoalStatus, GoalStatusArray
from action_msgs.srv import CancelGoal
from erobs_bt_interfaces.action import ExecuteScript
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_action_status_default
from rclpy.task import Future
from ros_fixtures import RosEnvironment

from erobs_bt.backends.ros2_control.context import init_context
from erobs_bt.ros.client.client import ErobsBtClient

pytestmark = pytest.mark.ros

SERVER = "/silent/erobs_bt"
ACTION = f"{SERVER}/execute"


class SilentServer:
    """The ``execute`` action's services and topics, by hand: ``send_goal`` accepts a goal and
    publishes it as executing, then keeps its answer until :meth:`close` (as if lost);
    ``get_result`` publishes one feedback of the goal and answers ``SUCCEEDED``. With
    ``refuse`` a goal is not listed (and would be rejected)."""

    def __init__(self, domain_id: int) -> None:
        self.context = init_context(domain_id)
        self.node = Node("silent_server", context=self.context, start_parameter_services=False)
        group = ReentrantCallbackGroup()
        self.released: Future[None] = Future()
        self.refuse = False
        self.accepted: list[bytes] = []
        impl = ExecuteScript.Impl
        self.node.create_service(
            impl.SendGoalService, f"{ACTION}/_action/send_goal", self._send_goal, callback_group=group
        )
        self.node.create_service(
            impl.GetResultService, f"{ACTION}/_action/get_result", self._get_result, callback_group=group
        )
        self.node.create_service(
            CancelGoal, f"{ACTION}/_action/cancel_goal", lambda _rq, rs: rs, callback_group=group
        )
        self.status = self.node.create_publisher(
            GoalStatusArray, f"{ACTION}/_action/status", qos_profile_action_status_default
        )
        self.feedback = self.node.create_publisher(impl.FeedbackMessage, f"{ACTION}/_action/feedback", 10)
        self.executor = MultiThreadedExecutor(4, context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()

    async def _send_goal(self, request: Any, response: Any) -> Any:
        if not self.refuse:
            self.accepted.append(bytes(request.goal_id.uuid))
            status = GoalStatus(status=GoalStatus.STATUS_EXECUTING)
            status.goal_info.goal_id = request.goal_id
            self.status.publish(GoalStatusArray(status_list=[status]))
        await self.released
        response.accepted = not self.refuse
        return response

    def _get_result(self, request: Any, response: Any) -> Any:
        message = ExecuteScript.Impl.FeedbackMessage(goal_id=request.goal_id)
        message.feedback.status_message = "running"
        self.feedback.publish(message)
        response.status = GoalStatus.STATUS_SUCCEEDED
        response.result.success = True
        return response

    def close(self) -> None:
        self.released.set_result(None)
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()
        self._thread.join(10.0)


@pytest.fixture()
def server(ros_env: RosEnvironment) -> Iterator[SilentServer]:
    made = SilentServer(ros_env.domain_id)
    yield made
    made.close()


def test_a_goal_accepted_without_an_answer_is_followed_from_its_status(server: SilentServer) -> None:
    with ErobsBtClient(SERVER, domain_id=server.context.get_domain_id()) as client:
        run = client.send('{"tasks": []}', timeout=3.0)
        assert run.accepted
        assert server.accepted and bytes(run._goal_handle.goal_id.uuid) == server.accepted[0]
        result = run.wait(30.0)
        assert run.status_name == "SUCCEEDED" and result.success
        assert run.feedback.wait_for(lambda f: f.status_message == "running", 30.0) is not None


def test_a_goal_the_status_does_not_list_still_times_out(server: SilentServer) -> None:
    server.refuse = True
    with (
        ErobsBtClient(SERVER, domain_id=server.context.get_domain_id()) as client,
        pytest.raises(TimeoutError, match=r"goal request: no response within 1\.0 s"),
    ):
        client.send('{"tasks": []}', timeout=1.0)

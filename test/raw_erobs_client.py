"""A raw EROBS-style client, run as its own process by test_erobs_api.py.

It imports only rclpy, the action protocol's ``action_msgs``, ``beambot_interfaces``,
``std_srvs`` and ``std_msgs``, as EROBS's GUI, MCP server and Bluesky wrapper do, and
talks to the ``beambot_*`` names under a namespace:

1. runs ``argv[2]`` (a multi-unit script): pauses it through ``beambot/pause`` after the
   first feedback, sees ``PAUSED`` on ``beambot/execution_state``, is refused a second
   pause ("Already paused"), receives the feedback republished while paused, resumes it
   through ``beambot/resume`` and reads the result fields;
2. is refused a resume when nothing is paused ("Not currently paused");
3. runs ``argv[3]`` (a script with a ``pause`` step), waits for ``PAUSED`` and cancels every
   goal with an empty ``CancelGoal`` request (what EROBS's ``stop_robot`` sends).

Prints one JSON object with what it saw; every wait has a timeout (exit 1 on one).
Usage: ``python raw_erobs_client.py /cell1 SCRIPT1_JSON SCRIPT2_JSON``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import rclpy
from action_msgs.msg import GoalInfo
from action_msgs.srv import CancelGoal
from beambot_interfaces.action import MTCExecution
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
from std_srvs.srv import Trigger

TIMEOUT = 60.0


class Seen:
    """Messages of one kind, with a wait for a condition."""

    def __init__(self) -> None:
        self.items: list = []
        self.cond = threading.Condition()

    def add(self, item) -> None:
        with self.cond:
            self.items.append(item)
            self.cond.notify_all()

    def wait(self, predicate, since: int = 0, what: str = ""):
        deadline = time.monotonic() + TIMEOUT
        with self.cond:
            while True:
                for item in self.items[since:]:
                    if predicate(item):
                        return item
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out waiting for {what}")
                self.cond.wait(left)


def call(future):
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(TIMEOUT):
        raise TimeoutError("no reply")
    return future.result()


def main() -> int:
    ns, first_script, second_script = sys.argv[1], sys.argv[2], sys.argv[3]
    rclpy.init()
    node = rclpy.create_node("raw_erobs_client")
    action = ActionClient(node, MTCExecution, f"{ns}/beambot_execution")
    pause = node.create_client(Trigger, f"{ns}/beambot/pause")
    resume = node.create_client(Trigger, f"{ns}/beambot/resume")
    cancel_all = node.create_client(CancelGoal, f"{ns}/beambot_execution/_action/cancel_goal")
    states, grippers = Seen(), Seen()
    node.create_subscription(String, f"{ns}/beambot/execution_state", lambda m: states.add(m.data), 10)
    latched = QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    node.create_subscription(String, f"{ns}/beambot/current_gripper", lambda m: grippers.add(m.data), latched)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spinning = threading.Event()
    spinning.set()

    def spin() -> None:
        while spinning.is_set():
            executor.spin_once(timeout_sec=0.05)

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()

    def in_spin(request: Any) -> Any:
        # Action requests from the spin thread: Jazzy's rclpy (7.x) files a request's future
        # only after sending it and drops an answer that the spin thread takes before that.
        return call(executor.create_task(request))

    report: dict = {}
    try:
        if not action.wait_for_server(timeout_sec=TIMEOUT):
            raise TimeoutError("beambot_execution not found")
        for client in (pause, resume, cancel_all):
            if not client.wait_for_service(timeout_sec=TIMEOUT):
                raise TimeoutError(f"{client.srv_name} not found")
        report["gripper_on_connect"] = grippers.wait(lambda g: True, what="the latched gripper")

        # 1. run, pause, resume, result
        feedback = Seen()
        goal = call(
            in_spin(
                lambda: action.send_goal_async(
                    MTCExecution.Goal(full_json=first_script, dry_run=False),
                    feedback_callback=lambda m: feedback.add(m.feedback),
                )
            )
        )
        report["accepted"] = goal.accepted
        result_future = in_spin(goal.get_result_async)
        feedback.wait(lambda f: True, what="the first feedback")
        states_before = len(states.items)
        reply = call(pause.call_async(Trigger.Request()))
        report["pause"] = [reply.success, reply.message]
        states.wait(lambda s: s == "PAUSED", since=states_before, what="PAUSED")
        again = call(pause.call_async(Trigger.Request()))
        report["pause_again"] = [again.success, again.message]

        # While paused the last feedback is republished every 0.5 s: wait for three feedback
        # messages announcing the pause (the one sent when it took effect, then repeats).
        def paused_feedback(_f: object = None) -> list:
            return [f for f in feedback.items if f.status_message.startswith("paused before")]

        with feedback.cond:
            if not feedback.cond.wait_for(lambda: len(paused_feedback()) >= 3, TIMEOUT):
                raise TimeoutError("no feedback republished while paused")
        repeats = paused_feedback()
        report["republished_while_paused"] = len(repeats)
        report["republished_identical"] = all(
            (f.current_step, f.status_message, f.progress_percentage)
            == (repeats[0].current_step, repeats[0].status_message, repeats[0].progress_percentage)
            for f in repeats
        )
        reply = call(resume.call_async(Trigger.Request()))
        report["resume"] = [reply.success, reply.message]
        states_before_end = len(states.items)
        response = call(result_future)
        r = response.result
        report["first"] = {
            "status": response.status,
            "success": r.success,
            "error_message": r.error_message,
            "completed_steps": r.completed_steps,
            "total_steps": r.total_steps,
            "detected_position": list(r.detected_position),
            "detected_orientation": list(r.detected_orientation),
            "last_feedback": {
                "current_step": feedback.items[-1].current_step,
                "current_action": feedback.items[-1].current_action,
                "progress_percentage": feedback.items[-1].progress_percentage,
                "current_gripper": feedback.items[-1].current_gripper,
            },
        }
        states.wait(lambda s: s == "IDLE", since=states_before_end, what="IDLE after the goal")
        report["idle_after_goal"] = True

        # 2. resume with nothing paused
        reply = call(resume.call_async(Trigger.Request()))
        report["resume_not_paused"] = [reply.success, reply.message]

        # 3. pause step, then cancel everything with an empty CancelGoal request
        states_before = len(states.items)
        goal = call(
            in_spin(lambda: action.send_goal_async(MTCExecution.Goal(full_json=second_script, dry_run=False)))
        )
        result_future = in_spin(goal.get_result_async)
        states.wait(lambda s: s == "PAUSED", since=states_before, what="PAUSED at the pause step")
        cancel = call(cancel_all.call_async(CancelGoal.Request(goal_info=GoalInfo())))
        report["cancel_all"] = {
            "return_code": cancel.return_code,
            "goals_canceling": len(cancel.goals_canceling),
        }
        response = call(result_future)
        r = response.result
        report["second"] = {
            "status": response.status,
            "success": r.success,
            "error_message": r.error_message,
            "completed_steps": r.completed_steps,
            "total_steps": r.total_steps,
        }
        report["imported_erobs_bt"] = any(name.startswith("erobs_bt") for name in sys.modules)
    finally:
        spinning.clear()
        spinner.join()
        action.destroy()
        node.destroy_node()
        rclpy.try_shutdown()
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

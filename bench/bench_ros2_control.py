"""One-point trajectory round trip: the ros2_control backend → erobs_bt_sim_hardware, beside a raw
rclpy FollowJointTrajectory client/server pair, measured in the same run.

What is compared (both over loopback in one private ROS domain, server in its own process):

* **engine**: :meth:`Ros2ControlBackend.execute` of a solution holding one arm segment with
  one point (the live state at ``t = 0``) until its future completes. That is the whole
  path a unit's trajectory takes: the backend's worker thread, the start-state check, the
  goal message, the goal response, the hardware node (goal checks, the simulated
  controller playing the point, goal tolerance, its event log) and the result.
* **raw**: the same ``FollowJointTrajectory`` goal from a bare ``rclpy`` ``ActionClient``
  (callbacks on a spinning executor, waiting on a ``threading.Event``) to a bare
  ``ActionServer`` whose execute callback succeeds at once.

The ratio engine / raw is the engine's overhead over what ROS 2 itself costs (target ≤ 1.5).

Run alone: ``scripts/env.sh .venv/bin/python bench/bench_ros2_control.py``.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any

from bench_ros import ros_domain, ros_process
from common import fmt_ms, markdown_table, median, p90
from ros_fixtures import REPO

RAW_ACTION = "/raw_controller/follow_joint_trajectory"
ROUND_TRIPS = 60
WARM_UP = 5
TIMEOUT = 30.0


def raw_server() -> int:
    """The raw pair's server: an ActionServer whose execute callback succeeds at once."""
    import rclpy
    from control_msgs.action import FollowJointTrajectory
    from rclpy.action import ActionServer
    from rclpy.executors import ExternalShutdownException

    rclpy.init()
    node = rclpy.create_node("raw_fjt_server")

    def execute(goal_handle: Any) -> Any:
        goal_handle.succeed()
        return FollowJointTrajectory.Result(error_code=FollowJointTrajectory.Result.SUCCESSFUL)

    ActionServer(node, FollowJointTrajectory, RAW_ACTION, execute_callback=execute)
    print("raw server ready", flush=True)
    with contextlib.suppress(KeyboardInterrupt, ExternalShutdownException):
        rclpy.spin(node)
    return 0


def measure(domain_id: int) -> dict[str, list[float]]:
    """Median-able samples [s] of both round trips, interleaved in one run, in ``domain_id``
    (reserved by :func:`bench_ros.ros_domain`, whose variables the servers inherit)."""
    from control_msgs.action import FollowJointTrajectory

    from erobs_bt.backends.base import ArmSegment, Solution, TrajectoryPoint
    from erobs_bt.backends.ros2_control.action_client import ActionClient
    from erobs_bt.backends.ros2_control.arm import trajectory_goal
    from erobs_bt.backends.ros2_control.backend import Ros2ControlBackend
    from erobs_bt.backends.ros2_control.config import load_hardware_config
    from erobs_bt.backends.ros2_control.link import RosLink
    from erobs_bt.world.config import load_cell

    hardware_cmd = [sys.executable, "-m", "erobs_bt.doubles.sim_hardware", "--speed", "1000"]
    raw_cmd = [sys.executable, __file__, "--raw-server"]
    with ros_process(hardware_cmd, "erobs_bt_sim_hardware ready"), ros_process(raw_cmd, "raw server ready"):
        config = load_hardware_config(REPO / "config" / "ur5e_ros2_control.yaml")
        backend = Ros2ControlBackend(load_cell(), config, domain_id=domain_id)
        # The raw pair's client: a node of its own with a spinning executor, as the backend has.
        link = RosLink("raw_fjt_client", domain_id=domain_id, start=False)
        client: ActionClient = ActionClient(link.node, FollowJointTrajectory, RAW_ACTION)
        link.start()  # after the action client exists (RosLink.start)
        try:
            assert client.wait_for_server(TIMEOUT), "raw server not found"
            assert backend.arm.wait_for_state(TIMEOUT), "no joint state from the hardware node"

            def one_point() -> Solution:
                here = backend.joint_positions()
                assert here is not None
                point = TrajectoryPoint(tuple(here), (0.0,) * 6, (0.0,) * 6, 0.0)
                return Solution((ArmSegment(0, (point,)),), backend.model_revision())

            def engine() -> float:
                solution = one_point()
                began = time.perf_counter()
                backend.execute(solution, replay=False).result(TIMEOUT)
                return time.perf_counter() - began

            def raw() -> float:
                goal = trajectory_goal(one_point().segments[0], config)  # type: ignore[arg-type]
                done = threading.Event()
                outcome: list[Any] = []
                began = time.perf_counter()

                def on_goal(future: Any) -> None:
                    handle = future.result()
                    handle.get_result_async().add_done_callback(
                        lambda f: (outcome.append(f.result()), done.set())
                    )

                client.send_goal_async(goal).add_done_callback(on_goal)
                assert done.wait(TIMEOUT), "raw round trip timed out"
                elapsed = time.perf_counter() - began
                assert outcome[0].result.error_code == 0
                return elapsed

            for _ in range(WARM_UP):
                engine()
                raw()
            samples: dict[str, list[float]] = {"engine": [], "raw": []}
            for _ in range(ROUND_TRIPS):
                samples["engine"].append(engine())
                samples["raw"].append(raw())
            return samples
        finally:
            backend.close()
            client.destroy()
            link.close()


def report() -> str:
    """The section of BENCHMARKS.md."""
    with ros_domain() as domain_id:
        samples = measure(domain_id)
    engine, raw = samples["engine"], samples["raw"]
    rows = [
        [
            "engine: `Ros2ControlBackend.execute` → erobs_bt_sim_hardware",
            fmt_ms(median(engine)),
            fmt_ms(p90(engine)),
        ],
        ["raw rclpy ActionClient → ActionServer (succeeds at once)", fmt_ms(median(raw)), fmt_ms(p90(raw))],
    ]
    ratio = median(engine) / median(raw)
    return (
        "## ros2_control backend: one-point trajectory round trip\n\n"
        f"{ROUND_TRIPS} round trips each, interleaved, after {WARM_UP} warm-up ones; both servers are "
        "separate processes in one private domain over loopback. A one-point FollowJointTrajectory goal "
        "(the live state at t = 0) from goal sent to result received.\n\n"
        + markdown_table(["path", "median", "p90"], rows)
        + f"\n\nengine / raw (medians): **{ratio:.2f}×** (target ≤ 1.5×). The engine's path also checks "
        "the start state against `/joint_states`, and the hardware node plays the point on the simulated "
        "controller, checks the goal tolerance and logs two events."
    )


if __name__ == "__main__":
    if "--raw-server" in sys.argv:
        sys.exit(raw_server())
    print(report())

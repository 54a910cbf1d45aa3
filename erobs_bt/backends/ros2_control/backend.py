"""The ``ros2_control`` assembly: the embedded planner on the cell model, a real (or simulated)
arm and tools over ROS 2 (the interfaces are listed in :mod:`erobs_bt.backends.ros2_control`).
"""

from __future__ import annotations

import time

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.backends.ros2_control.arm import FollowJointTrajectoryArm
from erobs_bt.backends.ros2_control.bringup import Bringup, Check
from erobs_bt.backends.ros2_control.config import HardwareConfig, check_against_cell
from erobs_bt.backends.ros2_control.link import RosLink
from erobs_bt.backends.ros2_control.tools import DashboardPlay, RosTool, SetIOChanger, SetIOService
from erobs_bt.backends.stack import MotionStack
from erobs_bt.planning.planner import CellPlanner, PlannerConfig
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.tools import initial_tool_state, mounted_at_start
from erobs_bt.world.vision import CalibratedMarkerDetector

#: [s] for the arm to be at rest before the bringup is relaunched (it normally already is: the
#: exchange's last trajectory succeeded within the controller's stopped-velocity tolerance).
REST_WAIT = 10.0


def Ros2ControlBackend(
    cell: CellConfig,
    hardware: HardwareConfig,
    *,
    gripper: str | None = None,
    planner_config: PlannerConfig | None = None,
    seed: int | None = None,
    wait_for_state: float = 10.0,
    link: RosLink | None = None,
    domain_id: int | None = None,
    namespace: str | None = None,
) -> MotionStack:
    """``backend: ros2_control``: plans with the embedded planner on the cell model; executes on
    a ros2_control arm.

    Planning, the robot model revision, the tool bookkeeping (held parts for collision
    checking, the pipettor's volume), tool exchange and vision are the motion stack's, as
    in the embedded cell; what moves is the robot behind the interfaces of ``hardware``.
    Vision steps use the cell's calibrated marker poses
    (:class:`~erobs_bt.world.vision.CalibratedMarkerDetector`). Faults are injected at the
    hardware (``erobs_bt_sim_hardware --faults``), none here.

    Args:
        cell: the cell description (its model, docks, markers, parts).
        hardware: the cell's ROS interfaces
            (:func:`~erobs_bt.backends.ros2_control.config.load_hardware_config`).
        gripper: the tool attached at start (default: the cell's loose tool); a goal's
            ``start_gripper`` overrides it, as the operator's statement of what is mounted.
        planner_config: planner settings (``seed`` overrides its ``ompl_seed``).
        seed: seed of the sampling planner.
        wait_for_state: [s] to wait at start-up for the first joint state (0: do not wait).
        link: an existing :class:`RosLink` (closed with the stack), or ``None``.
        domain_id: the ROS domain of the stack's own link (without ``link``); ``None``
            reads ``ROS_DOMAIN_ID`` from the environment.
        namespace: the namespace of the stack's own link node (without ``link``), e.g.
            the ``erobs_bt`` node's own; ``None``: ``/``.

    With a ``bringup`` section in ``hardware``, the cell's bringup is launched here for the tool
    attached at start, relaunched after every tool exchange, and stopped with the stack
    (:mod:`~erobs_bt.backends.ros2_control.bringup`).

    Raises:
        ValueError: the hardware config does not fit the cell (names the key).
        MotionError: the bringup did not start, or the cell was not back in time.
    """
    check_against_cell(hardware, cell)
    tools = initial_tool_state(cell, gripper if gripper is not None else mounted_at_start(cell))
    planner = CellPlanner(cell, tools, config=planner_config, seed=seed)
    detector = CalibratedMarkerDetector(cell)
    own = link if link is not None else RosLink(domain_id=domain_id, namespace=namespace, start=False)
    arm = FollowJointTrajectoryArm(own, hardware)
    io = SetIOService(own, hardware)
    tool_drivers = {name: RosTool(name, own, hardware, io) for name in cell.grippers}
    launch = hardware.bringup
    dashboard = (
        DashboardPlay(own, launch.play_service) if launch is not None and launch.play_service else None
    )
    own.start()  # after the clients exist (RosLink.start)
    bringup: Bringup | None = None
    if launch is not None:

        def comeback(tool: str) -> list[Check]:
            driver = tool_drivers.get(tool)
            own_checks = driver.comeback_checks() if driver is not None else []
            return [*arm.comeback_checks(), io.comeback_check(), *own_checks]

        def at_rest(what: str) -> None:
            if not arm.wait_for_rest(time.monotonic(), REST_WAIT):
                raise MotionError(
                    ErrorCode.EXECUTION_FAILED,
                    f"{what}: the arm is not at rest within {REST_WAIT:g} s ({hardware.joint_states}): "
                    "the bringup is not relaunched",
                )

        bringup = Bringup(
            launch,
            comeback,
            gone=lambda: [arm.server_check(), io.comeback_check()],
            dashboard=dashboard,
            before_relaunch=at_rest,
        )
    try:
        if bringup is not None:
            bringup.launch(tools.gripper, what="start-up")
        stack = MotionStack(
            cell,
            planner=planner,
            arm=arm,
            tool_drivers=tool_drivers,
            changer=SetIOChanger(io, hardware, bringup),
            detector=detector,
            tool_state=tools,
            publishes_joint_states=True,
            name="ros2_control",
            label="ros2_control backend",
            on_close=(own.close,) if bringup is None else (bringup.stop, own.close),
        )
    except BaseException:
        if bringup is not None:
            bringup.stop()
        own.close()
        raise
    if wait_for_state > 0 and not arm.wait_for_state(wait_for_state):
        # On the node's ROS logger too, so it shows in the node's output.
        own.node.get_logger().warning(
            f"no joint state on {hardware.joint_states} within {wait_for_state:.1f} s; "
            "planning needs the robot's live state"
        )
    return stack

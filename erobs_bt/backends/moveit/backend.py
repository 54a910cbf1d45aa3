"""The ``moveit`` assembly: plans and executes through the cell's running ``move_group``.

A motion stack (:class:`~erobs_bt.backends.stack.MotionStack`) of the MoveIt planner part
(:class:`~erobs_bt.backends.moveit.planner.MoveItPlanner`), the ExecuteTrajectory arm driver
(:class:`~erobs_bt.backends.moveit.arm.ExecuteTrajectoryArm`), the ``ros2_control`` backend's
tool drivers (GripperCommand, SetIO, the pipettor action; MoveIt does not command tools) and
the cell's calibrated marker poses for vision steps. The tool bookkeeping, tool exchange,
batching into one connected sequence, plan-ahead (across tool exchanges too) and the replay
rules are the stack's, as on every backend.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from erobs_bt.backends.moveit.arm import ExecuteTrajectoryArm
from erobs_bt.backends.moveit.model import MoveItConfig
from erobs_bt.backends.moveit.planner import MoveItPlanner
from erobs_bt.backends.parts import ToolChanger, ToolDriver
from erobs_bt.backends.ros2_control.config import HardwareConfig, check_against_cell
from erobs_bt.backends.ros2_control.link import RosLink
from erobs_bt.backends.ros2_control.tools import RosTool, SetIOChanger, SetIOService
from erobs_bt.backends.stack import MotionStack
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.tools import initial_tool_state, mounted_at_start
from erobs_bt.world.vision import CalibratedMarkerDetector

_LOG = logging.getLogger(__name__)
#: The name of the ``moveit`` backend's own ROS node.
MOVEIT_LINK_NODE_NAME = "erobs_bt_moveit"


def MoveItBackend(
    cell: CellConfig,
    hardware: HardwareConfig | None,
    config: MoveItConfig | None = None,
    *,
    tools: tuple[Mapping[str, ToolDriver], ToolChanger] | None = None,
    gripper: str | None = None,
    wait_for_state: float = 10.0,
    link: RosLink | None = None,
    domain_id: int | None = None,
    namespace: str | None = None,
) -> MotionStack:
    """``backend: moveit``: a motion stack planning with move_group and executing through it.

    Args:
        cell: the cell description (tools and their geometry, docks, markers, parts).
        hardware: the cell's tool interfaces (GripperCommand, SetIO, pipettor; its ``arm``
            section is not used: the arm moves through move_group); ``None`` with ``tools``.
        config: move_group's names and the planning settings (default: MoveIt's names).
        tools: the tool drivers (tool name -> driver, for every tool of the cell) and the
            changer to use instead of ``hardware``'s (the simulated tools of a simulated
            move_group, ``tools: simulated``).
        gripper: the tool attached at start (default: the cell's loose tool); a goal's
            ``start_gripper`` overrides it.
        wait_for_state: [s] to wait at start-up for the first joint state (0: do not wait).
        link: an existing :class:`RosLink` (closed with the stack), or ``None``.
        domain_id: the ROS domain of the stack's own link (without ``link``).
        namespace: the namespace of the stack's own link node (without ``link``).

    Raises:
        ValueError: the hardware config does not fit the cell (names the key), or neither
            ``hardware`` nor ``tools`` is given.
    """
    if tools is None:
        if hardware is None:
            raise ValueError("moveit backend: give the hardware YAML (tool interfaces) or simulated tools")
        check_against_cell(hardware, cell)
    moveit = config if config is not None else MoveItConfig()
    state = initial_tool_state(cell, gripper if gripper is not None else mounted_at_start(cell))
    own = (
        link
        if link is not None
        else RosLink(MOVEIT_LINK_NODE_NAME, domain_id=domain_id, namespace=namespace, start=False)
    )
    planner = MoveItPlanner(cell, own, moveit)
    arm = ExecuteTrajectoryArm(own, moveit)
    if tools is not None:
        tool_drivers, changer = tools
    else:
        assert hardware is not None
        io = SetIOService(own, hardware)
        tool_drivers = {name: RosTool(name, own, hardware, io) for name in cell.grippers}
        changer = SetIOChanger(io, hardware)
        if hardware.bringup is not None:
            # The bringup would restart move_group itself: not launched from this backend.
            _LOG.warning(
                "%s: bringup: launched by the ros2_control backend only; with backend moveit the "
                "cell's bringup is someone else's (nothing is relaunched after a tool exchange)",
                hardware.source,
            )
    own.start()  # after the action clients exist (RosLink.start)
    stack = MotionStack(
        cell,
        planner=planner,
        arm=arm,
        tool_drivers=tool_drivers,
        changer=changer,
        detector=CalibratedMarkerDetector(cell),
        tool_state=state,
        publishes_joint_states=True,
        name="moveit",
        label="moveit backend",
        on_close=(own.close,),
        scene_owner=moveit.name(moveit.node_name),
    )
    if wait_for_state > 0 and not arm.wait_for_state(wait_for_state):
        own.node.get_logger().warning(
            f"no joint state on {moveit.name('joint_states')} within {wait_for_state:.1f} s; "
            "planning needs the robot's live state"
        )
    return stack

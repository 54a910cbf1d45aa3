"""Create a motion backend by name (the ``backend`` ROS parameter, the CLI ``--backend``).

``sim`` and ``ros2_control`` are two assemblies of the one motion stack
(:class:`~erobs_bt.backends.stack.MotionStack`) from parts (:mod:`erobs_bt.backends.parts`);
no backend inherits from another.

Kinds:
    ``sim`` — the embedded simulated UR5e cell (default): the embedded planner, the
    simulated controller, tools and fault injection
    (:func:`erobs_bt.backends.sim.backend.SimBackend`);
    ``ros2_control`` — the embedded planner against the cell model and the live
    ``/joint_states``, executing over ``control_msgs/action/FollowJointTrajectory`` and the
    gripper, IO and pipettor interfaces of a real cell (ur_robot_driver) or of the simulated
    hardware node ``erobs_bt_sim_hardware``
    (:func:`erobs_bt.backends.ros2_control.backend.Ros2ControlBackend`);
    ``moveit`` — plans with the cell's running ``move_group`` (MotionPlanRequest: Pilz PTP,
    then OMPL; GetCartesianPath) and executes through its ``execute_trajectory`` action; the
    tools through the ``ros2_control`` backend's drivers
    (:func:`erobs_bt.backends.moveit.backend.MoveItBackend`);
    ``scripted`` — the deterministic scripted backend (engine dry runs, tests).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI imports BACKEND_KINDS for --backend; `validate` needs no backend
    from erobs_bt.backends.base import (
        FitsCups,
        HasArm,
        HasCell,
        KnowsIfResettable,
        KnowsSceneOwner,
        MotionBackend,
        PlansAcross,
        PlansChained,
        ReportsFinalPlan,
        ReportsPlanProgress,
        TracksTools,
        WatchesWorld,
    )
    from erobs_bt.backends.scripted import ScriptedBackend
    from erobs_bt.backends.stack import MotionStack
    from erobs_bt.world.cell import CellConfig

BACKEND_KINDS = ("sim", "ros2_control", "moveit", "scripted")


def create_backend(
    kind: str,
    *,
    cell: CellConfig | None = None,
    speed: float = 1.0,
    faults: Path | None = None,
    hardware: Path | None = None,
    ros_namespace: str | None = None,
    moveit: Path | None = None,
) -> MotionBackend:
    """Build a backend.

    Args:
        kind: one of :data:`BACKEND_KINDS`.
        cell: the cell, loaded once by the caller (:func:`erobs_bt.world.config.load_cell`;
            :func:`erobs_bt.session.build_engine` does); ``None``: the packaged
            ``config/cell.yaml``, loaded here (``scripted`` needs none).
        speed: simulated-time factor of the sim controller (1.0 = real time).
        faults: fault-injection YAML for the sim backend, or ``None`` (the ``ros2_control``
            backend takes none: faults are injected at the hardware node).
        hardware: the ``ros2_control`` backend's hardware YAML (default: the packaged
            ``config/ur5e_ros2_control.yaml``); the ``moveit`` backend's tools use it too. For
            a cell read from an EROBS beamline file, what EROBS's own files say about the
            hardware replaces its values
            (:func:`~erobs_bt.backends.ros2_control.erobs_files.hardware_for_cell`).
        ros_namespace: the namespace of the ``ros2_control`` backend's own ROS node
            (``erobs_bt_ros2_control``; the ``erobs_bt`` node passes its own); ``None``: ``/``.
        moveit: the ``moveit`` backend's YAML (default: the packaged ``config/moveit.yaml``).

    Raises:
        ValueError: unknown kind or invalid configuration (the message names the file and key).
    """
    if kind == "scripted":
        from erobs_bt.backends.scripted import ScriptedBackend

        return ScriptedBackend()
    if kind == "sim":
        from erobs_bt.backends.sim.backend import SimBackend

        return SimBackend(_cell_or_default(cell), speed=speed, faults=faults)
    if kind == "ros2_control":
        from erobs_bt.backends.ros2_control.backend import Ros2ControlBackend
        from erobs_bt.backends.ros2_control.config import load_hardware_config
        from erobs_bt.backends.ros2_control.erobs_files import hardware_for_cell
        from erobs_bt.paths import config_file

        if faults is not None:
            raise ValueError(
                "faults: the ros2_control backend injects no faults itself; "
                "give them to the hardware node (erobs_bt_sim_hardware --faults)"
            )
        cell_config = _cell_or_default(cell)
        hardware_config = hardware_for_cell(
            load_hardware_config(hardware if hardware is not None else config_file("ur5e_ros2_control.yaml")),
            cell_config,
        )
        return Ros2ControlBackend(cell_config, hardware_config, namespace=ros_namespace)
    if kind == "moveit":
        from erobs_bt.backends.moveit.backend import MoveItBackend
        from erobs_bt.backends.moveit.model import load_moveit_config
        from erobs_bt.backends.ros2_control.config import load_hardware_config
        from erobs_bt.backends.ros2_control.erobs_files import hardware_for_cell
        from erobs_bt.paths import config_file

        if faults is not None:
            raise ValueError(
                "faults: the moveit backend injects no faults itself; "
                "give them to move_group's stand-in (erobs_bt_sim_move_group --faults)"
            )
        cell_config = _cell_or_default(cell)
        moveit_config = load_moveit_config(moveit if moveit is not None else config_file("moveit.yaml"))
        if moveit_config.tools == "simulated":
            from erobs_bt.backends.sim.tools import SimulatedChanger, SimulatedTool

            simulated = ({name: SimulatedTool(name) for name in cell_config.grippers}, SimulatedChanger())
            return MoveItBackend(cell_config, None, moveit_config, tools=simulated, namespace=ros_namespace)
        hardware_config = hardware_for_cell(
            load_hardware_config(hardware if hardware is not None else config_file("ur5e_ros2_control.yaml")),
            cell_config,
        )
        return MoveItBackend(cell_config, hardware_config, moveit_config, namespace=ros_namespace)
    raise ValueError(f"backend: unknown kind {kind!r} (available: {', '.join(BACKEND_KINDS)})")


def _cell_or_default(cell: CellConfig | None) -> CellConfig:
    """``cell``, or the packaged ``config/cell.yaml`` loaded (:func:`erobs_bt.world.config.load_cell`).

    Raises:
        CellConfigError: the packaged cell is invalid.
    """
    if cell is not None:
        return cell
    from erobs_bt.paths import config_file
    from erobs_bt.world.config import load_cell

    return load_cell(config_file("cell.yaml"))


if TYPE_CHECKING:
    # What each kind is, proved by mypy: the motion stack (``sim``, ``ros2_control``, ``moveit``)
    # is a MotionBackend with every optional ability of erobs_bt.backends.base.ABILITIES (only
    # the ``sim`` assembly's is ``resettable``; only the ``moveit`` assembly's scene has an
    # owner, move_group); the scripted double is a MotionBackend with none
    # (test/backends/test_backend_abilities.py checks the same at run time).

    def _abilities_of_the_stack(
        stack: MotionStack,
    ) -> tuple[
        MotionBackend,
        PlansAcross,
        PlansChained,
        ReportsFinalPlan,
        ReportsPlanProgress,
        WatchesWorld,
        HasCell,
        TracksTools,
        FitsCups,
        KnowsIfResettable,
        KnowsSceneOwner,
        HasArm,
    ]:
        return stack, stack, stack, stack, stack, stack, stack, stack, stack, stack, stack, stack

    def _abilities_of_the_scripted_double(double: ScriptedBackend) -> MotionBackend:
        return double

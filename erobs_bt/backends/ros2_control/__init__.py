"""The ``ros2_control`` backend: the embedded planner, a real (or simulated) arm over ROS 2.

A beamline cell runs a UR5e with ``ur_robot_driver`` (ros2_control) and has no MoveIt.
:func:`~erobs_bt.backends.ros2_control.backend.Ros2ControlBackend` assembles a motion stack
(:class:`~erobs_bt.backends.stack.MotionStack`) that plans exactly as the embedded cell does
(the embedded planner, :class:`~erobs_bt.planning.planner.CellPlanner`, with the cell model
of ``config/cell.yaml``), but from the live ``/joint_states`` of the robot, and executes
through the robot's standard interfaces:

==================  ===============================================  =========================
what                interface                                        default name
==================  ===============================================  =========================
arm trajectories    ``control_msgs/action/FollowJointTrajectory``    ``/scaled_joint_trajectory_
                                                                     controller/follow_joint_
                                                                     trajectory``
arm state           ``sensor_msgs/msg/JointState``                   ``/joint_states``
Hand-E, 2FG7        ``control_msgs/action/GripperCommand``           per gripper
ePick vacuum        ``ur_msgs/srv/SetIO`` tool digital output        ``/io_and_status_
tool voltage        ``ur_msgs/srv/SetIO`` ``FUN_SET_TOOL_VOLTAGE``   controller/set_io``
tool changer lock   ``ur_msgs/srv/SetIO`` digital output
pipettor            ``erobs_bt_interfaces/action/PipettorCommand``   ``/pipettor/command``
==================  ===============================================  =========================

All names, joint names (with the driver's prefix), tolerances, timeouts and the gripper
adapters come from a hardware YAML (``config/ur5e_ros2_control.yaml``, loaded and checked
by :func:`~erobs_bt.backends.ros2_control.config.load_hardware_config`).
``erobs_bt_sim_hardware`` (:mod:`erobs_bt.doubles.sim_hardware`) serves the same interfaces
from the simulated cell, so this backend runs here exactly as it runs on a cell.

Errors (docs/behaviour.md §3, the replay rules):

* the action server or service does not appear within ``timeouts.server``, the goal is
  rejected, the result is not SUCCEEDED or its ``error_code`` is not ``SUCCESSFUL`` (the
  message names the control_msgs error, e.g. ``PATH_TOLERANCE_VIOLATED (-4)``), a
  gripper does not reach its position, SetIO answers ``success: false``, the joint states
  stop during a trajectory (the driver is gone) → ``EXECUTION_FAILED:`` (not fatal: a
  replay then plans afresh);
* no goal response within ``timeouts.acceptance`` (10 s, as EROBS) or no result within
  the per-type timeout (``motion`` beyond the trajectory's duration, counted in trajectory
  time: wall time × the speed scaling; ``gripper``, ``pipettor``), or an arm still moving
  10 s after a trajectory failed → ``TIMEOUT:`` (``REPLAY_TIMEOUT:`` for a replay): fatal.

Before any trajectory is sent, fresh or replayed, the live state must be within
``start_tolerance`` (0.01 rad) of its first point, and the robot program must run (the
driver's ``robot_program_running``), else ``EXECUTION_FAILED:`` and nothing of the solution
runs (tool commands ahead of the first trajectory included); the controller itself has no
start check. :meth:`MotionStack.stop` (and a halted behaviour, a cancel-now, a timeout)
cancels the controller's goal; joint_trajectory_controller answers at once and holds the
measured position, and a trajectory that ended without success returns only once
``/joint_states`` show the arm at rest. The result's timeout counts trajectory time (wall time
× the driver's speed scaling: a pause is not a timeout). A SUCCEEDED goal whose arm is not at
its trajectory's end (another client's trajectory replaced it) fails. Each rule, with its
source: docs/conformance/ros2_control.md.

Tool exchange, as EROBS does it: the tool voltage is switched to 0 V before the first
docking motion, the changer is unlocked in the dock, and after a load the changer is
locked and the tool voltage switched back on, before the arm leaves the dock.

Vision steps use the cell's calibrated marker poses (the embedded cell's detector); their
motions go to the robot like every other motion. A camera pipeline is not part of this
backend.

Modules: :mod:`.config` (the hardware YAML, no ROS import), :mod:`.context` (joining ROS:
localhost discovery, a private rclpy context), :mod:`.link` (the backend's own node and the
blocking waits), :mod:`.arm` (FollowJointTrajectory arm driver), :mod:`.tools` (gripper,
changer and pipettor drivers), :mod:`.backend` (the assembly); import each name from the
module that defines it (this package's ``__init__`` exports nothing and imports no ROS module).

Threads: the backend has its own rclpy context and node (``erobs_bt_ros2_control``), spun
by a single-threaded executor whose callbacks never block; planning and execution run on
the motion stack's worker threads and block there on the ROS futures, never on the
tree's tick thread.
"""

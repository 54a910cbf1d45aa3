"""The ``moveit`` backend's parts: plans with a running ``move_group`` and executes through it.

* :class:`~erobs_bt.backends.moveit.planner.MoveItPlanner`: the planner part
  (:class:`erobs_bt.planning.base.Planner`): ``plan_kinematic_path``,
  ``compute_cartesian_path``, ``compute_ik``/``compute_fk``, the tool attached through
  ``apply_planning_scene``, named states and the model revision from move_group's robot
  description;
* :class:`~erobs_bt.backends.moveit.arm.ExecuteTrajectoryArm`: the arm driver part
  (:class:`erobs_bt.backends.parts.ArmDriver`): ``execute_trajectory``;
* :mod:`~erobs_bt.backends.moveit.model`: configuration, error codes, message conversion.

The grippers, the tool changer and the pipettor use the ``ros2_control`` backend's tool
drivers (GripperCommand, SetIO, the pipettor action): MoveIt does not command them.
"""

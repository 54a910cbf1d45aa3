"""``erobs-bt`` verbs that start the simulated ROS nodes (:mod:`erobs_bt.doubles`).

* ``sim-hardware`` — run the simulated cell as a hardware node behind ros2_control's
  interfaces (:mod:`erobs_bt.doubles.sim_hardware`), for the ``ros2_control`` backend.
* ``sim-move-group`` — run the simulated cell behind move_group's interfaces
  (:mod:`erobs_bt.doubles.sim_move_group`), for the ``moveit`` backend and any MoveIt client.

rclpy and the simulator are imported inside the functions only (:data:`erobs_bt.cli.LAZY_VERB_MODULES`).
"""

from __future__ import annotations

import sys

import click


@click.command(
    "sim-hardware",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.pass_context
def sim_hardware(ctx: click.Context) -> None:
    """Run the simulated cell as a hardware node (erobs_bt_sim_hardware; --help for its options).

    It serves FollowJointTrajectory, /joint_states, the fitted tool's ParallelGripperCommand or
    GripperCommand, the ePick's object-detection status, SetIO and the pipettor, as
    ur_robot_driver and the tools' drivers do on EROBS's cell; run the node with
    ``-p backend:=ros2_control`` beside it.
    """
    from erobs_bt.doubles.sim_hardware import run as run_hardware

    sys.exit(run_hardware(list(ctx.args)))


@click.command(
    "sim-move-group",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.pass_context
def sim_move_group(ctx: click.Context) -> None:
    """Run the simulated cell as a move_group (erobs_bt_sim_move_group; --help for its options).

    It serves MoveGroup, ExecuteTrajectory, GetMotionPlan, GetCartesianPath, IK/FK and the
    planning scene by MoveIt's names, planned by the embedded planner, with --plan-latency
    to stand in for MoveIt's planning time; run the node with ``-p backend:=moveit`` beside it.
    """
    from erobs_bt.doubles.sim_move_group import run as run_move_group

    sys.exit(run_move_group(list(ctx.args)))


#: The verbs, for ``main.add_command`` in :mod:`erobs_bt.cli`.
COMMANDS: tuple[click.Command, ...] = (sim_hardware, sim_move_group)

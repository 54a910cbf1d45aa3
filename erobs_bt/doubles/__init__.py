"""Test doubles of the cell's real ROS components: the simulated cell behind their interfaces.

* :mod:`erobs_bt.doubles.sim_hardware` (``erobs_bt_sim_hardware``): ur_robot_driver's
  ros2_control interfaces and the tools' drivers, for the ``ros2_control`` backend.
* :mod:`erobs_bt.doubles.sim_move_group` (``erobs_bt_sim_move_group``): MoveIt's move_group
  interfaces, for the ``moveit`` backend and any MoveIt client.
* :mod:`erobs_bt.doubles.commands`: their ``erobs-bt`` verbs.
* :mod:`erobs_bt.doubles.process`: what the two nodes share as processes (their ``~/events``,
  their close, their run).

They stand where the real components stand (separate processes the node reaches over ROS), so
they sit above both the simulator they run (:mod:`erobs_bt.backends.sim`) and the ROS pieces
they share with the node (:mod:`erobs_bt.rosqos`, :mod:`erobs_bt.ros.process`,
:mod:`erobs_bt.backends.moveit.planning_scene`); nothing but the command line imports them (pyproject.toml,
the import contracts "layers" and "simulator").
"""

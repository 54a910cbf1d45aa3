"""Motion planning in the world model: joint moves, Cartesian lines, time parameterisation.

Modules:

* :mod:`~erobs_bt.planning.planner`: the embedded planner (OMPL RRTConnect in joint
  space, collision-checked against :mod:`erobs_bt.world.collision`).
* :mod:`~erobs_bt.planning.cartesian`: straight tool-tip lines (MoveIt's
  ``computeCartesianPath`` semantics: fraction achieved, jump threshold).
* :mod:`~erobs_bt.planning.timing`: time-optimal parameterisation within the joint
  velocity and acceleration limits.

Submodules are imported explicitly so that importing the package loads no OMPL.
"""

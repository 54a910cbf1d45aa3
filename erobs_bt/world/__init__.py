"""The cell as a model: what the engine knows about the robot and its surroundings.

Nothing here moves anything or talks to ROS; the planner plans in this model, every
motion backend keeps it in step with the tools it mounts, and the viewers draw it.

Modules:

* :mod:`~erobs_bt.world.kinematics`: UR5e FK and analytic 8-branch IK from the DH
  parameters, joint limits, and pose helpers (numpy only).
* :mod:`~erobs_bt.world.cell`: the cell description (``config/cell.yaml``) loaded into
  frozen dataclasses: obstacles, grippers and their tip frames, named states, docks,
  markers and vision targets.
* :mod:`~erobs_bt.world.beamline`: an EROBS beamline file (``cms_beamline.yaml`` with its
  scene, pose registry and SRDF xacro) read into the same cell model.
* :mod:`~erobs_bt.world.collision`: the pinocchio + coal collision model of the arm,
  the attached tool and the cell's obstacles.
* :mod:`~erobs_bt.world.tools`: the tools as the model knows them: which one is mounted,
  what it holds, the pipettor's bookkeeping, and the collision model kept in step
  (:class:`~erobs_bt.world.tools.RobotModel`).

Submodules are imported explicitly (``from erobs_bt.world import kinematics``) so that
importing the package does not load pinocchio.
"""

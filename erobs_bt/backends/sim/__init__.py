"""The embedded simulated UR5e cell: kinematics, cell configuration and collision checking.

Modules:

* :mod:`~erobs_bt.backends.sim.kinematics`: UR5e FK and analytic 8-branch IK from the DH
  parameters, joint limits, and pose helpers (numpy only).
* :mod:`~erobs_bt.backends.sim.cell`: the cell description (``config/cell.yaml``) loaded into
  frozen dataclasses.
* :mod:`~erobs_bt.backends.sim.collision`: the pinocchio + coal collision model of the arm,
  the attached tool and the cell's obstacles.

Submodules are imported explicitly (``from erobs_bt.backends.sim import kinematics``) so that
importing the package does not load pinocchio.
"""

"""What is simulated of the embedded UR5e cell: the arm's controller, the tools' drivers,
fault injection, and their assembly (:func:`erobs_bt.backends.sim.backend.SimBackend`).

The cell's model (kinematics, collision, geometry, tools' bookkeeping, the markers as the
camera sees them) is in :mod:`erobs_bt.world`; planning is in :mod:`erobs_bt.planning`.
Nothing outside this package and the simulated hardware node imports it.
"""

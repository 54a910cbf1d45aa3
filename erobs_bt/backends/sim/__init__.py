"""What is simulated of the embedded UR5e cell: the arm's controller, the tools' effects,
the marker detector and fault injection.

The cell's model (kinematics, collision, geometry, tools' bookkeeping) is in
:mod:`erobs_bt.world`; planning is in :mod:`erobs_bt.planning`. Nothing outside this
package and the simulated hardware node imports it.
"""

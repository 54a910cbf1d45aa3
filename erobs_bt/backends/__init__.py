"""Motion backends: what moves the robot. The tree sees them only through
:class:`erobs_bt.backends.base.MotionBackend`.

The one implementation for a robot is :class:`erobs_bt.backends.stack.MotionStack`, assembled
from parts (:mod:`erobs_bt.backends.parts`: a planner, an arm driver, tool drivers, a
detector); :mod:`erobs_bt.backends.factory` picks an assembly by name: the simulated UR5e
cell (``sim``, default, :mod:`erobs_bt.backends.sim`), a ros2_control cell
(``ros2_control``, :mod:`erobs_bt.backends.ros2_control`), or the deterministic scripted
backend used by the tests (``scripted``)."""

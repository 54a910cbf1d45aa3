"""The motion stack: the one :class:`~erobs_bt.backends.base.MotionBackend`, assembled from parts.

:class:`MotionStack` ties a :class:`~erobs_bt.planning.base.Planner`, an
:class:`~erobs_bt.backends.parts.ArmDriver`, one :class:`~erobs_bt.backends.parts.ToolDriver`
per tool, a :class:`~erobs_bt.backends.parts.ToolChanger` and a
:class:`~erobs_bt.backends.parts.Detector` (:mod:`erobs_bt.backends.parts`) to the cell's
tool bookkeeping (:mod:`erobs_bt.world.tools`), which it keeps on every backend. The
assemblies (``backend: sim``, ``backend: ros2_control``, ``backend: moveit``) are in
:mod:`erobs_bt.backends.factory`.

The stack is a thin assembly (:mod:`~erobs_bt.backends.stack.motion_stack`) of parts, one
concept each:

* :mod:`~erobs_bt.backends.stack.core`: what every part shares (cell, planner, arm driver,
  the state lock) and the tool bookkeeping with the stack's contact tolerance
  (``predict_tools``: the tool state a solution leaves);
* :mod:`~erobs_bt.backends.stack.state`: the world and tool state (the live tool state and
  its model revision, cup profiles, the planning scene's world and the tag objects vision
  puts into it, the worlds recently planned in, the simulation reset);
* :mod:`~erobs_bt.backends.stack.planning`: planning a unit as one connected sequence, ahead
  of a solution, across tool exchanges, chained after a plan still being made; plan listeners;
* :mod:`~erobs_bt.backends.stack.speculation`: the speculation of plans (side-by-side
  requests from predicted starts, joined within
  :data:`~erobs_bt.backends.stack.speculation.JOIN_TOLERANCE`; forecast plans kept
  for the tool exchanges);
* :mod:`~erobs_bt.backends.stack.replay`: the replay's scene check;
* :mod:`~erobs_bt.backends.stack.execution`: dispatch, play, stop, fault cut points, the tool
  changer's order in an exchange;
* :mod:`~erobs_bt.backends.stack.steps`: the single-step runners (tool exchange, vision,
  pipettor) and the port they move the arm through;
* :mod:`~erobs_bt.backends.stack.workers`: the planning and action worker threads.

Threads: the tree's tick thread only ever receives futures. Planning runs in one worker
thread (``<name>-plan``), executions and single steps in another (``<name>-action``), and
the arm driver in its own. Tool commands during execution change the live tool state (its
own lock) and tell the planner (:meth:`~erobs_bt.planning.base.Planner.follow`), which
never waits for a plan running ahead (issue 13, plan-ahead): every plan brings the model
to its own tool state anyway. Every public method is thread-safe. Executing a solution
planned for another model revision fails (``EXECUTION_FAILED``) instead of moving with the
wrong tool model.

Start gripper: a goal's ``start_gripper`` is the tool the operator mounted
(:meth:`MotionStack.prepare_goal`): when it differs, the stack mounts it by hand in its
bookkeeping (logged), which changes the model revision, unless a part is held.
"""

from erobs_bt.backends.stack.motion_stack import MotionStack

__all__ = ["MotionStack"]

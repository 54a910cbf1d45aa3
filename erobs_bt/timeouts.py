"""The one table of timeouts: EROBS's per-type execution timeouts, its goal-acceptance wait,
and erobs_bt's planning timeout.

Everything that times a step reads it (nothing else writes a timeout default): the compiled
tree (:meth:`GoalContext.timeout_for` enforces the per-type values, the ``timeout.<type>``
node parameters override them), the ros2_control backend's defaults (``timeouts:`` of the
hardware YAML) and the simulated faults' reported values (:mod:`erobs_bt.backends.sim.faults`).

The names and values are EROBS's (``MTCOrchestratorServer.DEFAULT_TIMEOUTS`` in
bondada-a/erobs, declared there as the ROS parameters ``timeout.<type>``), so a
beamline's EROBS parameter file sets the same timeouts here. Which steps use which value
is :func:`timeout_key`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from erobs_bt.script.model import Step, Vision

#: Default execution timeout per step type [s]; ``TIMEOUT:`` is reported past it (the
#: goal faults). EROBS's names and values, plus ``planning``: erobs_bt's time allowed to
#: plan one unit (past it ``PLANNING_FAILED:``, not fatal).
DEFAULT_TIMEOUTS: Mapping[str, float] = MappingProxyType(
    {
        "moveto": 120.0,
        "end_effector": 30.0,
        "tool_exchange": 180.0,
        "vision_moveto": 60.0,
        "vision_task": 60.0,
        "vision_scan": 180.0,
        "pick_sample": 180.0,
        "place_sample": 180.0,
        "pipettor": 60.0,
        "planning": 60.0,
    }
)

#: Steps of a unit one ``timeouts["planning"]`` covers: a unit of more steps is allowed one
#: more period per started block of this many (a 5,000-step batch plans for 50 periods).
#: Planning takes a few milliseconds a step on the simulated cell (bench/), so a period
#: leaves a wide margin while still catching a planner that hangs.
PLANNING_STEPS_PER_TIMEOUT = 100

#: EROBS waits this long for an action server to accept a goal before ``TIMEOUT:`` [s].
ACCEPTANCE_TIMEOUT = 10.0

#: How long a ROS-side driver waits for an action server or service to appear before it
#: counts as unavailable [s] (the ``timeouts.server`` default of the hardware YAML). EROBS
#: waits 3 s for the SetIO service and 5 s for an action server; erobs_bt uses the shorter.
SERVER_WAIT = 3.0

#: What each key means, for the parameter descriptions and the docs.
TIMEOUT_USES: Mapping[str, str] = MappingProxyType(
    {
        "moveto": "a moveto step",
        "end_effector": "an end_effector step",
        "tool_exchange": "a tool_exchange step",
        "vision_moveto": "a vision_moveto step",
        "vision_task": "a vision_task, pick_spincoater or place_spincoater step, and a vision-guided "
        "pick_sample or place_sample",
        "vision_scan": "a vision_scan step",
        "pick_sample": "a hard-coded pick_sample (use_vision: false)",
        "place_sample": "a hard-coded place_sample (use_vision: false)",
        "pipettor": "a pipettor step",
        "planning": f"planning a unit, per started {PLANNING_STEPS_PER_TIMEOUT} steps of it",
    }
)


def timeout_key(step: Step) -> str:
    """The :data:`DEFAULT_TIMEOUTS` key that times ``step``.

    As EROBS: a vision-guided ``pick_sample``/``place_sample`` and the spin-coater presets
    run in its one vision-task pipeline (``timeout.vision_task``); a hard-coded
    ``pick_sample``/``place_sample`` (``use_vision: false``) has its own timeout.
    ``vision_moveto`` uses ``timeout.vision_moveto`` (the same 60 s as EROBS's
    ``vision_task``, which EROBS uses for it since its vision pipeline was unified).
    Any other step type uses its own name (``moveto``, ``pipettor``, …); a type without
    an entry (``pause``, which has no timer) falls back to ``moveto``.
    """
    if isinstance(step, Vision):
        if step.kind in ("pick_sample", "place_sample"):
            return step.kind if not step.use_vision else "vision_task"
        if step.kind in ("vision_moveto", "vision_scan"):
            return step.kind
        return "vision_task"
    return step.task_type if step.task_type in DEFAULT_TIMEOUTS else "moveto"

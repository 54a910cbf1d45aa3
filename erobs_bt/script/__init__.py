"""The script front end: JSON task script → validated, expanded :class:`Script`.

* :func:`parse_script` (:mod:`.parse`) — envelope and task validation, errors with paths;
* :class:`PoseRegistry` (:mod:`.poses`) — the pose registry and the one degrees→radians step;
* :class:`VisionTargets` and the ``pickup_tip``/``pickup_vial`` macros (:mod:`.macros`);
* :class:`Limits` (:mod:`.limits`) — size bounds;
* the step types (:mod:`.model`) and :class:`ScriptError` (:mod:`.errors`).
"""

from __future__ import annotations

from erobs_bt.script.errors import ScriptError
from erobs_bt.script.limits import Limits
from erobs_bt.script.macros import DEFAULT_VISION_TARGETS_PATH, TASK_MACROS, VisionTargets
from erobs_bt.script.model import Script, Step
from erobs_bt.script.parse import DEFAULT_GRIPPERS, GRIPPER_STATES, TASK_TYPES, parse_script
from erobs_bt.script.poses import PoseRegistry, to_radians

__all__ = [
    "DEFAULT_GRIPPERS",
    "DEFAULT_VISION_TARGETS_PATH",
    "GRIPPER_STATES",
    "TASK_MACROS",
    "TASK_TYPES",
    "Limits",
    "PoseRegistry",
    "Script",
    "ScriptError",
    "Step",
    "VisionTargets",
    "parse_script",
    "to_radians",
]

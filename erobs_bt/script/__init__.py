"""The script front end: JSON task script → validated, expanded :class:`Script`.

* :func:`parse_script` (:mod:`.parse`) — envelope and task validation, errors with paths;
* :class:`PoseRegistry` (:mod:`.poses`) — the pose registry and the one degrees→radians step;
* :class:`VisionTargets` and the ``pickup_tip``/``pickup_vial`` macros (:mod:`.macros`);
* :class:`CellVocabulary` (:mod:`.vocabulary`) — the names a script may use, read from the
  cell configuration;
* :func:`script_schema` (:mod:`.schema`) — the JSON Schema of scripts;
* :class:`Limits` (:mod:`.limits`) — size bounds;
* the step types (:mod:`.model`) and :class:`ScriptError` (:mod:`.errors`).
"""

from __future__ import annotations

from erobs_bt.script.errors import ScriptError
from erobs_bt.script.limits import Limits
from erobs_bt.script.macros import DEFAULT_VISION_TARGETS_PATH, TASK_MACROS, VisionTargets
from erobs_bt.script.model import Script, Step
from erobs_bt.script.parse import TASK_TYPES, parse_script
from erobs_bt.script.poses import PoseRegistry, to_radians
from erobs_bt.script.schema import script_schema
from erobs_bt.script.vocabulary import CellVocabulary

__all__ = [
    "DEFAULT_VISION_TARGETS_PATH",
    "TASK_MACROS",
    "TASK_TYPES",
    "CellVocabulary",
    "Limits",
    "PoseRegistry",
    "Script",
    "ScriptError",
    "Step",
    "VisionTargets",
    "parse_script",
    "script_schema",
    "to_radians",
]

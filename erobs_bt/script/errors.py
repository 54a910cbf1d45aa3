"""The one script-validation error type.

Every problem found in a script (or in the pose registry it resolves against) is
raised as :class:`ScriptError`, whose message starts with the path of the offending
value (``tasks[3].distance: must be a finite number > 0 (got -1)``), so a user can
find it in the JSON. Nothing is executed for a script that raised it. It is the
scripts' :class:`erobs_bt.validation.ConfigError` (the toolkit every configuration
reader shares).
"""

from __future__ import annotations

from erobs_bt.validation import ConfigError


class ScriptError(ConfigError):
    """A script or pose-registry value is invalid.

    Attributes:
        path: where the problem is, in JSON-path-like form (``tasks[3].distance``,
            ``start_gripper``, ``poses.home[2]``); ``""`` for the whole document.
        reason: what is wrong, for people.
        file: always ``""``: a script's messages start with the path (the file, when there
            is one, is part of the path: ``poses.yaml: home``).

    The message is ``f"{path}{sep}{reason}"`` (just ``reason`` when ``path`` is empty);
    ``sep`` is ``": "`` unless EROBS's own text reads as one sentence with the path
    (``tasks[3].task_type must be one of: ...``, ``tasks must be a non-empty list``),
    where it is ``" "``.
    """

    def __init__(self, path: str, reason: str, *, sep: str = ": ") -> None:
        super().__init__(path, reason, sep=sep)

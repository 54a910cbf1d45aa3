"""The script's readers of decoded JSON/YAML values: the toolkit's, raising :class:`ScriptError`.

The script, the pose registry and the vision-target file are all untrusted trees of
dicts, lists, strings and numbers. Every field is read through the configuration-validation
toolkit (:mod:`erobs_bt.validation`, where the rules are written once: booleans are never
numbers, NaN and infinities are never numbers, every rejection names the path of the value
and shows what was found); this module binds it to :class:`ScriptError` and to EROBS's word
for a key (``field``), so the parser, the macros, the pose registry and the vocabulary call
``v.number(value, "tasks[3].distance", positive=True)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from erobs_bt.script.errors import ScriptError
from erobs_bt.validation import (
    MAX_INTEGER,
    SAFE_LOADER,
    Checker,
    closest,
    did_you_mean,
    is_number,
    join,
    safe_load_yaml,
    shown,
)

__all__ = [
    "MAX_INTEGER",
    "SAFE_LOADER",
    "array",
    "boolean",
    "choice",
    "closest",
    "did_you_mean",
    "integer",
    "is_number",
    "join",
    "load_yaml_file",
    "mapping",
    "number",
    "numbers",
    "occurrences",
    "only_keys",
    "required",
    "safe_load_yaml",
    "shown",
    "string",
]


def _script_error(file: str, path: str, reason: str) -> ScriptError:
    return ScriptError(path, reason)


#: The script's checker: errors are :class:`ScriptError`, keys are "fields" (EROBS's word).
SCRIPT = Checker(error=_script_error, key_word="field")

number = SCRIPT.number
numbers = SCRIPT.numbers
occurrences = SCRIPT.occurrences
required = SCRIPT.required
integer = SCRIPT.integer
string = SCRIPT.string
choice = SCRIPT.choice
boolean = SCRIPT.boolean
mapping = SCRIPT.mapping
array = SCRIPT.array
only_keys = SCRIPT.only_keys


def load_yaml_file(path: str | Path, *, max_bytes: int) -> Any:
    """Read a size-limited UTF-8 YAML file with a safe loader (nothing is evaluated).

    Raises:
        ScriptError: the file is larger than ``max_bytes`` (``Limits.max_file_bytes``), not
            UTF-8 or not YAML; the path is the file name.
        OSError: the file cannot be read.
    """
    file = Path(path)
    size = file.stat().st_size
    if size > max_bytes:
        raise ScriptError(
            file.name, f"is {size} bytes; the limit is {max_bytes} bytes (Limits.max_file_bytes)"
        )
    try:
        return safe_load_yaml(file.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ScriptError(file.name, f"is not UTF-8 text: {exc}") from None
    except yaml.YAMLError as exc:
        raise ScriptError(file.name, f"invalid YAML: {exc}") from None

"""Typed readers for decoded JSON/YAML values, each raising :class:`ScriptError` with a path.

The script, the pose registry and the vision-target file are all untrusted trees of
dicts, lists, strings and numbers. Every field is read through one of these helpers
so that the rules are the same everywhere: booleans are never numbers (``True`` is an
``int`` in Python, not in a robot script), NaN and infinities are never numbers,
integers too large for a float are rejected instead of overflowing later, and every
rejection names the path of the value and shows what was found.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import yaml

from erobs_bt.script.errors import ScriptError

_SHOWN_CHARS = 60


def shown(value: Any) -> str:
    """A short rendering of ``value`` for error messages (``"got ..."``).

    JSON literals for numbers, booleans and ``null``; strings quoted as in EROBS's
    messages (``'foo'``); objects and arrays by kind only.
    """
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    if value is None:
        return "null"
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 4] + "...'"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 192:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def is_number(value: Any) -> bool:
    """True for an ``int`` or ``float`` that is not a ``bool`` (finite or not)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def number(
    value: Any,
    path: str,
    *,
    unit: str = "",
    minimum: float | None = None,
    maximum: float | None = None,
    positive: bool = False,
) -> float:
    """Read a finite number.

    Args:
        value: the decoded value.
        path: where it is, for the error.
        unit: appended to the expectation in the message (``"m"``, ``"deg"``).
        minimum: inclusive lower bound, if any.
        maximum: inclusive upper bound, if any.
        positive: require ``> 0``.

    Returns:
        The value as a float.

    Raises:
        ScriptError: not a number (booleans included), not finite, or out of range.
    """
    expectation = "a finite number"
    if positive:
        expectation += " greater than zero"
    elif minimum is not None and maximum is not None:
        expectation += f" in [{minimum:g}, {maximum:g}]"
    elif minimum is not None:
        expectation += f" >= {minimum:g}"
    elif maximum is not None:
        expectation += f" <= {maximum:g}"
    if unit:
        expectation += f" ({unit})"
    if not is_number(value):
        raise ScriptError(path, f"must be {expectation} (got {shown(value)})")
    try:
        result = float(value)
    except OverflowError:
        raise ScriptError(path, f"must be {expectation} (got an integer too large for a float)") from None
    if (
        not math.isfinite(result)
        or (positive and result <= 0.0)
        or (minimum is not None and result < minimum)
        or (maximum is not None and result > maximum)
    ):
        raise ScriptError(path, f"must be {expectation} (got {shown(value)})")
    return result


#: The largest integer a script field takes: the field must fit a signed 32-bit integer
#: (the ROS message fields and controller interfaces these values end up in).
MAX_INTEGER = 2**31 - 1


def integer(value: Any, path: str, *, minimum: int | None = None, maximum: int = MAX_INTEGER) -> int:
    """Read an integer (not a bool, not a float such as ``2.0``).

    Raises:
        ScriptError: not an integer, below ``minimum`` or above ``maximum``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ScriptError(path, f"must be an integer{bound} (got {shown(value)})")
    if minimum is not None and value < minimum:
        raise ScriptError(path, f"must be an integer >= {minimum} (got {shown(value)})")
    if value > maximum:
        raise ScriptError(path, f"must be an integer <= {maximum} (got {shown(value)})")
    return value


def string(value: Any, path: str, *, allow_empty: bool = False) -> str:
    """Read a string (non-empty unless ``allow_empty``).

    Raises:
        ScriptError: not a string, or empty/blank when that is not allowed.
    """
    if not isinstance(value, str):
        raise ScriptError(path, f"must be a string (got {shown(value)})")
    if not allow_empty and not value.strip():
        raise ScriptError(path, "must be a non-empty string")
    return value


def choice(value: Any, path: str, allowed: Collection[str], *, what: str = "") -> str:
    """Read a string that must be one of ``allowed`` (listed in the message, in order).

    Raises:
        ScriptError: not a string, or not one of ``allowed``.
    """
    if not isinstance(value, str) or value not in allowed:
        label = f"{what} " if what else ""
        raise ScriptError(path, f"unknown {label}{shown(value)} (expected one of: {', '.join(allowed)})")
    return value


def boolean(value: Any, path: str) -> bool:
    """Read ``true``/``false`` (numbers and strings are not booleans).

    Raises:
        ScriptError: not a bool.
    """
    if not isinstance(value, bool):
        raise ScriptError(path, f"must be true or false (got {shown(value)})")
    return value


def mapping(value: Any, path: str) -> Mapping[str, Any]:
    """Read a JSON object / YAML mapping.

    Raises:
        ScriptError: anything else.
    """
    if not isinstance(value, Mapping):
        raise ScriptError(path, f"must be an object (got {shown(value)})")
    return value


def array(value: Any, path: str, *, non_empty: bool = False) -> list[Any]:
    """Read a JSON array / YAML sequence.

    Raises:
        ScriptError: anything else, or an empty array when ``non_empty``.
    """
    if not isinstance(value, list | tuple):
        raise ScriptError(path, f"must be {'a non-empty' if non_empty else 'an'} array (got {shown(value)})")
    if non_empty and not value:
        raise ScriptError(path, "must be a non-empty array")
    return list(value)


def closest(word: Any, choices: Collection[str]) -> str | None:
    """The one of ``choices`` ``word`` most likely misspells (``planing_type`` →
    ``planning_type``), or ``None`` when none is close (:func:`difflib.get_close_matches`,
    similarity at least 0.6, its default)."""
    if not isinstance(word, str):
        return None
    found = difflib.get_close_matches(word, list(choices), n=1)
    return found[0] if found else None


def did_you_mean(word: Any, choices: Collection[str]) -> str:
    """``"; did you mean 'planning_type'?"`` for a near miss of ``choices`` (:func:`closest`),
    else ``""``: the tail of an error message."""
    match = closest(word, choices)
    return f"; did you mean {match!r}?" if match is not None else ""


def only_keys(
    value: Mapping[str, Any],
    path: str,
    allowed: Collection[str],
    *,
    owner: str = "",
    also: Collection[str] = (),
) -> None:
    """Reject keys of ``value`` outside ``allowed`` (for objects with a closed schema).

    Args:
        value: the object.
        path: its path.
        allowed: its fields, listed in the message.
        owner: what the fields belong to, for the message (``moveto``).
        also: further keys accepted without being listed (ignored fields).

    Raises:
        ScriptError: at ``<path>.<key>`` for the first unknown key, with the closest
            allowed one when it looks misspelled (``unknown field of moveto; did you mean
            'planning_type'? (allowed: …)``).
    """
    for key in value:
        if key not in allowed and key not in also:
            where = join(path, key) if path else str(key)
            of = f" of {owner}" if owner else ""
            listed = ", ".join(sorted(allowed)) or "none"
            raise ScriptError(where, f"unknown field{of}{did_you_mean(key, allowed)} (allowed: {listed})")


def join(path: str, key: str | int) -> str:
    """``join("tasks[3]", "distance") == "tasks[3].distance"``; ints become ``[i]``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


#: PyYAML's safe loader on libyaml when PyYAML has it (about ten times faster than the pure
#: Python parser, which cost ~0.1 s of start-up per configuration file), else the pure one.
#: Both construct plain data only (no Python objects, nothing evaluated).
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with :data:`SAFE_LOADER`: the one YAML parser setting of the project.

    Raises:
        yaml.YAMLError: the text is not YAML.
    """
    return yaml.load(text, Loader=SAFE_LOADER)


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

"""The one configuration-validation toolkit: typed reads of decoded JSON/YAML with paths in errors.

Every file erobs_bt reads from a user (the JSON script, the pose registry, the vision-target
file, ``config/cell.yaml``, the fault-injection files, the ros2_control hardware YAML) is an
untrusted tree of dicts, lists, strings and numbers. Each value of it is read through a
:class:`Checker`, so the rules and the wording are the same everywhere:

* booleans are never numbers (``True`` is an ``int`` in Python, not in a configuration file);
  NaN and infinities are never numbers; integers too large for a float are rejected instead
  of overflowing later;
* every rejection is a :class:`ConfigError` whose message names the file (when there is one)
  and the path of the key, then what was expected and what was found::

      cell.yaml: grippers.hande.tip_frame: must be a string (got 3)
      tasks[3].distance: must be a finite number greater than zero (m) (got -1)

Paths are JSON-path-like: ``join("tasks[3]", "distance") == "tasks[3].distance"``,
``join("docks", 2) == "docks[2]"``. A :class:`Checker` carries the file name and the error
type of its caller (:class:`erobs_bt.script.errors.ScriptError` for scripts,
:class:`erobs_bt.world.cell.CellConfigError` for the cell, plain :class:`ConfigError`
elsewhere), so callers keep catching their own error type while sharing the rules.

No third-party schema library is used: pydantic's and jsonschema's messages cannot keep the
EROBS-compatible script messages the tests and operators rely on, and the readers here are
a few lines each.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

_SHOWN_CHARS = 60

#: The largest integer a configuration field takes by default: it must fit a signed 32-bit
#: integer (the ROS message fields and controller interfaces these values end up in).
MAX_INTEGER = 2**31 - 1


class ConfigError(ValueError):
    """An invalid value in a configuration document.

    Attributes:
        file: the file the value is in (``cell.yaml``), or ``""`` when the document is not a
            file (a script sent in a goal) or the path says it all.
        path: where in the document, JSON-path-like (``grippers.hande.tip_frame``,
            ``tasks[3].distance``); ``""`` for the whole document.
        reason: what is wrong, for people (``must be a string (got 3)``).

    The message is ``"<file>: <path>: <reason>"``, leaving out the empty parts. ``sep``
    replaces the ``": "`` between path and reason (``" "`` where the text reads as one
    sentence with the path, as some of EROBS's messages do).
    """

    def __init__(self, path: str, reason: str, *, file: str = "", sep: str = ": ") -> None:
        self.file = file
        self.path = path
        self.reason = reason
        text = f"{path}{sep}{reason}" if path else reason
        super().__init__(f"{file}: {text}" if file else text)


#: Builds the error a :class:`Checker` raises: ``(file, path, reason) -> ConfigError``.
ErrorFactory = Callable[[str, str, str], ConfigError]


def _config_error(file: str, path: str, reason: str) -> ConfigError:
    return ConfigError(path, reason, file=file)


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


def join(path: str, key: str | int) -> str:
    """``join("tasks[3]", "distance") == "tasks[3].distance"``; ints become ``[i]``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


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


def _bounds(*, positive: bool, minimum: float | None, maximum: float | None) -> str:
    if positive:
        return " greater than zero"
    if minimum is not None and maximum is not None:
        return f" in [{minimum:g}, {maximum:g}]"
    if minimum is not None:
        return f" >= {minimum:g}"
    if maximum is not None:
        return f" <= {maximum:g}"
    return ""


@dataclass(frozen=True)
class Checker:
    """Typed reads of one decoded document; every failure raises ``error(file, path, reason)``.

    Attributes:
        file: the document's file for messages (``cell.yaml``), ``""`` for none.
        error: builds the raised error (default: :class:`ConfigError`).
        key_word: what the document's keys are called in messages: ``key`` for YAML
            configuration, ``field`` for JSON scripts (EROBS's word).
        string_keys: mappings must have string keys (YAML allows ``1:`` or ``null:``).
    """

    file: str = ""
    error: ErrorFactory = _config_error
    key_word: str = "key"
    string_keys: bool = False

    def fail(self, path: str, reason: str) -> ConfigError:
        """The error to raise for ``path`` (the caller raises it)."""
        return self.error(self.file, path, reason)

    def number(
        self,
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
            unit: appended to the expectation in the message (``"m"``, ``"deg"``, ``"s"``).
            minimum: inclusive lower bound, if any.
            maximum: inclusive upper bound, if any.
            positive: require ``> 0``.

        Returns:
            The value as a float.

        Raises:
            ConfigError: (``error``'s type) not a number (booleans included), not finite, or
                out of range: ``must be a finite number >= 0 (m) (got -1)``.
        """
        expectation = "a finite number" + _bounds(positive=positive, minimum=minimum, maximum=maximum)
        if unit:
            expectation += f" ({unit})"
        if not is_number(value):
            raise self.fail(path, f"must be {expectation} (got {shown(value)})")
        try:
            result = float(value)
        except OverflowError:
            raise self.fail(path, f"must be {expectation} (got an integer too large for a float)") from None
        if (
            not math.isfinite(result)
            or (positive and result <= 0.0)
            or (minimum is not None and result < minimum)
            or (maximum is not None and result > maximum)
        ):
            raise self.fail(path, f"must be {expectation} (got {shown(value)})")
        return result

    def numbers(
        self, value: Any, path: str, count: int, *, unit: str = "", positive: bool = False
    ) -> tuple[float, ...]:
        """Read an array of exactly ``count`` finite numbers (a vector: xyz, joint angles).

        Raises:
            ConfigError: not an array of ``count`` finite numbers (all ``> 0`` when
                ``positive``): ``must be 3 positive numbers [m] (got [1, -2, 3])``.
        """
        what = f"{count} {'positive ' if positive else ''}numbers" + (f" ({unit})" if unit else "")
        if not isinstance(value, list | tuple) or len(value) != count:
            raise self.fail(path, f"must be {what} (got {self._listed(value)})")
        out = []
        for item in value:
            if not is_number(item) or not math.isfinite(item) or (positive and item <= 0):
                raise self.fail(path, f"must be {what} (got {self._listed(value)})")
            out.append(float(item))
        return tuple(out)

    def integer(
        self, value: Any, path: str, *, minimum: int | None = None, maximum: int = MAX_INTEGER
    ) -> int:
        """Read an integer (not a bool, not a float such as ``2.0``).

        Raises:
            ConfigError: not an integer, below ``minimum`` or above ``maximum``.
        """
        if isinstance(value, bool) or not isinstance(value, int):
            bound = f" >= {minimum}" if minimum is not None else ""
            raise self.fail(path, f"must be an integer{bound} (got {shown(value)})")
        if minimum is not None and value < minimum:
            raise self.fail(path, f"must be an integer >= {minimum} (got {shown(value)})")
        if value > maximum:
            raise self.fail(path, f"must be an integer <= {maximum} (got {shown(value)})")
        return value

    def string(self, value: Any, path: str, *, allow_empty: bool = False) -> str:
        """Read a string (non-empty and not blank unless ``allow_empty``).

        Raises:
            ConfigError: not a string, or empty/blank when that is not allowed.
        """
        if not isinstance(value, str):
            raise self.fail(path, f"must be a string (got {shown(value)})")
        if not allow_empty and not value.strip():
            raise self.fail(path, "must be a non-empty string")
        return value

    def choice(self, value: Any, path: str, allowed: Collection[str], *, what: str = "") -> str:
        """Read a string that must be one of ``allowed`` (listed in the message, in order).

        Raises:
            ConfigError: not a string, or not one of ``allowed``:
                ``unknown frame 'world' (expected one of: base_link, base)``.
        """
        if not isinstance(value, str) or value not in allowed:
            label = f"{what} " if what else ""
            raise self.fail(path, f"unknown {label}{shown(value)} (expected one of: {', '.join(allowed)})")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        """Read ``true``/``false`` (numbers and strings are not booleans).

        Raises:
            ConfigError: not a bool.
        """
        if not isinstance(value, bool):
            raise self.fail(path, f"must be true or false (got {shown(value)})")
        return value

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        """Read a JSON object / YAML mapping (with string keys when ``string_keys``).

        Raises:
            ConfigError: anything else.
        """
        if not isinstance(value, Mapping):
            raise self.fail(path, f"must be an object (got {shown(value)})")
        if self.string_keys:
            for key in value:
                if not isinstance(key, str):
                    raise self.fail(path, f"{self.key_word}s must be strings (got {shown(key)})")
        return value

    def array(self, value: Any, path: str, *, non_empty: bool = False) -> list[Any]:
        """Read a JSON array / YAML sequence.

        Raises:
            ConfigError: anything else, or an empty array when ``non_empty``.
        """
        if not isinstance(value, list | tuple):
            kind = "a non-empty" if non_empty else "an"
            raise self.fail(path, f"must be {kind} array (got {shown(value)})")
        if non_empty and not value:
            raise self.fail(path, "must be a non-empty array")
        return list(value)

    def required(self, value: Mapping[str, Any], key: str, path: str) -> Any:
        """The value of ``key`` in the object ``value`` at ``path``.

        Raises:
            ConfigError: at ``<path>.<key>``: ``missing``.
        """
        if key not in value:
            raise self.fail(join(path, key), "missing")
        return value[key]

    def only_keys(
        self,
        value: Mapping[str, Any],
        path: str,
        allowed: Collection[str],
        *,
        owner: str = "",
        also: Collection[str] = (),
    ) -> None:
        """Reject keys of ``value`` outside ``allowed`` (objects with a closed schema).

        Args:
            value: the object.
            path: its path.
            allowed: its keys, listed in the message.
            owner: what the keys belong to, for the message (``moveto``).
            also: further keys accepted without being listed (ignored keys).

        Raises:
            ConfigError: at ``<path>.<key>`` for the first unknown key, with the closest
                allowed one when it looks misspelled (``unknown key of moveto; did you mean
                'planning_type'? (allowed: …)``; ``field`` for scripts).
        """
        for key in value:
            if key not in allowed and key not in also:
                of = f" of {owner}" if owner else ""
                listed = ", ".join(sorted(allowed)) or "none"
                raise self.fail(
                    join(path, str(key)),
                    f"unknown {self.key_word}{of}{did_you_mean(key, allowed)} (allowed: {listed})",
                )

    def occurrences(self, value: Any, path: str) -> frozenset[int] | None:
        """Read which 1-based calls something applies to: an integer, a list of them, or ``all``.

        Returns:
            The call numbers, or ``None`` for ``all``.

        Raises:
            ConfigError: anything else (an empty list, 0, a bool, a float).
        """
        if value == "all":
            return None
        items = value if isinstance(value, list) else [value]
        if not items or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in items):
            expected = "'all', an integer >= 1 or a non-empty list of them"
            raise self.fail(path, f"must be {expected} (got {self._listed(value)})")
        return frozenset(items)

    @staticmethod
    def _listed(value: Any) -> str:
        if isinstance(value, list | tuple) and len(value) <= 8:
            return "[" + ", ".join(shown(item) for item in value) + "]"
        return shown(value)


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


def read_yaml(path: str, *, error: ErrorFactory = _config_error) -> Any:
    """Read a UTF-8 YAML file with the safe loader.

    Args:
        path: the file; also the ``file`` of the error.
        error: builds the raised error.

    Raises:
        ConfigError: (``error``'s type) ``<path>: cannot read: <why>`` or
            ``<path>: invalid YAML: <why>``.
    """
    try:
        with open(path, encoding="utf-8") as stream:
            text = stream.read()
    except OSError as exc:
        raise error(path, "", f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise error(path, "", f"is not UTF-8 text: {exc}") from None
    try:
        return safe_load_yaml(text)
    except yaml.YAMLError as exc:
        raise error(path, "", f"invalid YAML: {exc}") from exc

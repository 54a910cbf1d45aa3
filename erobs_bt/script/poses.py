"""Named joint poses: the pose registry, inline poses, and the one degrees→radians step.

EROBS scripts and the pose registry give joint angles in **degrees** (so do
roll/pitch/yaw and constraint tolerances); everything after the parser works in
**radians**. Converting in several places invites the classic bug of converting twice
or not at all, so :func:`to_radians` here is the only conversion in the code base and
the parser calls it for every angle it reads.

Resolution order (docs/behaviour.md §1): a name is looked up first in the script's
inline ``poses``, then in the registry. The fields resolved this way are ``target``,
``scan_positions[]``, ``scan_pose``, ``approach_pose``, ``target_pose``, ``place_pose``,
``pickup_pose`` (and ``retreat_pose``). :class:`PoseResolver` remembers which names a
script actually used, with the degree values they resolved to: exactly that mapping
is the "resolved poses" input of the plan-cache key, so unused registry entries and
registry entries shadowed by inline poses cannot affect the key
(docs/script-format.md, "Cache eligibility").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

from erobs_bt.script import _values as v
from erobs_bt.script.errors import ScriptError
from erobs_bt.script.limits import DEFAULT_LIMITS, Limits
from erobs_bt.script.model import JOINT_LIMITS_DEG, JOINT_NAMES, JointPositions

#: How a user gives the pose registry, for messages about a name found nowhere.
REGISTRY_OPTION_HINT = "a registry is given with erobs-bt's --poses or the node's poses_file parameter"

#: Number of values in a pose (UR joint order of :data:`erobs_bt.script.model.JOINT_NAMES`).
POSE_LENGTH = len(JOINT_NAMES)


def to_radians(degrees: Iterable[float]) -> tuple[float, ...]:
    """Convert angles from degrees to radians (``math.radians`` element-wise).

    The only degrees→radians conversion in erobs_bt: joint poses, roll/pitch/yaw of a
    ``cartesian_target`` and path-constraint angles all pass through here.

    Args:
        degrees: angles [deg].

    Returns:
        The same angles [rad], as a tuple.
    """
    return tuple(math.radians(value) for value in degrees)


def looks_like_radians(angles: Iterable[float]) -> bool:
    """True when angles given in degrees look like radians: every one within ±2π and not
    all zero (a real pose in degrees almost always has a joint beyond 6.3°; all zeros is a
    legitimate pose in either unit). The parser warns, it does not reject: a small pose
    in degrees is possible.

    Args:
        angles: the angles as written [deg, supposedly].
    """
    values = list(angles)
    return bool(values) and all(abs(a) <= math.tau for a in values) and any(a != 0 for a in values)


def pose_values(value: Any, path: str) -> tuple[float, ...]:
    """Validate one pose: a list of six finite joint angles in degrees.

    Args:
        value: the decoded value.
        path: its location for errors (``poses.home``, ``cms_poses.yaml: home``);
            element errors are reported at ``<path>[i]``.

    Returns:
        The six angles [deg] as floats, unchanged.

    Raises:
        ScriptError: not a list of exactly six finite numbers (``Invalid pose format: …``
            for anything but a list of six; booleans are not numbers), or
            an angle outside its joint's limits (``poses.a[2]: 400° is outside elbow_joint's
            ±180°``).
    """
    if not isinstance(value, list | tuple) or len(value) != POSE_LENGTH:
        count = f"{len(value)} values" if isinstance(value, list | tuple) else v.shown(value)
        raise ScriptError(  # EROBS's "Invalid pose format" first (its agent's error table)
            path,
            f"Invalid pose format: a pose must be a list of {POSE_LENGTH} joint angles in degrees "
            f"({', '.join(JOINT_NAMES)}) (got {count})",
        )
    angles = tuple(v.number(item, f"{path}[{i}]", unit="deg") for i, item in enumerate(value))
    for i, angle in enumerate(angles):
        check_joint_angle(angle, i, f"{path}[{i}]")
    return angles


def check_joint_angle(angle: float, joint: int, path: str) -> None:
    """Reject an angle [deg] outside the UR5e limits of joint ``joint`` (0-based, UR order).

    The limits are :data:`erobs_bt.script.model.JOINT_LIMITS_DEG` (±360°, elbow ±180°).

    Raises:
        ScriptError: ``<path>: 400° is outside elbow_joint's ±180°``.
    """
    lower, upper = JOINT_LIMITS_DEG[joint]
    if not lower <= angle <= upper:
        span = f"±{upper:g}°" if lower == -upper else f"[{lower:g}°, {upper:g}°]"
        raise ScriptError(path, f"{angle:g}° is outside {JOINT_NAMES[joint]}'s {span}")


def _pose_table(data: Any, label: str, prefix: str, limits: Limits) -> dict[str, tuple[float, ...]]:
    """Validate a flat ``name -> [6 degrees]`` mapping (inline poses or a registry)."""
    if not isinstance(data, Mapping):
        raise ScriptError(label, f"must be a mapping of pose name to {POSE_LENGTH} angles in degrees")
    if len(data) > limits.max_poses:
        raise ScriptError(label, f"has {len(data)} poses; the limit is {limits.max_poses} (Limits.max_poses)")
    table: dict[str, tuple[float, ...]] = {}
    for name, values in data.items():
        if not isinstance(name, str) or not name.strip():
            raise ScriptError(label, f"pose names must be non-empty strings (got {v.shown(name)})")
        table[name] = pose_values(values, f"{prefix}{name}")
    return table


def inline_poses(value: Any, *, limits: Limits = DEFAULT_LIMITS) -> dict[str, tuple[float, ...]]:
    """Validate a script's ``poses`` object.

    Args:
        value: the decoded ``poses`` value.
        limits: ``max_poses`` bounds the entry count.

    Returns:
        ``name -> six angles [deg]``, as given.

    Raises:
        ScriptError: at ``poses`` or ``poses.<name>[i]``.
    """
    return _pose_table(value, "poses", "poses.", limits)


@dataclass(frozen=True)
class PoseRegistry:
    """A flat pose registry: ``name -> six joint angles [deg]`` (EROBS ``poses.yaml``).

    Attributes:
        source: the file name (or a label) used in error messages.
        poses: the entries, angles in degrees exactly as in the file.
    """

    source: str
    poses: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "poses", MappingProxyType(dict(self.poses)))

    @classmethod
    def load(cls, path: str | Path, *, limits: Limits = DEFAULT_LIMITS) -> PoseRegistry:
        """Read a registry file with ``yaml.safe_load``.

        File format (sample ``cms_poses.yaml``)::

            safe_tool_exchange: [152.33, -110.63, -100.17, -59.12, -270.43, -207.7]
            vial_scan: [90.95, -55.09, -134.23, -80.7, -269.7, -182.8]

        An empty file is an empty registry.

        Args:
            path: the YAML file.
            limits: ``max_file_bytes`` bounds the file size, ``max_poses`` the entries.

        Returns:
            The validated registry; ``source`` is the file name.

        Raises:
            ScriptError: invalid YAML or content, naming the file and key
                (``cms_poses.yaml: home[2]: must be a finite number (deg) (got true)``).
            OSError: the file cannot be read.
        """
        data = v.load_yaml_file(path, max_bytes=limits.max_file_bytes)
        return cls.from_mapping({} if data is None else data, source=Path(path).name, limits=limits)

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], *, source: str = "<registry>", limits: Limits = DEFAULT_LIMITS
    ) -> PoseRegistry:
        """Build a registry from already-decoded data, validating it like :meth:`load`.

        Raises:
            ScriptError: at ``<source>: <name>[i]``.
        """
        return cls(source, _pose_table(data, source, f"{source}: ", limits))

    def __contains__(self, name: object) -> bool:
        return name in self.poses

    def __len__(self) -> int:
        return len(self.poses)

    def __iter__(self) -> Iterator[str]:
        return iter(self.poses)

    def get(self, name: str) -> tuple[float, ...] | None:
        """The entry's angles [deg], or ``None``."""
        return self.poses.get(name)


class PoseResolver:
    """Resolves pose names for one parse and records which ones were used.

    One instance per :func:`erobs_bt.script.parse.parse_script` call (no shared state).

    Args:
        inline: the script's validated ``poses`` (degrees).
        registry: the pose registry, if any.
    """

    def __init__(self, inline: Mapping[str, tuple[float, ...]], registry: PoseRegistry | None) -> None:
        self._inline = inline
        self._registry = registry
        self._used: dict[str, tuple[float, ...]] = {}

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (
            name in self._inline or (self._registry is not None and name in self._registry)
        )

    def resolve(self, name: str) -> JointPositions | None:
        """Look ``name`` up (inline first, then the registry) and record its use.

        Returns:
            Six joint positions [rad], or ``None`` when neither has the name (nothing
            is recorded then).
        """
        degrees = self._inline.get(name)
        if degrees is None and self._registry is not None:
            degrees = self._registry.get(name)
        if degrees is None:
            return None
        self._used.setdefault(name, degrees)
        return cast(JointPositions, to_radians(degrees))

    def require(self, name: str, path: str, *, default_of: str = "") -> JointPositions:
        """Like :meth:`resolve`, but the name must exist.

        Args:
            name: the pose name.
            path: where the name is, for the error.
            default_of: set when the name is a default the step did not give
                (e.g. ``pick_spincoater``'s ``spincoater_scan``), for the message.

        Raises:
            ScriptError: the name is in neither the inline poses nor the registry.
        """
        joints = self.resolve(name)
        if joints is None:
            origin = f"default pose {name!r} of {default_of}" if default_of else f"pose {name!r}"
            raise ScriptError(path, f"{origin} is not in {self.searched()}")
        return joints

    def searched(self, *also: str) -> str:
        """Where a name was looked for, for the message when it is found nowhere: ``the
        script's poses or the pose registry (poses.yaml; the registry is given with
        --poses …)``, or ``the script's poses (no pose registry is loaded; …)``; ``also``
        are further places (the cell's named states)."""
        if self._registry is not None:
            places = ["the script's poses", f"the pose registry ({self._registry.source})", *also]
            note = REGISTRY_OPTION_HINT
        else:
            places = ["the script's poses", *also]
            note = f"no pose registry is loaded; {REGISTRY_OPTION_HINT}"
        listed = places[0] if len(places) == 1 else ", ".join(places[:-1]) + " or " + places[-1]
        return f"{listed} ({note})"

    def origin(self, name: str) -> str:
        """Where a resolved name's values come from, as a path for messages: ``poses.<name>``
        (the script's) or ``<registry source>: <name>``."""
        if name in self._inline or self._registry is None:
            return f"poses.{name}"
        return f"{self._registry.source}: {name}"

    @property
    def used(self) -> dict[str, tuple[float, ...]]:
        """Every name resolved so far, in first-use order, with its values [deg] as given."""
        return dict(self._used)

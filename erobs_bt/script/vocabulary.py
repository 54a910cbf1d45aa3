"""The cell's vocabulary: the names a script may use, read from the cell configuration.

A script names grippers (``start_gripper``, ``tool_exchange.gripper``), gripper states
(``end_effector_action``: ``vacuum_on``, ``hande_closed``, …), the roles vision tasks
use for them (``grasp``, ``release``), named robot states (``moveto.target:
moveit_home``) and tool-changer docks (``dock_number``). All of them are properties of
the cell, so they live in one place, the cell configuration (``config/cell.yaml``), and
:class:`CellVocabulary` is the one reader of them. The parser checks scripts against
it; the simulated cell (:mod:`erobs_bt.world.cell`) takes its gripper states,
roles and named states from it; the JSON Schema (:mod:`erobs_bt.script.schema`) lists
them.

This module reads the YAML with PyYAML only (no numpy, no planner): validating a
script costs no more than reading two small YAML files.

The sections read (the rest of ``cell.yaml`` is the simulated cell's geometry)::

    named_states_deg: {<name>: [6 joint angles, deg]}
    grippers:
      <name>:                      at least ``none`` (the bare flange)
        actions: [<state>, ...]    the gripper's states (end_effector_action); optional
        roles: {<role>: <state>}   optional; role names (grasp, release) of its states
    docks:
      - number: <int >= 1>         unique
        gripper: <gripper> | null  the tool stored there when the cell starts

Errors are :class:`ScriptError` whose path starts with the file name
(``cell.yaml: grippers.epick.roles.grasp: ...``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from erobs_bt.paths import config_file
from erobs_bt.script import _values as v
from erobs_bt.script.errors import ScriptError
from erobs_bt.script.limits import DEFAULT_LIMITS, Limits
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.script.poses import check_joint_angle

#: The packaged cell configuration: ``config/cell.yaml`` of :func:`erobs_bt.paths.share_dir`
#: (the source checkout, or the installed ``share/erobs_bt`` found through the ament index).
DEFAULT_CELL_PATH: Path = config_file("cell.yaml")

#: Role names a gripper may give its states (vision ``terminal_action``, ``pre_open``).
ROLES: tuple[str, ...] = ("grasp", "release")


@dataclass(frozen=True)
class GripperVocabulary:
    """What a script may ask of one gripper.

    Attributes:
        name: the gripper (``epick``, ``hande``, ``none``, …).
        states: its gripper states, in the configuration's order; empty for a gripper
            with no gripper group (``none``, ``pipettor``), on which gripper steps are
            successful no-ops.
        roles: role → state (``grasp → vacuum_on``); every value is one of ``states``.
    """

    name: str
    states: tuple[str, ...] = ()
    roles: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class CellVocabulary:
    """The names a script may use in one cell.

    Attributes:
        source: the configuration file (for messages).
        grippers: gripper name → its vocabulary, in the configuration's order.
        named_states: named robot state → six joint angles [deg].
        docks: dock number → the tool stored there when the cell starts (``None``: empty).
    """

    source: str
    grippers: Mapping[str, GripperVocabulary]
    named_states: Mapping[str, tuple[float, ...]]
    docks: Mapping[int, str | None]

    def gripper_roles(self, gripper: str) -> Mapping[str, str]:
        """``role -> state`` of ``gripper`` (empty for an unknown gripper or one without states)."""
        entry = self.grippers.get(gripper)
        return entry.roles if entry is not None else MappingProxyType({})

    def gripper_states(self, gripper: str) -> tuple[str, ...]:
        """The states of ``gripper`` (empty for an unknown gripper or one without states)."""
        entry = self.grippers.get(gripper)
        return entry.states if entry is not None else ()

    @classmethod
    def from_document(cls, document: Any, *, source: str) -> CellVocabulary:
        """Read the vocabulary sections of an already-decoded cell document.

        Raises:
            ScriptError: at ``<source>: <key>`` (a missing ``grippers.none``, a role whose
                state the gripper does not have, a duplicate dock number, …).
        """
        root = _mapping(document, source, "")
        raw_grippers = _mapping(root.get("grippers"), source, "grippers")
        if "none" not in raw_grippers:
            raise ScriptError(f"{source}: grippers.none", "missing (the bare flange must be described)")
        grippers: dict[str, GripperVocabulary] = {}
        for name, item in raw_grippers.items():
            key = f"grippers.{name}"
            raw = _mapping(item, source, key)
            states_raw = v.array(raw.get("actions", []), f"{source}: {key}.actions")
            states = tuple(v.string(s, f"{source}: {key}.actions[{i}]") for i, s in enumerate(states_raw))
            roles_raw = _mapping(raw.get("roles", {}), source, f"{key}.roles")
            roles: dict[str, str] = {}
            for role, state in roles_raw.items():
                where = f"{source}: {key}.roles.{role}"
                if role not in ROLES:
                    raise ScriptError(where, f"unknown role (roles: {', '.join(ROLES)})")
                if state not in states:
                    raise ScriptError(
                        where, f"{v.shown(state)} is not one of the gripper's actions ({', '.join(states)})"
                    )
                roles[role] = state
            grippers[name] = GripperVocabulary(name, states, MappingProxyType(roles))
        named: dict[str, tuple[float, ...]] = {}
        for state, joints in _mapping(root.get("named_states_deg", {}), source, "named_states_deg").items():
            where = f"{source}: named_states_deg.{state}"
            angles = v.numbers(joints, where, len(JOINT_NAMES), unit="deg")
            for i, angle in enumerate(angles):
                check_joint_angle(angle, i, f"{where}[{i}]")
            named[state] = angles
        docks: dict[int, str | None] = {}
        for i, item in enumerate(v.array(root.get("docks", []) or [], f"{source}: docks")):
            raw = _mapping(item, source, f"docks[{i}]")
            number = v.integer(raw.get("number"), f"{source}: docks[{i}].number", minimum=1)
            if number in docks:
                raise ScriptError(f"{source}: docks[{i}].number", f"duplicate dock number {number}")
            stored = raw.get("gripper")
            if stored is not None and (stored not in grippers or stored == "none"):
                raise ScriptError(
                    f"{source}: docks[{i}].gripper",
                    f"unknown gripper {v.shown(stored)} (available: {', '.join(grippers)})",
                )
            docks[number] = stored
        return cls(
            source=source,
            grippers=MappingProxyType(grippers),
            named_states=MappingProxyType(named),
            docks=MappingProxyType(dict(sorted(docks.items()))),
        )

    @classmethod
    def load(cls, path: str | Path = DEFAULT_CELL_PATH, *, limits: Limits = DEFAULT_LIMITS) -> CellVocabulary:
        """Read the vocabulary of the cell configuration at ``path`` (``yaml.safe_load``).

        Raises:
            ScriptError: invalid YAML or vocabulary, naming the file and key.
            OSError: the file cannot be read.
        """
        document = v.load_yaml_file(path, max_bytes=limits.max_file_bytes)
        return cls.from_document(document, source=Path(path).name)

    @classmethod
    def default(cls) -> CellVocabulary:
        """The vocabulary of the packaged ``config/cell.yaml`` (read once per process)."""
        return _default_vocabulary()


@functools.lru_cache(maxsize=1)
def _default_vocabulary() -> CellVocabulary:
    return CellVocabulary.load(DEFAULT_CELL_PATH)


def _mapping(value: Any, source: str, key: str) -> Mapping[str, Any]:
    return v.mapping(value, f"{source}: {key}" if key else source)


def parse_dock_contents(text: str, *, where: str = "--docks") -> dict[int, str | None]:
    """``1=hande,4=epick`` (the ``--docks`` option, the node's ``docks`` parameter) as
    ``{1: "hande", 4: "epick"}``; ``3=`` or ``3=empty`` names an empty dock.

    Raises:
        ValueError: ``<where>: <reason>`` for a malformed entry or a dock named twice.
    """
    out: dict[int, str | None] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        number, sep, tool = (part.strip() for part in entry.partition("="))
        if not sep or not number.isdigit() or int(number) < 1:
            raise ValueError(
                f"{where}: expected <dock number>=<gripper> entries, e.g. 1=hande,4=epick (got {entry!r})"
            )
        if int(number) in out:
            raise ValueError(f"{where}: dock {number} is named twice")
        out[int(number)] = None if tool in ("", "empty", "none") else tool
    return out


def start_docks(docks: Mapping[int, str | None], start_gripper: str) -> dict[int, str | None]:
    """What the docks hold when a goal starts on a fresh cell (just started or reset): the
    configured contents less the start tool, which the operator took out and mounted; a
    tool stored in no dock stays off the rack.

    The one rule for it: ``erobs-bt validate`` (its ``docks at start`` line), ``erobs-bt
    run`` (the same line) and the engine's first goal (:meth:`MotionStack.prepare_goal
    <erobs_bt.backends.stack.MotionStack.prepare_goal>`, through
    :func:`erobs_bt.world.tools.initial_tool_state`) all use it. Later goals start from the
    docks as the earlier ones left them.

    Args:
        docks: dock number → the tool the cell configuration (or ``--docks``) stores there
            (``None``: empty).
        start_gripper: the script's ``start_gripper`` (``none``: the bare flange).

    Returns:
        dock number → tool (``None``: empty), by ascending number.
    """
    return {n: (None if tool == start_gripper else tool) for n, tool in sorted(docks.items())}


def dock_conflict(docks: Mapping[int, str | None], start_gripper: str | None = None) -> str | None:
    """Why the dock contents an operator stated for the start (``--docks``, the node's
    ``docks`` parameter) contradict each other or the script's start tool, or ``None``.

    The one rule, worded once: ``erobs-bt validate`` and ``erobs-bt run`` print it as a
    ``configuration error:`` (exit 2), :func:`erobs_bt.world.beamline.with_dock_contents`
    refuses the docks with it, and the orchestrator refuses a goal with it before anything
    moves. A tool is in one place: in one dock, or on the arm. (A cell file's own docks may
    hold the start tool: that is its home dock, and the operator took it out; only stated
    contents are checked against the start tool.)

    Args:
        docks: dock number → the tool stated to be there at start (``None``: empty).
        start_gripper: the script's ``start_gripper`` (on the arm at start), or ``None`` to
            check the docks against each other only.

    Returns:
        ``dock 1 holds the hande, but the script's start_gripper puts the hande on the arm: a
        tool is in one place; set --docks without it (the node: its docks parameter), e.g.
        --docks 1=,4=epick``; ``docks 1 and 2 both hold the hande …`` for a tool in two
        docks; ``None`` when the contents are consistent.
    """
    where: dict[str, int] = {}
    for number, tool in sorted(docks.items()):
        if tool is None:
            continue
        if tool in where:
            return (
                f"docks {where[tool]} and {number} both hold the {tool}, but a tool is in one place; "
                + _dock_fix({**docks, number: None})
            )
        where[tool] = number
    if start_gripper is not None and start_gripper in where:
        number = where[start_gripper]
        return (
            f"dock {number} holds the {start_gripper}, but the script's start_gripper puts the "
            f"{start_gripper} on the arm: a tool is in one place; " + _dock_fix({**docks, number: None})
        )
    return None


def _dock_fix(docks: Mapping[int, str | None]) -> str:
    """``set --docks without it (…), e.g. --docks 1=,4=epick`` for consistent ``docks``."""
    spec = ",".join(f"{n}={tool or ''}" for n, tool in sorted(docks.items()))
    return f"set --docks without it (the node: its docks parameter), e.g. --docks {spec}"


def dock_contents_text(docks: Mapping[int, str | None]) -> str:
    """``1: hande, 2: empty, …``: what the docks hold, for people (validate, reset-sim, state)."""
    return ", ".join(f"{n}: {tool or 'empty'}" for n, tool in sorted(docks.items())) or "none"

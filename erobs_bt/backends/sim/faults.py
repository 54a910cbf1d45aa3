"""Fault injection for the simulated cell, from configuration.

Why: every failure path of the engine (plan failure, rejected goal, execution error,
the fatal ``TIMEOUT:``/``REPLAY_TIMEOUT:`` that faults the orchestrator, a non-fatal
replay error that triggers exactly one fresh attempt) must run end to end against the
same backend that runs the happy path, not only against a scripted double. The faults
are data: a ``faults:`` list in the cell YAML or in a separate file, so a CLI run, a
launch file or a test can all select them.

The language (targets, outcomes, keys, counting, the former spellings) is documented once,
in docs/fault-injection.md; this module is its one parser (:func:`parse_faults`), read by
both consumers: the in-process cell (:class:`SimBackend`, its calls :data:`FAULT_CALLS`) and
the simulated hardware node (``erobs_bt_sim_hardware --faults``, its ROS interfaces
:data:`FAULT_INTERFACES`). :class:`FaultInjector` counts the calls and says which fault
fires; :meth:`FaultSpec.error` is the error the in-process cell reports (``T`` is
``REPLAY_TIMEOUT`` for a replay, else ``TIMEOUT``, per docs/behaviour.md §3)::

    faults:
      - {call: execute, outcome: execution_error, occurrence: 2, after_fraction: 0.3}
      - {call: replay, outcome: replay_error, prefix: REPLAY_TIMEOUT}
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.timeouts import ACCEPTANCE_TIMEOUT, DEFAULT_TIMEOUTS
from erobs_bt.validation import Checker, ConfigError, join, read_yaml, shown

#: Calls of the in-process simulated cell's backend an entry can target.
FAULT_CALLS: tuple[str, ...] = ("plan", "execute", "replay", "run_step", "acceptance")
#: Calls that send a goal to a (simulated) action server.
DISPATCH_CALLS: tuple[str, ...] = ("execute", "replay", "run_step", "acceptance")
#: ROS interfaces of the simulated hardware node (``erobs_bt_sim_hardware --faults``) an
#: entry can target.
FAULT_INTERFACES: tuple[str, ...] = ("follow_joint_trajectory", "gripper_command", "set_io", "pipettor")
#: The interfaces that are action servers (the others: the SetIO service).
ACTION_INTERFACES: tuple[str, ...] = ("follow_joint_trajectory", "gripper_command", "pipettor")
#: Every target of the language: the cell's calls, then the hardware node's interfaces.
FAULT_TARGETS: tuple[str, ...] = FAULT_CALLS + FAULT_INTERFACES
#: Outcome -> the targets it may be attached to.
FAULT_OUTCOMES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "planning_failure": ("plan", "run_step"),
        "goal_rejected": DISPATCH_CALLS + FAULT_INTERFACES,
        "execution_error": DISPATCH_CALLS + ACTION_INTERFACES,
        "acceptance_timeout": DISPATCH_CALLS,
        "execution_timeout": DISPATCH_CALLS + FAULT_INTERFACES,
        "server_unavailable": DISPATCH_CALLS + FAULT_INTERFACES,
        "replay_error": ("replay",),
    }
)
#: The hardware node's former outcome names, still accepted: old name -> outcome.
OUTCOME_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "reject": "goal_rejected",
        "refuse": "goal_rejected",
        "error_code": "execution_error",
        "hang": "execution_timeout",
        "server_down": "server_unavailable",
    }
)
#: Outcomes that play part of the motion before failing.
MOTION_OUTCOMES: frozenset[str] = frozenset({"execution_error", "execution_timeout"})

#: Keys of an entry (``interface`` is another spelling of ``call``).
_KEYS = (
    "call",
    "interface",
    "outcome",
    "occurrence",
    "step_type",
    "step_index",
    "message",
    "prefix",
    "delay",
    "after_fraction",
    "error_code",
)
#: Keys only an entry on one of the cell's calls takes.
_CALL_KEYS = ("step_type", "step_index", "prefix", "delay")
_DEFAULT_MESSAGES: Mapping[str, str] = MappingProxyType(
    {
        "planning_failure": "injected planning failure",
        "goal_rejected": "injected rejection",
        "execution_error": "injected execution error",
        "acceptance_timeout": "injected acceptance timeout",
        "execution_timeout": "injected execution timeout",
        "server_unavailable": "injected server unavailability",
        "replay_error": "injected replay error",
    }
)


@dataclass(frozen=True)
class FaultSpec:
    """One configured fault.

    Attributes:
        call: the call or interface it applies to (:data:`FAULT_TARGETS`).
        outcome: what happens (:data:`FAULT_OUTCOMES`).
        occurrences: the 1-based matching calls it fires on; ``None`` for every one.
        step_type: only calls involving a step of this task type count.
        step_index: only calls involving the step with this index count.
        message: detail text of the error (a default per outcome when ``None``).
        prefix: the error code of a ``replay_error``.
        delay: wall seconds before the failure is reported.
        after_fraction: share of the motion played before an execution fault, [0, 1].
        error_code: the ``FollowJointTrajectory`` result code of an ``execution_error`` on
            the hardware node (``None``: ``PATH_TOLERANCE_VIOLATED``).
        source: where the entry was read (``faults.yaml: faults[2]``).
    """

    call: str
    outcome: str
    occurrences: frozenset[int] | None = frozenset({1})
    step_type: str | None = None
    step_index: int | None = None
    message: str | None = None
    prefix: ErrorCode = ErrorCode.EXECUTION_FAILED
    delay: float = 0.0
    after_fraction: float = 0.5
    error_code: int | None = None
    source: str = "faults"

    @property
    def interface(self) -> str:
        """The target (:attr:`call`), under the hardware node's name for it."""
        return self.call

    @property
    def detail(self) -> str:
        """The error's detail text: :attr:`message`, else the outcome's default."""
        return self.message if self.message is not None else _DEFAULT_MESSAGES[self.outcome]

    @property
    def moves(self) -> bool:
        """True when the fault plays part of the motion before failing."""
        return self.outcome in MOTION_OUTCOMES

    def error(
        self,
        *,
        replay: bool,
        server: str,
        acceptance_timeout: float = ACCEPTANCE_TIMEOUT,
        execution_timeout: float = DEFAULT_TIMEOUTS["moveto"],
    ) -> MotionError:
        """The error this fault produces.

        Args:
            replay: the call executes a cached solution (timeouts become ``REPLAY_TIMEOUT``).
            server: the simulated action server, for the message (``execute_task``, …).
            acceptance_timeout: the reported goal-acceptance timeout [s].
            execution_timeout: the reported execution timeout [s].
        """
        timeout_code = ErrorCode.REPLAY_TIMEOUT if replay else ErrorCode.TIMEOUT
        detail = self.message
        if self.outcome == "planning_failure":
            return MotionError(ErrorCode.PLANNING_FAILED, detail or _DEFAULT_MESSAGES[self.outcome])
        if self.outcome == "goal_rejected":
            return MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"goal rejected by {server}: {detail or _DEFAULT_MESSAGES[self.outcome]}",
            )
        if self.outcome == "execution_error":
            return MotionError(ErrorCode.EXECUTION_FAILED, detail or _DEFAULT_MESSAGES[self.outcome])
        if self.outcome == "acceptance_timeout":
            text = f"goal acceptance over {acceptance_timeout:g} s ({server})"
            return MotionError(timeout_code, f"{text}: {detail}" if detail else text)
        if self.outcome == "execution_timeout":
            text = f"execution over {execution_timeout:g} s ({server})"
            return MotionError(timeout_code, f"{text}: {detail}" if detail else text)
        if self.outcome == "server_unavailable":
            # Not fatal (docs/behaviour.md §3): the specification lists server
            # unavailability with the errors that plan the whole batch afresh, once.
            text = f"{server} action server unavailable"
            return MotionError(ErrorCode.EXECUTION_FAILED, f"{text}: {detail}" if detail else text)
        return MotionError(self.prefix, detail or _DEFAULT_MESSAGES["replay_error"])


@dataclass(frozen=True)
class FiredFault:
    """A record of one fault that fired: the spec, the call and its occurrence number."""

    spec: FaultSpec
    call: str
    occurrence: int


class FaultInjector:
    """Decides, call by call, whether a configured fault fires. Thread-safe.

    Args:
        specs: the configured faults, in priority order.
        acceptance_timeout: the goal-acceptance timeout reported by ``acceptance_timeout``
            faults [s] (EROBS: 10 s).
        execution_timeout: the execution timeout reported by ``execution_timeout``
            faults [s] (EROBS motion: 120 s).
    """

    def __init__(
        self,
        specs: Iterable[FaultSpec] = (),
        *,
        acceptance_timeout: float = ACCEPTANCE_TIMEOUT,
        execution_timeout: float = DEFAULT_TIMEOUTS["moveto"],
    ) -> None:
        self.acceptance_timeout = float(acceptance_timeout)
        self.execution_timeout = float(execution_timeout)
        self._specs = tuple(specs)
        self._counts = [0] * len(self._specs)
        self._lock = threading.Lock()
        self._fired: list[FiredFault] = []

    @property
    def specs(self) -> tuple[FaultSpec, ...]:
        """The configured faults."""
        return self._specs

    def fired(self) -> list[FiredFault]:
        """The faults that fired so far, in order."""
        with self._lock:
            return list(self._fired)

    def check(
        self,
        call: str,
        *,
        step_types: Sequence[str] = (),
        step_indices: Sequence[int] = (),
    ) -> FaultSpec | None:
        """Count a call and return the fault that fires on it, if any.

        Args:
            call: a cell call (``plan``, ``execute``, ``replay``, ``run_step``,
                ``acceptance``) or a hardware-node interface (:data:`FAULT_INTERFACES`).
            step_types: task types of the steps the call involves.
            step_indices: indices of the steps the call involves.

        Raises:
            ValueError: unknown call kind.
        """
        if call not in FAULT_TARGETS:
            raise ValueError(f"unknown fault call {call!r} (expected one of {', '.join(FAULT_TARGETS)})")
        with self._lock:
            chosen: FaultSpec | None = None
            for i, spec in enumerate(self._specs):
                if spec.call != call or (call in FAULT_INTERFACES and spec.outcome == "server_unavailable"):
                    continue
                if spec.step_type is not None and spec.step_type not in step_types:
                    continue
                if spec.step_index is not None and spec.step_index not in step_indices:
                    continue
                self._counts[i] += 1
                due = spec.occurrences is None or self._counts[i] in spec.occurrences
                if due and chosen is None:
                    chosen = spec
                    self._fired.append(FiredFault(spec, call, self._counts[i]))
            return chosen

    def down(self, interface: str) -> bool:
        """True when a hardware-node ``interface`` is not served at all (a
        ``server_unavailable`` entry on it: it applies from the start, whatever its occurrence)."""
        return any(s.call == interface and s.outcome == "server_unavailable" for s in self._specs)

    def error(self, spec: FaultSpec, *, replay: bool, server: str) -> MotionError:
        """The error ``spec`` produces with this injector's timeouts (:meth:`FaultSpec.error`)."""
        return spec.error(
            replay=replay,
            server=server,
            acceptance_timeout=self.acceptance_timeout,
            execution_timeout=self.execution_timeout,
        )


def parse_faults(
    data: Any, *, source: str, key: str = "faults", targets: Sequence[str] = FAULT_CALLS
) -> tuple[FaultSpec, ...]:
    """Validate a list of fault entries (the language: docs/fault-injection.md).

    Args:
        data: the YAML list of mappings, or ``None``.
        source: the file it came from, for error messages (``cell.yaml``; ``""`` for none).
        key: the list's key path, for error messages (``faults``, ``faults.inject``,
            ``--faults``).
        targets: the calls or interfaces the consumer serves: :data:`FAULT_CALLS` for the
            in-process cell, :data:`FAULT_INTERFACES` for the hardware node.

    Returns:
        The fault specs in order (outcomes under their names, aliases resolved).

    Raises:
        ConfigError: invalid entry; the message names the file and key, e.g.
            ``faults.yaml: faults[1].outcome: unknown outcome 'oops' (expected one of: …)``.
    """
    check = Checker(file=source, string_keys=True)
    if data is None:
        return ()
    specs = []
    for i, item in enumerate(check.array(data, key)):
        where = join(key, i)
        entry = check.mapping(item, where)
        check.only_keys(entry, where, _KEYS)
        specs.append(_parse_entry(check, entry, where, targets))
    return tuple(specs)


def _parse_entry(check: Checker, entry: Mapping[str, Any], where: str, targets: Sequence[str]) -> FaultSpec:
    if "call" in entry and "interface" in entry:
        raise check.fail(where, "give call or interface (the same key), not both")
    target_key = "interface" if "interface" in entry else "call"
    what = "interface" if targets == FAULT_INTERFACES else "call"
    call = check.choice(check.required(entry, target_key, where), join(where, target_key), targets, what=what)
    outcomes = [o for o, allowed in FAULT_OUTCOMES.items() if call in allowed]
    named = check.required(entry, "outcome", where)
    outcome = OUTCOME_ALIASES.get(named, named) if isinstance(named, str) else named
    if outcome in FAULT_OUTCOMES and outcome not in outcomes:
        raise check.fail(
            join(where, "outcome"),
            f"{outcome} cannot happen on call {call} (allowed calls: {', '.join(FAULT_OUTCOMES[outcome])})",
        )
    check.choice(outcome, join(where, "outcome"), outcomes, what="outcome")
    on_interface = call in FAULT_INTERFACES
    for name in _CALL_KEYS if on_interface else ("error_code",):
        if name in entry:
            kind = "the cell's calls" if on_interface else "the hardware node's interfaces"
            raise check.fail(join(where, name), f"only valid for {kind}")
    step_type = entry.get("step_type")
    if step_type is not None:
        step_type = check.string(step_type, join(where, "step_type"))
        if call not in ("plan", "run_step"):
            raise check.fail(join(where, "step_type"), f"only valid for call plan or run_step (got {call})")
    step_index = entry.get("step_index")
    if step_index is not None:
        step_index = check.integer(step_index, join(where, "step_index"), minimum=0)
    message = entry.get("message")
    if message is not None:
        message = check.string(message, join(where, "message"), allow_empty=True)
    prefix = ErrorCode.EXECUTION_FAILED
    if entry.get("prefix") is not None:
        if outcome != "replay_error":
            raise check.fail(join(where, "prefix"), "only valid for outcome replay_error")
        named_prefix = entry["prefix"].rstrip(":") if isinstance(entry["prefix"], str) else entry["prefix"]
        codes = tuple(code.value for code in ErrorCode)
        prefix = ErrorCode(check.choice(named_prefix, join(where, "prefix"), codes, what="prefix"))
    if "after_fraction" in entry and (
        outcome not in MOTION_OUTCOMES or (on_interface and outcome != "execution_error")
    ):
        raise check.fail(
            join(where, "after_fraction"),
            "only valid for execution_error" + ("" if on_interface else " and execution_timeout"),
        )
    error_code = entry.get("error_code")
    if error_code is not None:
        if outcome != "execution_error":
            raise check.fail(join(where, "error_code"), "only valid for outcome execution_error")
        error_code = check.integer(error_code, join(where, "error_code"), minimum=-(2**31))
    return FaultSpec(
        call=call,
        outcome=outcome,
        occurrences=check.occurrences(entry.get("occurrence", 1), join(where, "occurrence")),
        step_type=step_type,
        step_index=step_index,
        message=message,
        prefix=prefix,
        delay=check.number(entry.get("delay", 0.0), join(where, "delay"), unit="s", minimum=0.0),
        after_fraction=check.number(
            entry.get("after_fraction", 0.5), join(where, "after_fraction"), minimum=0.0, maximum=1.0
        ),
        error_code=error_code,
        source=f"{check.file}: {where}" if check.file else where,
    )


def parse_fault_section(value: Any, *, source: str) -> FaultInjector:
    """Validate the value of a ``faults`` key of the in-process cell.

    The value is ``null``/``{}``/``[]`` (no faults), a list of fault entries, or a mapping::

        faults:
          acceptance_timeout: 10.0    # reported goal-acceptance timeout [s] (> 0)
          execution_timeout: 120.0    # reported execution timeout [s] (> 0)
          inject: [<entry>, ...]      # the fault entries

    Raises:
        ConfigError: ``<source>: faults.<key>: <reason>`` / ``<source>: faults[<i>]...``.
    """
    if value is None or isinstance(value, list):
        return FaultInjector(parse_faults(value, source=source))
    check = Checker(file=source, string_keys=True)
    section = check.mapping(value, "faults")
    check.only_keys(section, "faults", ("acceptance_timeout", "execution_timeout", "inject"))
    timeouts = {
        key: check.number(section.get(key, default), f"faults.{key}", unit="s", positive=True)
        for key, default in (
            ("acceptance_timeout", ACCEPTANCE_TIMEOUT),
            ("execution_timeout", DEFAULT_TIMEOUTS["moveto"]),
        )
    }
    specs = parse_faults(section.get("inject"), source=source, key="faults.inject")
    return FaultInjector(specs, **timeouts)


def fault_value(document: Any, *, source: str, key: str = "faults") -> Any:
    """The fault entries of a decoded fault document (a file, or ``--faults`` text).

    The document is a list of entries, one entry (a mapping with entry keys such as
    ``call``/``interface``), or a mapping with a ``faults`` key; any other mapping has no
    faults (a cell YAML without a ``faults`` section).

    Args:
        document: the decoded YAML.
        source: the file, for messages (``""`` for inline text).
        key: the document's key path in messages when there is no file (``--faults``).

    Returns:
        The ``faults`` value (for :func:`parse_fault_section` / :func:`parse_faults`), or
        ``None`` for none.

    Raises:
        ConfigError: a document of another shape (a number, a string).
    """
    if isinstance(document, Mapping):
        if "faults" in document:
            return document["faults"]
        return [document] if any(k in _KEYS for k in document) else None
    if document is not None and not isinstance(document, list):
        raise ConfigError(
            "" if source else key,
            f"must be a list of faults, one fault or a mapping with a faults key (got {shown(document)})",
            file=source,
        )
    return document


def load_faults(path: str | Path) -> FaultInjector:
    """Read the fault injection of the in-process cell from a YAML file (a cell file or a
    separate faults file; :func:`fault_value` for its shapes, :func:`parse_fault_section` for
    the ``faults`` value).

    Raises:
        ConfigError: unreadable file, invalid YAML or invalid entries (message names the
            file and key).
    """
    source = str(path)
    value = fault_value(read_yaml(source), source=source)
    return parse_fault_section(value, source=source)

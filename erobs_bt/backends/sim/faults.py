"""Fault injection for the simulated cell, from configuration.

Why: every failure path of the engine (plan failure, rejected goal, execution error,
the fatal ``TIMEOUT:``/``REPLAY_TIMEOUT:`` that faults the orchestrator, a non-fatal
replay error that triggers exactly one fresh attempt) must run end to end against the
same backend that runs the happy path, not only against a scripted double. The faults
are data: a ``faults:`` list in the cell YAML or in a separate file, so a CLI run, a
launch file or a test can all select them.

Schema (one mapping per entry; unknown keys are errors). ``faults`` is a list of
entries, or a mapping with the reported timeouts and an ``inject`` list
(:func:`parse_fault_section`)::

    faults:
      - call: execute          # plan | execute | replay | run_step | acceptance
        outcome: execution_error
        occurrence: 1          # which matching call(s), 1-based: an int, a list of ints,
                               # or "all" (default 1)
        step_type: tool_exchange  # plan/run_step only: the call involves a step of this type
        step_index: 3          # the call involves the step with this expanded index
        message: "gripper cable snagged"   # optional detail text
        prefix: REPLAY_TIMEOUT # replay_error only: PLANNING_FAILED | EXECUTION_FAILED |
                               # TIMEOUT | REPLAY_TIMEOUT (default EXECUTION_FAILED)
        delay: 0.0             # wall seconds before the failure is reported (>= 0)
        after_fraction: 0.5    # execution_error / execution_timeout: share of the motion
                               # played before the arm is stopped, in [0, 1] (default 0.5)

Calls: ``plan`` (:meth:`SimBackend.plan`), ``execute`` (a fresh execution),
``replay`` (an execution with ``replay=True``), ``run_step`` (tool exchange, pipettor,
vision) and ``acceptance`` (goal acceptance of any dispatch: ``execute``, ``replay`` and
``run_step`` calls count as acceptance calls, in order).

Outcomes and the error each produces (``T`` is ``REPLAY_TIMEOUT`` for a replay, else
``TIMEOUT``, per docs/behaviour.md §3):

* ``planning_failure`` (plan, run_step): ``PLANNING_FAILED: <message>``;
* ``goal_rejected`` (dispatches): ``EXECUTION_FAILED: goal rejected by <server>: <message>``;
* ``execution_error`` (dispatches): ``EXECUTION_FAILED: <message>``, after part of the motion;
* ``acceptance_timeout`` (dispatches): ``T: goal acceptance over <acceptance_timeout> s (<server>)``;
* ``execution_timeout`` (dispatches): ``T: execution over <execution_timeout> s (<server>)``,
  after part of the motion;
* ``server_unavailable`` (dispatches): ``EXECUTION_FAILED: <server> action server unavailable``
  (not fatal: a replay is followed by one fresh attempt, docs/behaviour.md §3);
* ``replay_error`` (replay): ``<prefix>: <message>``.

"Dispatches" are ``execute``, ``replay``, ``run_step`` and ``acceptance``. Timeouts are
simulated: the reported duration is the configured one (10 s for goal acceptance, as in
EROBS), while the wall-clock wait is ``delay``, so tests stay fast. Nothing is moved
for an acceptance or rejection fault; execution faults stop the arm part-way along its
path (``after_fraction``), as a real controller aborting would.

Each entry counts its own matching calls; when several entries match a call, the first
in file order whose occurrence is due fires. A dispatch counts as one ``acceptance`` call
and one call of its own kind. An execution fault on ``run_step`` cuts the step's first
motion (a step without motion reports it after the command ran).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.script._values import safe_load_yaml
from erobs_bt.timeouts import ACCEPTANCE_TIMEOUT, DEFAULT_TIMEOUTS

#: Call kinds an entry can target.
FAULT_CALLS: tuple[str, ...] = ("plan", "execute", "replay", "run_step", "acceptance")
#: Calls that send a goal to a (simulated) action server.
DISPATCH_CALLS: tuple[str, ...] = ("execute", "replay", "run_step", "acceptance")
#: Outcome -> the calls it may be attached to.
FAULT_OUTCOMES: Mapping[str, tuple[str, ...]] = {
    "planning_failure": ("plan", "run_step"),
    "goal_rejected": DISPATCH_CALLS,
    "execution_error": DISPATCH_CALLS,
    "acceptance_timeout": DISPATCH_CALLS,
    "execution_timeout": DISPATCH_CALLS,
    "server_unavailable": DISPATCH_CALLS,
    "replay_error": ("replay",),
}
#: Outcomes that play part of the motion before failing.
MOTION_OUTCOMES: frozenset[str] = frozenset({"execution_error", "execution_timeout"})

#: EROBS waits this long for a goal to be accepted before ``TIMEOUT:`` [s] (the timeout table).
DEFAULT_ACCEPTANCE_TIMEOUT = ACCEPTANCE_TIMEOUT
#: EROBS's execution timeout of a motion goal [s] (the timeout table's ``moveto``).
DEFAULT_EXECUTION_TIMEOUT = DEFAULT_TIMEOUTS["moveto"]

_KEYS = (
    "call",
    "outcome",
    "occurrence",
    "step_type",
    "step_index",
    "message",
    "prefix",
    "delay",
    "after_fraction",
)
_DEFAULT_MESSAGES: Mapping[str, str] = {
    "planning_failure": "injected planning failure",
    "goal_rejected": "injected rejection",
    "execution_error": "injected execution error",
    "replay_error": "injected replay error",
}


@dataclass(frozen=True)
class FaultSpec:
    """One configured fault.

    Attributes:
        call: the call kind it applies to (:data:`FAULT_CALLS`).
        outcome: what happens (:data:`FAULT_OUTCOMES`).
        occurrences: the 1-based matching calls it fires on; ``None`` for every one.
        step_type: only calls involving a step of this task type count.
        step_index: only calls involving the step with this index count.
        message: detail text of the error (a default per outcome when ``None``).
        prefix: the error code of a ``replay_error``.
        delay: wall seconds before the failure is reported.
        after_fraction: share of the motion played before an execution fault, [0, 1].
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
    source: str = "faults"

    @property
    def moves(self) -> bool:
        """True when the fault plays part of the motion before failing."""
        return self.outcome in MOTION_OUTCOMES

    def error(
        self,
        *,
        replay: bool,
        server: str,
        acceptance_timeout: float = DEFAULT_ACCEPTANCE_TIMEOUT,
        execution_timeout: float = DEFAULT_EXECUTION_TIMEOUT,
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
        acceptance_timeout: float = DEFAULT_ACCEPTANCE_TIMEOUT,
        execution_timeout: float = DEFAULT_EXECUTION_TIMEOUT,
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
            call: ``plan``, ``execute``, ``replay``, ``run_step`` or ``acceptance``.
            step_types: task types of the steps the call involves.
            step_indices: indices of the steps the call involves.

        Raises:
            ValueError: unknown call kind.
        """
        if call not in FAULT_CALLS:
            raise ValueError(f"unknown fault call {call!r} (expected one of {', '.join(FAULT_CALLS)})")
        with self._lock:
            chosen: FaultSpec | None = None
            for i, spec in enumerate(self._specs):
                if spec.call != call:
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

    def error(self, spec: FaultSpec, *, replay: bool, server: str) -> MotionError:
        """The error ``spec`` produces with this injector's timeouts (:meth:`FaultSpec.error`)."""
        return spec.error(
            replay=replay,
            server=server,
            acceptance_timeout=self.acceptance_timeout,
            execution_timeout=self.execution_timeout,
        )


def parse_faults(data: Any, *, source: str, key: str = "faults") -> tuple[FaultSpec, ...]:
    """Validate a list of fault entries.

    Args:
        data: the YAML list of mappings, or ``None``.
        source: where it came from, for error messages (``cell.yaml``).
        key: the list's key path, for error messages (``faults`` or ``faults.inject``).

    Returns:
        The fault specs in order.

    Raises:
        ValueError: invalid entry; the message names the file and key, e.g.
            ``faults.yaml: faults[1].outcome: must be one of …``.
    """
    if data is None:
        return ()
    if not isinstance(data, list):
        raise ValueError(f"{source}: {key}: must be a list of mappings, got {type(data).__name__}")
    specs = []
    for i, entry in enumerate(data):
        where = f"{source}: {key}[{i}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: must be a mapping, got {type(entry).__name__}")
        unknown = sorted(str(k) for k in entry if k not in _KEYS)
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)} (allowed: {', '.join(_KEYS)})")
        call = _choice(entry, "call", FAULT_CALLS, where, required=True)
        outcome = _choice(entry, "outcome", tuple(FAULT_OUTCOMES), where, required=True)
        assert call is not None and outcome is not None
        if call not in FAULT_OUTCOMES[outcome]:
            raise ValueError(
                f"{where}.outcome: {outcome} cannot happen on call {call} "
                f"(allowed calls: {', '.join(FAULT_OUTCOMES[outcome])})"
            )
        step_type = entry.get("step_type")
        if step_type is not None:
            if not isinstance(step_type, str) or not step_type:
                raise ValueError(f"{where}.step_type: must be a non-empty string")
            if call not in ("plan", "run_step"):
                raise ValueError(f"{where}.step_type: only valid for call plan or run_step (got {call})")
        step_index = entry.get("step_index")
        if step_index is not None and (
            isinstance(step_index, bool) or not isinstance(step_index, int) or step_index < 0
        ):
            raise ValueError(f"{where}.step_index: must be an integer >= 0, got {step_index!r}")
        message = entry.get("message")
        if message is not None and not isinstance(message, str):
            raise ValueError(f"{where}.message: must be a string")
        prefix_name = entry.get("prefix")
        if prefix_name is not None and outcome != "replay_error":
            raise ValueError(f"{where}.prefix: only valid for outcome replay_error")
        prefix = ErrorCode.EXECUTION_FAILED
        if prefix_name is not None:
            names = tuple(code.value for code in ErrorCode)
            text = str(prefix_name).rstrip(":")
            if text not in names:
                raise ValueError(f"{where}.prefix: must be one of {', '.join(names)}, got {prefix_name!r}")
            prefix = ErrorCode(text)
        delay = _number(entry, "delay", where, default=0.0, low=0.0, high=math.inf)
        after = _number(entry, "after_fraction", where, default=0.5, low=0.0, high=1.0)
        if "after_fraction" in entry and outcome not in MOTION_OUTCOMES:
            raise ValueError(
                f"{where}.after_fraction: only valid for {' and '.join(sorted(MOTION_OUTCOMES))}"
            )
        specs.append(
            FaultSpec(
                call=call,
                outcome=outcome,
                occurrences=_occurrences(entry.get("occurrence", 1), f"{where}.occurrence"),
                step_type=step_type,
                step_index=step_index,
                message=message,
                prefix=prefix,
                delay=delay,
                after_fraction=after,
                source=where,
            )
        )
    return tuple(specs)


def parse_fault_section(value: Any, *, source: str) -> FaultInjector:
    """Validate the value of a ``faults`` key.

    The value is ``null``/``{}``/``[]`` (no faults), a list of fault entries, or a mapping::

        faults:
          acceptance_timeout: 10.0    # reported goal-acceptance timeout [s] (> 0)
          execution_timeout: 120.0    # reported execution timeout [s] (> 0)
          inject: [<entry>, ...]      # the fault entries

    Raises:
        ValueError: ``<source>: faults.<key>: <reason>`` / ``<source>: faults[<i>]...``.
    """
    if value is None or isinstance(value, list):
        return FaultInjector(parse_faults(value, source=source))
    if not isinstance(value, Mapping):
        raise ValueError(f"{source}: faults: expected a list or a mapping, got {type(value).__name__}")
    allowed = ("acceptance_timeout", "execution_timeout", "inject")
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        raise ValueError(f"{source}: faults.{unknown[0]}: unknown key (allowed: {', '.join(allowed)})")
    timeouts = {}
    for key, default in (
        ("acceptance_timeout", DEFAULT_ACCEPTANCE_TIMEOUT),
        ("execution_timeout", DEFAULT_EXECUTION_TIMEOUT),
    ):
        number = value.get(key, default)
        if (
            isinstance(number, bool)
            or not isinstance(number, int | float)
            or not (math.isfinite(number) and number > 0)
        ):
            raise ValueError(f"{source}: faults.{key}: expected a number > 0 [s], got {number!r}")
        timeouts[key] = float(number)
    specs = parse_faults(value.get("inject"), source=source, key="faults.inject")
    return FaultInjector(specs, **timeouts)


def load_faults(path: str | Path) -> FaultInjector:
    """Read the fault injection of a YAML file (a cell file or a separate faults file).

    The file is either a mapping with a ``faults`` key (other keys are ignored, so the
    cell YAML can carry its faults; see :func:`parse_fault_section` for the value) or a
    bare list of fault entries.

    Raises:
        ValueError: unreadable file, invalid YAML or invalid entries (message names the
            file and key).
    """
    file = Path(path)
    try:
        data = safe_load_yaml(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{file}: cannot read fault configuration: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ValueError(f"{file}: invalid YAML: {exc}") from exc
    if isinstance(data, Mapping):
        data = data.get("faults")
    elif data is not None and not isinstance(data, list):
        raise ValueError(f"{file}: expected a mapping with a faults key or a list, got {type(data).__name__}")
    return parse_fault_section(data, source=str(file))


def _choice(
    entry: Mapping[str, Any], key: str, allowed: Sequence[str], where: str, *, required: bool
) -> str | None:
    value = entry.get(key)
    if value is None:
        if required:
            raise ValueError(f"{where}.{key}: required (one of {', '.join(allowed)})")
        return None
    if value not in allowed:
        raise ValueError(f"{where}.{key}: must be one of {', '.join(allowed)}, got {value!r}")
    return str(value)


def _number(
    entry: Mapping[str, Any], key: str, where: str, *, default: float, low: float, high: float
) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(float(value)):
        raise ValueError(f"{where}.{key}: must be a number, got {value!r}")
    if not low <= float(value) <= high or math.isinf(float(value)):
        raise ValueError(f"{where}.{key}: must be in [{low:g}, {high:g}], got {value!r}")
    return float(value)


def _occurrences(value: Any, where: str) -> frozenset[int] | None:
    if value == "all":
        return None
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ValueError(f"{where}: must not be empty")
    out = set()
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            raise ValueError(f"{where}: must be 'all', an integer >= 1 or a list of them, got {value!r}")
        out.add(item)
    return frozenset(out)

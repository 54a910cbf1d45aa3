"""The cell's per-tool bringup: erobs_bt launches it, and relaunches it after a tool exchange.

On EROBS's cell the tool's controller runs only while that tool is fitted: after a dock or a load
the orchestrator kills the whole bringup (ur_robot_driver, the arm's and the tool's controllers,
MoveIt) and launches it again for the new tool (bondada-a/erobs ``moveit_lifecycle_manager.py``,
``launch_moveit_with_gripper`` and ``_attempt_launch``: ``ros2 launch <package>
robot_bringup.launch.py ... gripper:=<tool>`` in a session of its own; ``kill_current_process``:
SIGTERM to the process group, SIGKILL after 3 s; the tool voltage set, then 2 s for the tool to
power up, then up to 45 s for MoveIt, then the robot program restarted and six joint states
checked). With erobs_bt in the orchestrator's place, nobody else relaunches: when the hardware
YAML has a ``bringup`` section, :class:`Bringup` does it, and a step that ends a tool exchange
fails, naming what did not come back, unless the cell's interfaces are all back within
``ready_timeout``. Without the section nothing is launched (the bringup is someone else's).

The hardware YAML's section::

    bringup:
      command: [ros2, launch, cms_moveit_config, robot_bringup.launch.py, "gripper:={tool}"]
      ready_timeout: 45    # [s] for every interface to come back (EROBS: 45 s for MoveIt)
      stop_timeout: 3      # [s] after SIGTERM before SIGKILL (EROBS: 3 s)
      power_settle: 2      # [s] after the tool voltage, before launching for a tool (EROBS: 2 s)

``{tool}`` in an argument is replaced by the fitted tool's name (``none`` for the bare flange).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.validation import Checker, join

_LOG = logging.getLogger(__name__)

#: What must come back after a launch: a name for the error message, and whether it is back.
Check = tuple[str, Callable[[], bool]]
#: The keys of the hardware YAML's ``bringup`` section.
BRINGUP_KEYS = ("command", "ready_timeout", "stop_timeout", "power_settle")
#: The placeholder of the tool's name in ``command``.
TOOL_PLACEHOLDER = "{tool}"


@dataclass(frozen=True)
class BringupConfig:
    """How the cell's bringup is launched (the hardware YAML's ``bringup`` section).

    Attributes:
        command: the program and its arguments; :data:`TOOL_PLACEHOLDER` in an argument is
            replaced by the tool's name.
        ready_timeout: [s] for every interface to come back after a launch (EROBS waits 45 s
            for MoveIt: ``_wait_for_moveit_ready``).
        stop_timeout: [s] after SIGTERM to the bringup's process group before SIGKILL (EROBS:
            3 s, ``kill_current_process``).
        power_settle: [s] between the tool voltage and a launch for a tool, so that the tool's
            driver finds it powered (EROBS: 2 s, "Hand-E/ePick activation fails with Modbus
            errors" otherwise, ``_attempt_launch``); not waited for the bare flange.
    """

    command: tuple[str, ...]
    ready_timeout: float = 45.0
    stop_timeout: float = 3.0
    power_settle: float = 2.0

    def argv(self, tool: str) -> list[str]:
        """The command for ``tool``."""
        return [arg.replace(TOOL_PLACEHOLDER, tool) for arg in self.command]


def parse_bringup(check: Checker, value: Any, path: str = "bringup") -> BringupConfig | None:
    """Check the hardware YAML's ``bringup`` section; ``None`` when it is absent.

    Raises:
        ConfigError: ``<file>: bringup.<key>: <reason>`` (an unknown key, an empty command, a
            timeout that is not a positive number).
    """
    if value is None:
        return None
    section: Mapping[str, Any] = check.mapping(value, path)
    check.only_keys(section, path, BRINGUP_KEYS)
    where = join(path, "command")
    raw = check.array(check.required(section, "command", path), where, non_empty=True)
    command = tuple(check.string(arg, join(where, i)) for i, arg in enumerate(raw))
    defaults = BringupConfig(command=command)

    def seconds(key: str, default: float, *, positive: bool) -> float:
        if key not in section:
            return default
        if positive:
            return check.number(section[key], join(path, key), unit="s", positive=True)
        return check.number(section[key], join(path, key), unit="s", minimum=0.0)

    return BringupConfig(
        command=command,
        ready_timeout=seconds("ready_timeout", defaults.ready_timeout, positive=True),
        stop_timeout=seconds("stop_timeout", defaults.stop_timeout, positive=True),
        power_settle=seconds("power_settle", defaults.power_settle, positive=False),
    )


class Bringup:
    """The bringup process of the cell, launched for one tool at a time.

    One process (and its process group) at a time: :meth:`launch` stops the running one, starts
    the command for the new tool in a session of its own (so that a stop reaches every process it
    started) and waits until every :data:`Check` passes. Its output goes to a file in
    ``ROS_LOG_DIR`` (or the temporary folder), whose last lines an error quotes.

    Args:
        config: the command and timeouts.
        checks: given the tool, what must come back after a launch; called after the old
            process is gone and before the new one starts, so a check can take its marks then
            (e.g. the number of joint states received so far).
    """

    def __init__(self, config: BringupConfig, checks: Callable[[str], Sequence[Check]]) -> None:
        self.config = config
        self._checks = checks
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._output: Any = None
        self.tool: str | None = None
        self.launches = 0

    @property
    def pid(self) -> int | None:
        """The PID of the running bringup (its process group's ID), or ``None``."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def launch(self, tool: str, *, what: str) -> None:
        """Stop the running bringup, launch it for ``tool`` and wait until the cell is back.

        Raises:
            MotionError: ``EXECUTION_FAILED: <what>: the bringup for the <tool> ...``: the
                command could not start, exited, or not everything came back within
                ``ready_timeout`` (the error names each interface still missing).
        """
        with self._lock:
            self._stop()
            if tool != "none" and self.config.power_settle > 0:
                time.sleep(self.config.power_settle)  # the tool powers up (EROBS's wait)
            checks = list(self._checks(tool))
            argv = self.config.argv(tool)
            _LOG.info("%s: launching the bringup for the %s: %s", what, tool, " ".join(argv))
            # Open while the process runs; closed (and removed) by _stop.
            self._output = tempfile.NamedTemporaryFile(  # noqa: SIM115
                prefix="erobs_bt_bringup_", suffix=".log", dir=os.environ.get("ROS_LOG_DIR") or None
            )
            try:
                self._process = subprocess.Popen(
                    argv, stdout=self._output, stderr=subprocess.STDOUT, start_new_session=True
                )
            except OSError as exc:
                raise MotionError(
                    ErrorCode.EXECUTION_FAILED, f"{what}: the bringup for the {tool} did not start: {exc}"
                ) from exc
            self.tool, self.launches = tool, self.launches + 1
            started = time.monotonic()
            deadline = started + self.config.ready_timeout
            missing = [name for name, ready in checks if not ready()]
            while missing:
                code = self._process.poll()
                if code is not None:
                    raise MotionError(
                        ErrorCode.EXECUTION_FAILED,
                        f"{what}: the bringup for the {tool} exited with code {code}{self._tail()}",
                    )
                if time.monotonic() >= deadline:
                    raise MotionError(
                        ErrorCode.EXECUTION_FAILED,
                        f"{what}: the cell was not back within {self.config.ready_timeout:g} s of "
                        f"launching the bringup for the {tool}: no {'; no '.join(missing)}{self._tail()}",
                    )
                time.sleep(0.02)
                missing = [name for name, ready in checks if not ready()]
            _LOG.info(
                "%s: the bringup for the %s is up (PID %d) after %.2f s",
                what,
                tool,
                self._process.pid,
                time.monotonic() - started,
            )

    def stop(self) -> None:
        """Stop the running bringup, if any (idempotent)."""
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            # The session leader's PID is the group's ID (start_new_session): only what it started.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(self.config.stop_timeout)
            except subprocess.TimeoutExpired:
                _LOG.warning(
                    "the bringup (PID %d) did not stop within %g s of SIGTERM: SIGKILL",
                    process.pid,
                    self.config.stop_timeout,
                )
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self._output is not None:
            self._output.close()
            self._output = None
        self.tool = None

    def _tail(self, lines: int = 5) -> str:
        """The bringup output's last ``lines`` lines, as ``"; its output ended: ..."``, or ""."""
        if self._output is None:
            return ""
        self._output.flush()
        with open(self._output.name, "rb") as output:
            text = output.read().decode("utf-8", "replace").strip().splitlines()[-lines:]
        return f"; its output ended: {' | '.join(text)}" if text else ""

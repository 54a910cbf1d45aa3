"""The cell's per-tool bringup: erobs_bt launches it, and relaunches it after a tool exchange.

On EROBS's cell the tool's controller runs only while that tool is fitted: after a dock or a load
the orchestrator kills the whole bringup (ur_robot_driver, the arm's and the tool's controllers,
MoveIt) and launches it again for the new tool (bondada-a/erobs ``moveit_lifecycle_manager.py``,
``launch_moveit_with_gripper`` and ``_attempt_launch``: ``ros2 launch <package>
robot_bringup.launch.py ... gripper:=<tool>`` in a session of its own; ``kill_current_process``:
SIGTERM to the process group, SIGKILL after 3 s, then up to 10 s until the old servers are no
longer advertised; the tool voltage set, then 2 s for the tool to power up, then up to 45 s for
MoveIt; ``_restart_external_control``: the dashboard's ``/dashboard_client/play``, then
``robot_program_running`` true; then six joint states checked). With erobs_bt in the
orchestrator's place, nobody else relaunches: when the hardware YAML has a ``bringup`` section,
:class:`Bringup` does it, and a step that ends a tool exchange fails, naming what did not come
back, unless the cell's interfaces are all back within ``ready_timeout``. Without the section
nothing is launched (the bringup is someone else's).

The hardware YAML's section::

    bringup:
      command: [ros2, launch, cms_moveit_config, robot_bringup.launch.py, "gripper:={tool}"]
      ready_timeout: 45    # [s] for every interface to come back (EROBS: 45 s for MoveIt)
      stop_timeout: 3      # [s] after SIGTERM before SIGKILL (EROBS: 3 s)
      power_settle: 2      # [s] before a launch for a tool: it powers up (EROBS: 2 s)
      drain_timeout: 10    # [s] for the old servers to be no longer advertised (EROBS: 10 s)
      play_service: /dashboard_client/play   # started after each launch ("": not by erobs_bt)

``{tool}`` in an argument is replaced by the fitted tool's name (``none`` for the bare flange).
"""

from __future__ import annotations

import atexit
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
from pathlib import Path
from typing import Any, Protocol

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.validation import Checker, join

_LOG = logging.getLogger(__name__)

#: What must come back after a launch: a name for the error message, and whether it is back.
Check = tuple[str, Callable[[], bool]]
#: The keys of the hardware YAML's ``bringup`` section.
BRINGUP_KEYS = ("command", "ready_timeout", "stop_timeout", "power_settle", "drain_timeout", "play_service")
#: The placeholder of the tool's name in ``command``.
TOOL_PLACEHOLDER = "{tool}"
#: :func:`parse_bringup`'s value for a hardware YAML without a ``bringup`` key.
ABSENT: Any = object()


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
        power_settle: [s] waited before a launch for a tool, so that its driver finds it powered
            (EROBS waits 2 s after switching the voltage: the Hand-E's and the ePick's activation
            fail otherwise, ``_attempt_launch``); not waited for the bare flange.
        drain_timeout: [s] after the old bringup ended, for its FollowJointTrajectory and SetIO
            servers to be no longer advertised (a killed process's stay in the DDS discovery cache
            until their lease ends; EROBS drains 10 s, ``_drain_stale_execute_trajectory``);
            still advertised then: a warning, and the fresh-state checks decide.
        play_service: the dashboard client's ``std_srvs/Trigger`` that starts the robot program
            (External Control) once it is served after a launch (EROBS: ``/dashboard_client/play``,
            ``_restart_external_control``); ``""``: started by someone else.
    """

    command: tuple[str, ...]
    ready_timeout: float = 45.0
    stop_timeout: float = 3.0
    power_settle: float = 2.0
    drain_timeout: float = 10.0
    play_service: str = "/dashboard_client/play"

    def argv(self, tool: str) -> list[str]:
        """The command for ``tool``."""
        return [arg.replace(TOOL_PLACEHOLDER, tool) for arg in self.command]


#: An example command, for the error messages.
_EXAMPLE = '[ros2, launch, cms_moveit_config, robot_bringup.launch.py, "gripper:={tool}"]'


def parse_bringup(check: Checker, value: Any, path: str = "bringup") -> BringupConfig | None:
    """Check the hardware YAML's ``bringup`` section; ``None`` when it is absent (call with the
    sentinel :data:`ABSENT`; an empty section, ``None``, is an error).

    Raises:
        ConfigError: ``<file>: bringup.<key>: <reason>`` (an empty section, an unknown key, a
            command that is not a list of strings or names no ``{tool}``, a timeout that is
            not a positive number).
    """
    if value is ABSENT:
        return None
    if value is None:
        raise check.fail(path, f"empty: give at least its command, e.g. command: {_EXAMPLE} (or remove it)")
    section: Mapping[str, Any] = check.mapping(value, path)
    check.only_keys(section, path, BRINGUP_KEYS)
    where = join(path, "command")
    given = check.required(section, "command", path)
    if isinstance(given, str):
        wanted = f"must be a list of the program and its arguments, e.g. {_EXAMPLE}"
        raise check.fail(where, f"{wanted} (got the string {given!r})")
    raw = check.array(given, where, non_empty=True)
    command = tuple(check.string(arg, join(where, i)) for i, arg in enumerate(raw))
    if not any(TOOL_PLACEHOLDER in arg for arg in command):
        raise check.fail(
            where,
            f"no argument names {TOOL_PLACEHOLDER}: every relaunch would start the same configuration "
            f"(EROBS passes gripper:={TOOL_PLACEHOLDER}), e.g. {_EXAMPLE}",
        )
    defaults = BringupConfig(command=command)

    def seconds(key: str, default: float, *, positive: bool) -> float:
        if key not in section:
            return default
        if positive:
            return check.number(section[key], join(path, key), unit="s", positive=True)
        return check.number(section[key], join(path, key), unit="s", minimum=0.0)

    play = section.get("play_service", defaults.play_service)
    return BringupConfig(
        command=command,
        ready_timeout=seconds("ready_timeout", defaults.ready_timeout, positive=True),
        stop_timeout=seconds("stop_timeout", defaults.stop_timeout, positive=True),
        power_settle=seconds("power_settle", defaults.power_settle, positive=False),
        drain_timeout=seconds("drain_timeout", defaults.drain_timeout, positive=False),
        play_service=check.string(play, join(path, "play_service"), allow_empty=True),
    )


class Dashboard(Protocol):
    """The robot program's start (ur_robot_driver's dashboard client) as :class:`Bringup` uses it."""

    def ready(self) -> bool:
        """Whether the play service is served."""
        ...

    def play(self, timeout: float) -> str:
        """Call it; ``""`` when it answered success, else why not (within ``timeout`` [s])."""
        ...


class Bringup:
    """The bringup process of the cell, launched for one tool at a time.

    One process (and its process group) at a time: :meth:`launch` stops the running one and waits
    until its servers are no longer advertised, starts the command for the new tool in a session of
    its own (so that a stop reaches every process it started), starts the robot program through
    the dashboard once it is served, and waits until every :data:`Check` passes. A launch that
    fails, or is interrupted (:meth:`interrupt`, called by a stop), stops what it started. Its
    output goes to a file in ``ROS_LOG_DIR`` (or the temporary folder) kept after it ends; an
    error quotes its last lines. The running bringup is also stopped when the interpreter exits.

    Args:
        config: the command and timeouts.
        checks: given the tool, what must come back after a launch; called after the old
            process is gone and before the new one starts, so a check can take its marks then
            (e.g. the number of joint states received so far).
        gone: what must no longer be served once the old process has ended (the arm's and
            SetIO's servers); before the first launch, none of it may be served (another
            bringup would run beside this one).
        dashboard: how the robot program is started (``config.play_service``), or ``None``: by
            someone else (the caller passes none when ``play_service`` is empty).
        before_relaunch: called before a running bringup is stopped; raises a
            :class:`MotionError` when it must not be (e.g. the arm is not at rest).
    """

    def __init__(
        self,
        config: BringupConfig,
        checks: Callable[[str], Sequence[Check]],
        *,
        gone: Callable[[], Sequence[Check]] = tuple,
        dashboard: Dashboard | None = None,
        before_relaunch: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self._checks = checks
        self._gone = gone
        self._dashboard = dashboard
        self._before_relaunch = before_relaunch
        self._lock = threading.Lock()
        self._interrupted = threading.Event()
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None
        self.tool: str | None = None
        self.launches = 0

    def interrupt(self) -> None:
        """Make a launch in progress stop what it started and fail "stopped by request"."""
        self._interrupted.set()

    def launch(self, tool: str, *, what: str) -> None:
        """Stop the running bringup, launch it for ``tool`` and wait until the cell is back.

        Raises:
            MotionError: ``EXECUTION_FAILED: <what>: ...``: another bringup serves the cell
                before the first launch; the command could not start or exited; the dashboard
                refused to start the program; not everything came back within ``ready_timeout``
                (naming each interface still missing); or a stop interrupted it. What was
                started is stopped first.
        """
        with self._lock:
            self._interrupted.clear()
            first = self.launches == 0
            had = self._process is not None
            if had and self._before_relaunch is not None:
                self._before_relaunch(what)
            self._stop()
            if first:
                served = [name for name, ready in self._gone() if ready()]
                if served:
                    raise MotionError(
                        ErrorCode.EXECUTION_FAILED,
                        f"{what}: another bringup already serves the cell ({'; '.join(served)}): "
                        "stop it, or remove the hardware YAML's bringup section",
                    )
            elif had:
                self._drain(what)
            if tool != "none" and self.config.power_settle > 0:
                self._wait(self.config.power_settle, what)  # the tool powers up (EROBS's wait)
            try:
                self._start(tool, what)
            except BaseException:
                self._stop()
                raise

    def _start(self, tool: str, what: str) -> None:
        checks = list(self._checks(tool))
        argv = self.config.argv(tool)
        _LOG.info("%s: launching the bringup for the %s: %s", what, tool, " ".join(argv))
        folder = os.environ.get("ROS_LOG_DIR") or tempfile.gettempdir()
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
            descriptor, name = tempfile.mkstemp(prefix="erobs_bt_bringup_", suffix=".log", dir=folder)
            self._log = Path(name)
            with os.fdopen(descriptor, "wb") as output:
                self._process = subprocess.Popen(
                    argv, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
                )
        except OSError as exc:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED, f"{what}: the bringup for the {tool} did not start: {exc}"
            ) from exc
        atexit.register(self.stop)
        self.tool, self.launches = tool, self.launches + 1
        started = time.monotonic()
        deadline = started + self.config.ready_timeout
        dashboard = self._dashboard
        while True:
            if self._interrupted.is_set():
                raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: stopped by request")
            code = _exit_status(self._process.pid)
            if code is not None:
                raise MotionError(
                    ErrorCode.EXECUTION_FAILED,
                    f"{what}: the bringup for the {tool} exited with code {code}{self._tail()}",
                )
            if dashboard is not None and dashboard.ready():
                refusal = dashboard.play(max(0.1, deadline - time.monotonic()))
                dashboard = None  # played once per launch
                if refusal:
                    raise MotionError(
                        ErrorCode.EXECUTION_FAILED,
                        f"{what}: the robot program did not start after the bringup for the {tool}: "
                        f"{self.config.play_service}: {refusal}",
                    )
            missing = [name for name, ready in checks if not ready()]
            if dashboard is not None:
                missing.insert(0, f"dashboard service {self.config.play_service}")
            if not missing:
                break
            if time.monotonic() >= deadline:
                raise MotionError(
                    ErrorCode.EXECUTION_FAILED,
                    f"{what}: the cell was not back within {self.config.ready_timeout:g} s of "
                    f"launching the bringup for the {tool}: no {'; no '.join(missing)}{self._tail()}",
                )
            self._interrupted.wait(0.02)
        _LOG.info(
            "%s: the bringup for the %s is up (PID %d) after %.2f s",
            what,
            tool,
            self._process.pid,
            time.monotonic() - started,
        )

    def _drain(self, what: str) -> None:
        """Wait until the ended bringup's servers are no longer advertised (bounded)."""
        gone = list(self._gone())
        deadline = time.monotonic() + self.config.drain_timeout
        while True:
            listed = [name for name, ready in gone if ready()]
            if not listed:
                return
            if time.monotonic() >= deadline:
                _LOG.warning(
                    "%s: still advertised %g s after the bringup ended: %s; the fresh-state checks decide",
                    what,
                    self.config.drain_timeout,
                    "; ".join(listed),
                )
                return
            self._wait(0.05, what)

    def _wait(self, seconds: float, what: str) -> None:
        if self._interrupted.wait(seconds):
            raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: stopped by request")

    def stop(self) -> None:
        """Stop the running bringup, if any (idempotent); interrupts a launch in progress first."""
        self._interrupted.set()
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        """SIGTERM to the bringup's process group; once its leader has ended (or after
        ``stop_timeout``), SIGKILL to whatever is left of the group; then reap the leader."""
        process, self._process = self._process, None
        self.tool = None
        if process is None:
            return
        atexit.unregister(self.stop)
        group = process.pid  # the session leader's PID is its group's ID (start_new_session)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        deadline = time.monotonic() + self.config.stop_timeout
        while _exit_status(group) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if _exit_status(group) is None:
            _LOG.warning(
                "the bringup (PID %d) did not end within %g s of SIGTERM: SIGKILL",
                group,
                self.config.stop_timeout,
            )
        # The leader is not reaped yet (a zombie keeps its PID, so the group ID is still ours):
        # processes it started that outlived it, or a leader that ignored SIGTERM, are killed.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        process.wait()

    def _tail(self, lines: int = 5) -> str:
        """The bringup output's last ``lines`` lines, as ``"; its output ended: ..."``, or ""."""
        if self._log is None:
            return ""
        try:
            text = self._log.read_bytes().decode("utf-8", "replace").strip().splitlines()[-lines:]
        except OSError:
            return ""
        return f"; its output ended: {' | '.join(text)} ({self._log})" if text else f" (output: {self._log})"


def _exit_status(pid: int) -> int | None:
    """The exit status of the child ``pid`` once it has ended, without reaping it (its PID and
    process group stay reserved until :meth:`subprocess.Popen.wait`); ``None`` while it runs.
    A signal's end is ``-signal``, as :attr:`subprocess.Popen.returncode` gives it."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return -1  # reaped already: it has ended
    if info is None or info.si_pid == 0:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status

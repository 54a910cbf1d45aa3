"""Helpers for tests that run the ``erobs_bt`` node in a subprocess.

* :func:`ros_environment` reserves a private ``ROS_DOMAIN_ID`` (ros-domain-coordinator),
  and puts it, ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``, the fast-discovery Fast DDS
  profile and a temporary ``ROS_LOG_DIR`` into this process's environment and into the
  environment handed to child processes (:mod:`erobs_bt.ros.domain`). The children get the
  *whole* environment: the ROS wheels' bootstrapper re-executes Python with an
  ``LD_LIBRARY_PATH`` it computed, and a hand-built environment that keeps its guard
  variable but drops that path breaks ``import rclpy`` (ros2-from-pypi.md §5).
  In-process clients are given ``environment.domain_id`` explicitly (``domain_id=``), so
  they talk in exactly that domain whatever the environment says later; on exit the
  process must have left the domain, or it stays reserved (and a warning names it).
* :class:`RosProcess` runs a ROS process of the tests, waits for its ready line, and stops
  it with SIGINT by its PID; :class:`NodeProcess` is the erobs_bt node with the params
  file and overrides.
* :func:`fastdds_segments` and :func:`orphaned_segments` find Fast DDS shared-memory
  files left behind by processes that are gone (a clean exit leaves none).
* :func:`action_client` makes an rclpy ``ActionClient`` on a node an executor already spins.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from erobs_bt.ros.domain import RosEnvironment, participant_ports, private_domain
from erobs_bt.rosdistro import SHM_PREFIXES, ros_distro

from helpers import require_marker

REPO = Path(__file__).resolve().parents[1]
PARAMS_FILE = REPO / "config" / "erobs_bt.yaml"
FASTDDS_PROFILE = REPO / "config" / "fastdds_localhost.xml"
SHM = Path("/dev/shm")
READY_PREFIX = "erobs_bt ready"

__all__ = [
    "NodeProcess",
    "RosEnvironment",
    "RosProcess",
    "action_client",
    "fastdds_segments",
    "orphaned_segments",
    "participant_ports",
    "ready_client",
    "ros_environment",
    "ros_value",
]


def action_client(node: Any, action_type: Any, name: str, **options: Any) -> Any:
    """An action client of ``name`` on ``node`` for a test: erobs_bt's
    :class:`~erobs_bt.backends.ros2_control.action_client.ActionClient`, safe to make while an
    executor spins ``node`` in another thread, and to send requests from the test's thread
    (Jazzy's rclpy drops an answer that comes before the request's future is filed; Kilted's
    assigns its ``_lock`` after joining the wait set; that module says more)."""
    from erobs_bt.backends.ros2_control.action_client import ActionClient

    return ActionClient(node, action_type, name, **options)


@contextmanager
def ros_environment(log_dir: Path) -> Iterator[RosEnvironment]:
    """Reserve a ROS domain and set this process's ROS variables for the duration
    (:func:`erobs_bt.ros.domain.private_domain` with the fast-discovery profile).

    In-process clients are given ``environment.domain_id`` explicitly. A domain this process
    has not left on exit stays reserved (nobody else joins its leftover endpoints) and is
    reported as a ResourceWarning: some in-process users (the ros2_control backend in its
    error scenarios) do not leave yet; test_ros_domains checks the strict form.

    Raises:
        RuntimeError: called in a test not marked ``ros`` (:func:`helpers.require_marker`).
    """
    require_marker("ros", "reserving a ROS domain")
    with private_domain(log_dir, FASTDDS_PROFILE, strict=False) as environment:
        yield environment


def ros_value(value: object) -> str:
    """A ``-p name:=value`` value: YAML for numbers and booleans, quoted strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return '"' + str(value) + '"'


class RosProcess:
    """A ROS process of the tests (the node, the simulated hardware) in a reserved domain.

    It gets the domain's whole environment (plus ``env``), its output is collected line by
    line, :meth:`start` waits for its ready line, :meth:`wait_for_line` for any other, and
    :meth:`stop` SIGINTs it by its PID.

    Args:
        environment: the reserved domain's environment; ``None``: this process's environment
            as it is (bench/, whose ``ros_domain`` has set the ROS variables in it).
        command: the command line.
        ready_prefix: the start of the line it prints once it serves; ``None``: a client
            program with no such line (:meth:`start` returns once it is started).
        env: extra environment variables (on top of the domain's, e.g. ``AMENT_PREFIX_PATH``).
        cwd: its working directory (default: the repository).
    """

    def __init__(
        self,
        environment: RosEnvironment | None,
        command: Sequence[str],
        ready_prefix: str | None,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path = REPO,
    ) -> None:
        self.environment = environment
        self.command = list(command)
        self.ready_prefix = ready_prefix
        self.env = {**(environment.env if environment is not None else os.environ), **(env or {})}
        self.cwd = cwd
        self.process: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._line = threading.Condition()
        self._reader: threading.Thread | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def start(self, timeout: float = 60.0) -> Self:
        """Start the process and wait for its ready line.

        Raises:
            RuntimeError: it exited or did not become ready (with its output).
        """
        self._ready.clear()
        self.process = subprocess.Popen(
            self.command,
            env=self.env,
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, name="ros-process-output", daemon=True)
        self._reader.start()
        if self.ready_prefix is None:
            return self
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.05):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{' '.join(self.command[:3])} did not start:\n{self.output}")
        return self

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            with self._line:
                self.lines.append(line.rstrip("\n"))
                self._line.notify_all()
            if self.ready_prefix is not None and line.startswith(self.ready_prefix):
                self._ready.set()
        with self._line:  # the output ended: wake the waiters (the process has exited)
            self._line.notify_all()

    def wait_for_line(self, predicate: Callable[[str], bool], timeout: float) -> bool:
        """Wait until a line of its output satisfies ``predicate``, or ``timeout`` [s] passes,
        or its output ends. True when such a line was printed."""
        deadline = time.monotonic() + timeout
        with self._line:
            seen = 0
            while True:
                if any(predicate(line) for line in self.lines[seen:]):
                    return True
                seen = len(self.lines)
                remaining = deadline - time.monotonic()
                reader_done = self._reader is None or not self._reader.is_alive()
                if remaining <= 0 or reader_done:
                    return False
                self._line.wait(min(remaining, 1.0))

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL by PID: the process dies without a goodbye (as on a crash or power loss)."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGINT by PID and wait for it (SIGKILL after ``timeout``); idempotent.

        Returns:
            Its exit status.
        """
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._reader is not None:
            self._reader.join(5.0)
        return self.process.returncode


class NodeProcess(RosProcess):
    """The erobs_bt node in a subprocess (``python -m erobs_bt.ros.node.node``).

    Args:
        environment: the reserved domain's environment.
        parameters: ``-p`` overrides on top of ``config/erobs_bt.yaml``.
        ros_arguments: more ROS arguments after them, e.g. ``["-r", "__ns:=/cell2"]``.
    """

    def __init__(
        self,
        environment: RosEnvironment,
        parameters: Mapping[str, object],
        *,
        ros_arguments: Sequence[str] = (),
    ) -> None:
        command = [
            sys.executable,
            "-m",
            "erobs_bt.ros.node.node",
            "--ros-args",
            "--params-file",
            str(PARAMS_FILE),
        ]
        for name, value in parameters.items():
            command += ["-p", f"{name}:={ros_value(value)}"]
        super().__init__(environment, [*command, *ros_arguments], READY_PREFIX)


@contextmanager
def ready_client(node: RosProcess, **options: Any) -> Iterator[Any]:
    """An :class:`~erobs_bt.ros.client.client.ErobsBtClient` in ``node``'s domain (``options`` go to
    it), yielded once it has discovered the node's action server and received the latched
    execution state (topics match separately from the action server).

    Raises:
        AssertionError: either does not arrive within 30 s (with the node's output).
    """
    from erobs_bt.ros.client.client import ErobsBtClient

    assert node.environment is not None
    with ErobsBtClient(domain_id=node.environment.domain_id, **options) as client:
        assert client.wait_for_server(30.0), node.output
        assert client.wait_for_state_stream(30.0), node.output
        yield client


#: The name Fast DDS gives its shared-memory files on this venv's distro (erobs_bt.rosdistro).
SHM_PREFIX = SHM_PREFIXES[ros_distro()]


def fastdds_segments() -> set[str]:
    """Names of Fast DDS shared-memory files in /dev/shm (``fastrtps_*`` on Jazzy, ``fastdds_*``
    on Kilted)."""
    if not SHM.is_dir():
        return set()
    return {name for name in os.listdir(SHM) if SHM_PREFIX in name}


def _mapped_by_live_processes() -> set[str]:
    used: set[str] = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
                for line in maps:
                    if "/dev/shm/" in line:
                        used.add(line.rsplit("/dev/shm/", 1)[1].split()[0])
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("/dev/shm/"):
                    used.add(target.removeprefix("/dev/shm/"))
        except OSError:
            continue
    return used


_PORT_FILE = re.compile(rf"{SHM_PREFIX}_port(\d+)")


def _other_domain(name: str, domain: int | None) -> bool:
    """True for a port file (``fastdds_port<port>``, ``sem.fastdds_port<port>_mutex``; ``fastrtps_``
    on Jazzy) of a
    domain other than ``domain``: Fast DDS ports are ``7400 + 250 * domain + offset``."""
    match = _PORT_FILE.search(name)
    if domain is None or match is None:
        return False
    return (int(match.group(1)) - 7400) // 250 != domain


def orphaned_segments(before: set[str], domain: int | None = None) -> set[str]:
    """Fast DDS files created since ``before`` that no live process uses any more.

    Checked twice, 0.5 s apart, so a file another process is just creating (not yet
    mapped) is not mistaken for a leftover. With ``domain``, port files of other domains
    are ignored: other people's ROS processes on this machine (other test runs) create
    and leave files of their own domains meanwhile, which says nothing about this test.
    """
    suspects: set[str] | None = None
    for attempt in range(2):
        if attempt:
            time.sleep(0.5)
        new = {name for name in fastdds_segments() - before if not _other_domain(name, domain)}
        found = new - _mapped_by_live_processes() if new else set()
        suspects = found if suspects is None else suspects & found
    return suspects or set()


def idle_after_goal(client: Any, since: int, timeout: float) -> Any:
    """The ``IDLE`` execution state that ends the goal a client sent after ``since`` states.

    A new client may first receive the latched ``IDLE`` of an earlier goal (another test's),
    so the goal id is taken from the first ``RUNNING`` state after ``since``. ``None`` when
    either does not arrive within ``timeout`` [s] each.
    """
    running = client.states.wait_for(lambda m: m.state == "RUNNING" and m.goal_id, timeout, since=since)
    if running is None:
        return None
    return client.states.wait_for(
        lambda m: m.state == "IDLE" and m.goal_id == running.goal_id, timeout, since=since
    )

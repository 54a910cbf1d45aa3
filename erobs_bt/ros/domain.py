"""Which ROS domain an in-process rclpy user joins, and proof that it left it again.

Every rclpy user inside one Python process (the node client, the Bluesky device, the
ros2_control backend, test observers) owns its own ``rclpy.Context``. Two facts decide
which domain such a context talks in and how long it stays there:

* **Domain.** ``rclpy.init(domain_id=None)`` lets rcl read ``ROS_DOMAIN_ID`` from the
  environment *at that moment* (the production behaviour: the ``erobs-bt`` commands and the
  node follow the user's environment). A caller that knows its domain passes it explicitly
  (:func:`~erobs_bt.backends.ros2_control.context.init_context`), so a later change of the
  environment (another test fixture, a nested reservation) cannot move it.
* **Lifetime.** rmw_fastrtps creates a context's DDS participant with the context's first
  node and deletes it when the *last* rcl node of the context is finalised, not when the
  context shuts down. rclpy finalises a destroyed node only once nothing uses its handle,
  and a node caught in a reference cycle (e.g. through the traceback of an exception that
  killed its executor) is finalised only by the garbage collector. Until then the
  participant, with every server of the node, stays in the domain and answers nobody. A
  domain must therefore not be handed back (to ros-domain-coordinator, i.e. to the next
  test or another user on the machine) while this process still has a participant in it:
  :func:`reserved_domain` collects garbage, checks the process's own RTPS ports
  (:func:`participant_ports`) and keeps the reservation of a domain that was not left.

Ports: an RTPS participant of domain *d* binds UDP ports in ``[PB + DG·d, PB + DG·(d+1))``
with PB = 7400 and DG = 250 (the default port mapping of the DDSI-RTPS 2.x specification,
§9.6.1.1; Fast DDS uses it, and the LOCALHOST discovery range keeps it).
"""

from __future__ import annotations

import gc
import os
import warnings
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from erobs_bt.rosdistro import PROFILES_VARIABLES, profiles_variable

#: RTPS port base (PB) and domain gain (DG): DDSI-RTPS 2.x §9.6.1.1 default port mapping.
PORT_BASE = 7400
DOMAIN_GAIN = 250

#: Reservations kept because this process had not left their domain: domain id → reservation.
_HELD: dict[int, AbstractContextManager[int]] = {}


class DomainNotLeft(RuntimeError):
    """This process still has a DDS participant in a domain it is about to give back.

    Attributes:
        domain_id: the domain (its reservation is kept until the process exits).
        ports: the UDP ports the process still has bound in it.
    """

    def __init__(self, domain_id: int, ports: list[int]) -> None:
        self.domain_id = domain_id
        self.ports = ports
        super().__init__(
            f"this process still has a DDS participant in ROS domain {domain_id} (UDP ports {ports}) "
            "after every user should have closed: a node or context was not destroyed; the domain "
            "stays reserved so no one else joins a graph with its leftover endpoints"
        )


def participant_ports(domain_id: int, *, any_process: bool = False) -> list[int]:
    """UDP ports this process (or, with ``any_process``, any process in this network
    namespace) has bound in ``domain_id``'s RTPS port range, sorted.

    Empty means: no DDS participant of this process (of anyone) is in that domain (Linux
    only: reads ``/proc/self/fd`` and ``/proc/net/udp``/``udp6``; empty elsewhere).
    """
    low = PORT_BASE + DOMAIN_GAIN * domain_id
    sockets: set[str] = set()
    if any_process:
        return sorted(_bound_udp_ports(low, low + DOMAIN_GAIN, sockets=None))
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            sockets.add(target[len("socket:[") : -1])
    return sorted(_bound_udp_ports(low, low + DOMAIN_GAIN, sockets=sockets))


def _bound_udp_ports(low: int, high: int, *, sockets: set[str] | None) -> list[int]:
    """Bound UDP ports in ``[low, high)`` (of the sockets with these inodes; None: all)."""
    ports: list[int] = []
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table, encoding="ascii") as rows:
                next(rows, None)
                for row in rows:
                    fields = row.split()
                    port = int(fields[1].rsplit(":", 1)[1], 16)
                    if (sockets is None or fields[9] in sockets) and low <= port < high:
                        ports.append(port)
        except OSError:
            continue
    return ports


def left(domain_id: int) -> list[int]:
    """Finalise unreachable rcl nodes (garbage collection), then :func:`participant_ports`."""
    ports = participant_ports(domain_id)
    if ports:
        gc.collect()
        ports = participant_ports(domain_id)
    return ports


def held_domains() -> list[int]:
    """Domains whose reservation :func:`reserved_domain` kept because they were not left."""
    return sorted(_HELD)


def reclaim() -> list[int]:
    """Give back the kept reservations of domains this process has left since; returns them.

    One garbage collection for all kept domains, not one per domain: a full collection of a
    large process (a test session) takes a noticeable fraction of a second, and a process
    that keeps several domains would otherwise pay it for each, on every reservation.
    """
    if not _HELD:
        return []
    if any(participant_ports(domain) for domain in _HELD):
        gc.collect()
    released = [domain for domain in list(_HELD) if not participant_ports(domain)]
    for domain in released:
        _HELD.pop(domain).__exit__(None, None, None)
    return released


#: Most domains :func:`_reserve_unused` skips before it takes an occupied one anyway.
_SKIP_LIMIT = 16


def _reserve_unused() -> tuple[AbstractContextManager[int], int]:
    """Reserve a domain through ros-domain-coordinator whose RTPS ports nobody has bound.

    A reservation says only that no other *reserving* process holds the domain; a process
    that outlived its reservation (a leaked node of an earlier test, another suite's
    straggler) can still be in it, and joining its graph would mix the two. Occupied
    domains are skipped (their reservations held until a free one is found, then given
    back); after :data:`_SKIP_LIMIT` occupied ones the last is taken with a warning.
    """
    import domain_coordinator

    skipped: list[AbstractContextManager[int]] = []
    try:
        while True:
            reservation: AbstractContextManager[int] = domain_coordinator.domain_id()
            domain = reservation.__enter__()
            busy = participant_ports(domain, any_process=True)
            if not busy or len(skipped) >= _SKIP_LIMIT:
                if busy:
                    warnings.warn(
                        f"ROS domain {domain} has bound RTPS ports {busy} of another process; "
                        f"using it anyway after {len(skipped)} other occupied domains",
                        ResourceWarning,
                        stacklevel=3,
                    )
                return reservation, domain
            skipped.append(reservation)
    finally:
        for held in skipped:
            held.__exit__(None, None, None)


@contextmanager
def reserved_domain(*, strict: bool = True) -> Iterator[int]:
    """Reserve a free ROS domain (ros-domain-coordinator, 1-100) for the duration.

    On exit the process must have left the domain (:func:`left`); if it has not, the
    reservation is kept and :class:`DomainNotLeft` is raised (after an exception from the
    body, that one wins and the reservation is still kept). A kept reservation is given
    back by the next call once the process has left that domain after all. With
    ``strict=False`` a domain not left is reported as a :class:`ResourceWarning` instead
    (the reservation is kept all the same).

    The body's exception is never passed into ``domain_coordinator.domain_id()``: its
    generator catches ``OSError`` (and so ``TimeoutError``) around its ``yield`` and would
    turn one into "generator didn't stop after throw()".
    """
    reclaim()
    reservation, domain = _reserve_unused()
    failed = False
    try:
        yield domain
    except BaseException:
        failed = True
        raise
    finally:
        ports = left(domain)
        if ports:
            _HELD[domain] = reservation
            if not failed:
                if strict:
                    raise DomainNotLeft(domain, ports)
                warnings.warn(str(DomainNotLeft(domain, ports)), ResourceWarning, stacklevel=3)
        else:
            reservation.__exit__(None, None, None)


@dataclass(frozen=True)
class RosEnvironment:
    """A reserved domain and the environment for processes in it.

    Attributes:
        domain_id: the reserved ``ROS_DOMAIN_ID``; pass it to in-process users
            (:func:`~erobs_bt.backends.ros2_control.context.init_context`) rather than relying on
            the environment.
        env: the whole environment for child processes (the ROS wheels' bootstrapper needs
            the ``LD_LIBRARY_PATH`` it computed, so a hand-built one breaks ``import rclpy``).
        log_dir: ``ROS_LOG_DIR``.
    """

    domain_id: int
    env: Mapping[str, str]
    log_dir: Path


#: The variables :func:`private_domain` sets (and restores): the profile under either distro's name.
ROS_VARIABLES = (
    "ROS_DOMAIN_ID",
    "ROS_AUTOMATIC_DISCOVERY_RANGE",
    *PROFILES_VARIABLES.values(),
    "ROS_LOG_DIR",
)


@contextmanager
def private_domain(
    log_dir: Path, profile: Path | None = None, *, strict: bool = True
) -> Iterator[RosEnvironment]:
    """Reserve a domain (:func:`reserved_domain`) and set this process's ROS variables.

    Sets ``ROS_DOMAIN_ID``, ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``, ``ROS_LOG_DIR`` and,
    with ``profile``, the Fast DDS profile variable of this process's ROS 2 distro
    (:func:`erobs_bt.rosdistro.profiles_variable`); removes ``RMW_IMPLEMENTATION``. The
    previous values come back on exit. The environment is for child processes and for code
    that reads it on purpose (the CLI commands); in-process clients get ``domain_id``.

    Raises:
        DomainNotLeft: on exit, this process still has a participant in the domain (with
            ``strict``; else a warning, see :func:`reserved_domain`).
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    with reserved_domain(strict=strict) as domain:
        values = {
            "ROS_DOMAIN_ID": str(domain),
            "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
            "ROS_LOG_DIR": str(log_dir),
        }
        if profile is not None:
            values[profiles_variable()] = str(profile)
        saved = {key: os.environ.get(key) for key in ROS_VARIABLES}
        os.environ.update(values)
        os.environ.pop("RMW_IMPLEMENTATION", None)
        try:
            yield RosEnvironment(domain, dict(os.environ), log_dir)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

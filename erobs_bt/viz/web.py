"""A live web view of an orchestrator: the tree with statuses, progress, controls.

:func:`start_live_view` attaches a :class:`LiveViewListener` to an
:class:`~erobs_bt.orchestrator.Orchestrator` and serves, on loopback only:

* ``GET /`` — the page (``static/index.html``, ``app.js``, ``style.css``: plain
  HTML/CSS/JS, no external resources, works offline);
* ``GET /api/state?after=V&wait=S`` — the current picture as JSON (orchestrator state,
  goal, feedback, progress, last error, result, recent events and the folded tree of
  :func:`erobs_bt.viz.model.fold_tree`) with a ``version`` that grows on every change;
  with ``after``, the request waits up to ``S`` seconds (at most 25) for a newer
  version (long polling: changes arrive at once without a busy poll);
* ``POST /api/pause``, ``/api/resume``, ``/api/cancel`` — call
  :meth:`Orchestrator.pause` / ``resume`` / ``cancel`` (the API behind the ROS services)
  and answer their :class:`~erobs_bt.orchestrator.Reply` as ``{"success", "message"}``.

Snapshots are taken on change and throttled (docs/design.md §2): the listener's callbacks
only record what changed and raise a flag, O(1) on the goal thread; a snapshot thread
folds the tree at most ``rate`` times per second and publishes a new version only when
the picture differs.

Why not py_trees_js (PyPI ``py-trees-js`` 0.7.0, BSD-3-Clause, the JointJS/dagre viewer
of py_trees_ros_viewer): it works offline, but its JavaScript and CSS are shipped only
inside a compiled Qt resource module (``py_trees_js/resources.py``), not as files, so
serving them needs PyQt5 (a hard dependency of the wheel, with PyQtWebEngine about
350 MB) to read them out; and it lays out the whole tree on one canvas with
user-toggled collapsing, whereas a 1,000-unit script needs the server-side folding of
:mod:`erobs_bt.viz.model` (finished units collapsed into one line). The page here is a
collapsible HTML list.

Security: the page has robot controls and no authentication, so the server binds to a
loopback address only, answers only requests whose ``Host`` is that address (no DNS
rebinding) and accepts control requests only with the ``X-Requested-By: erobs-bt``
header, which a cross-site form cannot send.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

import py_trees

from erobs_bt.orchestrator import (
    Feedback,
    Orchestrator,
    OrchestratorListener,
    Reply,
    Result,
    State,
)
from erobs_bt.viz.model import UnitNotes, fold_tree

_LOG = logging.getLogger(__name__)

#: Header a control request must carry (a cross-site HTML form cannot set it).
CONTROL_HEADER = ("X-Requested-By", "erobs-bt")

#: Longest long-poll wait a client may ask for [s].
MAX_WAIT = 25.0

_STATIC = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}

_PHASE_EVENTS = ("plan", "execute", "replay", "run")


class LiveViewListener(OrchestratorListener):
    """Collects what the live view shows; every callback is short and never raises.

    Args:
        initial_state: the orchestrator's state when the view starts.
        keep_done: see :func:`erobs_bt.viz.model.fold_tree`.
        lookahead: see :func:`erobs_bt.viz.model.fold_tree`.
        max_flat: see :func:`erobs_bt.viz.model.fold_tree`.
    """

    def __init__(
        self, *, initial_state: State, keep_done: int = 3, lookahead: int = 2, max_flat: int = 40
    ) -> None:
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)
        self.dirty = True
        self._fold = {"keep_done": keep_done, "lookahead": lookahead, "max_flat": max_flat}
        self._state = initial_state.value
        self._state_message = ""
        self._goal: dict[str, Any] = {}
        self._root: py_trees.behaviour.Behaviour | None = None
        self._feedback: dict[str, Any] | None = None
        self._notes: dict[int, UnitNotes] = {}
        self._last_error = ""
        self._result: dict[str, Any] | None = None
        self._events: deque[dict[str, Any]] = deque(maxlen=12)

    def _touch(self) -> None:
        self.dirty = True
        self.changed.notify_all()

    # -- OrchestratorListener -------------------------------------------------------
    def state_changed(self, state: State, message: str) -> None:
        with self._lock:
            self._state, self._state_message = state.value, message
            if state is State.FAULTED:
                self._last_error = message
            self._touch()

    def feedback(self, goal_id: str, feedback: Feedback) -> None:
        with self._lock:
            self._feedback = asdict(feedback)
            self._touch()

    def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
        try:
            with self._lock:
                self._event_locked(goal_id, record)
                self._touch()
        except (KeyError, TypeError, ValueError) as exc:
            _LOG.warning("live view ignored a malformed event %r: %s", record, exc)

    def _event_locked(self, goal_id: str, record: Mapping[str, Any]) -> None:
        event = str(record.get("event", ""))
        if event == "goal_started":
            self._goal = {
                "id": goal_id,
                "mode": record.get("mode", ""),
                "total_steps": record.get("total_steps", 0),
                "units": record.get("units", 0),
                "eligible": bool(record.get("eligible", False)),
                "started": record.get("t"),
            }
            self._notes = {}
            self._result = None
            self._last_error = ""
            self._feedback = None
        unit = record.get("unit")
        if isinstance(unit, int):
            note = self._notes.setdefault(unit, UnitNotes())
            if event == "cache":
                note.cache = str(record.get("status", ""))
            phase, _, edge = event.rpartition("_")
            if phase in _PHASE_EVENTS and edge == "finished":
                note.seconds[phase] = float(record.get("seconds", 0.0))
                detail = str(record.get("detail", ""))
                if detail.startswith("failed"):
                    note.error = detail
        error = record.get("error")
        if error and record.get("status") != "CANCELED":
            self._last_error = str(error)
        elif str(record.get("detail", "")).startswith("failed"):
            self._last_error = str(record["detail"])
        if event != "state":
            self._events.append({k: v for k, v in record.items() if isinstance(v, (str, int, float, bool))})

    def ticked(self, goal_id: str, root: py_trees.behaviour.Behaviour) -> None:
        with self._lock:
            if self._root is not root:
                self._root = root
                self._goal.setdefault("id", goal_id)
            self._touch()

    def finished(self, goal_id: str, result: Result) -> None:
        with self._lock:
            self._result = {
                "goal_id": goal_id,
                "status": result.status.value,
                "error_message": result.error_message,
                "error_code": result.error_code,
                "completed_steps": result.completed_steps,
                "total_steps": result.total_steps,
            }
            if result.error_message and result.error_code != "CANCELED":
                self._last_error = result.error_message
            self._touch()

    # -- reading -----------------------------------------------------------------------
    def adopt(self, goal_id: str, root: py_trees.behaviour.Behaviour | None) -> None:
        """Show ``root`` (of a goal already running when the view started)."""
        with self._lock:
            self._root = root
            self._goal.setdefault("id", goal_id)
            self._touch()

    def picture(self) -> dict[str, Any]:
        """The JSON-able picture (without ``version``); folds the live tree."""
        with self._lock:
            self.dirty = False
            root = self._root
            notes = {unit: UnitNotes(n.cache, dict(n.seconds), n.error) for unit, n in self._notes.items()}
            feedback = dict(self._feedback) if self._feedback is not None else None
            picture: dict[str, Any] = {
                "state": self._state,
                "state_message": self._state_message,
                "goal": dict(self._goal),
                "feedback": feedback,
                "last_error": self._last_error,
                "result": dict(self._result) if self._result is not None else None,
                "events": list(self._events),
            }
        picture["tree"] = fold_tree(root, notes=notes, **self._fold) if root is not None else None
        return picture


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LiveView:
    """A running live view; create it with :func:`start_live_view`.

    Attributes:
        url: ``http://127.0.0.1:PORT/``.
        listener: the listener attached to the orchestrator.
        version: the number of the current picture (grows on every change).
        waiting: requests currently inside :meth:`state_json` (long polls).
    """

    def __init__(
        self,
        orchestrator: Orchestrator,
        listener: LiveViewListener,
        server: ThreadingHTTPServer,
        *,
        rate: float,
    ) -> None:
        self.orchestrator = orchestrator
        self.listener = listener
        self._server = server
        self._period = 1.0 / rate
        self._published = threading.Condition()
        self._closed = False
        self.version = 0
        self.waiting = 0
        self._body = b"{}"
        self._signature = ""
        address, port = server.server_address[:2]
        host = address.decode() if isinstance(address, bytes) else str(address)
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{port}/"
        self.allowed_hosts = {f"{shown}:{port}", f"localhost:{port}"}
        self._publish()
        self._snapshots = threading.Thread(
            target=self._snapshot_loop, name="live-view-snapshots", daemon=True
        )
        self._serving = threading.Thread(target=server.serve_forever, name="live-view-http", daemon=True)

    def start(self) -> None:
        """Start the snapshot thread and the HTTP server (:func:`start_live_view` does)."""
        self._snapshots.start()
        self._serving.start()

    # -- pictures ---------------------------------------------------------------------
    def _publish(self) -> None:
        picture = self.listener.picture()
        signature = json.dumps(picture, sort_keys=True, default=str)
        with self._published:
            if signature == self._signature:
                return
            self._signature = signature
            self.version += 1
            picture["version"] = self.version
            self._body = json.dumps(picture, default=str).encode("utf-8")
            self._published.notify_all()

    def _snapshot_loop(self) -> None:
        last = 0.0
        while True:
            with self.listener.changed:
                while not self.listener.dirty and not self._closed:
                    self.listener.changed.wait(1.0)
            if self._closed:
                return
            delay = last + self._period - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            last = time.monotonic()
            try:
                self._publish()
            except Exception:
                _LOG.exception("live view snapshot failed")

    def state_json(self, *, after: int | None, wait: float) -> bytes:
        """The current picture; with ``after``, first wait up to ``wait`` s for a newer one."""
        deadline = time.monotonic() + min(max(wait, 0.0), MAX_WAIT)
        with self._published:
            self.waiting += 1
            try:
                while after is not None and self.version <= after and not self._closed:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._published.wait(remaining)
                return self._body
            finally:
                self.waiting -= 1

    def control(self, action: str) -> Reply:
        """Call ``pause``, ``resume`` or ``cancel`` on the orchestrator.

        Raises:
            KeyError: another action.
        """
        calls: dict[str, Callable[[], Reply]] = {
            "pause": self.orchestrator.pause,
            "resume": self.orchestrator.resume,
            "cancel": self.orchestrator.cancel,
        }
        reply = calls[action]()
        with self.listener.changed:
            self.listener.dirty = True
            self.listener.changed.notify_all()
        return reply

    def close(self) -> None:
        """Stop serving, detach the listener and release waiting clients. Safe to call twice."""
        if self._closed:
            return
        with self.listener.changed:
            self._closed = True
            self.listener.changed.notify_all()
        with self._published:
            self._published.notify_all()
        if self._serving.is_alive():
            self._server.shutdown()
        self._server.server_close()
        self.orchestrator.listener.remove(self.listener)
        if self._snapshots.is_alive():
            self._snapshots.join(5.0)

    def __enter__(self) -> LiveView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Handler(BaseHTTPRequestHandler):
    """Routes of the live view (see the module docstring)."""

    server_version = "erobs-bt-live-view"
    view: LiveView  # set on the per-server subclass

    def log_message(self, format: str, *args: Any) -> None:
        _LOG.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            _LOG.debug("client went away before the answer was sent")

    def _json(self, status: HTTPStatus, value: Any) -> None:
        self._send(status, json.dumps(value).encode("utf-8"), "application/json")

    def _host_ok(self) -> bool:
        if self.headers.get("Host", "") in self.view.allowed_hosts:
            return True
        self._json(HTTPStatus.FORBIDDEN, {"error": "unexpected Host header"})
        return False

    def do_GET(self) -> None:
        if not self._host_ok():
            return
        parts = urlsplit(self.path)
        if parts.path == "/api/state":
            query = parse_qs(parts.query)
            try:
                after = int(query["after"][0]) if "after" in query else None
                wait = float(query.get("wait", ["0"])[0])
            except ValueError:
                self._json(HTTPStatus.BAD_REQUEST, {"error": "after must be an integer and wait a number"})
                return
            self._send(HTTPStatus.OK, self.view.state_json(after=after, wait=wait), "application/json")
            return
        name = "index.html" if parts.path == "/" else parts.path.removeprefix("/static/")
        if name not in _STATIC:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {parts.path}"})
            return
        body = resources.files("erobs_bt.viz").joinpath("static", name).read_bytes()
        self._send(HTTPStatus.OK, body, _STATIC[name])

    def do_POST(self) -> None:
        if not self._host_ok():
            return
        length = int(self.headers.get("Content-Length", "0") or 0)
        if length:
            self.rfile.read(min(length, 65536))
        action = urlsplit(self.path).path.removeprefix("/api/")
        if action not in ("pause", "resume", "cancel"):
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no such control: {self.path}"})
            return
        header, value = CONTROL_HEADER
        if self.headers.get(header) != value:
            self._json(HTTPStatus.FORBIDDEN, {"error": f"control requests need the header {header}: {value}"})
            return
        reply = self.view.control(action)
        self._json(HTTPStatus.OK, {"success": reply.success, "message": reply.message})


class _ThreadingHTTPServerV6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def start_live_view(
    orchestrator: Orchestrator,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    rate: float = 10.0,
    keep_done: int = 3,
    lookahead: int = 2,
    max_flat: int = 40,
) -> LiveView:
    """Serve a live view of ``orchestrator`` and attach its listener.

    The listener joins the orchestrator's :class:`~erobs_bt.orchestrator.ListenerGroup`
    and leaves it again on :meth:`LiveView.close`. A goal already running
    is shown from its next tick (its tree at once).

    Args:
        orchestrator: the orchestrator to show and control.
        host: a loopback address (``127.0.0.1``, ``::1`` or ``localhost``).
        port: TCP port; 0 picks a free one (read it from ``LiveView.url``).
        rate: most snapshots per second [Hz], > 0.
        keep_done: finished units shown in full before the current one.
        lookahead: pending units shown in full after the current one.
        max_flat: scripts with up to this many units are never folded.

    Returns:
        The running view; call :meth:`LiveView.close` when done.

    Raises:
        ValueError: ``host`` is not a loopback address, or ``rate`` is not positive.
        OSError: the port cannot be bound.
    """
    if not _is_loopback(host):
        raise ValueError(
            f"the live view has robot controls and no authentication, so it serves on loopback only "
            f"(got host {host!r}); reach it from another machine through an SSH tunnel"
        )
    if not rate > 0:
        raise ValueError(f"rate must be > 0 Hz (got {rate})")
    listener = LiveViewListener(
        initial_state=orchestrator.state, keep_done=keep_done, lookahead=lookahead, max_flat=max_flat
    )
    goal = orchestrator.active_goal
    if goal is not None:
        listener.adopt(goal.goal_id, goal.root)

    class Handler(_Handler):
        """The handler class of this view (its routes read ``Handler.view``)."""

    server_class = _ThreadingHTTPServerV6 if ":" in host else ThreadingHTTPServer
    server = server_class((host, port), Handler)
    server.daemon_threads = True
    view = LiveView(orchestrator, listener, server, rate=rate)
    Handler.view = view
    view.start()
    orchestrator.listener.add(listener)
    return view

"""The operator's console: a live web view of an orchestrator, with its controls.

:func:`start_live_view` attaches a :class:`LiveViewListener` to an
:class:`~erobs_bt.orchestrator.Orchestrator` and serves it with Starlette on uvicorn
(:func:`build_app`, :class:`WebServer`), on 127.0.0.1 unless told otherwise.

Routes (every one behind the access check, see "Access" below):

* ``GET /`` — the page (``static/index.html``, ``app.js``, ``style.css``: plain
  HTML/CSS/JS, no external resources, works offline); ``GET /static/<file>``.
* ``GET /api/events`` — the live stream, `Server-Sent Events`_ (``text/event-stream``).
  Events: ``state`` (the picture, below; ``id`` is its ``version``), ``trajectory`` (one
  unit's planned motion, below; sent when it is planned and, on connecting, for every
  unit of the shown goal planned so far), ``joints`` (the live arm state, at most
  ``joint_rate`` times per second). A comment line keeps an idle connection open.
* ``GET /api/state?after=V&wait=S`` — the picture as JSON; with ``after`` the request
  waits up to ``S`` s (at most 25) for a version newer than ``V`` (long polling, used by
  ``erobs-bt watch --url``).
* ``GET /api/trajectories`` — ``{"goal_id", "mode", "units": [trajectory, ...]}`` of the
  shown goal. ``GET /api/joints`` — the latest ``joints`` event.
* ``POST /api/validate`` (body: the script text) — exactly ``erobs-bt validate --json``:
  ``{"valid": true, ...GoalPlan.describe(), "steps": {unit: [step detail]}}`` or
  ``{"valid": false, "error": <the message validate prints>}``; made by
  :func:`erobs_bt.plan.plan_goal` with the orchestrator's own parser and batching.
* ``POST /api/submit`` (JSON ``{"script": text, "preview": bool, "reset": bool}``) —
  validate as above, then (``reset``: the page's Run on a simulated cell) put the cell back
  in its initial state (:meth:`Orchestrator.reset_simulation`), then
  :meth:`Orchestrator.submit`; an invalid script is answered 422 and moves nothing; a
  busy or FAULTED orchestrator, or a refused reset, 409. Answers ``{"success", "message", "goal_id"}``.
* ``POST /api/pause``, ``/api/resume``, ``/api/cancel`` (at the next unit boundary),
  ``/api/stop`` (now: controlled stop, the goal aborts ``STOPPED``), ``/api/reset_fault``,
  ``/api/reset_simulation`` (the simulated cell back in its initial state; refused while a
  goal runs and on a robot that is not simulated) —
  the orchestrator's methods (the API behind the ROS services); answer their
  :class:`~erobs_bt.orchestrator.Reply` as ``{"success", "message", "state", "t"}``
  (``state`` right after the call, ``t`` [epoch s] when answered; a stop answers once the
  halted goal has ended). The page drops a reply once the state changes after ``t``
  (the picture's ``state_since``), so no reply outlives the state it was about.

The picture (``state`` event, ``/api/state``): ``version``, ``state``, ``state_message``,
``state_since`` [epoch s], ``goal`` (``id``, ``mode``, ``total_steps``, ``units``,
``eligible``, ``started`` [epoch s], ``run_name``), ``feedback`` (the action feedback),
``motion`` (progress inside the executing unit: ``unit``, ``step``, ``step_of_unit``,
``steps``, ``tau``, ``duration``, ``fraction``, ``eta`` [s], ``source``; see
:func:`erobs_bt.viz.model.locate`), ``cache`` (the current unit's cache decision),
``last_error``, ``fault`` (``reason``, ``recovery``) when FAULTED, ``result`` (of the shown
goal), ``rejected`` (goals refused: ``goal_id``, ``error``, ``t``), ``events`` (the shown
goal's recent events, each with ``dt`` [s] since the goal started, never negative),
``trajectories`` (index: ``unit``, ``source`` ``plan``/``cache``, ``duration`` [s]),
``lingering`` (the run is over, the view stays until Ctrl-C), ``tool`` (the tools now,
:func:`tools_now`: ``gripper`` attached, ``none`` for the bare flange, and ``docks``
{number: gripper or null} when the backend tracks them), ``resettable`` (the backend is a
simulation :meth:`Orchestrator.reset_simulation` can reset), ``scene`` (the planning scene's
world now: ``revision`` and ``obstacles``, shapes as in ``/api/scene``; ``null`` for a backend
without a cell of its own) and ``tree``
(:func:`erobs_bt.viz.model.fold_tree`; a unit shown in full carries ``steps``, its step
detail, :func:`erobs_bt.viz.model.unit_steps`).

Trajectories (``trajectory`` event, ``/api/trajectories``; the contract with the 3D view
``static/cell3d.js``)::

    {"goal_id": "goal-3", "mode": "preview" | "execute", "source": "plan" | "cache",
     "unit": 2,                                  # 1-based unit number
     "joint_names": ["shoulder_pan_joint", ...], # UR joint names, the order of positions
     "time_from_start": [0.0, 0.05, ...],        # [s] from the unit's start, N values
     "positions": [[q1..q6], ...],               # [rad], N rows
     "segments": [{"step": 4, "kind": "arm", "start": 0.0, "end": 1.8,
                   "first_point": 0, "last_point": 36},
                  {"step": 5, "kind": "tool", "start": 1.8, "end": 1.8,
                   "gripper": "epick", "command": "vacuum_on"}],
     "duration": 3.6, "start_positions": [q1..q6] | null}

(:func:`erobs_bt.viz.model.trajectory_json`; samples closer than 50 ms are dropped.)
Joint states (``joints`` event, ``/api/joints``)::

    {"t": epoch s, "name": [UR joint names], "position": [rad, ...], "gripper": "epick"}

Snapshots are taken on change and throttled (docs/design.md §2): the listener's callbacks
only record what changed and raise a flag, O(1) on the goal thread; a snapshot thread
folds the tree at most ``rate`` times per second and publishes a new version only when
the picture differs.

Access (:class:`Access`): by default the server binds 127.0.0.1 and needs no token; it
then answers only requests whose ``Host`` names a loopback host (``127.0.0.1``, ``::1``,
``localhost``) on *any* port, so an SSH tunnel on another local port works while a DNS
rebinding page (whose ``Host`` is its own name) is refused. Bound to another address
(``--host``), a random token is made, printed with the URL, and required on every request,
the event stream included: ``Authorization: Bearer <token>``, the ``X-Erobs-Token`` header,
or ``?token=<token>`` (the answer then sets an HttpOnly, SameSite=Strict cookie the page
and its event stream send from then on). No token: 401; a wrong one: 403. With a token,
any ``Host`` is accepted (a rebinding page cannot know the token, and the cookie belongs to
the real host name). Control requests (every ``POST``) also need the
``X-Requested-By: erobs-bt`` header, which a cross-site form cannot send.

Extending (the seam for other pages): :func:`build_app` takes extra Starlette ``routes``
(``Route``, ``Mount`` of ``StaticFiles`` …), served behind the same access check, and works
without a live view (``view=None``, e.g. a history page of run logs); ``start_live_view``
passes its ``routes`` on. Nothing in this module needs to change to add a page;
:func:`console_pages` gathers the ones ``run --view`` and ``node --view`` serve (the 3D cell
view of :mod:`erobs_bt.viz.scene`, the run history of :mod:`erobs_bt.viz.history`).

.. _Server-Sent Events: https://html.spec.whatwg.org/multipage/server-sent-events.html

Why not py_trees_js (PyPI ``py-trees-js`` 0.7.0): its JavaScript and CSS are shipped only
inside a compiled Qt resource module, so serving them needs PyQt5, and it lays out the
whole tree on one canvas, whereas a 1,000-unit script needs the server-side folding of
:mod:`erobs_bt.viz.model`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import secrets
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
import py_trees
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from erobs_bt.backends.base import HasCell, KnowsIfResettable, MotionBackend, Solution, WatchesWorld
from erobs_bt.goal import GoalHandle
from erobs_bt.orchestrator import (
    Feedback,
    GoalRejected,
    Orchestrator,
    OrchestratorListener,
    Reply,
    Result,
    State,
)
from erobs_bt.viz.model import (
    MotionTimeline,
    UnitNotes,
    fold_tree,
    locate,
    trajectory_json,
    unit_steps,
)

_LOG = logging.getLogger(__name__)

#: Header a control request must carry (a cross-site HTML form cannot set it).
CONTROL_HEADER = ("X-Requested-By", "erobs-bt")

#: Header that may carry the access token (besides ``Authorization: Bearer``).
TOKEN_HEADER = "X-Erobs-Token"

#: Cookie the page keeps the access token in after a ``?token=`` visit.
TOKEN_COOKIE = "erobs_bt_token"

#: Longest long-poll wait a client may ask for [s].
MAX_WAIT = 25.0

#: Longest wait of a stop request for the halted goal to end [s].
STOP_WAIT = 5.0

#: Longest script a page may submit [bytes] (the parser has its own, smaller, limits).
MAX_BODY = 8 * 1024 * 1024

#: How FAULTED is left, shown with the fault.
RECOVERY = (
    "check the cell, then press Reset fault (or run `erobs-bt reset-fault`, or call the "
    "node's ~/reset_fault service); a restart also clears it"
)

_PHASE_EVENTS = ("plan", "execute", "replay", "run")
#: Added to every answer (unless a route set its own): no caching, no sniffing, and only
#: this origin's scripts, styles and data (WebGL's blob: and data: URLs included).
SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data: blob:; worker-src 'self' blob:; "
        "connect-src 'self' blob: data:; frame-ancestors 'none'"
    ),
}


@dataclass
class _Execution:
    """The motion in flight: which unit, since when, on what planned timeline."""

    unit: int
    started: float  # time.monotonic()
    timeline: MotionTimeline
    tau: float = 0.0


class LiveViewListener(OrchestratorListener):
    """Collects what the live view shows; every callback is short and never raises.

    Args:
        initial_state: the orchestrator's state when the view starts.
        goal_lookup: returns the running goal's handle for a goal id (or ``None``); its
            script, units and context give the step detail and the planned solutions.
        keep_done: see :func:`erobs_bt.viz.model.fold_tree`.
        lookahead: see :func:`erobs_bt.viz.model.fold_tree`.
        max_flat: see :func:`erobs_bt.viz.model.fold_tree`.
        on_trajectory: called (outside the lock) with each new trajectory's JSON.
    """

    def __init__(
        self,
        *,
        initial_state: State,
        goal_lookup: Callable[[str], GoalHandle | None] = lambda _goal_id: None,
        keep_done: int = 3,
        lookahead: int = 2,
        max_flat: int = 40,
        on_trajectory: Callable[[dict[str, Any]], None] = lambda _t: None,
    ) -> None:
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)
        self.dirty = True
        self._lookup = goal_lookup
        self._on_trajectory = on_trajectory
        self._fold = {"keep_done": keep_done, "lookahead": lookahead, "max_flat": max_flat}
        self._state = initial_state.value
        self._state_message = ""
        self._state_since = time.time()
        self._fault = ""
        self._goal: dict[str, Any] = {}
        self._handle: GoalHandle | None = None
        self._steps: dict[int, list[dict[str, Any]]] | None = None
        self._root: py_trees.behaviour.Behaviour | None = None
        self._feedback: dict[str, Any] | None = None
        self._notes: dict[int, UnitNotes] = {}
        self._last_error = ""
        self._result: dict[str, Any] | None = None
        self._rejected: deque[dict[str, Any]] = deque(maxlen=5)
        self._events: deque[dict[str, Any]] = deque(maxlen=16)
        self._origin: float | None = None
        self._solutions: dict[int, tuple[str, Solution]] = {}
        self._trajectories: dict[int, dict[str, Any]] = {}
        self._execution: _Execution | None = None
        self._positions: tuple[float, ...] | None = None
        self.lingering = False
        #: goal id → the script's ``run_name`` (:meth:`LiveView.note_submitted` fills it).
        self.run_names: dict[str, str] = {}

    def _touch(self) -> None:
        self.dirty = True
        self.changed.notify_all()

    @property
    def executing(self) -> bool:
        """True while a unit's motion is in flight (progress then follows the arm)."""
        return self._execution is not None

    # -- OrchestratorListener -------------------------------------------------------
    def state_changed(self, state: State, message: str) -> None:
        with self._lock:
            self._state, self._state_message = state.value, message
            self._state_since = time.time()
            if state is State.FAULTED:
                self._fault = message
                self._last_error = message
            elif self._fault:
                self._fault = ""
            self._touch()

    def feedback(self, goal_id: str, feedback: Feedback) -> None:
        with self._lock:
            if goal_id == self._goal.get("id"):
                self._feedback = asdict(feedback)
                self._touch()

    def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
        try:
            trajectory = None
            with self._lock:
                trajectory = self._event_locked(goal_id, record)
                self._touch()
            if trajectory is not None:
                self._on_trajectory(trajectory)
        except (KeyError, TypeError, ValueError) as exc:
            _LOG.warning("live view ignored a malformed event %r: %s", record, exc)

    def _new_goal(self, goal_id: str, t: float | None) -> None:
        """Forget everything of the goal shown before (called under the lock)."""
        self._goal = {"id": goal_id, "started": t}
        self._handle = None
        self._steps = None
        self._notes = {}
        self._result = None
        self._last_error = self._fault
        self._feedback = None
        self._events.clear()
        self._origin = t
        self._solutions = {}
        self._trajectories = {}
        self._execution = None

    def _event_locked(self, goal_id: str, record: Mapping[str, Any]) -> dict[str, Any] | None:
        event = str(record.get("event", ""))
        t = float(record["t"]) if isinstance(record.get("t"), (int, float)) else None
        trajectory = None
        if event in ("rejected_script", "goal_rejected"):  # invalid script; busy or FAULTED
            self._rejected.append({"goal_id": goal_id, "error": str(record.get("error", "")), "t": t})
        if goal_id and goal_id != self._goal.get("id") and event != "state":
            self._new_goal(goal_id, t)
        if event == "goal_started":
            self._goal.update(
                mode=record.get("mode", ""),
                total_steps=record.get("total_steps", 0),
                units=record.get("units", 0),
                eligible=bool(record.get("eligible", False)),
            )
            handle = self._lookup(goal_id)
            if handle is not None and handle.goal_id == goal_id:
                self._handle = handle
            pending = self.run_names.pop("", "")  # noted by a submit that has not returned yet
            self._goal["run_name"] = self.run_names.get(goal_id, pending)
        elif event == "rejected_script":
            self._result = {
                "goal_id": goal_id,
                "status": "ABORTED",
                "error_message": str(record.get("error", "")),
                "error_code": "INVALID_SCRIPT",
                "completed_steps": 0,
                "total_steps": 0,
                "rejected": True,
            }
            self._last_error = str(record.get("error", ""))
        unit = record.get("unit")
        if isinstance(unit, int) and goal_id == self._goal.get("id"):
            note = self._notes.setdefault(unit, UnitNotes())
            if event == "cache":
                note.cache = str(record.get("status", ""))
            elif event == "replay_unchecked":
                note.notice = str(record.get("message", ""))
            phase, _, edge = event.rpartition("_")
            if phase in _PHASE_EVENTS and edge == "finished":
                note.seconds[phase] = float(record.get("seconds", 0.0))
                detail = str(record.get("detail", ""))
                if detail.startswith("failed"):
                    note.error = detail
                if phase in ("execute", "replay") and self._execution is not None:
                    self._execution = None
            trajectory = self._track_motion(event, unit)
        error = record.get("error")
        if error and record.get("status") != "CANCELED" and event not in ("rejected_script", "goal_rejected"):
            self._last_error = str(error)
        elif str(record.get("detail", "")).startswith("failed"):
            self._last_error = str(record["detail"])
        if event != "state" and (not goal_id or goal_id == self._goal.get("id")):
            origin = self._origin if self._origin is not None else t
            shown = {k: v for k, v in record.items() if isinstance(v, (str, int, float, bool))}
            if t is not None and origin is not None:
                shown["dt"] = round(max(0.0, t - origin), 3)
            self._events.append(shown)
        return trajectory

    def _track_motion(self, event: str, unit: int) -> dict[str, Any] | None:
        """Keep the unit's solution when it is planned or replayed; start tracking its
        execution. Returns a new trajectory's JSON (called under the lock)."""
        handle = self._handle
        context = handle.context if handle is not None else None
        if context is None:
            return None
        new: tuple[str, Solution] | None = None
        if event == "plan_finished":
            solution = context.solutions.get(unit - 1)
            if solution is not None:
                new = ("plan", solution)
        elif event == "replay_started" and context.unit_key is not None:
            solution = context.cache.peek(context.unit_key)
            if solution is not None:
                new = ("cache", solution)
        trajectory = None
        if new is not None and self._solutions.get(unit, (None, None))[1] is not new[1]:
            self._solutions[unit] = new
            trajectory = {
                "goal_id": self._goal.get("id", ""),
                "mode": self._goal.get("mode", ""),
                "source": new[0],
                **trajectory_json(new[1], unit=unit),
            }
            self._trajectories[unit] = trajectory
        if event in ("execute_started", "replay_started") and unit in self._solutions:
            steps = (
                [s.index + 1 for s in handle.units[unit - 1].steps]
                if handle and len(handle.units) >= unit
                else []
            )
            timeline = MotionTimeline.of(self._solutions[unit][1], unit_steps=steps)
            self._execution = _Execution(unit, time.monotonic(), timeline)
        return trajectory

    def ticked(self, goal_id: str, root: py_trees.behaviour.Behaviour) -> None:
        with self._lock:
            if self._root is not root:
                self._root = root
                if goal_id != self._goal.get("id"):
                    self._new_goal(goal_id, None)
            self._touch()

    def finished(self, goal_id: str, result: Result) -> None:
        with self._lock:
            if goal_id != self._goal.get("id"):
                self._new_goal(goal_id, None)
            self._result = {
                "goal_id": goal_id,
                "status": result.status.value,
                "error_message": result.error_message,
                "error_code": result.error_code,
                "completed_steps": result.completed_steps,
                "total_steps": result.total_steps,
            }
            self._execution = None
            if result.error_message and result.error_code != "CANCELED":
                self._last_error = result.error_message
            self._touch()

    # -- joint states ------------------------------------------------------------------
    def joints_changed(self, positions: tuple[float, ...]) -> None:
        """The live arm state [rad]; marks the picture dirty while a unit executes."""
        with self._lock:
            self._positions = positions
            if self._execution is not None:
                self._touch()

    # -- reading -----------------------------------------------------------------------
    def adopt(self, goal_id: str, root: py_trees.behaviour.Behaviour | None) -> None:
        """Show ``root`` (of a goal already running, or paused, when the view started), with
        what its ``goal_started`` event would have said (mode, steps, units, eligibility)."""
        with self._lock:
            self._root = root
            if goal_id != self._goal.get("id"):
                self._new_goal(goal_id, None)
            handle = self._handle = self._lookup(goal_id)
            if handle is not None and handle.script is not None and handle.context is not None:
                self._goal.update(
                    mode=handle.context.mode.value,
                    total_steps=len(handle.script.steps),
                    units=len(handle.units),
                    eligible=bool(handle.context.eligible),
                )
            self._touch()

    def trajectories(self) -> dict[str, Any]:
        """``{"goal_id", "mode", "units": [trajectory JSON, ...]}`` of the shown goal."""
        with self._lock:
            return {
                "goal_id": self._goal.get("id", ""),
                "mode": self._goal.get("mode", ""),
                "units": [self._trajectories[u] for u in sorted(self._trajectories)],
            }

    def picture(self) -> dict[str, Any]:
        """The JSON-able picture (without ``version``); folds the live tree."""
        with self._lock:
            self.dirty = False
            root = self._root
            handle = self._handle
            notes = {unit: replace(n, seconds=dict(n.seconds)) for unit, n in self._notes.items()}
            feedback = dict(self._feedback) if self._feedback is not None else None
            execution = self._execution
            positions = self._positions
            picture: dict[str, Any] = {
                "state": self._state,
                "state_message": self._state_message,
                "state_since": round(self._state_since, 6),
                "goal": dict(self._goal),
                "feedback": feedback,
                "last_error": self._last_error,
                "fault": {"reason": self._fault, "recovery": RECOVERY} if self._fault else None,
                "result": dict(self._result) if self._result is not None else None,
                "rejected": list(self._rejected),
                "events": list(self._events),
                "trajectories": [
                    {"unit": u, "source": t["source"], "duration": t["duration"]}
                    for u, t in sorted(self._trajectories.items())
                ],
                "lingering": self.lingering,
            }
            steps = self._steps
        if steps is None and handle is not None and handle.script is not None:
            steps = unit_steps(handle.script, handle.units)
            with self._lock:
                if self._handle is handle:
                    self._steps = steps
        motion = None
        if execution is not None:
            where = locate(
                execution.timeline,
                positions,
                elapsed=time.monotonic() - execution.started,
                previous=execution.tau,
            )
            execution.tau = where["tau"]
            motion = {"unit": execution.unit, **where}
        picture["motion"] = motion
        tree = fold_tree(root, notes=notes, steps=steps, **self._fold) if root is not None else None
        picture["tree"] = tree
        current = tree["current_unit"] if tree else 0
        picture["cache"] = notes[current].cache if current in notes else ""
        return picture


def run_name_of(text: str | bytes) -> str:
    """The ``run_name`` of a script document (EROBS scripts carry one), else ``""``."""
    try:
        document = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return ""
    name = document.get("run_name") if isinstance(document, dict) else None
    return name if isinstance(name, str) else ""


# -- access ---------------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """The host name of a ``Host`` header, without its port (``[::1]:8080`` → ``::1``)."""
    header = header.strip()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


@dataclass(frozen=True)
class Access:
    """Who may talk to the server (see the module docstring, "Access").

    Attributes:
        token: the access token, or ``None`` for none (loopback binds only).
    """

    token: str | None = None

    @classmethod
    def for_host(cls, host: str, token: str | None = None) -> Access:
        """The policy for a server bound to ``host``: no token on loopback (unless one is
        given), a new random token on any other address."""
        if token is None and not is_loopback(host):
            token = secrets.token_urlsafe(18)
        return cls(token)

    def host_allowed(self, header: str) -> bool:
        """A request's ``Host`` is acceptable: any with a token, else loopback names on any port."""
        return self.token is not None or is_loopback(_host_name(header))

    def check(self, headers: Mapping[str, str], query: Mapping[str, str], cookies: Mapping[str, str]) -> int:
        """0 when the request may proceed, else the HTTP status to refuse it with (401: no
        token given, 403: a wrong one)."""
        if self.token is None:
            return 0
        given = ""
        authorization = headers.get("authorization", "")
        if authorization.lower().startswith("bearer "):
            given = authorization[7:].strip()
        given = (
            given
            or headers.get(TOKEN_HEADER.lower(), "")
            or query.get("token", "")
            or cookies.get(TOKEN_COOKIE, "")
        )
        if not given:
            return 401
        return 0 if secrets.compare_digest(given.encode(), self.token.encode()) else 403


class AccessMiddleware:
    """ASGI middleware: the ``Host`` check, the token, and the cookie after ``?token=``."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if not self.access.host_allowed(request.headers.get("host", "")):
            await _json(
                403, {"error": "unexpected Host header (only loopback names are served without a token)"}
            )(scope, receive, send)
            return
        refused = self.access.check(request.headers, request.query_params, request.cookies)
        if refused:
            words = "an access token is required" if refused == 401 else "wrong access token"
            await _json(
                refused, {"error": f"{words} (header {TOKEN_HEADER}, Authorization: Bearer, or ?token=)"}
            )(scope, receive, send)
            return
        extra = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
        if self.access.token is not None and "token" in request.query_params:
            cookie = f"{TOKEN_COOKIE}={self.access.token}; Path=/; HttpOnly; SameSite=Strict"
            extra.append((b"set-cookie", cookie.encode()))

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(k, v) for k, v in extra if k == b"set-cookie" or k not in present]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _json(status: int, value: Any) -> JSONResponse:
    return JSONResponse(value, status_code=status, headers=SECURITY_HEADERS)


# -- the live view ----------------------------------------------------------------------------------


class LiveView:
    """A live view of an orchestrator: its pictures, stream and controls.

    Why this class has more than 25 methods: it joins an orchestrator's listener, a snapshot thread and the
    web server's event loop, and each method is one request the console makes or one event it follows; the
    pictures are made by viz/render.py and viz/scene.py, the HTTP routes by this module's _live_routes.

    Create it with :func:`start_live_view` (which also serves it). Pictures are made by a
    snapshot thread; async clients (the event stream, long polls) wait on the server's
    event loop.

    Attributes:
        orchestrator: what is shown and controlled.
        listener: the listener attached to it.
        version: the number of the current picture (grows on every change).
        waiting: requests currently waiting for a newer picture (long polls).
        url: the served address (set by :func:`start_live_view`).
        server: the :class:`WebServer`, or ``None`` while not served.
    """

    def __init__(
        self,
        orchestrator: Orchestrator,
        *,
        rate: float = 10.0,
        joint_rate: float = 20.0,
        keep_done: int = 3,
        lookahead: int = 2,
        max_flat: int = 40,
    ) -> None:
        if not rate > 0 or not joint_rate > 0:
            raise ValueError(f"rate and joint_rate must be > 0 Hz (got {rate}, {joint_rate})")
        self.orchestrator = orchestrator
        self.listener = LiveViewListener(
            initial_state=orchestrator.state,
            goal_lookup=self._lookup,
            keep_done=keep_done,
            lookahead=lookahead,
            max_flat=max_flat,
            on_trajectory=self._trajectory_planned,
        )
        self._period = 1.0 / rate
        self.joint_period = 1.0 / joint_rate
        self._published = threading.Condition()
        self._closed = False
        self.version = 0
        self.waiting = 0
        self._body = b"{}"
        self._signature = ""
        self._joints: dict[str, Any] | None = None
        self._joints_seq = 0
        self._trajectory_log: list[dict[str, Any]] = []
        #: trajectories ever logged (the log keeps only the last 256, so its length stops growing)
        self._trajectories_logged = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._async_changed: asyncio.Event | None = None
        self.url = ""
        self.base_url = ""
        self.access = Access()
        self.server: WebServer | None = None
        self._streaming_joints = False
        self._scene_cache: dict[str, Any] | None = None
        self._publish()
        self._threads = [
            threading.Thread(target=self._snapshot_loop, name="live-view-snapshots", daemon=True)
        ]

    def _lookup(self, goal_id: str) -> GoalHandle | None:
        goal = self.orchestrator.active_goal
        return goal if goal is not None and goal.goal_id == goal_id else None

    def start(self) -> None:
        """Attach to the orchestrator and the backend's joint states; start the snapshot thread."""
        goal = self.orchestrator.active_goal
        if goal is not None:
            self.listener.adopt(goal.goal_id, goal.root)
        backend = self.orchestrator.backend
        try:
            self._streaming_joints = bool(
                backend.add_joint_state_listener(self._joint_state, rate=1.0 / self.joint_period)
            )
        except Exception:  # a backend without the stream (older test doubles)
            _LOG.debug("backend has no joint-state stream; polling it", exc_info=True)
        if not self._streaming_joints:
            self._threads.append(
                threading.Thread(target=self._poll_joints, name="live-view-joints", daemon=True)
            )
        # A change of the planning scene's world is drawn at once (the picture's ``scene``).
        if isinstance(backend, WatchesWorld):
            backend.add_world_listener(self._world_changed)
        for thread in self._threads:
            thread.start()
        self.orchestrator.listener.add(self.listener)

    def _world_changed(self, _world: Any, _source: str) -> None:
        self._touch()

    # -- async side ---------------------------------------------------------------------
    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called by the server on start-up: the loop async waiters run on."""
        self._loop = loop
        self._async_changed = asyncio.Event()

    def _wake_async(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self._notify_waiters)

    def _notify_waiters(self) -> None:
        event, self._async_changed = self._async_changed, asyncio.Event()
        if event is not None:
            event.set()

    async def changed(self, timeout: float) -> None:
        """Wait (on the server's loop) until anything changes or ``timeout`` [s] passes."""
        event = self._async_changed
        if event is None or self._closed:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    async def picture_after(self, after: int | None, wait: float) -> bytes:
        """The current picture's JSON; with ``after``, first wait up to ``wait`` s for a newer one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(max(wait, 0.0), MAX_WAIT)
        self.waiting += 1
        try:
            while after is not None and self.version <= after and not self._closed:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                await self.changed(remaining)
            with self._published:
                return self._body
        finally:
            self.waiting -= 1

    async def stream(self) -> AsyncIterator[str]:
        """The event stream's text (see the module docstring)."""
        version = -1
        joints_seq = -1
        goal: str | None = None
        sent: set[int] = set()  # ids of the trajectory dicts sent (the log keeps them alive)
        while not self._closed:
            with self._published:
                current, body = self.version, self._body
                logged = list(self._trajectory_log)
                joints, seq = self._joints, self._joints_seq
                # What this pass sends; a change after this read (even one made while a
                # yield below waits for the client) makes the next pass send again.
                sent_mark = (current, seq, self._trajectories_logged)
            if current != version:
                shown_goal = json.loads(body).get("goal", {}).get("id", "")
                if shown_goal != goal:
                    goal, sent = shown_goal, set()
                    logged = [*self.listener.trajectories()["units"], *logged]
            for trajectory in logged:
                if trajectory.get("goal_id") == goal and id(trajectory) not in sent:
                    sent.add(id(trajectory))
                    yield _sse("trajectory", json.dumps(trajectory))
            if current != version:
                version = current
                yield _sse("state", body.decode("utf-8"), event_id=str(current))
            if joints is not None and seq != joints_seq:
                joints_seq = seq
                yield _sse("joints", json.dumps(joints))
            # Everything on the stream is coalesced to at most one batch per joint period.
            await asyncio.sleep(self.joint_period)
            if sent_mark == self._change_mark():
                await self.changed(15.0)
                if sent_mark == self._change_mark():
                    yield ": keep-alive\n\n"

    def _change_mark(self) -> tuple[int, int, int]:
        """(picture version, joint-state number, trajectories logged so far): what the event
        stream compares with what it sent, to know whether there is anything new."""
        with self._published:
            return self.version, self._joints_seq, self._trajectories_logged

    # -- pictures ---------------------------------------------------------------------
    def _publish(self) -> None:
        picture = self.listener.picture()
        picture["tool"] = self._tools()
        backend = self.orchestrator.backend
        picture["resettable"] = isinstance(backend, KnowsIfResettable) and bool(backend.resettable)
        picture["scene"] = self._scene()
        signature = json.dumps(picture, sort_keys=True, default=str)
        with self._published:
            if signature == self._signature:
                return
            self._signature = signature
            self.version += 1
            picture["version"] = self.version
            self._body = json.dumps(picture, default=str).encode("utf-8")
            self._published.notify_all()
        self._wake_async()

    def _scene(self) -> dict[str, Any] | None:
        """The picture's ``scene``: ``{"revision", "obstacles": [shape]}`` of the planning
        scene's world now (the backend's ``world_obstacles``, shapes as in ``/api/scene``),
        built again only when the revision changes; ``None`` when the backend has no cell of
        its own (a test double: the view keeps the cell file's obstacles)."""
        backend = self.orchestrator.backend
        if not isinstance(backend, HasCell):
            return None
        try:
            revision = backend.scene_revision()
            if self._scene_cache is None or self._scene_cache["revision"] != revision:
                from erobs_bt.viz.scene import obstacles_json

                self._scene_cache = {
                    "revision": revision,
                    "obstacles": obstacles_json(backend.world_obstacles()),
                }
            return self._scene_cache
        except Exception:
            _LOG.debug("live view: the planning scene is unknown", exc_info=True)
            return None

    def _tools(self) -> dict[str, Any] | None:
        """The picture's ``tool`` (:func:`tools_now`), re-read at every snapshot; ``None``
        when the backend cannot tell."""
        try:
            return tools_now(self.orchestrator.backend)
        except Exception:
            _LOG.debug("live view: the tools are unknown", exc_info=True)
            return None

    def _snapshot_loop(self) -> None:
        last = 0.0
        while True:
            with self.listener.changed:
                while not self.listener.dirty and not self._closed:
                    self.listener.changed.wait(self._period if self.listener.executing else 1.0)
                    if self.listener.executing:
                        break  # progress by the clock when no joint state moves it
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
        """The current picture (blocking variant, for threads); with ``after``, first wait up
        to ``wait`` s for a newer one."""
        deadline = time.monotonic() + min(max(wait, 0.0), MAX_WAIT)
        with self._published:
            while after is not None and self.version <= after and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._published.wait(remaining)
            return self._body

    def _trajectory_planned(self, trajectory: dict[str, Any]) -> None:
        with self._published:
            self._trajectory_log.append(trajectory)
            self._trajectories_logged += 1
            del self._trajectory_log[:-256]
        self._wake_async()

    # -- joint states ---------------------------------------------------------------------
    def _joint_state(self, names: tuple[str, ...], positions: tuple[float, ...], _velocities: Any) -> None:
        self._set_joints(names, positions)

    def _set_joints(self, names: Sequence[str], positions: Sequence[float]) -> None:
        joints = {
            "t": round(time.time(), 3),
            "name": list(names),
            "position": [round(float(p), 5) for p in positions],
            "gripper": self.orchestrator.backend.current_gripper(),
        }
        with self._published:
            if self._joints is not None and self._joints["position"] == joints["position"]:
                return
            self._joints = joints
            self._joints_seq += 1
        self.listener.joints_changed(tuple(float(p) for p in positions))
        self._wake_async()

    def _poll_joints(self) -> None:
        from erobs_bt.script.model import JOINT_NAMES

        while not self._closed:
            try:
                positions = self.orchestrator.backend.joint_positions()
            except Exception:
                positions = None
            if positions is not None:
                self._set_joints(JOINT_NAMES, positions)
            with self.listener.changed:
                if self._closed:
                    return
                self.listener.changed.wait(max(self.joint_period, 0.2))

    def joints(self) -> dict[str, Any] | None:
        """The latest ``joints`` event (see the module docstring), or ``None``."""
        with self._published:
            return dict(self._joints) if self._joints is not None else None

    # -- controls ---------------------------------------------------------------------
    def control(self, action: str, *, by: str = "web console") -> Reply:
        """Call ``pause``, ``resume``, ``cancel``, ``stop``, ``reset_fault`` or
        ``reset_simulation`` on the orchestrator.

        Args:
            action: which.
            by: who asked, recorded with a fault reset or a simulation reset (run log, node log).

        Raises:
            KeyError: another action.
        """
        calls: dict[str, Callable[[], Reply]] = {
            "pause": self.orchestrator.pause,
            "resume": self.orchestrator.resume,
            "cancel": self.orchestrator.cancel,
            "stop": self.orchestrator.stop,
            "reset_fault": lambda: self.orchestrator.reset_fault(by=by),
            "reset_simulation": lambda: self.orchestrator.reset_simulation(by=by),
        }
        reply = calls[action]()
        self._touch()
        return reply

    def _touch(self) -> None:
        with self.listener.changed:
            self.listener.dirty = True
            self.listener.changed.notify_all()

    def validate(self, text: str | bytes, *, preview: bool = False) -> dict[str, Any]:
        """Validate a script as ``erobs-bt validate --json`` does, with the orchestrator's
        parser and batching (:func:`erobs_bt.plan.plan_goal`).

        Returns:
            ``{"valid": True, **GoalPlan.describe(), "steps": {unit: [step detail]}}``, or
            ``{"valid": False, "error": message}`` (the message ``validate`` prints).
        """
        from erobs_bt.plan import NotPreviewableError, plan_goal
        from erobs_bt.script.errors import ScriptError

        try:
            plan = plan_goal(
                text,
                parser=self.orchestrator.parser,
                enable_batching=self.orchestrator.settings.enable_batching,
                preview=preview,
            )
        except (ScriptError, NotPreviewableError) as exc:
            return {"valid": False, "error": str(exc)}
        steps = unit_steps(plan.script, plan.units)
        return {"valid": True, **plan.describe(), "steps": {str(k): v for k, v in steps.items()}}

    def submit(
        self, text: str, *, preview: bool, reset: bool = False, by: str = "web console"
    ) -> tuple[int, dict[str, Any]]:
        """Validate, then submit a goal (execute, or preview when ``preview``).

        Args:
            text: the script.
            preview: preview (plan only) instead of execute.
            reset: first put the simulated cell back in its initial state
                (:meth:`Orchestrator.reset_simulation`), so a Run repeated from the console
                starts where the first one did; a refused reset refuses the goal (nothing is
                submitted) with the reason.
            by: who asked, recorded with the reset.

        Returns:
            ``(HTTP status, {"success", "message", "goal_id"?, "error"?})``: 200 submitted,
            422 invalid (nothing submitted, nothing moves), 409 refused (busy, FAULTED, the
            reset refused).
        """
        report = self.validate(text, preview=preview)
        if not report["valid"]:
            return 422, {"success": False, "message": f"invalid: {report['error']}", "error": report["error"]}
        if reset:
            reply = self.orchestrator.reset_simulation(by=by)
            self._touch()
            if not reply.success:
                return 409, {"success": False, "message": reply.message}  # "reset refused: <why>"
        self.note_submitted("", text)  # the goal id is not known before submit returns
        try:
            handle = self.orchestrator.submit(text, dry_run=preview)
        except GoalRejected as exc:
            return 409, {"success": False, "message": f"refused: {exc}"}
        self.note_submitted(handle.goal_id, text)
        self._touch()
        verb = "preview" if preview else "run"
        return 200, {
            "success": True,
            "message": f"{handle.goal_id} submitted ({verb})",
            "goal_id": handle.goal_id,
            "t": round(time.time(), 6),
        }

    def set_lingering(self, lingering: bool) -> None:
        """Say on the page that the run is over and the view stays until Ctrl-C."""
        with self.listener.changed:
            self.listener.lingering = lingering
            self.listener._touch()

    def note_submitted(self, goal_id: str, text: str | bytes) -> None:
        """Remember the ``run_name`` of the script submitted as ``goal_id`` (shown with the goal)."""
        name = run_name_of(text)
        with self.listener.changed:
            self.listener.run_names[goal_id] = name
            if goal_id and self.listener._goal.get("id") == goal_id:
                self.listener._goal["run_name"] = name
                self.listener._touch()

    def close(self) -> None:
        """Stop serving, detach the listener and release waiting clients. Safe to call twice."""
        if self._closed:
            return
        with self.listener.changed:
            self._closed = True
            self.listener.changed.notify_all()
        with self._published:
            self._published.notify_all()
        self._wake_async()
        if self.server is not None:
            self.server.close()
        self.orchestrator.listener.remove(self.listener)
        if self._streaming_joints:
            self.orchestrator.backend.remove_joint_state_listener(self._joint_state)
        if isinstance(self.orchestrator.backend, WatchesWorld):
            self.orchestrator.backend.remove_world_listener(self._world_changed)
        for thread in self._threads:
            if thread.is_alive():
                thread.join(5.0)

    def __enter__(self) -> LiveView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sse(event: str, data: str, *, event_id: str | None = None) -> str:
    """One Server-Sent Event (``data`` is single-line JSON)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n"


# -- the application -------------------------------------------------------------------------------


def _live_routes(view: LiveView) -> list[BaseRoute]:
    """The console's own routes (see the module docstring)."""

    async def page(request: Request) -> Response:
        body = resources.files("erobs_bt.viz").joinpath("static", "index.html").read_bytes()
        return Response(body, media_type="text/html; charset=utf-8")

    async def state(request: Request) -> Response:
        try:
            after = int(request.query_params["after"]) if "after" in request.query_params else None
            wait = float(request.query_params.get("wait", "0"))
        except ValueError:
            return _json(400, {"error": "after must be an integer and wait a number"})
        body = await view.picture_after(after, wait)
        return Response(body, media_type="application/json", headers=SECURITY_HEADERS)

    async def events(request: Request) -> Response:
        headers = {**SECURITY_HEADERS, "X-Accel-Buffering": "no"}
        return StreamingResponse(view.stream(), media_type="text/event-stream", headers=headers)

    async def trajectories(request: Request) -> Response:
        return _json(200, view.listener.trajectories())

    async def joints(request: Request) -> Response:
        return _json(200, view.joints())

    def control_route(action: str) -> Callable[[Request], Awaitable[Response]]:
        @_control_post
        async def handler(request: Request, _body: bytes) -> Response:
            goal = view.orchestrator.active_goal if action == "stop" else None
            peer = request.client  # who asked, recorded with a fault reset
            reply = view.control(
                action, by=f"web console ({peer.host}:{peer.port})" if peer else "web console"
            )
            if goal is not None:  # answer once the halted goal has ended: the reply then describes the state
                await anyio.to_thread.run_sync(_wait_quietly, goal, STOP_WAIT)
            answer = {
                "success": reply.success,
                "message": reply.message,
                "state": view.orchestrator.state.value,
                "t": round(time.time(), 6),
            }
            return _json(200, answer)

        return handler

    @_control_post
    async def validate(request: Request, body: bytes) -> Response:
        return _json(200, view.validate(body, preview=request.query_params.get("preview") == "1"))

    @_control_post
    async def submit(request: Request, body: bytes) -> Response:
        try:
            document = json.loads(body)
            text, preview = document["script"], bool(document.get("preview", False))
            reset = bool(document.get("reset", False))
            if not isinstance(text, str):
                raise TypeError("script must be a string")
        except (ValueError, KeyError, TypeError) as exc:
            return _json(400, {"error": f'the body must be JSON {{"script": text, "preview": bool}} ({exc})'})
        peer = request.client
        by = f"web console ({peer.host}:{peer.port})" if peer else "web console"
        status, answer = view.submit(text, preview=preview, reset=reset, by=by)
        return _json(status, answer)

    routes: list[BaseRoute] = [
        Route("/", page),
        Mount("/static", app=StaticFiles(directory=str(resources.files("erobs_bt.viz").joinpath("static")))),
        Route("/api/state", state),
        Route("/api/events", events),
        Route("/api/trajectories", trajectories),
        Route("/api/joints", joints),
        Route("/api/validate", validate, methods=["POST"]),
        Route("/api/submit", submit, methods=["POST"]),
    ]
    for action in ("pause", "resume", "cancel", "stop", "reset_fault", "reset_simulation"):
        routes.append(Route(f"/api/{action}", control_route(action), methods=["POST"]))
    return routes


def _wait_quietly(goal: GoalHandle, timeout: float) -> None:
    with contextlib.suppress(TimeoutError):
        goal.wait(timeout)


def _control_post(
    handler: Callable[[Request, bytes], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """One guard for every control request (POST): the anti-CSRF header, then the body.

    A request without ``X-Requested-By: erobs-bt`` is answered 403 and one whose body is over
    :data:`MAX_BODY` bytes 413 (by its Content-Length, and again once read), both before
    ``handler(request, body)`` runs; so no control action can start from a refused request.
    """

    async def guarded(request: Request) -> Response:
        header, value = CONTROL_HEADER
        if request.headers.get(header) != value:
            return _json(403, {"error": f"control requests need the header {header}: {value}"})
        if int(request.headers.get("content-length", "0") or 0) > MAX_BODY:
            return _body_too_big()
        body = await request.body()
        if len(body) > MAX_BODY:
            return _body_too_big()
        return await handler(request, body)

    return guarded


def _body_too_big() -> Response:
    return _json(413, {"error": f"the body is over {MAX_BODY} bytes"})


def build_app(
    *,
    view: LiveView | None = None,
    routes: Sequence[BaseRoute] = (),
    access: Access | None = None,
) -> Starlette:
    """The Starlette application: the live view's routes (when ``view`` is given) and ``routes``.

    This is the seam for other pages (3D scene, history): pass Starlette routes or mounts,
    e.g. ``Route("/api/scene", scene)``, ``Mount("/vendor", StaticFiles(directory=...))``;
    they are served behind the same access check. The live view's own paths come first, so
    an extra route cannot shadow them.

    Args:
        view: the live view to serve, or ``None`` for only ``routes``.
        routes: extra routes and mounts.
        access: the access policy (``None``: loopback without a token).

    Returns:
        The ASGI application (its ``state.view`` is ``view``).
    """
    policy = access if access is not None else Access()
    all_routes = [*(_live_routes(view) if view is not None else []), *routes]

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        if view is not None:
            view.attach_loop(asyncio.get_running_loop())
        yield

    async def not_found(request: Request, exc: Exception) -> Response:
        status = int(getattr(exc, "status_code", 404))
        words = "no such page" if status == 404 else f"{request.method} is not allowed on"
        return _json(status, {"error": f"{words}: {request.url.path}"})

    app = Starlette(routes=all_routes, lifespan=lifespan, exception_handlers={404: not_found, 405: not_found})
    app.state.view = view
    app.add_middleware(AccessMiddleware, access=policy)
    return app


class WebServer:
    """uvicorn serving an ASGI app in a background thread.

    Args:
        app: the application (:func:`build_app`).
        host: address to bind.
        port: TCP port; 0 picks a free one.
        token: appended to :attr:`url` as ``?token=`` when given.

    Attributes:
        url: ``http://HOST:PORT/`` (with ``?token=…`` when there is a token).
        port: the bound port.

    Raises:
        OSError: the address cannot be bound.
        RuntimeError: the server did not start within 10 s.
    """

    def __init__(
        self, app: ASGIApp, host: str = "127.0.0.1", port: int = 0, *, token: str | None = None
    ) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.port = int(self._socket.getsockname()[1])
        shown = f"[{host}]" if ":" in host else host
        self.base_url = f"http://{shown}:{self.port}/"
        self.url = self.base_url + (f"?token={token}" if token else "")
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2, access_log=False
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="live-view-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10.0
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the web server on {self.base_url} did not start")
            time.sleep(0.01)

    def _run(self) -> None:
        self._server.run(sockets=[self._socket])

    def close(self) -> None:
        """Stop serving (open streams are ended) and join the thread. Safe to call twice."""
        self._server.should_exit = True
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(10.0)
        self._socket.close()


def console_pages(
    orchestrator: Orchestrator,
    *,
    cell: Any = None,
    log_files: Sequence[Any] = (),
    log_folders: Sequence[Any] | None = None,
) -> list[BaseRoute]:
    """The pages that join the console: the 3D cell view (:func:`erobs_bt.viz.scene.scene_routes`,
    ``/api/scene`` and the meshes and libraries it needs) and the run history
    (:func:`erobs_bt.viz.history.history_routes`, ``/history``), as routes for
    :func:`start_live_view`.

    Args:
        orchestrator: whose backend gives the live tool state and docks for the scene.
        cell: the :class:`~erobs_bt.world.cell.CellConfig` to draw (``None``: the
            simulated backend's own, else ``config/cell.yaml``).
        log_files: run logs the history lists besides its folders (this run's).
        log_folders: the folders of run logs the history lists (``None``: the default run-log
            folder, :func:`erobs_bt.viz.runlog.default_log_dir`; the node passes its
            ``run_log_dir``).

    Returns:
        The routes; without the 3D view's libraries (``airo-models``) only the history.
    """
    from erobs_bt.viz.history import RunIndex, history_routes
    from erobs_bt.viz.scene import scene_routes

    backend = orchestrator.backend
    shown = cell if cell is not None else backend.cell if isinstance(backend, HasCell) else None

    def live() -> dict[str, Any]:
        state = {**tools_now(backend), "joint_positions": backend.joint_positions()}
        if cell is None and shown is not None:  # the backend's own cell: its world now
            state["obstacles"] = backend.world_obstacles()
        return state

    routes: list[BaseRoute] = []
    try:
        routes += scene_routes(shown, state=live)
    except (RuntimeError, OSError, ValueError) as exc:
        _LOG.warning("the console has no 3D view: %s", exc)
    folders = [Path(f) for f in log_folders] if log_folders is not None else None
    routes += history_routes(RunIndex(folders, files=list(log_files)))
    return routes


def tools_now(backend: MotionBackend) -> dict[str, Any]:
    """The tools now: ``{"gripper": the attached one (``none``: the bare flange), "docks":
    {dock number: stored gripper or None}}``; ``docks`` only from a backend that tracks them
    (:meth:`~erobs_bt.backends.base.MotionBackend.dock_contents` not ``None``). For the scene
    and the picture's ``tool``."""
    state: dict[str, Any] = {"gripper": backend.current_gripper()}
    docks = backend.dock_contents()
    if docks is not None:
        state["docks"] = dict(docks)
    return state


def start_live_view(
    orchestrator: Orchestrator,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    rate: float = 10.0,
    joint_rate: float = 20.0,
    keep_done: int = 3,
    lookahead: int = 2,
    max_flat: int = 40,
    token: str | None = None,
    routes: Sequence[BaseRoute] = (),
) -> LiveView:
    """Serve a live view of ``orchestrator`` and attach its listener.

    The listener joins the orchestrator's :class:`~erobs_bt.orchestrator.ListenerGroup`
    and leaves it again on :meth:`LiveView.close`. A goal already running is shown at once.

    Args:
        orchestrator: the orchestrator to show and control.
        host: the address to bind: loopback (no token needed), or another address (LAN),
            which gets a token (``token``, or a random one).
        port: TCP port; 0 picks a free one (read it from ``LiveView.url``).
        rate: most snapshots per second [Hz], > 0.
        joint_rate: most joint-state events per second on the stream [Hz], > 0.
        keep_done: finished units shown in full before the current one.
        lookahead: pending units shown in full after the current one.
        max_flat: scripts with up to this many units are never folded.
        token: the access token (``None``: none on loopback, a random one elsewhere).
        routes: extra Starlette routes and mounts (:func:`build_app`).

    Returns:
        The running view (``url`` carries ``?token=`` when there is a token; the token is
        ``view.access.token``); call :meth:`LiveView.close` when done.

    Raises:
        ValueError: ``rate`` or ``joint_rate`` is not positive.
        OSError: the port cannot be bound.
    """
    view = LiveView(
        orchestrator,
        rate=rate,
        joint_rate=joint_rate,
        keep_done=keep_done,
        lookahead=lookahead,
        max_flat=max_flat,
    )
    access = Access.for_host(host, token)
    view.access = access
    view.start()
    try:
        server = WebServer(build_app(view=view, routes=routes, access=access), host, port, token=access.token)
    except BaseException:
        view.close()
        raise
    view.server = server
    view.url = server.url
    view.base_url = server.base_url
    return view


def history_app(index: Any) -> Any:
    """A Starlette app of the history (of ``index``, a :class:`~erobs_bt.viz.history.RunIndex`)
    and the 3D view without a live view (``log --view``).

    Built with the console's :func:`build_app`, so the same access check
    applies (loopback ``Host`` names only, on any port); ``/`` redirects to ``/history``.
    """
    from starlette.responses import RedirectResponse
    from starlette.routing import Route

    from erobs_bt.viz.history import history_routes
    from erobs_bt.viz.scene import scene_routes

    async def home(request: Any) -> Any:
        return RedirectResponse("/history")

    return build_app(routes=[Route("/", home), *history_routes(index), *scene_routes()])


def serve_log(path: Path, *, port: int = 0, ready: Any = None) -> None:
    """Serve the history page on ``127.0.0.1`` opened on the run log ``path``, until Ctrl-C.

    Args:
        path: the run log.
        port: TCP port (0: a free one).
        ready: called with the page's URL once the server listens.

    Raises:
        OSError: the port cannot be bound.
    """
    from erobs_bt.viz.history import RunIndex

    index = RunIndex([path.parent], files=[path])
    run_id = index.id_of(path.resolve())
    app = history_app(index)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/history#run={run_id}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    if ready is not None:
        ready(url)
    server.run(sockets=[sock])

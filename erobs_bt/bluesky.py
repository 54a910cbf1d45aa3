"""Bluesky integration: an Ophyd device that runs robot scripts on an erobs_bt node.

:class:`ErobsRobot` is a Bluesky *Movable*: ``set(script)`` sends the script (a path or
JSON text) as a goal to the node's native action ``<node>/execute`` and returns a Status
that finishes when the goal does. So ``RE(bps.mv(robot, "load_sample.json"))`` runs a
robot script in a plan, between scans, and :func:`run_script` does the same with a run
record (a start document, one event with the result, a stop document) and with
checkpoints at the robot's unit boundaries.

The RunEngine's controls map onto the node's:

* **pause** (``RE.request_pause()``, Ctrl-C, a queue pause): the RunEngine calls
  ``stop()`` and then ``pause()`` on every device it moved. ``stop()`` only *schedules*
  the cancel on the RunEngine's event loop; ``pause()``, which follows at once, withdraws
  it and calls the node's ``~/pause``: the robot stops at its next unit boundary (a
  running unit is never interrupted, docs/behaviour.md §3). A *deferred* pause takes
  effect at the plan's next checkpoint; :func:`run_script` has one at every unit start,
  so from there the robot stops at the next unit boundary. ``mv`` has no checkpoint
  inside, so a deferred pause waits for the whole script.
* **resume** (``RE.resume()``): the node's ``~/resume`` (once the robot has actually
  reached the boundary: a resume sent while the unit still runs would be refused, so it
  is sent when the node reports PAUSED). When the RunEngine replays the plan from its last
  checkpoint, the replayed ``set`` of the same script re-attaches to the goal that was
  paused instead of sending it again.
* **abort / stop / halt** and a failed plan: ``stop()`` with no ``pause()`` after it
  cancels the goal through the action's cancel service (honoured at the next unit
  boundary; at once while paused). ``robot.stop()`` called outside a RunEngine cancels
  at once.

``read()`` and ``describe()`` report the last goal: its status (``SUCCEEDED``,
``ABORTED``, ``CANCELED``), ``completed_steps``/``total_steps``, the error, the last
cache status (``HIT``/``MISS``/``INELIGIBLE``), the gripper and the current unit.

A node that is not running, or that goes away during a goal, fails the Status with
:class:`NodeUnavailable` naming the node and what to check; the device keeps its ROS
client, so once the node is back (restarted, rediscovered) the next ``set`` works.

Why Ophyd (v1) and not ophyd-async: the node's client (:class:`~erobs_bt.ros.client.client.ErobsBtClient`)
runs rclpy on its own thread and reports through callbacks, which is exactly the model of
Ophyd's ``Status`` objects (finished from any thread); ophyd-async devices are coroutines
on the RunEngine's event loop and would need every ROS callback marshalled into that loop
and a ``connect()`` step before use, for no gain here (nothing is polled, there are no
EPICS/Tango signals). Ophyd v1 is also what the beamline profiles that load this device
(NSLS-II's queueserver profiles) are built from. The device has soft ``Signal``
components only, so ``read``/``describe`` are Ophyd's own.

The node name is a parameter (``node="/cell1/erobs_bt"`` for a node in namespace
``/cell1``); endpoint names follow :func:`erobs_bt.ros.client.client.default_names`, and
``names`` overrides single ones when the node's ``names.*`` parameters were changed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bluesky.plan_stubs as bps
import bluesky.preprocessors as bpp
from ophyd import Component as Cpt
from ophyd import Device, Signal
from ophyd.status import Status

_LOG = logging.getLogger(__name__)

#: [s] default wait for the node to be discovered and to answer a request.
DEFAULT_TIMEOUT = 10.0


class ScriptFailed(RuntimeError):
    """The node ran the goal and it did not succeed (aborted, cancelled or rejected).

    Attributes:
        status: ``ABORTED``, ``CANCELED`` or ``REJECTED``.
        error_message: the node's error (with its prefix, e.g. ``tasks[0]: …`` or
            ``PLANNING_FAILED: …``), or the rejection reason.
        completed_steps, total_steps: from the result (0 for a rejection).
    """

    def __init__(self, status: str, error_message: str, completed_steps: int, total_steps: int) -> None:
        self.status = status
        self.error_message = error_message
        self.completed_steps = completed_steps
        self.total_steps = total_steps
        super().__init__(f"{status}: {error_message} ({completed_steps}/{total_steps} steps completed)")


class NodeUnavailable(ConnectionError):
    """The erobs_bt node could not be reached, or went away during a goal."""


def script_text(script: str | os.PathLike[str]) -> str:
    """The JSON text of ``script``: the text itself, or the contents of the file it names.

    A string whose first non-blank character is ``{`` is JSON text; anything else is a path.

    Raises:
        FileNotFoundError: the path does not exist.
        ValueError: the file is not UTF-8.
    """
    if isinstance(script, str) and script.lstrip().startswith("{"):
        return script
    path = Path(script).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"robot script {str(path)!r} not found (a path or JSON text is expected)")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"robot script {str(path)!r} is not UTF-8 text: {exc}") from exc


@dataclass
class _Goal:
    """One goal this device sent (or is sending)."""

    text: str
    status: Status
    run: Any = None  # erobs_bt.ros.client.client.GoalRun once the goal request was answered
    units_started: int = 0
    unit_index: int = 0
    cancel_requested: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class ErobsRobot(Device):
    """A UR5e cell driven by an erobs_bt node, as a Bluesky Movable.

    ``set(script)`` → a Status finishing with the goal (success only for SUCCEEDED);
    ``stop()`` cancels; ``pause()``/``resume()`` are the node's pause/resume (unit
    boundaries). See the module docstring for how the RunEngine uses them.

    Args:
        node: the node's fully qualified name (``/erobs_bt``; ``/cell1/erobs_bt`` under a
            namespace).
        name: the Ophyd name (prefix of every reading key, e.g. ``robot_completed_steps``).
        names: endpoint names overriding :func:`erobs_bt.ros.client.client.default_names`.
        timeout: [s] for discovery and for each request to the node.
        domain_id: the ROS domain of the node; ``None`` (the default, e.g. in a beamline
            profile) takes ``ROS_DOMAIN_ID`` from the environment when the device is made.
        **kwargs: passed to :class:`ophyd.Device`.

    Readings (``read()``), all of the last goal:
        ``<name>_goal_status`` (str: ``SENDING``, ``RUNNING``, ``SUCCEEDED``, ``ABORTED``,
        ``CANCELED``, ``REJECTED``, ``UNREACHABLE``, ``NODE_LOST``),
        ``<name>_completed_steps`` (int, hinted),
        ``<name>_total_steps`` (int), ``<name>_error_message`` (str),
        ``<name>_error_code`` (str), ``<name>_cache_status`` (str), ``<name>_gripper``
        (str), ``<name>_unit`` (int, 1-based unit running or last run).
    Configuration (``read_configuration()``): ``<name>_node`` (the node's name).
    """

    goal_status = Cpt(Signal, value="", kind="normal")
    completed_steps = Cpt(Signal, value=0, kind="hinted")
    total_steps = Cpt(Signal, value=0, kind="normal")
    error_message = Cpt(Signal, value="", kind="normal")
    error_code = Cpt(Signal, value="", kind="normal")
    cache_status = Cpt(Signal, value="", kind="normal")
    gripper = Cpt(Signal, value="", kind="normal")
    unit = Cpt(Signal, value=0, kind="normal")
    node = Cpt(Signal, value="", kind="config")

    def __init__(
        self,
        node: str = "/erobs_bt",
        *,
        name: str,
        names: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        domain_id: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__("", name=name, **kwargs)
        from erobs_bt.ros.client.client import ErobsBtClient  # rclpy only when a device is made

        self.node.put(node)
        self.timeout = timeout
        self._client = ErobsBtClient(node, names=names, client_name=f"bluesky_{name}", domain_id=domain_id)
        self._lock = threading.Lock()
        self._goal: _Goal | None = None
        self._paused_goal: _Goal | None = None
        self._replay_goal: _Goal | None = None
        self._pending_cancel: asyncio.Handle | None = None
        self._boundary = threading.Condition()
        self._watch_node()

    # -- Movable -----------------------------------------------------------------------
    def set(self, value: str | os.PathLike[str], **kwargs: Any) -> Status:
        """Run a script: send it as a goal and return a Status that finishes with it.

        Args:
            value: the script, as a path or as JSON text (:func:`script_text`).

        Returns:
            A Status: finished on SUCCEEDED; failed with :class:`ScriptFailed` (aborted,
            cancelled, rejected) or :class:`NodeUnavailable`. When the RunEngine replays
            this ``set`` after a resume, the Status of the paused goal.

        Raises:
            FileNotFoundError, ValueError: ``value`` names no readable file.
        """
        text = script_text(value)
        with self._lock:
            replay, self._replay_goal = self._replay_goal, None
            if replay is not None and replay.text == text:
                _LOG.info("%s: RunEngine replay after resume; re-attached to the paused goal", self.name)
                return replay.status
            if self._goal is not None and not self._goal.status.done:
                raise RuntimeError(f"{self.name}: a script is still running on {self.node.get()}")
            goal = _Goal(text=text, status=Status(obj=self))
            self._goal = goal
        self.goal_status.put("SENDING")
        threading.Thread(target=self._submit, args=(goal,), name=f"{self.name}-submit", daemon=True).start()
        return goal.status

    def _submit(self, goal: _Goal) -> None:
        node = self.node.get()
        try:
            run = self._client.send(goal.text, timeout=self.timeout, on_feedback=self._feedback)
        except TimeoutError as exc:
            self._fail(
                goal,
                NodeUnavailable(
                    f"erobs_bt node {node} is not reachable ({exc}); check that it runs, that "
                    f"ROS_DOMAIN_ID ({self._client.domain_id}) and discovery "
                    f"(ROS_AUTOMATIC_DISCOVERY_RANGE={os.environ.get('ROS_AUTOMATIC_DISCOVERY_RANGE', '')}) "
                    "match the node's"
                ),
                status="UNREACHABLE",
            )
            return
        with goal.lock:
            goal.run = run
            cancel = goal.cancel_requested
        if not run.accepted:
            self._fail(goal, ScriptFailed("REJECTED", run.rejection, 0, 0), status="REJECTED")
            return
        self.goal_status.put("RUNNING")
        if cancel:
            self._cancel(goal)
        threading.Thread(
            target=self._await_result, args=(goal,), name=f"{self.name}-result", daemon=True
        ).start()

    def _await_result(self, goal: _Goal) -> None:
        result = goal.run.wait()
        self.goal_status.put(goal.run.status_name)
        self.completed_steps.put(int(result.completed_steps))
        self.total_steps.put(int(result.total_steps))
        self.error_message.put(str(result.error_message))
        self.error_code.put(str(result.error_code))
        gripper = self._client.grippers.latest()
        if gripper is not None:
            self.gripper.put(gripper)
        if result.success:
            self._finish(goal, None)
        else:
            self._finish(
                goal,
                ScriptFailed(
                    goal.run.status_name, result.error_message, result.completed_steps, result.total_steps
                ),
            )

    def _fail(self, goal: _Goal, exc: Exception, *, status: str) -> None:
        self.goal_status.put(status)
        self.error_message.put(str(exc))
        self.error_code.put(status)
        self._finish(goal, exc)

    def _finish(self, goal: _Goal, exc: Exception | None) -> None:
        if goal.status.done:
            return
        try:
            if exc is None:
                goal.status.set_finished()
            else:
                goal.status.set_exception(exc)
        except Exception:  # already completed by the other path (result vs. lost node)
            _LOG.debug("%s: status already completed", self.name, exc_info=True)
        self._notify_boundary()

    def _feedback(self, feedback: Any) -> None:
        """Feedback of the running goal (client spin thread): readings and unit starts."""
        goal = self._goal
        if feedback.cache_status:
            self.cache_status.put(str(feedback.cache_status))
        if feedback.current_gripper:
            self.gripper.put(str(feedback.current_gripper))
        if goal is None or feedback.unit_index == goal.unit_index:
            return
        goal.unit_index = int(feedback.unit_index)
        goal.units_started += 1
        self.unit.put(goal.unit_index)
        self.completed_steps.put(round(feedback.progress_percentage * feedback.total_steps / 100.0))
        self.total_steps.put(int(feedback.total_steps))
        self._notify_boundary()

    # -- the node going away ----------------------------------------------------------------
    def _watch_node(self) -> None:
        """Fail a running goal when the node's latched state publisher disappears."""

        def matched(count: int) -> None:
            goal = self._goal
            if count == 0 and goal is not None and not goal.status.done:
                self._fail(
                    goal,
                    NodeUnavailable(
                        f"erobs_bt node {self.node.get()} went away during the goal; the robot's state is "
                        "unknown: check the cell before the next script"
                    ),
                    status="NODE_LOST",
                )

        self._client.follow_presence(matched)

    # -- RunEngine hooks -------------------------------------------------------------------
    def stop(self, *, success: bool = False) -> None:
        """Cancel the running goal (at its next unit boundary; at once while paused).

        Called by the RunEngine on pause (then ``pause()`` follows at once and withdraws
        the cancel), on abort/stop/halt and at the end of every run (nothing runs then).
        Outside a RunEngine's event loop the cancel is sent at once.
        """
        goal = self._goal
        if goal is None or goal.status.done:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._cancel(goal)
            return
        with self._lock:
            if self._pending_cancel is None:
                self._pending_cancel = loop.call_soon(self._cancel_pending, goal)

    def _cancel_pending(self, goal: _Goal) -> None:
        with self._lock:
            self._pending_cancel = None
        self._cancel(goal)

    def _cancel(self, goal: _Goal) -> None:
        """Send the cancel request (on a thread: the RunEngine's loop must not wait on ROS)."""
        with goal.lock:
            goal.cancel_requested = True
            run = goal.run
        if run is None or goal.status.done:
            return  # not answered yet: _submit cancels once it is

        def send() -> None:
            try:
                run.cancel(self.timeout)
            except (TimeoutError, RuntimeError) as exc:
                _LOG.warning("%s: cancel not confirmed by %s: %s", self.name, self.node.get(), exc)
                return
            if not run.cancel_accepted:  # answered, but the goal is not listed as cancelling
                _LOG.warning(
                    "%s: %s refused the cancel: the goal had already finished (its result stands)",
                    self.name,
                    self.node.get(),
                )

        threading.Thread(target=send, name=f"{self.name}-cancel", daemon=True).start()

    def pause(self) -> None:
        """The RunEngine paused: withdraw its ``stop()``'s cancel and pause the robot at its
        next unit boundary (the node's ``~/pause``)."""
        with self._lock:
            if self._pending_cancel is not None:
                self._pending_cancel.cancel()
                self._pending_cancel = None
            goal = self._goal
        if goal is None or goal.status.done:
            return
        self._paused_goal = goal
        try:
            accepted, message = self._client.pause(self.timeout)
        except TimeoutError as exc:
            _LOG.warning("%s: pause not answered by %s: %s", self.name, self.node.get(), exc)
            return
        _LOG.info("%s: pause %s: %s", self.name, "accepted" if accepted else "refused", message)

    def resume(self) -> None:
        """The RunEngine resumes: resume the robot (once it is PAUSED at the boundary) and let a
        replayed ``set`` of the same script re-attach to the paused goal."""
        goal, self._paused_goal = self._paused_goal, None
        if goal is None:
            return
        with self._lock:
            self._replay_goal = goal
        if goal.status.done:
            return
        threading.Thread(
            target=self._resume_when_paused, args=(goal,), name=f"{self.name}-resume", daemon=True
        ).start()

    def _resume_when_paused(self, goal: _Goal) -> None:
        states = self._client.states
        latest = states.latest()
        # A pause requested mid-unit is COMPLETING_TASK until the boundary: wait for PAUSED.
        if latest is None or latest.state != "PAUSED":
            since = max(0, states.count - 1)
            reached = states.wait_for(
                lambda m: m.state in ("PAUSED", "IDLE", "FAULTED") or goal.status.done,
                timeout=24 * 3600.0,
                since=since,
            )
            if reached is None or reached.state != "PAUSED" or goal.status.done:
                return
        try:
            accepted, message = self._client.resume(self.timeout)
        except TimeoutError as exc:
            _LOG.warning("%s: resume not answered by %s: %s", self.name, self.node.get(), exc)
            return
        _LOG.info("%s: resume %s: %s", self.name, "accepted" if accepted else "refused", message)

    # -- unit boundaries (for run_script's checkpoints) --------------------------------------------
    def _notify_boundary(self) -> None:
        with self._boundary:
            self._boundary.notify_all()

    def next_unit_or_end(self, status: Status) -> Callable[[], Any]:
        """An awaitable factory for ``bps.wait_for``: done when the goal of ``status`` starts its
        next unit or ends. Each call of the factory waits for a new unit start."""

        async def wait() -> None:
            with self._lock:
                self._replay_goal = None  # a replayed set would have come before this
            goal = self._goal
            if goal is None or goal.status is not status or status.done:
                return
            seen = goal.units_started
            loop = asyncio.get_running_loop()
            future: asyncio.Future[None] = loop.create_future()

            def watch() -> None:
                with self._boundary:
                    self._boundary.wait_for(lambda: goal.units_started != seen or status.done)
                loop.call_soon_threadsafe(_resolve, future)

            threading.Thread(target=watch, name=f"{self.name}-boundary", daemon=True).start()
            await future

        return wait

    # -- lifecycle ---------------------------------------------------------------------------
    def destroy(self) -> None:
        """Close the ROS client (the device cannot be used after this)."""
        self._client.close()
        super().destroy()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def run_script(robot: ErobsRobot, script: str, *, md: Mapping[str, Any] | None = None) -> Any:
    """Run a robot script as a Bluesky run: start document, the result as one event, stop.

    The plan checkpoints at every unit start, so a deferred pause (``RE.request_pause(defer=True)``,
    a queue's deferred pause) takes effect there and the robot stops at the next unit
    boundary; resume continues the same goal. A failed goal fails the plan with
    :class:`ScriptFailed` (the run's exit status is ``fail``).

    Args:
        robot: the device.
        script: a path or JSON text.
        md: extra run metadata.

    Yields:
        Bluesky messages.
    """
    text = script_text(script)
    try:
        parsed = json.loads(text)
        tasks = len(parsed.get("tasks", [])) if isinstance(parsed, dict) else 0
    except json.JSONDecodeError:
        tasks = 0  # the node reports the error with its position
    metadata = {
        "plan_name": "run_script",
        "robot_node": robot.node.get(),
        "script": script if not str(script).lstrip().startswith("{") else "<inline JSON>",
        "script_tasks": tasks,
        **(md or {}),
    }

    @bpp.run_decorator(md=metadata)
    def inner() -> Any:
        group = f"{robot.name}-script"
        yield from bps.checkpoint()
        status = yield from bps.abs_set(robot, text, group=group)
        while not status.done:
            yield from bps.wait_for([robot.next_unit_or_end(status)])
            yield from bps.checkpoint()
        failure: BaseException | None = None
        try:
            yield from bps.wait(group=group)
        except Exception as exc:  # FailedStatus: record the result, then fail the plan
            failure = exc
        yield from bps.trigger_and_read([robot])
        if failure is not None:
            raise failure

    return (yield from inner())

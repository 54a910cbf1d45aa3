"""The node's goal server: the action servers and the Trigger services around the engine.

Like Nav2's ``BtActionServer`` around its tree engine, the server is a loop that admits a
goal, runs it on the orchestrator, reports its feedback and its result, and decides
nothing the orchestrator decides: admission (:meth:`Orchestrator.reserve`, the one rule,
its refusal logged as ``goal rejected: <reason>``), pause, resume, cancel, stop and the
fault reset are the orchestrator's; the server translates. One goal at a time, whichever
action it comes through (the native ``~/execute`` or EROBS's ``beambot_execution``).

Threading (the node spins a :class:`rclpy.executors.MultiThreadedExecutor`):

* the action servers live in a reentrant callback group, so goal requests, cancel
  requests and the execute callback of a running goal can all be served at once; the
  execute callback blocks its worker thread until the orchestrator's goal handle is done
  (an awaited rclpy future would make the executor poll the task in a busy loop);
* the cancel callback hands the cancel to the orchestrator at once
  (:meth:`Orchestrator.cancel` is thread-safe and non-blocking), so a cancel accepted
  before the goal finishes always ends it CANCELED; the execute callback reports
  CANCELED once rclpy has moved the goal to CANCELING (right after the callback
  returns; the action server says when it has, :class:`_ActionServer`), as the action
  protocol requires. The callback decides under the goal lock, the lock under which the
  goal's end sets the terminal status, so a cancel arriving as the goal ends is refused
  (never accepted and then SUCCEEDED);
* the Trigger services (pause, resume, reset_fault, clear_cache) and the
  ``~/reset_simulation`` Empty service share a mutually exclusive group, so they answer
  while a unit runs and never race each other; stop has a group of its own, so it is
  never queued behind another request.

Feedback is published off the goal thread (:class:`_FeedbackPump`). Status and code
agree: the action status is SUCCEEDED exactly when ``error_code`` is ``""``, CANCELED
exactly when it is ``CANCELED``, and ABORTED otherwise.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from erobs_bt_interfaces.action import ExecuteScript
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import CallbackGroup, MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import QoSProfile
from std_srvs.srv import Empty, Trigger

from erobs_bt.orchestrator import (
    Feedback,
    GoalHandle,
    GoalRejected,
    GoalStatus,
    Orchestrator,
    OrchestratorListener,
    Reply,
    Reservation,
    Result,
)
from erobs_bt.ros import convert
from erobs_bt.ros.node.nodelog import NodeLog
from erobs_bt.ros.node.runlogs import NodeRunLogs
from erobs_bt.ros.params import (
    FEEDBACK_DEPTH,
    RESET_SIMULATION_REFUSED,
    NodeSettings,
)
from erobs_bt.wording import count

__all__ = ["CANCELED_OUTSIDE_ROS", "SHUTDOWN_REASON", "GoalServer"]

#: ``error_code`` of a goal cancelled outside ROS (the live web view of ``erobs-bt serve``):
#: the action protocol reports CANCELED only after a cancel request, so it is ABORTED.
CANCELED_OUTSIDE_ROS = "CANCELED_OUTSIDE_ROS"

#: The reason a goal halted by the node's shutdown gives (``SHUTDOWN: node shutting down``).
SHUTDOWN_REASON = "node shutting down"


@dataclass(frozen=True)
class _GoalApi:
    """How one action API turns orchestrator values into its messages.

    ``publish``, when given, publishes a goal's feedback itself (goal handle, feedback),
    instead of ``goal_handle.publish_feedback(feedback(...))``.
    """

    name: str
    feedback: Callable[[Feedback], Any]
    result: Callable[[Result], Any]
    started: Callable[[Any], None] = lambda goal_handle: None
    ended: Callable[[Any], None] = lambda goal_handle: None
    publish: Callable[[Any, Feedback], None] | None = None


_NATIVE = _GoalApi("native", convert.feedback_to_msg, convert.result_to_msg)


class _SerializedFeedback:
    """Publishes an action's feedback as bytes encoded by erobs_bt, on the action's own
    feedback topic (``<resolved action name>/_action/feedback``, reliable and volatile as
    rclpy's action server publishes it), through a publisher of its own. Its history keeps
    :data:`~erobs_bt.ros.params.FEEDBACK_DEPTH` messages, not rclpy's 10: a reliable writer
    drops from a full history what a reader has not acknowledged yet.

    rclpy's ``ServerGoalHandle.publish_feedback`` builds the ``FeedbackMessage`` object and
    converts it, ~0.1 ms holding the GIL; encoding the bytes here
    (:func:`~erobs_bt.ros.convert.feedback_message_cdr`) and publishing them costs a fifth
    of that, and a goal of quick units publishes one feedback per unit. Action clients
    see the same topic, type and fields (they match feedback to goals by ``goal_id``).

    Args:
        node: the node of the action server.
        action_type: the action's type (its ``Impl.FeedbackMessage`` is the topic type).
        action_name: the action's name as given to the server (``~/execute``).
    """

    def __init__(self, node: Node, action_type: Any, action_name: str) -> None:
        topic = f"{node.resolve_topic_name(action_name)}/_action/feedback"
        self._publisher = node.create_publisher(
            action_type.Impl.FeedbackMessage, topic, QoSProfile(depth=FEEDBACK_DEPTH)
        )
        self._goal: Any = None
        self._uuid = b""

    def __call__(self, goal_handle: Any, feedback: Feedback) -> None:
        """Publish ``feedback`` of the goal of ``goal_handle`` (a ``ServerGoalHandle``)."""
        if goal_handle is not self._goal:
            self._goal, self._uuid = goal_handle, bytes(goal_handle.goal_id.uuid)
        self._publisher.publish(convert.feedback_message_cdr(self._uuid, feedback))


class _FeedbackPump:
    """Publishes action feedback off the goal thread, at most ``rate`` messages per second.

    The orchestrator reports several feedbacks per unit (started, cache decision, each
    phase, done). Publishing each one (about 0.1-0.2 ms of rclpy work apiece, holding the
    GIL, and as much again in every client) made a long script of quick units much slower
    through the node than in-process. The goal thread only queues (O(1)); this thread
    publishes. A newer feedback of the same goal replaces the queued one when
    :func:`~erobs_bt.ros.convert.feedback_supersedes` says it may (within one unit, except
    that a unit's ``HIT`` or ``MISS`` decision is never dropped; never across units, so a
    client sees every unit: one feedback per unit is what quick units still cost). While
    only one feedback is queued and the previous publication is less than ``1 / rate`` old,
    it waits (and may be replaced); the ones before a newer one that may not replace them
    are published at once. So feedback arrives at most ``rate`` times a second within a
    unit, plus each unit's last and the decisions, and :meth:`flush` (called before the
    result is sent) delivers the goal's last feedback without waiting for the spacing.
    (Published in batches instead, the last batch came as a burst just before the result.)

    Args:
        log_error: receives a message when publishing fails (never raised).
        rate: the most feedback messages per second within a unit [Hz], > 0.
        clock: monotonic time source [s].
    """

    def __init__(
        self,
        log_error: Callable[[str], None],
        *,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cond = threading.Condition()
        self._pending: deque[tuple[Any, _GoalApi, Feedback]] = deque()
        self._busy = False
        self._closed = False
        self._flushing = 0
        self._period = 1.0 / rate
        self._clock = clock
        self._last = -float("inf")
        self._log_error = log_error
        #: Feedback messages published so far.
        self.published = 0
        self._thread = threading.Thread(target=self._run, name="erobs_bt-feedback", daemon=True)
        self._thread.start()

    @staticmethod
    def _replaces(queued: tuple[Any, _GoalApi, Feedback], goal_handle: Any, feedback: Feedback) -> bool:
        """``feedback`` may take the place of the ``queued`` one (see the class docstring)."""
        return queued[0] is goal_handle and convert.feedback_supersedes(feedback, queued[2])

    def put(self, goal_handle: Any, api: _GoalApi, feedback: Feedback) -> None:
        """Queue ``feedback`` for ``goal_handle`` (O(1); it may replace the queued one)."""
        with self._cond:
            pending = self._pending
            if pending and self._replaces(pending[-1], goal_handle, feedback):
                pending[-1] = (goal_handle, api, feedback)
                return
            pending.append((goal_handle, api, feedback))
            self._cond.notify_all()

    def _all_due(self) -> bool:
        """Everything queued may go now: closing, flushing, or the spacing has passed."""
        return self._closed or self._flushing > 0 or self._clock() - self._last >= self._period

    def _due(self) -> bool:
        """Something queued may go now: all of it, or the ones before the newest."""
        return len(self._pending) > 1 or self._all_due()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._closed)
                if not self._pending:
                    return
                while not self._due():
                    self._cond.wait(max(0.0, self._period - (self._clock() - self._last)))
                # All of it, or all but the newest (it may still be replaced).
                keep = 0 if self._all_due() else 1
                batch = [self._pending.popleft() for _ in range(len(self._pending) - keep)]
                self._busy = True
                self._last = self._clock()
            for goal_handle, api, feedback in batch:
                try:
                    if goal_handle.is_active:
                        if api.publish is not None:
                            api.publish(goal_handle, feedback)
                        else:
                            goal_handle.publish_feedback(api.feedback(feedback))
                        self.published += 1
                except Exception as exc:  # a feedback never ends the node
                    self._log_error(f"feedback: {type(exc).__name__}: {exc}")
            with self._cond:
                self._busy = False
                if self._flushing:
                    self._cond.notify_all()

    def flush(self, timeout: float) -> None:
        """Publish everything queued so far now, and wait until it is (at most ``timeout`` [s])."""
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)
            finally:
                self._flushing -= 1

    def close(self) -> None:
        """Publish what is queued, then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(5.0)


class _ActionServer(ActionServer):  # type: ignore[type-arg]
    """rclpy's action server, saying when it has processed a cancel request.

    rclpy moves an accepted goal to CANCELING after the cancel callback has returned
    ACCEPT (in the callback's thread); ``processed`` is called after that, so a goal's
    execute callback can wait for the move on a condition instead of polling the status.

    Args:
        processed: called after each cancel request was processed (any thread).
    """

    def __init__(self, *args: Any, processed: Callable[[], None], **kwargs: Any) -> None:
        self._processed = processed
        super().__init__(*args, **kwargs)

    async def _execute_cancel_request(self, request_header_and_message: Any) -> None:
        try:
            await super()._execute_cancel_request(request_header_and_message)
        finally:
            self._processed()


class GoalServer(OrchestratorListener):
    """The node's actions and Trigger services around the orchestrator (module docstring).

    Why this class is long: one action's goal callbacks (goal, cancel, execute) and the Trigger services
    must agree on one goal's life with the orchestrator; the native and EROBS actions share them, so they
    stay together.

    Serves the native action ``~/execute`` (``ExecuteScript``) and the ``~/pause``,
    ``~/resume``, ``~/stop``, ``~/reset_fault`` and ``~/clear_cache`` Trigger services
    when ``native_api`` is on, and EROBS's ``beambot_execution`` (``MTCExecution``) when
    ``erobs`` is given. As an orchestrator listener it queues each goal's feedback for its
    action and logs each goal's end (``goal-3: SUCCEEDED (1/1 steps)``).

    Args:
        node: the node the servers belong to.
        orchestrator: the engine's orchestrator.
        settings: the node's parameters (``native_api``, ``feedback_rate``,
            ``shutdown_timeout``).
        log: the node's log.
        closing: set by :meth:`close` (shared with the publisher bridge).
        run_logs: the goal run logs (told each goal's text before it is submitted), or ``None``.
        erobs: EROBS's API (:class:`erobs_bt.ros.node.erobs_api.ErobsApi`), or ``None``.
        service_group: the callback group of the Trigger services but stop.
        final_snapshot: ``(goal_id, root)``: send a goal's last tree snapshot (called as the
            goal ends, before its result).
    """

    def __init__(
        self,
        node: Node,
        orchestrator: Orchestrator,
        *,
        settings: NodeSettings,
        log: NodeLog,
        closing: threading.Event,
        run_logs: NodeRunLogs | None,
        erobs: Any,
        service_group: CallbackGroup,
        final_snapshot: Callable[[str, Any], None],
    ) -> None:
        self._node = node
        self._orchestrator = orchestrator
        self._settings = settings
        self._log = log
        self._closing = closing
        self._run_logs = run_logs
        self._erobs = erobs
        self._service_group = service_group
        self._final_snapshot = final_snapshot
        self._goal_lock = threading.Lock()
        # Notified when a goal ends, when the node closes and when a cancel request has been
        # processed: what the execute callback waits for.
        self._changed = threading.Condition()
        self._no_execute = threading.Event()  # set while no execute callback runs
        self._no_execute.set()
        self._reservation: Reservation | None = None  # admitted, not submitted yet
        self._ros_goal: ServerGoalHandle[Any, Any, Any] | None = None
        self._ros_api: _GoalApi = _NATIVE
        self._handle: GoalHandle | None = None  # the orchestrator's handle of _ros_goal
        self._early_cancels: set[bytes] = set()  # cancelled before they were submitted
        self._ros_cancels: set[bytes] = set()  # goals whose cancel request this node accepted
        # (both hold keys of goals not ended yet only: a goal's end removes its key)
        self._executing: set[bytes] = set()  # goals whose execute callback runs (at most two)
        #: Called (on the goal's execute thread, with the orchestrator's goal id, ``""`` for a
        #: goal never submitted) after the goal ended and its final feedback and snapshot were
        #: sent, right before the action's terminal status is set; ``None``: nothing. For
        #: tests that hold a goal's end to put a cancel there (it must be refused).
        self.goal_end_gate: Callable[[str], None] | None = None
        self._last_result: Result | None = None
        self._feedback = _FeedbackPump(log.error, rate=settings.feedback_rate)
        self._action_group = ReentrantCallbackGroup()
        self.action_servers: list[ActionServer[Any, Any, Any]] = []
        self._trigger_services: list[Any] = []
        if settings.native_api:
            native = replace(_NATIVE, publish=_SerializedFeedback(node, ExecuteScript, "~/execute"))
            self._trigger_services = [
                node.create_service(Trigger, f"~/{key}", self._trigger(key, handler), callback_group=group)
                for key, (handler, group) in self._native_triggers().items()
            ]
            self._trigger_services.append(
                node.create_service(
                    Empty, "~/reset_simulation", self._reset_simulation, callback_group=self._service_group
                )
            )
            self.action_servers.append(self._action_server(ExecuteScript, "~/execute", native))
        if erobs is not None:
            api = _GoalApi(
                "erobs", erobs.feedback_msg, erobs.result_msg, erobs.goal_started, erobs.goal_ended
            )
            self.action_servers.append(self._action_server(erobs.action_type, erobs.action_name, api))

    @property
    def last_result(self) -> Result | None:
        """The result of the latest goal, or ``None``."""
        return self._last_result

    def close(self) -> bool:
        """Admit no more goals, halt the running one (it aborts ``SHUTDOWN: node shutting
        down``, running or paused alike) and stop the robot, then wait (at most
        ``shutdown_timeout``) for the execute callback to return, so no executor work is in
        flight when the executor shuts down.

        A goal accepted but not submitted yet never starts: the orchestrator refuses it
        (:meth:`Orchestrator.stop_admitting`) and it ends ABORTED ``SHUTDOWN``.

        Returns:
            True the first time; False (and nothing done) when closed already.
        """
        with self._goal_lock:
            if self._closing.is_set():
                return False
            self._closing.set()
            self._orchestrator.stop_admitting(SHUTDOWN_REASON)
        with self._changed:
            self._changed.notify_all()
        self._orchestrator.shutdown(self._settings.shutdown_timeout, reason=SHUTDOWN_REASON)
        self._no_execute.wait(self._settings.shutdown_timeout)
        return True

    def close_feedback(self) -> None:
        """Publish the feedback still queued, then stop the feedback thread."""
        self._feedback.close()

    # -- orchestrator listener ------------------------------------------------------------
    def feedback(self, goal_id: str, feedback: Feedback) -> None:
        """Queue ``feedback`` for the action goal running now (O(1), on the goal thread)."""
        with self._goal_lock:
            goal_handle, api = self._ros_goal, self._ros_api
        if goal_handle is not None:
            self._feedback.put(goal_handle, api, feedback)

    def finished(self, goal_id: str, result: Result) -> None:
        """Log the goal's end: INFO when it succeeded, WARN otherwise."""
        text = f"{goal_id}: {result.status.value} ({result.completed_steps}/{result.total_steps} steps)"
        if result.error_message:
            text += f": {result.error_message}"
        if result.success:
            self._log.info(text)
        else:
            self._log.warning(text)

    # -- construction helpers ---------------------------------------------------------------
    def _native_triggers(self) -> dict[str, tuple[Callable[[], Reply], Any]]:
        """The native Trigger services: key → (handler, callback group). Stop has a group
        of its own, so it is never queued behind another request."""
        stop_group = MutuallyExclusiveCallbackGroup()
        orchestrator = self._orchestrator
        return {
            "pause": (orchestrator.pause, self._service_group),
            "resume": (orchestrator.resume, self._service_group),
            "stop": (orchestrator.stop, stop_group),
            "reset_fault": (self._reset_fault_service, self._service_group),
            "clear_cache": (orchestrator.clear_cache, self._service_group),
        }

    def _reset_fault_service(self) -> Reply:
        """``~/reset_fault``: the orchestrator's reset, saying it came through the service
        (``erobs-bt reset-fault`` calls it; a Trigger request does not say who sent it)."""
        name = self._node.resolve_service_name("~/reset_fault", only_expand=True)
        return self._orchestrator.reset_fault(by=f"service {name}")

    def _reset_simulation(self, request: Empty.Request, response: Empty.Response) -> Empty.Response:
        """``~/reset_simulation`` (``std_srvs/srv/Empty``, Gazebo's name): the orchestrator's
        :meth:`~erobs_bt.orchestrator.Orchestrator.reset_simulation`. The response is empty,
        so the answer is the node's log line (:data:`~erobs_bt.ros.params.RESET_SIMULATION_DONE`,
        written by the publisher bridge for every reset, or the refusal logged here), on
        ``/rosout`` before the response is sent."""
        name = self._node.resolve_service_name("~/reset_simulation", only_expand=True)
        try:
            reply = self._orchestrator.reset_simulation(by=f"service {name}")
        except Exception as exc:  # answered, never left to end the executor
            self._log.error(f"reset_simulation: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            reply = Reply(False, f"reset refused: internal error: {type(exc).__name__}: {exc}")
        if not reply.success:
            self._log.warning(f"{RESET_SIMULATION_REFUSED}{reply.message}")
        return response

    def _action_server(self, action_type: Any, name: str, api: _GoalApi) -> ActionServer[Any, Any, Any]:
        return _ActionServer(
            self._node,
            action_type,
            name,
            execute_callback=lambda goal_handle: self._execute(goal_handle, api),
            goal_callback=self._on_goal,
            cancel_callback=self._on_cancel,
            callback_group=self._action_group,
            processed=self._notify,
        )

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _trigger(
        self, key: str, handler: Callable[[], Reply]
    ) -> Callable[[Trigger.Request, Trigger.Response], Trigger.Response]:
        def serve(request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
            try:
                reply = handler()
            except Exception as exc:  # answered, never left to end the executor
                self._log.error(f"{key}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
                reply = Reply(False, f"internal error in {key}: {type(exc).__name__}: {exc}")
            response.success = reply.success
            response.message = convert.ros_text(reply.message)
            # (a fault reset that succeeded is logged by the publisher bridge, with who asked)
            if key == "stop" or (key == "reset_fault" and not reply.success):
                self._log.warning(f"{key}: {reply.message}")
            return response

        return serve

    # -- action callbacks -------------------------------------------------------------------
    def _on_goal(self, request: Any) -> GoalResponse:
        """Goal callback: the orchestrator admits the goal (and holds its place until the
        execute callback submits it) or refuses it; the refusal is logged."""
        with self._goal_lock:
            try:
                self._reservation = self._orchestrator.reserve()
            except GoalRejected as exc:
                self._log.warning(f"goal rejected: {exc}")
                return GoalResponse.REJECT
            return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> CancelResponse:
        """Cancel callback: decide now, in this thread, whether the goal will end CANCELED.

        Waiting for the execute thread to forward the cancel could lose it: that thread may
        be starved while the goal thread plans, and a short last unit would finish first.
        The decision is made under the goal lock, the lock under which the goal's end sets
        its terminal status (:meth:`_end_goal`), so a cancel is either refused or the goal
        ends CANCELED, never accepted and then SUCCEEDED, whichever comes first:

        * the running goal: the orchestrator decides (accepted when it will end the goal
          CANCELED; refused once the goal has finished, also while its final feedback and
          snapshot are still being sent);
        * a goal accepted but not submitted yet: accepted (it ends CANCELED before it starts);
        * a goal that ended before it was submitted (an invalid request, the node shutting
          down) or whose terminal status is set: refused.

        rclpy answers a refused cancel with ``return_code`` 0 (``ERROR_NONE``) and the goal
        left out of ``goals_canceling``: clients read "accepted" as "listed"
        (:func:`erobs_bt.ros.client.client.cancel_accepted`).
        """
        key = _goal_key(goal_handle)
        goal_id = ""
        with self._goal_lock:
            current = self._ros_goal is goal_handle
            # Not submitted yet: its execute callback has not started, or has not submitted
            # it (a goal whose callback runs but was replaced as the node's goal is ending).
            pending = self._reservation is not None and (current or key not in self._executing)
            if not goal_handle.is_active:
                accepted, why = False, "the goal has already finished"
            elif current and self._handle is not None:
                goal_id = self._handle.goal_id
                reply = self._orchestrator.cancel(goal_id)
                accepted, why = reply.success, reply.message
            elif pending:  # one goal at a time: the reserved one
                self._early_cancels.add(key)
                accepted, why = True, "cancelled before start"
            else:
                accepted, why = False, "the goal has already finished"
            if accepted:
                self._ros_cancels.add(key)
        if goal_id or not accepted:
            name = goal_id or f"goal {key.hex()[:8]}"
            self._log.info(f"{name}: cancel {'requested' if accepted else 'refused'}: {why}")
        return CancelResponse.ACCEPT if accepted else CancelResponse.REJECT

    def _execute(self, goal_handle: ServerGoalHandle[Any, Any, Any], api: _GoalApi) -> Any:
        """Execute callback of either action: the same goal plumbing, the API's messages."""
        key = _goal_key(goal_handle)
        with self._goal_lock:
            self._ros_goal = goal_handle
            self._ros_api = api
            self._handle = None
            self._executing.add(key)
            self._no_execute.clear()
        api.started(goal_handle)
        try:
            return api.result(self._run_goal(goal_handle))
        finally:
            with self._goal_lock:  # (done by _end_goal, unless _run_goal raised: rclpy aborts it)
                if self._ros_goal is goal_handle:
                    self._ros_goal = None
                    self._handle = None
                self._ros_cancels.discard(key)
                self._early_cancels.discard(key)
                self._executing.discard(key)
            api.ended(goal_handle)
            self._no_execute.set()

    def _run_goal(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> Result:
        """Submit the goal with its reservation, wait for its end, send its last feedback and
        snapshot, then set the action's terminal status; returns the result as reported."""
        request = goal_handle.request
        key = _goal_key(goal_handle)
        handle: GoalHandle | None = None
        result: Result | None = None
        try:
            with self._goal_lock:
                reservation, self._reservation = self._reservation, None
                try:
                    if key in self._early_cancels or goal_handle.is_cancel_requested:
                        result = Result(GoalStatus.CANCELED, "cancelled before start", "CANCELED", 0, 0)
                    else:
                        if self._run_logs is not None and not self._closing.is_set():
                            self._run_logs.expect(request.full_json)
                        handle = self._orchestrator.submit(
                            request.full_json, dry_run=request.dry_run, reservation=reservation
                        )
                        self._handle = handle
                except GoalRejected as exc:  # SHUTDOWN while the node closes, else REJECTED
                    result = Result(GoalStatus.ABORTED, str(exc), exc.error_code, 0, 0)
                finally:
                    if reservation is not None:
                        reservation.release()
                    self._early_cancels.discard(key)
            if handle is not None and handle.script is None:
                self._log.warning(f"{handle.goal_id}: invalid script: {handle.wait().error_message}")
            elif handle is not None and handle.script is not None:
                mode = "preview" if request.dry_run else "execute"
                self._log.info(
                    f"{handle.goal_id}: accepted ({mode}, {count(len(handle.script.steps), 'step')}, "
                    f"{count(len(handle.units), 'unit')})"
                )
            if handle is not None:
                result = self._wait(handle)
                # Every feedback before the result, while the goal is still this node's (a
                # cancel arriving now is refused by the orchestrator: the goal has finished).
                self._feedback.flush(self._settings.shutdown_timeout)
        finally:
            if handle is not None:
                try:
                    self._final_snapshot(handle.goal_id, handle.root)
                except Exception as exc:  # the final snapshot never keeps a goal from ending
                    self._log.error(f"final snapshot: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        assert result is not None
        result = self._agreeing(goal_handle, result)
        self._last_result = result
        if self._erobs is not None:
            self._erobs.goal_finished(result, ran=handle is not None and handle.script is not None)
        gate = self.goal_end_gate
        if gate is not None:
            gate(handle.goal_id if handle is not None else "")
        self._end_goal(goal_handle, result)
        return result

    def _end_goal(self, goal_handle: ServerGoalHandle[Any, Any, Any], result: Result) -> None:
        """Set the action's terminal status of ``result``, under the goal lock (the lock of
        :meth:`_on_cancel`'s decision): the goal stops being this server's and its
        bookkeeping goes, in one step, so a cancel either came before (and the orchestrator
        refused it, or the result is CANCELED) or comes after (and sees a finished goal)."""
        key = _goal_key(goal_handle)
        with self._goal_lock:
            if self._ros_goal is goal_handle:
                self._ros_goal = None
                self._handle = None
            self._ros_cancels.discard(key)
            self._early_cancels.discard(key)
            if result.status is GoalStatus.SUCCEEDED:
                goal_handle.succeed()
            elif result.status is GoalStatus.CANCELED:
                goal_handle.canceled()
            else:
                goal_handle.abort()

    def _agreeing(self, goal_handle: ServerGoalHandle[Any, Any, Any], result: Result) -> Result:
        """The result as the action reports it: status and ``error_code`` agree.

        CANCELED is possible only from the action's CANCELING state. rclpy enters it right
        after the cancel callback returned ACCEPT (in the callback's thread), so a goal
        whose cancel this server accepted waits (at most ``shutdown_timeout``) until the
        action server says the request was processed; a goal cancelled outside ROS (the
        live view) cannot be CANCELED and is ABORTED with :data:`CANCELED_OUTSIDE_ROS`.
        """
        if result.status is not GoalStatus.CANCELED:
            return result
        with self._goal_lock:
            accepted_here = _goal_key(goal_handle) in self._ros_cancels
        timeout = self._settings.shutdown_timeout if accepted_here else 0.0
        with self._changed:
            if self._changed.wait_for(lambda: goal_handle.is_cancel_requested, timeout):
                return result
        return Result(
            GoalStatus.ABORTED,
            f"{result.error_message} (cancelled outside ROS; the action reports it ABORTED)",
            CANCELED_OUTSIDE_ROS,
            result.completed_steps,
            result.total_steps,
        )

    def _wait(self, handle: GoalHandle) -> Result:
        """Block until the goal ends. Once the node closes, the orchestrator's shutdown ends
        it; a goal that has not ended ``shutdown_timeout`` after that is reported ABORTED
        ``SHUTDOWN`` (the execute callback must return before the executor shuts down)."""
        handle.add_done_callback(lambda _result: self._notify())
        with self._changed:
            self._changed.wait_for(lambda: handle.done() or self._closing.is_set())
        timeout = self._settings.shutdown_timeout
        try:
            return handle.wait(None if handle.done() else timeout)
        except TimeoutError:
            total = len(handle.script.steps) if handle.script else 0
            return Result(
                GoalStatus.ABORTED,
                f"SHUTDOWN: {SHUTDOWN_REASON}; the goal did not end within {timeout:g} s",
                "SHUTDOWN",
                0,
                total,
            )


def _goal_key(goal_handle: ServerGoalHandle[Any, Any, Any]) -> bytes:
    """The goal's UUID (16 bytes), to recognise a goal across callbacks."""
    return bytes(goal_handle.goal_id.uuid)

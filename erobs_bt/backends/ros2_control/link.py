"""The ROS plumbing of the ROS-side drivers: their own rclpy context, node and executor
(:class:`RosLink`), and blocking waits for action goals and services.

Every call here blocks the calling thread (a worker of the motion stack), never the tree's
tick thread; the link's executor thread only records messages and sets events.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.backends.ros2_control.context import init_context

_LOG = logging.getLogger(__name__)
_T = TypeVar("_T")

#: The result codes of control_msgs/action/FollowJointTrajectory, by name (values from the type).
_FJT_ERRORS = (
    "SUCCESSFUL",
    "INVALID_GOAL",
    "INVALID_JOINTS",
    "OLD_HEADER_TIMESTAMP",
    "PATH_TOLERANCE_VIOLATED",
    "GOAL_TOLERANCE_VIOLATED",
)
#: How often a waiting call looks at the joint-state age and the server's presence [s].
_POLL = 0.05


def fjt_error_name(code: int) -> str:
    """``PATH_TOLERANCE_VIOLATED (-4)`` for a FollowJointTrajectory ``error_code``."""
    for name in _FJT_ERRORS:
        if getattr(FollowJointTrajectory.Result, name, None) == code:
            return f"{name} ({code})"
    return f"error code {code}"


#: The name of the ``ros2_control`` backend's own node (:class:`RosLink`).
LINK_NODE_NAME = "erobs_bt_ros2_control"


class RosLink:
    """The backend's own rclpy context, node and executor thread.

    Its own context keeps the backend independent of the process around it (the
    ``erobs_bt`` node, the CLI, a test), and its signal handlers off.

    Args:
        node_name: the node's name.
        namespace: the node's namespace (the ``erobs_bt`` node passes its own, so the link
            sits beside it: ``/cell2/erobs_bt_ros2_control``); ``None``: ``/``. The link's
            own context takes no command-line remaps
            (:func:`~erobs_bt.backends.ros2_control.context.init_context`).
        context: an initialised context to use (the caller shuts it down), or ``None``.
        domain_id: the ROS domain of its own context (ignored with ``context``); ``None``
            reads ``ROS_DOMAIN_ID`` from the environment now, as the node process does.
        start: start the executor thread now; ``False`` to create action clients first
            and then call :meth:`start`.
    """

    def __init__(
        self,
        node_name: str = LINK_NODE_NAME,
        *,
        namespace: str | None = None,
        context: Context | None = None,
        domain_id: int | None = None,
        start: bool = True,
    ) -> None:
        self._own_context = context is None
        if context is None:
            context = init_context(domain_id)
        self.context = context
        self.node = Node(node_name, context=context, namespace=namespace)
        self._name = node_name  # for messages, also after close()
        self.group = ReentrantCallbackGroup()
        # Single-threaded: every callback here only records a message or sets an event
        # (the waiting happens on the backend's worker threads), and one thread keeps each
        # round trip free of the thread-pool hand-offs of MultiThreadedExecutor.
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name=f"{node_name}-executor", daemon=True)
        self._started = False
        self._closed = False
        if start:
            self.start()

    def start(self) -> None:
        """Start spinning (idempotent).

        Create the link's action clients first (``start=False``, then this): rclpy's
        ``ActionClient`` joins the node's waitables before it is fully built, and an
        executor spinning meanwhile can fail on it (``'ActionClient' object has no attribute
        '_lock'``), which ends the spin thread: no callback, no joint state, ever again.
        """
        if not self._started:
            self._started = True
            self._thread.start()

    def _spin(self) -> None:
        # spin_once in a loop: close() stops the loop and joins this thread before the
        # executor is shut down, so no callback runs while its guard condition is destroyed.
        while not self._stop.is_set() and self.context.ok():
            self._executor.spin_once(timeout_sec=0.05)

    def run_in_executor(self, job: Callable[[], _T], timeout: float = 10.0) -> _T:
        """Run ``job`` in the executor's thread, between callbacks, and return its result: the
        way to create or destroy an action client while the link spins (rclpy's
        ``ActionClient`` must not be built while an executor waits on the node, see
        :meth:`start`). Runs ``job`` at once before :meth:`start` or from the executor thread.

        Raises:
            TimeoutError: the executor did not run it within ``timeout`` [s].
            Exception: whatever ``job`` raised.
        """
        spinner = self._thread if self._started and not self._closed else None
        return run_in_spin_thread(self._executor, spinner, job, timeout, who=self._name)

    def close(self) -> None:
        """Stop spinning, join the thread, then shut the executor down, destroy the node's
        action clients and servers, and destroy the node.

        The action clients and servers first: they are waitables, which rclpy's
        ``Node.destroy_node`` leaves alone (Jazzy and Kilted destroy its publishers,
        subscriptions, clients, services, timers and guard conditions only); a live one keeps
        the node's handle, so its DDS participant stayed in the domain after the close.
        """
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._started:
            self._thread.join(5.0)
        self._executor.shutdown()
        for waitable in list(self.node.waitables):
            destroy = getattr(waitable, "destroy", None)
            if callable(destroy):
                destroy()
        self.node.destroy_node()
        if self._own_context:
            self.context.try_shutdown()


def run_in_spin_thread(
    executor: Any,
    spinner: threading.Thread | None,
    job: Callable[[], _T],
    timeout: float = 10.0,
    *,
    who: str = "",
) -> _T:
    """Run ``job`` in ``spinner``, the thread that spins ``executor``, between two callbacks, and
    return its result. Runs it at once, here, when ``spinner`` is None, not alive (nothing
    spins yet, or any more) or is this thread.

    ``job``'s exception is taken in the executor's thread and raised here: rclpy's executor
    re-raises a failed task's exception out of ``spin_once``, which would end the spin thread.

    Raises:
        TimeoutError: the executor did not run it within ``timeout`` [s] (the job is then
            cancelled if it has not started).
        Exception: whatever ``job`` raised.
    """
    if spinner is None or not spinner.is_alive() or threading.current_thread() is spinner:
        return job()
    outcome: list[tuple[bool, Any]] = []

    def guarded() -> None:
        try:
            outcome.append((True, job()))
        except Exception as error:  # handed to the caller below
            outcome.append((False, error))

    task = executor.create_task(guarded)
    if not wait_future(task, timeout):
        task.cancel()
        raise TimeoutError(f"{who or 'rclpy'}: the executor did not run a job within {timeout:g} s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def wait_future(future: Any, timeout: float, *, poll: Callable[[], None] | None = None) -> bool:
    """Wait for an rclpy future, calling ``poll()`` every 50 ms (it may raise to give up).

    Returns:
        True when the future completed within ``timeout`` [s].
    """
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    deadline = time.monotonic() + timeout
    while not done.wait(min(_POLL, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            return future.done()  # type: ignore[no-any-return]
        if poll is not None:
            poll()
    return True


def wait_ready(is_ready: Callable[[], bool], timeout: float) -> bool:
    """Poll ``is_ready()`` every 20 ms for up to ``timeout`` [s] (rclpy's own waits poll at 4 Hz)."""
    deadline = time.monotonic() + timeout
    while not is_ready():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


class Goals:
    """The goal handles in flight of one action client, so a stop can cancel every one of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handles: dict[int, Any] = {}  # by id(): rclpy goal handles are not hashable
        self.generation = 0
        self.accepted = 0  # goals tracked so far (accepted by their server)

    def add(self, handle: Any) -> None:
        """Track ``handle`` (an accepted goal) until :meth:`discard`."""
        with self._lock:
            self._handles[id(handle)] = handle
            self.accepted += 1

    def discard(self, handle: Any) -> None:
        with self._lock:
            self._handles.pop(id(handle), None)

    def stop(self) -> int:
        """Cancel every goal in flight; returns how many."""
        with self._lock:
            self.generation += 1
            handles = list(self._handles.values())
        for handle in handles:
            handle.cancel_goal_async()
        return len(handles)

    def current(self) -> int:
        with self._lock:
            return self.generation


def run_action(
    client: ActionClient,
    goal: Any,
    *,
    what: str,
    timeouts: Mapping[str, float],
    result_timeout: float,
    goals: Goals,
    watchdog: Callable[[], None] | None = None,
    generation: int | None = None,
    cancel: Callable[[Any], None] | None = None,
    aborted: Callable[[Any], MotionError] | None = None,
    canceled_by_server: str = "",
) -> Any:
    """Send one action goal and wait for its result (in the calling thread).

    Args:
        client: the action client.
        goal: the goal message.
        what: names the goal in errors (``FollowJointTrajectory /scaled_…: trajectory of step 3``).
        timeouts: ``server`` and ``acceptance`` [s].
        result_timeout: [s] for the result after acceptance.
        goals: the registry a stop cancels through.
        generation: ``goals.current()`` when the caller committed to the goal (default:
            now); a stop after it cancels the goal, or keeps it from being sent.
        watchdog: called every 50 ms while waiting for the goal response and the result;
            raises to give up (an accepted goal is then cancelled).
        cancel: how this call cancels an accepted goal (a stop that came while it was being
            accepted, the watchdog, no result in time): ``cancel(handle)``; default
            ``handle.cancel_goal_async()`` (a server whose cancel does not stop the motion
            needs more, e.g. MoveIt's ExecuteTrajectory).
        aborted: the error of an aborted goal from its result message (default: ``goal
            aborted`` with the result's error code and text).
        canceled_by_server: appended to ``cancelled by the server`` when the server, not a
            stop, cancelled the goal (what that means for this server).

    Returns:
        The result message of a SUCCEEDED goal.

    Raises:
        MotionError: ``EXECUTION_FAILED`` (server unavailable, rejected, aborted, cancelled),
        ``TIMEOUT`` (no goal response within ``acceptance``, no result within ``result_timeout``).
    """
    if generation is None:
        generation = goals.current()
    if not wait_ready(client.server_is_ready, timeouts["server"]):
        raise MotionError(
            ErrorCode.EXECUTION_FAILED, f"{what}: action server unavailable (waited {timeouts['server']:g} s)"
        )
    if goals.current() != generation:
        raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: stopped by request (not sent)")
    sent = client.send_goal_async(goal)
    if not wait_future(sent, timeouts["acceptance"], poll=watchdog):
        raise MotionError(ErrorCode.TIMEOUT, f"{what}: goal acceptance over {timeouts['acceptance']:g} s")
    handle = sent.result()
    if handle is None or not handle.accepted:
        raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: goal rejected")
    goals.add(handle)
    if cancel is None:
        cancel = _cancel_goal
    try:
        if goals.current() != generation:
            cancel(handle)  # a stop arrived while the goal was being accepted
        result = handle.get_result_async()

        def poll() -> None:
            if watchdog is not None:
                try:
                    watchdog()
                except BaseException:
                    cancel(handle)
                    raise

        if not wait_future(result, result_timeout, poll=poll):
            cancel(handle)
            raise MotionError(ErrorCode.TIMEOUT, f"{what}: no result within {result_timeout:g} s")
    finally:
        goals.discard(handle)
    wrapped: Any = result.result()
    status = wrapped.status
    if status == GoalStatus.STATUS_SUCCEEDED:
        return wrapped.result
    if status == GoalStatus.STATUS_CANCELED:
        by = (
            "stopped by request"
            if goals.current() != generation
            else "cancelled by the server" + (f" ({canceled_by_server})" if canceled_by_server else "")
        )
        raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: {by}")
    if aborted is not None:
        raise aborted(wrapped.result)
    raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: goal aborted{_result_detail(wrapped.result)}")


def _cancel_goal(handle: Any) -> None:
    handle.cancel_goal_async()


def _result_detail(result: Any) -> str:
    code = getattr(result, "error_code", None)
    text = getattr(result, "error_string", "") or getattr(result, "message", "")
    parts = []
    if isinstance(code, int) and hasattr(result, "error_string"):
        parts.append(fjt_error_name(code))
    if text:
        parts.append(str(text))
    if getattr(result, "stalled", False):  # a gripper controller that does not allow stalling
        state = getattr(result, "state", None)
        at = (
            state.position[0]
            if state is not None and len(state.position)
            else getattr(result, "position", None)
        )
        parts.append("stalled" + (f" at position {float(at):g}" if at is not None else ""))
    return (": " + ": ".join(parts)) if parts else ""

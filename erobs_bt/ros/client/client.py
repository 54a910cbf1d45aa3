"""A client of a running ``erobs_bt`` node, for the CLI verbs and the integration tests.

:class:`ErobsBtClient` owns a private rclpy context and node and spins them on a
background thread, so its methods can block the caller (a click command, a test)
while callbacks keep arriving: goal responses, feedback, results, service replies
and the latched topics. Everything it sees is recorded, so a caller can wait for a
condition ("state became PAUSED", "a feedback with cache_status HIT arrived") with a
timeout instead of sleeping.

Cancel: the client cancels goals through the action's own cancel service. A
:class:`GoalRun` cancels its goal; :meth:`ErobsBtClient.cancel_all` sends the
protocol's "cancel all goals" request (zero goal id and zero stamp), which is how a
process that did not send the goal (``erobs-bt cancel``) stops whatever the node
runs. The server answers it with the goals it is cancelling, and the goal then ends
CANCELED at the next unit boundary. A cancel is accepted exactly when its goal is listed in
the answer's ``goals_canceling`` (:func:`cancel_accepted`): rclpy answers a cancel the node
refused (the goal had already finished) with ``return_code`` 0 and an empty list.

Exit: a client that was never closed (a Bluesky device in a user's script, which ends
without ``destroy()``) is closed when the interpreter exits (an ``atexit`` hook): its spin
thread is stopped and joined, its node destroyed and its context shut down while Python
still runs. Left to the interpreter's teardown, the DDS participant's threads were torn
down under a running spin thread and the process aborted (``terminate called without an
active exception``, exit 134) after a successful script.

Names: by default the node's own names (:func:`default_names`) under its fully qualified
name (``/erobs_bt``, ``/cell2/erobs_bt``); pass ``names`` when the node's names were
remapped. ``~/tree_snapshot`` sends a full tree and then deltas; :attr:`ErobsBtClient.trees`
holds the rebuilt full trees. ``~/reset_simulation`` (``std_srvs/srv/Empty``) answers with
the node's log line on ``/rosout`` (:meth:`ErobsBtClient.reset_simulation`), read as the
logger named after the node (``/cell2/erobs_bt`` → ``cell2.erobs_bt``). An endpoint that is
not discovered in time raises :class:`NodeUnreachable` with a hint at ``ROS_DOMAIN_ID`` and
the discovery range.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import uuid
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from action_msgs.msg import GoalInfo, GoalStatus, GoalStatusArray
from action_msgs.srv import CancelGoal
from erobs_bt_interfaces.action import ExecuteScript
from erobs_bt_interfaces.msg import ExecutionState, TreeSnapshot
from rcl_interfaces.msg import Log
from rclpy.action.client import ClientGoalHandle
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_action_status_default
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Empty, Trigger
from trajectory_msgs.msg import JointTrajectory
from unique_identifier_msgs.msg import UUID

from erobs_bt.backends.ros2_control.action_client import ActionClient
from erobs_bt.backends.ros2_control.context import init_context
from erobs_bt.goal import CANCEL_ACCEPTED
from erobs_bt.ros.params import (
    ENDPOINTS,
    FEEDBACK_DEPTH,
    RESET_SIMULATION_DONE,
    RESET_SIMULATION_REFUSED,
    SNAPSHOT_DEPTH,
)
from erobs_bt.ros.snapshots import SnapshotAssembler, TreeState
from erobs_bt.rosqos import latched_qos

_LOG = logging.getLogger(__name__)
#: No QoS event handlers on the client's subscriptions. rclpy's defaults (a warning on an
#: incompatible QoS or type) add two waitables per subscription, which every spin step
#: walks in Python; with one spin step per action feedback (about 1,000 a second on quick
#: units) they were a large part of the client's CPU.
_QUIET = SubscriptionEventCallbacks(use_default_callbacks=False)
T = TypeVar("T")

#: Names of the terminal action statuses (``action_msgs/GoalStatus``).
STATUS_NAMES: Mapping[int, str] = MappingProxyType(
    {
        GoalStatus.STATUS_UNKNOWN: "UNKNOWN",
        GoalStatus.STATUS_ACCEPTED: "ACCEPTED",
        GoalStatus.STATUS_EXECUTING: "EXECUTING",
        GoalStatus.STATUS_CANCELING: "CANCELING",
        GoalStatus.STATUS_SUCCEEDED: "SUCCEEDED",
        GoalStatus.STATUS_CANCELED: "CANCELED",
        GoalStatus.STATUS_ABORTED: "ABORTED",
    }
)

#: Names of ``action_msgs/srv/CancelGoal`` return codes.
CANCEL_CODES: Mapping[int, str] = MappingProxyType(
    {
        CancelGoal.Response.ERROR_NONE: "ERROR_NONE",
        CancelGoal.Response.ERROR_REJECTED: "ERROR_REJECTED",
        CancelGoal.Response.ERROR_UNKNOWN_GOAL_ID: "ERROR_UNKNOWN_GOAL_ID",
        CancelGoal.Response.ERROR_GOAL_TERMINATED: "ERROR_GOAL_TERMINATED",
    }
)


def cancel_accepted(response: Any, goal_uuid: bytes | None = None) -> bool:
    """Whether a ``CancelGoal`` answer accepted the cancel: the goal is listed.

    The ``return_code`` alone does not say it: rclpy answers a cancel its server's callback
    refused with ``ERROR_NONE`` (0) and the goal left out of ``goals_canceling`` (the
    ``erobs_bt`` node refuses a cancel once the goal has finished).

    Args:
        response: an ``action_msgs/srv/CancelGoal`` response.
        goal_uuid: the 16-byte UUID of the goal that was cancelled; ``None`` for the
            cancel-all request (accepted when any goal is listed).
    """
    if response.return_code != CancelGoal.Response.ERROR_NONE:
        return False
    listed = [bytes(info.goal_id.uuid) for info in response.goals_canceling]
    return bool(listed) if goal_uuid is None else bytes(goal_uuid) in listed


#: The node's native ``std_srvs/Trigger`` services, by key (:data:`erobs_bt.ros.params.ENDPOINTS`).
TRIGGER_SERVICES = ("pause", "resume", "stop", "reset_fault", "clear_cache")


def default_names(node: str = "/erobs_bt") -> dict[str, str]:
    """The fully qualified names of a node's endpoints (:data:`erobs_bt.ros.params.ENDPOINTS`).

    ``~/x`` names are under the node (``/cell2/erobs_bt/x``), the other relative names
    under its namespace (``/cell2/joint_states``, ``/cell2/beambot_execution``).

    Args:
        node: the node's fully qualified name.
    """
    base = "/" + node.strip("/")
    namespace = base.rsplit("/", 1)[0]
    return {
        e.key: f"{base}/{e.name[2:]}" if e.name.startswith("~/") else f"{namespace}/{e.name}"
        for e in ENDPOINTS
    }


class NodeUnreachable(TimeoutError):
    """No ``erobs_bt`` node answered: wrong name, another ROS domain, or no discovery."""


def unreachable(what: str, timeout: float, domain_id: int | None = None) -> NodeUnreachable:
    """The error for an endpoint not discovered within ``timeout``, with what to check.

    ``domain_id`` is the domain the client joined (default: ``ROS_DOMAIN_ID`` of the environment).
    """
    domain = str(domain_id) if domain_id is not None else os.environ.get("ROS_DOMAIN_ID", "0")
    scope = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    return NodeUnreachable(
        f"{what} not available within {timeout:g} s: is the node running, under this name, in "
        f"ROS_DOMAIN_ID={domain} with discovery range {scope}? (set ROS_DOMAIN_ID and "
        "ROS_AUTOMATIC_DISCOVERY_RANGE as the node's shell has them; `erobs-bt serve` prints both)"
    )


class Recorder(Generic[T]):
    """Messages received on one topic, with a way to wait for one that matches.

    Args:
        maxlen: how many of the latest messages to keep.
    """

    def __init__(self, maxlen: int = 10_000) -> None:
        self._items: deque[T] = deque(maxlen=maxlen)
        self._cond = threading.Condition()
        self.count = 0

    def add(self, item: T) -> None:
        with self._cond:
            self._items.append(item)
            self.count += 1
            self._cond.notify_all()

    def items(self) -> list[T]:
        """A copy of the kept messages, oldest first."""
        with self._cond:
            return list(self._items)

    def latest(self) -> T | None:
        with self._cond:
            return self._items[-1] if self._items else None

    def wait_for(self, predicate: Callable[[T], bool], timeout: float, *, since: int = 0) -> T | None:
        """Block until a message with ``predicate(msg)`` true has arrived.

        Args:
            predicate: the condition.
            timeout: [s] longest wait.
            since: only consider messages received after the first ``since`` ones
                (use :attr:`count` taken before an action).

        Returns:
            The first matching message, or ``None`` on timeout.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                skip = max(0, len(self._items) - (self.count - since))
                for index, item in enumerate(self._items):
                    if index >= skip and predicate(item):
                        return item
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)


def shows_state(tree: TreeState, state: Any) -> bool:
    """Whether a tree snapshot shows what an execution state describes.

    ``~/tree_snapshot`` is latched with a history (:data:`~erobs_bt.ros.params.SNAPSHOT_DEPTH`),
    and the node publishes snapshots only while someone subscribes (and each goal's final
    one): a new subscriber first receives whatever was published last, e.g. the running
    goal's *first* tree when nobody watched it since, then the current tree, which the node
    sends to every new subscriber. Only a snapshot taken after the state was entered, or
    the goal's final one, shows that state.

    Args:
        tree: a full snapshot (:attr:`ErobsBtClient.trees`).
        state: an ``ExecutionState`` message (``goal_id``, ``stamp``).

    Returns:
        True when the state names no goal; else when the tree is of that goal and is its
        final snapshot or was taken at or after ``state.stamp``. The node stamps states
        with its ROS clock and snapshots with wall time: the same clock unless the node
        runs on ``use_sim_time`` (then a caller waiting for this falls back to the newest
        tree after its timeout).
    """
    if not state.goal_id:
        return True
    if tree.goal_id != state.goal_id:
        return False
    return tree.final or tree.stamp >= state.stamp.sec + state.stamp.nanosec * 1e-9


@dataclass
class GoalRun:
    """One goal sent through :meth:`ErobsBtClient.send`.

    Attributes:
        accepted: the server accepted the goal.
        feedback: every feedback message received, in order.
        status: the final action status (``action_msgs/GoalStatus``), or ``None`` while running.
        result: the ``ExecuteScript.Result``, or ``None`` while running.
        rejection: why the goal was rejected (from the node's latched state), when it was.
        cancel_accepted: the answer to the latest :meth:`cancel`: True when the node accepted
            it (the goal ends CANCELED), False when it refused it (the goal had already
            finished), ``None`` before any cancel.
    """

    accepted: bool
    rejection: str = ""
    feedback: Recorder[Any] = field(default_factory=Recorder)
    status: int | None = None
    result: Any = None
    cancel_accepted: bool | None = None
    _goal_handle: Any = None
    _done: threading.Event = field(default_factory=threading.Event)

    @property
    def status_name(self) -> str:
        """``SUCCEEDED``, ``ABORTED``, ``CANCELED``, … (``REJECTED`` when not accepted)."""
        if not self.accepted:
            return "REJECTED"
        return STATUS_NAMES.get(self.status if self.status is not None else -1, "RUNNING")

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the result arrives.

        Returns:
            The ``ExecuteScript.Result``.

        Raises:
            TimeoutError: no result within ``timeout`` seconds.
            RuntimeError: the goal was rejected.
        """
        if not self.accepted:
            raise RuntimeError(f"goal was rejected: {self.rejection}")
        if not self._done.wait(timeout):
            raise TimeoutError(f"no result within {timeout} s")
        return self.result

    def done(self) -> bool:
        return self._done.is_set()

    def cancel(self, timeout: float = 5.0) -> Any:
        """Request cancellation of this goal.

        Returns:
            The ``action_msgs/srv/CancelGoal`` response; :attr:`cancel_accepted` says
            whether it accepted the cancel (:func:`cancel_accepted`).

        Raises:
            TimeoutError: no response within ``timeout`` seconds.
        """
        if self._goal_handle is None:
            raise RuntimeError("goal was not accepted; nothing to cancel")
        response = _wait_future(self._goal_handle.cancel_goal_async(), timeout, "cancel")
        self.cancel_accepted = cancel_accepted(response, bytes(self._goal_handle.goal_id.uuid))
        return response


def _wait_future(future: Any, timeout: float, what: str) -> Any:
    event = threading.Event()
    future.add_done_callback(lambda _f: event.set())
    if not event.wait(timeout):
        raise TimeoutError(f"{what}: no response within {timeout} s")
    return future.result()


class ErobsBtClient:
    """Talks to one ``erobs_bt`` node: goals, pause/resume/cancel/stop/reset_fault, latched state.

    Why this class has more than 25 methods: it is the client of every endpoint the node serves (one method
    per action or service: send, pause, resume, stop, reset_fault, clear_cache, reset_simulation, cancel,
    the planning scene, parameters), all on one private context and executor.

    Usable as a context manager; :meth:`close` shuts the private context down.

    Args:
        node: the server node's fully qualified name (names derive from it).
        names: endpoint names overriding :func:`default_names`.
        client_name: this client's node name (default ``erobs_bt_client_<random>``, unique so
            that several clients can share a graph).
        joint_states: also record ``/joint_states`` (off by default: 50 messages a second).
        domain_id: the ROS domain to join; ``None`` (the default, what the CLI uses) reads
            ``ROS_DOMAIN_ID`` from the environment once, now
            (:func:`erobs_bt.backends.ros2_control.context.init_context`).

    Attributes:
        states: every ``ExecutionState`` received.
        grippers: every gripper name received.
        snapshots: every ``TreeSnapshot`` received (a full tree, then deltas), in order.
        trees: the full trees rebuilt from them (:class:`~erobs_bt.ros.snapshots.TreeState`).
            Both are filled by a thread of their own (``erobs_bt-client-snapshots``) that
            deserialises what the spin thread took as bytes: a 1,000-unit tree's full
            snapshot takes about 0.1 s to decode, and on the spin thread it delayed every
            message behind it, the goal's result included. So they can lag the other
            recorders a little: wait on them (``wait_for``) rather than read them at once.
        previews: every preview ``JointTrajectory`` received.
        joint_states: ``JointState`` messages (only with ``joint_states=True``).
    """

    def __init__(
        self,
        node: str = "/erobs_bt",
        *,
        names: Mapping[str, str] | None = None,
        client_name: str | None = None,
        joint_states: bool = False,
        domain_id: int | None = None,
    ) -> None:
        self.names = {**default_names(node), **(names or {})}
        self.context = init_context(domain_id)
        #: The domain this client talks in (fixed for its lifetime).
        self.domain_id: int = self.context.get_domain_id()
        name = client_name or f"erobs_bt_client_{uuid.uuid4().hex[:8]}"
        self.node = Node(name, context=self.context, start_parameter_services=False)
        self.states: Recorder[Any] = Recorder()
        self.grippers: Recorder[str] = Recorder()
        #: ``~/docks``: what the docks hold (``1: hande, 2: empty, …``).
        self.docks: Recorder[str] = Recorder()
        self.snapshots: Recorder[Any] = Recorder()
        self.trees: Recorder[TreeState] = Recorder(maxlen=100)
        self._assembler = SnapshotAssembler()
        self.previews: Recorder[Any] = Recorder()
        self.joint_states: Recorder[Any] = Recorder(maxlen=1000)
        self._action: ActionClient = ActionClient(
            self.node,
            ExecuteScript,
            self.names["execute"],
            feedback_sub_qos_profile=QoSProfile(depth=FEEDBACK_DEPTH),
        )
        self._triggers: dict[str, Any] = {
            key: self.node.create_client(Trigger, self.names[key]) for key in TRIGGER_SERVICES
        }
        self._scene_clients: dict[str, Any] = {}  # the planning-scene services, at first use
        self._scene_lock = threading.Lock()
        self._cancel_all: Any = self.node.create_client(
            CancelGoal, f"{self.names['execute']}/_action/cancel_goal"
        )
        #: The action's ``GoalStatusArray`` messages (what :meth:`send` reads when a goal's
        #: accept response does not come: :meth:`_answer_of`).
        self.goal_statuses: Recorder[Any] = Recorder(maxlen=100)
        self.node.create_subscription(
            GoalStatusArray,
            f"{self.names['execute']}/_action/status",
            self.goal_statuses.add,
            qos_profile_action_status_default,
            event_callbacks=_QUIET,
        )
        self.node.create_subscription(
            ExecutionState,
            self.names["execution_state"],
            self.states.add,
            latched_qos(),
            event_callbacks=_QUIET,
        )
        self.node.create_subscription(
            String,
            self.names["current_gripper"],
            lambda m: self.grippers.add(m.data),
            latched_qos(),
            event_callbacks=_QUIET,
        )
        self.node.create_subscription(
            String,
            self.names["docks"],
            lambda m: self.docks.add(m.data),
            latched_qos(),
            event_callbacks=_QUIET,
        )
        self._raw_snapshots: deque[bytes | None] = deque()
        self._raw_arrived = threading.Condition()
        self.node.create_subscription(
            TreeSnapshot,
            self.names["tree_snapshot"],
            self._take_snapshot,
            latched_qos(SNAPSHOT_DEPTH),
            event_callbacks=_QUIET,
            raw=True,
        )
        self.node.create_subscription(
            JointTrajectory,
            self.names["preview_trajectory"],
            self.previews.add,
            latched_qos(),
            event_callbacks=_QUIET,
        )
        if joint_states:
            self.node.create_subscription(
                JointState, self.names["joint_states"], self.joint_states.add, 10, event_callbacks=_QUIET
            )
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._spinner = threading.Thread(target=self._spin, name="erobs_bt-client", daemon=True)
        self._decoder = threading.Thread(
            target=self._decode_snapshots, name="erobs_bt-client-snapshots", daemon=True
        )
        self._closed = False
        self._decoder.start()
        self._spinner.start()
        _OPEN.add(self)

    def _take_snapshot(self, data: bytes) -> None:
        """Subscription callback (spin thread): queue the serialised ``TreeSnapshot``."""
        with self._raw_arrived:
            self._raw_snapshots.append(data)
            self._raw_arrived.notify()

    def _decode_snapshots(self) -> None:
        """The snapshot thread: deserialise each queued ``TreeSnapshot`` in arrival order,
        record it and the tree it completes; ends at the ``None`` that :meth:`close` queues."""
        from rclpy.serialization import deserialize_message

        from erobs_bt.ros.convert import snapshot_from_msg

        while True:
            with self._raw_arrived:
                while not self._raw_snapshots:
                    self._raw_arrived.wait()
                data = self._raw_snapshots.popleft()
            if data is None:
                return
            try:
                msg = deserialize_message(data, TreeSnapshot)
                self.snapshots.add(msg)
                tree = self._assembler.add(snapshot_from_msg(msg))
            except Exception:  # one bad message must not end the recording
                _LOG.exception("could not decode a TreeSnapshot (%d bytes)", len(data))
                continue
            if tree is not None:
                self.trees.add(tree)

    def _spin(self) -> None:
        # spin_once in a loop rather than spin(): close() stops the loop and joins this
        # thread before shutting the executor down, so no callback is still running when
        # the executor destroys its guard condition.
        while not self._stop.is_set() and self.context.ok():
            self._executor.spin_once(timeout_sec=0.05)

    def __enter__(self) -> ErobsBtClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop spinning and shut the private context down (join before destroy). Idempotent."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        self._stop.set()
        self._spinner.join()
        with self._raw_arrived:  # after the spin thread: nothing is queued behind the None
            self._raw_snapshots.append(None)
            self._raw_arrived.notify()
        self._decoder.join()
        self._executor.shutdown()
        self._action.destroy()
        self.node.destroy_node()
        self.context.try_shutdown()

    # -- discovery -----------------------------------------------------------------
    def wait_for_server(self, timeout: float = 10.0) -> bool:
        """Wait until the action server and the Trigger services are discovered.

        Returns:
            True when all were found within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._action.server_is_ready() and all(c.service_is_ready() for c in self._triggers.values()):
                return True
            time.sleep(0.02)
        return False

    def wait_for_state_stream(self, timeout: float = 10.0) -> bool:
        """Wait until the node's latched ``~/execution_state`` has reached this client.

        The topic keeps one message (transient local, depth 1), so a subscription that is
        still being matched when a goal runs receives only that goal's last state. Once the
        latched state has arrived the node's writer knows this reader, and every later state
        (``RUNNING`` as well as ``IDLE``) is delivered. Call it before sending a goal whose
        states you follow.

        Returns:
            True when a state arrived within ``timeout`` seconds; False otherwise (also for a
            node started with ``native_api`` off, which publishes no states).
        """
        return self.states.wait_for(lambda _message: True, timeout) is not None

    # -- goals -----------------------------------------------------------------------
    def _answer_of(self, future: Any, goal_id: Any, timeout: float) -> Any:
        """The server's answer to a goal request: its ``ClientGoalHandle``.

        A response can be lost: the server answers a request from a client whose reply
        reader it has not matched yet (right after one of them started), and Fast DDS drops
        the answer. When none came within ``timeout`` but the action's status lists the goal,
        the server accepted it: the goal is adopted with a handle built from its id (feedback
        was registered under that id when it was sent; result and cancel requests name it).

        Raises:
            TimeoutError: no answer within ``timeout`` and the status does not list the goal
                (not received, or rejected).
        """
        try:
            return _wait_future(future, timeout, "goal request")
        except TimeoutError:
            wanted = bytes(goal_id.uuid)
            latest = self.goal_statuses.latest()
            listed = latest is not None and any(
                bytes(status.goal_info.goal_id.uuid) == wanted for status in latest.status_list
            )
            if not listed:
                raise
        _LOG.warning(
            "goal %s: the server's accept response did not arrive within %g s, but its status "
            "lists the goal: following it",
            wanted.hex(),
            timeout,
        )
        return ClientGoalHandle(
            self._action, goal_id, ExecuteScript.Impl.SendGoalService.Response(accepted=True)
        )

    def send(
        self,
        full_json: str,
        *,
        dry_run: bool = False,
        on_feedback: Callable[[Any], None] | None = None,
        timeout: float = 10.0,
    ) -> GoalRun:
        """Send a goal and wait for the server's accept/reject answer (not for the result).

        Args:
            full_json: the script text.
            dry_run: preview instead of execute.
            on_feedback: called with each ``ExecuteScript.Feedback`` (on the spin thread).
            timeout: [s] for the server to be discovered and to answer the goal request.

        Returns:
            The goal; ``run.wait()`` blocks for its result.

        Raises:
            TimeoutError: the action server is not available or did not answer (a lost
                answer to a goal the server accepted is recovered: :meth:`_answer_of`).
        """
        if not self._action.wait_for_server(timeout_sec=timeout):
            raise unreachable(f"action server {self.names['execute']}", timeout, self.domain_id)
        goal = ExecuteScript.Goal(full_json=full_json, dry_run=dry_run)
        run = GoalRun(accepted=False)

        def feedback(message: Any) -> None:
            run.feedback.add(message.feedback)
            if on_feedback is not None:
                on_feedback(message.feedback)

        goal_id = UUID(uuid=list(uuid.uuid4().bytes))
        goal_handle = self._answer_of(
            self._action.send_goal_async(goal, feedback_callback=feedback, goal_uuid=goal_id),
            goal_id,
            timeout,
        )
        run.accepted = bool(goal_handle.accepted)
        if not run.accepted:
            run.rejection = self._rejection_reason()
            run._done.set()
            return run
        run._goal_handle = goal_handle

        def on_result(future: Any) -> None:
            response = future.result()
            run.status = response.status
            run.result = response.result
            # Done after this spin step: rclpy's action client completes a result before it
            # runs the feedback callbacks it took with it, and the node publishes a goal's
            # last feedback just before its result; so wait() returns with that feedback
            # recorded, not before it.
            self._executor.create_task(run._done.set)

        goal_handle.get_result_async().add_done_callback(on_result)
        return run

    def _rejection_reason(self, timeout: float = 2.0) -> str:
        # The latched state may still be on its way to a client that has just started.
        state = self.states.latest() or self.states.wait_for(lambda _m: True, timeout)
        if state is None:
            return "rejected by the server (its state is unknown)"
        if state.state == "FAULTED":
            return f"orchestrator is FAULTED ({state.message}); reset the fault or restart"
        return f"the node is {state.state}: {state.message}".rstrip(": ")

    # -- services --------------------------------------------------------------------
    def trigger(self, key: str, timeout: float = 5.0) -> tuple[bool, str]:
        """Call a Trigger service (a key of :data:`TRIGGER_SERVICES`).

        Returns:
            ``(success, message)`` of the reply.

        Raises:
            TimeoutError: the service is not available or did not answer.
        """
        client = self._triggers[key]
        if not client.wait_for_service(timeout_sec=timeout):
            raise unreachable(f"service {self.names[key]}", timeout, self.domain_id)
        response = _wait_future(client.call_async(Trigger.Request()), timeout, key)
        return bool(response.success), str(response.message)

    def get_parameters(self, names: list[str], timeout: float = 5.0) -> dict[str, Any]:
        """The node's values of the parameters ``names`` (its ``~/get_parameters`` service,
        rclpy's own), as Python values.

        Raises:
            TimeoutError: the service is not available or did not answer.
            KeyError: the node has no parameter of one of the names.
        """
        from rcl_interfaces.msg import ParameterType
        from rcl_interfaces.srv import GetParameters
        from rclpy.parameter import parameter_value_to_python

        base = self.names["execute"].rsplit("/", 1)[0]  # the node's own name: ~/execute's parent
        service = f"{base}/get_parameters"
        client: Any = self.node.create_client(GetParameters, service)
        try:
            if not client.wait_for_service(timeout_sec=timeout):
                raise unreachable(f"service {service}", timeout, self.domain_id)
            request = GetParameters.Request(names=list(names))
            values = _wait_future(client.call_async(request), timeout, "get_parameters").values
        finally:
            self.node.destroy_client(client)
        out: dict[str, Any] = {}
        for name, value in zip(names, values, strict=True):
            if value.type == ParameterType.PARAMETER_NOT_SET:
                raise KeyError(f"{base} has no parameter {name}")
            out[name] = parameter_value_to_python(value)
        return out

    def _scene_client(self, key: str) -> Any:
        """The service client of a planning-scene service (made at its first use)."""
        from moveit_msgs.srv import ApplyPlanningScene, GetPlanningScene

        with self._scene_lock:
            if key not in self._scene_clients:
                kind = ApplyPlanningScene if key == "apply_planning_scene" else GetPlanningScene
                self._scene_clients[key] = self.node.create_client(kind, self.names[key])
            return self._scene_clients[key]

    def get_planning_scene(self, timeout: float = 5.0) -> Any:
        """The planning scene (``moveit_msgs/PlanningScene``) from ``get_planning_scene`` in the
        node's namespace: the node's live scene, or move_group's with ``backend: moveit``.

        Raises:
            TimeoutError: the service is not available or did not answer.
        """
        from moveit_msgs.srv import GetPlanningScene

        client = self._scene_client("get_planning_scene")
        if not client.wait_for_service(timeout_sec=timeout):
            raise unreachable(f"service {self.names['get_planning_scene']}", timeout, self.domain_id)
        return _wait_future(
            client.call_async(GetPlanningScene.Request()), timeout, "get_planning_scene"
        ).scene

    def apply_planning_scene(self, scene: Any, timeout: float = 5.0) -> bool:
        """Apply ``scene`` (a ``moveit_msgs/PlanningScene``, usually a diff) through
        ``apply_planning_scene`` in the node's namespace.

        Returns:
            The reply's ``success`` (false: refused; the server logs why).

        Raises:
            TimeoutError: the service is not available or did not answer.
        """
        from moveit_msgs.srv import ApplyPlanningScene

        client = self._scene_client("apply_planning_scene")
        if not client.wait_for_service(timeout_sec=timeout):
            raise unreachable(f"service {self.names['apply_planning_scene']}", timeout, self.domain_id)
        request = ApplyPlanningScene.Request(scene=scene)
        return bool(_wait_future(client.call_async(request), timeout, "apply_planning_scene").success)

    def pause(self, timeout: float = 5.0) -> tuple[bool, str]:
        """Request a pause at the next unit boundary."""
        return self.trigger("pause", timeout)

    def resume(self, timeout: float = 5.0) -> tuple[bool, str]:
        """Resume a paused goal."""
        return self.trigger("resume", timeout)

    def stop(self, timeout: float = 5.0) -> tuple[bool, str]:
        """Stop now: halt the motion at once and abort the goal (``STOPPED``)."""
        return self.trigger("stop", timeout)

    def reset_fault(self, timeout: float = 5.0) -> tuple[bool, str]:
        """Clear FAULTED (refused when the node is not faulted)."""
        return self.trigger("reset_fault", timeout)

    def clear_cache(self, timeout: float = 5.0) -> tuple[bool, str]:
        """Drop the node's cached plans."""
        return self.trigger("clear_cache", timeout)

    def reset_simulation(self, timeout: float = 5.0) -> tuple[bool, str]:
        """Call ``~/reset_simulation`` (``std_srvs/srv/Empty``) and read the node's answer.

        The response is empty, so the answer is the node's log line on ``/rosout``
        (:data:`~erobs_bt.ros.params.RESET_SIMULATION_DONE`): its INFO line for a reset this
        service made, or its WARN line for a refusal, stamped after the call was sent (the
        node's clock: same host, or synchronised clocks). The node writes it before it
        answers; it is read from ``/rosout``'s transient-local history, so a late match
        loses nothing.

        Returns:
            ``(success, message)``: ``(True, "simulation reset: <what the cell is>")`` or
            ``(False, "reset refused: <why>")``.

        Raises:
            TimeoutError: the service is not available, did not answer, or no answer line
                arrived within ``timeout`` (a node whose ``/rosout`` is off).
        """
        service = self.names["reset_simulation"]
        logger = service.rsplit("/", 1)[0].strip("/").replace("/", ".")
        done = f"{RESET_SIMULATION_DONE}service {service}: "
        lines: Recorder[Any] = Recorder(maxlen=1000)
        qos = QoSProfile(
            depth=1000, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        subscription = self.node.create_subscription(Log, "/rosout", lines.add, qos, event_callbacks=_QUIET)
        client: Any = self.node.create_client(Empty, service)
        try:
            if not client.wait_for_service(timeout_sec=timeout):
                raise unreachable(f"service {service}", timeout, self.domain_id)
            sent = time.time()
            _wait_future(client.call_async(Empty.Request()), timeout, "reset_simulation")

            def answer(line: Any) -> bool:
                stamp = line.stamp.sec + line.stamp.nanosec * 1e-9
                return (
                    line.name == logger
                    and stamp >= sent
                    and (line.msg.startswith(done) or line.msg.startswith(RESET_SIMULATION_REFUSED))
                )

            line = lines.wait_for(answer, timeout)
            if line is None:
                raise TimeoutError(
                    f"{service} answered, but its log line (/rosout, logger {logger}) did not arrive "
                    f"within {timeout:g} s: is the node's /rosout off?"
                )
            if line.msg.startswith(done):
                return True, "simulation reset: " + line.msg[len(done) :]
            return False, line.msg[len(RESET_SIMULATION_REFUSED) :]
        finally:
            self.node.destroy_client(client)
            self.node.destroy_subscription(subscription)

    def cancel_all(self, timeout: float = 5.0) -> Any:
        """Cancel every goal of the node (the action protocol's cancel-all request).

        Returns:
            The ``action_msgs/srv/CancelGoal`` response: ``return_code``
            (see :data:`CANCEL_CODES`) and ``goals_canceling``.

        Raises:
            TimeoutError: the action server is not available or did not answer.
        """
        if not self._cancel_all.wait_for_service(timeout_sec=timeout):
            raise unreachable(f"action server {self.names['execute']}", timeout, self.domain_id)
        request = CancelGoal.Request(goal_info=GoalInfo())
        return _wait_future(self._cancel_all.call_async(request), timeout, "cancel")

    def cancel_all_said(self, timeout: float = 5.0) -> tuple[Any, str]:
        """:meth:`cancel_all`, and what the node said the cancel will do.

        The action's cancel answer carries no text; the node's orchestrator says it as the
        message of the CANCELING state it publishes on ``~/execution_state`` before it
        answers (``cancel accepted: the goal ends after unit 3 (its motion runs to its end);
        …``, :meth:`erobs_bt.orchestrator.Orchestrator.cancel`). The latched state is awaited
        first, so the subscription is matched before the cancel is sent. A paused goal ends at
        once: its IDLE state may replace the CANCELING one on the latched topic (history 1),
        and its message (``goal-3 cancelled while paused``) is what is said then.

        Returns:
            The ``CancelGoal`` response (:func:`cancel_accepted`) and the message, ``""`` when
            the cancel was refused or no state came within ``timeout``.

        Raises:
            TimeoutError: the action server is not available or did not answer.
        """
        self.states.wait_for(lambda _m: True, timeout)
        since = self.states.count
        response = self.cancel_all(timeout)
        if not cancel_accepted(response):
            return response, ""
        said = self.states.wait_for(
            lambda m: str(m.message).startswith(CANCEL_ACCEPTED) or m.state == "IDLE", timeout, since=since
        )
        return response, str(said.message) if said is not None else ""

    # -- latched topics ---------------------------------------------------------------
    def wait_for_state(self, state: str, timeout: float = 10.0, *, since: int = 0) -> Any:
        """Block until an ``ExecutionState`` with ``state`` arrives (after ``since`` messages).

        Returns:
            The message, or ``None`` on timeout.
        """
        return self.states.wait_for(lambda m: m.state == state, timeout, since=since)

    def follow_presence(
        self, matched: Callable[[int], None], *, on_state: Callable[[Any], None] | None = None
    ) -> None:
        """Follow whether the node is there: its latched ``~/execution_state`` publisher
        matching this client or going away (ErobsRobot's rule for a node that died).

        A subscription of its own, so the callbacks run on the client's spin thread.

        Args:
            matched: called with the number of matched publishers (0: the node went away)
                each time it changes.
            on_state: called with each ``ExecutionState`` message, if given.
        """
        self.node.create_subscription(
            ExecutionState,
            self.names["execution_state"],
            on_state if on_state is not None else (lambda _message: None),
            latched_qos(),
            event_callbacks=SubscriptionEventCallbacks(matched=lambda info: matched(int(info.current_count))),
        )


#: Clients not closed yet, closed by :func:`_close_at_exit` (weak: a closed or collected
#: client leaves the set).
_OPEN: weakref.WeakSet[ErobsBtClient] = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    """At interpreter exit, close every client still open (spin thread joined, node
    destroyed, context shut down) before the interpreter and the DDS library tear down."""
    for client in list(_OPEN):
        try:
            client.close()
        except Exception:  # one client's failure must not leave the others open
            _LOG.exception("closing an erobs_bt client at exit failed")

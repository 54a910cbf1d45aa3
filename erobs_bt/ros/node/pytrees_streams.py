"""py_trees_ros snapshot streams, so py-trees-tree-viewer and py-trees-tree-watcher see our tree.

The protocol (the documented names of py_trees_ros ``trees.py``, py_trees_ros 2.x):

* services ``~/snapshot_streams/open`` (``OpenSnapshotStream``: ``topic_name`` hint and
  ``parameters`` → the stream's ``topic_name``), ``~/snapshot_streams/close`` and
  ``~/snapshot_streams/reconfigure`` (→ ``result``), and
  ``~/introspection/snapshot_streams/services`` (the three names and types). Viewers find
  trees by listing the services whose type is
  ``py_trees_ros_interfaces/srv/OpenSnapshotStream``;
* each stream is a latched ``py_trees_ros_interfaces/msg/BehaviourTree`` topic:
  ``~/snapshot_streams/_snapshots_<N>`` for an empty hint, ``~/snapshot_streams/<hint>``
  for a relative one, ``~``-names expanded, absolute names as given;
* the default stream ``~/snapshots``, published while the parameter
  ``default_snapshot_stream`` is true, configured by ``default_snapshot_period``,
  ``default_snapshot_blackboard_data`` and ``default_snapshot_blackboard_activity``
  (changeable at run time with ``set_parameters``);
* a stream publishes when the tree changed (``changed = true``) and, when its
  ``snapshot_period`` is finite, republishes the unchanged tree every period
  (``changed = false``); a new stream gets the current tree at once (the running goal's,
  paused or not, else the last goal's final tree), whoever watched before.

Closing a stream destroys its publisher from the close service's callback while the
executor's other threads build wait sets. A publisher with QoS event handlers (rclpy gives
every publisher one by default, for incompatible QoS) is in those wait sets, and destroying
it there fails the executor (``InvalidHandle: cannot use Destroyable because destruction
was requested``): stream publishers are created without event handlers, so no wait set
ever holds them and they can be destroyed from any thread.

Behaviours are converted as py_trees_ros converts them: UUIDs (``own_id``,
``parent_id``, ``child_ids``, ``current_child_id``, ``tip_id``; zero UUID for none),
``class_name`` ``module.Class``, ``type`` from the class (SEQUENCE, SELECTOR, PARALLEL,
DECORATOR, BEHAVIOUR), ``additional_detail`` ``WithMemory`` for memory composites,
statuses 1–4, ``is_active`` on the path from the root to the tip. Names are sent as
:func:`~erobs_bt.viz.render.drawable_name` gives them (no ``:``, which Graphviz reads as
a node's port: ``py-trees-tree-watcher --dot-graph`` uses names as node ids). Units (the root's
children that hold a unit's subtree) are ``BLACKBOX_LEVEL_BIG_PICTURE`` so a viewer can
collapse a long script to its units. With ``blackboard_data`` the goal context (goal id,
unit, cache key digest, cache status, fault) goes into ``blackboard_on_visited_path`` as
key/values; erobs_bt keeps per-goal state in a typed context object, not in py_trees'
blackboard, so there is no blackboard activity to report. ``statistics`` are the goal's
tick timing (:class:`~erobs_bt.goal.TickStatistics`: tick count, the last tick's start,
durations and intervals with their means and variances, in seconds).

Blackboard streams (what ``py-trees-blackboard-watcher`` uses, py_trees_ros 2.x
``blackboard.py``): :class:`BlackboardStreams` serves ``~/blackboard_streams/get_variables``
(``GetBlackboardVariables`` → ``variables``), ``~/blackboard_streams/open``
(``OpenBlackboardStream``: ``variables``, ``filter_on_visited_path``,
``with_activity_stream`` → the stream's ``topic``, ``~/blackboard_streams/_watcher_<N>``)
and ``~/blackboard_streams/close`` (``CloseBlackboardStream``: ``topic_name`` → ``result``).
The watcher finds them by their types. The variables are the goal context's keys (the
same ``/goal_id``, ``/state``, ``/unit``, … as ``blackboard_on_visited_path``); a stream is a
latched ``std_msgs/String`` that carries the chosen keys, one ``name: value`` line each,
whenever one of their values changed and someone subscribes (its first subscriber gets
the current values).

Cost: a ``BehaviourTree`` message holds the whole tree, so one publication is linear in
its size. The messages of a goal's behaviours are built once (from the
:class:`~erobs_bt.ros.snapshots.TreeTracker` the ``~/tree_snapshot`` throttle keeps) and
only the behaviours whose state changed are updated; publications are at most
``snapshot_rate`` per second and spaced so that publishing takes at most
:data:`CPU_SHARE` of the time.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import py_trees
from diagnostic_msgs.msg import KeyValue as DiagnosticKeyValue
from py_trees_ros_interfaces.msg import Behaviour as BehaviourMsg
from py_trees_ros_interfaces.msg import BehaviourTree, ServiceDetails
from py_trees_ros_interfaces.srv import (
    CloseBlackboardStream,
    CloseSnapshotStream,
    GetBlackboardVariables,
    IntrospectServices,
    OpenBlackboardStream,
    OpenSnapshotStream,
    ReconfigureSnapshotStream,
)
from rclpy.callback_groups import CallbackGroup
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.expand_topic_name import expand_topic_name
from rclpy.node import Node
from rclpy.time import Time
from std_msgs.msg import String
from unique_identifier_msgs.msg import UUID

from erobs_bt.goal import TickTimes
from erobs_bt.ros.snapshots import BehaviourState, TreeTracker
from erobs_bt.rosqos import latched_qos
from erobs_bt.tree.compile import collector_paused
from erobs_bt.viz.render import drawable_name

#: Largest fraction of the time spent publishing snapshot streams (spacing of publications).
CPU_SHARE = 0.05

_STATUS = {"INVALID": 1, "RUNNING": 2, "SUCCESS": 3, "FAILURE": 4}
_ZERO = UUID()
_BIG_PICTURE = int(BehaviourMsg.BLACKBOX_LEVEL_BIG_PICTURE)
_NOT_A_BLACKBOX = int(BehaviourMsg.BLACKBOX_LEVEL_NOT_A_BLACKBOX)


@dataclass
class StreamParameters:
    """``SnapshotStreamParameters``: ``snapshot_period`` [s] (``inf``: only on change),
    ``blackboard_data``, ``blackboard_activity``."""

    snapshot_period: float = math.inf
    blackboard_data: bool = False
    blackboard_activity: bool = False

    @staticmethod
    def from_msg(msg: Any) -> StreamParameters:
        period = float(msg.snapshot_period)
        return StreamParameters(
            period if period > 0 else math.inf, bool(msg.blackboard_data), bool(msg.blackboard_activity)
        )


def uuid_msg(text: str) -> UUID:
    """``unique_identifier_msgs/UUID`` of a UUID's text form."""
    return UUID(uuid=list(uuid.UUID(text).bytes))


def uuid_msgs(values: Sequence[uuid.UUID]) -> list[UUID]:
    """``unique_identifier_msgs/UUID`` of each UUID (its 16 bytes as one row of a numpy
    array: the message's own fast path, no per-byte check)."""
    if not values:
        return []
    raw = bytearray(b"".join([v.int.to_bytes(16, "big") for v in values]))
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(len(values), 16)
    return [UUID(uuid=row) for row in rows]


def behaviour_type(behaviour: py_trees.behaviour.Behaviour) -> int:
    """The ``Behaviour.type`` constant of a behaviour's class."""
    kind = _TYPES.get(type(behaviour))
    if kind is None:
        kind = _TYPES[type(behaviour)] = _type_of(behaviour)
    return kind


_TYPES: dict[type, int] = {}


def _type_of(behaviour: py_trees.behaviour.Behaviour) -> int:
    if isinstance(behaviour, py_trees.composites.Sequence):
        return int(BehaviourMsg.SEQUENCE)
    if isinstance(behaviour, py_trees.composites.Selector):
        return int(BehaviourMsg.SELECTOR)
    if isinstance(behaviour, py_trees.composites.Parallel):
        return int(BehaviourMsg.PARALLEL)
    if isinstance(behaviour, py_trees.decorators.Decorator):
        return int(BehaviourMsg.DECORATOR)
    return int(BehaviourMsg.BEHAVIOUR)


#: ``Behaviour``'s fields, and whether its rosidl class keeps each in the slot ``_<field>``
#: (what lets :func:`behaviour_msg` fill them without the constructor).
_BEHAVIOUR_FIELDS = tuple(BehaviourMsg.get_fields_and_field_types())
_BEHAVIOUR_SLOTS = all(f"_{f}" in BehaviourMsg.__slots__ for f in (*_BEHAVIOUR_FIELDS, "check_fields"))


def behaviour_msg(**fields: Any) -> Any:
    """A ``py_trees_ros_interfaces/Behaviour`` of ``fields`` (of the right types; UUID
    fields given as ``UUID`` messages, sequences as lists), equal to
    ``Behaviour(**fields)``.

    The generated constructor costs tens of µs per message (it builds a default UUID for
    each UUID field even when one is given, and checks every field), which at thousands of
    behaviours per tree is more than the rest of a snapshot: the message is filled slot by
    slot instead, with field checks off (the values are built here, of the right types).
    Where the generated class does not keep its fields in ``_<field>`` slots, the
    constructor is used.
    """
    if not _BEHAVIOUR_SLOTS:
        return BehaviourMsg(**fields)
    msg = BehaviourMsg.__new__(BehaviourMsg)
    msg._check_fields = False
    values = {**_BEHAVIOUR_DEFAULTS, "child_ids": [], "blackboard_access": [], **fields}
    for name in _BEHAVIOUR_FIELDS:
        setattr(msg, f"_{name}", values[name])
    return msg


#: Every field's value when not given (the UUIDs: the zero UUID, shared, never changed in place).
_BEHAVIOUR_DEFAULTS: dict[str, Any] = {
    "name": "",
    "class_name": "",
    "own_id": _ZERO,
    "parent_id": _ZERO,
    "tip_id": _ZERO,
    "current_child_id": _ZERO,
    "type": 0,
    "additional_detail": "",
    "blackbox_level": 0,
    "status": 0,
    "message": "",
    "is_active": False,
}


def _detail(behaviour: py_trees.behaviour.Behaviour) -> str:
    if (
        isinstance(behaviour, py_trees.composites.Sequence | py_trees.composites.Selector)
        and behaviour.memory
    ):
        return "WithMemory"
    return ""


class TreeMessages:
    """The ``Behaviour`` messages of one goal's tree, built once and updated on change.

    Args:
        tracker: the goal's tracker (its behaviours, in pre-order, and their current states).
    """

    def __init__(self, tracker: TreeTracker) -> None:
        self.tracker = tracker
        with collector_paused():  # thousands of new objects, none in a cycle
            self._build()
        self._seen: list[BehaviourState | None] = [None] * len(tracker.states)
        self._tip_path: list[int] = []

    def _build(self) -> None:
        tracker = self.tracker
        nodes = tracker.behaviours
        states = tracker.states
        structure = tracker.structure
        root = nodes[0] if nodes else None
        self._uuids = uuid_msgs([b.id for b in nodes])
        self._children = structure.children
        self._parents = structure.parents
        self.messages: list[Any] = []
        for i, (b, s) in enumerate(zip(nodes, states, strict=True)):
            unit = b.parent is root and root is not None and bool(b.children)
            self.messages.append(
                behaviour_msg(
                    name=drawable_name(s.name),
                    class_name=f"{type(b).__module__}.{type(b).__name__}",
                    own_id=self._uuids[i],
                    parent_id=self._uuids[self._parents[i]] if self._parents[i] >= 0 else _ZERO,
                    tip_id=_ZERO,
                    current_child_id=_ZERO,
                    child_ids=[self._uuids[c] for c in self._children[i]],
                    type=behaviour_type(b),
                    additional_detail=_detail(b),
                    blackbox_level=_BIG_PICTURE if unit else _NOT_A_BLACKBOX,
                )
            )

    def refresh(self) -> list[Any]:
        """Bring the messages up to the tracker's current states; the message list.

        Cost: an identity check per behaviour, and a rewrite of the changed ones.
        """
        states = self.tracker.states
        messages, seen, parents = self.messages, self._seen, self._parents
        touched: set[int] = set()
        for i, s in enumerate(states):
            if s is seen[i]:
                continue
            seen[i] = s
            msg = messages[i]
            msg.status = _STATUS.get(s.status, 0)
            msg.message = s.message
            msg.is_active = s.is_active
            touched.add(i)
            if parents[i] >= 0:
                touched.add(parents[i])
        if not touched:
            return messages
        for i in touched:
            if self._children[i]:
                messages[i].current_child_id = self._current_child(i, states)
        for i in self._tip_path:
            messages[i].tip_id = _ZERO
        path = self.tracker.active_path
        for i in path[1:]:
            messages[i].tip_id = self._uuids[path[0]]
        self._tip_path = path
        return messages

    def _current_child(self, i: int, states: Sequence[BehaviourState]) -> Any:
        # The active child, else the last child that ran (py_trees keeps current_child
        # pointing at the last child ticked).
        chosen = -1
        for c in self._children[i]:
            if states[c].is_active:
                return self._uuids[c]
            if states[c].status != "INVALID":
                chosen = c
        return self._uuids[chosen] if chosen >= 0 else _ZERO


class _Stream:
    def __init__(self, topic: str, publisher: Any, parameters: StreamParameters) -> None:
        self.topic = topic
        self.publisher = publisher
        self.parameters = parameters
        self.last_time = -math.inf
        self.pending = False


class SnapshotStreams:
    """The py_trees_ros snapshot-stream services and streams of a node.

    Thread-safe. The node calls :meth:`update` with the tree tracker whenever a snapshot
    was taken (changed tree) and at each goal's end, :meth:`poll` from a timer (periodic
    republication, publications held back by the rate, and a new stream's first tree),
    :meth:`configure_default` when a ``default_snapshot_*`` parameter changes, and
    :meth:`close` on shutdown.

    Args:
        node: the node the services and topics belong to.
        context: gives the goal context as ``(key, value)`` pairs (blackboard data).
        rate: the most publications per second per stream [Hz].
        callback_group: for the three services.
        on_open: called when a stream opens (the node asks its snapshot throttle for a
            full snapshot of the running goal, which reaches the streams through
            :meth:`update`).
        statistics: the running (or last) goal's tick timing, for ``statistics``.
    """

    def __init__(
        self,
        node: Node,
        *,
        context: Callable[[], Sequence[tuple[str, str]]],
        rate: float,
        callback_group: CallbackGroup | None = None,
        on_open: Callable[[], None] = lambda: None,
        statistics: Callable[[], TickTimes] = TickTimes,
    ) -> None:
        self.node = node
        self._context = context
        self._on_open = on_open
        self._statistics = statistics
        self._min_period = 1.0 / rate
        self._lock = threading.Lock()
        self._streams: dict[str, _Stream] = {}
        self._counter = 0
        # The latest goal's tracker, kept with no stream open (a new stream gets its tree);
        # its messages are built only while a stream is open.
        self._tracker: TreeTracker | None = None
        self._messages: TreeMessages | None = None
        self._tree: Any = None
        self._next_allowed = -math.inf
        self.default_topic = self._expand("~/snapshots")
        self.published = 0
        self._services = [
            node.create_service(
                OpenSnapshotStream, "~/snapshot_streams/open", self._open, callback_group=callback_group
            ),
            node.create_service(
                CloseSnapshotStream, "~/snapshot_streams/close", self._close, callback_group=callback_group
            ),
            node.create_service(
                ReconfigureSnapshotStream,
                "~/snapshot_streams/reconfigure",
                self._reconfigure,
                callback_group=callback_group,
            ),
            node.create_service(
                IntrospectServices,
                "~/introspection/snapshot_streams/services",
                self._introspect,
                callback_group=callback_group,
            ),
        ]

    # -- stream management ----------------------------------------------------------------
    def _expand(self, name: str) -> str:
        return expand_topic_name(name, self.node.get_name(), self.node.get_namespace())

    def topic_for(self, hint: str) -> str:
        """The topic of a stream opened with ``hint`` (py_trees_ros's expansion rules)."""
        if not hint:
            topic = self._expand(f"~/snapshot_streams/_snapshots_{self._counter}")
            self._counter += 1
            return topic
        if hint.startswith("~"):
            return self._expand(hint)
        if not hint.startswith("/"):
            return self._expand(f"~/snapshot_streams/{hint}")
        return hint

    def _add(self, topic: str, parameters: StreamParameters) -> None:
        with self._lock:
            stream = self._streams.get(topic)
            if stream is not None:
                stream.parameters = parameters
                return
            # No QoS event handlers: never in a wait set, so safe to destroy from a callback
            # (see the module docstring).
            publisher = self.node.create_publisher(
                BehaviourTree,
                topic,
                latched_qos(),
                event_callbacks=PublisherEventCallbacks(use_default_callbacks=False),
            )
            stream = self._streams[topic] = _Stream(topic, publisher, parameters)
            # The current tree at the next poll, whatever happened before.
            stream.pending = self._tracker is not None
        self._on_open()

    def _remove(self, topic: str) -> bool:
        with self._lock:
            stream = self._streams.pop(topic, None)
        if stream is None:
            return False
        self.node.destroy_publisher(stream.publisher)
        return True

    def configure_default(self, enabled: bool, parameters: StreamParameters) -> None:
        """Open, reconfigure or close the default stream ``~/snapshots``."""
        if enabled:
            self._add(self.default_topic, parameters)
        else:
            self._remove(self.default_topic)

    def has_streams(self) -> bool:
        """True while at least one stream is open."""
        with self._lock:
            return bool(self._streams)

    def topics(self) -> list[str]:
        """The open streams' topics."""
        with self._lock:
            return sorted(self._streams)

    def _open(self, request: Any, response: Any) -> Any:
        topic = self.topic_for(request.topic_name)
        self._add(topic, StreamParameters.from_msg(request.parameters))
        response.topic_name = topic
        self.node.get_logger().info(f"snapshot stream opened: {topic}")
        return response

    def _close(self, request: Any, response: Any) -> Any:
        response.result = self._remove(request.topic_name)
        return response

    def _reconfigure(self, request: Any, response: Any) -> Any:
        with self._lock:
            stream = self._streams.get(request.topic_name)
            if stream is not None:
                stream.parameters = StreamParameters.from_msg(request.parameters)
        response.result = stream is not None
        return response

    def _introspect(self, request: Any, response: Any) -> Any:
        response.service_details = [
            ServiceDetails(
                service_name=self.node.resolve_service_name(f"~/snapshot_streams/{key}"), service_type=kind
            )
            for key, kind in (
                ("open", "py_trees_ros_interfaces/srv/OpenSnapshotStream"),
                ("close", "py_trees_ros_interfaces/srv/CloseSnapshotStream"),
                ("reconfigure", "py_trees_ros_interfaces/srv/ReconfigureSnapshotStream"),
            )
        ]
        return response

    # -- publishing ---------------------------------------------------------------------------
    def update(self, tracker: TreeTracker, *, final: bool = False) -> None:
        """The tree changed: mark every stream for publication, and publish what is due.

        Args:
            tracker: the goal's tracker, just refreshed (called under the snapshot lock).
            final: the goal ended; publish at once whatever the spacing.
        """
        with self._lock:
            self._tracker = tracker
            if not self._streams:
                self._messages = None
                return
            for stream in self._streams.values():
                stream.pending = True
            self._publish_due(force=final)

    def poll(self) -> None:
        """Publish held-back changes, new streams' first trees and periodic republications
        that are due (timer)."""
        with self._lock:
            if self._streams and self._tracker is not None:
                self._publish_due(force=False)

    def _publish_due(self, *, force: bool) -> None:
        now = time.monotonic()
        if not force and now < self._next_allowed:
            return
        due = [
            s
            for s in self._streams.values()
            if (s.pending and (force or now - s.last_time >= self._min_period))
            or now - s.last_time >= s.parameters.snapshot_period
        ]
        if not due:
            return
        began = time.perf_counter()
        assert self._tracker is not None
        if self._messages is None or self._messages.tracker is not self._tracker:
            self._messages = TreeMessages(self._tracker)
            self._tree = None
        changed_tree = any(s.pending for s in due)
        if changed_tree or self._tree is None:
            self._tree = self._build(blackboard=any(s.parameters.blackboard_data for s in due))
        for stream in due:
            tree = self._tree
            tree.changed = stream.pending
            if not stream.parameters.blackboard_data and tree.blackboard_on_visited_path:
                tree = BehaviourTree(
                    behaviours=tree.behaviours, changed=stream.pending, statistics=tree.statistics
                )
            stream.publisher.publish(tree)
            stream.pending = False
            stream.last_time = now
            self.published += 1
        cost = time.perf_counter() - began
        self._next_allowed = now + cost / CPU_SHARE

    def _build(self, *, blackboard: bool) -> Any:
        assert self._messages is not None
        tree = BehaviourTree(behaviours=self._messages.refresh(), changed=True)
        if blackboard:
            tree.blackboard_on_visited_path = [
                DiagnosticKeyValue(key=key, value=value) for key, value in self._context()
            ]
        times = self._statistics()
        statistics = tree.statistics
        statistics.count = times.count
        statistics.stamp = (
            Time(nanoseconds=round(times.stamp * 1e9)).to_msg()
            if times.count
            else self.node.get_clock().now().to_msg()
        )
        statistics.tick_duration = times.duration
        statistics.tick_duration_average = times.duration_mean
        statistics.tick_duration_variance = times.duration_variance
        statistics.tick_interval = times.interval
        statistics.tick_interval_average = times.interval_mean
        statistics.tick_interval_variance = times.interval_variance
        return tree

    def close(self) -> None:
        """Close every stream (the services go with the node)."""
        for topic in self.topics():
            self._remove(topic)


class _BlackboardView:
    """One blackboard stream: its topic, publisher and chosen variables (empty: all)."""

    def __init__(self, topic: str, publisher: Any, variables: Sequence[str], activity: bool) -> None:
        self.topic = topic
        self.publisher = publisher
        self.variables = tuple(dict.fromkeys(absolute_key(v) for v in variables if v.strip()))
        self.activity = activity
        self.last: str | None = None  # the text last published
        self.watched = False  # a subscriber has been seen

    def text(self, context: Sequence[tuple[str, str]]) -> str:
        """The chosen variables, one ``name: value`` line each (``-`` for an unknown one)."""
        values = dict(context)
        names = self.variables or tuple(values)
        width = max((len(name) for name in names), default=0)
        lines = [f"    {name:<{width}} : {values.get(name, '-')}" for name in sorted(names)]
        data = "\n".join(lines)
        if not self.activity:
            return data
        return (
            f"Blackboard Data\n{data}\nBlackboard Activity Stream\n"
            "    (none: erobs_bt keeps the goal context in a typed object, not in py_trees' blackboard)"
        )


def absolute_key(name: str) -> str:
    """A blackboard variable name as py_trees writes keys: absolute (``unit`` → ``/unit``)."""
    name = name.strip().strip(",[]")
    return name if name.startswith("/") else f"/{name}"


class BlackboardStreams:
    """The py_trees_ros blackboard-stream services of a node, over the goal context (see the
    module docstring for the names and types).

    Thread-safe. The node calls :meth:`poll` from a timer (publishes what changed to the
    streams that have a subscriber) and :meth:`close` on shutdown.

    A stream whose subscribers have all gone (the watcher exited: it does not call close)
    is closed at the next poll; one that never had a subscriber stays open until closed.
    ``filter_on_visited_path`` keeps every key (the goal context belongs to the goal that
    the tree visits); ``with_activity_stream`` adds an activity section, which is empty
    (erobs_bt writes no py_trees blackboard, so there is no activity to report).

    Args:
        node: the node the services and topics belong to.
        context: gives the goal context as ``(key, value)`` pairs (``/goal_id``, …).
        callback_group: for the three services.
    """

    def __init__(
        self,
        node: Node,
        *,
        context: Callable[[], Sequence[tuple[str, str]]],
        callback_group: CallbackGroup | None = None,
    ) -> None:
        self.node = node
        self._context = context
        self._lock = threading.Lock()
        self._views: dict[str, _BlackboardView] = {}
        self._counter = 0
        #: Messages published on the streams so far.
        self.published = 0
        self._services = [
            node.create_service(
                GetBlackboardVariables,
                "~/blackboard_streams/get_variables",
                self._get_variables,
                callback_group=callback_group,
            ),
            node.create_service(
                OpenBlackboardStream, "~/blackboard_streams/open", self._open, callback_group=callback_group
            ),
            node.create_service(
                CloseBlackboardStream,
                "~/blackboard_streams/close",
                self._close,
                callback_group=callback_group,
            ),
        ]

    def topics(self) -> list[str]:
        """The open streams' topics."""
        with self._lock:
            return sorted(self._views)

    def _get_variables(self, request: Any, response: Any) -> Any:
        response.variables = [key for key, _ in self._context()]
        return response

    def _open(self, request: Any, response: Any) -> Any:
        with self._lock:
            topic = expand_topic_name(
                f"~/blackboard_streams/_watcher_{self._counter}",
                self.node.get_name(),
                self.node.get_namespace(),
            )
            self._counter += 1
            # No QoS event handlers: never in a wait set, so safe to destroy from a callback
            # (see the module docstring).
            publisher = self.node.create_publisher(
                String,
                topic,
                latched_qos(),
                event_callbacks=PublisherEventCallbacks(use_default_callbacks=False),
            )
            self._views[topic] = _BlackboardView(
                topic, publisher, list(request.variables), bool(request.with_activity_stream)
            )
        response.topic = topic
        self.node.get_logger().info(f"blackboard stream opened: {topic}")
        return response

    def _remove(self, topic: str) -> bool:
        with self._lock:
            view = self._views.pop(topic, None)
        if view is None:
            return False
        self.node.destroy_publisher(view.publisher)
        return True

    def _close(self, request: Any, response: Any) -> Any:
        response.result = self._remove(request.topic_name)
        return response

    def poll(self) -> None:
        """Publish to each stream with a subscriber its variables when they changed since it
        last published (the first time: the current values); close the streams whose
        subscribers have gone."""
        gone: list[str] = []
        with self._lock:  # a stream closed meanwhile is out of the map before its publisher goes
            context: Sequence[tuple[str, str]] | None = None
            for view in self._views.values():
                if view.publisher.get_subscription_count() == 0:
                    if view.watched:
                        gone.append(view.topic)
                    continue
                view.watched = True
                if context is None:
                    context = self._context()
                text = view.text(context)
                if text != view.last:
                    view.publisher.publish(String(data=text))
                    view.last = text
                    self.published += 1
        for topic in gone:
            self._remove(topic)

    def close(self) -> None:
        """Close every stream (the services go with the node)."""
        for topic in self.topics():
            self._remove(topic)

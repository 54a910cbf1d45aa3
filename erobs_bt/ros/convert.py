"""Conversions between erobs_bt values and ROS messages, in one place.

Each function is a pure mapping (no node, no clock: time stamps are passed in), so the
field-by-field correspondence is reviewable here and testable without a ROS graph:

=================================  =============================================
erobs_bt value                     ROS message
=================================  =============================================
:class:`Feedback`                  ``erobs_bt_interfaces/action/ExecuteScript.Feedback``
:class:`Result`                    ``erobs_bt_interfaces/action/ExecuteScript.Result``
:class:`State` + progress          ``erobs_bt_interfaces/msg/ExecutionState``
:class:`TreeState`                 ``erobs_bt_interfaces/msg/TreeSnapshot`` (and back)
:class:`Solution` (arm segments)   ``trajectory_msgs/JointTrajectory``
joint positions, velocities        ``sensor_msgs/JointState``
=================================  =============================================

Units are unchanged across the boundary: joint positions in radians, velocities in
rad/s, accelerations in rad/s², times in seconds (``builtin_interfaces/Duration``,
:mod:`erobs_bt.rostime`).

Text: every string field goes through :func:`ros_text`, so any text that reaches a
message (a script's field echoed in an error, a behaviour's name) is valid UTF-8 with no
embedded NUL, whatever the goal contained.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import math
import operator
import struct
from collections.abc import Sequence
from typing import Any

from builtin_interfaces.msg import Time
from erobs_bt_interfaces.action import ExecuteScript
from erobs_bt_interfaces.msg import BehaviourStatus, ExecutionState, TreeSnapshot
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from erobs_bt.backends.base import ArmSegment, Solution
from erobs_bt.orchestrator import Feedback, Result, State
from erobs_bt.ros.cdr import serialize_exact
from erobs_bt.ros.snapshots import BehaviourState, TreeState, TreeStructure, TreeTracker
from erobs_bt.rostime import duration_msg, seconds, time_msg
from erobs_bt.tree.compile import collector_paused

_NANO = 1_000_000_000


def ros_text(text: object) -> str:
    """``text`` as a string any ROS message can carry: valid UTF-8, no NUL character.

    ROS strings are UTF-8 and NUL-terminated on the wire: a lone surrogate (what the JSON
    escape ``\\ud800`` decodes to) cannot be encoded, so rclpy raises
    ``UnicodeEncodeError`` when it serialises the message, and an embedded NUL cuts the
    string short (``Unknown gripper: ep``). A lone surrogate becomes the backslash escape
    ``\\ud800``, a NUL becomes ``\\x00``; valid text is returned unchanged.
    """
    value = text if isinstance(text, str) else str(text)
    if value.isascii() and "\x00" not in value:
        return value
    return value.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def feedback_to_msg(feedback: Feedback) -> ExecuteScript.Feedback:
    """The action feedback for an orchestrator :class:`Feedback` (same field names)."""
    return ExecuteScript.Feedback(
        current_step=feedback.current_step,
        total_steps=feedback.total_steps,
        current_action=ros_text(feedback.current_action),
        progress_percentage=float(feedback.progress_percentage),
        status_message=ros_text(feedback.status_message),
        current_gripper=ros_text(feedback.current_gripper),
        unit_index=feedback.unit_index,
        cache_status=ros_text(feedback.cache_status),
    )


def feedback_message_cdr(goal_uuid: bytes, feedback: Feedback) -> bytes:
    """The serialised ``ExecuteScript`` ``FeedbackMessage`` (the action's feedback topic)
    of ``feedback`` for the goal ``goal_uuid`` (its 16 bytes), encoded here.

    What ``serialize_message`` of the message built with :func:`feedback_to_msg` carries
    (a test deserialises both and compares), at a fraction of the cost: building the
    message object and converting it in rclpy took ~0.1 ms of the GIL per feedback, and a
    goal of quick units sends one per unit (the node publishes these bytes on the action's
    feedback topic, the ROS 2 bag records them). Padding bytes are zero here; rclpy leaves
    them unset, so the bytes may differ in padding only.

    Layout (CDR, little endian, after the 4-byte encapsulation header ``00 01 00 00``):
    ``goal_id.uuid`` (16 uint8), then the ``Feedback`` fields in their order
    (``erobs_bt_interfaces/action/ExecuteScript.action``): uint32 ``current_step``, uint32
    ``total_steps``, string ``current_action``, float32 ``progress_percentage``, string
    ``status_message``, string ``current_gripper``, uint32 ``unit_index``, string
    ``cache_status``; every field is 4-aligned, so each string but the last is padded to 4.

    Raises:
        ValueError: ``goal_uuid`` is not 16 bytes.
    """
    if len(goal_uuid) != 16:
        raise ValueError(f"a goal id is 16 bytes (got {len(goal_uuid)})")
    last = ros_text(feedback.cache_status).encode("utf-8")
    return b"".join(
        (
            b"\0\1\0\0",
            goal_uuid,
            struct.pack("<II", feedback.current_step, feedback.total_steps),
            _cdr_string(feedback.current_action),
            struct.pack("<f", feedback.progress_percentage),
            _cdr_string(feedback.status_message),
            _cdr_string(feedback.current_gripper),
            struct.pack("<II", feedback.unit_index, len(last) + 1),
            last,
            b"\0",
        )
    )


def feedback_supersedes(newer: Feedback, waiting: Feedback) -> bool:
    """``newer`` may take the place of ``waiting`` (of the same goal), not yet sent.

    The one rule for thinning feedback (the node's action feedback, the feedback a ROS 2
    bag records): a feedback is a progress report, so within a unit the latest one says all
    the waiting one said, except a cache decision: it replaces the waiting one unless that
    one carries the unit's cache decision and the newer one does not (it always does: a
    unit's decision stays in its later feedback). A later unit's feedback never replaces a
    waiting one: every unit's last feedback is sent, so a client sees every unit start and
    end (the Bluesky device acts at unit boundaries; EROBS's GUI shows each step).
    """
    if waiting.unit_index == newer.unit_index:
        return waiting.cache_status in ("", newer.cache_status)
    return False


def result_to_msg(result: Result) -> ExecuteScript.Result:
    """The action result for an orchestrator :class:`Result`.

    The goal's status (SUCCEEDED, ABORTED, CANCELED) travels as the action status,
    not in the result; ``success`` is true exactly for SUCCEEDED.
    """
    return ExecuteScript.Result(
        success=result.success,
        error_message=ros_text(result.error_message),
        error_code=ros_text(result.error_code),
        completed_steps=result.completed_steps,
        total_steps=result.total_steps,
    )


def state_to_msg(
    state: State,
    message: str,
    *,
    goal_id: str,
    current_step: int,
    total_steps: int,
    unit_index: int,
    stamp: Time,
) -> ExecutionState:
    """The latched ``ExecutionState``.

    Args:
        state: the orchestrator state.
        message: what changed (for FAULTED: the fatal error).
        goal_id: the current or last goal (``""`` before the first).
        current_step: 1-based first step of the running unit, 0 when none.
        total_steps: steps of the current or last goal.
        unit_index: 1-based running unit, 0 when none.
        stamp: when the state was entered.
    """
    return ExecutionState(
        stamp=stamp,
        state=state.value,
        goal_id=ros_text(goal_id),
        current_step=current_step,
        total_steps=total_steps,
        unit_index=unit_index,
        message=ros_text(message),
    )


def _behaviour_json(b: BehaviourState) -> dict[str, Any]:
    return {
        "id": b.id,
        "name": b.name,
        "type": b.type_name,
        "parent_id": b.parent_id,
        "status": b.status,
        "message": b.message,
        "is_active": b.is_active,
        "children": list(b.child_ids),
    }


def snapshot_json(state: TreeState) -> str:
    """The snapshot as compact JSON (the ``tree_json`` field of a full snapshot).

    Keys: ``goal_id``, ``state``, ``unit_index``, ``final``, ``full``, ``sequence``, ``tip_id``, ``stamp``
    [s since the epoch] and ``behaviours`` (pre-order; each with ``id``, ``name``,
    ``type``, ``parent_id``, ``status``, ``message``, ``is_active``, ``children``).
    """
    return json.dumps(_snapshot_document(state), separators=(",", ":"))


def _snapshot_document(state: TreeState) -> dict[str, Any]:
    return {
        "goal_id": state.goal_id,
        "state": state.root_status,
        "unit_index": state.unit_index,
        "final": state.final,
        "full": state.full,
        "sequence": state.sequence,
        "tip_id": state.tip_id,
        "stamp": state.stamp,
        "behaviours": [_behaviour_json(b) for b in state.behaviours],
    }


def snapshot_to_msg(state: TreeState, *, with_json: bool) -> TreeSnapshot:
    """A ``TreeSnapshot`` for a :class:`TreeState`.

    Args:
        state: the snapshot (full or a delta).
        with_json: also fill ``tree_json`` (:func:`snapshot_json`) when it is full.
    """
    return TreeSnapshot(
        stamp=time_msg(state.stamp),
        goal_id=ros_text(state.goal_id),
        state=ros_text(state.root_status),
        unit_index=state.unit_index,
        final=state.final,
        tip_id=ros_text(state.tip_id),
        delta=not state.full,
        sequence=state.sequence,
        behaviours=[
            BehaviourStatus(
                id=ros_text(b.id),
                name=ros_text(b.name),
                type=ros_text(b.type_name),
                parent_id=ros_text(b.parent_id),
                status=ros_text(b.status),
                message=ros_text(b.message),
                is_active=b.is_active,
            )
            for b in state.behaviours
        ],
        tree_json=snapshot_json(state) if with_json and state.full else "",
    )


_PACK_UINT32 = struct.Struct("<I").pack
#: A CDR string's NUL and the padding after it to 4 bytes, by its size (with the NUL) mod 4.
_NUL_PAD = (b"\0", b"\0\0\0\0", b"\0\0\0", b"\0\0")
#: A behaviour's (status, message, is_active): what changes during a goal.
_DYNAMIC_KEY = operator.itemgetter(4, 5, 7)
_STATE_NAME = operator.itemgetter(2)
_STATE_TYPE = operator.itemgetter(3)
_STATE_CHILDREN = operator.itemgetter(6)


def _cdr_string(text: str) -> bytes:
    """A CDR string (uint32 length with the NUL, UTF-8 bytes, NUL), padded to 4 bytes."""
    data = ros_text(text).encode("utf-8")
    size = len(data) + 1
    return _PACK_UINT32(size) + data + _NUL_PAD[size & 3]


def _cdr_strings(texts: Sequence[str]) -> list[bytes]:
    """:func:`_cdr_string` of each text; a text that repeats is encoded once."""
    known: dict[str, bytes] = {}
    distinct = list(dict.fromkeys(texts))
    joined = "".join(distinct)
    if joined.isascii() and "\0" not in joined:  # nothing for ros_text to change
        for text, data in zip(distinct, map(str.encode, distinct), strict=True):
            size = len(data) + 1
            known[text] = _PACK_UINT32(size) + data + _NUL_PAD[size & 3]
    else:
        known = dict(zip(distinct, map(_cdr_string, distinct), strict=True))
    return list(map(known.__getitem__, texts))


def _plain_json(text: str) -> bool:
    """``json.dumps(text)`` is ``text`` in quotes: printable ASCII with no quote or backslash."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def _json_strings(texts: Sequence[str]) -> list[str]:
    """``json.dumps`` of each text (a text with nothing to escape is only quoted)."""
    if _plain_json("".join(texts)):
        return [f'"{text}"' for text in texts]
    known = {text: f'"{text}"' if _plain_json(text) else json.dumps(text) for text in dict.fromkeys(texts)}
    return list(map(known.__getitem__, texts))


class _StaticParts:
    """The fixed serialised parts of each behaviour of a tree (:class:`TreeSnapshotEncoder`),
    as columns (one list per field, one entry per behaviour, pre-order): its id, name, type
    and parent as CDR; its id, name, type, parent and children as JSON values, built when
    first needed. A snapshot joins the columns (and the changing fields') entries in
    turn, so nothing is put together per behaviour.

    Args:
        structure: the tree's structure.
    """

    def __init__(self, structure: TreeStructure) -> None:
        self.structure = structure
        ids = structure.ids
        states = structure.states
        # id, name, type, parent_id: each a string padded to 4, so status starts aligned.
        # A parent's id is its parent's own id string; names and types repeat: each
        # distinct one is encoded once.
        if all(len(i) == 36 for i in ids) and "".join(ids).isascii():  # UUID text: 37 bytes with the NUL
            id_cdr = [b"%\0\0\0" + data + b"\0\0\0\0" for data in map(str.encode, ids)]
        else:
            id_cdr = list(map(_cdr_string, ids))
        parent_cdr = [_cdr_string("")]
        parent_cdr += map(id_cdr.__getitem__, structure.parents[1:])
        names = _cdr_strings(list(map(_STATE_NAME, states)))
        types = _cdr_strings(list(map(_STATE_TYPE, states)))
        self.cdr: tuple[list[bytes], ...] = (id_cdr, names, types, parent_cdr)
        self._json: tuple[list[str], ...] | None = None

    @property
    def json(self) -> tuple[list[str], ...]:
        """The JSON columns: ids, names, types, parent ids (ids unquoted: UUID text needs no
        escaping) and children arrays."""
        if self._json is None:
            structure = self.structure
            ids, states = structure.ids, structure.states
            parent_ids = [""]
            parent_ids += map(ids.__getitem__, structure.parents[1:])
            children = [
                '["' + '","'.join(child_ids) + '"]' if child_ids else "[]"
                for child_ids in map(_STATE_CHILDREN, states)
            ]
            names = _json_strings(list(map(_STATE_NAME, states)))
            types = _json_strings(list(map(_STATE_TYPE, states)))
            self._json = (ids, names, types, parent_ids, children)
        return self._json


class _DynamicCdr(dict[tuple[str, str, bool], bytes]):
    """The CDR of a behaviour's changing fields by ``(status, message, is_active)``: status,
    message (a string, then the bool right after its NUL), padded to 4 (a behaviour's fixed
    part is a multiple of 4 long, so this is its padding too). Built on first use."""

    def __missing__(self, key: tuple[str, str, bool]) -> bytes:
        status, message, is_active = key
        data = ros_text(message).encode("utf-8")
        body = _cdr_string(status) + _PACK_UINT32(len(data) + 1) + data + (b"\0\1" if is_active else b"\0\0")
        value = self[key] = body + b"\0" * (-len(body) % 4)
        return value


class _DynamicJson(dict[tuple[str, str, bool], str]):
    """A behaviour's JSON keys after ``children`` by ``(status, message, is_active)``:
    ``"status":…,"message":…,"is_active":…}``. Built on first use."""

    def __missing__(self, key: tuple[str, str, bool]) -> str:
        status, message, is_active = key
        text = json.dumps(message) if message else '""'
        active = "true" if is_active else "false"
        value = self[key] = f'"status":"{status}","message":{text},"is_active":{active}}}'
        return value


class TreeSnapshotEncoder:
    """Full ``TreeSnapshot`` messages of one goal's tree, serialised from kept parts.

    A full snapshot (the goal's first, one per new subscriber, the final one) lists every
    behaviour. Building it as a message (:func:`snapshot_to_msg`) makes one
    ``BehaviourStatus`` object per behaviour and rclpy then converts each one: at 1,000
    units (4,000 behaviours) that cost more CPU than running the goal's tree. This encoder
    joins kept bytes instead (CDR, little endian, as ``rclpy.serialization.serialize_message``
    writes them): each behaviour's fixed id, name, type and parent, encoded once per tree
    (shared by every encoder of it), and its changing status, message and ``is_active``,
    encoded once per distinct value (a few per goal) and looked up per behaviour by C-level
    maps, so a full snapshot runs no Python code per behaviour. The node publishes the
    bytes as they are (``Publisher.publish`` takes serialised messages). ``tree_json`` is
    joined the same way, one JSON object per behaviour.

    The bytes equal ``serialize_message(snapshot_to_msg(state, with_json=False))``, and
    with ``with_json`` the same message whose ``tree_json`` lists the same keys (a test
    checks both).

    Layout (``erobs_bt_interfaces/msg/TreeSnapshot``, ``BehaviourStatus``): the 4-byte
    encapsulation header ``00 01 00 00`` (CDR little endian), then the fields in order;
    numbers aligned to their size from the start of the payload, a string is a uint32
    length (with the NUL) followed by its bytes and the NUL, a sequence a uint32 count.

    Args:
        tracker: the goal's :class:`~erobs_bt.ros.snapshots.TreeTracker` (its ``states``
            are read; call :meth:`full` from the tracker's lock holder).
        dynamic: kept encodings of the changing fields, shared with the encoders of
            earlier goals (:class:`SnapshotSerializer`); new ones when not given.
    """

    def __init__(self, tracker: TreeTracker, dynamic: tuple[_DynamicCdr, _DynamicJson] | None = None) -> None:
        self.tracker = tracker
        # The fixed parts depend on the tree's structure only: built once per tree and
        # shared by every encoder of it (the node's topic, the ROS 2 bag).
        encoded = tracker.structure.encoded
        with collector_paused():  # thousands of new objects, none in a cycle
            if not isinstance(encoded, _StaticParts):
                encoded = tracker.structure.encoded = _StaticParts(tracker.structure)
            self._static = encoded
            self._dynamic_cdr, self._dynamic_json = (
                dynamic if dynamic is not None else (_DynamicCdr(), _DynamicJson())
            )
            # Each behaviour's changing fields' CDR, brought up to date from the tracker's changes.
            self._dynamic = list(map(self._dynamic_cdr.__getitem__, map(_DYNAMIC_KEY, tracker.states)))
            self._read = len(tracker.changes)
            self._epoch = tracker.changes_epoch
            # Their JSON, brought up to date when JSON is asked for.
            self._json: list[str] | None = None
            self._read_json = 0
            self._epoch_json = tracker.changes_epoch
        self._index: dict[str, int] | None = None

    def _sync(self) -> None:
        """Re-encode the behaviours the tracker found changed since the last call."""
        tracker = self.tracker
        changes, states = tracker.changes, tracker.states
        if self._epoch != tracker.changes_epoch:  # the log started afresh: re-read every state
            self._epoch, self._read = tracker.changes_epoch, len(changes)
            self._dynamic = list(map(self._dynamic_cdr.__getitem__, map(_DYNAMIC_KEY, states)))
            return
        if self._read == len(changes):
            return
        positions = changes[self._read :]
        self._read = len(changes)
        fresh = map(self._dynamic_cdr.__getitem__, map(_DYNAMIC_KEY, map(states.__getitem__, positions)))
        collections.deque(map(self._dynamic.__setitem__, positions, fresh), maxlen=0)

    def _sync_json(self) -> list[str]:
        """Each behaviour's changing JSON keys, as of the tracker's states."""
        states, changes = self.tracker.states, self.tracker.changes
        dynamic = self._dynamic_json.__getitem__
        if self._json is None or self._epoch_json != self.tracker.changes_epoch:
            self._epoch_json = self.tracker.changes_epoch
            self._json = list(map(dynamic, map(_DYNAMIC_KEY, states)))
        elif self._read_json < len(changes):
            positions = changes[self._read_json :]
            fresh = map(dynamic, map(_DYNAMIC_KEY, map(states.__getitem__, positions)))
            collections.deque(map(self._json.__setitem__, positions, fresh), maxlen=0)
        self._read_json = len(changes)
        return self._json

    def _objects(self) -> str:
        """The behaviours' JSON objects, comma-separated: the columns joined in turn."""
        ids, names, types, parents, children = self._static.json
        repeat = itertools.repeat
        rows = zip(
            repeat(',{"id":"'),
            ids,
            repeat('","name":'),
            names,
            repeat(',"type":'),
            types,
            repeat(',"parent_id":"'),
            parents,
            repeat('","children":'),
            children,
            repeat(","),
            self._sync_json(),
            strict=False,  # the constants repeat without end
        )
        return "".join(itertools.chain.from_iterable(rows))[1:]

    @staticmethod
    def _head(state: TreeState, count: int) -> bytes:
        """Encapsulation header and the fields before ``behaviours``, with its length."""
        head = bytearray(b"\0\1\0\0")
        total = round(state.stamp * _NANO)
        head += struct.pack("<iI", total // _NANO, total % _NANO)
        head += _cdr_string(state.goal_id) + _cdr_string(state.root_status)
        head += struct.pack("<I?", state.unit_index, state.final) + b"\0\0\0"
        tip = ros_text(state.tip_id).encode("utf-8")
        # tip_id, then the delta bool right after its NUL, padded to 4 for the uint32s.
        head += struct.pack("<I", len(tip) + 1) + tip + (b"\0\0" if state.full else b"\0\1")
        head += b"\0" * (-len(head) % 4) + struct.pack("<II", state.sequence, count)
        return bytes(head)

    def full(self, state: TreeState, *, with_json: bool) -> bytes:
        """The serialised ``TreeSnapshot`` of ``state``, a full snapshot of this tracker's
        goal taken just now (its behaviours are the tracker's states)."""
        with collector_paused():
            self._sync()
            body = b"".join(itertools.chain.from_iterable(zip(*self._static.cdr, self._dynamic, strict=True)))
            if with_json:
                document = _snapshot_document(dataclasses.replace(state, behaviours=()))
                document["state"] = state.root_status
                text = json.dumps(document, separators=(",", ":"))
                data = ros_text(f"{text[:-2]}{self._objects()}]}}").encode("utf-8")
            else:
                data = b""
        head = self._head(state, len(self._dynamic))
        return b"".join((head, body, _PACK_UINT32(len(data) + 1), data, b"\0"))

    def delta(self, state: TreeState) -> bytes:
        """The serialised ``TreeSnapshot`` of ``state``, a delta of this tracker's goal (its
        behaviours are some of the tracker's states): O(changed behaviours), no
        ``tree_json`` (as :func:`snapshot_to_msg` leaves it for a delta)."""
        last = self.tracker.last_delta
        if last is not None and last[0] is state:
            self._sync()
            positions = last[1]
            dynamic = map(self._dynamic.__getitem__, positions)
        else:  # not the tracker's latest delta: encoded from the state itself
            if self._index is None:
                self._index = {b.id: i for i, b in enumerate(self.tracker.states)}
            positions = [self._index[b.id] for b in state.behaviours]
            dynamic = map(self._dynamic_cdr.__getitem__, map(_DYNAMIC_KEY, state.behaviours))
        columns = [map(column.__getitem__, positions) for column in self._static.cdr]
        parts = itertools.chain.from_iterable(zip(*columns, dynamic, strict=True))
        return b"".join((self._head(state, len(positions)), *parts, b"\1\0\0\0\0"))


class SnapshotSerializer:
    """Serialised ``TreeSnapshot`` messages of one goal after another (what the node
    publishes on ``~/tree_snapshot`` and what a ROS 2 bag records, the same bytes).

    A snapshot of the tracker's goal, full or a delta, is serialised from kept parts
    (:class:`TreeSnapshotEncoder`, one per tracker, sharing the encodings of statuses and
    messages between goals); a snapshot without a tree (a rejected script) is built as a
    message (:func:`snapshot_to_msg`) and serialised by rclpy, exactly its bytes
    (:func:`~erobs_bt.ros.cdr.serialize_exact`). Not thread-safe: one caller
    at a time (a snapshot throttle's publish callback).
    """

    #: Most kept encodings of (status, message, is_active) before they are dropped.
    KEPT_DYNAMIC = 4096

    def __init__(self) -> None:
        self._encoder: TreeSnapshotEncoder | None = None
        self._dynamic = (_DynamicCdr(), _DynamicJson())

    def serialize(self, state: TreeState, tracker: TreeTracker | None, *, with_json: bool) -> bytes:
        """The serialised message of ``state``; ``tracker`` is the throttle's current one
        (``state``, when full and of its goal, was just taken from it)."""
        if state.behaviours and tracker is not None and tracker.goal_id == state.goal_id:
            if self._encoder is None or self._encoder.tracker is not tracker:
                if len(self._dynamic[0]) + len(self._dynamic[1]) > self.KEPT_DYNAMIC:
                    self._dynamic = (_DynamicCdr(), _DynamicJson())
                self._encoder = TreeSnapshotEncoder(tracker, self._dynamic)
            if state.full:
                return self._encoder.full(state, with_json=with_json)
            return self._encoder.delta(state)
        return serialize_exact(snapshot_to_msg(state, with_json=with_json))


def snapshot_from_msg(msg: TreeSnapshot) -> TreeState:
    """The :class:`TreeState` of a received ``TreeSnapshot``.

    Children are rebuilt from the parents in a full snapshot (a delta lists only changed
    behaviours, so its ``child_ids`` are empty: :class:`SnapshotAssembler` keeps them).
    """
    children: dict[str, list[str]] = {}
    for b in msg.behaviours:
        children.setdefault(b.parent_id, []).append(b.id)
    behaviours = tuple(
        BehaviourState(
            id=b.id,
            parent_id=b.parent_id,
            name=b.name,
            type_name=b.type,
            status=b.status,
            message=b.message,
            child_ids=tuple(children.get(b.id, ())),
            is_active=b.is_active,
        )
        for b in msg.behaviours
    )
    return TreeState(
        goal_id=msg.goal_id,
        behaviours=behaviours,
        tip_id=msg.tip_id,
        final=msg.final,
        stamp=seconds(msg.stamp),
        unit_index=msg.unit_index,
        full=not msg.delta,
        sequence=msg.sequence,
        status=msg.state,
    )


def solution_to_trajectory(solution: Solution, *, stamp: Time) -> JointTrajectory:
    """The arm motion of a solution as one ``JointTrajectory``.

    The arm segments are concatenated in order, each shifted by the durations of the
    segments before it; the first point of a segment is dropped when it repeats the
    previous segment's last point at the same time. Tool segments (gripper commands)
    have no place in a joint trajectory and are left out.

    Args:
        solution: a planned unit.
        stamp: the header stamp.

    Returns:
        A trajectory (no points when the solution has no arm segment). Joint names are
        those of the first arm segment; every segment of a solution uses the same order.
    """
    trajectory = JointTrajectory()
    trajectory.header.stamp = stamp
    offset = 0.0
    last_time = -math.inf
    for segment in solution.segments:
        if not isinstance(segment, ArmSegment) or not segment.points:
            continue
        if not trajectory.joint_names:
            trajectory.joint_names = [ros_text(name) for name in segment.joint_names]
        for point in segment.points:
            t = offset + point.time_from_start
            if t <= last_time:
                continue
            trajectory.points.append(
                JointTrajectoryPoint(
                    positions=list(point.positions),
                    velocities=list(point.velocities),
                    accelerations=list(point.accelerations),
                    time_from_start=duration_msg(t),
                )
            )
            last_time = t
        offset += segment.duration
    return trajectory


def joint_state_msg(
    names: Sequence[str],
    positions: Sequence[float],
    velocities: Sequence[float] | None,
    *,
    stamp: Time,
) -> JointState:
    """A ``sensor_msgs/JointState`` (positions [rad], velocities [rad/s]; no efforts).

    Raises:
        ValueError: the vectors do not match ``names`` in length.
    """
    if len(positions) != len(names) or (velocities is not None and len(velocities) != len(names)):
        raise ValueError(
            f"joint state: {len(names)} names but {len(positions)} positions"
            f" and {len(velocities) if velocities is not None else 0} velocities"
        )
    msg = JointState()
    msg.header.stamp = stamp
    msg.name = [ros_text(name) for name in names]
    msg.position = [float(q) for q in positions]
    msg.velocity = [float(v) for v in velocities] if velocities is not None else []
    return msg

"""Exactly a message's CDR bytes: ``rclpy.serialization.serialize_message`` without its tail.

``serialize_message`` returns the rmw's serialized-message buffer as it is. With Fast DDS
(``rmw_fastrtps_cpp``, the rmw of the PyPI wheels) that buffer's length is the type
support's *estimate* of the size, an upper bound, not the number of bytes written: a
``sensor_msgs/JointState`` with empty arrays came back as 44 bytes, 36 of them the message
and the rest leftover memory (``astrtps_``). rclpy and mcap-ros2-support stop reading at the
message's end, so the tail goes unnoticed until a strict reader (rosbags: "CDR message
size mismatch") refuses the file. What erobs_bt writes to a bag or publishes as
serialised bytes is :func:`serialize_exact`: the buffer cut to :func:`cdr_size`.

The size follows the encoding Fast DDS writes (plain CDR, XCDR version 1, little endian):
a 4-byte encapsulation header, then the fields in order, each primitive aligned to its own
size (1, 2, 4 or 8 bytes) counted from the end of the header; a string is a ``uint32``
length (with the NUL), its UTF-8 bytes and the NUL; a sequence a ``uint32`` count and its
elements; an array its elements only; a nested message its fields (no alignment of its
own); a message without fields one ``uint8`` (rosidl's
``structure_needs_at_least_one_member``). The field types are the message class's own
(``SLOT_TYPES``, rosidl's type definitions), so any generated message is covered.
"""

from __future__ import annotations

import functools
from typing import Any

from rclpy.serialization import serialize_message
from rosidl_parser import definition

#: Size [bytes] of each primitive type (rosidl's names), which is also its alignment.
_PRIMITIVE_SIZES = {
    "boolean": 1,
    "octet": 1,
    "char": 1,
    "uint8": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "wchar": 2,
    "int32": 4,
    "uint32": 4,
    "float": 4,
    "int64": 8,
    "uint64": 8,
    "double": 8,
}

#: The encapsulation header (representation id and options) before the payload.
HEADER_SIZE = 4


def _align(offset: int, size: int) -> int:
    return offset + (-offset % size)


@functools.cache
def _fields(message_type: Any) -> tuple[tuple[str, Any], ...]:
    """``(attribute, rosidl type)`` of each field of a generated message class, in order."""
    names = tuple(message_type.get_fields_and_field_types())
    return tuple(zip(names, message_type.SLOT_TYPES, strict=True))


def _message_end(msg: Any, offset: int) -> int:
    message_type: Any = type(msg)
    fields = _fields(message_type)
    if not fields:
        return offset + 1  # structure_needs_at_least_one_member
    for name, kind in fields:
        offset = _value_end(kind, getattr(msg, name), offset)
    return offset


def _value_end(kind: Any, value: Any, offset: int) -> int:
    if isinstance(kind, definition.BasicType):
        size = _PRIMITIVE_SIZES[kind.typename]
        return _align(offset, size) + size
    if isinstance(kind, definition.AbstractString):
        return _align(offset, 4) + 4 + len(value.encode("utf-8")) + 1
    if isinstance(kind, definition.NamespacedType):
        return _message_end(value, offset)
    if isinstance(kind, definition.AbstractSequence):
        offset = _align(offset, 4) + 4
    elif not isinstance(kind, definition.Array):
        raise ValueError(f"no CDR size for the field type {kind!r}")
    element = kind.value_type
    if isinstance(element, definition.BasicType):
        if len(value) == 0:
            return offset
        size = _PRIMITIVE_SIZES[element.typename]
        return _align(offset, size) + size * len(value)
    for item in value:
        offset = _value_end(element, item, offset)
    return offset


def cdr_size(msg: Any) -> int:
    """The exact size [bytes] of ``msg``'s CDR serialisation, encapsulation header included.

    Args:
        msg: an rclpy message (a generated message class's instance).

    Raises:
        ValueError: a field's type has no size here (wide strings, which no message
            erobs_bt writes uses).
    """
    return HEADER_SIZE + _message_end(msg, 0)


def serialize_exact(msg: Any) -> bytes:
    """``msg`` serialised by rclpy (the rmw's CDR), exactly its bytes (see the module docstring).

    Raises:
        ValueError: the rmw wrote fewer bytes than the message's size (an encoding this
            module does not describe), or as for :func:`cdr_size`.
    """
    data: bytes = serialize_message(msg)
    size = cdr_size(msg)
    if len(data) < size:
        raise ValueError(
            f"{type(msg).__name__}: the rmw serialised {len(data)} bytes, fewer than its CDR size {size}"
        )
    return data if len(data) == size else data[:size]

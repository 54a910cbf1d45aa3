"""Interop fixtures: the upstream RIHS01 type hashes and the hashes of the types we import.

* :func:`load_type_hashes` reads ``../shared/interop/type-hashes.json`` (the upstream hashes,
  computed with the Kilted rosidl tool chain; see the README beside it) into
  :class:`UpstreamType` records, for the ROS 2 distro of this venv: where the file lists that
  distro's layout as a variant (control_msgs' FollowJointTrajectory on Jazzy), the variant is
  the expected hash (:data:`DISTRO_SOURCES`). :func:`require_type_hashes` does the same for a test: when
  ``../shared`` is absent it *skips* with the reason, unless ``EROBS_BT_REQUIRE_SHARED=1`` (CI)
  makes that a failure.
* :func:`built_type_hash` returns the RIHS01 hash of an importable ROS type (a message,
  service, action or any generated sub-type such as ``_SendGoal_Request`` or ``_Event``) as
  its *loaded C type support* reports it: the ``get_type_hash_func`` of the
  ``rosidl_*_type_support_t`` that rclpy hands to rcl, which is the hash rmw announces on
  the wire. So it checks the built artefact itself, whichever way it was built (our
  interfaces/ packages, or a sourced ROS distribution).
* :func:`type_origin` says where an interface package's Python types come from.

Usage in a test::

    from interop import built_type_hash, require_type_hashes

    upstream = require_type_hashes()
    fjt = upstream["control_msgs/action/FollowJointTrajectory"]
    assert built_type_hash(fjt.type) == fjt.hash
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from erobs_bt.rosdistro import ros_distro

#: ``../shared/interop`` of this checkout (a worktree's ``../shared`` is /work/shared).
INTEROP_DIR = Path(__file__).resolve().parents[2] / "shared" / "interop"
TYPE_HASHES_FILE = INTEROP_DIR / "type-hashes.json"
#: Set to 1 (CI does) to make a missing ../shared/interop a test failure instead of a skip.
REQUIRE_SHARED_ENV = "EROBS_BT_REQUIRE_SHARED"

#: The upstream sources (type-hashes.json ``sources`` keys) of the layouts a distro builds where
#: they are listed as a variant of a type, not as its ``hash``. The file's main hashes are of the
#: Kilted-era branches; control_msgs' ``jazzy`` branch (5.x) has FollowJointTrajectory without the
#: Feedback fields ``index`` and ``multi_dof_index`` that master added in 6.3.0.
DISTRO_SOURCES: Mapping[str, frozenset[str]] = {
    "jazzy": frozenset({"control_msgs@jazzy"}),
    "kilted": frozenset(),
}


@dataclass(frozen=True)
class UpstreamType:
    """One upstream interface type of type-hashes.json.

    Attributes:
        type: ``package/kind/Name``, e.g. ``control_msgs/action/FollowJointTrajectory``.
        hash: its RIHS01 hash, ``RIHS01_<64 hex digits>``.
        components: for a srv or action, every generated sub-type (``..._Request``,
            ``..._SendGoal_Event``, ...) and its hash; empty for a msg.
        source: the key under ``sources`` (repository, branch and commit it was computed from).
        variants: the other upstream layouts of the type (``source``, ``hash``, ``components``):
            those listed as variants that are not this distro's, and the main entry when a
            variant is.
    """

    type: str
    hash: str
    components: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    variants: tuple[Mapping[str, Any], ...] = ()

    @property
    def package(self) -> str:
        return self.type.split("/")[0]

    def hashes(self) -> dict[str, str]:
        """The type's own hash and those of its components, by full type name."""
        return {self.type: self.hash, **self.components}


class TypeHashes(Mapping[str, UpstreamType]):
    """The upstream types of type-hashes.json by full type name (``types`` and ``extra_types``),
    with the hashes of ``distro``'s layouts (:data:`DISTRO_SOURCES`)."""

    def __init__(self, document: Mapping[str, Any], path: Path, distro: str) -> None:
        self.path = path
        self.document = document
        self.distro = distro
        self._types: dict[str, UpstreamType] = {}
        for entry in [*document.get("types", []), *document.get("extra_types", [])]:
            main = {
                "source": entry.get("source", ""),
                "hash": entry["hash"],
                "components": dict(entry.get("components", {})),
            }
            layouts = [main, *entry.get("variants", ())]
            chosen = next((v for v in layouts[1:] if v["source"] in DISTRO_SOURCES[distro]), main)
            self._types[entry["type"]] = UpstreamType(
                type=entry["type"],
                hash=chosen["hash"],
                components=dict(chosen.get("components", {})),
                source=chosen["source"],
                variants=tuple(v for v in layouts if v is not chosen),
            )

    def __getitem__(self, name: str) -> UpstreamType:
        return self._types[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._types)

    def __len__(self) -> int:
        return len(self._types)

    def all_hashes(self) -> dict[str, str]:
        """Every listed type and component with its hash (variants excluded)."""
        return {name: value for entry in self.values() for name, value in entry.hashes().items()}

    def packages(self) -> list[str]:
        """The interface packages the listed types belong to, sorted."""
        return sorted({entry.package for entry in self.values()})


def load_type_hashes(path: Path | None = None, distro: str | None = None) -> TypeHashes:
    """Read type-hashes.json (default :data:`TYPE_HASHES_FILE`) with the hashes of ``distro``'s
    layouts (default: this venv's, :func:`erobs_bt.rosdistro.ros_distro`).

    Raises:
        FileNotFoundError: the file (i.e. ../shared) is absent.
        ValueError: it is not RIHS01 data as documented in its README.
    """
    path = TYPE_HASHES_FILE if path is None else path
    document = json.loads(path.read_text(encoding="utf-8"))
    if document.get("hash_version") != "RIHS01" or not document.get("types"):
        raise ValueError(f"{path}: not a RIHS01 type-hash list (hash_version/types missing)")
    return TypeHashes(document, path, distro or ros_distro())


def shared_required() -> bool:
    """Whether a missing ../shared is a failure (``EROBS_BT_REQUIRE_SHARED=1``) rather than a skip."""
    return os.environ.get(REQUIRE_SHARED_ENV, "") not in ("", "0")


def require_type_hashes() -> TypeHashes:
    """:func:`load_type_hashes` for a test: skip with the reason when ../shared is absent,
    or fail instead when ``EROBS_BT_REQUIRE_SHARED=1``."""
    try:
        return load_type_hashes()
    except FileNotFoundError:
        reason = (
            f"{TYPE_HASHES_FILE} not found (../shared is absent): the upstream type hashes are "
            f"not available, so wire compatibility is not checked"
        )
        if shared_required():
            pytest.fail(f"{reason}; {REQUIRE_SHARED_ENV}=1 requires them")
        pytest.skip(reason)


# ---- hashes of the loaded type supports -----------------------------------------------------
# Layouts of rosidl_runtime_c's rosidl_{message,service,action}_type_support_t (Iron and later),
# up to the get_type_hash_func member; rosidl_type_hash_t is {uint8_t version; uint8_t value[32]}.


class _TypeHashStruct(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint8), ("value", ctypes.c_uint8 * 32))


_GET_TYPE_HASH = ctypes.CFUNCTYPE(ctypes.POINTER(_TypeHashStruct), ctypes.c_void_p)


class _MessageTypeSupport(ctypes.Structure):
    _fields_ = (
        ("typesupport_identifier", ctypes.c_char_p),
        ("data", ctypes.c_void_p),
        ("func", ctypes.c_void_p),
        ("get_type_hash_func", _GET_TYPE_HASH),
    )


class _ServiceTypeSupport(ctypes.Structure):
    _fields_ = (
        ("typesupport_identifier", ctypes.c_char_p),
        ("data", ctypes.c_void_p),
        ("func", ctypes.c_void_p),
        ("request_typesupport", ctypes.c_void_p),
        ("response_typesupport", ctypes.c_void_p),
        ("event_typesupport", ctypes.c_void_p),
        ("event_message_create_handle_function", ctypes.c_void_p),
        ("event_message_destroy_handle_function", ctypes.c_void_p),
        ("get_type_hash_func", _GET_TYPE_HASH),
    )


class _ActionTypeSupport(ctypes.Structure):
    _fields_ = (
        ("goal_service_type_support", ctypes.c_void_p),
        ("result_service_type_support", ctypes.c_void_p),
        ("cancel_service_type_support", ctypes.c_void_p),
        ("feedback_message_type_support", ctypes.c_void_p),
        ("status_message_type_support", ctypes.c_void_p),
        ("get_type_hash_func", _GET_TYPE_HASH),
    )


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.argtypes = (ctypes.py_object,)
_capsule_name.restype = ctypes.c_char_p
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes = (ctypes.py_object, ctypes.c_char_p)
_capsule_pointer.restype = ctypes.c_void_p


def _rihs01(get_type_hash: Any, type_support: int) -> str:
    result = get_type_hash(type_support)
    if not result:
        raise LookupError("the type support returned no type hash")
    hash_struct = result.contents
    if hash_struct.version != 1:
        raise LookupError(f"type hash version {hash_struct.version}, expected 1 (RIHS01)")
    return "RIHS01_" + bytes(hash_struct.value).hex()


def _pointer_of(capsule: Any) -> int:
    pointer = _capsule_pointer(capsule, _capsule_name(capsule))
    if not pointer:
        raise LookupError("empty type-support capsule")
    return int(pointer)


def python_type(full_name: str) -> type:
    """The generated Python class of ``package/kind/Name`` (``Name`` may be a sub-type such as
    ``FollowJointTrajectory_SendGoal_Request``, which lives in the module of its parent type).

    Raises:
        ImportError: the package or its ``kind`` module does not import.
        LookupError: no such type in it.
    """
    package, kind, name = full_name.split("/")
    module = importlib.import_module(f"{package}.{kind}")
    if hasattr(module, name):
        return getattr(module, name)  # type: ignore[no-any-return]
    parent = name.split("_")[0]
    if not hasattr(module, parent):
        raise LookupError(f"{full_name}: {package}.{kind} has no {parent}")
    generated = sys.modules[getattr(module, parent).__module__]
    if not hasattr(generated, name):
        raise LookupError(f"{full_name}: {generated.__name__} has no {name}")
    return getattr(generated, name)  # type: ignore[no-any-return]


def built_type_hash(full_name: str) -> str:
    """The RIHS01 hash of ``package/kind/Name`` as its loaded C type support reports it.

    Works for messages (also the generated ``_Goal``, ``_Request``, ``_Event``,
    ``_FeedbackMessage``, ...), services (also ``_SendGoal``, ``_GetResult``) and actions.

    Raises:
        ImportError: the type's package does not import.
        LookupError: the type is unknown, or its type support reports no RIHS01 hash.
    """
    cls = python_type(full_name)
    cls.__class__.__import_type_support__()  # type: ignore[attr-defined]
    capsule = getattr(cls, "_TYPE_SUPPORT", None)
    if capsule is None:
        raise LookupError(f"{full_name}: no type support loaded")
    pointer = _pointer_of(capsule)
    if hasattr(cls, "Goal") and hasattr(cls, "Impl"):
        layout: type[ctypes.Structure] = _ActionTypeSupport
    elif hasattr(cls, "Request") and hasattr(cls, "Response"):
        layout = _ServiceTypeSupport
    else:
        layout = _MessageTypeSupport
    support = layout.from_address(pointer)
    return _rihs01(support.get_type_hash_func, pointer)


def service_part_hashes(full_name: str) -> dict[str, str]:
    """The hashes of a service's request, response and event types as the *service's* type
    support reports them (the members rcl uses when it creates a client or server), by
    ``..._Request``/``_Response``/``_Event`` name; a second path to the same hashes as
    :func:`built_type_hash` of each part."""
    cls = python_type(full_name)
    cls.__class__.__import_type_support__()  # type: ignore[attr-defined]
    support = _ServiceTypeSupport.from_address(_pointer_of(cls._TYPE_SUPPORT))  # type: ignore[attr-defined]
    parts = {}
    for suffix, pointer in (
        ("Request", support.request_typesupport),
        ("Response", support.response_typesupport),
        ("Event", support.event_typesupport),
    ):
        message = _MessageTypeSupport.from_address(pointer)
        parts[f"{full_name}_{suffix}"] = _rihs01(message.get_type_hash_func, pointer)
    return parts


def type_origin(package: str) -> str:
    """Where ``package``'s generated Python types are imported from: the directory holding it,
    with "(this venv)" or "(outside this venv: a ROS distribution?)" appended.

    Raises:
        ImportError: the package does not import.
    """
    module = importlib.import_module(package)
    location = Path(module.__file__ or next(iter(module.__path__))).resolve().parent.parent
    inside = location.is_relative_to(Path(sys.prefix).resolve())
    return f"{location} ({'this venv' if inside else 'outside this venv: a ROS distribution?'})"

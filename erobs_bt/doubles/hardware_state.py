"""The physical state of ``erobs_bt_sim_hardware``'s cell, kept across a relaunch of its bringup.

When EROBS relaunches its bringup after a tool exchange, the driver processes end and start
again, but the arm stays where it stopped, the tools stay where the exchange put them and the
tool keeps its voltage. The double's ``--state-file`` keeps that much: the node writes the file
when it closes and reads it when it starts (``erobs_bt/backends/ros2_control/bringup.py`` runs
it as the bringup command in the tests). The file is a pickle written and read only by this
module, in the test's own temporary folder; it is not an exchange format.
"""

from __future__ import annotations

import copyreg
import io
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from erobs_bt.world.tools import ToolState


@dataclass(frozen=True)
class PhysicalState:
    """What outlives the driver processes.

    Attributes:
        joints: [rad] the arm's joint positions, ``JOINT_NAMES`` order.
        tools: the fitted tool, the docks' tools, held and lying parts.
        voltage: [V] the tool voltage.
    """

    joints: tuple[float, ...]
    tools: ToolState
    voltage: float


def _mapping(items: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    return MappingProxyType(items)


#: pickle's reducers plus one for :class:`ToolState`'s read-only mappings (pickled as their items).
_DISPATCH: dict[Any, Any] = {**copyreg.dispatch_table, MappingProxyType: lambda m: (_mapping, (dict(m),))}


def save_state(path: Path, state: PhysicalState) -> None:
    """Write ``state`` to ``path``, readable and writable by this user only, atomically (a
    reader sees the old file or the new one)."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(state)
    partial = path.with_name(path.name + ".partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as output:
        output.write(buffer.getvalue())
    os.replace(partial, path)


def load_state(path: Path) -> PhysicalState | None:
    """The state written to ``path``, or ``None`` when there is no such file (a first start).

    Raises:
        ValueError: ``<path>: ...``: the file is not this user's own or others may write it (a
            pickle runs code when read: only the file :func:`save_state` wrote is read), or it
            is not a state file.
    """
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    if status.st_uid != os.getuid() or status.st_mode & 0o022:
        raise ValueError(
            f"{path}: not read: a state file must belong to this user and be writable only by them "
            "(the double writes it so; delete it to start from the cell's start state)"
        )
    try:
        state = pickle.loads(path.read_bytes())
    except Exception as exc:
        raise ValueError(
            f"{path}: not a state file of erobs_bt_sim_hardware ({type(exc).__name__}: {exc}); "
            "delete it to start from the cell's start state"
        ) from exc
    if not isinstance(state, PhysicalState):
        raise ValueError(f"{path}: not a state file of erobs_bt_sim_hardware; delete it to start afresh")
    return state

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
    """Write ``state`` to ``path`` (atomically: a reader sees the old file or the new one)."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(state)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(buffer.getvalue())
    os.replace(partial, path)


def load_state(path: Path) -> PhysicalState | None:
    """The state written to ``path``, or ``None`` when there is no such file (a first start)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    state = pickle.loads(data)
    if not isinstance(state, PhysicalState):
        raise ValueError(f"{path}: not a state file of erobs_bt_sim_hardware")
    return state

"""The simulated tools' drivers: what commanding a tool does in the embedded cell.

In the simulated cell a tool command has no hardware to reach: its whole effect is the
tool bookkeeping the motion stack keeps on every backend (:mod:`erobs_bt.world.tools`: a
``vacuum_on`` picks up the part under the cup, a tool exchange moves a tool between the
flange and a dock, the pipettor's volume). These drivers record the outputs a real cell
would switch, so the simulated cell can be inspected like one.
"""

from __future__ import annotations

from erobs_bt.script.model import Pipettor


class SimulatedTool:
    """A :class:`~erobs_bt.backends.parts.ToolDriver` of the embedded cell (nothing to command).

    Args:
        name: the tool (``epick``, ``hande``, ``pipettor``, ...).

    Attributes:
        state: the last gripper state commanded, or ``None``.
        operation: the last pipettor operation run, or ``None``.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.state: str | None = None
        self.operation: str | None = None

    def command(self, state: str, *, what: str) -> None:
        """Record ``state``; the stack's bookkeeping is the effect (returns no hardware status)."""
        self.state = state

    def run(self, step: Pipettor) -> None:
        """Record the pipettor operation; the stack's bookkeeping is the effect."""
        self.operation = step.operation

    def stop(self) -> None:
        """Nothing runs in the background: no-op."""


class SimulatedChanger:
    """A :class:`~erobs_bt.backends.parts.ToolChanger` of the embedded cell: its outputs' states.

    Attributes:
        powered: the tool voltage is on (the cell starts with the tool powered).
        locked: the changer is locked (the cell starts locked).
    """

    def __init__(self) -> None:
        self.powered = True
        self.locked = True

    def set_power(self, on: bool, *, what: str) -> None:
        """Switch the simulated tool voltage."""
        self.powered = on

    def set_locked(self, locked: bool, *, what: str) -> None:
        """Lock or unlock the simulated changer."""
        self.locked = locked

    def stop(self) -> None:
        """Nothing runs in the simulated changer: no-op."""

    def exchanged(self, gripper: str, *, what: str) -> None:
        """The simulated tools' drivers need no relaunch: no-op."""

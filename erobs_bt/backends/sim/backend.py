"""The ``sim`` assembly: the embedded simulated UR5e cell as a :class:`~erobs_bt.backends.stack.MotionStack`.

:func:`SimBackend` assembles the embedded planner (:class:`~erobs_bt.planning.planner.CellPlanner`)
with the simulated parts: the controller that plays trajectories in simulated time
(:mod:`.controller`), the simulated tools (:mod:`.tools`), the cell's markers as the
camera sees them (:class:`~erobs_bt.world.vision.CalibratedMarkerDetector`) and fault
injection (:mod:`.faults`, adapted to the stack's cut points by :class:`SimFaults`).

Start gripper: the simulated cell starts with the one tool that the cell config stores
in no dock (``epick`` in the packaged cell), or ``none``
(:func:`~erobs_bt.world.tools.mounted_at_start`).

Reset (``~/reset_simulation``): :class:`SimReset` puts the simulated cell back as it started,
from the cell config (the arm at ``initial_joint_state_deg``, the start tool attached, the
others docked, the parts and the pipettor from their sections), for
:meth:`MotionStack.reset_simulation <erobs_bt.backends.stack.MotionStack.reset_simulation>`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.backends.parts import ArmDriver, InjectedFault
from erobs_bt.backends.sim.controller import DEFAULT_CONTROL_RATE, SimController
from erobs_bt.backends.sim.faults import (
    FaultInjector,
    FaultSpec,
    FiredFault,
    load_faults,
    parse_fault_section,
)
from erobs_bt.backends.sim.tools import SimulatedChanger, SimulatedTool
from erobs_bt.backends.stack import MotionStack
from erobs_bt.planning.planner import CellPlanner, PlannerConfig
from erobs_bt.script.model import Step
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.tools import (
    DEFAULT_CONTACT_TOLERANCE,
    ToolState,
    initial_tool_state,
    mounted_at_start,
)
from erobs_bt.world.vision import CalibratedMarkerDetector

__all__ = ["SimBackend", "SimFaults", "SimReset", "mounted_at_start"]

#: The simulated action servers, for messages (EROBS/MoveIt names).
_SERVERS = {
    "execute": "execute_task_solution",
    "replay": "execute_task_solution",
    "tool_exchange": "tool_exchange",
    "pipettor": "pipettor",
    "vision": "vision_task",
}


class SimFaults:
    """The fault injector (:class:`~erobs_bt.backends.sim.faults.FaultInjector`) as the stack's
    :class:`~erobs_bt.backends.parts.FaultInjection`: which fault fires, the error it produces
    with the simulated server's name, and where it cuts.

    Args:
        injector: the configured faults.
    """

    def __init__(self, injector: FaultInjector) -> None:
        self._injector = injector

    @property
    def injector(self) -> FaultInjector:
        """The fault injector."""
        return self._injector

    @property
    def specs(self) -> tuple[FaultSpec, ...]:
        """The configured faults."""
        return self._injector.specs

    @property
    def active(self) -> bool:
        """True when any fault is configured."""
        return bool(self._injector.specs)

    def fired(self) -> list[FiredFault]:
        """The faults that fired so far, in order."""
        return self._injector.fired()

    def on_plan(self, steps: Sequence[Step]) -> InjectedFault | None:
        """Count a ``plan`` call of ``steps``; the fault that fires, if any."""
        spec = self._injector.check(
            "plan", step_types=[s.script_type for s in steps], step_indices=[s.index for s in steps]
        )
        if spec is None:
            return None
        return InjectedFault(self._injector.error(spec, replay=False, server="plan"), delay=spec.delay)

    def on_dispatch(
        self, kind: str, *, replay: bool, step_types: Sequence[str], step_indices: Sequence[int]
    ) -> InjectedFault | None:
        """Count the dispatch's ``acceptance``, then its own ``kind``; the fault that fires (the
        acceptance's first)."""
        accepted = self._injector.check("acceptance", step_types=step_types, step_indices=step_indices)
        own = self._injector.check(kind, step_types=step_types, step_indices=step_indices)
        spec = accepted if accepted is not None else own
        if spec is None:
            return None
        server = _SERVERS.get(kind if kind != "run_step" else _server_of(step_types), "execute_task_solution")
        error: MotionError = self._injector.error(spec, replay=replay, server=server)
        # A fault that plays part of the motion cuts it there; any other fails before it moves.
        cut = spec.after_fraction if spec.moves else None
        return InjectedFault(error, delay=spec.delay, after_fraction=cut)


def SimBackend(
    cell: CellConfig,
    *,
    speed: float = 1.0,
    faults: FaultInjector | Iterable[FaultSpec] | str | Path | None = None,
    seed: int | None = None,
    gripper: str | None = None,
    planner_config: PlannerConfig | None = None,
    control_rate: float = DEFAULT_CONTROL_RATE,
    contact_tolerance: float = DEFAULT_CONTACT_TOLERANCE,
    controller: ArmDriver | None = None,
) -> MotionStack:
    """The simulated UR5e cell (``backend: sim``).

    Args:
        cell: the cell description (:func:`erobs_bt.world.config.load_cell`).
        speed: simulated seconds per wall second of the controller (1.0 = real time,
            e.g. 10.0 in tests; ``math.inf`` = no waiting).
        faults: fault injection: an injector, fault specs, a fault-injection YAML
            (:func:`~erobs_bt.backends.sim.faults.load_faults`), or ``None`` for the ``faults``
            section of the cell YAML (none when it is absent or empty).
        seed: seed of the sampling planner (OMPL's process-wide RNG; only the first
            seed of a process takes effect). ``None`` keeps the planner's default.
        gripper: the tool mounted at start (default :func:`mounted_at_start`).
        planner_config: planner settings (``seed`` overrides its ``ompl_seed``).
        control_rate: controller rate [Hz of simulated time].
        contact_tolerance: [m] TCP-to-part distance that counts as touching.
        controller: the arm driver; ``None`` for the simulated one
            (:class:`SimController` with ``speed`` and ``control_rate``).

    Raises:
        ValueError: invalid configuration (the message names the file and key).
    """
    injector = _injector(cell, faults)
    start_gripper = gripper if gripper is not None else mounted_at_start(cell)
    tools = initial_tool_state(cell, start_gripper)
    planner = CellPlanner(cell, tools, config=planner_config, seed=seed)
    detector = CalibratedMarkerDetector(cell)
    arm: ArmDriver = (
        controller
        if controller is not None
        else SimController(cell.initial_joint_state, speed=speed, control_rate=control_rate)
    )
    drivers = {name: SimulatedTool(name) for name in cell.grippers}
    changer = SimulatedChanger()
    reset = SimReset(cell, start_gripper, arm, drivers, changer) if isinstance(arm, SimController) else None
    return MotionStack(
        cell,
        planner=planner,
        arm=arm,
        tool_drivers=drivers,
        changer=changer,
        reset=reset,
        detector=detector,
        tool_state=tools,
        faults=SimFaults(injector),
        contact_tolerance=contact_tolerance,
        publishes_joint_states=False,
        name="sim",
        label="simulated cell",
    )


class SimReset:
    """Puts the simulated hardware back as :func:`SimBackend` built it: the stack's ``reset``
    (:meth:`~erobs_bt.backends.stack.MotionStack.reset_simulation`).

    What "initial" is comes from the cell config only: ``initial_joint_state_deg`` for the
    arm, the docks and ``parts:``/``pipettor:`` sections for the tools
    (:func:`~erobs_bt.world.tools.initial_tool_state`), with the tool the backend started
    with attached.

    Args:
        cell: the cell description.
        gripper: the tool attached at start.
        arm: the simulated controller.
        tools: the simulated tools' drivers (their last commands are forgotten).
        changer: the simulated tool changer (powered and locked again).
    """

    def __init__(
        self,
        cell: CellConfig,
        gripper: str,
        arm: SimController,
        tools: dict[str, SimulatedTool],
        changer: SimulatedChanger,
    ) -> None:
        self._cell = cell
        self._gripper = gripper
        self._arm = arm
        self._tools = tools
        self._changer = changer

    def __call__(self) -> ToolState:
        """Place the arm at the initial joint state [rad] at rest, clear the tools' outputs and
        return the initial tool state.

        Raises:
            MotionError: ``EXECUTION_FAILED`` when a trajectory is playing.
        """
        try:
            self._arm.set_joint_positions(self._cell.initial_joint_state)
        except RuntimeError as exc:
            raise MotionError(ErrorCode.EXECUTION_FAILED, f"cannot reset the simulation: {exc}") from None
        for tool in self._tools.values():
            tool.state = None
            tool.operation = None
        self._changer.powered = True
        self._changer.locked = True
        return initial_tool_state(self._cell, self._gripper)


def _server_of(step_types: Sequence[str]) -> str:
    for step_type in step_types:
        if step_type in ("tool_exchange", "pipettor"):
            return step_type
    return "vision"


def _injector(
    cell: CellConfig, faults: FaultInjector | Iterable[FaultSpec] | str | Path | None
) -> FaultInjector:
    if isinstance(faults, FaultInjector):
        return faults
    if isinstance(faults, str | Path):
        return load_faults(faults)
    if faults is not None:
        return FaultInjector(faults)
    return parse_fault_section(cell.extra.get("faults"), source=cell.source or "cell")

"""A MADSci node for one erobs_bt cell, built on MADSci's node module (``RestNode``).

Started by ``erobs-bt madsci-node`` (or ``erobs_bt_madsci_node``); a MADSci workcell manager,
MADSci's ``RestNodeClient`` or plain HTTP drive it. It serves one cell
(:mod:`erobs_bt.madsci.cells`): the erobs_bt ROS node named by ``--node`` (one ROS client,
reused, as the Bluesky device does), or, without ``--node``, an engine in this process.

Actions (``POST /action/<name>`` with ``{"args": {...}}``, then ``/start``):

* ``run_script(script, dry_run=False)`` — ``script`` is the JSON text or a path this node can
  read. Blocks the cell until the goal ends. Results: ``json_result`` is a
  :class:`RunScriptResult` (status, error code and message with the step path,
  completed/total steps, cache status, goal id, gripper, notices: a cached plan replayed
  unchecked from another planning-scene revision); files ``run_log`` (JSON Lines) and
  ``bag`` (ROS 2 bag, MCAP) when this node can read them (``--run-log-dir`` for a ROS cell;
  an embedded engine has the run log only);
  a workcell manager stores the result and both files as datapoints in the lab's data
  manager (its engine uploads every step's results). Action status: ``succeeded``;
  ``failed`` (aborted: invalid script, planning or execution failure, ``STOPPED``, the ROS
  node unreachable or lost); ``cancelled``; ``not_ready`` when the engine refused the goal
  (busy, FAULTED), with the engine's reason. A goal paused at a unit boundary stays
  ``running`` (the node's status says ``paused``): MADSci's workcell engine stops following
  an action that reports ``paused`` and would lose the step's result.
* ``validate(script)`` — parse, expand and group exactly as the cell does, so it accepts what
  ``run_script`` accepts (:meth:`~erobs_bt.madsci.cells.Cell.parser`): a ROS cell's own
  cell, pose registry and batching, asked of the node (its ``cell_config``, ``poses_file``
  and ``enable_batching`` parameters; the files must be readable here), or the embedded
  engine's. Moves nothing, runs while a goal runs. ``failed`` (not ``valid: false``) when
  the cell cannot be asked or its files cannot be read here, with why.
* ``reset_fault()``, ``clear_cache()`` — the engine's own, with its answer.

Admin commands (``POST /admin/<command>``): ``pause``/``resume`` (at the next unit boundary),
``cancel`` (the running goal ends CANCELED at the next unit boundary; the answer says after
which unit, ``cancel accepted: the goal ends after unit 3 …``), ``safety_stop`` (stop
now: the arm decelerates to rest, the goal aborts ``STOPPED``; the node then stays
``stopped`` and refuses ``run_script`` until ``reset``), ``reset`` (clears that latch; a
FAULTED engine needs ``reset_fault``), ``lock``/``unlock`` (MADSci's), ``shutdown`` (this
node's process ends; a ROS cell keeps running, an embedded engine halts its goal).

Status (``GET /status``), updated on every change of the cell: ``busy`` while a goal holds
the cell (RUNNING, COMPLETING_TASK, PAUSED, CANCELING), ``paused`` while PAUSED, ``errored``
while the engine is FAULTED or the ROS node is not reachable, with the reason as the last
of ``errors``; ``stopped`` after a safety stop; ``locked`` as MADSci's admin commands set it.
MADSci's ``ready`` is true only when none of these holds.

State (``GET /state``): the cell, reachable and why not, the engine's state and message,
goal id, unit, step, total steps, the attached tool, the docks of the cell configuration
with the tool each holds at start (``docks_at_start``), and the last goal's result.

Why not MADSci's own readiness check for actions: ``AbstractNode.run_action`` refuses every
action while the node is not ready, so a FAULTED (errored) cell could not be sent
``reset_fault``, and a goal sent while another client's goal runs would be refused with
"Node is busy" rather than the engine's reason. :meth:`ErobsBtNode.run_action` checks what
is this node's to decide (initializing, locked, safety-stopped, cell unreachable) and leaves
"one goal at a time" and FAULTED to the engine, the one place that decides them.
"""

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

from madsci.common.types.action_types import (
    ActionCancelled,
    ActionFailed,
    ActionFiles,
    ActionNotReady,
    ActionRequest,
    ActionResult,
    ActionSucceeded,
)
from madsci.common.types.admin_command_types import AdminCommandResponse
from madsci.common.types.base_types import Error
from madsci.common.types.node_types import RestNodeConfig
from madsci.node_module.helpers import action
from madsci.node_module.rest_node_module import RestNode
from pydantic import BaseModel, Field
from pydantic_settings import (
    BaseSettings,
    CliSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from erobs_bt.goal import HALT_NOW
from erobs_bt.madsci.cells import DEFAULT_TIMEOUT, Cell, CellView, Outcome

_LOG = logging.getLogger(__name__)

#: The actions MADSci's readiness does not gate (they answer while the cell runs or is FAULTED).
ALWAYS_ANSWERED = frozenset({"validate", "reset_fault", "clear_cache"})


class ErobsBtNodeConfig(RestNodeConfig):
    """The node's configuration: MADSci's REST node settings and the cell to serve.

    Every field can also come from MADSci's usual sources (``NODE_<FIELD>`` environment
    variables, ``settings.yaml``); the ``erobs-bt madsci-node`` options set them. Not the
    process's command line, which MADSci settings otherwise parse, over the values given here
    (``--speed`` of ``erobs-bt madsci-node`` would be read twice, ``--help`` hijacked).
    """

    model_config = SettingsConfigDict(cli_parse_args=False)

    ros_node: str | None = Field(
        default=None,
        description="The erobs_bt ROS node of the cell (/cell1/erobs_bt); None: an embedded engine.",
    )
    domain_id: int | None = Field(
        default=None, description="ROS domain of the ROS node; None: ROS_DOMAIN_ID of the environment."
    )
    request_timeout: float = Field(
        default=DEFAULT_TIMEOUT, gt=0, description="[s] discovery and each request to the ROS node."
    )
    run_log_dir: Path | None = Field(
        default=None,
        description="Where the cell's run logs and bags are (the ROS node's run_log_dir, readable "
        "here); embedded engine: where it writes them. None: no files in results (embedded: "
        "the default run-log folder).",
    )
    cell: Path | None = Field(
        default=None,
        description="Embedded engine: cell YAML or an EROBS beamline file. None: packaged. (A ROS "
        "cell's is its node's cell_config.)",
    )
    poses: Path | None = Field(
        default=None,
        description="Embedded engine: pose registry YAML (degrees). None: the cell's default, as "
        "`erobs-bt run` chooses it. (A ROS cell's is its node's poses_file.)",
    )
    faults: Path | None = Field(default=None, description="Embedded simulated cell: fault-injection YAML.")
    backend: str = Field(default="sim", description="Embedded engine: the motion backend.")
    speed: float = Field(default=1.0, gt=0, description="Embedded simulated cell: time factor.")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """MADSci's sources without its command-line source: MADSci settings parse the process's
        arguments (before the values given here), and ``erobs-bt madsci-node``'s own options are
        this node's command line."""
        sources = super().settings_customise_sources(
            settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
        )
        return tuple(source for source in sources if not isinstance(source, CliSettingsSource))


class RunScriptResult(BaseModel):
    """The ``json_result`` of ``run_script``: the goal's result as the engine reported it."""

    cell: str = Field(description="The ROS node's name, or 'embedded'.")
    status: str = Field(description="SUCCEEDED, ABORTED, CANCELED, REJECTED, UNREACHABLE or NODE_LOST.")
    error_code: str = Field(
        description="'' on success; the engine's error code (INVALID_SCRIPT, STOPPED, ...)."
    )
    error_message: str = Field(
        description="The engine's error with its prefix or step path (tasks[3].target: ...)."
    )
    completed_steps: int = Field(description="Steps of the units that completed.")
    total_steps: int = Field(description="Steps after macro expansion.")
    goal_id: str = Field(description="The engine's goal id ('' when refused).")
    dry_run: bool = Field(description="The goal was a preview (planned, nothing moved).")
    cache_status: str = Field(description="Last plan-cache outcome: HIT, MISS, INELIGIBLE or ''.")
    gripper: str = Field(description="The attached gripper after the goal.")
    notices: list[str] = Field(
        default_factory=list,
        description="What the goal did that an operator must know although it did not fail: "
        "'unit N: replayed unchecked: ...' for each cached plan replayed without a collision check "
        "although planned in another planning-scene revision (replay_scene_check is false), "
        "naming what would check it.",
    )


class RunFiles(ActionFiles):
    """The goal's files: its run log (JSON Lines, ``erobs-bt log``) and ROS 2 bag (MCAP)."""

    run_log: Path
    bag: Path


class ValidateResult(BaseModel):
    """The ``json_result`` of ``validate`` (the fields of ``erobs-bt validate --json``)."""

    valid: bool
    error: str = Field(
        default="", description="The error with its path (tasks[3].distance: ...) when invalid."
    )
    report: dict[str, Any] = Field(
        default_factory=dict, description="Steps, units, cache eligibility, key digest."
    )


def _script_text(script: str) -> str:
    """The JSON text of ``script`` (the text, or the file it names; :func:`erobs_bt.bluesky.script_text`)."""
    from erobs_bt.bluesky import script_text

    return script_text(script)


class ErobsBtNode(RestNode):
    """The MADSci node of one erobs_bt cell (see the module docstring).

    Args:
        node_config: the configuration; ``cell`` (a :class:`~erobs_bt.madsci.cells.Cell`) may
            be given instead of being made from it (``ros_node`` → RosCell, else EmbeddedCell).
    """

    config: ErobsBtNodeConfig = ErobsBtNodeConfig()
    config_model = ErobsBtNodeConfig

    def __init__(self, node_config: ErobsBtNodeConfig | None = None, cell: Cell | None = None) -> None:
        super().__init__(node_config=node_config)
        self._cell: Cell | None = cell
        self._last_result: dict[str, Any] | None = None
        self._parser: Any = None

    # -- the cell --------------------------------------------------------------------------
    @property
    def cell(self) -> Cell:
        if self._cell is None:
            raise RuntimeError("the cell is not connected yet (node starting)")
        return self._cell

    def _make_cell(self) -> Cell:
        from erobs_bt.madsci.cells import EmbeddedCell, RosCell

        config = self.config
        if config.ros_node:
            return RosCell(
                config.ros_node,
                domain_id=config.domain_id,
                timeout=config.request_timeout,
                run_log_dir=config.run_log_dir,
                client_name=f"madsci_{self.node_info.node_name}".replace("-", "_"),
            )
        from erobs_bt.plan import pose_registry_file
        from erobs_bt.session import EngineConfig
        from erobs_bt.settings import EngineSettings
        from erobs_bt.viz.runlog import default_log_dir
        from erobs_bt.world.beamline import resolve_cell_file

        cell = resolve_cell_file(config.cell)  # as `erobs-bt run --cell` reads it
        engine = EngineConfig(
            backend=config.backend,
            cell=cell,
            poses=pose_registry_file(cell, config.poses),  # the default registry, as `run` chooses it
            faults=config.faults,
            settings=EngineSettings(speed=config.speed),
        )
        return EmbeddedCell(engine, run_log_dir=config.run_log_dir or default_log_dir())

    def startup_handler(self) -> None:
        """Connect the cell (made once; a restart through ``reset`` keeps it) and map its
        state onto the node's status on every change."""
        if self._cell is None:
            self._cell = self._make_cell()
            self._cell.add_listener(self._apply)
        from erobs_bt.madsci.cells import RosCell

        if isinstance(self._cell, RosCell) and not self._cell.wait_reachable(self.config.request_timeout):
            _LOG.warning("%s", self._cell.view().reason)  # status says errored until it appears
        else:
            self._cell_parser()  # the docks of the cell's configuration, for the state
        self._apply(self._cell.view())

    def _cell_parser(self) -> tuple[Any, bool] | str:
        """The cell's parser and batching (:meth:`~erobs_bt.madsci.cells.Cell.parser`), kept
        for the state's docks; or why it cannot be had (logged)."""
        from erobs_bt.commandline import ConfigurationError

        try:
            parser, batching = self.cell.parser()
        except (TimeoutError, ConfigurationError) as exc:
            _LOG.warning("cannot read the cell's configuration: %s", exc)
            return str(exc)
        self._parser = parser
        return parser, batching

    def shutdown_handler(self) -> None:
        """Close the cell: the ROS client (the ROS node keeps running), or the embedded
        engine (its running goal is halted)."""
        cell, self._cell = self._cell, None
        if cell is not None:
            cell.close()

    def status_handler(self) -> None:
        """Periodic refresh (MADSci's status interval) of what :meth:`_apply` keeps current on
        every change of the cell."""
        if self._cell is not None:
            self._apply(self._cell.view())

    def state_handler(self) -> None:
        """Periodic refresh of ``GET /state``."""
        if self._cell is not None:
            self.node_state = self._state_of(self._cell.view())

    def _apply(self, view: CellView) -> None:
        """The cell's view as MADSci's node status and state (module docstring)."""
        status = self.node_status
        status.busy = view.busy
        status.paused = view.state == "PAUSED"
        reason, kind = "", ""
        if not view.reachable:
            reason, kind = view.reason, "CellUnreachable"
        elif view.faulted:
            reason, kind = (
                f"{view.cell} is FAULTED: {view.message}; check the cell, then run reset_fault",
                "CellFaulted",
            )
        status.errored = bool(reason)
        if reason and (not status.errors or status.errors[-1].message != reason):
            status.errors.append(Error(message=reason, error_type=kind))
            del status.errors[:-100]
        self.node_state = self._state_of(view)

    def _state_of(self, view: CellView) -> dict[str, Any]:
        docks = dict(self._parser.vocabulary.docks) if self._parser is not None else {}
        return {
            **asdict(view),
            "attached_tool": view.gripper,
            # The cell configuration's docks and the tool each holds when the cell starts
            # (tool exchanges are not tracked here).
            "docks_at_start": {str(number): tool for number, tool in sorted(docks.items())},
            "last_result": self._last_result,
        }

    # -- actions ---------------------------------------------------------------------------
    def start_action(self, _action_name: str, action_id: str) -> dict[str, Any]:
        """``POST /action/<name>/<id>/start``: run the created action through :meth:`run_action`
        (``RestNode.start_action`` calls ``AbstractNode.run_action`` directly, past this class's
        override). An unknown id gets MADSci's own answer."""
        pending = getattr(self, "_pending_actions", {})
        if action_id not in pending:
            return super().start_action(_action_name, action_id)
        self.run_action(pending.pop(action_id))
        return self.get_action_result_dict(action_id)

    def run_action(self, action_request: ActionRequest) -> ActionResult:
        """Start an action: refused here only for what is this node's to decide (module
        docstring); the engine itself answers busy and FAULTED."""
        name = action_request.action_name
        if name not in self.action_handlers:
            return super().run_action(action_request)
        refusal = self._refusal(name)
        if refusal:
            self._extend_action_history(
                ActionNotReady(
                    action_id=action_request.action_id,
                    errors=[Error(message=refusal, error_type="NodeNotReady")],
                )
            )
            return self.get_action_result(action_request.action_id)
        self.node_status.running_actions.add(action_request.action_id)
        self._extend_action_history(action_request.not_started())
        try:
            arguments = self._parse_action_args(action_request)
            self._check_required_args(action_request)
        except Exception as exc:  # bad arguments: the action fails, the node stays ready
            self.node_status.running_actions.discard(action_request.action_id)
            self._extend_action_history(action_request.failed(errors=Error.from_exception(exc)))
            return self.get_action_result(action_request.action_id)
        self._extend_action_history(action_request.running())
        self._action_thread(action_request, self.action_handlers[name], arguments)
        return self.get_action_result(action_request.action_id)

    def _refusal(self, name: str) -> str:
        status = self.node_status
        if status.initializing or self._cell is None:
            return "node is initializing (connecting to the cell)"
        if status.locked:
            return "node is locked (admin unlock)"
        if name in ALWAYS_ANSWERED:
            return ""
        if status.stopped:
            return "node was safety-stopped: check the cell, then send the admin command reset"
        view = self.cell.view()
        if not view.reachable:
            return view.reason
        return ""

    @action(name="run_script", blocking=False)
    def run_script(
        self,
        script: Annotated[str, "The EROBS JSON task script: its JSON text, or a path this node can read."],
        dry_run: Annotated[bool, "Preview: plan every unit and fill the plan cache, move nothing."] = False,
    ) -> tuple[RunScriptResult, RunFiles]:
        """Run an EROBS task script on the cell and wait for its result (one goal at a time)."""
        try:
            text = _script_text(script)
        except (OSError, ValueError) as exc:
            return ActionFailed(errors=[Error(message=str(exc), error_type="INVALID_SCRIPT")])
        outcome = self.cell.run(text, dry_run=dry_run)
        return self._result_of(outcome)

    def _result_of(self, outcome: Outcome) -> ActionResult:
        """The MADSci result of a goal's outcome (module docstring: which status when)."""
        json_result = RunScriptResult(
            cell=self.cell.name,
            status=outcome.status,
            error_code=outcome.error_code,
            error_message=outcome.error_message,
            completed_steps=outcome.completed_steps,
            total_steps=outcome.total_steps,
            goal_id=outcome.goal_id,
            dry_run=outcome.dry_run,
            cache_status=outcome.cache_status,
            gripper=outcome.gripper,
            notices=list(outcome.notices),
        ).model_dump(mode="json")
        if outcome.goal_id:  # a goal the engine ran (a refusal is not one)
            self._last_result = json_result
            self.node_state = self._state_of(self.cell.view())
        files: ActionFiles | None = None
        if outcome.run_log is not None and outcome.bag is not None:
            files = RunFiles(run_log=outcome.run_log, bag=outcome.bag)
        elif outcome.run_log is not None:  # an embedded engine records no bag
            files = ActionFiles(run_log=outcome.run_log)
        errors = (
            [] if outcome.success else [Error(message=outcome.error_message, error_type=outcome.error_code)]
        )
        kind = {"SUCCEEDED": ActionSucceeded, "CANCELED": ActionCancelled, "REJECTED": ActionNotReady}.get(
            outcome.status, ActionFailed
        )
        # MADSci sets the action id of a returned result (AbstractNode._process_result).
        return kind(errors=errors, json_result=json_result, files=files)

    @action(name="validate", blocking=False)
    def validate(
        self,
        script: Annotated[str, "The EROBS JSON task script: its JSON text, or a path this node can read."],
    ) -> ValidateResult:
        """Validate a script exactly as the cell would (its cell, pose registry and batching:
        parse, expand, group, cache key); nothing moves."""
        from erobs_bt.plan import plan_goal
        from erobs_bt.script.errors import ScriptError

        configured = self._cell_parser()
        if isinstance(configured, str):
            return ActionFailed(
                errors=[
                    Error(
                        message=f"cannot validate as {self.cell.name} would: {configured}",
                        error_type="CELL_CONFIGURATION",
                    )
                ]
            )
        parser, batching = configured
        try:
            plan = plan_goal(_script_text(script), parser=parser, enable_batching=batching)
        except (ScriptError, OSError, ValueError) as exc:
            return ValidateResult(valid=False, error=str(exc))
        return ValidateResult(valid=True, report=plan.describe())

    def _engine_reply(self, accepted: bool, message: str) -> ActionResult:
        if accepted:
            return ActionSucceeded(json_result={"message": message})
        return ActionFailed(
            errors=[Error(message=message, error_type="REFUSED")], json_result={"message": message}
        )

    @action(name="reset_fault", blocking=False)
    def reset_fault(self) -> ActionResult:
        """Clear the engine's FAULTED state after the operator checked the cell (refused when not faulted)."""
        return self._engine_reply(*self.cell.reset_fault())

    @action(name="clear_cache", blocking=False)
    def clear_cache(self) -> ActionResult:
        """Drop the cell's cached plans."""
        return self._engine_reply(*self.cell.clear_cache())

    # -- admin commands ----------------------------------------------------------------------
    def _admin(self, accepted: bool, message: str) -> AdminCommandResponse:
        errors = [] if accepted else [Error(message=message, error_type="REFUSED")]
        return AdminCommandResponse(success=accepted, errors=errors, data=message)

    def pause(self) -> AdminCommandResponse:
        """Pause the running goal at its next unit boundary (the engine's pause)."""
        return self._admin(*self.cell.pause())

    def resume(self) -> AdminCommandResponse:
        """Resume a paused goal (refused unless the cell is PAUSED at a boundary)."""
        return self._admin(*self.cell.resume())

    def cancel(self) -> AdminCommandResponse:
        """Cancel the running goal: it ends CANCELED at the next unit boundary (at once while
        paused); ``data`` says when (``cancel accepted: the goal ends after unit 3 (its motion
        runs to its end); to halt now: stop …``: here, the admin command ``safety_stop``)."""
        accepted, message = self.cell.cancel()
        if accepted and HALT_NOW in message:
            message += "; from MADSci: the admin command safety_stop"
        return self._admin(accepted, message)

    def safety_stop(self) -> AdminCommandResponse:
        """Stop now: the arm decelerates to rest, the goal aborts STOPPED; the node then stays
        ``stopped`` (refusing run_script) until the admin command ``reset``."""
        accepted, message = self.cell.stop()
        self.node_status.stopped = True
        return self._admin(accepted, message)

    def reset(self) -> AdminCommandResponse:
        """Clear the safety-stop latch and the node's errors; keep the cell connected. A FAULTED
        engine stays FAULTED: that needs the reset_fault action, after checking the cell."""
        self.node_status.stopped = False
        self.node_status.errors.clear()
        if self._cell is not None:
            self._apply(self._cell.view())
        return AdminCommandResponse(success=True, errors=[], data="stop latch and errors cleared")


def serve(config: ErobsBtNodeConfig) -> None:
    """Build the node and serve it until SIGINT/SIGTERM or the admin command shutdown (blocks)."""
    node = ErobsBtNode(node_config=config)
    node.start_node()

"""The ``erobs-bt`` command line.

Verbs, by what they need:

* ``validate`` — parse, expand, group and key a script; nothing moves.
* ``schema`` — print the JSON Schema of scripts (draft 2020-12).
* ``run`` / ``preview`` — execute or preview a script on the embedded simulated cell
  (Ctrl-C cancels at the next unit boundary, a second Ctrl-C stops now; SIGTERM stops now
  and ends the process, the live view of ``--view`` included).
* ROS verbs (:mod:`erobs_bt.ros.client.commands`): ``serve``, ``send``, ``pause``, ``resume``,
  ``cancel``, ``stop``, ``reset-fault``, ``clear-cache``, ``state``; viewers
  (:mod:`erobs_bt.viz.commands`): ``watch`` and others; ``madsci-node`` (:mod:`erobs_bt.madsci.commands`):
  a cell as a MADSci node.

Every verb that reads a script makes its goal plan with :func:`erobs_bt.plan.plan_goal` and
the parser configured from the same cell and pose-registry files
(:meth:`erobs_bt.plan.ScriptParser.from_files`), so ``validate`` accepts exactly what
``run`` accepts and rejects the rest with the same message.

Exit codes: 0 success, 1 the goal failed (planning, execution, cancel), 2 the script
or a configuration file is invalid. A reader of the output that goes away (``validate X |
head -1``) changes none of them (:mod:`erobs_bt.stdio`).

Start-up: ``validate`` is what editors and pre-commit hooks call, so it imports only the
parser and click (its report and its rejection lines are printed with click, not rich, which
alone costs about a fifth of its start-up); ``run`` imports rich, the engine and the
simulated cell, and opens its MCAP bag only once the arm moves
(:class:`~erobs_bt.ros.record.mcap_deferred.DeferredRecorder`). The ROS and viewer verbs' modules
are imported only when one of them runs or the verbs are listed (:class:`_Verbs`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from erobs_bt.backends.factory import BACKEND_KINDS
from erobs_bt.commandline import (
    EXIT_FAILED,
    EXIT_INVALID,
    POSES_HELP,
    ConfigurationError,
    SignalPipe,
    echo_labelled,
    fail_configuration,
    fail_invalid,
    is_the_program,
    load_plan,
    print_configuration_error,
    print_invalid,
    print_warnings,
    use_color,
)
from erobs_bt.plan import (
    NotPreviewableError,
    describe_pose_registry,
    pose_registry_file,
    pose_registry_source,
)
from erobs_bt.script.errors import ScriptError
from erobs_bt.stdio import guard_stdout
from erobs_bt.wording import count

if TYPE_CHECKING:
    from rich.console import Console

    from erobs_bt.keyboard import TerminalPauses


def aligned(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of a plain table: columns padded to their widest cell, two spaces apart, the
    header (bold on a terminal) over a rule of ``─``."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()

    return [click.style(line(header), bold=True), "  ".join("─" * w for w in widths), *map(line, rows)]


class _Verbs(click.Group):
    """The verbs: this module's own, and those of :data:`LAZY_VERB_MODULES`, imported only
    when one of their verbs runs or the verbs are listed (``--help``, shell completion)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy_loaded = False

    def _load_lazy(self) -> None:
        if self._lazy_loaded:
            return
        self._lazy_loaded = True
        import importlib

        for module in LAZY_VERB_MODULES:
            for command in importlib.import_module(module).COMMANDS:
                self.add_command(command)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """click's ``main``, with a closed stdout failing no verb (:mod:`erobs_bt.stdio`), from
        before the arguments are parsed (``erobs-bt --help | head -1`` too), when ``erobs-bt``
        is the program (``sys.stdout`` belongs to it)."""
        if is_the_program():
            guard_stdout()
        return super().main(*args, **kwargs)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_lazy()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and not self._lazy_loaded:
            self._load_lazy()
            command = super().get_command(ctx, cmd_name)
        return command


#: Modules whose ``COMMANDS`` are verbs of ``erobs-bt`` (ROS verbs, viewers, the MADSci node). None
#: imports rclpy, the viewers or MADSci at import time; the verbs do when they run.
LAZY_VERB_MODULES: tuple[str, ...] = (
    "erobs_bt.ros.client.commands",
    "erobs_bt.doubles.commands",
    "erobs_bt.viz.commands",
    "erobs_bt.madsci.commands",
)


#: ``--cell``'s help, for every verb that reads a cell.
CELL_HELP = (
    "Cell configuration YAML: erobs_bt's cell format or an EROBS beamline file "
    "(cms_beamline.yaml, with its scene, poses and SRDF). Default: $BEAMBOT_BEAMLINE_CONFIG "
    "when set, else the packaged config/cell.yaml."
)


def _workspace_callback(ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path | None:
    ctx.meta["erobs_bt.workspace"] = value
    return value


def _docks_callback(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value:
        from erobs_bt.script.vocabulary import parse_dock_contents

        try:
            ctx.meta["erobs_bt.docks"] = parse_dock_contents(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=_param) from None
    return value


def _refuse_dock_conflict(ctx: click.Context | None, start_gripper: str | None) -> None:
    """Exit 2 with ``configuration error: <why>`` when the ``--docks`` given contradict each
    other or ``start_gripper`` (:func:`erobs_bt.script.vocabulary.dock_conflict`); nothing
    without ``--docks`` (a cell file's docks hold the start tool in its home dock)."""
    from erobs_bt.script.vocabulary import dock_conflict

    docks = ctx.meta.get("erobs_bt.docks") if ctx is not None else None
    conflict = dock_conflict(docks, start_gripper) if docks else None
    if ctx is not None and conflict is not None:
        if ctx.params.get("as_json"):
            click.echo(json.dumps({"valid": False, "error": f"configuration error: {conflict}"}))
        else:
            print_configuration_error(ValueError(conflict))
        ctx.exit(EXIT_INVALID)


def _cell_callback(ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path | None:
    """``--cell`` as a file in erobs_bt's cell format (a beamline file is compiled; ``--docks``
    applied; see :func:`erobs_bt.world.beamline.resolve_cell_file`); what compiling it warned
    of (a missing ``poses_file``) is printed as ``warning <text>`` on stderr."""
    docks = ctx.meta.get("erobs_bt.docks")
    # Here, not in --docks' own callback: the eager options (--json among them) are all known.
    _refuse_dock_conflict(ctx, None)
    if value is None and not docks and not os.environ.get("BEAMBOT_BEAMLINE_CONFIG", "").strip():
        return None  # the packaged cell: nothing to import
    from erobs_bt.world.beamline import beamline_warnings, resolve_cell_file
    from erobs_bt.world.cell import CellConfigError

    try:
        cell = resolve_cell_file(value, workspace=ctx.meta.get("erobs_bt.workspace"), docks=docks)
    except CellConfigError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=_param) from None
    for warning in beamline_warnings(cell):
        echo_labelled("warning", warning, err=True, fg="yellow")
    return cell


#: ``--docks``' help (the node's ``docks`` parameter takes the same text).
DOCKS_HELP = (
    "What the docks hold at start, e.g. 1=hande,4=epick (3= for an empty dock; a dock not "
    "named is empty), instead of what the cell file says (a beamline file's dock_number). "
    "The tool on the arm is the script's start_gripper."
)


_CELL_FILE_OPTION = click.option(
    "--cell",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    callback=_cell_callback,
    help=CELL_HELP,
)
_WORKSPACE_OPTION = click.option(
    "--workspace",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    is_eager=True,
    expose_value=False,
    callback=_workspace_callback,
    help="Workspace root that the relative paths of a beamline file are under "
    "(default: the nearest folder above it with a src/ folder, as EROBS resolves them).",
)


_DOCKS_OPTION = click.option(
    "--docks",
    metavar="N=GRIPPER,...",
    is_eager=True,
    expose_value=False,
    callback=_docks_callback,
    help=DOCKS_HELP,
)


def _CELL_OPTION(command: Any) -> Any:
    """``--cell``, ``--workspace`` (a beamline file's workspace root) and ``--docks``."""
    return _DOCKS_OPTION(_WORKSPACE_OPTION(_CELL_FILE_OPTION(command)))


@click.group(cls=_Verbs, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="erobs_bt", message="erobs-bt %(version)s")
def main() -> None:
    """Run EROBS lab-robot task scripts as behaviour trees."""
    _interruptible()


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (``kill``, a service manager, a container stop).

    A :class:`KeyboardInterrupt`, so every "until Ctrl-C" command ends as it does on Ctrl-C.
    ``run`` and ``preview`` take SIGTERM over while their engine runs (:func:`_sigterm_pipe`):
    a running goal is stopped at once instead of at the next unit boundary (the arm
    decelerates to rest, the goal ends STOPPED) and the process ends promptly, with its run
    log, ROS 2 bag and live view closed.
    """


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


def _sigterm_pipe() -> SignalPipe | None:
    """SIGTERM on a :class:`~erobs_bt.commandline.SignalPipe` for ``run``/``preview``, when
    ``erobs-bt`` is the program (:func:`_interruptible` installed :func:`_terminate`), else
    ``None`` (a host program keeps its own handler).

    Raising :class:`Terminated` from the handler could interrupt the main thread anywhere,
    in the engine's shutdown or inside a lock; the run's loops look at the pipe instead
    (:func:`_wait`, the keyboard at a pause, :func:`_linger`), stop the goal now and end the
    process, whatever the live view was doing. A second SIGTERM while the arm stops and the
    files close is only noted on the pipe.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is not _terminate:
        return None
    return SignalPipe((signal.SIGTERM,))


def _interruptible() -> None:
    """Let SIGINT (Ctrl-C, ``kill -INT``) raise KeyboardInterrupt even if it was ignored, and
    SIGTERM raise :class:`Terminated`, when ``erobs-bt`` is the program.

    A shell without job control starts background commands (``erobs-bt run --view &`` in a
    script, a CI step) with SIGINT ignored, and Python then installs no handler of its own,
    so the commands that run "until Ctrl-C" (``run --view``, ``log --view``, ``serve``) could
    only be killed. The user's intent is plain, so the default handler is put back. SIGTERM
    would otherwise end the process on the spot, leaving the bag without its summary and the
    arm's last motion unstopped by us. Signal handlers belong to the whole process, so a
    program that calls these commands (a test runner) keeps its own.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not is_the_program():
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)


@main.command()
@click.argument("script", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--poses",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help=POSES_HELP,
)
@_CELL_OPTION
@click.option("--no-batching", is_flag=True, help="One unit per step (enable_batching:=false).")
@click.option("--json", "as_json", is_flag=True, is_eager=True, help="Print the report as JSON.")
def validate(script: Path, poses: Path | None, cell: Path | None, no_batching: bool, as_json: bool) -> None:
    """Validate SCRIPT and show its steps, units, cache eligibility and key digest.

    Exactly the checks `run`, `preview` and the ROS node make before anything moves.
    """
    try:
        plan = load_plan(script, poses=poses, cell=cell, enable_batching=not no_batching)
    except ConfigurationError as exc:
        if as_json:
            click.echo(json.dumps({"valid": False, "error": f"configuration error: {exc}"}))
            sys.exit(EXIT_INVALID)
        fail_configuration(exc)
    except (ScriptError, OSError) as exc:
        if as_json:
            click.echo(json.dumps({"valid": False, "error": str(exc)}))
            sys.exit(EXIT_INVALID)
        fail_invalid(script, exc)
    _refuse_dock_conflict(click.get_current_context(silent=True), plan.script.start_gripper)
    report = plan.describe()
    registry = pose_registry_source(cell, poses)  # a beamline's own file, not its compiled copy
    docks_text, dock_issue = assumed_docks(cell, plan)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "valid": True,
                    **report,
                    "pose_registry": None if registry is None else str(registry),
                    "docks_at_start": docks_text,
                    "dock_problem": dock_issue or None,
                },
                indent=2,
            )
        )
        return
    echo_labelled(
        "valid",
        f"{script}: {count(report['tasks'], 'task')} → {count(report['total_steps'], 'step')}, "
        f"{count(len(plan.units), 'unit')} (batching {'off' if no_batching else 'on'})",
        err=False,
        fg="green",
    )
    print_warnings(plan)
    rows = []
    for unit in report["units"]:
        steps = unit["steps"]
        span = f"{steps[0]}" if len(steps) == 1 else f"{steps[0]}–{steps[-1]}"
        rows.append([str(unit["unit"]), unit["kind"], span, unit["label"]])
    lines = [
        *aligned(["unit", "kind", "steps", "action"], rows),
        f"cache eligible: {'yes' if report['cache_eligible'] else 'no (needs exactly one batch)'}",
        f"previewable:    {'yes' if report['previewable'] else 'no — ' + report['preview_error']}",
        f"key sha256:     {report['key_sha256']}",
        describe_pose_registry(cell, poses),
        f"docks at start: {docks_text}" + (f" — {dock_issue} (set --docks)" if dock_issue else ""),
    ]
    click.echo("\n".join(lines), color=use_color())


def assumed_docks(cell: Path | None, plan: Any) -> tuple[str, str]:
    """``("1: hande, 2: empty, …", problem)``: the dock contents ``validate`` assumed when the
    goal starts on a fresh cell (:func:`erobs_bt.script.vocabulary.start_docks`, as the engine
    does), and why its tool exchanges cannot run with them
    (:func:`erobs_bt.script.parse.dock_problem`; ``""`` when they can)."""
    from erobs_bt.script.parse import dock_problem
    from erobs_bt.script.vocabulary import CellVocabulary, dock_contents_text, start_docks

    vocabulary = CellVocabulary.load(cell) if cell is not None else CellVocabulary.default()
    docks = start_docks(vocabulary.docks, plan.script.start_gripper)
    return dock_contents_text(docks), dock_problem(plan.script.steps, docks)


@main.command()
@_CELL_OPTION
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to a file (default: stdout).",
)
def schema(cell: Path | None, output: Path | None) -> None:
    """Print the JSON Schema (draft 2020-12) of task scripts for the cell.

    Use it in an editor (a "$schema" key, VS Code's json.schemas) or with
    check-jsonschema --schemafile. The gripper and dock names are the cell's.
    """
    from erobs_bt.script.schema import script_schema
    from erobs_bt.script.vocabulary import CellVocabulary

    try:
        vocabulary = CellVocabulary.load(cell) if cell is not None else CellVocabulary.default()
    except (ScriptError, OSError) as exc:
        fail_configuration(exc)
    text = json.dumps(script_schema(vocabulary), indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text, encoding="utf-8")
    click.echo(f"wrote {output} (JSON Schema draft 2020-12)")


def _engine_options(command: Any) -> Any:
    """The options shared by ``run`` and ``preview``."""
    options = [
        click.option(
            "--poses",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help=POSES_HELP,
        ),
        _CELL_FILE_OPTION,
        _WORKSPACE_OPTION,
        _DOCKS_OPTION,
        click.option(
            "--faults",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="Fault-injection YAML for the simulated cell.",
        ),
        click.option(
            "--backend",
            type=click.Choice(BACKEND_KINDS),
            default="sim",
            show_default=True,
            help="Motion backend.",
        ),
        click.option("--no-batching", is_flag=True, help="One unit per step (enable_batching:=false)."),
        click.option(
            "--speed",
            type=click.FloatRange(min=0.01),
            default=1.0,
            show_default=True,
            help="Simulated-time factor (2 = twice real time); a run ends by saying what the "
            "simulated arm delivered.",
        ),
        click.option(
            "--repeat",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Run the goal N times; in between, a simulated cell is reset to its initial state "
            "(arm, tools, docks, parts, pipettor), any other robot returns to the start joint state.",
        ),
        click.option(
            "--log",
            "log_file",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Run log, JSON Lines (default: a new file under $EROBS_BT_LOG_DIR).",
        ),
        click.option(
            "--mcap",
            "mcap_file",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Also record the run as a ROS 2 bag (MCAP: joint states, state, feedback, tree "
            "snapshots on the node's topics; Foxglove, erobs-bt log and ros2 bag play open it). Default: on, "
            "beside the run log with the suffix .mcap.",
        ),
        click.option("--no-mcap", is_flag=True, help="Do not record the MCAP bag."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@main.command()
@click.argument("script", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_engine_options
@click.option(
    "--auto-resume",
    is_flag=True,
    help="Resume the script's pause steps by themselves instead of waiting for Enter (an "
    "operator's pause from the live view or --start-paused still waits for Resume).",
)
@click.option(
    "--resume-after",
    type=click.FloatRange(min=0.0),
    default=0.5,
    show_default=True,
    help="Seconds a pause waits before --auto-resume resumes it.",
)
@click.option(
    "--no-plan-ahead",
    is_flag=True,
    help="Plan each motion unit only when it starts (plan_ahead:=false); by default the next "
    "unit is planned while one executes.",
)
@click.option(
    "--replay-scene-check",
    is_flag=True,
    help="Before a cached trajectory is replayed (--repeat), check it against the planning scene "
    "as it is now (replay_scene_check:=true); a collision refuses it (SCENE_CHANGED) and the "
    "batch is planned afresh. Off by default, as the specification's replay runs no collision pass.",
)
@click.option(
    "--view",
    is_flag=True,
    help="Serve the operator's console (live web view) while running, and after the run until Ctrl-C.",
)
@click.option(
    "--view-port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port of the live view (0 picks a free one).",
)
@click.option(
    "--view-host",
    "--host",
    "view_host",
    default="127.0.0.1",
    show_default=True,
    help="Address the live view binds; any non-loopback address (a LAN) requires the access "
    "token printed at start.",
)
@click.option(
    "--start-paused",
    is_flag=True,
    help="Submit the goal paused before its first unit: nothing moves until Resume (Enter, or "
    "Resume in the live view of --view, so the operator can open the page first).",
)
def run(
    script: Path,
    auto_resume: bool,
    resume_after: float,
    no_plan_ahead: bool,
    replay_scene_check: bool,
    view: bool,
    view_port: int,
    view_host: str,
    start_paused: bool,
    **options: Any,
) -> None:
    """Execute SCRIPT on the simulated cell with live per-unit progress."""
    sys.exit(
        _run_goals(
            script,
            dry_run=False,
            auto_resume=resume_after if auto_resume else None,
            view_port=view_port if view else None,
            plan_ahead=not no_plan_ahead,
            replay_scene_check=replay_scene_check,
            view_host=view_host,
            start_paused=start_paused,
            **options,
        )
    )


@main.command()
@click.argument("script", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_engine_options
def preview(script: Path, **options: Any) -> None:
    """Plan SCRIPT without moving (moveto/end_effector steps only)."""
    sys.exit(_run_goals(script, dry_run=True, auto_resume=None, view_port=None, **options))


def _docks_at_start_line(engine: Any, plan: Any) -> str:
    """``docks at start: 1: hande, 2: pipettor, …``: what the docks of ``engine``'s freshly
    built cell hold when ``plan``'s goal starts, by the rule the engine applies
    (:func:`erobs_bt.script.vocabulary.start_docks`) and in ``validate``'s words."""
    from erobs_bt.script.vocabulary import dock_contents_text, start_docks

    configured = {dock.number: dock.gripper for dock in engine.cell.docks}
    return f"docks at start: {dock_contents_text(start_docks(configured, plan.script.start_gripper))}"


def _run_goals(
    script: Path,
    *,
    dry_run: bool,
    auto_resume: float | None,
    poses: Path | None,
    cell: Path | None,
    faults: Path | None,
    backend: str,
    no_batching: bool,
    speed: float,
    repeat: int,
    log_file: Path | None,
    mcap_file: Path | None,
    no_mcap: bool,
    view_port: int | None,
    plan_ahead: bool = True,
    replay_scene_check: bool = False,
    view_host: str = "127.0.0.1",
    start_paused: bool = False,
) -> int:
    # The goal plan first, with the cell's parser: an invalid script is refused before the
    # simulated cell is even built (or rich imported), with the message the node and
    # `validate` give. The registry is decided once, for the plan and the engine alike.
    registry_line = describe_pose_registry(cell, poses)
    poses = pose_registry_file(cell, poses)
    try:
        plan = load_plan(script, poses=poses, cell=cell, enable_batching=not no_batching, preview=dry_run)
    except ConfigurationError as exc:
        print_configuration_error(exc)
        return EXIT_INVALID
    except (ScriptError, NotPreviewableError, OSError) as exc:
        print_invalid(script, exc)
        return EXIT_INVALID
    print_warnings(plan)
    _refuse_dock_conflict(click.get_current_context(silent=True), plan.script.start_gripper)

    with _collector_paused():
        from erobs_bt.console import ConsoleProgress, make_console
        from erobs_bt.keyboard import Keyboard, TerminalPauses
        from erobs_bt.session import EngineConfig, build_engine
        from erobs_bt.settings import EngineSettings
        from erobs_bt.viz.runlog import RunLogWriter

        console = make_console()
        errors = make_console(stderr=True)
        text = script.read_bytes().decode("utf-8")  # valid UTF-8: the plan was made from these bytes
        context = click.get_current_context(silent=True)
        config = EngineConfig(
            backend=backend,
            docks=context.meta.get("erobs_bt.docks") if context is not None else None,
            cell=cell,
            poses=poses,
            faults=faults,
            settings=EngineSettings(
                speed=speed,
                enable_batching=not no_batching,
                plan_ahead=plan_ahead,
                replay_scene_check=replay_scene_check,
            ),
        )
        progress = ConsoleProgress(console)
        try:
            engine = build_engine(config, listener=progress)
        except (ScriptError, ValueError, OSError) as exc:
            print_configuration_error(exc)
            return EXIT_INVALID
    units = plan.units
    log_path = log_file if log_file is not None else default_log_path(script)
    run_log = RunLogWriter(log_path)
    run_log.follow_joint_states(engine.backend)  # joint states for the history's replay
    engine.orchestrator.listener.add(run_log)
    bag = None if no_mcap else _start_bag(engine, mcap_file, log_path, errors)
    live_view = None
    term = _sigterm_pipe()
    try:
        if view_port is not None:
            from erobs_bt.viz.web import console_pages, start_live_view

            pages = console_pages(engine.orchestrator, log_files=[log_path])
            live_view = start_live_view(engine.orchestrator, host=view_host, port=view_port, routes=pages)
            console.print(f"live view: [link={live_view.url}]{live_view.url}[/link]", highlight=False)
            if live_view.access.token is not None:
                console.print(
                    f"access token: {live_view.access.token}  (the link carries it; every request needs it)",
                    highlight=False,
                )
        verb = "preview" if dry_run else "run"
        if not plan.eligible:
            cache = "ineligible"
        elif dry_run:
            cache = "eligible (preview plans afresh and stores a successful plan)"
        else:
            cache = "eligible"
        console.print(
            f"[bold]{verb}[/] {script.name}: {count(plan.total_steps, 'step')}, {count(len(units), 'unit')}, "
            f"backend {backend}, speed ×{speed:g}, cache {cache}",
            highlight=False,
        )
        console.print(registry_line, style="dim", highlight=False, markup=False)
        if not dry_run and engine.backend.dock_contents() is not None:  # a backend with a tool changer
            console.print(_docks_at_start_line(engine, plan), highlight=False, markup=False)
        start = engine.backend.joint_positions()
        elsewhere = f"the live view ({live_view.url})" if live_view is not None else ""
        pauses = TerminalPauses(engine.orchestrator, console, Keyboard(), elsewhere=elsewhere)
        if start_paused:
            console.print(
                "[yellow]starting paused[/]: nothing moves until Resume "
                + ("(Enter here, or Resume in the live view)" if live_view is not None else "(Enter)"),
                highlight=False,
            )
        code = 0
        for attempt in range(1, repeat + 1):
            if term is not None and term.received:  # between repeats: no further run
                console.print("[red]SIGTERM[/]: no further repeat", highlight=False)
                break
            if attempt > 1 and not dry_run and not _start_over(engine, start, progress, console):
                code = EXIT_FAILED
                break
            console.rule(f"{verb} {attempt}/{repeat}")
            progress.begin(len(units))
            handle = engine.orchestrator.submit(text, dry_run=dry_run, paused=start_paused and attempt == 1)
            if live_view is not None:
                live_view.note_submitted(handle.goal_id, text)
            result = _wait(engine, handle, auto_resume, console, pauses, term)
            console.print(
                progress.summary(result, title=f"{script.name} — {verb} {attempt}/{repeat}", dry_run=dry_run)
            )
            if not result.success:
                code = EXIT_FAILED
                break
        delivered = delivered_speed(engine.backend, speed)
        if delivered is not None and not dry_run:
            console.print(delivered, highlight=False)
        if live_view is not None:
            if term is not None and term.received:
                console.print("[red]SIGTERM[/]: closing the live view and exiting", highlight=False)
            else:
                _linger(live_view, console, term)
        return code
    finally:
        if live_view is not None:
            live_view.close()
        engine.close()
        run_log.close()
        console.print(f"run log: {log_path}  (erobs-bt log {log_path})", highlight=False)
        if bag is not None and bag.close() is not None:
            from erobs_bt.viz.bag import how_to_open

            console.print(f"ROS 2 bag: {bag.path}  ({how_to_open(bag.path)})", highlight=False)
        if term is not None:
            # erobs-bt is the program and exits now: a SIGTERM during the interpreter's own
            # shutdown is ignored rather than raised there.
            term.close(ignore=True)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while ``run`` imports the engine and builds it.

    Those imports create some hundred thousand objects that all stay alive (modules,
    classes, functions), and each time enough accumulate the collector traverses all of
    them: about a tenth of the CPU before the first motion (``bench/bench_startup.py``).
    Reference counting still frees everything meanwhile; afterwards the collector runs as
    usual. When ``erobs-bt`` is the program (not a command called from another one, such as
    a test runner), the objects of the start-up are also moved out of its way for good
    (``gc.freeze``): freezing is a decision for the whole process, and a host program may
    still need the collector to free its own cycles (an rclpy node caught in one leaves its
    ROS domain only when collected). Nothing is changed when the collector was disabled.
    """
    import gc

    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if is_the_program():
            gc.freeze()
        gc.enable()


def delivered_speed(backend: Any, asked: float) -> str | None:
    """``simulated 2.75 s of motion in 0.0031 s of wall time: 887× (asked 1,000×)``: what the
    simulated arm's controller measured (:class:`~erobs_bt.backends.base.MeasuresPlayback`,
    :meth:`SimController.playback <erobs_bt.backends.sim.controller.SimController.playback>`)
    over every motion of the process; ``None`` for a backend without one (a real arm runs in
    real time) or before any motion."""
    from erobs_bt.backends.base import HasArm, MeasuresPlayback

    arm = backend.arm if isinstance(backend, HasArm) else None
    if not isinstance(arm, MeasuresPlayback):
        return None
    played = arm.playback()
    if not played.simulated > 0.0:
        return None

    def factor(value: float) -> str:
        return f"{value:,.0f}" if value >= 100.0 else f"{value:.3g}"

    return (
        f"simulated {played.simulated:.2f} s of motion in {played.wall:.4f} s of wall time: "
        f"{factor(played.factor)}× (asked {factor(asked)}×)"
    )


def _start_bag(engine: Any, path: Path | None, log_path: Path, errors: Console) -> Any:
    """Record the run to ``path`` (default: beside the run log) as an MCAP bag opened when
    the arm first moves (:class:`~erobs_bt.ros.record.mcap_deferred.DeferredRecorder`); a warning
    when it cannot be opened."""
    from erobs_bt.ros.record.mcap_deferred import DeferredRecorder

    def warn(reason: str) -> None:
        errors.print(f"[yellow]not recording the MCAP bag[/]: {reason}", highlight=False)

    bag = DeferredRecorder(path, engine.backend, log_path=log_path, on_error=warn)
    engine.orchestrator.listener.add(bag)
    return bag


def _linger(live_view: Any, console: Console, term: SignalPipe | None = None) -> None:
    """Keep the live view serving after the run until Ctrl-C or SIGTERM (the page says so too)."""
    import threading

    live_view.set_lingering(True)
    forever = threading.Event()
    try:  # from the message on: a Ctrl-C as soon as it is shown ends the view as any other
        console.print(
            f"[bold]the run is over; the live view keeps serving at {live_view.url} — "
            "press Ctrl-C to exit[/]",
            highlight=False,
        )
        while not (term.wait(1.0) if term is not None else forever.wait(1.0)):
            pass
        console.print("SIGTERM: closing the live view", highlight=False)
    except KeyboardInterrupt:
        console.print("Ctrl-C: closing the live view", highlight=False)


def default_log_path(script: Path) -> Path:
    """``$EROBS_BT_LOG_DIR`` (default ``~/.local/state/erobs_bt/runs``)/``<UTC time>_<script>.jsonl``."""
    import time

    from erobs_bt.viz.runlog import default_log_dir

    return default_log_dir() / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}_{script.stem}.jsonl"


def _start_over(engine: Any, start: Any, progress: Any, console: Console) -> bool:
    """Bring the cell back to where the first run started, before a repeat.

    A simulated cell is reset (:meth:`~erobs_bt.orchestrator.Orchestrator.reset_simulation`:
    arm, tools, docks, parts, pipettor as the cell config starts them). Any other backend
    refuses a reset: the arm then goes back to the start joint state with a one-step goal
    (:func:`_return_to`), and the console says what is not restored (tools, parts and the
    pipettor stay as the run left them, so the repeat may fail for that).

    Returns:
        False when the repeat cannot start (the return move failed; it says why).
    """
    reply = engine.orchestrator.reset_simulation(by="erobs-bt run --repeat")
    if reply.success:
        console.print(reply.message, style="dim", highlight=False, markup=False)
        return True
    console.print(
        f"{reply.message}: the tools, parts and pipettor stay as the run left them "
        "(the repeat fails where it needs them as they were)",
        style="yellow",
        highlight=False,
        markup=False,
    )
    if start is None:
        console.print("[yellow]no start joint state was known: the arm stays where it is[/]")
        return True
    return _return_to(engine, start, progress, console)


def _return_to(engine: Any, start: Any, progress: Any, console: Console) -> bool:
    """Move back to the start state with a one-step goal, so a repeat starts where the first run did."""
    import math

    document = {
        "start_gripper": engine.backend.current_gripper(),
        "poses": {"repeat_start": [math.degrees(a) for a in start]},
        "tasks": [{"task_type": "moveto", "target": "repeat_start", "planning_type": "joint"}],
    }
    from erobs_bt.terminal import make_console

    console.print("[dim]returning to the start state for the next repeat[/]")
    progress.begin(1)
    result = engine.orchestrator.submit(json.dumps(document), dry_run=False).wait()
    if not result.success:
        make_console(stderr=True).print(
            f"[red]could not return to the start state[/]: {result.error_message}"
        )
    return bool(result.success)


def _wait(
    engine: Any,
    handle: Any,
    auto_resume: float | None,
    console: Console,
    pauses: TerminalPauses,
    term: SignalPipe | None = None,
) -> Any:
    """Wait for a goal, attending its pauses (the keyboard beside the live view:
    :class:`erobs_bt.keyboard.TerminalPauses`, or ``--auto-resume``); Ctrl-C cancels at the
    next unit boundary (twice: stops now), SIGTERM stops now (``term``, the pipe it arrives
    on; :class:`Terminated` where there is none)."""
    import time

    from erobs_bt.orchestrator import State

    orchestrator = engine.orchestrator

    def sleep(seconds: float) -> bool:
        """Sleep; True when SIGTERM has arrived."""
        if term is None:
            time.sleep(seconds)
            return False
        return term.wait(seconds)

    def stop_now() -> Any:
        console.print("[red]SIGTERM: stopping now[/]: the arm decelerates to rest, the goal aborts (STOPPED)")
        orchestrator.stop()
        return handle.wait()

    def until_done() -> Any:
        while not handle.done():
            if sleep(0.02):
                return stop_now()
        return handle.result

    try:
        while not handle.done():
            if term is not None and term.received:
                return stop_now()
            if orchestrator.state is State.PAUSED:
                if auto_resume is not None and pauses.at_pause_step():
                    if sleep(auto_resume):
                        continue
                    console.print("[yellow]auto-resume[/]", highlight=False)
                    orchestrator.resume()
                else:
                    pauses.attend(handle, interrupted=lambda: term is not None and term.received)
            sleep(0.02)
    except Terminated:
        return stop_now()
    except KeyboardInterrupt:
        console.print("[yellow]Ctrl-C: cancelling at the next unit boundary (Ctrl-C again to stop now)[/]")
        orchestrator.cancel()
        try:
            return until_done()
        except KeyboardInterrupt:
            console.print("[red]stopping now[/]: the arm decelerates to rest, the goal aborts (STOPPED)")
            orchestrator.stop()
            return handle.wait()
    return handle.result


if __name__ == "__main__":
    main()

"""``erobs-bt`` verbs that talk to (or start) the ``erobs_bt`` ROS 2 node.

* ``serve`` — run the node in this process with ``config/erobs_bt.yaml`` plus overrides.
* ``send SCRIPT`` — send a goal; print feedback as it arrives and the result.
* ``pause`` / ``resume`` / ``clear-cache`` — call the node's Trigger services.
* ``stop`` — stop now (``~/stop``): the arm decelerates to rest at once, the goal aborts
  with ``STOPPED``, the node stays IDLE. Unlike ``cancel`` it does not wait for the unit
  boundary; it also works while paused and during planning.
* ``reset-fault`` — clear FAULTED (``~/reset_fault``) after checking the cell; refused
  when the node is not faulted.
* ``reset-sim`` — put the simulated cell back in its initial state (``~/reset_simulation``,
  ``std_srvs/srv/Empty``): the answer is the node's log line on ``/rosout``
  (:meth:`~erobs_bt.ros.client.client.ErobsBtClient.reset_simulation`); refused (exit 1) while a
  goal runs and on a backend that is not simulated.
* ``cancel`` — cancel the node's active goal through the action's cancel service with the
  protocol's "cancel all goals" request (zero goal id and stamp). No extra service is
  needed, any action client can do the same, and the goal still ends with the action
  status CANCELED at the next unit boundary (at once while paused). A goal that has
  already finished is not listed in the answer: "nothing cancelled", exit 1.
* ``state`` — print the latched execution state, gripper and last tree snapshot.
* ``scene add-box NAME --size X Y Z --position X Y Z [--frame base_link]``, ``scene remove
  NAME``, ``scene list`` — the live planning scene (:mod:`erobs_bt.ros.node.scene`) through
  MoveIt's ``apply_planning_scene`` and ``get_planning_scene`` in the node's namespace.
* ``watch`` — draw the node's tree in the terminal as it runs (:mod:`erobs_bt.ros.client.watch`), or
  a live web view's (``--url``: no ROS).

The simulated hardware and move_group nodes' verbs (``sim-hardware``, ``sim-move-group``) are
in :mod:`erobs_bt.doubles.commands`.

rclpy is imported inside the functions only: the ``erobs-bt`` group must start fast for
the verbs that do not touch ROS. The lead adds :data:`COMMANDS` to the group.

Exit codes: 0 success (``serve``: stopped by Ctrl-C/SIGINT or SIGTERM); 1 the goal failed,
was rejected (the node was busy or FAULTED) or cancelled, or a request was refused; 2 the
script was refused before anything moved (invalid, or not previewable for ``send
--dry-run``: what ``validate``/``preview`` exit with for it), or the node could not start
(``serve``: an invalid parameter or configuration file); 3 no node in reach (not
discovered: wrong name, ``ROS_DOMAIN_ID`` or discovery range; the message says which to
check).
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from erobs_bt.ros.client.client import ErobsBtClient
    from erobs_bt.ros.node.node import ErobsBtNode

from erobs_bt.commandline import EXIT_FAILED, EXIT_INVALID
from erobs_bt.wording import steps_done

#: No node answered (distinct from a failed goal and from an invalid script).
EXIT_UNREACHABLE = 3

#: ``error_code`` values of a goal the node refused for its script, before anything moved:
#: the same refusals ``validate``, ``run`` and ``preview`` answer with :data:`EXIT_INVALID`
#: (an invalid script; a preview, ``send --dry-run``, of a script that cannot be previewed).
SCRIPT_REFUSALS = frozenset({"INVALID_SCRIPT", "NOT_PREVIEWABLE"})


def goal_exit_code(success: bool, error_code: str) -> int:
    """``send``'s exit status for a goal's result: 0 it succeeded, :data:`EXIT_INVALID` its
    script was refused (:data:`SCRIPT_REFUSALS`, as ``preview``/``run`` exit for the same
    script), else :data:`EXIT_FAILED` (planning, execution, cancel, stop)."""
    if success:
        return 0
    return EXIT_INVALID if error_code in SCRIPT_REFUSALS else EXIT_FAILED


_node_option = click.option(
    "--node",
    default="/erobs_bt",
    show_default=True,
    help="Fully qualified name of the erobs_bt node (its endpoints are <node>/execute, ...).",
)
_timeout_option = click.option(
    "--timeout",
    type=float,
    default=10.0,
    show_default=True,
    help="Seconds to wait for the node to be discovered and to answer.",
)


def _client(node: str) -> ErobsBtClient:
    from erobs_bt.ros.client.client import ErobsBtClient

    return ErobsBtClient(node)


def _timeout_exit(exc: TimeoutError) -> int:
    """:data:`EXIT_UNREACHABLE` when no node was discovered, else :data:`EXIT_FAILED`."""
    from erobs_bt.ros.client.client import NodeUnreachable

    return EXIT_UNREACHABLE if isinstance(exc, NodeUnreachable) else EXIT_FAILED


def _ros_value(value: object) -> str:
    """A ``-p name:=value`` value (rcl parses it as YAML; strings are JSON-quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return json.dumps(str(value))


def serve_arguments(
    params_file: Path,
    *,
    backend: str | None = None,
    cell: Path | None = None,
    poses: Path | None = None,
    speed: float | None = None,
    no_batching: bool = False,
    faults: Path | None = None,
    docks: str | None = None,
) -> list[str]:
    """The ROS arguments ``serve`` starts the node with: the params file, then overrides.

    Paths are made absolute (the node resolves relative paths against its own cwd).
    """
    overrides: dict[str, object] = {}
    if backend is not None:
        overrides["backend"] = backend
    if cell is not None:
        overrides["cell_config"] = str(cell.resolve())
    if poses is not None:
        overrides["poses_file"] = str(poses.resolve())
    if speed is not None:
        overrides["speed"] = float(speed)
    if no_batching:
        overrides["enable_batching"] = False
    if faults is not None:
        overrides["faults_file"] = str(faults.resolve())
    if docks is not None:
        overrides["docks"] = docks
    args = ["--ros-args", "--params-file", str(params_file)]
    for name, value in overrides.items():
        args += ["-p", f"{name}:={_ros_value(value)}"]
    return args


def _existing_file() -> Any:
    return click.Path(exists=True, dir_okay=False, path_type=Path)


def _console(*, stderr: bool = False, closed_note: str | None = None) -> Any:
    from erobs_bt.terminal import make_console

    return make_console(stderr=stderr, closed_note=closed_note)


@click.command()
@click.option("--params-file", type=_existing_file(), help="ROS params file [default: config/erobs_bt.yaml].")
@click.option("--backend", type=click.Choice(["sim", "scripted"]), help="Motion backend (parameter backend).")
@click.option("--cell", type=_existing_file(), help="Cell YAML for the sim (parameter cell_config).")
@click.option(
    "--poses",
    type=_existing_file(),
    help="Pose registry YAML, degrees (parameter poses_file; default: the packaged config/poses.yaml "
    "with the packaged cell, the poses.yaml beside a --cell file).",
)
@click.option("--speed", type=click.FloatRange(min=0.0, min_open=True), help="Sim playback speed factor.")
@click.option("--no-batching", is_flag=True, help="One unit per step (enable_batching:=false).")
@click.option("--faults", type=_existing_file(), help="Sim fault-injection YAML (parameter faults_file).")
@click.option(
    "--docks",
    metavar="N=GRIPPER,...",
    help="What the docks hold at start (parameter docks), e.g. 1=hande,4=epick.",
)
@click.option(
    "--view/--no-view", default=True, show_default=True, help="Serve the live web view on 127.0.0.1."
)
@click.option(
    "--view-port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Live view port (0: any).",
)
def serve(
    params_file: Path | None,
    backend: str | None,
    cell: Path | None,
    poses: Path | None,
    speed: float | None,
    no_batching: bool,
    faults: Path | None,
    docks: str | None,
    view: bool,
    view_port: int,
) -> None:
    """Run the erobs_bt ROS 2 node in this process until Ctrl-C (SIGINT) or SIGTERM,
    with the live web view of its tree (the same pause/resume/cancel as the services)."""
    from erobs_bt.paths import config_file
    from erobs_bt.ros.node.node import run

    console = _console()
    params = params_file if params_file is not None else config_file("erobs_bt.yaml")
    args = serve_arguments(
        params,
        backend=backend,
        cell=cell,
        poses=poses,
        speed=speed,
        no_batching=no_batching,
        faults=faults,
        docks=docks,
    )

    views: list[Any] = []
    late = _LateSignals()

    def announce(node: ErobsBtNode) -> None:
        import os

        late.serving = True
        if view:
            from erobs_bt.viz.web import console_pages, start_live_view

            # The 3D cell view and the run history (of the node's own run-log folder).
            pages = console_pages(node.orchestrator, log_folders=[node.settings.run_log_folder()])
            views.append(start_live_view(node.orchestrator, port=view_port, routes=pages))
        settings = node.settings
        table = Table(title=f"erobs_bt listening (node {node.get_fully_qualified_name()})", show_header=False)
        table.add_row("ROS_DOMAIN_ID", os.environ.get("ROS_DOMAIN_ID", "0"))
        table.add_row("discovery range", os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", ""))
        table.add_row("params file", str(params))
        table.add_row("backend", f"{settings.backend} (speed {settings.speed:g})")
        table.add_row("batching", "on" if settings.enable_batching else "off")
        for key, name in node.endpoints().items():
            table.add_row(key, name)
        for live in views:
            table.add_row("live view", live.url)
        console.print(table)
        console.print("Ctrl-C to stop.", style="dim")

    try:
        status = run(args, on_ready=announce)
    finally:
        for live in views:
            live.close()
        late.finish()
    sys.exit(status)


class _LateSignals:
    """SIGINT and SIGTERM while ``serve`` shuts down: noted on stderr and otherwise ignored.

    While the node serves, :func:`erobs_bt.ros.process.serve` handles both (the first one
    stops the node); it puts the handlers it found back as it returns, and the live view
    closes after that. A second Ctrl-C in that time (an operator who presses again, or
    ``scripts/env.sh``, which passes the terminal's SIGINT on to the process that got it
    too) used to raise ``KeyboardInterrupt`` there, and ``serve`` exited 1 (click's
    "Aborted!") or died by the signal (130) instead of 0. Before the node serves, the
    handlers found are called (Ctrl-C during start-up interrupts it as before).

    When ``erobs-bt`` is the program, :meth:`finish` then ignores both signals for the
    rest of the process: the interpreter's own shutdown (rclpy's and Fast DDS's teardown,
    about a second) runs after Python has put the default handlers back, and a signal there
    would still kill it (130). A host program (a test runner calling the command) gets its
    own handlers back.
    """

    _SIGNALS = ("SIGINT", "SIGTERM")

    def __init__(self) -> None:
        import signal
        import threading

        #: The node is serving: a signal that reaches these handlers comes during shutdown.
        self.serving = False
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for name in self._SIGNALS:
                number = getattr(signal, name)
                self._previous[number] = signal.signal(number, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        import os
        import signal

        if self.serving:
            os.write(2, b"erobs_bt: already shutting down (stopping the arm, closing the live view)\n")
            return
        previous = self._previous.get(signum)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:  # what the signal would have done: end the process
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def finish(self) -> None:
        """The command is done: put back the handlers found, or, when ``erobs-bt`` is the
        program and the node has served, ignore the signals until the process has exited."""
        import signal

        from erobs_bt.commandline import is_the_program

        exiting = self.serving and is_the_program()
        for number, handler in self._previous.items():
            signal.signal(number, signal.SIG_IGN if exiting else handler)


def _feedback_line(feedback: Any) -> str:
    cache = f"  cache [bold]{feedback.cache_status}[/]" if feedback.cache_status else ""
    return (
        f"[cyan]step {feedback.current_step}/{feedback.total_steps}[/]  unit {feedback.unit_index}  "
        f"{feedback.current_action}{cache}  [bold]{feedback.progress_percentage:5.1f}%[/]  "
        f"[dim]{feedback.status_message}  gripper {feedback.current_gripper}[/]"
    )


@click.command()
@click.argument("script", type=_existing_file())
@click.option("--dry-run", is_flag=True, help="Preview (plan only) instead of execute.")
@_node_option
@_timeout_option
def send(script: Path, dry_run: bool, node: str, timeout: float) -> None:
    """Send SCRIPT to the node as a goal; print feedback and the result (exit 0 on success).

    Ctrl-C while the goal runs cancels it (at the next unit boundary) and waits for the
    result; a second Ctrl-C stops it now (``~/stop``). When stdout closes (``send … | head``)
    it stops printing, waits for the result all the same and exits with its code.
    """
    out = _console(
        closed_note="erobs-bt send: stdout closed; waiting for the goal's result without printing "
        "(the exit status says how it ended; Ctrl-C cancels the goal)"
    )
    text = script.read_text(encoding="utf-8")
    from erobs_bt.goal import unchecked_replay_in

    with _client(node) as client:
        last = [""]
        notices: list[str] = []  # the goal's unchecked replays, repeated under the result
        # Feedback can arrive (client spin thread) before send() returns with the goal
        # accepted: its lines wait here until "accepted" is printed, so they follow it.
        lock = threading.Lock()
        held: list[str] | None = []

        def say(line: str) -> None:
            with lock:
                if held is not None:
                    held.append(line)
                else:
                    out.print(line, highlight=False)

        def show(feedback: Any) -> None:
            unchecked = unchecked_replay_in(feedback.status_message)
            if unchecked and f"unit {feedback.unit_index}: {unchecked}" not in notices:
                notices.append(f"unit {feedback.unit_index}: {unchecked}")
            line = _feedback_line(feedback)
            if line != last[0]:
                last[0] = line
                say(line)
                if (
                    "waiting for Resume" in feedback.status_message
                    or "paused before" in feedback.status_message
                ):
                    say("[yellow]paused[/]: `erobs-bt resume` continues, `erobs-bt cancel` ends the goal")

        try:
            run = client.send(text, dry_run=dry_run, on_feedback=show, timeout=timeout)
        except TimeoutError as exc:
            out.print(f"[red]error[/] {exc}", highlight=False)
            sys.exit(_timeout_exit(exc))
        if not run.accepted:
            out.print(f"[red]REJECTED[/] {run.rejection}", highlight=False)
            sys.exit(EXIT_FAILED)
        try:  # (a Ctrl-C from the moment the goal is accepted cancels it)
            with lock:
                out.print(
                    f"[green]accepted[/] {'preview' if dry_run else 'execute'} {script}", highlight=False
                )
                for line in held or ():
                    out.print(line, highlight=False)
                held = None
            result = run.wait()
        except KeyboardInterrupt:
            out.print("[yellow]cancelling[/] (stops at the next unit boundary; Ctrl-C again to stop now)")
            run.cancel(timeout)
            if not run.cancel_accepted:
                out.print("[yellow]cancel refused[/]: the goal had already finished")
            try:
                result = run.wait()
            except KeyboardInterrupt:
                out.print("[red]stopping now[/] (~/stop: the arm decelerates to rest)")
                client.stop(timeout)
                result = run.wait()
        table = Table(title=f"{script.name}: {run.status_name}", show_header=False)
        colour = "green" if result.success else "red"
        table.add_row("result", f"[{colour}]{run.status_name}[/]")
        if result.error_message:
            table.add_row("error", f"[red]{result.error_message}[/]")
            table.add_row("error code", result.error_code)
        table.add_row("steps", steps_done(result.completed_steps, result.total_steps, dry_run=dry_run))
        for notice in notices:
            table.add_row("notice", f"[yellow]{notice}[/]")
        out.print(table)
        sys.exit(goal_exit_code(result.success, result.error_code))


def _trigger(key: str, node: str, timeout: float) -> None:
    console = _console()
    with _client(node) as client:
        try:
            success, message = client.trigger(key, timeout)
        except TimeoutError as exc:
            console.print(f"[red]error[/] {exc}", highlight=False)
            sys.exit(_timeout_exit(exc))
    mark = "[green]ok[/]" if success else "[red]refused[/]"
    console.print(f"{mark} {message}", highlight=False)
    sys.exit(0 if success else EXIT_FAILED)


@click.command()
@_node_option
@_timeout_option
def pause(node: str, timeout: float) -> None:
    """Pause the running goal at the next unit boundary."""
    _trigger("pause", node, timeout)


@click.command()
@_node_option
@_timeout_option
def resume(node: str, timeout: float) -> None:
    """Resume a paused goal."""
    _trigger("resume", node, timeout)


@click.command()
@_node_option
@_timeout_option
def stop(node: str, timeout: float) -> None:
    """Stop now: halt the arm at once (controlled deceleration) and abort the goal (STOPPED).

    Unlike cancel, this does not wait for the unit boundary. The node stays IDLE and
    serves the next goal.
    """
    _trigger("stop", node, timeout)


@click.command("reset-fault")
@_node_option
@_timeout_option
def reset_fault(node: str, timeout: float) -> None:
    """Clear the node's FAULTED state after you have checked the cell (refused when not faulted)."""
    _trigger("reset_fault", node, timeout)


@click.command("reset-sim")
@_node_option
@_timeout_option
def reset_sim(node: str, timeout: float) -> None:
    """Put the node's simulated cell back in its initial state (~/reset_simulation).

    The arm goes to the cell config's initial joint state, the tools to their docks (the
    start tool attached), no part held, the pipettor empty. Refused (exit 1, with why)
    while a goal runs or starts, and on a backend that is not simulated.
    """
    console = _console()
    with _client(node) as client:
        try:
            success, message = client.reset_simulation(timeout)
        except TimeoutError as exc:
            console.print(f"[red]error[/] {exc}", highlight=False)
            sys.exit(_timeout_exit(exc))
    # A refusal says so itself ("reset refused: busy: goal-1 is PAUSED").
    console.print(
        Text.assemble(("ok ", "green") if success else ("", ""), (message, "" if success else "red"))
    )
    sys.exit(0 if success else EXIT_FAILED)


@click.command("clear-cache")
@_node_option
@_timeout_option
def clear_cache(node: str, timeout: float) -> None:
    """Drop every plan the node has cached."""
    _trigger("clear_cache", node, timeout)


@click.command()
@_node_option
@_timeout_option
def cancel(node: str, timeout: float) -> None:
    """Cancel the node's active goal (action cancel-all; takes effect at the next unit boundary).

    Prints what the node said the cancel will do (``cancel accepted: the goal ends after unit
    3 (its motion runs to its end); to halt now: stop …``): the running unit is not
    interrupted; ``erobs-bt stop`` halts it now.
    """
    from erobs_bt.ros.client.client import CANCEL_CODES, cancel_accepted

    console = _console()
    with _client(node) as client:
        try:
            response, said = client.cancel_all_said(timeout)
        except TimeoutError as exc:
            console.print(f"[red]error[/] {exc}", highlight=False)
            sys.exit(_timeout_exit(exc))
    if cancel_accepted(response):  # listed: a refused cancel is answered ERROR_NONE, unlisted
        goals = len(response.goals_canceling)
        console.print(
            f"[green]ok[/] {said or f'cancelling {goals} goal(s); it stops at the next unit boundary'}",
            highlight=False,
        )
        sys.exit(0)
    code = CANCEL_CODES.get(response.return_code, str(response.return_code))
    console.print(
        f"[red]nothing cancelled[/] ({code}): no active goal (none runs, or it had already finished)",
        highlight=False,
    )
    sys.exit(EXIT_FAILED)


@click.command()
@_node_option
@_timeout_option
def state(node: str, timeout: float) -> None:
    """Print the node's latched execution state, gripper, docks and last tree snapshot."""
    console = _console()
    with _client(node) as client:
        message = client.states.wait_for(lambda _m: True, timeout)
        if message is None:
            from erobs_bt.ros.client.client import unreachable

            console.print(
                f"[red]error[/] {unreachable(f'execution state of {node}', timeout)}", highlight=False
            )
            sys.exit(EXIT_UNREACHABLE)
        gripper = client.grippers.wait_for(lambda _m: True, 1.0)
        docks = client.docks.wait_for(lambda _m: True, 1.0)
        # The latched history may hold older trees (an earlier goal's, or this goal's first
        # one when nobody watched it since): wait for one that shows the state, which the
        # node sends on subscribing (erobs_bt.ros.client.client.shows_state).
        from erobs_bt.ros.client.client import shows_state

        tree = client.trees.wait_for(lambda t: shows_state(t, message), 2.0)
        tree = tree if tree is not None else client.trees.latest()
    table = Table(title=f"{node}", show_header=False)
    from erobs_bt.terminal import state_style

    table.add_row("state", Text(message.state, style=state_style(message.state)))
    table.add_row("message", message.message)
    table.add_row("goal", message.goal_id or "none yet")
    if message.unit_index:
        step = f"step {message.current_step}/{message.total_steps}"
        table.add_row("running", f"unit {message.unit_index}, {step}")
    table.add_row("gripper", gripper if gripper is not None else "?")
    table.add_row("docks", docks if docks is not None else "?")
    table.add_row("last snapshot", tree.summary() if tree is not None else "none")
    console.print(table)


@click.command()
@click.option("--url", help="Watch a live web view (erobs-bt run --view) instead of the ROS node.")
@click.option("--node", default="/erobs_bt", show_default=True, help="The erobs_bt node to watch over ROS.")
@click.option(
    "--token",
    envvar="EROBS_BT_TOKEN",
    help="With --url: the view's access token (printed by `run --view --host ...`; or in the URL "
    "as ?token=, or $EROBS_BT_TOKEN).",
)
@click.option("--once", is_flag=True, help="Print one picture and exit.")
@click.option("--timeout", default=10.0, show_default=True, help="With --once over ROS: seconds to wait [s].")
def watch(url: str | None, node: str, token: str | None, once: bool, timeout: float) -> None:
    """Watch a running tree in the terminal (ROS ~/tree_snapshot, or a live view's URL)."""

    from erobs_bt.ros.client.watch import watch_ros
    from erobs_bt.viz.watch import watch_url

    console = _console()
    try:
        if url:
            code = watch_url(url, console=console, once=once, token=token)
        else:
            code = watch_ros(node, console=console, once=once, timeout=timeout)
    except KeyboardInterrupt:
        code = 0
    sys.exit(code)


#: The ROS verbs, for ``main.add_command`` in :mod:`erobs_bt.cli`.
@click.group()
def scene() -> None:
    """The node's live planning scene (MoveIt's apply_planning_scene / get_planning_scene).

    Changes reach the next plan, never a motion in flight. With backend moveit the node's
    namespace holds move_group's services, so the same verbs change move_group's scene.
    """


def _apply_scene(node: str, timeout: float, obj: Any, what: str) -> None:
    from moveit_msgs.msg import PlanningScene

    console = _console()
    diff = PlanningScene(is_diff=True)
    diff.robot_state.is_diff = True
    diff.world.collision_objects = [obj]
    with _client(node) as client:
        try:
            applied = client.apply_planning_scene(diff, timeout)
        except TimeoutError as exc:
            console.print(f"[red]error[/] {exc}", highlight=False)
            sys.exit(_timeout_exit(exc))
    if applied:
        console.print(f"[green]ok[/] {what}", highlight=False)
        sys.exit(0)
    console.print(f"[red]refused[/] {what}: the node's log says why", highlight=False)
    sys.exit(EXIT_FAILED)


@scene.command("add-box")
@click.argument("name")
@click.option("--size", nargs=3, type=float, required=True, metavar="X Y Z", help="Edge lengths [m].")
@click.option(
    "--position", nargs=3, type=float, required=True, metavar="X Y Z", help="Centre [m] in --frame."
)
@click.option(
    "--frame",
    default="base_link",
    show_default=True,
    help="Frame of --position: base_link, world or base.",
)
@_node_option
@_timeout_option
def scene_add_box(
    name: str,
    size: tuple[float, float, float],
    position: tuple[float, float, float],
    frame: str,
    node: str,
    timeout: float,
) -> None:
    """Add (or replace) box NAME in the planning scene's world (a CollisionObject ADD)."""
    from moveit_msgs.msg import CollisionObject
    from shape_msgs.msg import SolidPrimitive

    if not name:
        raise click.BadParameter("an object needs a name", param_hint="NAME")
    for value in size:
        if not value > 0:
            raise click.BadParameter(f"edge lengths must be > 0 m, got {list(size)}", param_hint="--size")
    obj = CollisionObject(id=name, operation=CollisionObject.ADD)
    obj.header.frame_id = frame
    obj.pose.position.x, obj.pose.position.y, obj.pose.position.z = position
    obj.pose.orientation.w = 1.0
    obj.primitives = [SolidPrimitive(type=SolidPrimitive.BOX, dimensions=list(size))]
    _apply_scene(node, timeout, obj, f"box {name} {list(size)} m at {list(position)} m in {frame}")


@scene.command("remove")
@click.argument("name")
@_node_option
@_timeout_option
def scene_remove(name: str, node: str, timeout: float) -> None:
    """Remove collision object NAME from the planning scene's world (a CollisionObject REMOVE)."""
    from moveit_msgs.msg import CollisionObject

    if not name:
        raise click.BadParameter(
            "give the object's name (an empty one would clear the world)", param_hint="NAME"
        )
    _apply_scene(node, timeout, CollisionObject(id=name, operation=CollisionObject.REMOVE), f"removed {name}")


@scene.command("list")
@_node_option
@_timeout_option
@click.option("--json", "as_json", is_flag=True, help="Print the objects as JSON.")
def scene_list(node: str, timeout: float, as_json: bool) -> None:
    """List the planning scene's collision objects (id, shapes, centre in base_link [m])."""
    from erobs_bt.backends.moveit.planning_scene import SceneError, obstacles_from_collision_object

    console = _console()
    with _client(node) as client:
        try:
            message = client.get_planning_scene(timeout)
        except TimeoutError as exc:
            console.print(f"[red]error[/] {exc}", highlight=False)
            sys.exit(_timeout_exit(exc))
    rows: list[dict[str, Any]] = []
    for obj in message.world.collision_objects:
        try:
            obstacles = obstacles_from_collision_object(obj)
        except SceneError as exc:  # a shape this side cannot read (a mesh of move_group's)
            rows.append({"id": obj.id, "shapes": [], "note": str(exc)})
            continue
        rows.append(
            {
                "id": obj.id,
                "shapes": [
                    {
                        "shape": o.shape.kind,
                        "size": [round(v, 6) for v in o.shape.size],
                        "position": [round(float(v), 6) for v in o.T_base_link_obstacle()[:3, 3]],
                    }
                    for o in obstacles
                ],
            }
        )
    if as_json:
        click.echo(json.dumps({"objects": rows}, indent=2))
        return
    table = Table(title=f"planning scene ({len(rows)} objects)")
    for column in ("id", "shape", "size [m]", "centre in base_link [m]"):
        table.add_column(column)
    for row in rows:
        if not row["shapes"]:
            table.add_row(row["id"], "?", "", row.get("note", ""))
        for k, shape in enumerate(row["shapes"]):
            table.add_row(
                row["id"] if k == 0 else "", shape["shape"], str(shape["size"]), str(shape["position"])
            )
    console.print(table)


COMMANDS: tuple[click.Command, ...] = (
    serve,
    send,
    pause,
    resume,
    cancel,
    stop,
    reset_fault,
    reset_sim,
    clear_cache,
    state,
    watch,
    scene,
)

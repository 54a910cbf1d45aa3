"""The ``erobs-bt`` verbs for seeing a tree: ``render``, ``export``, ``log`` (``watch``, whose
source is the node's topics by default, is a verb of :mod:`erobs_bt.ros.client.commands`).

:data:`COMMANDS` is what :mod:`erobs_bt.cli` adds to its group. This module imports
only click at import time; each command imports what it needs when it runs, so
``erobs-bt --help`` stays fast. Exit codes follow the CLI's: 0 success, 1 the work
failed (the live view or the node could not be reached), 2 a script, configuration or
input file is invalid.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from erobs_bt.commandline import EXIT_FAILED, EXIT_INVALID, POSES_HELP

_SCRIPT = click.argument("script", type=click.Path(exists=True, dir_okay=False, path_type=Path))
_POSES = click.option(
    "--poses",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help=POSES_HELP,
)
_CELL = click.option(
    "--cell",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Cell configuration YAML (default: the packaged config/cell.yaml).",
)
_NO_BATCHING = click.option("--no-batching", is_flag=True, help="One unit per step (enable_batching:=false).")
_PREVIEW = click.option(
    "--preview", is_flag=True, help="The preview tree (PlanUnit only) instead of execution."
)


def _fail(message: str, code: int) -> NoReturn:
    from erobs_bt.commandline import labelled

    _console(stderr=True).print(labelled("error", message), highlight=False, soft_wrap=True)
    sys.exit(code)


def _compile(script: Path, poses: Path | None, cell: Path | None, no_batching: bool, preview: bool) -> Any:
    """Make the goal plan of ``script`` and compile it for display; exits 2 on an invalid script."""
    from erobs_bt.commandline import ConfigurationError, fail_configuration, fail_invalid, load_plan
    from erobs_bt.plan import NotPreviewableError
    from erobs_bt.script.errors import ScriptError
    from erobs_bt.tree.context import Mode
    from erobs_bt.viz.render import compile_for_display

    try:
        plan = load_plan(script, poses=poses, cell=cell, enable_batching=not no_batching, preview=preview)
    except ConfigurationError as exc:
        fail_configuration(exc)
    except (ScriptError, NotPreviewableError, OSError) as exc:
        fail_invalid(script, exc)  # the rejection line of validate, run and preview
    return compile_for_display(plan, mode=Mode.PREVIEW if preview else Mode.EXECUTE)


def _console(*, stderr: bool = False) -> Any:
    from erobs_bt.console import make_console

    return make_console(stderr=stderr)


@click.command()
@_SCRIPT
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="Output file."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["svg", "png", "dot", "txt"]),
    help="Output format (default: from the output file's suffix).",
)
@_POSES
@_CELL
@_NO_BATCHING
@_PREVIEW
@click.option("--collapse-decorators", is_flag=True, help="Draw decorators without what they decorate.")
@click.option(
    "--rankdir",
    type=click.Choice(["LR", "TB"]),
    default="LR",
    show_default=True,
    help="Graph direction: LR stacks the units vertically, TB is py_trees' top-down layout.",
)
@click.option(
    "--fold/--no-fold",
    default=True,
    show_default=True,
    help="Fold runs of like units: the first repetition is drawn in full, the rest as one node "
    "with the unit range, the count and the distinct step contents (dot, svg, png).",
)
@click.option(
    "--steps/--no-steps",
    default=True,
    show_default=True,
    help="Attach each drawn unit's step contents: pose targets and joints [deg], "
    "direction/distance [m], cartesian targets, gripper actions (dot, svg, png).",
)
def render(
    script: Path,
    output: Path,
    fmt: str | None,
    poses: Path | None,
    cell: Path | None,
    no_batching: bool,
    preview: bool,
    collapse_decorators: bool,
    rankdir: str,
    fold: bool,
    steps: bool,
) -> None:
    """Draw the tree SCRIPT compiles to (svg, png, dot or text).

    The tree is compiled exactly as for a goal, on a scripted backend, and never
    ticked: nothing is planned, executed or cached. Pictures fold runs of like units and
    show each drawn unit's steps (--no-fold --no-steps: every behaviour, nothing else);
    the text format is always the whole tree.
    """
    from erobs_bt.viz.render import format_for, render_tree

    try:
        chosen = format_for(output, fmt)
    except ValueError as exc:
        _fail(str(exc), EXIT_INVALID)
    root = _compile(script, poses, cell, no_batching, preview)
    try:
        render_tree(
            root,
            output,
            chosen,
            collapse_decorators=collapse_decorators,
            rankdir=rankdir,
            fold=fold,
            steps=steps,
        )
    except ValueError as exc:
        _fail(str(exc), EXIT_INVALID)
    except (RuntimeError, OSError) as exc:
        _fail(str(exc), EXIT_FAILED)
    click.echo(f"wrote {output} ({chosen})")


@click.command()
@_SCRIPT
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["btcpp", "graphml", "json"]),
    required=True,
    help="btcpp: BehaviorTree.CPP v4 XML (one SubTree per unit); graphml: GraphML; "
    "json: networkx node-link JSON.",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Output file (default: stdout)."
)
@click.option("--tree-id", help="The BehaviorTree ID (default: from the script's file name).")
@_POSES
@_CELL
@_NO_BATCHING
@_PREVIEW
def export(
    script: Path,
    fmt: str,
    output: Path | None,
    tree_id: str | None,
    poses: Path | None,
    cell: Path | None,
    no_batching: bool,
    preview: bool,
) -> None:
    """Export the tree SCRIPT compiles to: BehaviorTree.CPP v4 XML (for Groot2) or a graph
    (GraphML, node-link JSON) for graph tools.

    The tree is compiled exactly as for a goal and never ticked. The BT.CPP file is
    checked against the v4 format and its blackboard data flow before it is written.
    """
    import xml.etree.ElementTree as ET

    from erobs_bt.viz.export_btcpp import check_btcpp, to_btcpp_xml, tree_id_for

    root = _compile(script, poses, cell, no_batching, preview)
    chosen_id = tree_id or tree_id_for(script.stem)
    if fmt == "btcpp":
        try:
            text = to_btcpp_xml(root, tree_id=chosen_id)
        except ValueError as exc:
            _fail(str(exc), EXIT_INVALID)
        problems = check_btcpp(ET.fromstring(text))
        if problems:
            _fail("the export does not conform to BT.CPP v4:\n  " + "\n  ".join(problems), EXIT_FAILED)
        described = "BehaviorTree.CPP v4 XML"
    else:
        from erobs_bt.viz.export_graph import graph_text, tree_graph

        graph = tree_graph(root, tree_id=chosen_id)
        text = graph_text(graph, fmt)
        described = (
            f"{'GraphML' if fmt == 'graphml' else 'node-link JSON'}, "
            f"{graph.number_of_nodes()} nodes, {graph.number_of_edges()} edges"
        )
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text, encoding="utf-8")
    click.echo(f"wrote {output} ({described})")


@click.command(name="log")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--goal", "goal_id", help="Show only this goal (e.g. goal-2).")
@click.option(
    "--view",
    is_flag=True,
    help="Also replay the run in the browser: serve the history page (tree statuses, 3D motion) "
    "on 127.0.0.1 until Ctrl-C.",
)
@click.option(
    "--view-port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port of the history page (0 picks a free one).",
)
def log_command(file: Path, goal_id: str | None, view: bool, view_port: int) -> None:
    """Print the run log FILE (JSON Lines) as a timeline; with --view, replay it in the browser.

    FILE may also be the run's ROS 2 bag (the .mcap beside the log): its topics are listed
    and the run log beside it is shown.
    """

    from erobs_bt.viz.runlog import read_run_log, timeline

    console = _console()
    if _is_bag(file):
        file = _show_bag(file, console)
    try:
        records = read_run_log(file)
    except ValueError as exc:
        _fail(str(exc), EXIT_INVALID)
    console.print(timeline(records, goal_id=goal_id))
    if not view:
        return
    from erobs_bt.viz.web import serve_log

    def ready(url: str) -> None:
        if goal_id:
            url += f"&goal={goal_id}"
        console.print(f"replay: [link={url}]{url}[/link]  (Ctrl-C stops serving)", highlight=False)

    try:
        serve_log(file, port=view_port, ready=ready)
    except OSError as exc:
        _fail(f"cannot serve the history page: {exc}", EXIT_INVALID)
    except KeyboardInterrupt:
        pass


def _is_bag(file: Path) -> bool:
    from erobs_bt.viz.bag import is_mcap

    try:
        return is_mcap(file)
    except OSError as exc:
        _fail(f"cannot read {file}: {exc}", EXIT_INVALID)


def _show_bag(bag: Path, console: Any) -> Path:
    """Print the topics of the ROS 2 bag ``bag`` and say what opens it; return the run log
    beside it (exits 2 when there is none: the timeline and the replay read the run log)."""
    from rich.table import Table

    from erobs_bt.viz.bag import bag_summary, how_to_open, run_log_for

    try:
        topics, duration = bag_summary(bag)
    except Exception as exc:  # mcap's errors (McapError, struct errors) on a damaged file
        _fail(f"{bag}: not a readable MCAP bag ({type(exc).__name__}: {exc})", EXIT_INVALID)
    length = "no messages" if duration is None else f"{duration:.3f} s"
    table = Table("topic", "type", "messages", title=f"ROS 2 bag {bag.name} ({length})", title_justify="left")
    for topic, type_name, count in topics:
        table.add_row(topic, type_name, f"{count:,}")
    console.print(table)
    console.print(f"{bag} is the run's ROS 2 bag (MCAP): {how_to_open(bag)}", highlight=False, soft_wrap=True)
    log = run_log_for(bag)
    if not log.is_file():
        _fail(f"no run log beside the bag ({log} does not exist): nothing more to show", EXIT_INVALID)
    console.print(f"its run log: {log}", highlight=False, soft_wrap=True)
    return log


#: The commands :mod:`erobs_bt.cli` registers (``main.add_command`` for each).
COMMANDS: list[click.Command] = [render, export, log_command]

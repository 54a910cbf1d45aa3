"""The ``erobs-bt`` command line.

Verbs, by what they need:

* ``validate`` — parse, expand, group and key a script; nothing moves.
* ``run`` / ``preview`` — execute or preview a script on the embedded simulated cell.

Exit codes: 0 success, 1 the goal failed (planning, execution, cancel), 2 the script
or a configuration file is invalid.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from erobs_bt.batching import Unit, group_into_batches
from erobs_bt.cache import is_eligible
from erobs_bt.script.errors import ScriptError
from erobs_bt.script.model import Script
from erobs_bt.tree.compile import NotPreviewableError, check_previewable

EXIT_FAILED = 1
EXIT_INVALID = 2


def load_script(path: Path, poses: Path | None) -> Script:
    """Read and parse a script file, resolving names against the ``poses`` registry.

    Raises:
        ScriptError: the script or the registry is invalid (message names the path).
        OSError: a file cannot be read.
    """
    from erobs_bt.script.parse import parse_script
    from erobs_bt.script.poses import PoseRegistry

    registry = PoseRegistry.load(poses) if poses is not None else None
    return parse_script(path.read_bytes(), registry=registry)


def describe(script: Script, units: list[Unit]) -> dict[str, Any]:
    """What ``validate`` reports, as JSON-able data."""
    try:
        check_previewable(script)
        previewable, preview_error = True, ""
    except NotPreviewableError as exc:
        previewable, preview_error = False, str(exc)
    return {
        "start_gripper": script.start_gripper,
        "tasks": script.task_count,
        "total_steps": len(script.steps),
        "units": [
            {
                "unit": unit.index + 1,
                "kind": "batch" if unit.batched else "single",
                "steps": [step.index + 1 for step in unit.steps],
                "label": unit.label,
            }
            for unit in units
        ],
        "cache_eligible": is_eligible(units),
        "previewable": previewable,
        "preview_error": preview_error,
        "key_sha256": hashlib.sha256(script.key_document().encode()).hexdigest(),
    }


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="erobs_bt", message="erobs-bt %(version)s")
def main() -> None:
    """Run EROBS lab-robot task scripts as behaviour trees."""


@main.command()
@click.argument("script", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--poses",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Pose registry YAML (degrees).",
)
@click.option("--no-batching", is_flag=True, help="One unit per step (enable_batching:=false).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def validate(script: Path, poses: Path | None, no_batching: bool, as_json: bool) -> None:
    """Validate SCRIPT and show its steps, units, cache eligibility and key digest."""
    console = Console()
    try:
        parsed = load_script(script, poses)
    except ScriptError as exc:
        if as_json:
            click.echo(json.dumps({"valid": False, "error": str(exc)}))
        else:
            Console(stderr=True).print(f"[bold red]invalid[/] {script}: {exc}", highlight=False)
        sys.exit(EXIT_INVALID)
    units = group_into_batches(parsed.steps, enabled=not no_batching)
    report = describe(parsed, units)
    if as_json:
        click.echo(json.dumps({"valid": True, **report}, indent=2))
        return
    console.print(
        f"[bold green]valid[/] {script}: {report['tasks']} tasks → {report['total_steps']} steps, "
        f"{len(units)} units (batching {'off' if no_batching else 'on'})",
        highlight=False,
    )
    table = Table("unit", "kind", "steps", "action")
    for unit in report["units"]:
        steps = unit["steps"]
        span = f"{steps[0]}" if len(steps) == 1 else f"{steps[0]}–{steps[-1]}"
        table.add_row(str(unit["unit"]), unit["kind"], span, unit["label"])
    console.print(table)
    console.print(f"cache eligible: {'yes' if report['cache_eligible'] else 'no (needs exactly one batch)'}")
    console.print(f"previewable:    {'yes' if report['previewable'] else 'no — ' + report['preview_error']}")
    console.print(f"key sha256:     {report['key_sha256']}")

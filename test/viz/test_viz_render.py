"""Rendering a compiled script: the picture shows every unit, its boundary and its
ReplayOrPlan structure, and rendering never runs anything."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pydot
import pytest
from click.testing import CliRunner

from erobs_bt.script.parse import parse_script
from erobs_bt.script.poses import PoseRegistry
from erobs_bt.tree.compile import NotPreviewableError
from erobs_bt.tree.context import Mode
from erobs_bt.viz.commands import render
from erobs_bt.viz.render import compile_for_display, format_for, render_tree, tree_to_dot, tree_to_text

from helpers import PAUSE, SUCK, move, script_json, vacuum

UNIT = re.compile(r"unit (\d+): ")
BOUNDARY = re.compile(r"before unit (\d+)")
needs_graphviz = pytest.mark.skipif(
    shutil.which("dot") is None, reason="Graphviz `dot` not installed (apt graphviz)"
)


def full_run(samples_dir: Path, *, mode: Mode = Mode.EXECUTE, enable_batching: bool = True):
    script = parse_script(
        (samples_dir / "FULL_EXPERIMENT_RUN.json").read_bytes(),
        registry=PoseRegistry.load(samples_dir / "cms_poses.yaml"),
    )
    return compile_for_display(script, enable_batching=enable_batching, mode=mode)


def dot_labels(dot_text: str) -> tuple[pydot.Dot, dict[str, str]]:
    """Re-parse dot text with pydot; node id -> first label line."""
    (graph,) = pydot.graph_from_dot_data(dot_text)
    labels = {}
    for node in graph.get_nodes():
        label = node.get("label")
        if label is None:
            continue
        labels[node.get_name()] = label.strip('"').split("\\n")[0]
    return graph, labels


def test_full_experiment_text_shows_18_units_and_their_boundaries(samples_dir: Path) -> None:
    text = tree_to_text(full_run(samples_dir))
    units = [int(m.group(1)) for m in UNIT.finditer(text)]
    boundaries = [int(m.group(1)) for m in BOUNDARY.finditer(text)]
    assert units == list(range(1, 19)), text
    assert boundaries == list(range(1, 19))
    assert text.count("after last unit") == 1
    assert text.count("ReplayOrPlan") == 8, "one per batched motion unit (units 1, 4, 6, 8, 10, 13, 16, 18)"


def test_full_experiment_dot_is_a_well_formed_tree_with_the_replay_or_plan_structure(
    samples_dir: Path,
) -> None:
    root = full_run(samples_dir)
    graph, labels = dot_labels(tree_to_dot(root, collapse_decorators=False).to_string())
    unit_nodes = {node: label for node, label in labels.items() if UNIT.match(label)}
    assert sorted(int(UNIT.match(label).group(1)) for label in unit_nodes.values()) == list(range(1, 19))
    assert sorted(int(BOUNDARY.match(v).group(1)) for v in labels.values() if BOUNDARY.match(v)) == list(
        range(1, 19)
    )
    # A tree: every node but the root has exactly one parent, and edges only join declared nodes.
    edges = [(e.get_source(), e.get_destination()) for e in graph.get_edges()]
    assert len(labels) == len(list(root.iterate()))
    assert len(edges) == len(labels) - 1
    parents = {}
    for source, destination in edges:
        assert source in labels and destination in labels, (source, destination)
        assert destination not in parents, f"{labels[destination]} has two parents"
        parents[destination] = source
    children: dict[str, list[str]] = {}
    for source, destination in edges:
        children.setdefault(source, []).append(labels[destination])
    motion_units = [n for n, label in unit_nodes.items() if "batch[" in label]
    assert len(motion_units) == 8
    for unit in motion_units:
        (guard,) = [n for n, p in parents.items() if p == unit]
        assert labels[guard] == "FaultOnFatalReplay"
        (selector,) = [n for n, p in parents.items() if p == guard]
        assert labels[selector] == "ReplayOrPlan"
        assert children[selector] == ["ReplayCached", "fresh"]
        (fresh,) = [n for n, p in parents.items() if p == selector and labels[n] == "fresh"]
        assert children[fresh] == ["ReplayNotFatal?", "PlanUnit", "ExecuteSolution"]


def test_rendering_ticks_nothing_and_calls_no_backend(samples_dir: Path) -> None:
    root = full_run(samples_dir)
    render_tree(root, Path("/dev/null"), "dot", collapse_decorators=False)
    assert {b.status.value for b in root.iterate()} == {"INVALID"}
    boundary = root.children[0]
    assert boundary.context.backend.calls == [], "compiling for display must not plan, execute or prepare"


def test_collapsing_decorators_hides_what_they_decorate(samples_dir: Path) -> None:
    _, labels = dot_labels(tree_to_dot(full_run(samples_dir), collapse_decorators=True).to_string())
    values = list(labels.values())
    assert values.count("FaultOnFatalReplay") == 8
    assert "ReplayOrPlan" not in values and "PlanUnit" not in values
    assert len([v for v in values if UNIT.match(v)]) == 18


def test_preview_tree_plans_only_and_unpreviewable_scripts_are_refused(samples_dir: Path) -> None:
    with pytest.raises(NotPreviewableError, match="not previewable"):
        full_run(samples_dir, mode=Mode.PREVIEW)
    script = parse_script((samples_dir / "spincoat_to_hotplate.json").read_bytes())
    names = [b.name for b in compile_for_display(script, enable_batching=True, mode=Mode.PREVIEW).iterate()]
    assert "PlanUnit" in names
    assert "ReplayCached" not in names and "ExecuteSolution" not in names


def test_without_batching_every_step_is_a_unit(samples_dir: Path) -> None:
    text = tree_to_text(full_run(samples_dir, enable_batching=False))
    assert len(UNIT.findall(text)) == 37


def test_format_comes_from_the_suffix_unless_given() -> None:
    assert format_for(Path("tree.svg"), None) == "svg"
    assert format_for(Path("tree.GV"), None) == "dot"
    assert format_for(Path("tree.svg"), "txt") == "txt"
    with pytest.raises(ValueError, match="cannot tell the format"):
        format_for(Path("tree.pdf"), None)


@needs_graphviz
def test_svg_and_png_show_every_unit(samples_dir: Path, tmp_path: Path) -> None:
    root = full_run(samples_dir)
    render_tree(root, tmp_path / "tree.svg", "svg", collapse_decorators=False)
    render_tree(root, tmp_path / "tree.png", "png", collapse_decorators=False, rankdir="TB")
    svg = (tmp_path / "tree.svg").read_text()
    shown = sorted({int(n) for n in re.findall(r">unit (\d+): ", svg)})
    assert shown == list(range(1, 19))
    assert len(re.findall(r'class="node"', svg)) == len(list(root.iterate()))
    assert (tmp_path / "tree.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_render_command_writes_the_file_and_rejects_bad_input(tmp_path: Path) -> None:
    script = tmp_path / "four.json"
    script.write_text(script_json([move("a"), vacuum("vacuum_on"), PAUSE, SUCK, move("b")]))
    runner = CliRunner()
    result = runner.invoke(render, [str(script), "-o", str(tmp_path / "four.txt")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "four.txt").read_text()
    assert UNIT.findall(text) == ["1", "2", "3", "4"]
    result = runner.invoke(render, [str(script), "-o", str(tmp_path / "four.pdf")])
    assert result.exit_code == 2 and "cannot tell the format" in result.output
    result = runner.invoke(render, [str(script), "--preview", "-o", str(tmp_path / "four.dot")])
    assert result.exit_code == 2 and "not previewable" in result.output
    bad = tmp_path / "bad.json"
    bad.write_text(script_json([move("a"), {"task_type": "moveto"}]))
    result = runner.invoke(render, [str(bad), "-o", str(tmp_path / "bad.dot")])
    assert result.exit_code == 2 and "tasks[1]" in result.output


def repeating_script(cycles: int) -> str:
    """A pause, ``cycles`` × (batch of two moves and a gripper step, a pipettor step), a
    cartesian move: ``2 * cycles + 2`` units."""
    tasks = [PAUSE]
    for i in range(cycles):
        tasks += [move("abc"[i % 3]), {"task_type": "moveto", "direction": "-z", "distance": 0.02}]
        tasks += [vacuum("vacuum_on"), SUCK]
    tasks.append({"task_type": "moveto", "cartesian_target": [0.4, 0.1, 0.3], "planning_type": "cartesian"})
    return script_json(tasks)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) [px] from the PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_fold_runs_finds_repeated_patterns_of_like_units() -> None:
    from erobs_bt.viz.model import Run, fold_runs

    assert fold_runs(list("PABABABABX")) == [Run(0, 1, 1), Run(1, 2, 4), Run(9, 1, 1)]
    assert fold_runs(list("AAAAAB")) == [Run(0, 1, 5), Run(5, 1, 1)]
    assert fold_runs(list("AAAB")) == [Run(0, 1, 1), Run(1, 1, 1), Run(2, 1, 1), Run(3, 1, 1)], "< min_units"
    assert fold_runs(list("ABCABCAB"), max_period=3, min_units=4) == [
        Run(0, 3, 2),
        Run(6, 1, 1),
        Run(7, 1, 1),
    ]
    assert fold_runs([]) == []
    # Every unit is covered exactly once, in order.
    keys = list("ABABABCCCCCDAB")
    covered = [i for run in fold_runs(keys) for i in range(run.first, run.first + run.count)]
    assert covered == list(range(len(keys)))


def test_step_text_gives_targets_directions_and_cartesian_targets() -> None:
    script = parse_script(repeating_script(1))
    from erobs_bt.viz.model import step_text

    texts = [step_text(step) for step in script.steps]
    assert texts == [
        "pause",
        "moveto a (auto) [10.0, -90.0, -90.0, -90.0, 90.0, 0.0]°",
        "moveto -z 0.020 m (auto)",
        "end_effector vacuum_on",
        "pipettor SUCK 50 %",
        "moveto xyz (0.400, 0.100, 0.300) m in base_link (cartesian)",
    ]
    assert step_text(script.steps[1], joints=False) == "moveto a (auto)"


def folded_dot(cycles: int) -> str:
    root = compile_for_display(parse_script(repeating_script(cycles)), mode=Mode.EXECUTE)
    return tree_to_dot(root, collapse_decorators=False, fold=True, steps=True).to_string()


@pytest.mark.slow
def test_folded_dot_shows_the_first_repetition_the_fold_and_the_step_contents() -> None:
    dot = folded_dot(59)
    assert len(UNIT.findall(dot)) > 0
    _, labels = dot_labels(dot)
    units = sorted(int(UNIT.match(v).group(1)) for v in labels.values() if UNIT.match(v))
    assert units == [1, 2, 3, 120], "the pause, the first repetition in full, the cartesian move"
    assert "units 4–119: 58 more × (batch[3]: moveto, moveto, end_effector → pipettor)" in dot
    assert "unit 1/2, step 1 moveto: b (auto) | c (auto) | a (auto)" in dot, "the targets of the folded units"
    assert "unit 2/2, step 1 pipettor: SUCK 50 %" in dot
    assert "step 2: moveto a (auto) [10.0, -90.0, -90.0, -90.0, 90.0, 0.0]°" in dot
    assert "step 3: moveto -z 0.020 m (auto)" in dot
    assert "step 238: moveto xyz (0.400, 0.100, 0.300) m in base_link (cartesian)" in dot
    # Drawn in full: the first repetition keeps the ReplayOrPlan structure of a motion unit.
    assert list(labels.values()).count("ReplayOrPlan") == 2, "unit 2 and unit 120"
    # Without folding, every unit is there again.
    root = compile_for_display(parse_script(repeating_script(59)), mode=Mode.EXECUTE)
    _, all_labels = dot_labels(tree_to_dot(root, collapse_decorators=False).to_string())
    assert len([v for v in all_labels.values() if UNIT.match(v)]) == 120


@pytest.mark.slow
@needs_graphviz
def test_a_120_unit_script_renders_to_a_picture_whose_height_does_not_grow_with_repeats(
    tmp_path: Path,
) -> None:
    """Folding makes the picture's size a function of the script's *different* stretches:
    120 and 240 units of the same loop give the same picture height (the width differs by
    the digits of the longer unit and step numbers), which fits a screen
    (at most 1,200 px high at Graphviz's 96 dpi; unfolded, the 120 units are over 10,000 px)."""
    sizes = {}
    for cycles in (59, 119):
        script = tmp_path / f"loop{cycles}.json"
        script.write_text(repeating_script(cycles))
        output = tmp_path / f"loop{cycles}.png"
        result = CliRunner().invoke(render, [str(script), "-o", str(output)])
        assert result.exit_code == 0, result.output
        sizes[cycles] = png_size(output)
    assert sizes[59][1] == sizes[119][1], sizes
    assert abs(sizes[59][0] - sizes[119][0]) <= 0.02 * sizes[59][0], sizes
    width, height = sizes[59]
    assert height <= 1200 and width <= 2400, sizes
    full = tmp_path / "full.png"
    script = tmp_path / "loop59.json"
    result = CliRunner().invoke(render, [str(script), "--no-fold", "--no-steps", "-o", str(full)])
    assert result.exit_code == 0, result.output
    assert png_size(full)[1] > 10_000

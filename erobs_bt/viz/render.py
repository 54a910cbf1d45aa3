"""Static renderings of a compiled script tree: Graphviz dot, SVG, PNG and text.

A script's goal plan (:func:`erobs_bt.plan.plan_goal`, as for a goal) is compiled for
display exactly as the orchestrator compiles it
(:func:`erobs_bt.tree.compile.compile_tree`), on a
:class:`~erobs_bt.backends.scripted.ScriptedBackend` with a fresh plan cache. The tree is
never ticked, so nothing is planned, executed or cached and every behaviour shows its
initial status: the picture is the *shape* the goal would run with (its units, the unit
boundaries where pause and cancel act, and the ReplayOrPlan structure of each motion unit).

Text comes from :func:`py_trees.display.unicode_tree`. Graphs do not come from
:func:`py_trees.display.dot_tree`: it uses each behaviour's name as the Graphviz node id,
and pydot reads a ``:`` in an id as a node *port* (``"unit 1: batch[3]: …"`` becomes
node ``unit 1`` with port ``batch[3]…``), so the unit sequences, whose names contain
colons, come out as disconnected, mislabelled nodes (:data:`GRAPHVIZ_PORT`). Where the
names themselves must be drawable by tools that use them as ids (py_trees_ros's
``py-trees-tree-watcher --dot-graph``, fed by the node's snapshot streams),
:func:`drawable_name` rewrites them. :func:`tree_to_dot` draws the
same picture with py_trees' shapes and colours (Selector octagon/cyan, Sequence
box/orange, Parallel parallelogram/gold, Decorator ellipse/ghostwhite, leaves
ellipse/gray) but numbered node ids, and marks the unit boundaries (light blue) and the
unit sequences (bold) so the pause/cancel granularity stands out.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import py_trees
import pydot

from erobs_bt.backends.scripted import ScriptedBackend
from erobs_bt.batching import Unit
from erobs_bt.cache import PlanCache
from erobs_bt.plan import GoalPlan, plan_script
from erobs_bt.script.model import Script
from erobs_bt.tree.boundary import UnitBoundary
from erobs_bt.tree.compile import UnitSequence, compile_tree
from erobs_bt.tree.context import Controls, GoalContext, Mode
from erobs_bt.viz.model import Run, fold_runs, step_text

#: What Graphviz (and pydot) read in a node id as the node/port separator: ``a:b`` is port
#: ``b`` of node ``a`` (the DOT language's ``node_id : port``).
GRAPHVIZ_PORT = ":"


def drawable_name(name: str) -> str:
    """``name`` without :data:`GRAPHVIZ_PORT`, for tools that use names as Graphviz node
    ids: ``unit 2: batch[3]: moveto`` → ``unit 2 - batch[3] - moveto`` (each ``": "`` and
    any other ``":"`` become ``" - "`` and ``"-"``). Names without one are returned as given.
    """
    if GRAPHVIZ_PORT not in name:
        return name
    return name.replace(f"{GRAPHVIZ_PORT} ", " - ").replace(GRAPHVIZ_PORT, "-")


#: Output formats of :func:`render_tree`, by file suffix.
SUFFIX_FORMATS: dict[str, str] = {".svg": "svg", ".png": "png", ".dot": "dot", ".gv": "dot", ".txt": "txt"}

#: The formats :func:`render_tree` writes.
FORMATS: tuple[str, ...] = ("svg", "png", "dot", "txt")

_FONT = "DejaVu Sans"


def compile_for_display(plan: GoalPlan | Script, *, mode: Mode, enable_batching: bool = True) -> UnitSequence:
    """Compile a goal plan into the tree a goal would run, without running it.

    The tree's behaviours are bound to a :class:`ScriptedBackend`, a new
    :class:`PlanCache` and idle :class:`Controls`; nothing is ticked, so no backend call
    is ever made and every status is ``INVALID``.

    Args:
        plan: the goal plan (:func:`erobs_bt.plan.plan_goal`: its units follow its
            ``enable_batching``), or a parsed script, planned here with
            :func:`erobs_bt.plan.plan_script`.
        enable_batching: for a script only: group consecutive moveto/end_effector steps.
        mode: :attr:`Mode.EXECUTE` (ReplayOrPlan per motion unit) or
            :attr:`Mode.PREVIEW` (PlanUnit only).

    Returns:
        The root ``script`` sequence.

    Raises:
        erobs_bt.tree.compile.NotPreviewableError: preview of a script with steps other
            than moveto/end_effector.
    """
    if isinstance(plan, Script):
        plan = plan_script(plan, enable_batching=enable_batching)
    context = GoalContext.for_plan(
        plan, mode=mode, backend=ScriptedBackend(), cache=PlanCache(), controls=Controls()
    )
    return compile_tree(context)


def format_for(path: Path, explicit: str | None) -> str:
    """The output format: ``explicit`` when given, else from ``path``'s suffix.

    Raises:
        ValueError: unknown explicit format, or no format given and the suffix is not
            one of :data:`SUFFIX_FORMATS`.
    """
    if explicit is not None:
        if explicit not in FORMATS:
            raise ValueError(f"unknown format {explicit!r}; expected one of {', '.join(FORMATS)}")
        return explicit
    fmt = SUFFIX_FORMATS.get(path.suffix.lower())
    if fmt is None:
        known = ", ".join(sorted(SUFFIX_FORMATS))
        raise ValueError(
            f"{path}: cannot tell the format from the suffix {path.suffix!r} ({known}); use --format"
        )
    return fmt


def _walk(
    root: py_trees.behaviour.Behaviour, *, collapse_decorators: bool
) -> Iterator[tuple[py_trees.behaviour.Behaviour, py_trees.behaviour.Behaviour | None]]:
    """Pre-order (behaviour, parent); below a decorator nothing when collapsing."""
    stack: list[tuple[py_trees.behaviour.Behaviour, py_trees.behaviour.Behaviour | None]] = [(root, None)]
    while stack:
        behaviour, parent = stack.pop()
        yield behaviour, parent
        if collapse_decorators and isinstance(behaviour, py_trees.decorators.Decorator):
            continue
        stack.extend((child, behaviour) for child in reversed(behaviour.children))


def _quoted(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _style(behaviour: py_trees.behaviour.Behaviour) -> dict[str, Any]:
    """Graphviz attributes: py_trees' conventions plus unit boundaries and unit sequences."""
    if isinstance(behaviour, UnitBoundary):
        return {"shape": "cds", "fillcolor": "lightblue"}
    if isinstance(behaviour, py_trees.composites.Selector):
        return {"shape": "octagon", "fillcolor": "cyan"}
    if isinstance(behaviour, py_trees.composites.Sequence):
        style: dict[str, Any] = {"shape": "box", "fillcolor": "orange"}
        if behaviour.name.startswith("unit "):
            style["penwidth"] = "2"
        return style
    if isinstance(behaviour, py_trees.composites.Parallel):
        return {"shape": "parallelogram", "fillcolor": "gold"}
    if isinstance(behaviour, py_trees.decorators.Decorator):
        return {"shape": "ellipse", "fillcolor": "ghostwhite"}
    return {"shape": "ellipse", "fillcolor": "gray"}


def _kind(behaviour: py_trees.behaviour.Behaviour) -> str:
    """Second label line: the composite kind and memory, or the class of a leaf."""
    for base in (py_trees.composites.Selector, py_trees.composites.Sequence, py_trees.composites.Parallel):
        if isinstance(behaviour, base):
            kind = base.__name__
            return f"{kind} (memory)" if getattr(behaviour, "memory", False) else kind
    return type(behaviour).__name__


def _label(lines: Sequence[str]) -> str:
    """A quoted Graphviz label of left-justified lines (``\\l`` ends each line)."""
    escaped = [line.replace("\\", "\\\\").replace('"', '\\"') for line in lines]
    return '"' + "".join(f"{line}\\l" for line in escaped) + '"'


def _distinct(texts: Sequence[str], *, shown: int = 3) -> str:
    """``a | b | c … (12 distinct)``: the first ``shown`` distinct texts in order."""
    unique = list(dict.fromkeys(texts))
    head = " | ".join(unique[:shown])
    return head if len(unique) <= shown else f"{head} … ({len(unique)} distinct)"


def fold_label(units: Sequence[Unit], run: Run) -> list[str]:
    """The lines of a folded run's node: all but its first repetition, which is drawn in full.

    First line ``units 14–119: 53 more × (batch[2]: moveto, end_effector → pipettor)``,
    then one line per step position of the pattern with the distinct contents it takes
    in the folded units (:func:`~erobs_bt.viz.model.step_text` without joints), e.g.
    ``unit 1/2, step 1 moveto: tray_2 (auto) | tray_3 (auto) … (53 distinct)``.

    Args:
        units: the script's units.
        run: a run of :func:`~erobs_bt.viz.model.fold_runs` with ``repeats >= 2``.
    """
    pattern = units[run.first : run.first + run.period]
    folded = units[run.first + run.period : run.first + run.count]
    first, last = folded[0].index + 1, folded[-1].index + 1
    shape = " → ".join(unit.label for unit in pattern)
    lines = [
        f"units {first}–{last}: {run.repeats - 1} more × ({shape})",
        f"like units {pattern[0].index + 1}–{pattern[-1].index + 1}; pause and cancel act before each unit",
    ]
    for slot, unit in enumerate(pattern):
        for position, step in enumerate(unit.steps):
            texts = [
                step_text(later.steps[position], joints=False).removeprefix(step.script_type).strip()
                for later in folded[slot :: run.period]
            ]
            where = f"unit {slot + 1}/{run.period}, " if run.period > 1 else ""
            lines.append(f"{where}step {position + 1} {step.script_type}: {_distinct(texts) or '-'}")
    return lines


def _script_units(root: py_trees.behaviour.Behaviour) -> list[tuple[Any, Any, Unit]] | None:
    """``(boundary, unit sequence, unit)`` per unit of a compiled script tree, else ``None``."""
    children = list(root.children)
    triples = []
    for boundary, sequence in zip(children[0:-1:2], children[1::2], strict=False):
        if not isinstance(boundary, UnitBoundary) or boundary.following is None:
            return None
        triples.append((boundary, sequence, boundary.following))
    if not children or not isinstance(children[-1], UnitBoundary) or len(children) % 2 != 1:
        return None
    return triples


def tree_to_dot(
    root: py_trees.behaviour.Behaviour,
    *,
    collapse_decorators: bool,
    rankdir: str = "LR",
    fold: bool = False,
    steps: bool = False,
    max_period: int = 4,
    min_units: int = 4,
) -> pydot.Dot:
    """The tree as a Graphviz graph.

    Args:
        root: the tree's root.
        collapse_decorators: draw a decorator but nothing below it (as
            ``py_trees.display.dot_tree(collapse_decorators=True)``).
        rankdir: Graphviz ``rankdir``: ``LR`` (root on the left; a script's units stack
            vertically, which stays readable for long scripts) or ``TB`` (root on top, as
            py_trees draws it).
        fold: for a compiled script tree (``script`` → boundaries and units): runs of
            like units (:func:`~erobs_bt.viz.model.fold_runs`) are drawn as their first
            repetition in full and one folded node (a ``folder``, light yellow) for the
            rest, whose label (:func:`fold_label`) gives the unit range, the repeat count,
            the pattern and the distinct step contents. The picture then grows with the
            number of *different* stretches of a script, not with its repetitions.
        steps: for a compiled script tree: hang a ``note`` node with the unit's step
            contents (:func:`~erobs_bt.viz.model.step_text`: pose targets with their
            joints [deg], direction and distance, cartesian targets, gripper actions) on
            every unit drawn in full (dashed edge).
        max_period, min_units: see :func:`~erobs_bt.viz.model.fold_runs`.

    Returns:
        A ``pydot.Dot`` whose nodes are ``n0`` (the root), ``n1``, … in pre-order, each
        labelled with the behaviour's name and, on a second line, its kind (the
        composite and its memory, or the leaf's class) when that differs from the name.
        Without ``fold`` and ``steps`` it has exactly one node per behaviour.

    Raises:
        ValueError: ``rankdir`` is not ``TB`` or ``LR``.
    """
    if rankdir not in ("TB", "LR"):
        raise ValueError(f"rankdir must be TB or LR (got {rankdir!r})")
    graph = pydot.Dot(graph_name="erobs_bt", graph_type="digraph", ordering="out", rankdir=rankdir)
    graph.set_node_defaults(fontname=_quoted(_FONT), fontsize="9", style="filled")
    graph.set_edge_defaults(fontname=_quoted(_FONT))
    ids: dict[object, str] = {}

    def new_id() -> str:
        return f"n{len(graph.get_nodes())}"

    def add_subtree(
        top: py_trees.behaviour.Behaviour, top_parent: py_trees.behaviour.Behaviour | None
    ) -> None:
        for behaviour, parent in _walk(top, collapse_decorators=collapse_decorators):
            node_id = new_id()
            ids[behaviour.id] = node_id
            kind = _kind(behaviour)
            label = behaviour.name if behaviour.name.rstrip("?") == kind else f"{behaviour.name}\n{kind}"
            graph.add_node(
                pydot.Node(
                    node_id,
                    label=_quoted(label),
                    tooltip=_quoted(type(behaviour).__name__),
                    **_style(behaviour),
                )
            )
            parent = parent if parent is not None else top_parent
            if parent is not None:
                graph.add_edge(pydot.Edge(ids[parent.id], node_id))

    triples = _script_units(root) if (fold or steps) else None
    if triples is None:
        add_subtree(root, None)
        return graph
    # the root alone, then its children unit by unit
    root_id = new_id()
    ids[root.id] = root_id
    graph.add_node(pydot.Node(root_id, label=_quoted(f"{root.name}\n{_kind(root)}"), **_style(root)))
    units = [unit for _, _, unit in triples]
    runs = (
        fold_runs([unit.label for unit in units], max_period=max_period, min_units=min_units)
        if fold
        else [Run(i, 1, 1) for i in range(len(units))]
    )
    for run in runs:
        for boundary, sequence, unit in triples[run.first : run.first + run.period]:
            add_subtree(boundary, root)
            add_subtree(sequence, root)
            if steps:
                note = new_id()
                lines = [f"step {step.index + 1}: {step_text(step)}" for step in unit.steps]
                graph.add_node(pydot.Node(note, label=_label(lines), shape="note", fillcolor="white"))
                graph.add_edge(pydot.Edge(ids[sequence.id], note, style="dashed", arrowhead="none"))
        if run.repeats > 1:
            folded = new_id()
            graph.add_node(
                pydot.Node(
                    folded, label=_label(fold_label(units, run)), shape="folder", fillcolor="lightyellow"
                )
            )
            graph.add_edge(pydot.Edge(root_id, folded))
    add_subtree(root.children[-1], root)  # after last unit
    return graph


def tree_to_text(root: py_trees.behaviour.Behaviour) -> str:
    """The tree as text (``py_trees.display.unicode_tree``), one behaviour per line."""
    return py_trees.display.unicode_tree(root)


def render_tree(
    root: py_trees.behaviour.Behaviour,
    path: Path,
    fmt: str,
    *,
    collapse_decorators: bool,
    rankdir: str = "LR",
    fold: bool = False,
    steps: bool = False,
) -> None:
    """Write the tree under ``root`` to ``path``.

    Args:
        root: the tree's root.
        path: output file (its directory must exist).
        fmt: one of :data:`FORMATS`.
        collapse_decorators: see :func:`tree_to_dot`; not available for ``txt``.
        rankdir: see :func:`tree_to_dot`.
        fold, steps: see :func:`tree_to_dot` (dot, svg and png; the text is py_trees'
            whole tree).

    Raises:
        ValueError: unknown format, or ``collapse_decorators`` with ``txt``.
        RuntimeError: ``svg``/``png`` requested and Graphviz's ``dot`` program is not
            installed (``apt-get install graphviz``).
        OSError: the file cannot be written.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if fmt == "txt":
        if collapse_decorators:
            raise ValueError("collapsing decorators applies to dot, svg and png, not txt")
        path.write_text(tree_to_text(root) + "\n", encoding="utf-8")
        return
    graph = tree_to_dot(
        root, collapse_decorators=collapse_decorators, rankdir=rankdir, fold=fold, steps=steps
    )
    if fmt == "dot":
        path.write_text(graph.to_string(), encoding="utf-8")
        return
    if shutil.which("dot") is None:
        raise RuntimeError(
            f"writing {fmt} needs Graphviz's `dot` program (apt-get install graphviz); "
            "the dot and txt formats work without it"
        )
    graph.write(str(path), prog="dot", format=fmt)

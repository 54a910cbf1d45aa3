"""The compiled tree as a networkx graph: GraphML and node-link JSON for other tools.

A behaviour tree is a rooted, ordered tree; as a graph it is a
:class:`networkx.DiGraph` whose nodes are the behaviours and whose edges go from a
parent to each child. Graph tools (Gephi, yEd, Cytoscape, d3, a notebook with
networkx) read it without knowing py_trees or BehaviorTree.CPP.

Nodes are keyed by their pre-order position (``"0"`` is the root), because names
repeat (every motion unit has a ``ReplayOrPlan``). Node attributes, all scalars so that
GraphML can hold them:

* ``name`` (the behaviour's name), ``type`` (its class), ``category`` (BehaviorTree.CPP's
  ``Action``/``Condition``/``Decorator``/``Control``), ``btcpp_id`` (the node ID in the
  BT.CPP export: ``Sequence``, ``Fallback``, ``PlanUnit``, …), ``depth``, ``order``
  (position among its siblings);
* ``unit`` (1-based unit index, 0 outside a unit) and ``is_unit`` (the unit's own
  sequence, a ``<SubTree>`` in the BT.CPP export);
* ``port_<name>`` for each port of the node in the BT.CPP export (literal or ``{key}``),
  and on a unit's sequence ``param_<port>`` for the unit's step parameters
  (:func:`~erobs_bt.viz.export_btcpp.step_parameters`).

Edges: ``kind="child"`` from parent to child with ``order``; and ``kind="blackboard"``
from each node that writes a blackboard entry to each node of the same unit that reads
it later in tick order (a decorator reads after its child), with ``key``
(``fatal_error``, ``solution``), so the data flow of :mod:`~erobs_bt.viz.export_btcpp`
is in the graph too. The graph's attributes are ``tree_id`` and ``format``.

Node-link JSON is :func:`networkx.node_link_data` with ``edges="links"`` (the key d3 and
most JavaScript tools read); :func:`networkx.node_link_graph` with the same argument
reads it back.
"""

from __future__ import annotations

import io
import json
from typing import Any

import networkx as nx
import py_trees

from erobs_bt.viz.export_btcpp import node_category, node_type_id, port_values, step_parameters, unit_of

#: Output formats of :func:`graph_text`.
GRAPH_FORMATS: tuple[str, ...] = ("graphml", "json")


def _reference(value: str) -> str | None:
    return value[1:-1] if value.startswith("{") and value.endswith("}") else None


def tree_graph(root: py_trees.behaviour.Behaviour, *, tree_id: str = "script") -> nx.DiGraph:
    """The tree under ``root`` as a directed graph (see the module docstring for the schema).

    Args:
        root: the compiled tree (or any py_trees tree).
        tree_id: stored as the graph attribute ``tree_id``.

    Returns:
        A new :class:`networkx.DiGraph`; ``nx.is_tree`` holds for its child edges.
    """
    graph = nx.DiGraph(tree_id=tree_id, format="erobs_bt behaviour tree")
    counter = iter(range(1 << 62))
    # Blackboard entries are scoped to a unit (a subtree in BT.CPP): (unit, key) -> writers,
    # each with its tick position (pre-order index).
    writers: dict[tuple[int, str], list[tuple[int, str]]] = {}
    # unit, key, node id, the position at which it reads (a decorator: after its subtree)
    readers: list[tuple[int, str, str, int]] = []

    def visit(
        behaviour: py_trees.behaviour.Behaviour, depth: int, order: int, unit_no: int
    ) -> tuple[str, int]:
        """Add ``behaviour`` and its subtree; return its node id and the subtree's last index."""
        node_id = str(next(counter))
        unit = unit_of(behaviour)
        if unit is not None:
            unit_no = unit.index + 1
        attributes: dict[str, Any] = {
            "name": behaviour.name,
            "type": type(behaviour).__name__,
            "category": node_category(behaviour),
            "btcpp_id": node_type_id(behaviour),
            "depth": depth,
            "order": order,
            "unit": unit_no,
            "is_unit": unit is not None,
        }
        if unit is not None:
            for name, value in (pair for step in unit.steps for pair in step_parameters(step)):
                attributes[f"param_{name}"] = value
        reads: list[str] = []
        for port, value in port_values(behaviour):
            attributes[f"port_{port.name}"] = value
            key = _reference(value)
            if key is None:
                continue
            if port.direction in ("output_port", "inout_port"):
                writers.setdefault((unit_no, key), []).append((int(node_id), node_id))
            if port.direction in ("input_port", "inout_port"):
                reads.append(key)
        graph.add_node(node_id, **attributes)
        last = int(node_id)
        for index, child in enumerate(behaviour.children):
            child_id, last = visit(child, depth + 1, index, unit_no)
            graph.add_edge(node_id, child_id, kind="child", order=index)
        # A decorator judges its child's outcome: it reads after its subtree ran.
        position = last + 1 if isinstance(behaviour, py_trees.decorators.Decorator) else int(node_id)
        readers.extend((unit_no, key, node_id, position) for key in reads)
        return node_id, last

    visit(root, 0, 0, 0)
    for unit_no, key, reader, position in readers:
        for where, writer in writers.get((unit_no, key), []):
            if writer != reader and where < position and not graph.has_edge(writer, reader):
                graph.add_edge(writer, reader, kind="blackboard", key=key, order=0)
    return graph


def child_edges(graph: nx.DiGraph) -> nx.DiGraph:
    """The tree alone: ``graph`` restricted to its ``kind="child"`` edges (a view)."""
    return nx.subgraph_view(graph, filter_edge=lambda u, v: graph.edges[u, v]["kind"] == "child")


def graph_text(graph: nx.DiGraph, fmt: str) -> str:
    """``graph`` as GraphML (``graphml``) or node-link JSON (``json``) text.

    Raises:
        ValueError: an unknown format.
    """
    if fmt == "graphml":
        buffer = io.BytesIO()
        nx.write_graphml(graph, buffer, encoding="utf-8", prettyprint=True)
        return buffer.getvalue().decode("utf-8")
    if fmt == "json":
        return json.dumps(nx.node_link_data(graph, edges="links"), indent=1, ensure_ascii=False) + "\n"
    raise ValueError(f"unknown graph format {fmt!r} (one of: {', '.join(GRAPH_FORMATS)})")


def read_graph(text: str, fmt: str) -> nx.DiGraph:
    """Inverse of :func:`graph_text` (for tools and tests).

    Raises:
        ValueError: an unknown format or unreadable text.
    """
    if fmt == "graphml":
        return nx.read_graphml(io.BytesIO(text.encode("utf-8")))
    if fmt == "json":
        return nx.node_link_graph(json.loads(text), edges="links")
    raise ValueError(f"unknown graph format {fmt!r} (one of: {', '.join(GRAPH_FORMATS)})")

"""Export a compiled tree as BehaviorTree.CPP v4 XML, check such a file, load it back.

Why: BehaviorTree.CPP's XML is the lingua franca of behaviour-tree tools. Groot2 opens
it (to inspect the structure a script compiles to) and py_trees 2.6 parses it
(:mod:`py_trees.parsers.behaviour_tree_xml`, experimental). The export is a *picture*
of the tree, not a program: BT.CPP has no implementation of our leaves, and loading it
into py_trees gives inert stand-ins (:func:`load_btcpp`).

The format (BehaviorTree.CPP 4.x documentation, "XML schema" and "Ports" pages)::

    <root BTCPP_format="4" main_tree_to_execute="TREE_ID">
      <BehaviorTree ID="TREE_ID">            exactly one child: the root node
        <Sequence name="script"> …           a node: tag = registered ID, attributes =
                                             ``name`` plus ports (``value`` or ``{key}``)
      </BehaviorTree>
      <TreeNodesModel>                       the custom node types (Groot2 reads these)
        <Action ID="PlanUnit">
          <input_port name="unit" type="int">…</input_port>
          <output_port name="solution" type="erobs_bt::Solution">…</output_port>
        </Action>
        <Condition ID="…"/> <Decorator ID="…"/> <Control ID="…"/>
      </TreeNodesModel>
    </root>

Composites map by their py_trees semantics (documented equivalence of the two
libraries): ``Sequence(memory=True)`` → ``Sequence`` (a RUNNING child is ticked again,
a FAILURE restarts), ``Sequence(memory=False)`` → ``ReactiveSequence``,
``Selector(memory=True)`` → ``Fallback``, ``Selector(memory=False)`` →
``ReactiveFallback``, ``Parallel`` → ``Parallel``. Every other behaviour is written
with its class name as the node ID and declared in ``TreeNodesModel``: decorators as
``Decorator``, side-effect-free checks (:data:`CONDITION_TYPES`) as ``Condition``,
other leaves as ``Action``. The values shared between behaviours through the goal
context appear as blackboard ports (``{solution_unit_3}``, ``{fatal_error}``,
``{cache_key}``), so the data flow is visible in Groot2.
"""

from __future__ import annotations

import re
import tempfile
import types
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import py_trees
from py_trees.common import Status

#: Leaf classes exported as ``Condition`` (they only check state, never act).
CONDITION_TYPES: frozenset[str] = frozenset({"ReplayNotFatal"})

#: BehaviorTree.CPP 4.x built-in node IDs with their ports (factory registrations).
BUILTIN_NODES: Mapping[str, tuple[str, frozenset[str]]] = types.MappingProxyType(
    {
        **{
            name: ("Control", frozenset())
            for name in (
                "Sequence",
                "SequenceWithMemory",
                "ReactiveSequence",
                "Fallback",
                "ReactiveFallback",
                "IfThenElse",
                "WhileDoElse",
            )
        },
        "Parallel": ("Control", frozenset({"success_count", "failure_count"})),
        "ParallelAll": ("Control", frozenset({"max_failures"})),
        **{
            f"Switch{n}": ("Control", frozenset({"variable", *(f"case_{i}" for i in range(1, n + 1))}))
            for n in range(2, 7)
        },
        **{
            name: ("Decorator", frozenset())
            for name in ("Inverter", "ForceSuccess", "ForceFailure", "KeepRunningUntilFailure", "RunOnce")
        },
        "RetryUntilSuccessful": ("Decorator", frozenset({"num_attempts"})),
        "Repeat": ("Decorator", frozenset({"num_cycles"})),
        "Timeout": ("Decorator", frozenset({"msec"})),
        "Delay": ("Decorator", frozenset({"delay_msec"})),
        "Precondition": ("Decorator", frozenset({"if", "else"})),
        "AlwaysSuccess": ("Action", frozenset()),
        "AlwaysFailure": ("Action", frozenset()),
        "Sleep": ("Action", frozenset({"msec"})),
        "Script": ("Action", frozenset({"code"})),
        "ScriptCondition": ("Condition", frozenset({"code"})),
        "SetBlackboard": ("Action", frozenset({"value", "output_key"})),
        "UnsetBlackboard": ("Action", frozenset({"key"})),
        "SubTree": ("SubTree", frozenset()),
    }
)

#: Node categories of ``TreeNodesModel`` and how many children an instance has.
CATEGORY_CHILDREN: Mapping[str, tuple[int, int | None]] = types.MappingProxyType(
    {"Action": (0, 0), "Condition": (0, 0), "Decorator": (1, 1), "Control": (1, None), "SubTree": (0, 0)}
)

_PORT_TAGS = ("input_port", "output_port", "inout_port")
_ID_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEY_PATTERN = re.compile(r"^\{[A-Za-z_@][A-Za-z0-9_./@-]*\}$")


@dataclass(frozen=True)
class Port:
    """A port of a custom node type.

    Attributes:
        name: port name (an XML attribute of every instance).
        direction: ``input_port``, ``output_port`` or ``inout_port``.
        type: BT.CPP type name (``int``, ``double``, ``std::string`` or a C++-style name
            for our own values).
        description: for people (shown by Groot2).
    """

    name: str
    direction: str
    type: str
    description: str


@dataclass(frozen=True)
class NodeModel:
    """A custom node type: its category and ports."""

    id: str
    category: str
    ports: tuple[Port, ...]


def _unit_no(behaviour: Any) -> str:
    return str(behaviour.unit.index + 1)


def _timeout(behaviour: Any) -> str:
    return "" if behaviour.timeout is None else f"{float(behaviour.timeout):g}"


def _steps(behaviour: Any) -> str:
    first, last = behaviour.unit.steps[0].index + 1, behaviour.unit.steps[-1].index + 1
    return str(first) if first == last else f"{first}-{last}"


_UNIT = Port("unit", "input_port", "int", "1-based index of the unit this node works for")
_TIMEOUT = Port("timeout", "input_port", "double", "[s] past it the work is stopped (TIMEOUT:)")
_STEPS = Port("steps", "input_port", "std::string", "1-based step range of the unit, e.g. 4-9")
_FATAL = Port("fatal_error", "input_port", "std::string", "the TIMEOUT:/REPLAY_TIMEOUT: error, if any")

#: Ports of our behaviour classes, with how each value is read from an instance.
_PORTS: Mapping[str, tuple[tuple[Port, Callable[[Any], str]], ...]] = types.MappingProxyType(
    {
        "UnitBoundary": (
            (
                Port("previous", "input_port", "int", "unit completed when reached (0: none)"),
                lambda b: str(b.previous.index + 1 if b.previous is not None else 0),
            ),
            (
                Port("following", "input_port", "int", "unit started when passed (0: after the last)"),
                lambda b: str(b.following.index + 1 if b.following is not None else 0),
            ),
        ),
        "ReplayCached": (
            (_UNIT, _unit_no),
            (_TIMEOUT, _timeout),
            (
                Port(
                    "cache_key", "input_port", "std::string", "the goal's plan-cache key; empty: ineligible"
                ),
                lambda b: "{cache_key}",
            ),
        ),
        "ReplayNotFatal": ((_FATAL, lambda b: "{fatal_error}"),),
        "PlanUnit": (
            (_UNIT, _unit_no),
            (_STEPS, _steps),
            (_TIMEOUT, _timeout),
            (
                Port("solution", "output_port", "erobs_bt::Solution", "the planned solution"),
                lambda b: f"{{solution_unit_{b.unit.index + 1}}}",
            ),
        ),
        "ExecuteSolution": (
            (_UNIT, _unit_no),
            (_TIMEOUT, _timeout),
            (
                Port("solution", "input_port", "erobs_bt::Solution", "the solution PlanUnit produced"),
                lambda b: f"{{solution_unit_{b.unit.index + 1}}}",
            ),
        ),
        "RunSingleStep": (
            (_UNIT, _unit_no),
            (_STEPS, _steps),
            (_TIMEOUT, _timeout),
            (
                Port("task_type", "input_port", "std::string", "the step's task type"),
                lambda b: b.unit.label,
            ),
        ),
        "PauseStep": ((_UNIT, _unit_no), (_STEPS, _steps)),
        "FaultOnFatal": ((_FATAL, lambda b: "{fatal_error}"),),
    }
)


def _builtin_id(behaviour: py_trees.behaviour.Behaviour) -> str | None:
    if isinstance(behaviour, py_trees.composites.Selector):
        return "Fallback" if behaviour.memory else "ReactiveFallback"
    if isinstance(behaviour, py_trees.composites.Sequence):
        return "Sequence" if behaviour.memory else "ReactiveSequence"
    if isinstance(behaviour, py_trees.composites.Parallel):
        return "Parallel"
    return None


def _category(behaviour: py_trees.behaviour.Behaviour) -> str:
    if isinstance(behaviour, py_trees.decorators.Decorator):
        return "Decorator"
    if isinstance(behaviour, py_trees.composites.Composite):
        return "Control"
    return "Condition" if type(behaviour).__name__ in CONDITION_TYPES else "Action"


def _element(behaviour: py_trees.behaviour.Behaviour, models: dict[str, NodeModel]) -> ET.Element:
    builtin = _builtin_id(behaviour)
    if builtin is not None:
        element = ET.Element(builtin, {"name": behaviour.name})
        if builtin == "Parallel":
            element.set("success_count", str(len(behaviour.children)))
            element.set("failure_count", "1")
    else:
        type_id = type(behaviour).__name__
        ports = _PORTS.get(type_id, ())
        models.setdefault(type_id, NodeModel(type_id, _category(behaviour), tuple(port for port, _ in ports)))
        element = ET.Element(type_id, {"name": behaviour.name})
        for port, value in ports:
            element.set(port.name, value(behaviour))
    for child in behaviour.children:
        element.append(_element(child, models))
    return element


def tree_id_for(text: str) -> str:
    """A BehaviorTree ID made from ``text`` (e.g. a script's file stem):
    letters, digits and ``_`` only, not starting with a digit."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", text) or "script"
    return cleaned if not cleaned[0].isdigit() else f"_{cleaned}"


def to_btcpp(root: py_trees.behaviour.Behaviour, *, tree_id: str) -> ET.Element:
    """The tree under ``root`` as a BT.CPP v4 ``<root>`` element.

    Args:
        root: the compiled tree.
        tree_id: the ``BehaviorTree`` ID (see :func:`tree_id_for`).

    Returns:
        ``<root BTCPP_format="4" main_tree_to_execute=tree_id>`` with one
        ``BehaviorTree`` and the ``TreeNodesModel`` of every custom type used.

    Raises:
        ValueError: ``tree_id`` is not a valid ID.
    """
    if not _ID_PATTERN.match(tree_id):
        raise ValueError(f"tree id {tree_id!r} must be letters, digits and '_' (not starting with a digit)")
    models: dict[str, NodeModel] = {}
    document = ET.Element("root", {"BTCPP_format": "4", "main_tree_to_execute": tree_id})
    tree = ET.SubElement(document, "BehaviorTree", {"ID": tree_id})
    tree.append(_element(root, models))
    model = ET.SubElement(document, "TreeNodesModel")
    for node in sorted(models.values(), key=lambda m: m.id):
        declared = ET.SubElement(model, node.category, {"ID": node.id})
        for port in node.ports:
            ET.SubElement(
                declared, port.direction, {"name": port.name, "type": port.type}
            ).text = port.description
    return document


def to_btcpp_xml(root: py_trees.behaviour.Behaviour, *, tree_id: str) -> str:
    """:func:`to_btcpp` as indented XML text with an XML declaration."""
    document = to_btcpp(root, tree_id=tree_id)
    ET.indent(document)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(document, encoding="unicode") + "\n"


# -- checking ---------------------------------------------------------------------------


def _declared(document: ET.Element, problems: list[str]) -> dict[str, tuple[str, frozenset[str]]]:
    declared: dict[str, tuple[str, frozenset[str]]] = {}
    models = document.findall("TreeNodesModel")
    if len(models) > 1:
        problems.append("more than one <TreeNodesModel>")
    for model in models:
        for node in model:
            where = f"TreeNodesModel/{node.tag}"
            if node.tag not in CATEGORY_CHILDREN:
                problems.append(
                    f"{where}: unknown node category (Action, Condition, Decorator, Control, SubTree)"
                )
                continue
            type_id = node.get("ID")
            if not type_id or not _ID_PATTERN.match(type_id):
                problems.append(f"{where}: missing or invalid ID {type_id!r}")
                continue
            if type_id in declared:
                problems.append(f"{where}[@ID={type_id!r}]: declared twice")
            if type_id in BUILTIN_NODES:
                problems.append(f"{where}[@ID={type_id!r}]: redeclares a built-in node")
            names: list[str] = []
            for port in node:
                if port.tag not in _PORT_TAGS:
                    problems.append(
                        f"{where}[@ID={type_id!r}]/{port.tag}: not a port ({', '.join(_PORT_TAGS)})"
                    )
                    continue
                name = port.get("name")
                if not name:
                    problems.append(f"{where}[@ID={type_id!r}]/{port.tag}: port without a name")
                    continue
                if name in names:
                    problems.append(f"{where}[@ID={type_id!r}]: port {name!r} declared twice")
                if name == "name" or name.startswith("_"):
                    problems.append(f"{where}[@ID={type_id!r}]: port name {name!r} is reserved")
                names.append(name)
            declared[type_id] = (node.tag, frozenset(names))
    return declared


def check_btcpp(document: ET.Element) -> list[str]:
    """Check a parsed file against the BehaviorTree.CPP v4 XML format.

    Checked: the ``<root>`` element and ``BTCPP_format="4"``; ``BehaviorTree`` IDs
    present, valid and unique, each with exactly one root node;
    ``main_tree_to_execute`` naming one of them (required when there are several);
    ``TreeNodesModel`` entries (category, unique ID, no built-in redeclared, named,
    unique ports); every node a built-in or a declared type (compact ``<PlanUnit/>`` or
    explicit ``<Action ID="PlanUnit"/>`` form); children per category (leaves none,
    decorators one, controls at least one); every attribute ``name``, a special
    ``_attribute`` or a declared port; blackboard references written ``{key}``;
    ``SubTree`` IDs naming a tree.

    Args:
        document: the ``<root>`` element (``ET.parse(path).getroot()``).

    Returns:
        The problems found, each naming where it is; empty when the file conforms.
    """
    problems: list[str] = []
    if document.tag != "root":
        return [f"document element is <{document.tag}>, expected <root>"]
    if document.get("BTCPP_format") != "4":
        problems.append(f"<root>: BTCPP_format is {document.get('BTCPP_format')!r}, expected '4'")
    for child in document:
        if child.tag not in ("BehaviorTree", "TreeNodesModel", "include"):
            problems.append(f"<root>/{child.tag}: unexpected element")
    trees = document.findall("BehaviorTree")
    if not trees:
        problems.append("<root>: no <BehaviorTree>")
    ids: list[str] = []
    for index, tree in enumerate(trees):
        tree_id = tree.get("ID")
        if not tree_id or not _ID_PATTERN.match(tree_id):
            problems.append(f"BehaviorTree[{index}]: missing or invalid ID {tree_id!r}")
            continue
        if tree_id in ids:
            problems.append(f"BehaviorTree[@ID={tree_id!r}]: ID used twice")
        ids.append(tree_id)
    main = document.get("main_tree_to_execute")
    if main is None:
        if len(trees) > 1:
            problems.append("<root>: main_tree_to_execute is required with several trees")
    elif main not in ids:
        problems.append(f"<root>: main_tree_to_execute {main!r} names no BehaviorTree")
    declared = _declared(document, problems)
    known: dict[str, tuple[str, frozenset[str]]] = {**BUILTIN_NODES, **declared}
    for tree in trees:
        where = f"BehaviorTree[@ID={tree.get('ID')!r}]"
        if len(tree) != 1:
            problems.append(f"{where}: has {len(tree)} root nodes, expected exactly one")
        for node in tree:
            problems.extend(_check_node(node, where, known, ids))
    return problems


def _check_node(
    node: ET.Element, parent: str, known: Mapping[str, tuple[str, frozenset[str]]], tree_ids: list[str]
) -> Iterator[str]:
    explicit = node.tag in CATEGORY_CHILDREN and node.tag != "SubTree"
    type_id = node.get("ID", "") if explicit else node.tag
    where = f"{parent}/{node.tag}[@name={node.get('name', '')!r}]"
    if type_id not in known:
        yield f"{where}: node type {type_id!r} is neither built in nor declared in TreeNodesModel"
        return
    category, ports = known[type_id]
    if explicit and category != node.tag:
        yield f"{where}: {type_id!r} is declared as {category}, written as {node.tag}"
    low, high = CATEGORY_CHILDREN[category]
    if len(node) < low or (high is not None and len(node) > high):
        expected = f"{low}" if low == high else f"{low} or more"
        yield f"{where}: {category} with {len(node)} children, expected {expected}"
    for attribute, value in node.attrib.items():
        if attribute == "name" or attribute.startswith("_") or (explicit and attribute == "ID"):
            continue
        if category == "SubTree" and attribute == "ID":
            if value not in tree_ids:
                yield f"{where}: SubTree ID {value!r} names no BehaviorTree"
            continue
        if category != "SubTree" and attribute not in ports:
            yield f"{where}: attribute {attribute!r} is not a port of {type_id}"
        if ("{" in value or "}" in value) and not _KEY_PATTERN.match(value):
            yield f"{where}: {attribute}={value!r} is not a blackboard reference {{key}}"
    for child in node:
        yield from _check_node(child, where, known, tree_ids)


# -- loading into py_trees ------------------------------------------------------------------

_TYPES: Mapping[str, type] = types.MappingProxyType(
    {"int": int, "double": float, "std::string": str, "bool": bool}
)


def _inert_update(self: py_trees.behaviour.Behaviour) -> Status:
    raise RuntimeError(
        f"{self.name}: a tree loaded from BT.CPP XML is for inspection only (its nodes are stand-ins); "
        "run scripts with `erobs-bt run`"
    )


def node_registry(document: ET.Element) -> dict[str, type]:
    """Stand-in py_trees classes for the custom types declared in ``document``.

    Each class has the declared ports (``int``/``double``/``std::string``/``bool`` typed,
    others untyped), is a leaf or a decorator by its category, is *not* added to
    py_trees' global ports registry, and refuses to be ticked: the result is for
    inspection (display, structure comparison), not execution.

    Args:
        document: the ``<root>`` element of an exported file.

    Returns:
        ``{type ID: class}`` for :func:`py_trees.parsers.behaviour_tree_xml.parse_behaviour_tree_xml`.
    """
    from py_trees.ports import BehaviourWithPorts, PortInformation, PortsMixin

    registry: dict[str, type] = {}
    for model in document.findall("TreeNodesModel"):
        for node in model:
            inputs: dict[str, PortInformation] = {}
            outputs: dict[str, PortInformation] = {}
            for port in node:
                info = PortInformation(data_type=_TYPES.get(port.get("type", ""), object), required=False)
                (outputs if port.tag == "output_port" else inputs)[port.get("name", "")] = info
            namespace: dict[str, Any] = {
                "INPUT_PORTS": inputs,
                "OUTPUT_PORTS": outputs,
                "update": _inert_update,
            }
            bases: tuple[type, ...]
            if node.tag == "Decorator":
                bases = (PortsMixin, py_trees.decorators.Decorator)
            else:
                bases = (BehaviourWithPorts,)

            def fill(ns: dict[str, Any], body: dict[str, Any] = namespace) -> None:
                ns.update(body)

            registry[node.get("ID", "")] = types.new_class(
                node.get("ID", ""), bases, {"register": False}, fill
            )
    return registry


def load_btcpp(xml_text: str) -> py_trees.behaviour.Behaviour:
    """Parse an exported file with py_trees' BehaviorTree.CPP parser.

    Built-in ``Sequence``/``Fallback`` become py_trees composites with memory; custom
    types become the stand-ins of :func:`node_registry`. py_trees qualifies each name
    with its parents' names (``script.unit 1: ….ReplayOrPlan``).

    Note: py_trees registers the ports' blackboard keys in its process-global
    blackboard; call ``py_trees.blackboard.Blackboard.clear()`` when done.

    Args:
        xml_text: the XML (as written by :func:`to_btcpp_xml`).

    Returns:
        The root of the loaded tree (never to be ticked).

    Raises:
        xml.etree.ElementTree.ParseError: not XML.
        ValueError, KeyError, TypeError, py_trees.parsers.behaviour_tree_xml.XMLParserError:
            the parser rejected the document.
    """
    from py_trees.parsers.behaviour_tree_xml import parse_behaviour_tree_xml

    registry = node_registry(ET.fromstring(xml_text))
    with tempfile.TemporaryDirectory(prefix="erobs_bt_btcpp_") as folder:
        path = Path(folder) / "tree.xml"
        path.write_text(xml_text, encoding="utf-8")
        return parse_behaviour_tree_xml(str(path), node_registry=registry)

"""Export a compiled tree as BehaviorTree.CPP v4 XML, check such a file, load it back.

Why: BehaviorTree.CPP's XML is the lingua franca of behaviour-tree tools. Groot2 opens
it (to inspect the structure a script compiles to) and py_trees 2.6 parses it
(:mod:`py_trees.parsers.behaviour_tree_xml`, experimental). The export is a *picture*
of the tree, not a program: BT.CPP has no implementation of our leaves, and loading it
into py_trees gives inert stand-ins (:func:`load_btcpp`).

The format (BehaviorTree.CPP 4.x documentation, "XML schema", "Ports" and "SubTrees"
pages)::

    <root BTCPP_format="4" main_tree_to_execute="TREE_ID">
      <BehaviorTree ID="TREE_ID">            exactly one child: the root node
        <Sequence name="script">             a node: tag = registered ID, attributes =
          <UnitBoundary previous="0" …/>     ``name`` plus ports (``value`` or ``{key}``)
          <SubTree ID="TREE_ID__unit_1" name="unit 1: batch[2]: moveto, end_effector"
                   step1_task_type="moveto" step1_target="home" …/>
          …
      </BehaviorTree>
      <BehaviorTree ID="TREE_ID__unit_1">    one per unit: its ReplayOrPlan (or step) body
        <Sequence name="unit 1: …"> …
      </BehaviorTree>
      <TreeNodesModel>                       the custom node types (Groot2 reads these)
        <Action ID="PlanUnit">
          <input_port name="unit" type="int">…</input_port>
          <output_port name="solution" type="erobs_bt::Solution">…</output_port>
        </Action>
        <Condition ID="…"/> <Decorator ID="…"/>
        <SubTree ID="TREE_ID__unit_1"> <input_port name="step1_target"/> … </SubTree>
      </TreeNodesModel>
    </root>

Composites map by their py_trees semantics (documented equivalence of the two
libraries): ``Sequence(memory=True)`` → ``Sequence`` (a RUNNING child is ticked again,
a FAILURE restarts), ``Sequence(memory=False)`` → ``ReactiveSequence``,
``Selector(memory=True)`` → ``Fallback``, ``Selector(memory=False)`` →
``ReactiveFallback``, ``Parallel`` → ``Parallel``. Every other behaviour is written
with its class name as the node ID and declared in ``TreeNodesModel``: decorators as
``Decorator``, side-effect-free checks (:data:`CONDITION_TYPES`) as ``Condition``,
other leaves as ``Action``.

Each unit is a ``<SubTree>``: its step parameters (targets, directions, distances, …)
are the SubTree's ports, set as literals, and the values its behaviours share through
the goal context are entries of the subtree's own blackboard, each written by an output
port before an input port reads it (``{cache_key}``, ``{fatal_error}``, ``{solution}``;
see :func:`to_btcpp`). So a BehaviorTree.CPP 4 factory with nodes of these IDs and ports
registered loads and ticks the file without a missing-key error, and Groot2 shows the
data flow. :func:`check_btcpp` checks the format rules and this data flow.
"""

from __future__ import annotations

import copy
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

from erobs_bt.tree.compile import unit_name

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
_FATAL_OUT = Port(
    "fatal_error",
    "output_port",
    "std::string",
    "the TIMEOUT:/REPLAY_TIMEOUT: error this node failed with; empty when none",
)
_FATAL_IN = Port("fatal_error", "input_port", "std::string", "the TIMEOUT:/REPLAY_TIMEOUT: error, if any")

#: The blackboard entries of a unit's subtree: written by the node that produces the value,
#: read by the nodes after it (docs/design.md §2: the per-goal values of the goal context).
FATAL_ERROR_KEY = "{fatal_error}"
CACHE_KEY_KEY = "{cache_key}"
SOLUTION_KEY = "{solution}"

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
                    "cache_key",
                    "output_port",
                    "std::string",
                    "the plan-cache key looked up when the unit started; empty: ineligible",
                ),
                lambda b: CACHE_KEY_KEY,
            ),
            (_FATAL_OUT, lambda b: FATAL_ERROR_KEY),
        ),
        "ReplayNotFatal": ((_FATAL_IN, lambda b: FATAL_ERROR_KEY),),
        "PlanUnit": (
            (_UNIT, _unit_no),
            (_STEPS, _steps),
            (_TIMEOUT, _timeout),
            (
                Port("solution", "output_port", "erobs_bt::Solution", "the planned solution"),
                lambda b: SOLUTION_KEY,
            ),
            (_FATAL_OUT, lambda b: FATAL_ERROR_KEY),
        ),
        "ExecuteSolution": (
            (_UNIT, _unit_no),
            (_TIMEOUT, _timeout),
            (
                Port("solution", "input_port", "erobs_bt::Solution", "the solution PlanUnit produced"),
                lambda b: SOLUTION_KEY,
            ),
            (_FATAL_OUT, lambda b: FATAL_ERROR_KEY),
        ),
        "RunSingleStep": (
            (_UNIT, _unit_no),
            (_STEPS, _steps),
            (_TIMEOUT, _timeout),
            (
                Port("task_type", "input_port", "std::string", "the step's task type"),
                lambda b: b.unit.label,
            ),
            (_FATAL_OUT, lambda b: FATAL_ERROR_KEY),
        ),
        "PauseStep": ((_UNIT, _unit_no), (_STEPS, _steps)),
        "FaultOnFatal": ((_FATAL_IN, lambda b: FATAL_ERROR_KEY),),
    }
)


def port_values(behaviour: py_trees.behaviour.Behaviour) -> list[tuple[Port, str]]:
    """The ports of ``behaviour`` (one of our classes) with this instance's values.

    Values are literal strings or blackboard references ``{key}``. A class without
    ports (a py_trees composite, a foreign behaviour) gives ``[]``.
    """
    return [(port, value(behaviour)) for port, value in _PORTS.get(type(behaviour).__name__, ())]


def step_parameters(step: Any) -> list[tuple[str, str]]:
    """A step's script fields as ``(port name, literal value)`` pairs.

    The fields come from the expanded step as submitted (``step.spec``: targets, directions,
    distances, gripper actions, …), flattened for XML attributes: a nested object gives
    ``<field>_<key>`` ports, a list of plain values is written ``a;b;c`` (BT.CPP's vector
    notation), a list of objects ``<field>_<i>_<key>``. Port names are prefixed with the
    1-based step number (``step4_target``), so the ports of a batch's steps never clash.
    Values never look like a blackboard reference (a ``{…}`` value would be read as one).

    Args:
        step: an :class:`~erobs_bt.script.model.Step`.

    Returns:
        The pairs, in field order, ``step<N>_task_type`` (the script's task type) first.
    """
    prefix = f"step{step.index + 1}_"
    pairs: list[tuple[str, str]] = []

    def plain(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            return repr(value)
        return str(value)

    def add(name: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                add(f"{name}_{key}", item)
        elif isinstance(value, list | tuple):
            if all(not isinstance(item, Mapping | list | tuple) for item in value):
                pairs.append((name, ";".join(plain(item) for item in value)))
            else:
                for index, item in enumerate(value):
                    add(f"{name}_{index}", item)
        elif value is not None:
            text = plain(value)
            if text.startswith("{") and text.endswith("}"):
                text = f" {text}"
            pairs.append((name, text))

    spec = dict(step.spec)
    add(f"{prefix}task_type", spec.pop("task_type", step.task_type))
    for field_name, value in spec.items():
        add(prefix + re.sub(r"[^A-Za-z0-9_]", "_", str(field_name)), value)
    return pairs


def _builtin_id(behaviour: py_trees.behaviour.Behaviour) -> str | None:
    if isinstance(behaviour, py_trees.composites.Selector):
        return "Fallback" if behaviour.memory else "ReactiveFallback"
    if isinstance(behaviour, py_trees.composites.Sequence):
        return "Sequence" if behaviour.memory else "ReactiveSequence"
    if isinstance(behaviour, py_trees.composites.Parallel):
        return "Parallel"
    return None


def node_category(behaviour: py_trees.behaviour.Behaviour) -> str:
    """BT.CPP's category of ``behaviour``: ``Action``, ``Condition``, ``Decorator`` or ``Control``."""
    if isinstance(behaviour, py_trees.decorators.Decorator):
        return "Decorator"
    if isinstance(behaviour, py_trees.composites.Composite):
        return "Control"
    return "Condition" if type(behaviour).__name__ in CONDITION_TYPES else "Action"


def node_type_id(behaviour: py_trees.behaviour.Behaviour) -> str:
    """The node ID ``behaviour`` has in the export: a built-in (``Sequence``, ``Fallback``,
    ``ReactiveSequence``, …) or its class name."""
    return _builtin_id(behaviour) or type(behaviour).__name__


def unit_of(behaviour: py_trees.behaviour.Behaviour) -> Any:
    """The :class:`~erobs_bt.batching.Unit` whose sequence ``behaviour`` is, else ``None``.

    A unit's sequence is the composite named :func:`~erobs_bt.tree.compile.unit_name` of
    the unit its leaves work for (the compiler's one naming rule).
    """
    if not isinstance(behaviour, py_trees.composites.Composite):
        return None
    for node in behaviour.iterate():
        unit = getattr(node, "unit", None)
        if unit is not None and hasattr(unit, "steps"):
            return unit if behaviour.name == unit_name(unit) else None
    return None


@dataclass
class _Export:
    """What :func:`to_btcpp` collects while it walks the tree."""

    tree_id: str
    models: dict[str, NodeModel]
    subtrees: list[tuple[str, ET.Element]]
    subtree_ports: dict[str, tuple[Port, ...]]


def subtree_id(tree_id: str, unit: Any) -> str:
    """The ``BehaviorTree`` ID of a unit's subtree: ``<tree_id>__unit_<n>`` (1-based)."""
    return f"{tree_id}__unit_{unit.index + 1}"


def _element(behaviour: py_trees.behaviour.Behaviour, export: _Export, *, inline: bool = False) -> ET.Element:
    unit = None if inline else unit_of(behaviour)
    if unit is not None:
        sub_id = subtree_id(export.tree_id, unit)
        parameters = [pair for step in unit.steps for pair in step_parameters(step)]
        element = ET.Element("SubTree", {"ID": sub_id, "name": behaviour.name})
        ports: list[Port] = []
        for name, value in parameters:
            element.set(name, value)
            step_no = name.split("_", 1)[0].removeprefix("step")
            step = unit.steps[int(step_no) - unit.steps[0].index - 1]
            ports.append(Port(name, "input_port", "std::string", f"step {step_no} ({step.path})"))
        export.subtree_ports[sub_id] = tuple(ports)
        export.subtrees.append((sub_id, _element(behaviour, export, inline=True)))
        return element
    builtin = _builtin_id(behaviour)
    if builtin is not None:
        element = ET.Element(builtin, {"name": behaviour.name})
        if builtin == "Parallel":
            element.set("success_count", str(len(behaviour.children)))
            element.set("failure_count", "1")
    else:
        type_id = type(behaviour).__name__
        ports_of = _PORTS.get(type_id, ())
        export.models.setdefault(
            type_id, NodeModel(type_id, node_category(behaviour), tuple(port for port, _ in ports_of))
        )
        element = ET.Element(type_id, {"name": behaviour.name})
        for port, value in port_values(behaviour):
            element.set(port.name, value)
    for child in behaviour.children:
        element.append(_element(child, export))
    return element


def tree_id_for(text: str) -> str:
    """A BehaviorTree ID made from ``text`` (e.g. a script's file stem):
    letters, digits and ``_`` only, not starting with a digit."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", text) or "script"
    return cleaned if not cleaned[0].isdigit() else f"_{cleaned}"


def _declare(parent: ET.Element, category: str, type_id: str, ports: tuple[Port, ...]) -> None:
    declared = ET.SubElement(parent, category, {"ID": type_id})
    for port in ports:
        ET.SubElement(
            declared, port.direction, {"name": port.name, "type": port.type}
        ).text = port.description


def to_btcpp(root: py_trees.behaviour.Behaviour, *, tree_id: str) -> ET.Element:
    """The tree under ``root`` as a BT.CPP v4 ``<root>`` element.

    The main ``BehaviorTree`` holds the script sequence with its unit boundaries; each
    unit is a ``<SubTree>`` in it whose attributes are the unit's step parameters
    (:func:`step_parameters`, literal values, so they are in the subtree's blackboard),
    and whose body is its own ``BehaviorTree`` (:func:`subtree_id`). Inside a unit, the
    values its nodes share are blackboard entries local to the subtree, each written
    (an output port) before it is read: ``{cache_key}`` and ``{fatal_error}`` by
    ``ReplayCached``, ``{solution}`` by ``PlanUnit``, ``{fatal_error}`` again by every
    node that can fail fatally; ``ReplayNotFatal`` and ``FaultOnFatal`` read
    ``{fatal_error}`` (the decorator after its child returned).

    Args:
        root: the compiled tree.
        tree_id: the main ``BehaviorTree`` ID (see :func:`tree_id_for`).

    Returns:
        ``<root BTCPP_format="4" main_tree_to_execute=tree_id>`` with the main tree, one
        ``BehaviorTree`` per unit, and the ``TreeNodesModel`` of every custom type used
        and of every unit subtree (its step-parameter ports, as Groot2 declares them).

    Raises:
        ValueError: ``tree_id`` is not a valid ID.
    """
    if not _ID_PATTERN.match(tree_id):
        raise ValueError(f"tree id {tree_id!r} must be letters, digits and '_' (not starting with a digit)")
    export = _Export(tree_id, {}, [], {})
    document = ET.Element("root", {"BTCPP_format": "4", "main_tree_to_execute": tree_id})
    tree = ET.SubElement(document, "BehaviorTree", {"ID": tree_id})
    tree.append(_element(root, export))
    for sub_id, body in export.subtrees:
        ET.SubElement(document, "BehaviorTree", {"ID": sub_id}).append(body)
    model = ET.SubElement(document, "TreeNodesModel")
    for node in sorted(export.models.values(), key=lambda m: m.id):
        _declare(model, node.category, node.id, node.ports)
    for sub_id, _body in export.subtrees:
        _declare(model, "SubTree", sub_id, export.subtree_ports[sub_id])
    return document


def to_btcpp_xml(root: py_trees.behaviour.Behaviour, *, tree_id: str) -> str:
    """:func:`to_btcpp` as indented XML text with an XML declaration."""
    document = to_btcpp(root, tree_id=tree_id)
    ET.indent(document)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(document, encoding="unicode") + "\n"


def inline_subtrees(document: ET.Element) -> ET.Element:
    """A copy of ``document`` with every ``<SubTree>`` replaced by the tree it names.

    The result has only the main tree (and the node models of the custom types): the
    one-tree shape for tools without SubTree support, and the same tree, node for node,
    as the py_trees tree it was exported from.

    Raises:
        ValueError: a ``SubTree`` names no ``BehaviorTree``, or subtrees nest in a cycle.
    """
    copied = copy.deepcopy(document)
    trees = {tree.get("ID"): tree for tree in copied.findall("BehaviorTree")}
    main_id = copied.get("main_tree_to_execute") or next(iter(trees), None)
    if main_id not in trees:
        raise ValueError(f"main tree {main_id!r} not found")

    def expand(element: ET.Element, seen: tuple[str, ...]) -> ET.Element:
        if element.tag == "SubTree":
            target = element.get("ID", "")
            if target not in trees:
                raise ValueError(f"SubTree ID {target!r} names no BehaviorTree")
            if target in seen:
                raise ValueError(f"SubTree {target!r} includes itself")
            return expand(copy.deepcopy(trees[target][0]), (*seen, target))
        for index, child in enumerate(list(element)):
            element[index] = expand(child, seen)
        return element

    main = trees[main_id]
    main[0] = expand(main[0], (str(main_id),))
    for tree_id, tree in trees.items():
        if tree_id != main_id:
            copied.remove(tree)
    for model in copied.findall("TreeNodesModel"):
        for node in list(model):
            if node.tag == "SubTree":
                model.remove(node)
    return copied


# -- checking ---------------------------------------------------------------------------


#: ``{port name: direction}`` of a node type (directions as in :class:`Port`).
PortDirections = Mapping[str, str]


@dataclass(frozen=True)
class _Known:
    """A node type the checker knows: its category and its ports with their directions."""

    category: str
    ports: PortDirections
    defaults: frozenset[str] = frozenset()


def _builtin_known() -> dict[str, _Known]:
    known: dict[str, _Known] = {}
    for type_id, (category, names) in BUILTIN_NODES.items():
        directions = {name: "input_port" for name in names}
        if type_id == "SetBlackboard":
            directions["output_key"] = "output_port"
        known[type_id] = _Known(category, directions)
    return known


def _declared(document: ET.Element, problems: list[str]) -> tuple[dict[str, _Known], dict[str, _Known]]:
    """The custom node types and the SubTree models declared in ``TreeNodesModel``."""
    declared: dict[str, _Known] = {}
    subtree_models: dict[str, _Known] = {}
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
            target = subtree_models if node.tag == "SubTree" else declared
            if type_id in target:
                problems.append(f"{where}[@ID={type_id!r}]: declared twice")
            if type_id in BUILTIN_NODES:
                problems.append(f"{where}[@ID={type_id!r}]: redeclares a built-in node")
            directions: dict[str, str] = {}
            defaults: set[str] = set()
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
                if name in directions:
                    problems.append(f"{where}[@ID={type_id!r}]: port {name!r} declared twice")
                if name in _RESERVED_PORTS or name.startswith("_") or not _PORT_NAME_PATTERN.match(name):
                    problems.append(f"{where}[@ID={type_id!r}]: port name {name!r} is reserved or invalid")
                directions[name] = port.tag
                if port.get("default") is not None:
                    defaults.add(name)
            target[type_id] = _Known(node.tag, directions, frozenset(defaults))
    return declared, subtree_models


def check_btcpp(document: ET.Element) -> list[str]:
    """Check a parsed file against the BehaviorTree.CPP v4 XML format.

    Checked: the ``<root>`` element and ``BTCPP_format="4"``; ``BehaviorTree`` IDs
    present, valid and unique, each with exactly one root node;
    ``main_tree_to_execute`` naming one of them (required when there are several);
    ``TreeNodesModel`` entries (category, unique ID, no built-in redeclared, named,
    unique, valid ports); every node a built-in or a declared type (compact ``<PlanUnit/>``
    or explicit ``<Action ID="PlanUnit"/>`` form); children per category (leaves none,
    decorators one, controls at least one); every attribute ``name``, a special
    ``_attribute`` or a declared port; blackboard references written ``{key}``;
    ``SubTree`` IDs naming a tree, their attributes the ports of the subtree's model and
    every model port without a default set (BT.CPP refuses a subtree otherwise).

    And the data flow, as BT.CPP runs it: a subtree has its own blackboard, holding what
    its ``<SubTree>`` instances set; within a tree, every ``{key}`` an input (or inout)
    port reads must be written before it in tick order by an output (or inout) port or
    be set on the subtree. Tick order is document order, except that a decorator reads
    its ports after its child returned. A key read before anything writes it is the
    error a real BT.CPP node gets at run time ("missing key").

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
    declared, subtree_models = _declared(document, problems)
    known: dict[str, _Known] = {**_builtin_known(), **declared}
    checker = _Checker(known, subtree_models, ids)
    for tree in trees:
        where = f"BehaviorTree[@ID={tree.get('ID')!r}]"
        if len(tree) != 1:
            problems.append(f"{where}: has {len(tree)} root nodes, expected exactly one")
        for node in tree:
            problems.extend(checker.node(node, where))
    if not any("is neither built in nor declared" in p for p in problems):
        problems.extend(checker.data_flow(trees, main))
    return problems


_RESERVED_PORTS = frozenset({"name", "ID"})
_PORT_NAME_PATTERN = re.compile(r"^[A-Za-z][^ \t\n\r<>&\"'/\\:*?|.]*$")


def _reference(value: str) -> str | None:
    """The key of a ``{key}`` value, else ``None``."""
    return value[1:-1] if _KEY_PATTERN.match(value) else None


class _Checker:
    def __init__(
        self, known: dict[str, _Known], subtree_models: dict[str, _Known], tree_ids: list[str]
    ) -> None:
        self.known = known
        self.subtree_models = subtree_models
        self.tree_ids = tree_ids

    def type_of(self, node: ET.Element) -> str:
        explicit = node.tag in CATEGORY_CHILDREN and node.tag != "SubTree"
        return node.get("ID", "") if explicit else node.tag

    def node(self, node: ET.Element, parent: str) -> Iterator[str]:
        explicit = node.tag in CATEGORY_CHILDREN and node.tag != "SubTree"
        type_id = self.type_of(node)
        where = f"{parent}/{node.tag}[@name={node.get('name', '')!r}]"
        if type_id not in self.known:
            yield f"{where}: node type {type_id!r} is neither built in nor declared in TreeNodesModel"
            return
        entry = self.known[type_id]
        category = entry.category
        if explicit and category != node.tag:
            yield f"{where}: {type_id!r} is declared as {category}, written as {node.tag}"
        low, high = CATEGORY_CHILDREN[category]
        if len(node) < low or (high is not None and len(node) > high):
            expected = f"{low}" if low == high else f"{low} or more"
            yield f"{where}: {category} with {len(node)} children, expected {expected}"
        model = self.subtree_models.get(node.get("ID", "")) if category == "SubTree" else None
        for attribute, value in node.attrib.items():
            if attribute == "name" or attribute.startswith("_") or (explicit and attribute == "ID"):
                continue
            if category == "SubTree" and attribute == "ID":
                if value not in self.tree_ids:
                    yield f"{where}: SubTree ID {value!r} names no BehaviorTree"
                continue
            if category != "SubTree" and attribute not in entry.ports:
                yield f"{where}: attribute {attribute!r} is not a port of {type_id}"
            if model is not None and attribute not in model.ports:
                yield (
                    f"{where}: attribute {attribute!r} is not a port of the SubTree model {node.get('ID')!r}"
                )
            if ("{" in value or "}" in value) and not _KEY_PATTERN.match(value):
                yield f"{where}: {attribute}={value!r} is not a blackboard reference {{key}}"
        if model is not None and node.get("_autoremap", "false").lower() not in ("true", "1"):
            for port in sorted(set(model.ports) - set(node.attrib) - model.defaults):
                yield f"{where}: port {port!r} of the SubTree model {node.get('ID')!r} is not set"
        for child in node:
            yield from self.node(child, where)

    def data_flow(self, trees: list[ET.Element], main: str | None) -> Iterator[str]:
        by_id = {tree.get("ID"): tree for tree in trees}
        instances: dict[str, list[set[str]]] = {}
        for tree in trees:
            for element in tree.iter("SubTree"):
                names = {a for a in element.attrib if a not in ("ID", "name") and not a.startswith("_")}
                model = self.subtree_models.get(element.get("ID", ""))
                if model is not None:
                    names |= model.defaults
                instances.setdefault(element.get("ID", ""), []).append(names)
        for tree_id, tree in by_id.items():
            if tree_id != main and tree_id in instances:
                available = set.intersection(*instances[tree_id])
            else:
                available = set()
            for root in tree:
                yield from self._flow(root, f"BehaviorTree[@ID={tree_id!r}]", available)

    def _flow(self, node: ET.Element, parent: str, available: set[str]) -> Iterator[str]:
        where = f"{parent}/{node.tag}[@name={node.get('name', '')!r}]"
        entry = self.known.get(self.type_of(node))
        if entry is None or entry.category == "SubTree":
            return
        reads: list[tuple[str, str]] = []
        writes: list[str] = []
        for attribute, value in node.attrib.items():
            key = _reference(value)
            direction = entry.ports.get(attribute)
            if key is None or direction is None or key.startswith("@"):
                continue
            if direction in ("input_port", "inout_port"):
                reads.append((attribute, key))
            if direction in ("output_port", "inout_port"):
                writes.append(key)

        def check_reads() -> Iterator[str]:
            for attribute, key in reads:
                if key not in available:
                    yield f"{where}: port {attribute!r} reads {{{key}}}, which nothing writes before it"

        if entry.category != "Decorator":
            yield from check_reads()
        available.update(writes)
        for child in node:
            yield from self._flow(child, where, available)
        if entry.category == "Decorator":
            yield from check_reads()


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
            if node.tag == "SubTree":
                continue
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

    py_trees' parser puts each unit's subtree in place of its ``<SubTree>`` (with the
    subtree's blackboard keys namespaced by the instance). Built-in
    ``Sequence``/``Fallback`` become py_trees composites with memory; custom types
    become the stand-ins of :func:`node_registry` (SubTree models are skipped). py_trees qualifies each name
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
            the parser rejected the document (or a ``SubTree`` names no tree).
    """
    from py_trees.parsers.behaviour_tree_xml import parse_behaviour_tree_xml

    registry = node_registry(ET.fromstring(xml_text))
    with tempfile.TemporaryDirectory(prefix="erobs_bt_btcpp_") as folder:
        path = Path(folder) / "tree.xml"
        path.write_text(xml_text, encoding="utf-8")
        return parse_behaviour_tree_xml(str(path), node_registry=registry)

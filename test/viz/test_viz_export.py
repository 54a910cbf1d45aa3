"""Exporting a compiled tree as BehaviorTree.CPP v4 XML and as a graph: the XML conforms to
the format (one SubTree per unit, step parameters as ports, every blackboard key written
before it is read), mirrors the py_trees tree, and py_trees' own XML parser loads it back;
the GraphML and node-link JSON exports read back into networkx as the same tree."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import py_trees
import pytest
from click.testing import CliRunner

from erobs_bt.script.model import MoveTo
from erobs_bt.script.parse import parse_script
from erobs_bt.script.poses import PoseRegistry
from erobs_bt.tree.context import Mode
from erobs_bt.viz.commands import export
from erobs_bt.viz.export_btcpp import (
    BUILTIN_NODES,
    check_btcpp,
    inline_subtrees,
    load_btcpp,
    step_parameters,
    to_btcpp_xml,
    tree_id_for,
)
from erobs_bt.viz.export_graph import child_edges, graph_text, read_graph, tree_graph
from erobs_bt.viz.render import compile_for_display


@pytest.fixture
def full_tree(samples_dir: Path) -> py_trees.behaviour.Behaviour:
    script = parse_script(
        (samples_dir / "FULL_EXPERIMENT_RUN.json").read_bytes(),
        registry=PoseRegistry.load(samples_dir / "cms_poses.yaml"),
    )
    return compile_for_display(script, enable_batching=True, mode=Mode.EXECUTE)


@pytest.fixture
def clean_blackboard() -> Iterator[None]:
    """py_trees' parser registers port keys on the process-global blackboard."""
    yield
    py_trees.blackboard.Blackboard.clear()


def pre_order(element: ET.Element) -> Iterator[ET.Element]:
    yield element
    for child in element:
        yield from pre_order(child)


def test_export_conforms_to_the_btcpp_v4_format(full_tree: py_trees.behaviour.Behaviour) -> None:
    document = ET.fromstring(to_btcpp_xml(full_tree, tree_id="FULL_EXPERIMENT_RUN"))
    assert check_btcpp(document) == []
    assert document.tag == "root"
    assert document.attrib == {"BTCPP_format": "4", "main_tree_to_execute": "FULL_EXPERIMENT_RUN"}
    trees = document.findall("BehaviorTree")
    assert [t.get("ID") for t in trees] == ["FULL_EXPERIMENT_RUN"] + [
        f"FULL_EXPERIMENT_RUN__unit_{n}" for n in range(1, 19)
    ]
    assert all(len(tree) == 1 for tree in trees)
    model = document.find("TreeNodesModel")
    declared = {node.get("ID"): node for node in model if node.tag != "SubTree"}
    subtree_models = {node.get("ID"): node for node in model if node.tag == "SubTree"}
    used = {element.tag for tree in trees for element in pre_order(tree[0])}
    assert used - set(BUILTIN_NODES) == set(declared), "every custom type used is declared, nothing more"
    assert set(subtree_models) == {t.get("ID") for t in trees[1:]}
    assert declared["FaultOnFatal"].tag == "Decorator"
    assert declared["ReplayNotFatal"].tag == "Condition"
    assert declared["PlanUnit"].tag == "Action"
    for tree in trees:
        for element in pre_order(tree[0]):
            if element.tag in declared:
                ports = {port.get("name") for port in declared[element.tag]}
                assert set(element.attrib) - {"name"} == ports, (
                    f"{element.tag} sets exactly its declared ports"
                )
            if element.tag == "SubTree":
                ports = {port.get("name") for port in subtree_models[element.get("ID")]}
                assert set(element.attrib) - {"name", "ID"} == ports, "a SubTree sets its model's ports"


def test_each_unit_is_a_subtree_with_its_step_parameters_as_ports(
    full_tree: py_trees.behaviour.Behaviour,
) -> None:
    document = ET.fromstring(to_btcpp_xml(full_tree, tree_id="T"))
    main = document.find("BehaviorTree[@ID='T']")[0]
    subtrees = [e for e in main if e.tag == "SubTree"]
    assert [e.get("ID") for e in subtrees] == [f"T__unit_{n}" for n in range(1, 19)]
    assert [e.tag for e in main][::2] == ["UnitBoundary"] * 19, "a boundary before, between and after units"
    # unit 6: four relative cartesian moves (steps 9-12); their targets, directions, distances
    unit6 = subtrees[5]
    assert unit6.get("name") == "unit 6: batch[4]: moveto, moveto, moveto, moveto"
    assert unit6.get("step9_direction") == "backward" and unit6.get("step9_distance") == "0.02"
    assert unit6.get("step12_direction") == "forward" and unit6.get("step12_distance") == "0.063"
    assert unit6.get("step9_planning_type") == "cartesian"
    assert subtrees[0].get("step1_target") == "spincoater_scan"
    assert subtrees[1].get("step4_operation") == "dock" and subtrees[1].get("step4_dock_number") == "4"
    assert subtrees[4].get("step8_task_type") == "vision_moveto", "the script's task type"
    assert subtrees[10].get("step19_led_color_g") == "1.0", "a nested object is flattened"
    model = document.find("TreeNodesModel/SubTree[@ID='T__unit_6']")
    assert {p.get("name") for p in model} == {k for k in unit6.attrib if k.startswith("step")}
    assert (
        next(p for p in model if p.get("name") == "step9_distance").text
        == "step 9 (tasks[6] (pickup_vial step 3))"
    )


def test_every_blackboard_key_is_written_before_it_is_read(full_tree: py_trees.behaviour.Behaviour) -> None:
    document = ET.fromstring(to_btcpp_xml(full_tree, tree_id="T"))
    unit1 = document.find("BehaviorTree[@ID='T__unit_1']")[0]
    cached = next(unit1.iter("ReplayCached"))
    assert (cached.get("cache_key"), cached.get("fatal_error")) == ("{cache_key}", "{fatal_error}")
    model = document.find("TreeNodesModel")
    directions = {
        (node.get("ID"), port.get("name")): port.tag
        for node in model
        if node.tag != "SubTree"
        for port in node
    }
    assert directions["ReplayCached", "cache_key"] == "output_port"
    assert directions["ReplayCached", "fatal_error"] == "output_port"
    assert directions["ReplayNotFatal", "fatal_error"] == "input_port"
    assert directions["PlanUnit", "solution"] == "output_port"
    assert directions["ExecuteSolution", "solution"] == "input_port"

    # Today's main declared cache_key as an input nothing wrote: the check names it.
    def read_cache_key(d: ET.Element) -> None:
        port = next(
            p for p in d.find("TreeNodesModel/Action[@ID='ReplayCached']") if p.get("name") == "cache_key"
        )
        port.tag = "input_port"

    problems = broken(document, read_cache_key)
    assert problems and all("reads {cache_key}, which nothing writes before it" in p for p in problems)
    assert len(problems) == sum(1 for _ in document.iter("ReplayCached"))

    # A reader before its writer fails too (ReplayNotFatal moved in front of ReplayCached).
    def reorder(d: ET.Element) -> None:
        fallback = next(d.find("BehaviorTree[@ID='T__unit_1']").iter("Fallback"))
        guard = next(fallback.iter("ReplayNotFatal"))
        next(fallback.iter("Sequence")).remove(guard)
        fallback.insert(0, guard)

    assert any(
        "ReplayNotFatal[@name='ReplayNotFatal?']: port 'fatal_error' reads {fatal_error}" in p
        for p in broken(document, reorder)
    )

    # Subtree blackboards are their own: a key written in unit 1 is not there in unit 2.
    def read_in_other_unit(d: ET.Element) -> None:
        execute = next(d.find("BehaviorTree[@ID='T__unit_4']").iter("ExecuteSolution"))
        execute.set("solution", "{planned_elsewhere}")

    assert any("reads {planned_elsewhere}" in p for p in broken(document, read_in_other_unit))


def test_export_mirrors_the_py_trees_tree(full_tree: py_trees.behaviour.Behaviour) -> None:
    document = ET.fromstring(to_btcpp_xml(full_tree, tree_id="t"))
    inlined = inline_subtrees(document)
    assert len(inlined.findall("BehaviorTree")) == 1 and check_btcpp(inlined) == []
    elements = list(pre_order(inlined.find("BehaviorTree")[0]))
    behaviours = list(_pre_order_behaviours(full_tree))
    assert [e.get("name") for e in elements] == [b.name for b in behaviours]
    for element, behaviour in zip(elements, behaviours, strict=True):
        assert len(element) == len(behaviour.children)
        if isinstance(behaviour, py_trees.composites.Selector):
            assert element.tag == "Fallback", "Selector(memory=True) is BT.CPP's Fallback"
        elif isinstance(behaviour, py_trees.composites.Sequence):
            assert element.tag == "Sequence", "Sequence(memory=True) is BT.CPP's Sequence"
        else:
            assert element.tag == type(behaviour).__name__
    units = [e for e in inlined.find("BehaviorTree")[0] if e.get("name", "").startswith("unit ")]
    assert len(units) == 18
    # The solution a unit plans is the one it executes: the same blackboard entry.
    for unit in units:
        planned = [e.get("solution") for e in pre_order(unit) if e.tag == "PlanUnit"]
        executed = [e.get("solution") for e in pre_order(unit) if e.tag == "ExecuteSolution"]
        assert planned == executed
        if planned:
            assert planned == ["{solution}"]


def _pre_order_behaviours(root: py_trees.behaviour.Behaviour) -> Iterator[py_trees.behaviour.Behaviour]:
    yield root
    for child in root.children:
        yield from _pre_order_behaviours(child)


def test_py_trees_xml_parser_loads_the_export(
    full_tree: py_trees.behaviour.Behaviour, clean_blackboard: None
) -> None:
    loaded = load_btcpp(to_btcpp_xml(full_tree, tree_id="FULL_EXPERIMENT_RUN"))
    original = list(_pre_order_behaviours(full_tree))
    again = list(_pre_order_behaviours(loaded))
    assert len(again) == len(original)
    for mine, theirs in zip(original, again, strict=True):
        assert theirs.name == mine.name or theirs.name.endswith("." + mine.name), (theirs.name, mine.name)
        assert len(theirs.children) == len(mine.children)
        if isinstance(mine, py_trees.composites.Composite):
            for kind in (py_trees.composites.Selector, py_trees.composites.Sequence):
                assert isinstance(theirs, kind) == isinstance(mine, kind)
            assert theirs.memory is True
        else:
            assert type(theirs).__name__ == type(mine).__name__
    assert sum(1 for b in loaded.children if ".unit " in b.name) == 18
    plan = next(b for b in again if type(b).__name__ == "PlanUnit")
    assert set(plan.input_ports()) == {"unit", "steps", "timeout"}
    assert set(plan.output_ports()) == {"solution", "fatal_error"}
    with pytest.raises(RuntimeError, match="for inspection only"):
        plan.update()


def broken(document: ET.Element, change) -> list[str]:
    copied = copy.deepcopy(document)
    change(copied)
    return check_btcpp(copied)


def test_the_format_check_names_each_problem(full_tree: py_trees.behaviour.Behaviour) -> None:
    document = ET.fromstring(to_btcpp_xml(full_tree, tree_id="main"))

    def set_format(d: ET.Element) -> None:
        d.set("BTCPP_format", "3")

    assert any("BTCPP_format" in p for p in broken(document, set_format))

    def undeclare(d: ET.Element) -> None:
        m = d.find("TreeNodesModel")
        m.remove(next(n for n in m if n.get("ID") == "PlanUnit"))

    problems = broken(document, undeclare)
    assert problems and all("'PlanUnit' is neither built in nor declared" in p for p in problems)

    def second_tree(d: ET.Element) -> None:
        d.append(copy.deepcopy(d.find("BehaviorTree")))

    assert any("ID used twice" in p for p in broken(document, second_tree))

    def wrong_main(d: ET.Element) -> None:
        d.set("main_tree_to_execute", "other")

    assert any("names no BehaviorTree" in p for p in broken(document, wrong_main))

    def two_children(d: ET.Element) -> None:
        decorator = next(e for e in d.iter("FaultOnFatal"))
        decorator.append(ET.Element("AlwaysSuccess"))

    assert any("Decorator with 2 children" in p for p in broken(document, two_children))

    def unknown_port(d: ET.Element) -> None:
        next(d.iter("PlanUnit")).set("speed", "1")

    assert any("'speed' is not a port of PlanUnit" in p for p in broken(document, unknown_port))

    def unset_subtree_port(d: ET.Element) -> None:
        del next(d.iter("SubTree")).attrib["step1_target"]

    assert any(
        "port 'step1_target' of the SubTree model 'main__unit_1' is not set" in p
        for p in broken(document, unset_subtree_port)
    )

    def unknown_subtree_port(d: ET.Element) -> None:
        next(d.iter("SubTree")).set("speed", "1")

    assert any(
        "'speed' is not a port of the SubTree model" in p for p in broken(document, unknown_subtree_port)
    )

    def bad_key(d: ET.Element) -> None:
        next(d.iter("ExecuteSolution")).set("solution", "{solution")

    assert any("not a blackboard reference" in p for p in broken(document, bad_key))

    def duplicate_model(d: ET.Element) -> None:
        d.find("TreeNodesModel").append(copy.deepcopy(next(iter(d.find("TreeNodesModel")))))

    assert any("declared twice" in p for p in broken(document, duplicate_model))

    def redeclare_builtin(d: ET.Element) -> None:
        ET.SubElement(d.find("TreeNodesModel"), "Control", {"ID": "Sequence"})

    assert any("redeclares a built-in" in p for p in broken(document, redeclare_builtin))
    assert check_btcpp(ET.fromstring("<BehaviorTree/>")) == [
        "document element is <BehaviorTree>, expected <root>"
    ]


def test_explicit_node_form_is_accepted() -> None:
    document = ET.fromstring(
        '<root BTCPP_format="4"><BehaviorTree ID="T"><Sequence>'
        '<Action ID="Say" message="hi"/><Condition ID="Say"/></Sequence></BehaviorTree>'
        '<TreeNodesModel><Action ID="Say"><input_port name="message" type="std::string"/></Action>'
        "</TreeNodesModel></root>"
    )
    assert check_btcpp(document) == [
        "BehaviorTree[@ID='T']/Sequence[@name='']/Condition[@name='']: "
        "'Say' is declared as Action, written as Condition"
    ]


def test_tree_ids_are_made_valid() -> None:
    assert tree_id_for("FULL_EXPERIMENT_RUN") == "FULL_EXPERIMENT_RUN"
    assert tree_id_for("2024-run.v2") == "_2024_run_v2"
    with pytest.raises(ValueError, match="tree id"):
        to_btcpp_xml(py_trees.behaviours.Success("x"), tree_id="has space")


def test_export_command_writes_stdout_or_a_file(samples_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    script = str(samples_dir / "FULL_EXPERIMENT_RUN.json")
    poses = str(samples_dir / "cms_poses.yaml")
    result = runner.invoke(export, [script, "--poses", poses, "--format", "btcpp"])
    assert result.exit_code == 0, result.output
    document = ET.fromstring(result.output)
    assert document.get("main_tree_to_execute") == "FULL_EXPERIMENT_RUN"
    out = tmp_path / "tree.xml"
    result = runner.invoke(
        export, [script, "--poses", poses, "--format", "btcpp", "-o", str(out), "--no-batching"]
    )
    assert result.exit_code == 0, result.output
    units = [
        e for e in ET.parse(out).getroot().find("BehaviorTree")[0] if e.get("name", "").startswith("unit ")
    ]
    assert len(units) == 37


def test_the_graph_is_the_tree_with_its_ports_parameters_and_data_flow(
    full_tree: py_trees.behaviour.Behaviour,
) -> None:
    graph = tree_graph(full_tree, tree_id="FULL")
    behaviours = list(_pre_order_behaviours(full_tree))
    assert graph.number_of_nodes() == len(behaviours)
    tree = child_edges(graph)
    assert nx.is_arborescence(tree), "the child edges form one rooted tree"
    assert [graph.nodes[str(i)]["name"] for i in range(len(behaviours))] == [b.name for b in behaviours]
    root = graph.nodes["0"]
    assert (root["type"], root["btcpp_id"], root["category"], root["depth"]) == (
        "UnitSequence",
        "Sequence",
        "Control",
        0,
    )
    # children in order, as the tree ticks them
    order = [v for _, v, data in sorted(tree.out_edges("0", data=True), key=lambda e: e[2]["order"])]
    assert [graph.nodes[v]["name"] for v in order] == [c.name for c in full_tree.children]
    units = [n for n, data in graph.nodes(data=True) if data["is_unit"]]
    assert len(units) == 18
    unit6 = graph.nodes[units[5]]
    assert (unit6["unit"], unit6["param_step9_direction"], unit6["param_step9_distance"]) == (
        6,
        "backward",
        "0.02",
    )
    plan = next(n for n, d in graph.nodes(data=True) if d["type"] == "PlanUnit" and d["unit"] == 1)
    assert graph.nodes[plan]["port_steps"] == "1-3" and graph.nodes[plan]["port_solution"] == "{solution}"
    flows = [(u, v, d["key"]) for u, v, d in graph.edges(data=True) if d["kind"] == "blackboard"]
    execute = next(n for n, d in graph.nodes(data=True) if d["type"] == "ExecuteSolution" and d["unit"] == 1)
    assert (plan, execute, "solution") in flows
    assert all(graph.nodes[u]["unit"] == graph.nodes[v]["unit"] for u, v, _ in flows), "flows stay in a unit"
    guards = [v for u, v, key in flows if key == "fatal_error" and graph.nodes[v]["type"] == "ReplayNotFatal"]
    assert len(guards) == sum(1 for b in behaviours if type(b).__name__ == "ReplayNotFatal")


@pytest.mark.parametrize("fmt", ["graphml", "json"])
def test_graph_formats_read_back_into_networkx(full_tree: py_trees.behaviour.Behaviour, fmt: str) -> None:
    graph = tree_graph(full_tree, tree_id="FULL")
    again = read_graph(graph_text(graph, fmt), fmt)
    assert again.is_directed()
    assert set(again.nodes) == set(graph.nodes)
    assert {(u, v) for u, v in again.edges} == {(u, v) for u, v in graph.edges}
    for node, data in graph.nodes(data=True):
        assert again.nodes[node] == data
    assert again.graph["tree_id"] == "FULL"


def test_export_command_writes_graphs(samples_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    script = str(samples_dir / "FULL_EXPERIMENT_RUN.json")
    poses = str(samples_dir / "cms_poses.yaml")
    out = tmp_path / "tree.graphml"
    result = runner.invoke(export, [script, "--poses", poses, "--format", "graphml", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "GraphML" in result.output and "nodes" in result.output
    graph = nx.read_graphml(out)
    assert sum(1 for _, d in graph.nodes(data=True) if d["is_unit"]) == 18
    result = runner.invoke(export, [script, "--poses", poses, "--format", "json", "--no-batching"])
    assert result.exit_code == 0, result.output
    graph = read_graph(result.output, "json")
    assert sum(1 for _, d in graph.nodes(data=True) if d["is_unit"]) == 37
    assert graph.graph["tree_id"] == "FULL_EXPERIMENT_RUN"


def test_step_parameters_never_look_like_a_blackboard_reference() -> None:
    step = MoveTo(
        index=2,
        path="tasks[2]",
        spec={"task_type": "moveto", "frame_id": "{odd}", "cartesian_target": [0.1, 0.2, 0.3]},
        cartesian_target=(0.1, 0.2, 0.3),
        frame_id="{odd}",
    )
    assert step_parameters(step) == [
        ("step3_task_type", "moveto"),
        ("step3_frame_id", " {odd}"),
        ("step3_cartesian_target", "0.1;0.2;0.3"),
    ]

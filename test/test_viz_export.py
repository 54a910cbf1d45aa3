"""Exporting a compiled tree as BehaviorTree.CPP v4 XML: the file conforms to the format,
mirrors the py_trees tree, and py_trees' own XML parser loads it back."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import py_trees
import pytest
from click.testing import CliRunner

from erobs_bt.script.parse import parse_script
from erobs_bt.script.poses import PoseRegistry
from erobs_bt.tree.context import Mode
from erobs_bt.viz.commands import export
from erobs_bt.viz.export_btcpp import BUILTIN_NODES, check_btcpp, load_btcpp, to_btcpp_xml, tree_id_for
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
    (tree,) = document.findall("BehaviorTree")
    assert tree.get("ID") == "FULL_EXPERIMENT_RUN" and len(tree) == 1
    declared = {node.get("ID"): node for node in document.find("TreeNodesModel")}
    used = {element.tag for element in pre_order(tree[0])}
    assert used - set(BUILTIN_NODES) == set(declared), "every custom type used is declared, nothing more"
    assert declared["FaultOnFatal"].tag == "Decorator"
    assert declared["ReplayNotFatal"].tag == "Condition"
    assert declared["PlanUnit"].tag == "Action"
    for element in pre_order(tree[0]):
        if element.tag in declared:
            ports = {port.get("name") for port in declared[element.tag]}
            assert set(element.attrib) - {"name"} == ports, f"{element.tag} sets exactly its declared ports"


def test_export_mirrors_the_py_trees_tree(full_tree: py_trees.behaviour.Behaviour) -> None:
    document = ET.fromstring(to_btcpp_xml(full_tree, tree_id="t"))
    elements = list(pre_order(document.find("BehaviorTree")[0]))
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
    units = [e for e in document.find("BehaviorTree")[0] if e.get("name", "").startswith("unit ")]
    assert len(units) == 18
    # The solution a unit plans is the one it executes: the same blackboard entry.
    for unit in units:
        planned = [e.get("solution") for e in pre_order(unit) if e.tag == "PlanUnit"]
        executed = [e.get("solution") for e in pre_order(unit) if e.tag == "ExecuteSolution"]
        assert planned == executed
        if planned:
            assert planned == [f"{{solution_unit_{unit.get('name').split(':')[0].split()[1]}}}"]


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
    assert set(plan.output_ports()) == {"solution"}
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

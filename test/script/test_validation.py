"""The configuration-validation toolkit (erobs_bt/validation.py): one wording, paths in errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from erobs_bt.script.errors import ScriptError
from erobs_bt.validation import Checker, ConfigError, join, read_yaml
from erobs_bt.world.cell import CellConfigError

CELL = Checker(file="cell.yaml", string_keys=True)


def test_an_error_names_the_file_then_the_path_of_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        CELL.string(3, join(join("grippers", "hande"), "tip_frame"))
    assert str(info.value) == "cell.yaml: grippers.hande.tip_frame: must be a string (got 3)"
    assert (info.value.file, info.value.path) == ("cell.yaml", "grippers.hande.tip_frame")
    assert (
        str(ConfigError("", "must be an object (got 42)", file="x.yaml"))
        == "x.yaml: must be an object (got 42)"
    )
    assert str(ConfigError("tasks", "must be a non-empty list", sep=" ")) == "tasks must be a non-empty list"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "must be a finite number >= 0 (m) (got true)"),
        (math.nan, "must be a finite number >= 0 (m) (got NaN)"),
        (-1, "must be a finite number >= 0 (m) (got -1)"),
        (10**400, "must be a finite number >= 0 (m) (got an integer too large for a float)"),
    ],
)
def test_booleans_nan_and_out_of_range_are_not_numbers(value: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        CELL.number(value, "collision.padding", unit="m", minimum=0.0)
    assert str(info.value) == f"cell.yaml: collision.padding: {message}"


def test_vectors_keys_and_occurrences() -> None:
    assert CELL.numbers([1, 2.5, 3], "xyz", 3, unit="m") == (1.0, 2.5, 3.0)
    with pytest.raises(
        ConfigError, match=r"^cell.yaml: size: must be 3 positive numbers \(got \[1, -2, 3\]\)$"
    ):
        CELL.numbers([1, -2, 3], "size", 3, positive=True)
    with pytest.raises(ConfigError, match=r"^cell.yaml: grippers: keys must be strings \(got 1\)$"):
        CELL.mapping({1: "a"}, "grippers")
    with pytest.raises(
        ConfigError, match=r"^cell.yaml: docks\[0\].numbr: unknown key; did you mean 'number'\?"
    ):
        CELL.only_keys({"numbr": 1}, "docks[0]", ("number", "pose"))
    with pytest.raises(ConfigError, match=r"^cell.yaml: docks\[0\].pose: missing$"):
        CELL.required({}, "pose", "docks[0]")
    assert CELL.occurrences("all", "o") is None and CELL.occurrences([2, 3], "o") == frozenset({2, 3})
    for bad in (0, [], [1, True], 1.0):
        with pytest.raises(ConfigError, match=r"^cell.yaml: o: must be 'all', an integer >= 1"):
            CELL.occurrences(bad, "o")


def test_each_reader_keeps_its_error_type_and_word() -> None:
    from erobs_bt.script import _values as v

    with pytest.raises(ScriptError, match=r"^tasks\[0\].planing_type: unknown field of moveto; did you mean"):
        v.only_keys({"planing_type": 1}, "tasks[0]", ("planning_type",), owner="moveto")
    assert isinstance(ScriptError("a", "b"), ConfigError)
    assert issubclass(CellConfigError, ConfigError) and CellConfigError("c.yaml", "k", "r").key == "k"


def test_read_yaml_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=rf"^{missing}: cannot read: "):
        read_yaml(str(missing))
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{broken}: invalid YAML: "):
        read_yaml(str(broken))
    fine = tmp_path / "fine.yaml"
    fine.write_text("a: [1, 2]\n", encoding="utf-8")
    assert read_yaml(str(fine)) == {"a": [1, 2]}

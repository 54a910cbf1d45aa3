"""docs/script-format.md: every example validates, and every task type is documented."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from erobs_bt.cli import main
from erobs_bt.script.parse import DIRECTION_VECTORS, PIPETTOR_OPERATIONS, PLANNING_TYPES, TASK_TYPES

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "script-format.md"
POSES = REPO / "config" / "poses.yaml"
EXAMPLES = re.findall(r"```json\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_page_has_examples() -> None:
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"example {i + 1}" for i in range(len(EXAMPLES))])
def test_every_example_validates(example: str, tmp_path: Path) -> None:
    script = tmp_path / "example.json"
    script.write_text(example, encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(script), "--poses", str(POSES), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["valid"] is True


def test_every_task_type_operation_direction_and_planning_type_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    for name in (*TASK_TYPES, *PIPETTOR_OPERATIONS, *DIRECTION_VECTORS, *(p for p in PLANNING_TYPES if p)):
        assert f"`{name}`" in text or f"`{name}/" in text or f"/`{name}`" in text, name


def test_the_full_experiment_is_described_as_it_is(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["validate", str(REPO / "config" / "full_experiment.json"), "--poses", str(POSES), "--json"]
    )
    report = json.loads(result.stdout)
    claim = f"{report['tasks']} tasks, {report['total_steps']} steps, {len(report['units'])} units"
    assert claim in DOC.read_text(encoding="utf-8")
    assert 30 <= report["total_steps"] <= 40

"""Every JSON script example of README.md, docs/ and trees/ RUNS to success on the packaged cell.

Validating an example only proves that it parses; a reader copies it and runs it. Each
example found here (every fenced ``json`` block of README.md and docs/*.md that is a task
script, every trees/*.json, and config/full_experiment.json that ``make run`` runs) is run
with ``erobs-bt run`` on the embedded simulated cell at high simulated speed, and its run log
must end with the goal SUCCEEDED. Editing an example in the docs changes what is run here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from erobs_bt.cli import main

REPO = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^```json[ \t]*\n(.*?)^```", flags=re.DOTALL | re.MULTILINE)


def _doc_examples() -> list[tuple[str, str]]:
    """(id, script text) of every task-script JSON block of README.md and docs/*.md."""
    examples: list[tuple[str, str]] = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for k, block in enumerate(_FENCE.findall(doc.read_text(encoding="utf-8"))):
            document = json.loads(block)
            if isinstance(document, dict) and "tasks" in document:
                examples.append((f"{doc.relative_to(REPO)}#{k + 1}", block))
    return examples


def _file_examples() -> list[tuple[str, str]]:
    files = [*sorted((REPO / "trees").glob("*.json")), REPO / "config" / "full_experiment.json"]
    return [(str(f.relative_to(REPO)), f.read_text(encoding="utf-8")) for f in files]


EXAMPLES = _doc_examples() + _file_examples()


def test_the_examples_are_found() -> None:
    ids = [name for name, _ in EXAMPLES]
    assert sum(name.startswith("docs/script-format.md#") for name in ids) >= 8
    assert "trees/pick_and_place.json" in ids and "config/full_experiment.json" in ids


@pytest.mark.parametrize(("name", "text"), EXAMPLES, ids=[name for name, _ in EXAMPLES])
def test_the_example_runs_to_success_on_the_packaged_cell(name: str, text: str, tmp_path: Path) -> None:
    script = tmp_path / "example.json"
    script.write_text(text, encoding="utf-8")
    log = tmp_path / "run.jsonl"
    result = CliRunner().invoke(
        main,
        [
            "run",
            str(script),
            "--speed",
            "100",
            "--no-mcap",
            "--auto-resume",
            "--resume-after",
            "0",
            "--log",
            str(log),
        ],
    )
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    finished = [r for r in records if r["event"] == "goal_finished"]
    assert finished, result.output
    assert finished[-1]["status"] == "SUCCEEDED", (name, finished[-1], result.output[-2000:])
    assert result.exit_code == 0, result.output

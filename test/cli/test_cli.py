"""The ``erobs-bt`` command line: validate every sample, run and preview on the simulated cell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from erobs_bt.cli import main

EXPECTED = {
    "perf_safe_transport_to_safe_exchange.json": (2, 1, True, True),
    "spincoat_to_hotplate.json": (9, 1, True, True),
    "FULL_EXPERIMENT_RUN.json": (37, 18, False, False),
    "anti_solvent_dispense.json": (1, 1, False, False),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_validate_reports_steps_units_eligibility_and_previewability(samples_dir: Path, name: str) -> None:
    steps, units, eligible, previewable = EXPECTED[name]
    result = CliRunner().invoke(
        main, ["validate", str(samples_dir / name), "--poses", str(samples_dir / "cms_poses.yaml"), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["total_steps"], len(report["units"]), report["cache_eligible"], report["previewable"]) == (
        steps,
        units,
        eligible,
        previewable,
    )
    assert len(report["key_sha256"]) == 64


def test_validate_rejects_the_legacy_sample_with_the_path_and_exit_2(samples_dir: Path) -> None:
    result = CliRunner().invoke(
        main, ["validate", str(samples_dir / "legacy_place_on_hotplate.json"), "--json"]
    )
    assert result.exit_code == 2
    assert json.loads(result.output)["error"].startswith(
        "tasks[0]: MoveTo goal must specify exactly one of target, direction/distance, or cartesian_target; "
        "this step gives target and direction/distance. EROBS jazzy_dev made the relative move"
    )


def test_the_key_digest_ignores_whitespace_and_key_order(tmp_path: Path, samples_dir: Path) -> None:
    original = samples_dir / "perf_safe_transport_to_safe_exchange.json"
    compact = tmp_path / "compact.json"
    document = json.loads(original.read_text())
    compact.write_text(json.dumps(dict(reversed(list(document.items()))), separators=(",", ":")))
    digests = [
        json.loads(CliRunner().invoke(main, ["validate", str(path), "--json"]).output)["key_sha256"]
        for path in (original, compact)
    ]
    assert digests[0] == digests[1]


def test_no_batching_makes_one_unit_per_step(samples_dir: Path) -> None:
    result = CliRunner().invoke(
        main, ["validate", str(samples_dir / "spincoat_to_hotplate.json"), "--no-batching", "--json"]
    )
    report = json.loads(result.output)
    assert len(report["units"]) == 9 and not report["cache_eligible"]


def test_run_repeat_plans_first_and_replays_second_on_the_simulated_cell(
    samples_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "run.jsonl"
    result = CliRunner().invoke(
        main,
        [
            "run",
            str(samples_dir / "perf_safe_transport_to_safe_exchange.json"),
            "--speed",
            "50",
            "--repeat",
            "2",
            "--log",
            str(log),
        ],
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in log.read_text().splitlines()]
    goals = {}
    for record in records:
        goals.setdefault(record["goal_id"], []).append(record)
    cache = [[r["status"] for r in rs if r["event"] == "cache"] for rs in goals.values() if rs]
    assert cache[0] == ["MISS"] and cache[-1] == ["HIT"], cache
    last = list(goals.values())[-1]
    assert not [r for r in last if r["event"] == "plan_finished"], "the replayed run plans nothing"


def test_preview_refuses_a_script_with_other_steps_with_exit_2(samples_dir: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["preview", str(samples_dir / "anti_solvent_dispense.json"), "--log", str(tmp_path / "p.jsonl")],
    )
    assert result.exit_code == 2
    assert "Preview supports only moveto and end_effector steps" in " ".join(result.output.split())


def test_run_reports_an_invalid_script_with_its_path_and_moves_nothing(
    samples_dir: Path, tmp_path: Path
) -> None:
    result = CliRunner().invoke(
        main,
        ["run", str(samples_dir / "legacy_place_on_hotplate.json"), "--log", str(tmp_path / "r.jsonl")],
    )
    assert result.exit_code == 2
    assert "tasks[0]: MoveTo goal must specify exactly one of" in " ".join(result.output.split())


# -- issue 27 (3): the pose registry defaults to the cell's ------------------------------
REPO = Path(__file__).resolve().parents[2]


def test_the_packaged_registry_is_the_default_and_validate_says_so() -> None:
    # `erobs-bt validate config/full_experiment.json` failed with "unknown pose 'transport'"
    # although the registry it needs is packaged beside the cell.
    result = CliRunner().invoke(main, ["validate", str(REPO / "config" / "full_experiment.json")])
    assert result.exit_code == 0, result.output
    assert "pose registry: " in result.output and "poses.yaml (default of the packaged cell" in result.output
    report = json.loads(
        CliRunner().invoke(main, ["validate", str(REPO / "config" / "full_experiment.json"), "--json"]).stdout
    )
    assert Path(report["pose_registry"]) == REPO / "config" / "poses.yaml"


def test_another_cell_takes_the_registry_beside_it_or_none_and_the_error_names_the_option(
    tmp_path: Path,
) -> None:
    cell = tmp_path / "cell.yaml"
    cell.write_text((REPO / "config" / "cell.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps({"start_gripper": "epick", "tasks": [{"task_type": "moveto", "target": "transport"}]})
    )
    refused = CliRunner().invoke(main, ["validate", str(script), "--cell", str(cell)])
    assert refused.exit_code == 2
    assert "no pose registry is loaded" in refused.output and "--poses" in refused.output
    assert "poses_file" in refused.output
    (tmp_path / "poses.yaml").write_text("transport: [79.72, -69.5, -81.91, -117.92, -268.05, -157.15]\n")
    accepted = CliRunner().invoke(main, ["validate", str(script), "--cell", str(cell)])
    assert accepted.exit_code == 0, accepted.output
    assert f"pose registry: {tmp_path / 'poses.yaml'}" in accepted.output.replace("\n", "") or (
        "poses.yaml (default of the cell" in accepted.output
    )


def test_the_nodes_empty_poses_file_is_the_cells_default_registry() -> None:
    from erobs_bt.plan import DEFAULT_POSES_PATH
    from erobs_bt.ros.node.node import engine_config
    from erobs_bt.ros.params import NodeSettings

    assert engine_config(NodeSettings.from_values({})).poses == DEFAULT_POSES_PATH
    given = engine_config(NodeSettings.from_values({"poses_file": "/lab/poses.yaml"}))
    assert given.poses == Path("/lab/poses.yaml")

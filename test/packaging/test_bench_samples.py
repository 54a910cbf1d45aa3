"""``make bench`` without EROBS's sample scripts: the figures that need them are skipped, not fatal.

The samples (``../shared/samples/erobs/``) are not part of the repository, so a fresh clone
has none. ``EROBS_BT_SAMPLES`` (read in ``bench/common.py``) points the benchmarks at an empty
folder here; each section that needs a sample must then return its heading and a paragraph
saying what it skipped and why, and say so on stderr, instead of raising. The sections are
imported and called in a fresh interpreter (the variable is read at import); nothing is measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REASON = "needs EROBS's sample scripts in ../shared/samples/erobs/, not part of the repository"

PROBE = """
import json, sys
sys.path.insert(0, "bench")
import bench_cache, bench_memory, bench_planning, bench_startup
out = {
    "planning": bench_planning.report(),
    "cache": bench_cache.report(),
    "memory": bench_memory.report(),
    "pipettor": bench_startup.pipettor_goal_rows(None),
}
print(json.dumps(out))
"""


def test_sections_needing_samples_report_the_skip(tmp_path: Path) -> None:
    env = dict(os.environ, EROBS_BT_SAMPLES=str(tmp_path))
    completed = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    reports = json.loads(completed.stdout.strip().splitlines()[-1])
    headings = {
        "planning": "## Planning on the simulated cell",
        "cache": "## Plan cache: replay vs fresh plan",
        "memory": "## Memory: a full plan cache",
    }
    for name, heading in headings.items():
        assert reports[name].startswith(heading + "\n\n*Skipped in this run:"), reports[name]
        assert REASON in reports[name]
        assert str(tmp_path) in reports[name]
    assert (
        "one-step pipettor goal" in reports["pipettor"]
        and "anti_solvent_dispense.json" in reports["pipettor"]
    )
    for what in ("every planning figure", "every plan-cache figure", "every memory figure", "pipettor goal"):
        assert any(
            line.startswith("[bench] skipped ") and what in line and REASON in line
            for line in completed.stderr.splitlines()
        ), completed.stderr

"""Every benchmark script still imports and offers its ``report()``.

No test runs the benchmarks (they measure, they do not pass or fail), so a module the code
moved under them broke silently once (``bench_moveit`` imported a name ``bench_ros`` no
longer had, from issue 22 until it was next run). This imports each ``bench/*.py`` in a fresh
interpreter, as ``run_all.py`` and ``python bench/<name>.py`` do (``bench/`` on the path,
the repository as the working folder); nothing is measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"

PROBE = """
import importlib, json, sys
sys.path.insert(0, "bench")
reports = {n: callable(getattr(importlib.import_module(n), "report", None)) for n in sys.argv[1:]}
sections = [m for _, m in importlib.import_module("run_all").SECTIONS]
print(json.dumps({"reports": reports, "sections": sections}))
"""


def test_every_benchmark_module_imports_and_has_a_report() -> None:
    names = sorted(path.stem for path in BENCH.glob("*.py"))
    benchmarks = [name for name in names if name.startswith("bench_")]
    assert benchmarks, f"no bench_*.py in {BENCH}"
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, *names],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    found = json.loads(completed.stdout.strip().splitlines()[-1])
    assert sorted(found["reports"]) == names
    missing = [name for name in benchmarks if not found["reports"][name]]
    assert not missing, f"benchmark modules without a report(): {missing}"
    # run_all.py measures these sections (bench_moveit runs on its own: it takes minutes).
    assert found["sections"] and set(found["sections"]) <= set(benchmarks), found["sections"]

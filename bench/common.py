"""Small helpers shared by the benchmarks: timing, statistics and table output.

Benchmarks are not tests: they print figures measured side by side in one run, as
medians over repeats and as ratios against a named baseline. What they share with the tests
is not copied here: importing this module puts ``test/`` on ``sys.path``, so the benchmarks
take the test helpers (``helpers``: the sample poses, ``move()``, ``script()``, ``LED``;
``ros_fixtures``: ``RosProcess``) from their one place.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

#: The tests' folder, whose helper modules the benchmarks import (see the module docstring).
TEST_DIR = Path(__file__).resolve().parents[1] / "test"
if str(TEST_DIR) not in sys.path:
    sys.path.append(str(TEST_DIR))

#: EROBS's sample scripts and pose registry (``cms_poses.yaml``) that some figures measure. They
#: are not part of the repository: ``../shared/samples/erobs/`` beside the checkout, or the folder
#: named by the environment variable ``EROBS_BT_SAMPLES``.
SAMPLES = Path(
    os.environ.get("EROBS_BT_SAMPLES") or Path(__file__).resolve().parents[2] / "shared" / "samples" / "erobs"
)
#: Why a figure that needs :data:`SAMPLES` is skipped when they are absent.
SAMPLES_REASON = "needs EROBS's sample scripts in ../shared/samples/erobs/, not part of the repository"


def samples_skipped(what: str, names: Sequence[str]) -> str | None:
    """``None`` when every file ``names`` (in :data:`SAMPLES`) exists; otherwise say on stderr
    that ``what`` is skipped and why, and return the Markdown paragraph saying so."""
    missing = [name for name in names if not (SAMPLES / name).is_file()]
    if not missing:
        return None
    detail = f"{SAMPLES_REASON} (missing here: {', '.join(missing)} in {SAMPLES})"
    print(f"[bench] skipped {what}: {detail}", file=sys.stderr, flush=True)
    return f"*Skipped in this run: {what}; it {detail}.*"


def measure(fn: Callable[[], object], *, repeats: int, inner: int = 1) -> list[float]:
    """Run ``fn`` ``inner`` times per sample, ``repeats`` samples; seconds per call."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return samples


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def p90(samples: Sequence[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def machine() -> str:
    """One line describing the machine the figures were measured on."""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        model = platform.processor() or "?"
    system = f"{platform.system()} {platform.release()}"
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, {system}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def compile_package() -> None:
    """Byte-compile erobs_bt's sources in place (``python -m compileall``), as ``pip install``
    does for an installed package, so that processes the benchmarks start read bytecode instead
    of compiling the sources on every start (which they would with ``PYTHONDONTWRITEBYTECODE``
    set, and which no installed user pays). Idempotent: up-to-date files are skipped."""
    import compileall
    from pathlib import Path

    import erobs_bt

    compileall.compile_dir(Path(erobs_bt.__file__).parent, quiet=1)

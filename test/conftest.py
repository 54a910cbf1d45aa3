"""Shared pytest fixtures, and the suite's hypothesis profile.

Hypothesis runs derandomised and without an example database by default, so the suite draws
the same examples on every machine and every run (a failure found once is kept as an
``@example`` in its test). ``HYPOTHESIS_PROFILE=explore`` draws fresh random examples, for
hunting new counterexamples by hand.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings
from interop import REQUIRE_SHARED_ENV, shared_required

from erobs_bt.backends.sim.cell import CellConfig, load_cell
from erobs_bt.script.model import Step
from erobs_bt.script.parse import parse_script

settings.register_profile("deterministic", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


#: The real EROBS sample scripts and pose registry: beside the repository, not in it.
SAMPLES_DIR = Path(__file__).resolve().parents[2] / "shared" / "samples" / "erobs"

#: Set to 1 (``.ci/run`` does) to make a missing ../shared a failure instead of a skip
#: (one switch for the samples and the upstream type hashes: :mod:`interop`).
REQUIRE_SAMPLES = REQUIRE_SHARED_ENV


def require_samples() -> Path:
    """:data:`SAMPLES_DIR`, or skip the test when it is absent (a clone on its own).

    With ``EROBS_BT_REQUIRE_SHARED=1`` an absent folder fails the test instead, so CI
    cannot pass with the sample tests silently skipped.
    """
    if not (SAMPLES_DIR / "FULL_EXPERIMENT_RUN.json").is_file():
        reason = f"the EROBS sample scripts are not beside the repository ({SAMPLES_DIR} is missing)"
        if shared_required():
            pytest.fail(f"{reason}, and {REQUIRE_SAMPLES}=1 makes them mandatory")
        pytest.skip(reason)
    return SAMPLES_DIR


@pytest.fixture
def samples_dir() -> Path:
    """The EROBS sample scripts and pose registry (``../shared/samples/erobs``); skips when absent."""
    return require_samples()


@pytest.fixture(scope="module")
def cell() -> CellConfig:
    """The packaged simulated cell (``config/cell.yaml``)."""
    return load_cell()


@pytest.fixture
def perf_steps(samples_dir: Path) -> tuple[Step, ...]:
    """The two moves of ``perf_safe_transport_to_safe_exchange.json`` (one batch)."""
    return parse_script((samples_dir / "perf_safe_transport_to_safe_exchange.json").read_text()).steps

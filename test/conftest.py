"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from erobs_bt.backends.sim.cell import CellConfig, load_cell
from erobs_bt.script.model import Step
from erobs_bt.script.parse import parse_script


@pytest.fixture
def samples_dir() -> Path:
    """The EROBS sample scripts and pose registry (``../shared/samples/erobs``)."""
    return Path(__file__).resolve().parents[2] / "shared" / "samples" / "erobs"


@pytest.fixture(scope="module")
def cell() -> CellConfig:
    """The packaged simulated cell (``config/cell.yaml``)."""
    return load_cell()


@pytest.fixture
def perf_steps(samples_dir: Path) -> tuple[Step, ...]:
    """The two moves of ``perf_safe_transport_to_safe_exchange.json`` (one batch)."""
    return parse_script((samples_dir / "perf_safe_transport_to_safe_exchange.json").read_text()).steps

"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def samples_dir() -> Path:
    """The EROBS sample scripts and pose registry (``../shared/samples/erobs``)."""
    return Path(__file__).resolve().parents[2] / "shared" / "samples" / "erobs"

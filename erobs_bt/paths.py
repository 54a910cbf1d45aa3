"""Where erobs_bt's installed data files are.

``config/``, ``trees/`` and ``launch/`` live at the repository root in a source
checkout (``pip install -e .``) and under ``<prefix>/share/erobs_bt/`` when installed
as an ament_python package or a wheel (setup.py ``data_files``).
"""

from __future__ import annotations

import sys
from pathlib import Path


def share_dir() -> Path:
    """The directory holding ``config/``, ``trees/`` and ``launch/``.

    Raises:
        FileNotFoundError: neither a source checkout nor an installed share directory
            holds ``config/cell.yaml``.
    """
    source = Path(__file__).resolve().parent.parent
    candidates = [source, Path(sys.prefix) / "share" / "erobs_bt"]
    for candidate in candidates:
        if (candidate / "config" / "cell.yaml").is_file():
            return candidate
    raise FileNotFoundError(
        "erobs_bt data files not found; looked for config/cell.yaml in "
        + ", ".join(str(c) for c in candidates)
    )


def config_file(name: str) -> Path:
    """``config/<name>`` of :func:`share_dir`."""
    return share_dir() / "config" / name

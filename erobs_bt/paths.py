"""Where erobs_bt's installed data files are, and where a ROS package's share directory is.

``config/``, ``trees/`` and ``launch/`` live at the repository root in a source checkout
(``pip install -e .``, ``colcon build --symlink-install``) and under
``<prefix>/share/erobs_bt/`` when installed as an ament_python package (a plain ``colcon
build``) or as a wheel (setup.py ``data_files``). This module is the one place that looks
them up; nothing else derives a data path from ``__file__``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "erobs_bt"
#: The file whose presence marks a directory as erobs_bt's share directory.
_PROBE = Path("config") / "cell.yaml"


def package_share_dir(package: str) -> Path:
    """The installed ``share/<package>`` of a ROS package.

    From the ament index of ``AMENT_PREFIX_PATH`` (a sourced ROS installation or colcon
    workspace, or ``scripts/env.sh``); without it, the venv's prefix, where the ROS wheels,
    our interface packages and ``scripts/setup.sh``'s erobs_bt entry install (the wheels need
    no sourcing and do not set it).

    Raises:
        ValueError: the package is in neither (naming where it looked).
    """
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    if os.environ.get("AMENT_PREFIX_PATH"):
        try:
            return Path(get_package_share_directory(package))
        except PackageNotFoundError as exc:
            raise ValueError(
                f"package {package} is not in the ament index (AMENT_PREFIX_PATH="
                f"{os.environ['AMENT_PREFIX_PATH']})"
            ) from exc
    marker = Path(sys.prefix) / "share" / "ament_index" / "resource_index" / "packages" / package
    if not marker.exists():
        raise ValueError(f"package {package} is not installed in {sys.prefix} (no {marker})")
    return Path(sys.prefix) / "share" / package


def share_dir_candidates() -> Iterator[Path]:
    """The directories :func:`share_dir` tries, in order, each computed when reached.

    1. the source checkout holding this package (``pip install -e .``, a colcon
       ``--symlink-install``: the module resolves to the checkout);
    2. ``share/erobs_bt`` from the ament index (``AMENT_PREFIX_PATH``: a sourced colcon
       install or ROS installation, or the venv of ``scripts/env.sh``; without it the venv's
       own index, see :func:`package_share_dir`);
    3. ``<prefix>/share/erobs_bt`` of the prefix this module is installed in
       (``<prefix>/lib/pythonX.Y/site-packages/erobs_bt``: a plain colcon install run
       without sourcing, a wheel).
    """
    module_dir = Path(__file__).resolve().parent
    yield module_dir.parent
    try:
        indexed: Path | None = package_share_dir(PACKAGE)
    except ValueError:
        indexed = None
    if indexed is not None:
        yield indexed
    if len(module_dir.parents) > 3:
        yield module_dir.parents[3] / "share" / PACKAGE


def share_dir() -> Path:
    """The directory holding ``config/``, ``trees/`` and ``launch/`` (the first of
    :func:`share_dir_candidates` that holds ``config/cell.yaml``).

    Raises:
        FileNotFoundError: no candidate holds ``config/cell.yaml`` (naming every candidate).
    """
    tried: list[Path] = []
    for candidate in share_dir_candidates():
        if (candidate / _PROBE).is_file():
            return candidate
        tried.append(candidate)
    raise FileNotFoundError(
        "erobs_bt data files not found; looked for config/cell.yaml in "
        + ", ".join(str(c) for c in tried)
        + " (install erobs_bt with scripts/setup.sh, pip or colcon; source a colcon install's setup file)"
    )


def config_file(name: str) -> Path:
    """``config/<name>`` of :func:`share_dir`.

    Raises:
        FileNotFoundError: no share directory was found (see :func:`share_dir`).
    """
    return share_dir() / "config" / name

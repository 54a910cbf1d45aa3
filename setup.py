"""Packaging of erobs_bt: an ament_python package that plain pip can also install.

* colcon / ament: ``package.xml`` declares the ROS dependencies; the ament index marker
  (``resource/erobs_bt``) and ``package.xml`` go to ``share/``, and ``setup.cfg`` puts the
  executables in ``lib/erobs_bt`` so ``ros2 run erobs_bt erobs_bt_node`` finds them.
* pip (``scripts/setup.sh`` runs ``pip install -e .``): the console scripts land in the
  venv's ``bin/``. ``install_requires`` holds the version *ranges* the code needs, read from
  ``requirements.txt``, so erobs_bt installs into other stacks; the exact versions of the
  development venv, transitive ones included, are in ``requirements-<distro>.lock`` (``pip
  install -c requirements-jazzy.lock .[ros]`` reproduces the Jazzy one). The ROS wheels are an
  extra, because a ROS installation provides rclpy and the message packages itself: ``ros`` and
  ``ros-jazzy`` hold ROS 2 Jazzy's (``requirements-ros-jazzy.txt``; EROBS's cell runs Jazzy),
  ``ros-kilted`` Kilted's.

``launch/``, ``config/`` and ``trees/`` are installed under ``share/erobs_bt/`` (see
:mod:`erobs_bt.paths`, which prefers the source checkout when there is one).
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE_NAME = "erobs_bt"
HERE = Path(__file__).resolve().parent
DATA_DIRECTORIES = ("launch", "config", "trees")


def read_requirements(path: Path) -> tuple[list[str], list[str]]:
    """Split a requirements file into (general, ROS wheel) requirement lines.

    Args:
        path: a pip requirements file holding only requirement specifiers (``name>=a,<b``)
            and comments.

    Returns:
        The non-ROS requirements and the ``ros-*`` ones, each in file order.
    """
    general: list[str] = []
    ros: list[str] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        (ros if line.lower().startswith("ros-") else general).append(line)
    return general, ros


def data_files(directories: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    """``data_files`` entries copying each directory tree under ``share/erobs_bt/``.

    Args:
        directories: directories relative to the repository root; missing ones are skipped.

    Returns:
        ``(install directory, [source files])`` pairs, including the ament index marker and
        ``package.xml``.
    """
    entries: list[tuple[str, list[str]]] = [
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE_NAME}"]),
        (f"share/{PACKAGE_NAME}", ["package.xml"]),
    ]
    for directory in directories:
        for root, subdirs, files in os.walk(HERE / directory):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__" and not d.startswith("."))
            relative = Path(root).relative_to(HERE)
            sources = [str(relative / name) for name in sorted(files) if not name.endswith(".pyc")]
            if sources:
                entries.append((f"share/{PACKAGE_NAME}/{relative.as_posix()}", sources))
    return entries


INSTALL_REQUIRES, _ = read_requirements(HERE / "requirements.txt")
#: The ROS 2 wheels of each distro the project is set up for; the first is the default.
ROS_REQUIRES = {
    distro: read_requirements(HERE / f"requirements-ros-{distro}.txt")[1] for distro in ("jazzy", "kilted")
}
# The MADSci node (erobs_bt/madsci/): an extra, as a cell outside a MADSci lab does not need it.
MADSCI_REQUIRES, _ = read_requirements(HERE / "requirements-madsci.txt")

setup(
    name=PACKAGE_NAME,
    version="0.1.0",
    description="Execution engine for EROBS lab-robot JSON task scripts (UR5e) on py_trees and ROS 2",
    license="Apache-2.0",
    python_requires=">=3.11",
    packages=find_packages(exclude=["test", "test.*", "tests", "tests.*"]),
    # viz/static/vendor/: the 3D view's JavaScript, copied there by scripts/setup.sh (npm ci)
    package_data={PACKAGE_NAME: ["py.typed", "viz/static/*", "viz/static/vendor/**/*"]},
    include_package_data=False,
    data_files=data_files(DATA_DIRECTORIES),
    install_requires=INSTALL_REQUIRES,
    extras_require={
        "ros": ROS_REQUIRES["jazzy"],
        **{f"ros-{distro}": requires for distro, requires in ROS_REQUIRES.items()},
        "madsci": MADSCI_REQUIRES,
    },
    zip_safe=False,
    entry_points={
        "console_scripts": [
            "erobs-bt = erobs_bt.cli:main",
            "erobs_bt_node = erobs_bt.ros.node.node:main",
            "erobs_bt_sim_hardware = erobs_bt.doubles.sim_hardware:main",
            "erobs_bt_sim_move_group = erobs_bt.doubles.sim_move_group:main",
            "erobs_bt_madsci_node = erobs_bt.madsci.commands:main",
        ],
    },
)

"""Dependencies: ranges for the package, exact pins of the whole venv in
requirements-<distro>.lock (the ROS 2 distro of this venv: erobs_bt.rosdistro); the venv laid out
as an ament prefix (scripts/ament_prefix.py)."""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from erobs_bt.rosdistro import DISTROS, RCLPY_MAJOR, ros_distro

REPO = Path(__file__).resolve().parents[2]
#: The distro of this venv, whose requirement files and lock set it up.
DISTRO = ros_distro()
COMMON_FILES = (
    "requirements.txt",
    "requirements-build.txt",
    "requirements-dev.txt",
    "requirements-madsci.txt",
)
DISTRO_FILES = {d: (f"requirements-ros-{d}.txt", f"requirements-build-{d}.txt") for d in DISTROS}
REQUIREMENT_FILES = COMMON_FILES + DISTRO_FILES[DISTRO]
LOCK = f"requirements-{DISTRO}.lock"


def lines(path: Path) -> list[str]:
    return [
        line.split("#", 1)[0].strip()
        for line in path.read_text().splitlines()
        if line.split("#", 1)[0].strip()
    ]


def lock(name: str = LOCK) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in lines(REPO / name):
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        assert match, f"{name}: not an exact pin: {line!r}"
        pins[canonicalize_name(match[1])] = match[2]
    return pins


def test_install_requires_are_ranges_not_pins() -> None:
    for name in COMMON_FILES + tuple(f for files in DISTRO_FILES.values() for f in files):
        for line in lines(REPO / name):
            requirement = Requirement(line)
            assert requirement.specifier, f"{name}: {line!r} has no version range"
            assert not any(spec.operator in ("==", "===") for spec in requirement.specifier), (
                f"{name}: {line!r} is an exact pin; pins belong in the requirements-<distro>.lock files"
            )


def local_packages() -> set[str]:
    """erobs_bt and the interface packages built from interfaces/ (not on any index)."""
    names = {canonicalize_name(path.parent.name) for path in (REPO / "interfaces").glob("**/package.xml")}
    return names | {f"erobs-bt-{name}" for name in names}


def test_the_lock_pins_every_installed_package_at_its_installed_version() -> None:
    pins = lock()
    local = local_packages()
    installed = {
        canonicalize_name(dist.metadata["Name"]): dist.version
        for dist in metadata.distributions()
        if not canonicalize_name(dist.metadata["Name"]).startswith("erobs-bt")
        and canonicalize_name(dist.metadata["Name"]) not in local
    }
    missing = sorted(set(installed) - set(pins))
    assert not missing, f"installed but not in {LOCK}: {missing}"
    differing = {name: (installed[name], pins[name]) for name in installed if installed[name] != pins[name]}
    assert not differing, f"installed version != locked version: {differing}"


def test_every_direct_requirement_is_locked_within_its_range() -> None:
    pins = lock()
    for name in REQUIREMENT_FILES:
        for line in lines(REPO / name):
            requirement = Requirement(line)
            key = canonicalize_name(requirement.name)
            assert key in pins, f"{name}: {requirement.name} is not in {LOCK}"
            assert requirement.specifier.contains(pins[key], prereleases=True), (
                f"{name}: the locked {requirement.name}=={pins[key]} is outside {requirement.specifier}"
            )


def test_the_distros_locks_differ_only_in_what_comes_from_ros() -> None:
    """The packages that are not ROS's own have one version for every distro, so the suite runs
    the same non-ROS code on each; and each lock holds its own distro's rclpy."""
    locks = {distro: lock(f"requirements-{distro}.lock") for distro in DISTROS}
    majors = {distro: int(pins["ros-rclpy"].split(".")[0]) for distro, pins in locks.items()}
    assert majors == {distro: major for major, distro in RCLPY_MAJOR.items()}, majors
    names = set().union(*locks.values())
    differing = {name for name in names if len({pins.get(name) for pins in locks.values()}) > 1}
    # A ROS wheel ros-<name> also installs the distribution <name> (rclpy, std_msgs, rosidl_parser).
    not_ros = sorted(n for n in differing if not n.startswith("ros-") and f"ros-{n}" not in names)
    assert not not_ros, f"not ROS packages, yet of other versions in the distros' locks: {not_ros}"


def _ament_prefix() -> Any:
    spec = importlib.util.spec_from_file_location("ament_prefix", REPO / "scripts" / "ament_prefix.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ament_prefix_lays_out_links_prunes_stale_ones_and_never_overwrites(tmp_path: Path) -> None:
    """scripts/ament_prefix.py on an empty prefix: the marker, file links in real directories
    (``ros2 launch`` does not follow directory links), the executables; idempotent; a link to a
    removed file goes, a directory link of old is replaced, a real file is never overwritten."""
    tool = _ament_prefix()
    prefix = tmp_path / "prefix"
    entries = tool.plan(prefix)
    assert tool.apply(entries) and not tool.apply(entries), "the second run changes nothing"
    share = prefix / "share" / "erobs_bt"
    assert (prefix / "share/ament_index/resource_index/packages/erobs_bt").is_file()
    launch = share / "launch" / "erobs_bt.launch.py"
    assert launch.is_symlink() and not launch.parent.is_symlink()
    assert launch.resolve() == REPO / "launch" / "erobs_bt.launch.py"
    assert (prefix / "lib" / "erobs_bt" / "erobs_bt_node").readlink() == prefix / "bin" / "erobs_bt_node"
    stale = share / "config" / "renamed.yaml"
    stale.symlink_to(REPO / "config" / "renamed.yaml")
    assert tool.prune(share, entries) == [f"removed {stale}"] and not stale.is_symlink()
    shutil.rmtree(share / "trees")
    (share / "trees").symlink_to(REPO / "trees")
    assert f"removed the directory link {share / 'trees'}" in tool.apply(entries)
    assert not (share / "trees").is_symlink() and any((share / "trees").iterdir())
    launch.unlink()
    launch.write_text("# someone's own launch file\n")
    with pytest.raises(FileExistsError, match="not a link this script made"):
        tool.apply(entries)
    assert launch.read_text() == "# someone's own launch file\n"

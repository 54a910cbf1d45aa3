"""Dependencies: ranges for the package, exact pins of the whole venv in requirements.lock; the
venv laid out as an ament prefix (scripts/ament_prefix.py)."""

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

REPO = Path(__file__).resolve().parents[2]
REQUIREMENT_FILES = (
    "requirements.txt",
    "requirements-build.txt",
    "requirements-dev.txt",
    "requirements-madsci.txt",
)


def lines(path: Path) -> list[str]:
    return [
        line.split("#", 1)[0].strip()
        for line in path.read_text().splitlines()
        if line.split("#", 1)[0].strip()
    ]


def lock() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in lines(REPO / "requirements.lock"):
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        assert match, f"requirements.lock: not an exact pin: {line!r}"
        pins[canonicalize_name(match[1])] = match[2]
    return pins


def test_install_requires_are_ranges_not_pins() -> None:
    for name in REQUIREMENT_FILES:
        for line in lines(REPO / name):
            requirement = Requirement(line)
            assert requirement.specifier, f"{name}: {line!r} has no version range"
            assert not any(spec.operator in ("==", "===") for spec in requirement.specifier), (
                f"{name}: {line!r} is an exact pin; pins belong in requirements.lock"
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
    assert not missing, f"installed but not in requirements.lock: {missing}"
    differing = {name: (installed[name], pins[name]) for name in installed if installed[name] != pins[name]}
    assert not differing, f"installed version != locked version: {differing}"


def test_every_direct_requirement_is_locked_within_its_range() -> None:
    pins = lock()
    for name in REQUIREMENT_FILES:
        for line in lines(REPO / name):
            requirement = Requirement(line)
            key = canonicalize_name(requirement.name)
            assert key in pins, f"{name}: {requirement.name} is not in requirements.lock"
            assert requirement.specifier.contains(pins[key], prereleases=True), (
                f"{name}: the locked {requirement.name}=={pins[key]} is outside {requirement.specifier}"
            )


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

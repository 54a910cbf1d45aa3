"""Dependencies: ranges for the package, exact pins of the whole venv in requirements.lock."""

from __future__ import annotations

import importlib.metadata as metadata
import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
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

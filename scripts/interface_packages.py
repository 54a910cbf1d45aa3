"""The ROS interface packages under interfaces/: their build order and where each one comes from.

Used by scripts/setup.sh (step 4) with the venv's interpreter; prints one line per package in
dependency order (catkin_pkg's topological order of the package.xml files, ties by name)::

    <name> <directory under INTERFACES_DIR> <pip distribution> <origin> <local dependencies>

where <origin> is one of

* ``venv`` -- importable, installed into this venv by our own pip distribution (built here);
* ``missing`` -- not importable (or its Python types fail to load): to be built;
* ``provided:<path>`` -- importable from elsewhere (a sourced ROS distribution, or another wheel
  in the venv): setup.sh does not build it, and the interop test checks that copy's hashes.

and <local dependencies> is a comma-separated list of the packages under interfaces/ this one
depends on (``-`` for none), so that a rebuilt dependency rebuilds its dependents.

Usage: ``python scripts/interface_packages.py [INTERFACES_DIR]`` (default: interfaces/ beside
this script). Exit status 2 when a package directory lacks its pyproject.toml.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
import tomllib
from pathlib import Path

from catkin_pkg.topological_order import topological_order

ROOT = Path(__file__).resolve().parents[1]
#: The generated Python sub-packages a rosidl interface package may have.
KINDS = ("msg", "srv", "action")


def origin_of(name: str, package_dir: Path, distribution: str) -> str:
    """Where the Python types of interface package ``name`` come from (see the module docstring).

    It imports every ``<name>.<kind>`` that the sources under ``package_dir`` define and touches
    one type of each, which loads the C type support; a failure there counts as ``missing``.
    """
    kinds = [kind for kind in KINDS if any((package_dir / kind).glob(f"*.{kind}"))]
    try:
        modules = [importlib.import_module(f"{name}.{kind}") for kind in kinds]
        for module in modules:
            first = next(value for key, value in vars(module).items() if not key.startswith("_"))
            first.__class__.__import_type_support__()
    except Exception:  # any import or type-support failure means: not usable, build it
        return "missing"
    module_file = Path(modules[0].__file__ or "").resolve()
    try:
        record = importlib.metadata.distribution(distribution)
        ours = any(
            Path(str(record.locate_file(file))).resolve() == module_file for file in record.files or []
        )
    except importlib.metadata.PackageNotFoundError:
        ours = False
    location = module_file.parents[2]  # <pkg>/<kind>/__init__.py -> the directory holding <pkg>
    if ours:
        return "venv"
    return f"provided:{location}"


def main(argv: list[str]) -> int:
    """Print the package lines (see the module docstring); returns the exit status."""
    interfaces = Path(argv[1]) if len(argv) > 1 else ROOT / "interfaces"
    ordered = topological_order(str(interfaces))
    local = {package.name for _, package in ordered}
    for relative, package in ordered:
        package_dir = interfaces / relative
        pyproject = package_dir / "pyproject.toml"
        if not pyproject.is_file():
            print(f"interface_packages.py: {pyproject} is missing", file=sys.stderr)
            return 2
        distribution = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["name"]
        origin = origin_of(package.name, package_dir, distribution)
        needs = sorted(
            {dependency.name for dependency in package.build_depends + package.buildtool_depends} & local
        )
        print(package.name, relative, distribution, origin, ",".join(needs) or "-")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Make a venv holding erobs_bt as ``pip install -e .`` an ament prefix for erobs_bt.

``ros2 launch``/``launch_ros`` and ``ros2 run`` find a package through the ament index of
``AMENT_PREFIX_PATH`` and its executables in ``<prefix>/lib/<package>/``; an editable pip
install creates neither (pip puts console scripts in ``bin/`` and does not install
``data_files`` for an editable install). scripts/setup.sh (step 5) runs this after
``pip install -e .``; it lays out what colcon's ``--symlink-install`` would:

* ``<prefix>/share/ament_index/resource_index/packages/erobs_bt`` — the ament index marker
  (a copy of ``resource/erobs_bt``);
* ``<prefix>/share/erobs_bt/package.xml`` and every file of setup.py's ``DATA_DIRECTORIES``
  (``launch``, ``config``, ``trees``) — symbolic links into this checkout, in real
  directories (as colcon's ``--symlink-install`` makes them: ``ros2 launch`` walks the share
  directory without following directory links), so edits are seen at once, as for the
  editable Python code; links to files no longer there are removed;
* ``<prefix>/lib/erobs_bt/<name>`` — a symbolic link to ``<prefix>/bin/<name>`` for every
  console script of the installed ``erobs_bt`` distribution (its entry points).

Usage: ``python scripts/ament_prefix.py PREFIX`` with the venv's interpreter (it reads the
installed distribution's entry points). Idempotent: prints only what it changed. Exit status
1 (with the reason) when an entry exists and is not what this script makes (a real file or
directory, e.g. from a non-editable install), which it never overwrites.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "erobs_bt"


def data_directories(setup_py: Path) -> tuple[str, ...]:
    """setup.py's ``DATA_DIRECTORIES`` (read, not executed: setup.py calls setup())."""
    for node in ast.parse(setup_py.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "DATA_DIRECTORIES" for target in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    raise LookupError(f"{setup_py}: no DATA_DIRECTORIES assignment")


def data_files(directory: Path) -> list[Path]:
    """The files under ``directory`` that setup.py's ``data_files`` installs (no ``__pycache__``,
    hidden directories or ``.pyc`` files)."""
    found: list[Path] = []
    for root, subdirs, files in os.walk(directory):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__" and not d.startswith("."))
        found += [Path(root) / name for name in sorted(files) if not name.endswith(".pyc")]
    return found


def console_scripts() -> list[str]:
    """The console script names of the installed ``erobs_bt`` distribution."""
    distribution = importlib.metadata.distribution(PACKAGE)
    return sorted(ep.name for ep in distribution.entry_points if ep.group == "console_scripts")


def plan(prefix: Path, root: Path = ROOT) -> dict[Path, Path | bytes]:
    """Every entry to make: path → link target (a :class:`Path`) or file content (bytes)."""
    marker = prefix / "share" / "ament_index" / "resource_index" / "packages" / PACKAGE
    entries: dict[Path, Path | bytes] = {marker: (root / "resource" / PACKAGE).read_bytes()}
    share = prefix / "share" / PACKAGE
    entries[share / "package.xml"] = root / "package.xml"
    for directory in data_directories(root / "setup.py"):
        for source in data_files(root / directory):
            entries[share / source.relative_to(root)] = source
    for name in console_scripts():
        entries[prefix / "lib" / PACKAGE / name] = prefix / "bin" / name
    return entries


def apply(entries: dict[Path, Path | bytes]) -> list[str]:
    """Make the entries; returns what changed (one line each).

    Raises:
        FileExistsError: an entry exists as something this script does not make.
    """
    changed: list[str] = []
    for path in entries:
        # a directory link (as an older version of this script made) would be written through
        for parent in reversed(path.parents):
            if parent.is_symlink():
                parent.unlink()
                changed.append(f"removed the directory link {parent}")
    for path, want in entries.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(want, bytes):
            if path.is_symlink() or (path.exists() and not path.is_file()):
                raise FileExistsError(f"{path} exists and is not a regular file")
            if not path.exists() or path.read_bytes() != want:
                path.write_bytes(want)
                changed.append(f"wrote {path}")
            continue
        if path.is_symlink():
            if Path(os.readlink(path)) == want:
                continue
            path.unlink()
        elif path.exists():
            raise FileExistsError(f"{path} exists and is not a link this script made; move it away")
        path.symlink_to(want)
        changed.append(f"linked {path} -> {want}")
    return changed


def prune(share: Path, entries: dict[Path, Path | bytes]) -> list[str]:
    """Remove the links under ``share`` that :func:`plan` no longer lists (a removed or renamed
    data file); returns what it removed."""
    removed: list[str] = []
    if not share.is_dir() or share.is_symlink():
        return removed
    for root, _subdirs, files in os.walk(share):
        for name in files:
            path = Path(root) / name
            if path.is_symlink() and path not in entries:
                path.unlink()
                removed.append(f"removed {path}")
    return removed


def main(argv: list[str]) -> int:
    """Lay out the prefix ``argv[1]``; returns the exit status."""
    if len(argv) != 2:
        print("usage: ament_prefix.py PREFIX", file=sys.stderr)
        return 2
    prefix = Path(argv[1]).resolve()
    try:
        entries = plan(prefix)
        changed = apply(entries) + prune(prefix / "share" / PACKAGE, entries)
    except (FileExistsError, importlib.metadata.PackageNotFoundError, LookupError) as error:
        print(f"ament_prefix.py: error: {error}", file=sys.stderr)
        return 1
    for line in changed:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

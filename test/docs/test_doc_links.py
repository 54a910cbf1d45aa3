"""Every file the documentation cites is in the repository.

What is read: README.md, every ``docs/*.md``, and the module docstring of every Python file
of the package, the tests, the benchmarks, the examples, the launch files and the scripts
(:data:`SOURCES`).

What must exist (:func:`references`), each reported with the citing file and line:

* **Markdown links** ``[text](target)``: a target that is not a URL (no ``scheme:``) and not
  only an ``#anchor``, without its ``#anchor``, relative to the citing file's folder.
* **Cited paths**: a path of two or more segments (``a/b.py``, ``docs/behaviour.md``,
  ``config/queueserver/``) whose first segment is a top-level folder of the repository (e.g.
  ``docs/``, ``erobs_bt/``, ``config/``) or a package of ``erobs_bt/`` (cited from inside
  it, e.g. ``ros/node/node.py``); it must exist from the repository root or from ``erobs_bt/``.
  A ``:line`` or ``::test`` suffix is ignored.
* **Cited documents**: a bare file name ending in ``.md`` or ``.txt`` (``behaviour.md``)
  must be the name of a file of the repository.

Not checked: files the repository's ``.gitignore`` names (anchored ``/path`` entries:
generated files, e.g. the RE Manager's list of plans), link-like text inside inline code,
URLs, absolute paths (``/usr/bin/chromium``), ``~`` paths, paths that climb out of the
repository on purpose (``../shared/...``: the user's files beside it), glob patterns
(``test_*.py``) and paths under other folders (another project's files: cite them with the
project's name first, e.g. ``Universal_Robots_ROS2_Description/config/ur5e/joint_limits.yaml``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "erobs_bt"
#: Folders whose Python files' module docstrings are read (plus setup.py).
PYTHON_FOLDERS = ("erobs_bt", "test", "bench", "examples", "launch", "scripts")
#: Folders never read nor matched (environments, builds, caches).
IGNORED = frozenset({".venv", "node_modules", "build", "install", "log", ".git", "__pycache__"})


def _ignored(name: str) -> bool:
    """A folder no document is in: :data:`IGNORED`, another distro's venv (``.venv-kilted``)."""
    return name in IGNORED or name.startswith(".venv-") or name.endswith(".egg-info")


_CODE = re.compile(r"``.*?``|`[^`]*`")
_LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+")
#: A path token: segments of word characters, dots and dashes joined by ``/``, not preceded by
#: anything that makes it part of a longer path, a glob or a URL.
_PATH = re.compile(r"(?<![\w./*<>{}$~-])((?:\.\./)*(?:[\w.-]+/)+[\w.-]*)(?![\w*<>{}])")
_DOCUMENT = re.compile(r"(?<![\w./*<>{}$~-])([\w-]+\.(?:md|txt))\b(?![/\w])")


def _walk(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.iterdir()):
        if _ignored(path.name):
            continue
        if path.is_dir():
            yield from _walk(path)
        else:
            yield path


def python_files() -> list[Path]:
    files = [REPO / "setup.py"]
    for name in PYTHON_FOLDERS:
        if (REPO / name).is_dir():
            files += [p for p in _walk(REPO / name) if p.suffix == ".py"]
    return files


#: A module docstring: the first statement, after comments and blank lines (read without
#: parsing the whole module, which would cost seconds over the ~200 files).
_DOCSTRING = re.compile(r"\A(?:\s|#[^\n]*\n)*[rRuU]?(\"\"\"|\'\'\')(.*?)\1", re.DOTALL)


def module_docstring(path: Path) -> tuple[str, int]:
    """The module docstring and the line it starts on (``("", 1)`` without one)."""
    text = path.read_text(encoding="utf-8")
    match = _DOCSTRING.match(text)
    if match is None:
        return "", 1
    return match.group(2), text.count("\n", 0, match.start(2)) + 1


def sources() -> list[tuple[Path, str, int]]:
    """(file, text, first line) for every text that is read: the docs, then the docstrings."""
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    found = [(path, path.read_text(encoding="utf-8"), 1) for path in docs]
    for path in python_files():
        text, line = module_docstring(path)
        if text:
            found.append((path, text, line))
    return found


@functools.cache
def _top_level() -> frozenset[str]:
    names = {p.name for p in REPO.iterdir() if p.is_dir() and not _ignored(p.name)}
    names |= {p.name for p in PACKAGE.iterdir() if p.is_dir() and not _ignored(p.name)}
    return frozenset(names)


@functools.cache
def _file_names() -> frozenset[str]:
    return frozenset(path.name for path in _walk(REPO))


@functools.cache
def _ignored_files() -> frozenset[str]:
    """The anchored file entries of ``.gitignore`` (``/config/x.yaml`` → ``config/x.yaml``)."""
    ignore = REPO / ".gitignore"
    lines = ignore.read_text(encoding="utf-8").splitlines() if ignore.is_file() else []
    return frozenset(line[1:] for line in lines if line.startswith("/") and "*" not in line)


def references(path: Path, text: str, first_line: int) -> Iterator[tuple[int, str, bool]]:
    """``(line, reference, exists)`` for every reference of :func:`text` (module docstring)
    that the rule checks; ``path`` is the citing file, ``first_line`` the text's first line."""
    top = _top_level()
    names = _file_names()
    generated = _ignored_files()
    for offset, line in enumerate(text.splitlines()):
        number = first_line + offset
        for target in _LINK.findall(_CODE.sub(" ", line)):
            if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
                continue
            local = target.split("#", 1)[0]
            resolved = (path.parent / local).resolve()
            if not resolved.is_relative_to(REPO):
                continue
            yield number, target, resolved.exists()
        plain = _LINK.sub("]", _URL.sub(" ", line))
        for token in _PATH.findall(plain):
            if token.startswith("../"):
                continue
            first = token.split("/", 1)[0]
            if first not in top or token.rstrip("/") == first:
                continue
            candidate = token.rstrip(".")
            if candidate in generated:
                continue
            yield number, candidate, (REPO / candidate).exists() or (PACKAGE / candidate).exists()
        for name in _DOCUMENT.findall(plain):
            yield number, name, name in names


def dead_references() -> list[str]:
    dead = []
    for path, text, line in sources():
        for number, reference, exists in references(path, text, line):
            if not exists:
                dead.append(f"{path.relative_to(REPO)}:{number}: {reference}")
    return dead


def test_every_cited_file_is_in_the_repository() -> None:
    dead = dead_references()
    assert not dead, "files cited but not in the repository:\n" + "\n".join(dead)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see [the format](docs/script-format.md#units)", [("docs/script-format.md#units", True)]),
        ("see [nothing](docs/no-such.md)", [("docs/no-such.md", False)]),
        ("[web](https://example.org/a/b.py) and [anchor](#units)", []),
        (
            "the node (`erobs_bt/ros/node/node.py:120`) and `ros/params.py`",
            [("erobs_bt/ros/node/node.py", True), ("ros/params.py", True)],
        ),
        (
            "config/queueserver/ and config/no_such.yaml.",
            [("config/queueserver/", True), ("config/no_such.yaml", False)],
        ),
        (
            "erobs-semantics.md §3 and behaviour.md and requirements.txt",
            [("erobs-semantics.md", False), ("behaviour.md", True), ("requirements.txt", True)],
        ),
        ("../shared/samples/erobs/x.json, /usr/bin/chromium, test/test_*.py, workflows/a.yaml", []),
        ("`[text](target)` and config/queueserver/existing_plans_and_devices.yaml", []),
    ],
)
def test_the_rule_on_examples(text: str, expected: list[tuple[str, bool]]) -> None:
    found = [(reference, exists) for _line, reference, exists in references(REPO / "README.md", text, 1)]
    assert found == expected

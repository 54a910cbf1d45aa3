#!/usr/bin/env python3
"""The project's size rule for classes, checked (docs/CONTRIBUTING.md, "Size"; issue 35).

A class of more than :data:`MAX_LINES` lines or :data:`MAX_METHODS` methods must say why at
its top: a paragraph of its docstring that starts with ``Why this class`` (for example "Why
this class is long: ..."). The rule keeps large classes deliberate; it does not forbid them.

Usage: ``python scripts/class_sizes.py [PACKAGE_DIR ...]`` (default ``erobs_bt``); prints one
line per class that breaks the rule (``path:line Name: N lines, M methods, no reason``) and
exits 1 when there is any, 0 otherwise. ``make lint`` runs it; test/packaging/test_class_sizes.py
checks the package with it.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: A class longer than this many lines (``class`` line to its last line) needs a reason.
MAX_LINES = 400
#: A class with more methods than this (functions defined in its body) needs a reason.
MAX_METHODS = 25
#: The start of the paragraph that gives the reason.
REASON = re.compile(r"^\s*Why this class\b", re.MULTILINE)


@dataclass(frozen=True)
class LargeClass:
    """A class over the size rule: where it is, how large, and whether it says why."""

    path: Path
    line: int
    name: str
    lines: int
    methods: int
    reasoned: bool

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.name}: {self.lines} lines, {self.methods} methods, no reason"


def large_classes(paths: Iterable[Path]) -> list[LargeClass]:
    """Every class in the ``.py`` files under ``paths`` (files or folders) over
    :data:`MAX_LINES` lines or :data:`MAX_METHODS` methods, in file and line order."""
    found = []
    for root in paths:
        files = [root] if root.is_file() else sorted(root.rglob("*.py"))
        for path in files:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if not isinstance(node, ast.ClassDef):
                    continue
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                methods = sum(isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef) for b in node.body)
                if lines > MAX_LINES or methods > MAX_METHODS:
                    reasoned = bool(REASON.search(ast.get_docstring(node) or ""))
                    found.append(LargeClass(path, node.lineno, node.name, lines, methods, reasoned))
    return found


def main(argv: list[str]) -> int:
    """Print the classes that break the rule; 1 when there is any."""
    broken = [c for c in large_classes([Path(a) for a in argv or ["erobs_bt"]]) if not c.reasoned]
    for large in broken:
        print(large)
    if broken:
        print(
            f"{len(broken)} class(es) over {MAX_LINES} lines or {MAX_METHODS} methods without a "
            "'Why this class ...' paragraph in the docstring: split them or say why",
            file=sys.stderr,
        )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

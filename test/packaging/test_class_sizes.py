"""The size rule for classes (docs/CONTRIBUTING.md, "Size"; issue 35): a class over 400 lines or
25 methods says why at its top. ``scripts/class_sizes.py`` is the check; ``make lint`` runs it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from ros_fixtures import REPO


def load_checker() -> ModuleType:
    """scripts/class_sizes.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("class_sizes", REPO / "scripts" / "class_sizes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_large_class_of_the_package_says_why() -> None:
    checker = load_checker()
    large = checker.large_classes([REPO / "erobs_bt"])
    assert large, "the scan found no large class at all: it reads nothing"
    assert [str(c) for c in large if not c.reasoned] == []


def test_the_check_finds_a_long_class_without_a_reason_and_accepts_one_with(tmp_path: Path) -> None:
    checker = load_checker()
    methods = "".join(f"    def m{k}(self) -> None:\n        pass\n\n" for k in range(26))
    (tmp_path / "silent.py").write_text(f'class Many:\n    """Many methods."""\n\n{methods}')
    (tmp_path / "said.py").write_text(
        'class Many:\n    """Many methods.\n\n'
        f'    Why this class has more than 25 methods: a test.\n    """\n\n{methods}'
    )
    (tmp_path / "long.py").write_text("class Long:\n" + "    x = 1\n" * 400)
    (tmp_path / "small.py").write_text("class Small:\n    x = 1\n")
    found = {c.path.name: c for c in checker.large_classes([tmp_path])}
    assert set(found) == {"silent.py", "said.py", "long.py"}
    assert not found["silent.py"].reasoned and found["silent.py"].methods == 26
    assert found["said.py"].reasoned
    assert not found["long.py"].reasoned and found["long.py"].lines == 401
    assert checker.main([str(tmp_path / "said.py")]) == 0
    assert checker.main([str(tmp_path / "silent.py")]) == 1

"""The garbage collector is paused while a tree is compiled, and left as it was afterwards;
pauses nest and overlap across threads without leaving it off."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from erobs_bt.backends.scripted import ScriptedBackend
from erobs_bt.batching import group_into_batches
from erobs_bt.cache import PlanCache
from erobs_bt.script.parse import parse_script
from erobs_bt.tree import compile as compile_module
from erobs_bt.tree.compile import collector_paused, compile_tree
from erobs_bt.tree.context import Controls, GoalContext, Mode

from helpers import PAUSE, SUCK, move, script_json


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def _context() -> GoalContext:
    script = parse_script(script_json([move("a"), move("b"), PAUSE, SUCK, move("c")]))
    units = group_into_batches(script.steps, enabled=True)
    return GoalContext(script, units, Mode.EXECUTE, ScriptedBackend(), PlanCache(), False, Controls())


def test_compile_runs_with_the_collector_paused_and_restores_it(
    collector_on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    build = compile_module._compile

    def spy(context: GoalContext) -> compile_module.UnitSequence:
        seen.append(gc.isenabled())
        return build(context)

    monkeypatch.setattr(compile_module, "_compile", spy)
    root = compile_tree(_context())
    assert seen == [False] and gc.isenabled()
    assert len(root.children) == 9  # 4 units and 5 boundaries: the tree itself is unchanged
    gc.disable()
    try:
        compile_tree(_context())
        assert not gc.isenabled(), "a collector the caller switched off stays off"
    finally:
        gc.enable()


def test_a_failing_compile_restores_the_collector(
    collector_on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(context: GoalContext) -> compile_module.UnitSequence:
        raise RuntimeError("boom")

    monkeypatch.setattr(compile_module, "_compile", broken)
    with pytest.raises(RuntimeError, match="boom"):
        compile_tree(_context())
    assert gc.isenabled()


def test_overlapping_pauses_end_with_the_collector_on(collector_on: None) -> None:
    inside = threading.Event()
    release = threading.Event()

    def other() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        thread = threading.Thread(target=other)
        thread.start()
        assert inside.wait(10)
    assert not gc.isenabled(), "the other thread's pause is still open"
    release.set()
    thread.join(10)
    assert gc.isenabled()

"""group_into_batches: the specification's grouping rule, and nothing more."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from erobs_bt.batching import group_into_batches

from helpers import end_effector, moveto, pause, pipettor, renumber, tool_exchange


def test_spec_example_moveto_end_effector_pause_moveto_gives_three_units() -> None:
    steps = renumber([moveto(0), end_effector(0), pause(0), moveto(0)])
    units = group_into_batches(steps, enabled=True)
    assert [[s.index for s in u.steps] for u in units] == [[0, 1], [2], [3]]
    assert [u.batched for u in units] == [True, False, True]
    assert units[2].label == "batch[1]: moveto"


def test_any_other_task_type_ends_the_batch_and_runs_alone() -> None:
    steps = renumber(
        [moveto(0), tool_exchange(0), tool_exchange(0, "load", "pipettor"), moveto(0), pipettor(0)]
    )
    units = group_into_batches(steps, enabled=True)
    assert [u.label for u in units] == [
        "batch[1]: moveto",
        "tool_exchange",
        "tool_exchange",
        "batch[1]: moveto",
        "pipettor",
    ]


def test_no_special_break_for_epick_operations() -> None:
    steps = renumber(
        [end_effector(0, "vacuum_on"), moveto(0), end_effector(0, "vacuum_off"), end_effector(0, "vacuum_on")]
    )
    units = group_into_batches(steps, enabled=True)
    assert len(units) == 1
    assert units[0].label == "batch[4]: end_effector, moveto, end_effector, end_effector"


def test_disabled_batching_makes_every_step_a_single_unit() -> None:
    steps = renumber([moveto(0), moveto(0), end_effector(0), pause(0)])
    units = group_into_batches(steps, enabled=False)
    assert [len(u.steps) for u in units] == [1, 1, 1, 1]
    assert not any(u.batched for u in units)
    assert units[0].label == "moveto"


kinds = st.sampled_from(["moveto", "end_effector", "pause", "pipettor", "tool_exchange"])
makers = {
    "moveto": moveto,
    "end_effector": end_effector,
    "pause": pause,
    "pipettor": pipettor,
    "tool_exchange": tool_exchange,
}


@given(st.lists(kinds, min_size=1, max_size=40), st.booleans())
def test_order_is_kept_and_units_are_maximal(types: list[str], enabled: bool) -> None:
    steps = renumber([makers[t](0) for t in types])
    units = group_into_batches(steps, enabled=enabled)
    flattened = [s for u in units for s in u.steps]
    assert flattened == steps, "concatenating the units gives the steps back in order"
    assert [u.index for u in units] == list(range(len(units)))
    for unit in units:
        if len(unit.steps) > 1:
            assert enabled and unit.is_motion
    if enabled:
        for left, right in itertools.pairwise(units):
            assert not (left.batched and right.batched), "two adjacent batches would have been one"


def test_the_label_of_a_large_batch_is_short() -> None:
    # Issue 27 (6): a 5,000-step batch's label was one 40,034-character line (in feedback,
    # every tree snapshot, the run log and each view).
    steps = renumber([*(moveto(0) for _ in range(4999)), end_effector(0)])
    (unit,) = group_into_batches(steps, enabled=True)
    assert unit.label == "batch[5000]: moveto ×4999, end_effector"
    alternating = renumber([moveto(0) if i % 3 else end_effector(0) for i in range(9000)])
    (mixed,) = group_into_batches(alternating, enabled=True)
    assert mixed.label == "batch[9000]: end_effector ×3000, moveto ×6000 (in 6000 runs)"
    few = renumber([moveto(0), moveto(0), *(end_effector(0) for _ in range(12)), moveto(0)])
    (runs,) = group_into_batches(few, enabled=True)
    assert runs.label == "batch[15]: moveto ×2, end_effector ×12, moveto"
    twelve = renumber([moveto(0) if i % 2 else end_effector(0) for i in range(12)])
    (listed,) = group_into_batches(twelve, enabled=True)
    assert listed.label == "batch[12]: " + ", ".join("moveto" if i % 2 else "end_effector" for i in range(12))
    assert max(len(u.label) for u in (unit, mixed, runs, listed)) < 200

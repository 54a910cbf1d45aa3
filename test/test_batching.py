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

"""Recomputation is one type (:class:`commcost.parallel.layout.Recompute`): what ``plan`` takes as a string, the search
grid codes by position, and ``stacks.json``'s rules name."""

from __future__ import annotations

import json

import pytest

from commcost.analyses.plan.space import RECOMPUTE
from commcost.core.errors import InputError
from commcost.parallel.layout import Layout, Recompute
from commcost.workload.stacks import RECOMPUTATIONS


def test_a_layout_takes_the_string_and_holds_the_enum():
    lay = Layout(dp=2, global_batch=2, recompute="full")
    assert lay.recompute is Recompute.FULL
    assert Layout(dp=2, global_batch=2).recompute is Recompute.NONE
    assert lay.recompute == "full"                       # a str: comparisons with the flag's value hold
    assert json.loads(json.dumps(lay.to_dict()))["recompute"] == "full"


def test_an_unknown_recomputation_is_refused_with_the_choices():
    with pytest.raises(InputError, match="recompute must be none, selective or full, got 'partial'"):
        Layout(dp=2, global_batch=2, recompute="partial")


def test_the_grid_codes_and_the_stack_rules_are_the_enum_in_order():
    # the grid's rc column: 0 none, 1 selective, 2 full
    assert RECOMPUTE == (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)
    assert RECOMPUTE.index("selective") == 1
    assert RECOMPUTATIONS == RECOMPUTE

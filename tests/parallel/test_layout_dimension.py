"""``parallel/layout.py``'s :class:`Dimension`: one enum names the dimensions, and it is still the string."""

from __future__ import annotations

import json

from commcost.parallel.layout import DEFAULT_ORDER, DIMENSIONS, Dimension, Layout
from commcost.parallel.tensor import tensor_ops


def test_the_enum_is_the_default_rank_order_and_reads_as_its_string():
    assert "-".join(DIMENSIONS) == DEFAULT_ORDER == "tp-cp-ep-dp-pp"
    assert Dimension.TP == "tp" and {"tp": 1}[Dimension.TP] == 1 and {Dimension.DP: 2}["dp"] == 2
    assert json.dumps({Dimension.EP: Dimension.EP}) == '{"ep": "ep"}' and f"{Dimension.PP:<4}|" == "pp  |"


def test_a_strategy_names_its_dimension_with_the_enum():
    (op,) = tensor_ops(layout=Layout(dp=4, tp=2, global_batch=16), hidden=512, seq=1024, layers_per_stage=4,
                       activation_bytes=2, gpus_per_node=8)
    assert op.dimension is Dimension.TP

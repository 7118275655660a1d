"""``parallel/layout.py``: where each dimension's group lies (strides, ranks per node) and layout errors
that show the arithmetic."""

from __future__ import annotations

import pytest

from commcost.core.errors import InputError
from commcost.core.xp import SCALAR
from commcost.parallel.layout import Layout, check_layout, group_ranks_per_node, layout_group


def test_placement_strides():
    L = Layout(dp=4, tp=8, pp=2, global_batch=8)
    assert layout_group(L, "tp", 8) == (8, 8)       # tp innermost: a whole node
    assert layout_group(L, "dp", 8) == (4, 1)       # stride 8: one rank per node
    assert group_ranks_per_node(SCALAR, 4, 2, 8) == 4 and group_ranks_per_node(SCALAR, 8, 2, 8) == 4
    Lt = Layout(dp=4, tp=8, pp=2, global_batch=8, order="dp-tp-cp-ep-pp")
    assert layout_group(Lt, "dp", 8) == (4, 4) and layout_group(Lt, "tp", 8) == (8, 2)


def test_layout_errors_show_the_arithmetic():
    with pytest.raises(InputError, match=r"1 x 16 = 16"):
        Layout(dp=16, global_batch=8)
    with pytest.raises(InputError, match=r"2 x 8 x 4 x 1 = 64 != gpus \(32\)"):
        check_layout(Layout(dp=2, tp=8, pp=4, global_batch=8), gpus=32, layers=32, heads=32, kv_heads=8, seq=4096)
    with pytest.raises(InputError, match=r"pp x vp = 4 x 3 = 12"):
        check_layout(Layout(dp=1, pp=4, vp=3, global_batch=12), gpus=4, layers=32, heads=32, kv_heads=8, seq=4096)
    with pytest.raises(InputError, match="needs a mixture-of-experts"):
        check_layout(Layout(dp=8, ep=2, global_batch=8), gpus=8, layers=32, heads=32, kv_heads=8, seq=4096)

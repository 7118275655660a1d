"""``parallel/layout.py``: where each dimension's group lies (strides, ranks per node) and layout errors
that show the arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.core.errors import InputError
from commcost.core.xp import SCALAR
from commcost.parallel.layout import (DEFAULT_ORDER, Layout, check_layout, dense_sizes, expert_data_parallel, group_of,
                                      group_ranks_per_node, layer_passes, layout_group, leaves_node, order_stride,
                                      pair_ranks)


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


def test_placement_kernels_by_hand_scalar_and_columns():
    # min(n, G // k) for k < G, else 1; G = 6: a group of 4 at stride 2 -> min(4, 3) = 3; at stride 6 -> 1;
    # 8 at stride 1 -> 6; 2 at stride 4 -> min(2, 1) = 1
    cases = [(4, 2, 3), (4, 6, 1), (8, 1, 6), (2, 4, 1)]
    for n, k, rpn in cases:
        assert group_ranks_per_node(SCALAR, n, k, 6) == rpn
    n, k, rpn = (np.array(col) for col in zip(*cases))
    assert group_ranks_per_node(np, n, k, 6).tolist() == rpn.tolist()
    # pairs: 2 where the whole group is on one node (n > 1, rpn >= n), else 1; leaves_node the converse for n > 1
    assert [pair_ranks(SCALAR, n, r) for n, r in ((4, 4), (4, 3), (1, 1))] == [2, 1, 1]
    assert pair_ranks(np, np.array([4, 4, 1]), np.array([4, 3, 1])).tolist() == [2, 1, 1]
    assert [bool(leaves_node(n, r)) for n, r in ((4, 4), (4, 3), (1, 1))] == [False, True, False]
    assert leaves_node(np.array([4, 4, 1]), np.array([4, 3, 1])).tolist() == [False, True, False]
    # strides under tp-cp-ep-dp-pp with t = 2, c = 3, d = 4, p = 5: tp 1, cp 2, dp 2*3 = 6, pp 2*3*4 = 24
    sizes = dense_sizes(tp=2, cp=3, dp=4, pp=5)
    assert [order_stride(DEFAULT_ORDER, sizes, d) for d in ("tp", "cp", "dp", "pp")] == [1, 2, 6, 24]
    # d_e = t d c / (e t_e) = 2 * 4 * 3 / (3 * 2) = 4
    assert expert_data_parallel(tp=2, dp=4, cp=3, ep=3, expert_tp=2) == 4
    assert expert_data_parallel(tp=np.array([2, 8]), dp=4, cp=3, ep=3, expert_tp=np.array([2, 1])).tolist() == [4, 32]


def test_group_of_by_hand():
    # t = 2, c = 2, d = 6, p = 2, e = 4, t_e = 1 on nodes of 6 (W = 48); default order tp-cp-ep-dp-pp.
    # tp: stride 1 -> min(2, 6) = 2; cp: stride 2 -> min(2, 3) = 2; dp (d c = 12): stride min(t c, t) = 2 -> 3;
    # pp: stride t c d = 24 >= 6 -> 1; expert layers (t_e, 1, e, d_e = 2*6*2/4 = 6): ep stride t_e = 1 -> min(4, 6) = 4,
    # etp size 1 -> 1; edp stride t_e e = 4 -> min(6, 6 // 4 = 1) = 1
    kw = dict(order=DEFAULT_ORDER, tp=2, cp=2, dp=6, pp=2, ep=4, expert_tp=1, gpus_per_node=6)
    want = {"tp": (2, 2), "cp": (2, 2), "dp": (12, 3), "pp": (2, 1), "ep": (4, 4), "etp": (1, 1), "edp": (6, 1)}
    assert {dim: group_of(SCALAR, dim, **kw) for dim in want} == want
    # hybrid sharding over 4 of the 12: shard (4, min(4, 3) = 3); replicas 12/4 = 3 at stride 2*4 = 8 >= 6 -> 1
    assert group_of(SCALAR, "shard", shard=4, **kw) == (4, 3) and group_of(SCALAR, "replica", shard=4, **kw) == (3, 1)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_group_of_columns_equal_layout_group(data):
    """group_of over columns of random layouts (GPUs per node 1-72, random rank orders) equals
    layout_group on each layout (the per-layout path plan takes)."""
    G = data.draw(st.one_of(st.just(6), st.integers(1, 72)))
    order = "-".join(data.draw(st.permutations(("tp", "cp", "ep", "dp", "pp"))))
    layouts = []
    for _ in range(data.draw(st.integers(1, 6))):
        t, c, d, p = (data.draw(st.sampled_from((1, 2, 3, 4, 6, 8))) for _ in range(4))
        divisors = [e for e in (1, 2, 3, 4, 6, 8, 12, 16) if (t * d * c) % e == 0]
        e = data.draw(st.sampled_from(divisors))
        etp = data.draw(st.sampled_from([x for x in (1, 2, 3, 4, 8) if (t * d * c) % (e * x) == 0]))
        layouts.append(Layout(dp=d, tp=t, pp=p, cp=c, ep=e, etp=etp, global_batch=d, order=order))
    cols = {k: np.array([getattr(L, a) for L in layouts]) for k, a in
            (("tp", "tp"), ("cp", "cp"), ("dp", "dp"), ("pp", "pp"), ("ep", "ep"), ("expert_tp", "expert_tp"))}
    for dim in ("tp", "cp", "dp", "pp", "ep", "etp", "edp"):
        size, rpn = group_of(np, dim, order=order, gpus_per_node=G, **cols)
        want = [layout_group(L, dim, G) for L in layouts]
        assert list(zip(np.broadcast_to(size, len(layouts)).tolist(),
                        np.broadcast_to(rpn, len(layouts)).tolist())) == want


def test_layer_passes_scalar_and_columns():
    # forward + backward = 2; full recomputation adds the recomputed forward: 3
    assert layer_passes(SCALAR, False) == 2 and layer_passes(SCALAR, True) == 3
    assert layer_passes(np, np.array([False, True])).tolist() == [2, 3]

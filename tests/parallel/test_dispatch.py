"""``parallel/dispatch.py``'s :func:`a2a_part_columns`: the all-to-alls of one dispatch, on one layout
(``SCALAR``) and on columns (numpy) alike, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from commcost.core.xp import SCALAR
from commcost.parallel.dispatch import a2a_part_columns


def test_nccl_one_all_to_all_of_the_whole_buffer():
    # NCCL: (S, e, g) with g = min(rpn, e) = 8
    ((S, P, r, runs),) = a2a_part_columns(SCALAR, "nccl", size_bytes=1e6, group=16, ranks_per_node=8, experts=32,
                                          top_k=2)
    assert (S, P, r, runs) == (1e6, 16, 8, True)


def test_deepep_parts_scalar_and_columns():
    # row 0: EP 16 over 2 nodes of 8, E = 32, k = 2 (tests/parallel/test_moe.py's arithmetic):
    #   NVLink S r_hit / k = 1e6 x 61/62 over g = 8 ranks; network S n_hit / k = 1e6 x 47/62 over n = 2, runs.
    # row 1: EP 8 inside one node: NVLink part over the whole group, r_hit = 8 (1 - C(28,2)/C(32,2)) =
    #   8 (1 - 378/496) = 59/31 -> S x 59/62 over (8, 8); network part n = 1: n_hit = 1, S / 2 over (1, 1), not run.
    kw = dict(experts=32, top_k=2)
    (intra, inter) = a2a_part_columns(SCALAR, "deepep", size_bytes=1e6, group=16, ranks_per_node=8, **kw)
    assert intra[1:] == (8, 8, True) and intra[0] == pytest.approx(1e6 * 61 / 62, rel=1e-12)
    assert inter[1:] == (2, 1, True) and inter[0] == pytest.approx(1e6 * 47 / 62, rel=1e-12)
    (intra1, inter1) = a2a_part_columns(SCALAR, "deepep", size_bytes=1e6, group=8, ranks_per_node=8, **kw)
    assert intra1[1:] == (8, 8, True) and intra1[0] == pytest.approx(1e6 * 59 / 62, rel=1e-12)
    assert inter1[1:] == (1, 1, False) and inter1[0] == pytest.approx(5e5)
    (ci, cn) = a2a_part_columns(np, "deepep", size_bytes=np.array([1e6, 1e6]), group=np.array([16, 8]),
                                ranks_per_node=np.array([8, 8]), **kw)
    assert ci[0] == pytest.approx([1e6 * 61 / 62, 1e6 * 59 / 62], rel=1e-12)
    assert ci[1].tolist() == [8, 8] and ci[2].tolist() == [8, 8] and ci[3] is True
    assert cn[0] == pytest.approx([1e6 * 47 / 62, 5e5], rel=1e-12)
    assert cn[1].tolist() == [2, 1] and cn[3].tolist() == [True, False]
    # each column equals the scalar evaluation of its row, bit for bit
    assert ci[0].tolist() == [intra[0], intra1[0]] and cn[0].tolist() == [inter[0], inter1[0]]


def test_deepep_six_gpus_per_node():
    # EP 8 with 6 ranks per node: n = ceil(8/6) = 2 nodes; E = 8, k = 2. NVLink over g = 6:
    # r_hit = 8 (1 - C(7,2)/C(8,2)) = 8 (1 - 21/28) = 2 (one expert per rank) -> S x 2/2 = S;
    # network: a token misses a node (4 experts) with C(4,2)/C(8,2) = 6/28, n_hit = 2 (22/28) = 11/7 -> S x 11/14
    (intra, inter) = a2a_part_columns(SCALAR, "deepep", size_bytes=1e6, group=8, ranks_per_node=6, experts=8,
                                      top_k=2)
    assert intra[1:] == (6, 6, True) and intra[0] == pytest.approx(1e6)
    assert inter[1:] == (2, 1, True) and inter[0] == pytest.approx(1e6 * 11 / 14, rel=1e-12)

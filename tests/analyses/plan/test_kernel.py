"""The one step kernel (:mod:`commcost.analyses.plan.kernel`): hand-computed rows, and the property that makes it one
kernel at two speeds: :func:`evaluate` on numpy columns equals it on each row's floats (``SCALAR``), exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.analyses.plan.kernel import Buckets, CommTerms, Compute, Row, evaluate
from commcost.core.xp import SCALAR

NO_BUCKETS = Buckets(times_s=(0.0, 0.0, 0.0), full=0, not_ready=(0.0, 0.0, 0.0), wire_s=0.0)


def _row(comm: CommTerms, buckets: Buckets = NO_BUCKETS, *, zero: int = 0, world: float = 1.0) -> Row:
    # t_c 0.1 s, t_fwd 0.1/3 s, one layer's forward 0.01 s; 1e9 dense parameters, HBM 2e12 B/s
    compute = Compute(compute_mb_s=0.1, forward_s=0.1 / 3, layer_forward_s=0.01, attention_forward_s=0.0,
                      forward_share=1 / 3)
    return Row(compute=compute, comm=comm, buckets=buckets, dense_params=1e9, expert_params=0.0, dense_ranks=8,
               expert_ranks=1, zero=zero, hbm_bytes_per_s=2e12, world=world, sync_one_s=0.0)


def test_a_tp_pp_ddp_row_by_hand():
    # m 4, p 2, v 1; TP 8 collectives of 1 ms in full; PP 2 (p-1) + 2 m = 10 transfers of 0.2 ms on the critical path
    comm = CommTerms(micro_batches=4, pp=2, vp=1, cp=1, passes=2, tp=((8, 1e-3, False),), pp_sends=(2e-4,))
    # one bucket of 50 ms, ready when the backward ends: all of it exposed
    out = evaluate(SCALAR, _row(comm, Buckets(times_s=(0.05, 0.0, 0.0), full=0, not_ready=(0.0, 0.0, 0.0),
                                              wire_s=0.05)))
    # t_mb = 0.1 + 8e-3 / 4 = 0.102; compute 4 x 0.1 = 0.4; bubble (2-1) 0.102 / 1
    assert out.micro_batch_s == pytest.approx(0.102, rel=1e-12)
    assert out.compute_s == pytest.approx(0.4, rel=1e-12)
    assert out.pipeline_bubble_s == pytest.approx(0.102, rel=1e-12)
    assert out.exposed_tp_s == pytest.approx(8e-3, rel=1e-12)
    assert out.exposed_pp_s == pytest.approx(10 * 2e-4, rel=1e-12)
    assert out.exposed_dp_s == pytest.approx(0.05, rel=1e-9)
    # ZeRO-0: 28 B x 1e9 / 2e12 B/s = 14 ms
    assert out.optimizer_s == pytest.approx(0.014, rel=1e-12)
    # one rank: no straggler, no sync; nothing hidden: no contention; no ZeRO-3: no host-synced gathers
    assert out.losses == pytest.approx((0.0, 0.0, 0.0, 0.0), abs=1e-15)
    # 0.4 + 0.102 + (0.008 + 0.002 + 0.05) + 0.014
    assert out.step_s == pytest.approx(0.576, rel=1e-9)


def test_a_zero3_row_by_hand():
    # g T_ag 3 ms, T_rs 4 ms per unit, u = 5 units, m = 4 rounds, t_f 10 ms: the forward gather hides
    # (max(0, 3 - 10) = 0), the backward's 3 + 4 ms behind 2 t_f = 20 ms too: only the step's first gather shows
    comm = CommTerms(micro_batches=4, pp=1, vp=1, cp=1, passes=2, zero3=True, zero3_gather_s=3e-3,
                     zero3_scatter_s=4e-3, zero3_units=5.0, sm_share=0.1)
    out = evaluate(SCALAR, _row(comm, zero=3, world=64))
    assert out.exposed_dp_s == pytest.approx(3e-3, rel=1e-12)
    # on the wire: 4 rounds x 5 units x (2 x 3 + 4) ms = 0.2 s
    assert out.dp_wire_s == pytest.approx(0.2, rel=1e-12)
    # t_mb = 0.1 + 3e-3 / 4
    assert out.micro_batch_s == pytest.approx(0.10075, rel=1e-12)
    # contention: sigma H = 0.1 (0.2 - 0.003)
    assert out.losses[1] == pytest.approx(0.1 * 0.197, rel=1e-12)
    # ZeRO-3 shards the optimizer: 28 x 1e9 / 8 / 2e12
    assert out.optimizer_s == pytest.approx(1.75e-3, rel=1e-12)


def test_ep_without_overlap_is_its_wire_time():
    # 6 all-to-alls of 2 ms and 2 of 5 ms: 22 ms, all exposed without --moe-overlap
    comm = CommTerms(micro_batches=2, pp=1, vp=1, cp=1, passes=2, ep=((6, 2e-3), (2, 5e-3)), ep_pairs=4.0)
    out = evaluate(SCALAR, _row(comm))
    assert out.exposed_ep_s == pytest.approx(0.022, rel=1e-12)
    assert out.critical.ep_wire_s == pytest.approx(0.022, rel=1e-12)


@st.composite
def rows(draw, n: int):
    """``n`` random rows as columns (numpy) and each as floats."""
    f = st.floats(0.0, 0.05)

    def col(strategy):
        return np.array([draw(strategy) for _ in range(n)], dtype=float)

    m, p = col(st.integers(1, 16)), col(st.integers(1, 8))
    v = np.where(p > 1, col(st.integers(1, 4)), 1.0)
    c = col(st.integers(1, 4))
    passes = col(st.sampled_from((2, 3)))
    t_c = col(st.floats(1e-3, 1.0))
    share = col(st.floats(0.2, 0.5))
    z3 = np.array([draw(st.booleans()) for _ in range(n)])
    zero = np.where(z3, 3, col(st.integers(0, 2))).astype(int)
    overlap, moe = draw(st.booleans()), draw(st.sampled_from(("none", "1f1b", "dualpipe")))
    compute = dict(compute_mb_s=t_c, forward_s=share * t_c, layer_forward_s=t_c / col(st.integers(1, 20)),
                   attention_forward_s=t_c * col(st.floats(0.0, 0.3)), forward_share=share)
    comm = dict(micro_batches=m, pp=p, vp=v, cp=c, passes=passes,
                tp=((col(st.integers(0, 200)), col(f), False), (col(st.integers(0, 200)), col(f), True)),
                tp_overlap=overlap, cp_rings=((col(st.integers(0, 100)), col(f)),),
                ep=((col(st.integers(0, 100)), col(f)), (col(st.integers(0, 100)), col(f))),
                ep_pairs=m * col(st.integers(1, 8)), moe_overlap=moe, sm_share=0.12, pp_sends=(col(f),), zero3=z3,
                zero3_gather_s=col(f), zero3_scatter_s=col(f), zero3_units=col(st.integers(2, 20)),
                zero3_unshard_under_pp=draw(st.booleans()))
    full = col(st.integers(0, 50))
    buckets = dict(times_s=(np.where(z3, 0.0, col(f)), np.where(z3, 0.0, col(f)), np.where(z3, 0.0, col(f))),
                   full=np.where(z3, 0.0, full), not_ready=(col(st.floats(0, 1)), col(st.floats(0, 1)),
                                                           col(st.floats(0, 1))),
                   wire_s=np.where(z3, 0.0, col(st.floats(0, 1))), whole_s=col(f), zero2_each=zero == 2,
                   gathers_s=(np.where(zero >= 1, col(f), 0.0),))
    rest = dict(dense_params=col(st.floats(1e6, 1e10)), expert_params=col(st.floats(0, 1e10)),
                dense_ranks=col(st.integers(1, 64)), expert_ranks=col(st.integers(1, 64)), zero=zero,
                hbm_bytes_per_s=3e12, world=col(st.integers(1, 4096)), sync_one_s=col(st.floats(0, 1e-3)))
    return compute, comm, buckets, rest


def _build(compute, comm, buckets, rest, pick) -> Row:
    """A :class:`Row` of the columns, each value through ``pick`` (identity, or the float of one row)."""
    def tree(x):
        if isinstance(x, tuple):
            return tuple(tree(y) for y in x)
        return pick(x) if isinstance(x, np.ndarray) else x
    return Row(compute=Compute(**{k: tree(x) for k, x in compute.items()}),
               comm=CommTerms(**{k: tree(x) for k, x in comm.items()}),
               buckets=Buckets(**{k: tree(x) for k, x in buckets.items()}),
               **{k: tree(x) for k, x in rest.items()})


def _scalar(x):
    return bool(x) if isinstance(x, np.bool_) else (int(x) if isinstance(x, np.integer) else float(x))


@settings(max_examples=40, deadline=None)
@given(rows(5))
def test_columns_equal_each_row_on_floats(case):
    """One kernel, two speeds: every field of :func:`evaluate` on columns is, row by row, the float ``SCALAR`` gives."""
    columns = evaluate(np, _build(*case, pick=lambda x: x))
    for i in range(5):
        one = evaluate(SCALAR, _build(*case, pick=lambda x, i=i: _scalar(x[i])))
        for name in ("step_s", "compute_s", "pipeline_bubble_s", "exposed_comm_s", "optimizer_s", "micro_batch_s",
                     "exposed_tp_s", "exposed_cp_s", "exposed_ep_s", "exposed_pp_s", "exposed_dp_s", "dp_wire_s"):
            got = float(np.broadcast_to(getattr(columns, name), (5,))[i])
            assert math.isclose(got, getattr(one, name), rel_tol=1e-12, abs_tol=1e-15), (name, i)
        for a, b in zip(columns.losses, one.losses):
            assert math.isclose(float(np.broadcast_to(a, (5,))[i]), b, rel_tol=1e-12, abs_tol=1e-15)

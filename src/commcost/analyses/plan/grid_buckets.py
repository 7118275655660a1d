"""The grid's DDP bucket tables, priced: each distinct row's gradient stream laid out in buckets at each searched cap
(:func:`commcost.step.bucket_schedule.uniform_layout`, what :func:`~commcost.step.bucket_schedule.uniform_buckets`
gives ``plan``) and every bucket priced through the one CommModel (:class:`~commcost.analyses.plan.grid_distinct.Pricer`,
one ``cost_many`` per distinct ``(op, group, ranks per node)``). Pricing only: the step these prices enter is
:func:`commcost.analyses.plan.kernel.data_parallel`'s; :func:`commcost.analyses.plan.grid._bucket_tables` builds the
:class:`BucketRows` (which groups reduce, their shares and NIC share) and reads the tables back.
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.comm.collectives import Collective
from commcost.step.bucket_schedule import caps_for, uniform_layout
from commcost.step.ddp_buckets import ddp_bucket_caps
from commcost.workload.memory import WEIGHT_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.analyses.plan.grid_distinct import Pricer

__all__ = ["BucketRows", "variant_prices"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketRows:
    """The distinct rows' data-parallel groups (columns, one row per distinct row, one column per group ``i``) and
    the tables :func:`variant_prices` fills (first axis: the variant, ZeRO-0 then ZeRO-1/2 at each cap)."""

    used: object
    """Which (row, variant) a configuration that fits uses (bool, rows x variants)."""
    any_on: object
    """The row has a group that reduces."""
    total_bytes: object
    """``S``: the gradient bytes of every group, summed."""
    share: object
    """``f_i = S_i / S``."""
    group: object
    """``P_i`` (1 where it does not reduce)."""
    ranks_per_node: object
    """``r_i``."""
    nic: object
    """``k_i``: :func:`commcost.analyses.plan.compose.nic_share`."""
    on: object
    """Group ``i`` reduces (``P_i > 1``)."""
    group_bytes: object
    """``S_i``."""
    times: object
    """Filled: ``T(c_1), T(c), T(last)``."""
    full: object
    """Filled: ``m`` full buckets."""
    not_ready: object
    """Filled: ``f_0, f_1, f_m``."""
    wire: object
    """Filled: ``T_w``."""
    whole: object
    """Filled: one reduction of the whole gradient."""
    gather: object
    """Filled (ZeRO-1/2): ``k_i T_ag`` of each group's weight all-gather."""


def _layouts(sharded: int, r: BucketRows, caps) -> list:
    """Every cap's bucket layout of the rows that use it: ``(variant, rows, first, m, last, one, c, S, sizes)``."""
    import numpy as np

    todo = []
    for ci, cap_bytes in enumerate(caps):
        vi = sharded * len(caps) + ci
        sel = np.nonzero(r.used[:, vi] & r.any_on)[0]
        if not len(sel):
            continue
        cp = ddp_bucket_caps(None) if cap_bytes == 0 else caps_for(cap_bytes)
        c1, c = float(cp.first_bucket_cap_bytes), float(cp.bucket_cap_bytes)
        S = r.total_bytes[sel]
        # step.timeline.uniform_buckets, the bucket layout per row and the prices as arrays
        lay = np.array([uniform_layout(x, c1, c) for x in S.tolist()]).reshape(-1, 3)
        first, m, last = lay[:, 0], lay[:, 1], lay[:, 2]
        one = last == 0                               # one bucket, ready when backward ends
        # T(c_1), T(c), T(last) and one reduce-scatter of the whole gradient (ZeRO-2 per micro-batch)
        todo.append((vi, sel, first, m, last, one, c, S,
                     (first, np.where(~one & (m > 0), c, 0.0), np.where(one, 0.0, last), S)))
    return todo


def variant_prices(sharded: int, r: BucketRows, caps, pricer: Pricer, *, grad_bytes: float) -> None:
    """Fill ``r``'s tables for the ZeRO-0 (``sharded`` 0: all-reduce) or ZeRO-1/2 (1: reduce-scatter) variants of every
    cap: every cap's bucket layout first, then each group's prices of all of them in one ``Pricer.column`` (not one
    per cap and bucket)."""
    import numpy as np

    op = Collective.REDUCE_SCATTER if sharded else Collective.ALL_REDUCE
    todo = _layouts(sharded, r, caps)
    if not todo:
        return
    # the bucket cost plan prices (explain._dp_prices): sum_i k_i T(op, c f_i, P_i, r_i), summed over i in order
    acc = [[np.zeros(len(e[1])) for _ in range(4)] for e in todo]
    for i in range(r.group_bytes.shape[1]):
        sizes = np.concatenate([x * r.share[e[1], i] for e in todo for x in e[8]])
        T = pricer.column(op, sizes, np.concatenate([r.group[e[1], i] for e in todo for _ in range(4)]),
                          np.concatenate([r.ranks_per_node[e[1], i] for e in todo for _ in range(4)]))
        at = 0
        for j, e in enumerate(todo):
            sel = e[1]
            for k in range(4):
                part = T[at:at + len(sel)]
                at += len(sel)
                acc[j][k] = acc[j][k] + np.where(r.on[sel, i], r.nic[sel, i] * part, 0.0)
    for j, (vi, sel, first, m, last, one, c, S, _) in enumerate(todo):
        T1, Tc, Tl, Tw = acc[j]
        r.times[vi, sel] = np.stack([T1, Tc, Tl], axis=1)
        r.full[vi, sel] = np.where(one, 0.0, m)
        r.not_ready[vi, sel] = np.where(one[:, None], 0.0, np.stack(
            [1.0 - first / S, np.where(m > 0, 1.0 - (first + c) / S, 0.0),
             np.where(m > 0, 1.0 - (first + m * c) / S, 0.0)], axis=1))
        r.wire[vi, sel] = np.where(one, T1, T1 + m * Tc + Tl)
        r.whole[vi, sel] = Tw
    if sharded:
        _gathers(r, todo, pricer, grad_bytes=grad_bytes)


def _gathers(r: BucketRows, todo, pricer: Pricer, *, grad_bytes: float) -> None:
    """ZeRO-1/2's weight all-gather of each group, ``k_i T_ag``, into ``r.gather``."""
    import numpy as np

    for i in range(r.group_bytes.shape[1]):
        T = pricer.column(Collective.ALL_GATHER,
                          np.concatenate([r.group_bytes[e[1], i] / grad_bytes * WEIGHT_BYTES for e in todo]),
                          np.concatenate([r.group[e[1], i] for e in todo]),
                          np.concatenate([r.ranks_per_node[e[1], i] for e in todo]))
        at = 0
        for e in todo:
            vi, sel = e[0], e[1]
            r.gather[vi, sel, i] = np.where(r.on[sel, i], r.nic[sel, i] * T[at:at + len(sel)], 0.0)
            at += len(sel)

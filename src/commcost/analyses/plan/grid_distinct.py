"""The grid's distinct values, each priced or computed once and broadcast back by index: the collectives
(:class:`Pricer`, one :meth:`~commcost.comm.model.CommModel.cost_many` per distinct ``(op, group, ranks per
node)``), the rows of a table (:func:`unique_rows`), the configurations' keys (:func:`distinct_keys`) and what
the configurations use of each structural row (:func:`needed`). Used by :mod:`commcost.analyses.plan.grid`.
"""

from __future__ import annotations

from commcost.comm.collectives import Collective
from commcost.analyses.plan.space import Choices

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.comm.model import CommModel
    from commcost.analyses.plan.space import GridColumns

__all__ = ["Pricer", "unique_rows", "needed", "distinct_keys"]


class Pricer:
    """``T(op, S, P, rpn)`` from the CommModel, memoised; zero for a group of one or an empty message
    (as :func:`commcost.analyses.plan.plan.plan`)."""

    def __init__(self, model: CommModel) -> None:
        self.model = model
        self.memo: dict[tuple, float] = {}

    def one(self, op: Collective, size: float, group: int, rpn: int) -> float:
        """One collective, seconds (:meth:`fetch` prices many at once)."""
        if group == 1 or size == 0:
            return 0.0
        key = (op, size, group, rpn)
        T = self.memo.get(key)
        if T is None:
            T = self.memo[key] = self.model.cost(op, size, group, ranks_per_node=rpn).total_s
        return T

    def fetch(self, keys) -> None:
        """Price the ``(op, size, group, rpn)`` of ``keys`` not yet known: one
        :meth:`~commcost.comm.model.CommModel.cost_many` per distinct ``(op, group, rpn)``."""
        import numpy as np

        by: dict[tuple, list[float]] = {}
        for op, S, P, r in keys:
            if P != 1 and S != 0 and (op, S, P, r) not in self.memo:
                by.setdefault((op, P, r), []).append(S)
        for (op, P, r), sizes in by.items():
            T = self.model.cost_many(op, np.array(sizes), P, ranks_per_node=r)
            self.memo.update(zip([(op, S, P, r) for S in sizes], T.tolist()))

    def column(self, op: Collective, size, group, rpn):
        """Element-wise prices of arrays ``size, group, rpn`` (each distinct triple priced once)."""
        import numpy as np

        size, group, rpn = np.broadcast_arrays(np.asarray(size, float), np.asarray(group), np.asarray(rpn))
        if size.size == 0:
            return np.zeros(0)
        uniq, inv = unique_rows(np.stack([size, group.astype(float), rpn.astype(float)], axis=1))
        keys = [(op, float(S), int(P), int(r)) for S, P, r in uniq.tolist()]
        self.fetch(keys)
        prices = np.array([self.one(*k) for k in keys])
        return prices[inv]


def unique_rows(mat):
    """``(distinct rows, inverse)`` of a 2-D float array, by one lexicographic sort (``np.unique(axis=0)``
    without its structured-dtype sort)."""
    import numpy as np

    order = np.lexsort(mat.T[::-1])
    srt = mat[order]
    new = np.ones(len(srt), dtype=bool)
    new[1:] = (srt[1:] != srt[:-1]).any(axis=1)
    inv = np.empty(len(srt), dtype=np.int64)
    inv[order] = np.cumsum(new) - 1
    return srt[new], inv


def needed(cols: GridColumns, nb: int, ncaps: int) -> dict:
    """What the configurations ``cols`` use of each structural row (``need`` of :func:`price_base`)."""
    import numpy as np

    bi, sp, zero = cols.bi, cols.sp, cols.zero
    out = {}
    for name, sel in (("sp0", sp == 0), ("sp1", sp == 1), ("z3", zero == 3)):
        out[name] = np.zeros(nb, dtype=bool)
        out[name][bi[sel]] = True
    variant = np.zeros((nb, 2 * ncaps), dtype=bool)
    low = zero < 3
    variant[bi[low], (zero[low] > 0) * ncaps + cols.capi[low]] = True
    out["variant"] = variant
    return out


def distinct_keys(cols: Choices, nb: int, *, zero3_only: bool) -> tuple[Choices, object]:
    """``(keys, back)``: the distinct ``(row, sp, recompute, ZeRO stage)`` of the configurations ``cols``
    (``zero3_only``: the stage as ZeRO-3 or not, ``zero`` 3 or 0) as :class:`Choices`, and for each
    configuration the index of its key (a column computed on the keys, ``[back]``, is each configuration's)."""
    import numpy as np

    bi, sp, rc, zero = cols.bi, cols.sp, cols.rc, cols.zero
    nz = 2 if zero3_only else 4
    z = (zero == 3) if zero3_only else zero
    key = ((sp * 3 + rc) * nz + z) * nb + bi
    present = np.zeros(6 * nz * nb, dtype=bool)
    present[key] = True
    ukey = np.flatnonzero(present)
    pos = np.zeros(len(present), dtype=np.int64)
    pos[ukey] = np.arange(len(ukey))
    uz = (ukey // nb) % nz
    keys = Choices(bi=ukey % nb, sp=ukey // (3 * nz * nb), rc=(ukey // (nz * nb)) % 3,
                   zero=np.where(uz == 1, 3, 0) if zero3_only else uz)
    return keys, pos[key]

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
    (as :func:`commcost.analyses.plan.plan.plan`). The memo holds, per distinct ``(op, group, ranks per node)``,
    the sizes priced so far (sorted) and their prices: a column of sizes is looked up with one sorted search and
    the sizes not yet known are priced with one :meth:`~commcost.comm.model.CommModel.cost_many` (element by
    element the same ``total_s`` as :meth:`~commcost.comm.model.CommModel.cost`)."""

    def __init__(self, model: CommModel) -> None:
        self.model = model
        self.known: dict[tuple, tuple] = {}
        """``(op, group, ranks per node) -> (sizes ascending, seconds)``, numpy arrays."""

    @property
    def distinct(self) -> int:
        """Distinct ``(op, size, group, ranks per node)`` priced through the CommModel so far."""
        return sum(len(sizes) for sizes, _ in self.known.values())

    def one(self, op: Collective, size: float, group: int, rpn: int) -> float:
        """One collective, seconds (:meth:`column` prices many at once)."""
        import numpy as np

        return float(self.column(op, np.array([float(size)]), np.array([group]), np.array([rpn]))[0])

    def _sizes(self, op: Collective, group: int, rpn: int, sizes):
        """Prices of the distinct, ascending ``sizes`` (numpy) of one ``(op, group, rpn)``, those not yet known
        priced in one :meth:`~commcost.comm.model.CommModel.cost_many` and kept."""
        import numpy as np

        key = (op, group, rpn)
        old_S, old_T = self.known.get(key, (np.zeros(0), np.zeros(0)))
        at = np.searchsorted(old_S, sizes)
        hit = at < len(old_S)
        hit[hit] = old_S[at[hit]] == sizes[hit]
        if hit.all():
            return old_T[at]
        new_S = sizes[~hit]
        new_T = np.asarray(self.model.cost_many(op, new_S, group, ranks_per_node=rpn), dtype=float)
        S = np.concatenate([old_S, new_S])
        order = np.argsort(S, kind="stable")
        self.known[key] = (S[order], np.concatenate([old_T, new_T])[order])
        out = np.empty(len(sizes))
        out[hit] = old_T[at[hit]]
        out[~hit] = new_T
        return out

    def column(self, op: Collective, size, group, rpn):
        """Element-wise prices of arrays ``size, group, rpn`` (each distinct triple priced once)."""
        import numpy as np

        size, group, rpn = np.broadcast_arrays(np.asarray(size, float), np.asarray(group), np.asarray(rpn))
        if size.size == 0:
            return np.zeros(0)
        # distinct (group, rpn, size), sorted so: each (group, rpn) a run of ascending sizes
        uniq, inv = unique_rows(np.stack([group.ravel().astype(float), rpn.ravel().astype(float), size.ravel()],
                                         axis=1))
        prices = np.zeros(len(uniq))
        live = np.nonzero((uniq[:, 0] != 1) & (uniq[:, 2] != 0))[0]
        if len(live):
            pairs = uniq[live, :2]
            cut = np.flatnonzero((pairs[1:] != pairs[:-1]).any(axis=1)) + 1
            for run in np.split(live, cut):
                prices[run] = self._sizes(op, int(uniq[run[0], 0]), int(uniq[run[0], 1]), uniq[run, 2])
        return prices[inv].reshape(size.shape)


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

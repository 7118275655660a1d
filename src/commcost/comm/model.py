"""The CommModel: the one object every command asks what a collective costs.

``model.cost(op, size_bytes, gpus)`` returns a :class:`~commcost.comm.collectives.CollectiveCost`
(latency and bandwidth terms, the algorithm that ran, the NCCL protocol where modelled, and why
it was chosen). There are three kinds, and the CLI builds exactly one of them per run
(:mod:`commcost.cli._fabric`); compositions (budget, layer, timeline, scaling, collective, plan)
never rebuild a link, never convert a fabric to a "flat equivalent" and never pick an algorithm
themselves.

============  =====================================================================  ====================
kind          what ``cost(op, S, P)`` is                                              ``auto`` chooses
============  =====================================================================  ====================
FlatLink      the drill's ring formulas on one :class:`Link` (``T = k(P-1)a +``      the ring (send/recv,
              ``k(P-1)/P S/B``); with one GPU per node every algorithm of            all-to-all: direct)
              :mod:`commcost.comm.algorithms` reduces to these
Fabric        :func:`commcost.comm.algorithms.collective_cost` on a two-tier         the fastest algorithm
              :class:`Topology` (system preset or topology flags), NCCL's            the backend runs for
              LL/LL128/Simple protocols where the preset has them                    that op at that size
Profile       the fitted regime ``i`` holding ``S``: ``T = k a_i + f S / B_i``       the fitted algorithm
              (:meth:`commcost.calibrate.fit.AlphaBetaFit.predict_s`, exactly what    (ring)
              ``validate`` scores); ``k`` ring steps, ``f`` the bus factor
============  =====================================================================  ====================

**Backends.** ``auto`` picks among the algorithms the named backend runs for ``op``
(:data:`BACKEND_ALGORITHMS`): NCCL runs ring, tree and NVLS/CollNet (``in_network``) for
all-reduce, the ring (and, with one GPU per node, PAT) for reduce-scatter and all-gather, the ring for
broadcast and reduce, and point-to-point
(``direct``) for all-to-all and send/recv (NCCL src/include/nccl_common.h ``NCCL_ALGO_*``;
src/enqueue.cc); gloo's all-reduce is a ring or halving-doubling (gloo/allreduce.h:
``ring``, ``halving_doubling``, ``bcube``). Other algorithms (halving-doubling and
hierarchical under NCCL) stay available by name as what-ifs.

**Profile scope.** A profile knows the op, ranks, nodes, GPUs per node and backend it was
measured on (:class:`ProfileScope`). Asked about another op or a group beyond its ranks or nodes,
the Profile model raises :class:`~commcost.core.errors.InputError` naming the scope, unless it was
built with ``extrapolate=True``; then it applies :data:`EXTRAPOLATION_RULE` (each regime's
``a_i`` and ``B_i`` carried over through the ring form at the new ``P`` and op) and
:meth:`ProfileModel.scope_warning` says what was extrapolated.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace

from commcost.comm.collectives import FLAT_CHOICE, NAMED_CHOICE, Algorithm, Collective, CollectiveCost, \
    ring_all_gather, ring_all_reduce, ring_reduce_scatter
from commcost.comm.link import Link
from commcost.core.errors import InputError
from commcost.core.validation import require_count

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

    from commcost.core.xp import FloatOrArray



__all__ = ["BACKENDS", "BACKEND_ALGORITHMS", "CommModel", "FlatLinkModel", "sizes_array"]
# and, loaded on first use (module __getattr__ below): FabricModel (commcost.comm.fabric_model),
# ProfileModel, ProfileScope, DERIVED_OPS, EXTRAPOLATION_RULE (commcost.comm.profile_model)

BACKENDS = ("nccl", "gloo")
"""Communication backends ``auto`` knows the algorithms of."""

_SHARED: dict[Collective, tuple[Algorithm, ...]] = {
    Collective.REDUCE_SCATTER: (Algorithm.RING,),
    Collective.ALL_GATHER: (Algorithm.RING,),
    Collective.BROADCAST: (Algorithm.RING,),
    Collective.REDUCE: (Algorithm.RING,),
    Collective.ALL_TO_ALL: (Algorithm.DIRECT,),
    Collective.SEND_RECV: (Algorithm.DIRECT,),
}
BACKEND_ALGORITHMS: dict[str, dict[Collective, tuple[Algorithm, ...]]] = {
    "nccl": {**_SHARED, Collective.ALL_REDUCE: (Algorithm.RING, Algorithm.TREE, Algorithm.IN_NETWORK),
             Collective.REDUCE_SCATTER: (Algorithm.RING, Algorithm.PAT), Collective.ALL_GATHER: (Algorithm.RING, Algorithm.PAT)},
    "gloo": {Collective.ALL_REDUCE: (Algorithm.RING, Algorithm.HALVING_DOUBLING), **_SHARED},
}
"""The algorithms each backend runs per collective, in tie-break order (first wins a tie)."""

def _collective(op: Collective | str) -> Collective:
    """``"all_reduce"`` / ``"all-reduce"`` / a Collective -> Collective (unknown names list the valid ones)."""
    if isinstance(op, Collective):
        return op
    try:
        return Collective(str(op).replace("-", "_"))
    except ValueError:
        raise InputError(f"unknown collective {op!r} (valid: {', '.join(c.value for c in Collective)})") from None


def _parse_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r} (valid: {', '.join(BACKENDS)})")
    return backend


def sizes_array(sizes_bytes: FloatOrArray) -> FloatOrArray:
    """``sizes_bytes`` as a float numpy array, checked once for every element (finite, >= 0): the edge of
    :meth:`CommModel.cost_many`, which then prices without a check per size."""
    import numpy as np

    S = np.asarray(sizes_bytes, dtype=float)
    bad = ~(np.isfinite(S) & (S >= 0))
    if bad.any():
        raise InputError(f"message sizes must be finite and >= 0, got {S[bad].ravel()[0]!r}")
    return S


class CommModel(ABC):
    """What every kind answers. Subclasses are frozen dataclasses."""

    kind: str = "abstract"

    @abstractmethod
    def cost(self, op: Collective | str, size_bytes: float, gpus: int, algorithm: Algorithm | str = "auto", *,
                 ranks_per_node: int | None = None) -> CollectiveCost:
        """One collective of ``op`` on ``size_bytes`` over ``gpus`` ranks.

        ``ranks_per_node``: how many of the group's ranks share a node (a strided group, such as
        the data-parallel group under tensor parallelism, has fewer than the node's GPUs);
        None packs the group onto full nodes. Only a fabric distinguishes placements.
        """

    def cost_many(self, op: Collective | str, sizes_bytes: FloatOrArray, gpus: int, *,
                      ranks_per_node: int | None = None) -> FloatOrArray:
        """Seconds of one ``op`` collective on each of ``sizes_bytes`` (a numpy array) over ``gpus`` ranks:
        element by element ``cost(op, S, gpus, ranks_per_node=...).total_s`` under ``auto``, priced as
        arrays (inputs checked once here, not per size). numpy needed. This generic form asks
        :meth:`cost` per size; each kind overrides it with its formulas on arrays."""
        import numpy as np

        S = sizes_array(sizes_bytes)
        return np.array([self.cost(op, float(x), gpus, ranks_per_node=ranks_per_node).total_s
                         for x in S.ravel()]).reshape(S.shape)

    def candidates(self, op: Collective | str, size_bytes: float, gpus: int, *,
                       ranks_per_node: int | None = None) -> dict[Algorithm, CollectiveCost]:
        """Every algorithm ``auto`` would consider here, with its cost (the winner is the cheapest)."""
        c = self.cost(op, size_bytes, gpus, ranks_per_node=ranks_per_node)
        return {c.algorithm: c}

    @abstractmethod
    def describe(self) -> str:
        """One line naming the model and its parameters, for report headers."""

    def max_gpus(self) -> int | None:
        """The most ranks a group may have (None: unbounded)."""
        return None

    def scaled(self) -> CommModel:
        """The same fabric for larger groups (scaling tables): a fabric gains nodes of its kind;
        a flat link is unbounded already; a profile stays within its scope."""
        return self

    @property
    def flat_link(self) -> Link | None:
        """The one link of the drill's flat model (None for a fabric or a profile)."""
        return None

    def scope_warning(self, op: Collective | str, gpus: int) -> str | None:
        """A warning when ``cost`` would extrapolate outside what the model was built from."""
        return None

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """JSON description (SI units)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FlatLinkModel(CommModel):
    """The drill's flat model: one :class:`Link` shared by every rank; ring formulas."""

    link: Link
    """Achievable per-rank bandwidth B and per-ring-step latency a."""
    backend: str = "nccl"
    """Whose algorithms ``auto`` may choose (on one flat link: the ring; direct for all-to-all, send/recv)."""
    kind = "flat"

    def __post_init__(self) -> None:
        if not isinstance(self.link, Link):
            raise InputError(f"link must be a Link, got {type(self.link).__name__}")
        _parse_backend(self.backend)

    def cost(self, op: Collective | str, size_bytes: float, gpus: int, algorithm: Algorithm | str = "auto", *,
                 ranks_per_node: int | None = None) -> CollectiveCost:
        if algorithm == "auto":
            op = _collective(op)
            ring = {Collective.ALL_REDUCE: ring_all_reduce, Collective.REDUCE_SCATTER: ring_reduce_scatter,
                    Collective.ALL_GATHER: ring_all_gather}.get(op)
            if ring is not None:  # the drill's path: no algorithm table, no protocol model imported
                return ring(size_bytes, gpus, self.link, FLAT_CHOICE)
        from commcost.comm.algorithms import collective_cost, parse_algorithm, parse_collective

        op = parse_collective(op)
        alg = parse_algorithm(algorithm)
        if alg == "auto":
            # a flat link has no tiers for tree or NVLS to exploit: the ring (direct for a2a, p2p)
            alg = Algorithm.DIRECT if op in (Collective.ALL_TO_ALL, Collective.SEND_RECV) else Algorithm.RING
            return replace(collective_cost(op, size_bytes, gpus, self.link, alg), choice=FLAT_CHOICE)
        return replace(collective_cost(op, size_bytes, gpus, self.link, alg), choice=NAMED_CHOICE)

    def cost_many(self, op: Collective | str, sizes_bytes: FloatOrArray, gpus: int, *,
                      ranks_per_node: int | None = None) -> FloatOrArray:
        """:meth:`cost`'s ``total_s`` under ``auto`` on an array of sizes: the ring formulas
        ``k(P-1) a + k(P-1)/P S/B`` on arrays for all-reduce, reduce-scatter and all-gather, else
        :func:`commcost.comm.algorithms.totals_many` on the flat link (ring; direct for all-to-all, send/recv)."""
        from commcost.comm.algorithms import available_algorithms, totals_many, unavailable_algorithms
        from commcost.comm.topology import as_topology

        op = _collective(op)
        S = sizes_array(sizes_bytes)
        require_count("gpus", gpus)
        k = {Collective.ALL_REDUCE: 2, Collective.REDUCE_SCATTER: 1, Collective.ALL_GATHER: 1}.get(op)
        if k is not None:   # collectives._ring, the same arithmetic in the same order
            P, a, B = gpus, self.link.latency_s, self.link.bandwidth_bytes_per_s
            return k * (P - 1) * a + k * (P - 1) / P * S / B
        alg = Algorithm.DIRECT if op in (Collective.ALL_TO_ALL, Collective.SEND_RECV) else Algorithm.RING
        topo = as_topology(self.link, gpus)
        algs = available_algorithms(op, gpus, topo, (alg,))
        if not algs:
            raise InputError(unavailable_algorithms(op, gpus, topo)[alg])
        return totals_many(op, S, gpus, topo, algs)

    @property
    def flat_link(self) -> Link | None:
        return self.link

    def describe(self) -> str:
        return (f"flat link: B = {self.link.bandwidth_bytes_per_s / 1e9:g} GB/s per rank, "
                f"a = {self.link.latency_s * 1e6:g} us per ring step")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "backend": self.backend,
                "bandwidth_bytes_per_s": self.link.bandwidth_bytes_per_s, "latency_s": self.link.latency_s}


_LAZY = {"FabricModel": "commcost.comm.fabric_model", "ProfileModel": "commcost.comm.profile_model",
         "ProfileScope": "commcost.comm.profile_model", "DERIVED_OPS": "commcost.comm.profile_model",
         "EXTRAPOLATION_RULE": "commcost.comm.profile_model"}


def __getattr__(name: str) -> Any:
    """The fabric and profile kinds live in their own modules, loaded on first use (PEP 562), so the
    drill's flat path builds one model class, not three."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'commcost.comm.model' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)

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
all-reduce, the ring for reduce-scatter, all-gather, broadcast and reduce, and point-to-point
(``direct``) for all-to-all and send/recv (NCCL src/include/nccl_common.h ``NCCL_ALGO_*``;
src/enqueue.cc); gloo's all-reduce is a ring or halving-doubling (gloo/allreduce.h:
``ring``, ``halving_doubling``, ``bcube``). Other algorithms (halving-doubling and
hierarchical under NCCL) stay available by name as what-ifs.

**Profile scope.** A profile knows the op, ranks, nodes, GPUs per node and backend it was
measured on (:class:`ProfileScope`). Asked about another op or a group beyond its ranks or nodes,
the Profile model raises :class:`~commcost.errors.InputError` naming the scope, unless it was
built with ``extrapolate=True``; then it applies :data:`EXTRAPOLATION_RULE` (each regime's
``a_i`` and ``B_i`` carried over through the ring form at the new ``P`` and op) and
:meth:`ProfileModel.scope_warning` says what was extrapolated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from commcost.comm.collectives import Algorithm, Collective, CollectiveCost, bus_bandwidth_factor, ring_latency_steps
from commcost.comm.topology import Link, Topology
from commcost.errors import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from commcost.calibrate.fit import AlphaBetaFit

__all__ = ["BACKENDS", "BACKEND_ALGORITHMS", "EXTRAPOLATION_RULE", "CommModel", "FlatLinkModel",
           "FabricModel", "ProfileModel", "ProfileScope", "DERIVED_OPS"]

BACKENDS = ("nccl", "gloo")
"""Communication backends ``auto`` knows the algorithms of."""

_ALL_REDUCE_NCCL = (Algorithm.RING, Algorithm.TREE, Algorithm.IN_NETWORK)
BACKEND_ALGORITHMS: dict[str, dict[Collective, tuple[Algorithm, ...]]] = {
    "nccl": {
        Collective.ALL_REDUCE: _ALL_REDUCE_NCCL,
        Collective.REDUCE_SCATTER: (Algorithm.RING,),
        Collective.ALL_GATHER: (Algorithm.RING,),
        Collective.BROADCAST: (Algorithm.RING,),
        Collective.REDUCE: (Algorithm.RING,),
        Collective.ALL_TO_ALL: (Algorithm.DIRECT,),
        Collective.SEND_RECV: (Algorithm.DIRECT,),
    },
    "gloo": {
        Collective.ALL_REDUCE: (Algorithm.RING, Algorithm.HALVING_DOUBLING),
        Collective.REDUCE_SCATTER: (Algorithm.RING,),
        Collective.ALL_GATHER: (Algorithm.RING,),
        Collective.BROADCAST: (Algorithm.RING,),
        Collective.REDUCE: (Algorithm.RING,),
        Collective.ALL_TO_ALL: (Algorithm.DIRECT,),
        Collective.SEND_RECV: (Algorithm.DIRECT,),
    },
}
"""The algorithms each backend runs per collective, in tie-break order (first wins a tie)."""

DERIVED_OPS: dict[Collective, tuple[Collective, ...]] = {
    Collective.ALL_REDUCE: (Collective.REDUCE_SCATTER, Collective.ALL_GATHER),
}
"""Ops a profile prices within its scope besides the one measured: NCCL's ring all-reduce *is* a
reduce-scatter followed by an all-gather over the same ring (each ``(P-1)`` steps and ``(P-1)/P S``
bytes per rank, half the all-reduce's), so an all-reduce profile's ``a_i`` and ``B_i`` price them
exactly in the ring form."""

EXTRAPOLATION_RULE = ("each fitted regime keeps its per-step latency a_i and bus bandwidth B_i; the ring form "
                      "T = k a_i + f S / B_i is evaluated with the new op's k ring steps and bus factor f at the "
                      "new P: exact for a ring whose busiest link is unchanged, optimistic when the group "
                      "crosses a slower tier than the measurement did")
"""What ``--extrapolate`` does with a profile outside its scope (printed in the warning)."""


def _parse_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r} (valid: {', '.join(BACKENDS)})")
    return backend


class CommModel:
    """What every kind answers. Subclasses are frozen dataclasses."""

    kind: str = "abstract"

    def cost(self, op: Collective | str, size_bytes: float, gpus: int, algorithm: Algorithm | str = "auto", *,
             ranks_per_node: int | None = None) -> CollectiveCost:  # pragma: no cover - interface
        """One collective of ``op`` on ``size_bytes`` over ``gpus`` ranks.

        ``ranks_per_node``: how many of the group's ranks share a node (a strided group, such as
        the data-parallel group under tensor parallelism, has fewer than the node's GPUs);
        None packs the group onto full nodes. Only a fabric distinguishes placements.
        """
        raise NotImplementedError

    def candidates(self, op: Collective | str, size_bytes: float, gpus: int, *,
                   ranks_per_node: int | None = None) -> dict[Algorithm, CollectiveCost]:
        """Every algorithm ``auto`` would consider here, with its cost (the winner is the cheapest)."""
        c = self.cost(op, size_bytes, gpus, ranks_per_node=ranks_per_node)
        return {c.algorithm: c}

    def describe(self) -> str:  # pragma: no cover - interface
        """One line naming the model and its parameters, for report headers."""
        raise NotImplementedError

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

    def to_dict(self) -> dict:  # pragma: no cover - interface
        """JSON description (SI units)."""
        raise NotImplementedError


def _pick(costs: dict[Algorithm, CollectiveCost], backend: str, op: Collective) -> CollectiveCost:
    """The cheapest of ``costs``; its ``reason`` names the runner-up and both totals."""
    from commcost.units import format_seconds as t

    ranked = sorted(costs.values(), key=lambda c: c.total_s)
    best = ranked[0]
    if len(ranked) == 1:
        why = f"the only algorithm {backend} runs for {op.value} here"
    else:
        r = ranked[1]
        why = (f"fastest of {', '.join(c.algorithm.value for c in ranked)} ({backend}); runner-up "
               f"{r.algorithm.value} {t(r.total_s)} (latency {t(r.latency_s)} + bandwidth {t(r.bandwidth_s)}) "
               f"vs {t(best.total_s)} (latency {t(best.latency_s)} + bandwidth {t(best.bandwidth_s)})")
    return replace(best, reason=why)


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

    def cost(self, op, size_bytes, gpus, algorithm="auto", *, ranks_per_node=None) -> CollectiveCost:
        from commcost.comm.algorithms import collective_cost, parse_algorithm, parse_collective

        op = parse_collective(op)
        alg = parse_algorithm(algorithm)
        if alg == "auto":
            # a flat link has no tiers for tree or NVLS to exploit: the drill's ring (direct for a2a, p2p)
            alg = Algorithm.DIRECT if op in (Collective.ALL_TO_ALL, Collective.SEND_RECV) else Algorithm.RING
            c = collective_cost(op, size_bytes, gpus, self.link, alg)
            return replace(c, reason="flat link: the drill's ring formula")
        return replace(collective_cost(op, size_bytes, gpus, self.link, alg), reason="asked for by name")

    @property
    def flat_link(self) -> Link | None:
        return self.link

    def describe(self) -> str:
        return (f"flat link: B = {self.link.bandwidth_bytes_per_s / 1e9:g} GB/s per rank, "
                f"a = {self.link.latency_s * 1e6:g} us per ring step")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "backend": self.backend,
                "bandwidth_bytes_per_s": self.link.bandwidth_bytes_per_s, "latency_s": self.link.latency_s}


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricModel(CommModel):
    """A two-tier :class:`Topology` (system preset or topology flags) with per-size algorithm choice."""

    topology: Topology
    """Tiers, placement, in-network reduction, protocol model."""
    backend: str = "nccl"
    """Whose algorithms ``auto`` may choose (:data:`BACKEND_ALGORITHMS`)."""
    grow_nodes: bool = False
    """True: a group larger than the topology gets more nodes of the same kind (scaling sweeps)."""
    kind = "fabric"

    def __post_init__(self) -> None:
        if not isinstance(self.topology, Topology):
            raise InputError(f"topology must be a Topology, got {type(self.topology).__name__}")
        _parse_backend(self.backend)

    def _topo(self, gpus: int, ranks_per_node: int | None = None) -> Topology:
        t = self.topology
        if ranks_per_node is not None:
            if not 1 <= ranks_per_node <= t.gpus_per_node:
                raise InputError(f"ranks_per_node must be between 1 and the node's {t.gpus_per_node} GPUs, "
                                 f"got {ranks_per_node}")
            # the group's ranks on a node use their own GPUs' NICs: a node of g = ranks_per_node GPUs
            t = replace(t, gpus_per_node=ranks_per_node, nodes=max(t.nodes, math.ceil(gpus / ranks_per_node)))
        nodes = math.ceil(gpus / t.gpus_per_node)
        if self.grow_nodes and nodes > t.nodes:
            return replace(t, nodes=nodes)
        return t

    def candidates(self, op, size_bytes, gpus, *, ranks_per_node=None) -> dict[Algorithm, CollectiveCost]:
        from commcost.comm.algorithms import algorithm_costs, parse_collective

        op = parse_collective(op)
        allowed = BACKEND_ALGORITHMS[self.backend][op]
        costs = algorithm_costs(op, size_bytes, gpus, self._topo(gpus, ranks_per_node))
        return {a: costs[a] for a in allowed if a in costs}

    def cost(self, op, size_bytes, gpus, algorithm="auto", *, ranks_per_node=None) -> CollectiveCost:
        from commcost.comm.algorithms import collective_cost, parse_algorithm, parse_collective, \
            protocol_costs, unavailable_algorithms

        op = parse_collective(op)
        alg = parse_algorithm(algorithm)
        topo = self._topo(gpus, ranks_per_node)
        if alg == "auto":
            costs = self.candidates(op, size_bytes, gpus, ranks_per_node=ranks_per_node)
            if not costs:
                reasons = "; ".join(unavailable_algorithms(op, gpus, topo).values())
                raise InputError(f"no algorithm {self.backend} runs can carry {op.value} on {gpus} GPUs "
                                 f"here: {reasons}")
            best = _pick(costs, self.backend, op)
        else:
            best = replace(collective_cost(op, size_bytes, gpus, topo, alg), reason="asked for by name")
        if topo.protocols is not None and gpus > 1:
            proto = next(iter(protocol_costs(op, size_bytes, gpus, topo, best.algorithm)))
            best = replace(best, protocol=proto.value)
        return best

    def max_gpus(self) -> int | None:
        return None if self.grow_nodes else self.topology.total_gpus

    def scaled(self) -> CommModel:
        return replace(self, grow_nodes=True)

    def describe(self) -> str:
        t = self.topology
        return (f"{t.name}: {t.nodes} node(s) x {t.gpus_per_node} GPUs, intra "
                f"{t.intra.bandwidth_bytes_per_s / 1e9:g} GB/s, inter {t.inter.bandwidth_bytes_per_s / 1e9:g} GB/s "
                f"per GPU ({self.backend})")

    def scope_warning(self, op, gpus) -> str | None:
        if "nvl72" in self.topology.name and math.ceil(gpus / self.topology.gpus_per_node) > 1:
            return (f"{self.topology.name} beyond one rack: the two-tier model is optimistic there "
                    f"(60-73% fast against a 20-rack table); treat the figures as a lower bound")
        return None

    def to_dict(self) -> dict:
        t = self.topology
        return {"kind": self.kind, "backend": self.backend, "system": t.name, "nodes": t.nodes,
                "gpus_per_node": t.gpus_per_node,
                "intra_bandwidth_bytes_per_s": t.intra.bandwidth_bytes_per_s, "intra_latency_s": t.intra.latency_s,
                "inter_bandwidth_bytes_per_s": t.inter.bandwidth_bytes_per_s, "inter_latency_s": t.inter.latency_s,
                "protocols": t.protocols is not None}


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileScope:
    """What a calibrated profile was measured on."""

    op: Collective
    """The collective measured."""
    gpus: int
    """Ranks P of the measurement."""
    nodes: int | None = None
    """Nodes the measurement spanned (None: not recorded)."""
    gpus_per_node: int | None = None
    """GPUs per node (None: not recorded)."""
    backend: str | None = None
    """Backend of the measurement (nccl, gloo, rccl; None: not recorded)."""

    def describe(self) -> str:
        where = f"{self.gpus} ranks"
        if self.nodes is not None:
            where += f" on {self.nodes} node(s)"
        return f"{self.op.value} over {where}" + (f" ({self.backend})" if self.backend else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileModel(CommModel):
    """A calibrated profile: every fitted regime, exactly as ``validate`` scores it."""

    fit: AlphaBetaFit
    """The fitted regimes (op, algorithm, gpus)."""
    scope: ProfileScope
    """What it was measured on."""
    extrapolate: bool = False
    """Allow other ops and larger groups (:data:`EXTRAPOLATION_RULE`); otherwise they are refused."""
    source: str = ""
    """The profile file, for report headers."""
    kind = "profile"

    def _out_of_scope(self, op: Collective, gpus: int) -> str | None:
        s = self.scope
        why = []
        if op is not s.op and op not in DERIVED_OPS.get(s.op, ()):
            why.append(f"op {op.value}")
        if gpus > s.gpus:
            why.append(f"{gpus} ranks (> {s.gpus})")
        elif s.gpus_per_node and s.nodes and math.ceil(gpus / s.gpus_per_node) > s.nodes:
            why.append(f"{math.ceil(gpus / s.gpus_per_node)} nodes (> {s.nodes})")
        if not why:
            return None
        return f"profile {self.source or ''} was measured on {s.describe()}; asked for {' and '.join(why)}".replace(
            "profile  ", "profile ")

    def scope_warning(self, op, gpus) -> str | None:
        from commcost.comm.algorithms import parse_collective

        why = self._out_of_scope(parse_collective(op), gpus)
        return None if why is None else f"{why}: extrapolated ({EXTRAPOLATION_RULE})"

    def cost(self, op, size_bytes, gpus, algorithm="auto", *, ranks_per_node=None) -> CollectiveCost:
        from commcost.comm.algorithms import parse_algorithm, parse_collective

        op = parse_collective(op)
        alg = parse_algorithm(algorithm)
        if alg != "auto" and alg is not self.fit.algorithm:
            raise InputError(f"a profile fitted the {self.fit.algorithm.value} form; --algorithm {alg.value} "
                             f"needs a fabric (--system) instead")
        if not self.extrapolate:
            why = self._out_of_scope(op, gpus)
            if why is not None:
                raise InputError(f"{why}; pass --extrapolate to apply it anyway")
        if gpus == 1:
            return CollectiveCost(op=op, algorithm=self.fit.algorithm, gpus=1, message_bytes=size_bytes,
                                  latency_s=0.0, bandwidth_s=0.0, reason="one rank: nothing to send")
        i, regime = next((i, r) for i, r in enumerate(self.fit.regimes)
                         if size_bytes < r.max_size_bytes or i == len(self.fit.regimes) - 1)
        k = ring_latency_steps(op, gpus)
        f = bus_bandwidth_factor(op, gpus)
        return CollectiveCost(op=op, algorithm=self.fit.algorithm, gpus=gpus, message_bytes=size_bytes,
                              latency_s=k * regime.alpha_s, bandwidth_s=f * size_bytes / regime.bandwidth_bytes_per_s,
                              reason=f"calibrated regime {i + 1} of {len(self.fit.regimes)} ({regime.describe()})")

    def max_gpus(self) -> int | None:
        return None if self.extrapolate else self.scope.gpus

    def describe(self) -> str:
        return (f"profile {self.source}: {len(self.fit.regimes)} fitted regime(s), measured on "
                f"{self.scope.describe()}")

    def to_dict(self) -> dict:
        s = self.scope
        return {"kind": self.kind, "path": self.source, "op": s.op.value, "gpus": s.gpus, "nodes": s.nodes,
                "gpus_per_node": s.gpus_per_node, "backend": s.backend, "extrapolate": self.extrapolate,
                "regimes": [{"min_size_bytes": r.min_size_bytes,
                             "max_size_bytes": None if math.isinf(r.max_size_bytes) else r.max_size_bytes,
                             "alpha_s": r.alpha_s, "bandwidth_bytes_per_s": r.bandwidth_bytes_per_s}
                            for r in self.fit.regimes]}

"""The fabric kind of :mod:`commcost.comm.model`: a two-tier :class:`Topology` (system preset or
topology flags) priced by :func:`commcost.comm.algorithms.collective_cost`, with ``auto`` choosing among
the algorithms the backend runs (:data:`commcost.comm.model.BACKEND_ALGORITHMS`) per size."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from commcost.comm.collectives import NAMED_CHOICE, Algorithm, AlgorithmChoice, ChoiceKind, Collective, CollectiveCost
from commcost.comm.model import BACKEND_ALGORITHMS, CommModel, _parse_backend
from commcost.comm.topology import Topology
from commcost.core.errors import InputError
from commcost.core.limits import MAX_GPUS
from commcost.core.validation import require_at_most, require_count, require_finite_positive
from commcost.comm.table_terms import IdentityMemo
from commcost.comm.algorithms import algorithm_costs
from commcost.comm.algorithms import available_algorithms
from commcost.comm.table_terms import derive
from commcost.comm.algorithms import totals_many
from commcost.comm.model import sizes_array
from commcost.comm.algorithms import collective_cost
from commcost.comm.algorithms import parse_algorithm
from commcost.comm.algorithms import parse_collective
from commcost.comm.algorithms import protocol_costs
from commcost.comm.algorithms import unavailable_algorithms
from commcost.comm.topology import pods_spanned

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

    from commcost.core.xp import FloatOrArray


__all__ = ["FabricModel"]


def _make_group_topology(t: Topology, grow_nodes: bool, gpus: int, ranks_per_node: int | None) -> Topology:
    """The topology a group of ``gpus`` ranks, ``ranks_per_node`` of them on a node, is priced on
    (:meth:`FabricModel._topo`), memoised on its frozen inputs: it does not depend on the message size."""
    if ranks_per_node is not None:
        if not 1 <= ranks_per_node <= t.gpus_per_node:
            raise InputError(f"ranks_per_node must be between 1 and the node's {t.gpus_per_node} GPUs, "
                             f"got {ranks_per_node}")
        # the group's ranks on a node use their own GPUs' NICs: a node of g = ranks_per_node GPUs
        t = derive(t, gpus_per_node=ranks_per_node, nodes=max(t.nodes, math.ceil(gpus / ranks_per_node)))
    nodes = math.ceil(gpus / t.gpus_per_node)
    if grow_nodes and nodes > t.nodes:
        return derive(t, nodes=nodes)
    return t


_group_topology = IdentityMemo(_make_group_topology)


def _pick(costs: dict[Algorithm, CollectiveCost], backend: str) -> CollectiveCost:
    """The cheapest of ``costs``; its ``choice`` holds the ranking and the runner-up's terms (as data: the
    sentence is the report's, :mod:`commcost.report._choice`)."""

    ranked = sorted(costs.values(), key=lambda c: c.total_s)
    best = ranked[0]
    if len(ranked) == 1:
        return derive(best, choice=AlgorithmChoice(kind=ChoiceKind.ONLY, backend=backend))
    r = ranked[1]
    return derive(best, choice=AlgorithmChoice(kind=ChoiceKind.FASTEST, backend=backend,
                                               ranked=tuple(c.algorithm for c in ranked),
                                               runner_up_latency_s=r.latency_s, runner_up_bandwidth_s=r.bandwidth_s))


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricModel(CommModel):
    """A two- or three-tier :class:`Topology` (system preset or topology flags) with per-size algorithm choice."""

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
        return _group_topology(self.topology, self.grow_nodes, gpus, ranks_per_node)

    def cost_many(self, op: Collective | str, sizes_bytes: FloatOrArray, gpus: int, *,
                      ranks_per_node: int | None = None) -> FloatOrArray:
        """:meth:`cost`'s ``total_s`` under ``auto`` on an array of sizes: the fastest algorithm the backend
        runs, each under its fastest protocol (:func:`commcost.comm.algorithms.totals_many`), the group's
        placement and the algorithms that can run it found once for every size."""
        op = parse_collective(op)
        S = sizes_array(sizes_bytes)
        require_count("gpus", gpus)
        topo = self._topo(gpus, ranks_per_node)
        algs = available_algorithms(op, gpus, topo, BACKEND_ALGORITHMS[self.backend][op])
        if not algs:
            reasons = "; ".join(unavailable_algorithms(op, gpus, topo).values())
            raise InputError(f"no algorithm {self.backend} runs can carry {op.value} on {gpus} GPUs "
                             f"here: {reasons}")
        return totals_many(op, S, gpus, topo, algs)

    def candidates(self, op: Collective | str, size_bytes: float, gpus: int, *,
                       ranks_per_node: int | None = None) -> dict[Algorithm, CollectiveCost]:

        op = parse_collective(op)
        allowed = BACKEND_ALGORITHMS[self.backend][op]
        costs = algorithm_costs(op, size_bytes, gpus, self._topo(gpus, ranks_per_node))
        return {a: costs[a] for a in allowed if a in costs}

    def cost(self, op: Collective | str, size_bytes: float, gpus: int, algorithm: Algorithm | str = "auto", *,
                 ranks_per_node: int | None = None) -> CollectiveCost:
        """The one collective (:meth:`CommModel.cost`); the frozen result is memoised on this model and the
        call's arguments (plan, its advice and a search's re-pricing ask for the same collectives again)."""
        return _costs(self, op, size_bytes, gpus, algorithm, ranks_per_node)

    def _cost(self, op: Collective | str, size_bytes: float, gpus: int, algorithm: Algorithm | str = "auto",
                  ranks_per_node: int | None = None) -> CollectiveCost:
        require_finite_positive("size_bytes", size_bytes, allow_zero=True)
        require_count("gpus", gpus)
        require_at_most("gpus", gpus, MAX_GPUS)
        if ranks_per_node is not None:
            require_count("ranks_per_node", ranks_per_node)
        op = parse_collective(op)
        alg = parse_algorithm(algorithm)
        topo = self._topo(gpus, ranks_per_node)
        if alg == "auto":
            costs = self.candidates(op, size_bytes, gpus, ranks_per_node=ranks_per_node)
            if not costs:
                reasons = "; ".join(unavailable_algorithms(op, gpus, topo).values())
                raise InputError(f"no algorithm {self.backend} runs can carry {op.value} on {gpus} GPUs "
                                 f"here: {reasons}")
            best = _pick(costs, self.backend)
        else:
            best = replace(collective_cost(op, size_bytes, gpus, topo, alg), choice=NAMED_CHOICE)
        if topo.protocols is not None and gpus > 1:
            proto = next(iter(protocol_costs(op, size_bytes, gpus, topo, best.algorithm)))
            best = derive(best, protocol=proto.value)
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

    def scope_warning(self, op: Collective | str, gpus: int) -> str | None:
        """The preset's own caution (:attr:`Topology.multi_pod_caution`, set by the registry's row) for a group
        across its pods, while the spine is the preset's fitted one; None elsewhere (two tiers, one pod, a spine
        someone else gave)."""

        t = self.topology
        m = pods_spanned(t, math.ceil(gpus / t.gpus_per_node))
        if m < 2:
            return None
        if t.multi_pod_caution is None or t.spine_oversubscription != t.caution_spine_oversubscription:
            return None
        return (f"{t.name} across {m} pods of {t.pod_nodes} nodes: the spine's bandwidth share "
                f"(1/{t.spine_oversubscription:g}) is {t.multi_pod_caution}")

    def to_dict(self) -> dict[str, Any]:
        t = self.topology
        return {"kind": self.kind, "backend": self.backend, "system": t.name, "nodes": t.nodes,
                "gpus_per_node": t.gpus_per_node,
                "intra_bandwidth_bytes_per_s": t.intra.bandwidth_bytes_per_s, "intra_latency_s": t.intra.latency_s,
                "inter_bandwidth_bytes_per_s": t.inter.bandwidth_bytes_per_s, "inter_latency_s": t.inter.latency_s,
                "pod_nodes": t.pod_nodes, "spine_oversubscription": t.spine_oversubscription,
                "spine_latency_s": t.spine_latency_s, "protocols": t.protocols is not None}


_costs = IdentityMemo(FabricModel._cost)

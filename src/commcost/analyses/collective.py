"""``commcost collective``: one collective priced at every size, under the requested algorithm and every
algorithm the backend runs, with the modelled ones that cannot run here and (a system preset alone) the
measured band of its class. The same :class:`commcost.comm.model.CommModel` prices every size; nothing
here re-derives a cost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from commcost.comm.algorithms import unavailable_algorithms
from commcost.comm.band import collective_band
from commcost.comm.collectives import Algorithm, Collective, CollectiveCost
from commcost.comm.topology import Link, Topology, place

__all__ = ["SizeResult", "price_sizes", "nodes_used"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SizeResult:
    """What the command computed for one message size."""

    chosen: CollectiveCost
    """The cost under the requested algorithm (or the fastest, for ``auto``)."""
    requested: str
    """The ``--algorithm`` value (``auto`` or an algorithm name)."""
    alternatives: dict[Algorithm, CollectiveCost]
    """Every algorithm that can run this collective here."""
    unavailable: dict[Algorithm, str]
    """Modelled algorithms that cannot, with the reason."""
    protocol: str | None = None
    """NCCL protocol (ll, ll128, simple) the chosen algorithm runs with, where the fabric has
    a protocol model (system presets); None elsewhere."""
    band_s: tuple[float, float] | None = None
    """``(low, high)``: where measured clusters of this class fall around the prediction
    (:func:`commcost.comm.band.collective_band`; system presets only), seconds."""


def price_sizes(comm, op: Collective, sizes_bytes: Sequence[float], gpus: int, requested="auto", *,
                fabric: Link | Topology | None, band_topology: Topology | None = None) -> list[SizeResult]:
    """Each size in ``sizes_bytes`` priced by ``comm`` (a :class:`commcost.comm.model.CommModel`) on
    ``gpus`` ranks: the ``requested`` algorithm's cost (``auto``: the fastest), every candidate beside it
    (a what-if asked for by name joins them), the algorithms ``fabric`` cannot run with the reason, and
    with ``band_topology`` the measured band of its class (:func:`commcost.comm.band.collective_band`)."""
    unavailable = unavailable_algorithms(op, gpus, fabric) if fabric is not None else {}
    out = []
    for size in sizes_bytes:
        chosen = comm.cost(op, size, gpus, requested)
        alternatives = comm.candidates(op, size, gpus)
        if chosen.algorithm not in alternatives:  # a what-if asked for by name
            alternatives = {chosen.algorithm: chosen, **alternatives}
        band = None if band_topology is None else collective_band(chosen, band_topology)
        out.append(SizeResult(chosen=chosen, requested=str(requested), alternatives=alternatives,
                              unavailable=unavailable, protocol=chosen.protocol, band_s=band))
    return out


def nodes_used(gpus: int, topology: Topology | None) -> int:
    """The nodes the group occupies on ``topology`` (:func:`commcost.comm.topology.place`); on a flat
    link, where every rank is its own host, ``gpus``."""
    return place(gpus, topology).nodes if topology is not None else gpus

"""The uncertainty band of a preset-only prediction: the spread real clusters of its class show.

A preset gives one number, but measured clusters of the same hardware differ (NCCL version,
firmware, switch placement, routing). :func:`collective_band` turns a predicted time ``t`` into
``(r_lo t, r_hi t)``: the range the *measured* times of real tables of the same class fell in
around the preset's prediction. The classes and ratios are data
(``commcost/hardware/bands.json``), derived by ``benchmarks/derive_constants.py``:

    for every row of 1 MiB or more of the TUNING tables (tests/data/nccl_tests/split.json),
    r = t_measured / t_predicted (preset only, algorithm auto);
    per class, r_lo = 5th percentile of r and r_hi = 95th percentile of r.

Class = where the group lives: ``one_node``, ``multi_node`` (the group spans more than one node
of its topology, inside one pod) or ``multi_pod`` (it spans several pods of a three-tier topology,
multi-rack NVL72 beyond a scalable unit of 8 racks, where the spine's share is fitted on one table
and its rows are few: the band there is the spread of that one table's rows). Size
regimes are not separate classes: split by 1-64 MiB and > 64 MiB, the classes held 32-63 rows
and their percentiles moved by up to 0.07 between two model revisions (one_node/>64MiB p95 from
1.159 to 1.091), too unstable to publish; merged, they hold 74-102 rows. One ratio pair per class
also keeps both ends of the band monotone in size wherever the prediction is.
``benchmarks/accuracy_nccl_tests.py`` prints the band's coverage on the held-out tables, which
did not take part in the derivation.

**Per collective and scope**: a collective whose tuning rows in a class number at least
:data:`MIN_BAND_ROWS` has its own band, ``op/class`` in bands.json (all-to-all across nodes runs
on other physics than a ring all-reduce, and its spread differs); the others take the class's
all-reduce band, as an indication only. Each ratio pair is the 5th and 95th percentile of
``t_measured / t_predicted``, so it holds measured times on both sides of the prediction.

**Composed quantities** (``budget``, ``timeline``, ``plan``; :func:`band_models`,
:func:`composed_band`): one rule, here and nowhere else. A measured cluster of a class is taken
to be ``r`` times the prediction on *every* collective of that class (both terms of each,
:func:`scale_cost`), with ``r = r_lo`` at the low edge and ``r_hi`` at the high edge, each group
classed by where it lives (:func:`band_class`, strided groups by their ranks per node), and a
collective with a band of its own in that class (:func:`class_ratios`) at its own ratios. A
composed quantity's band is that quantity recomputed by the same code with the CommModel of each
edge (:class:`BandEdgeModel`), every decision held: the algorithm the point chose, the bucket
caps, the layout, and the compute (not uncertain in this band). So a sum of wire times scales
by ``r`` exactly, while an exposed time (``max(0, T - window)``, the bucket timeline, a pipeline
bubble whose micro-batch holds critical communication) is *recomputed*, not scaled: it may be 0
at both edges, or grow faster than ``r`` once the wire time outgrows its window. Every
collective at the same edge at once (fully correlated) gives the widest band of a sum. Only
for system presets: a calibrated profile or a hand-given link has no measured class.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from commcost.comm.collectives import Algorithm, CollectiveCost
from commcost.comm.model import CommModel
from commcost.comm.topology import Link, Topology, as_topology, place, pods_spanned
from commcost.core.errors import InputError
from commcost.hardware import load_preset_file
from commcost.comm.systems import system_group

__all__ = ["collective_band", "band_class", "band_ratios", "class_ratios", "scale_cost", "BandEdgeModel", "band_models",
           "composed_band"]

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

    from collections.abc import Callable

    from commcost.comm.collectives import Collective
    from typing import Literal, TypeVar

    Q = TypeVar("Q")


MIN_BAND_ROWS = 6
"""Fewest tuning rows of one collective in one class for it to get a band of its own."""


def band_ratios() -> dict[str, tuple[float, float]]:
    """``{class: (r_lo, r_hi)}`` from ``bands.json``; a key ``op/class`` (``all_to_all/multi_node``) is
    the band of one collective in that class, where the tuning tables hold enough of its rows."""
    table = load_preset_file("bands.json")
    out = {k: (float(v["low_ratio"]), float(v["high_ratio"])) for k, v in table.items() if not k.startswith("_")}
    for k, (lo, hi) in out.items():
        if not 0 < lo <= hi < math.inf:
            raise InputError(f"bands.json: class {k} needs 0 < low_ratio <= high_ratio, got {lo:g} and {hi:g}")
    return out


def band_class(cost: CollectiveCost, topology: Topology | Link, *, ranks_per_node: int | None = None) -> str:
    """The class of ``cost``'s group on ``topology``: ``one_node``, ``multi_node`` or ``multi_pod``.

    ``ranks_per_node``: the group's ranks on each node, as given to ``CommModel.cost`` (a strided
    group, such as data parallel under tensor parallelism, spans ``ceil(P / ranks_per_node)``
    nodes); None packs it onto full nodes. ``multi_pod`` is a group whose nodes span more than one
    pod of a three-tier topology (NVL72 beyond 8 racks), whatever share of each node it uses.
    """
    if not isinstance(cost, CollectiveCost):
        raise InputError(f"cost must be a CollectiveCost, got {type(cost).__name__}")
    topo = as_topology(topology, cost.gpus)
    nodes = place(cost.gpus, topo).nodes if ranks_per_node is None else math.ceil(cost.gpus / ranks_per_node)
    if nodes == 1:
        return "one_node"
    return "multi_pod" if pods_spanned(topo, nodes) > 1 else "multi_node"


def collective_band(cost: CollectiveCost, topology: Topology | Link | str) -> tuple[float, float]:
    """``(low_s, high_s)``: the range measured clusters of this class show around ``cost.total_s``.

    ``topology`` is the :class:`Topology` (or flat :class:`Link`) the cost was computed on, or a
    system preset's name (the group is then packed on full nodes of it). ``low = r_lo T`` and
    ``high = r_hi T`` with the class's ratios (module docstring); ``low <= T <= high`` whenever the
    ratios bracket 1, and both ends are monotone wherever T is.
    """
    if isinstance(topology, str):

        topology = system_group(topology, gpus=cost.gpus)[0]
    cls = band_class(cost, topology)
    r_lo, r_hi = class_ratios(cost.op.value, cls)
    return scale_cost(cost, r_lo).total_s, scale_cost(cost, r_hi).total_s


def class_ratios(op: str, cls: str) -> tuple[float, float]:
    """``(r_lo, r_hi)`` of collective ``op`` in class ``cls``: its own band (``op/cls`` in bands.json)
    where one was derived, else the class's (all-reduce) band."""
    ratios = band_ratios()
    return ratios.get(f"{op}/{cls}", ratios[cls])


def scale_cost(cost: CollectiveCost, ratio: float) -> CollectiveCost:
    """``cost`` on a cluster ``ratio`` times the prediction: both terms times ``ratio`` (so
    ``total_s`` is ``ratio T``), the algorithm and protocol kept."""
    return replace(cost, latency_s=ratio * cost.latency_s, bandwidth_s=ratio * cost.bandwidth_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class BandEdgeModel(CommModel):
    """One edge of the measured band as a CommModel: ``inner``'s cost of every collective (its own
    choice of algorithm), both terms times its group's class ratio (module docstring, "Composed
    quantities"). Hand it to the code that computed the point to get that quantity's edge."""

    inner: CommModel
    """The point's CommModel (a system preset's fabric)."""
    topology: Topology
    """The preset topology whose nodes class each group (:func:`band_class`)."""
    edge: Literal["low", "high"]
    """``low``: every collective times ``r_lo`` of its class; ``high``: times ``r_hi``."""
    kind = "band_edge"

    def __post_init__(self) -> None:
        if not isinstance(self.inner, CommModel):
            raise InputError(f"inner must be a CommModel, got {type(self.inner).__name__}")
        if not isinstance(self.topology, Topology):
            raise InputError(f"topology must be a Topology, got {type(self.topology).__name__}")
        if self.edge not in ("low", "high"):
            raise InputError(f"edge must be 'low' or 'high', got {self.edge!r}")

    def _scaled(self, c: CollectiveCost, ranks_per_node: int | None) -> CollectiveCost:
        r_lo, r_hi = class_ratios(c.op.value, band_class(c, self.topology, ranks_per_node=ranks_per_node))
        return scale_cost(c, r_lo if self.edge == "low" else r_hi)

    def cost(self, op: Collective | str, size_bytes: float, gpus: int, algorithm: Algorithm | str = "auto", *,
                 ranks_per_node: int | None = None) -> CollectiveCost:
        return self._scaled(self.inner.cost(op, size_bytes, gpus, algorithm, ranks_per_node=ranks_per_node),
                            ranks_per_node)

    def candidates(self, op: Collective | str, size_bytes: float, gpus: int, *,
                       ranks_per_node: int | None = None) -> dict[Algorithm, CollectiveCost]:
        return {a: self._scaled(c, ranks_per_node)
                for a, c in self.inner.candidates(op, size_bytes, gpus, ranks_per_node=ranks_per_node).items()}

    def max_gpus(self) -> int | None:
        return self.inner.max_gpus()

    def scaled(self) -> CommModel:
        inner = self.inner.scaled()
        return replace(self, inner=inner, topology=getattr(inner, "topology", self.topology))

    def scope_warning(self, op: Collective | str, gpus: int) -> str | None:
        return self.inner.scope_warning(op, gpus)

    def describe(self) -> str:
        return f"{self.inner.describe()}, at the {self.edge} edge of the measured band of its class"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "edge": self.edge, "inner": self.inner.to_dict()}


def band_models(comm: CommModel, topology: Topology) -> tuple[BandEdgeModel, BandEdgeModel]:
    """``(low, high)``: the two edges of the band of ``comm`` on the system preset ``topology``."""
    return (BandEdgeModel(inner=comm, topology=topology, edge="low"),
            BandEdgeModel(inner=comm, topology=topology, edge="high"))


def composed_band(price: Callable[[CommModel], Q], comm: CommModel, topology: Topology) -> tuple[Q, Q]:
    """``(price(low edge), price(high edge))``: a composed quantity's band by the one rule of the module
    docstring. ``price`` is the code that computed the point from ``comm``, with every decision it
    made (buckets, layout, compute) held; it may return one number or several."""
    low, high = band_models(comm, topology)
    return price(low), price(high)
